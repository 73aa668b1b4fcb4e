#include "decode_worker.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "context.h"

namespace {
double usSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

// log(sum(exp(logits))) without overflow: one pass for the max, one for the sum.
double logSumExp(const float* logits, int32_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n; i++) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n; i++) sum += std::exp(static_cast<double>(logits[i] - mx));
  return static_cast<double>(mx) + std::log(sum);
}

// The k largest logits as (id, logit), largest first (ties: the smaller id first): a min-heap of k.
std::vector<std::pair<float, int32_t>> topK(const float* logits, int32_t n, int32_t k) {
  auto worse = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  std::vector<std::pair<float, int32_t>> heap;
  heap.reserve(static_cast<size_t>(k) + 1);
  for (int32_t i = 0; i < n && k > 0; i++) {
    if (static_cast<int32_t>(heap.size()) < k) {
      heap.emplace_back(logits[i], i);
      std::push_heap(heap.begin(), heap.end(), worse);
    } else if (logits[i] > heap.front().first) {
      std::pop_heap(heap.begin(), heap.end(), worse);
      heap.back() = {logits[i], i};
      std::push_heap(heap.begin(), heap.end(), worse);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), worse);
  return heap;
}
}  // namespace

void DecodeStep::Run(HeadroomLlama* owner) {
  const auto t0 = std::chrono::steady_clock::now();
  queueUs = std::chrono::duration<double, std::micro>(t0 - created).count();
  llama_batch& b = owner->batch();
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t nVocab = llama_vocab_n_tokens(owner->vocab());
  const size_t numSegments = segmentEnds.empty() ? 1 : segmentEnds.size();
  int32_t s0 = 0;
  for (size_t seg = 0; seg < numSegments; seg++) {
    const int32_t s1 = segmentEnds.empty() ? n : segmentEnds[seg];
    for (int32_t i = s0; i < s1; i++) {
      b.token[i - s0] = tokens[i];
      b.pos[i - s0] = pos[i];
      b.n_seq_id[i - s0] = 1;
      b.seq_id[i - s0][0] = seq[i];
      b.logits[i - s0] = sample[i] ? 1 : 0;
    }
    b.n_tokens = s1 - s0;

    const auto td = std::chrono::steady_clock::now();
    owner->pinCaller();
    status = llama_decode(owner->ctx(), b);
    owner->unpinCaller();
    decodeUs += usSince(td);
    numCalls++;
    if (status != 0) {
      forgetRows(owner, s0);
      break;
    }

    const auto ts = std::chrono::steady_clock::now();
    try {
      for (int32_t i = s0; i < s1; i++) {
        if (!sample[i]) continue;
        llama_sampler* s = owner->samplerFor(seq[i]);
        const llama_token tok = llama_sampler_sample(s, owner->ctx(), i - s0);
        sampled.push_back(tok);
        const int32_t k = owner->logprobsFor(seq[i]);
        if (k < 0) {
          chosenLogprob.push_back(std::numeric_limits<float>::quiet_NaN());
          numTop.push_back(0);
          continue;
        }
        const float* logits = llama_get_logits_ith(owner->ctx(), i - s0);
        const double lse = logSumExp(logits, nVocab);
        chosenLogprob.push_back(static_cast<float>(logits[tok] - lse));
        const auto top = topK(logits, nVocab, k);
        numTop.push_back(static_cast<int32_t>(top.size()));
        for (const auto& [logit, id] : top) {
          topIds.push_back(id);
          topLogprobs.push_back(static_cast<float>(logit - lse));
        }
      }
    } catch (const std::exception& e) {
      status = 3;
      sampleError = e.what();
    }
    sampleUs += usSince(ts);
    if (status != 0) break;
    s0 = s1;
  }
  totalUs = usSince(t0);
  ended = std::chrono::steady_clock::now();
}

// A later segment failed: remove the cells rows [0, end) wrote, one range per run of rows of one
// sequence at consecutive positions (how the runner lays out an item).
void DecodeStep::forgetRows(HeadroomLlama* owner, int32_t end) {
  llama_memory_t mem = llama_get_memory(owner->ctx());
  int32_t i = 0;
  while (i < end) {
    int32_t j = i + 1;
    while (j < end && seq[j] == seq[i] && pos[j] == pos[j - 1] + 1) j++;
    llama_memory_seq_rm(mem, seq[i], pos[i], pos[j - 1] + 1);
    i = j;
  }
}

namespace {
template <typename TA, typename T>
TA typedArray(Napi::Env env, const std::vector<T>& v) {
  TA a = TA::New(env, v.size());
  for (size_t i = 0; i < v.size(); i++) a[i] = v[i];
  return a;
}
}  // namespace

Napi::Object DecodeStep::ToJs(Napi::Env env) const {
  Napi::Object out = Napi::Object::New(env);
  out.Set("status", Napi::Number::New(env, status));
  out.Set("sampled", typedArray<Napi::Int32Array>(env, sampled));
  out.Set("chosenLogprob", typedArray<Napi::Float32Array>(env, chosenLogprob));
  out.Set("numTop", typedArray<Napi::Int32Array>(env, numTop));
  out.Set("topIds", typedArray<Napi::Int32Array>(env, topIds));
  out.Set("topLogprobs", typedArray<Napi::Float32Array>(env, topLogprobs));
  if (!sampleError.empty()) out.Set("message", Napi::String::New(env, sampleError));
  out.Set("numCalls", Napi::Number::New(env, numCalls));
  out.Set("decodeUs", Napi::Number::New(env, decodeUs));
  out.Set("sampleUs", Napi::Number::New(env, sampleUs));
  out.Set("workerUs", Napi::Number::New(env, totalUs));
  out.Set("queueUs", Napi::Number::New(env, queueUs));
  out.Set("returnUs", Napi::Number::New(env, returnUs));
  return out;
}

DecodeWorker::DecodeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, DecodeStep step)
    : Napi::AsyncWorker(env),
      owner_(owner),
      ownerRef_(std::move(ownerRef)),
      deferred_(Napi::Promise::Deferred::New(env)),
      step_(std::move(step)) {}

void DecodeWorker::Execute() { step_.Run(owner_); }

void DecodeWorker::OnOK() {
  step_.returnUs = usSince(step_.ended);
  owner_->setBusy(false);
  deferred_.Resolve(step_.ToJs(Env()));
}

void DecodeWorker::OnError(const Napi::Error& e) {
  owner_->setBusy(false);
  deferred_.Reject(e.Value());
}
