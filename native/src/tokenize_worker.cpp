#include "tokenize_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "chat_templates.h"
#include "context.h"
#include "fast_tokenizer.h"
#include "llama.h"

TokenizeWorker::TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok,
                               std::string text, bool addSpecial, bool asText)
    : Napi::AsyncWorker(env),
      owner_(owner),
      ownerRef_(std::move(ownerRef)),
      deferred_(Napi::Promise::Deferred::New(env)),
      tok_(tok),
      text_(std::move(text)),
      addSpecial_(addSpecial),
      literalControlText_(asText) {}

TokenizeWorker::TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok,
                               const ChatTemplates* chat, std::string requestJson, bool literalControlText)
    : Napi::AsyncWorker(env),
      owner_(owner),
      ownerRef_(std::move(ownerRef)),
      deferred_(Napi::Promise::Deferred::New(env)),
      tok_(tok),
      chat_(chat),
      text_(std::move(requestJson)),
      addSpecial_(true),
      literalControlText_(literalControlText) {}

void TokenizeWorker::Execute() {
  const auto t0 = std::chrono::steady_clock::now();
  if (chat_ == nullptr) {
    const ByteRanges all{{0, text_.size()}};
    tokens_ = tok_->tokenize(text_, addSpecial_, literalControlText_ ? &all : nullptr);
  } else {
    try {
      // llama-server tokenizes the rendered prompt with BOS as the vocabulary asks (the chat code
      // strips a BOS the template wrote itself) and special tokens parsed.
      ChatRendered r = chat_->render(text_, literalControlText_);
      params_ = std::move(r.paramsJson);
      tokens_ = tok_->tokenize(r.prompt, addSpecial_, &r.literal);
    } catch (const std::invalid_argument& e) {
      status_ = 1;
      error_ = e.what();
    } catch (const std::exception& e) {
      status_ = 2;
      error_ = e.what();
    }
  }
  workerUs_ = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

void TokenizeWorker::OnOK() {
  Napi::Env env = Env();
  owner_->endTokenize();
  Napi::Object out = Napi::Object::New(env);
  out.Set("status", Napi::Number::New(env, status_));
  Napi::Int32Array arr = Napi::Int32Array::New(env, tokens_.size());
  if (!tokens_.empty()) std::memcpy(arr.Data(), tokens_.data(), tokens_.size() * sizeof(int32_t));
  out.Set("tokens", arr);
  out.Set("workerUs", Napi::Number::New(env, workerUs_));
  if (chat_ != nullptr) {
    out.Set("params", Napi::String::New(env, params_));
    out.Set("error", Napi::String::New(env, error_));
  }
  deferred_.Resolve(out);
}

void TokenizeWorker::OnError(const Napi::Error& e) {
  owner_->endTokenize();
  deferred_.Reject(e.Value());
}
