#include "tokenize_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "context.h"
#include "fast_tokenizer.h"
#include "llama.h"

namespace {

size_t countOf(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) n++;
  return n;
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  out.reserve(s.size());
  size_t last = 0;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, last)) {
    out.append(s, last, p - last);
    out += to;
    last = p + from.size();
  }
  out.append(s, last, std::string::npos);
  s.swap(out);
}

}  // namespace

TokenizeWorker::TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok,
                               std::string text, bool addSpecial)
    : Napi::AsyncWorker(env),
      owner_(owner),
      ownerRef_(std::move(ownerRef)),
      deferred_(Napi::Promise::Deferred::New(env)),
      tok_(tok),
      chat_(false),
      text_(std::move(text)),
      addSpecial_(addSpecial) {}

TokenizeWorker::TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok,
                               std::vector<std::string> roles, std::vector<std::string> contents, std::string tmpl, bool addSpecial)
    : Napi::AsyncWorker(env),
      owner_(owner),
      ownerRef_(std::move(ownerRef)),
      deferred_(Napi::Promise::Deferred::New(env)),
      tok_(tok),
      chat_(true),
      roles_(std::move(roles)),
      contents_(std::move(contents)),
      tmpl_(std::move(tmpl)),
      addSpecial_(addSpecial) {}

bool TokenizeWorker::applyTemplate() {
  size_t numNul = 0;
  for (const std::string& c : contents_) numNul += std::count(c.begin(), c.end(), '\0');
  std::string marker;
  if (numNul > 0) {
    // A marker that occurs in no content, role or template, so every occurrence after templating is ours.
    for (unsigned k = 0;; k++) {
      marker = "\x1f\x1eheadroom-nul-" + std::to_string(k) + "\x1e\x1f";
      bool clash = tmpl_.find(marker) != std::string::npos;
      for (size_t i = 0; !clash && i < contents_.size(); i++)
        clash = contents_[i].find(marker) != std::string::npos || roles_[i].find(marker) != std::string::npos;
      if (!clash) break;
    }
    for (std::string& c : contents_) replaceAll(c, std::string(1, '\0'), marker);
  }
  std::vector<llama_chat_message> chat;
  size_t total = 0;
  for (size_t i = 0; i < roles_.size(); i++) {
    chat.push_back({roles_[i].c_str(), contents_[i].c_str()});
    total += roles_[i].size() + contents_[i].size();
  }
  std::vector<char> buf(total * 2 + 256);
  int32_t n = llama_chat_apply_template(tmpl_.c_str(), chat.data(), chat.size(), true, buf.data(), static_cast<int32_t>(buf.size()));
  if (n > static_cast<int32_t>(buf.size())) {
    buf.resize(static_cast<size_t>(n));
    n = llama_chat_apply_template(tmpl_.c_str(), chat.data(), chat.size(), true, buf.data(), static_cast<int32_t>(buf.size()));
  }
  if (n < 0) {
    status_ = 1;
    return false;
  }
  text_.assign(buf.data(), static_cast<size_t>(n));
  if (numNul > 0) {
    if (countOf(text_, marker) != numNul) {
      status_ = 2;
      return false;
    }
    replaceAll(text_, marker, std::string(1, '\0'));
  }
  return true;
}

void TokenizeWorker::Execute() {
  const auto t0 = std::chrono::steady_clock::now();
  if (chat_ && !applyTemplate()) return;
  tokens_ = tok_->tokenize(text_, addSpecial_);
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
  deferred_.Resolve(out);
}

void TokenizeWorker::OnError(const Napi::Error& e) {
  owner_->endTokenize();
  deferred_.Reject(e.Value());
}
