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

DecodeWorker::DecodeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef,
                           std::vector<int32_t> tokens, std::vector<int32_t> pos, std::vector<int32_t> seq,
                           std::vector<uint8_t> sample)
    : Napi::AsyncWorker(env),
      owner_(owner),
      ownerRef_(std::move(ownerRef)),
      deferred_(Napi::Promise::Deferred::New(env)),
      tokens_(std::move(tokens)),
      pos_(std::move(pos)),
      seq_(std::move(seq)),
      sample_(std::move(sample)) {}

void DecodeWorker::Execute() {
  const auto t0 = std::chrono::steady_clock::now();
  llama_batch& b = owner_->batch();
  const int32_t n = static_cast<int32_t>(tokens_.size());
  for (int32_t i = 0; i < n; i++) {
    b.token[i] = tokens_[i];
    b.pos[i] = pos_[i];
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = seq_[i];
    b.logits[i] = sample_[i] ? 1 : 0;
  }
  b.n_tokens = n;

  const auto td = std::chrono::steady_clock::now();
  status_ = llama_decode(owner_->ctx(), b);
  decodeUs_ = usSince(td);

  if (status_ == 0) {
    const auto ts = std::chrono::steady_clock::now();
    const int32_t nVocab = llama_vocab_n_tokens(owner_->vocab());
    try {
      for (int32_t i = 0; i < n; i++) {
        if (!sample_[i]) continue;
        llama_sampler* s = owner_->samplerFor(seq_[i]);
        const llama_token tok = llama_sampler_sample(s, owner_->ctx(), i);
        sampled_.push_back(tok);
        const int32_t k = owner_->logprobsFor(seq_[i]);
        if (k < 0) {
          chosenLogprob_.push_back(std::numeric_limits<float>::quiet_NaN());
          numTop_.push_back(0);
          continue;
        }
        const float* logits = llama_get_logits_ith(owner_->ctx(), i);
        const double lse = logSumExp(logits, nVocab);
        chosenLogprob_.push_back(static_cast<float>(logits[tok] - lse));
        const auto top = topK(logits, nVocab, k);
        numTop_.push_back(static_cast<int32_t>(top.size()));
        for (const auto& [logit, id] : top) {
          topIds_.push_back(id);
          topLogprobs_.push_back(static_cast<float>(logit - lse));
        }
      }
    } catch (const std::exception& e) {
      status_ = 3;
      sampleError_ = e.what();
    }
    sampleUs_ = usSince(ts);
  }
  totalUs_ = usSince(t0);
}

void DecodeWorker::OnOK() {
  Napi::Env env = Env();
  owner_->setBusy(false);
  Napi::Object out = Napi::Object::New(env);
  out.Set("status", Napi::Number::New(env, status_));
  Napi::Int32Array sampled = Napi::Int32Array::New(env, sampled_.size());
  for (size_t i = 0; i < sampled_.size(); i++) sampled[i] = sampled_[i];
  out.Set("sampled", sampled);
  Napi::Float32Array chosen = Napi::Float32Array::New(env, chosenLogprob_.size());
  for (size_t i = 0; i < chosenLogprob_.size(); i++) chosen[i] = chosenLogprob_[i];
  out.Set("chosenLogprob", chosen);
  Napi::Int32Array numTop = Napi::Int32Array::New(env, numTop_.size());
  for (size_t i = 0; i < numTop_.size(); i++) numTop[i] = numTop_[i];
  out.Set("numTop", numTop);
  Napi::Int32Array topIds = Napi::Int32Array::New(env, topIds_.size());
  for (size_t i = 0; i < topIds_.size(); i++) topIds[i] = topIds_[i];
  out.Set("topIds", topIds);
  Napi::Float32Array topLogprobs = Napi::Float32Array::New(env, topLogprobs_.size());
  for (size_t i = 0; i < topLogprobs_.size(); i++) topLogprobs[i] = topLogprobs_[i];
  out.Set("topLogprobs", topLogprobs);
  if (!sampleError_.empty()) out.Set("message", Napi::String::New(env, sampleError_));
  out.Set("decodeUs", Napi::Number::New(env, decodeUs_));
  out.Set("sampleUs", Napi::Number::New(env, sampleUs_));
  out.Set("workerUs", Napi::Number::New(env, totalUs_));
  deferred_.Resolve(out);
}

void DecodeWorker::OnError(const Napi::Error& e) {
  owner_->setBusy(false);
  deferred_.Reject(e.Value());
}
