#include "decode_worker.h"

#include <chrono>

#include "context.h"

namespace {
double usSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
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
    for (int32_t i = 0; i < n; i++) {
      if (!sample_[i]) continue;
      llama_sampler* s = owner_->samplerFor(seq_[i]);
      const llama_token tok = llama_sampler_sample(s, owner_->ctx(), i);
      sampled_.push_back(tok);
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
  out.Set("decodeUs", Napi::Number::New(env, decodeUs_));
  out.Set("sampleUs", Napi::Number::New(env, sampleUs_));
  out.Set("workerUs", Napi::Number::New(env, totalUs_));
  deferred_.Resolve(out);
}

void DecodeWorker::OnError(const Napi::Error& e) {
  owner_->setBusy(false);
  deferred_.Reject(e.Value());
}
