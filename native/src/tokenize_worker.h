// TokenizeWorker: chat templating and tokenization off the JS thread (an N-API AsyncWorker), so a
// large prompt never stalls the event loop. Runs on the libuv pool beside DecodeWorker; the JS
// runner bounds how many run at once so a decode always finds a pool thread.
//
// The chat template gets the exact bytes of every message: llama_chat_apply_template takes C
// strings, so each NUL is swapped for a marker found in no input, and swapped back after
// templating. If the rendered text does not hold exactly one marker per NUL (a template that
// repeats or drops content), the result is status 2 and the caller refuses the request instead
// of guessing.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

class HeadroomLlama;
class FastTokenizer;

class TokenizeWorker : public Napi::AsyncWorker {
 public:
  // Plain text: `text` tokenized. Chat: `roles`/`contents` templated with `tmpl`, then tokenized.
  TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok, std::string text,
                 bool addSpecial);
  TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok,
                 std::vector<std::string> roles, std::vector<std::string> contents, std::string tmpl, bool addSpecial);
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  bool applyTemplate();

  HeadroomLlama* owner_;
  Napi::ObjectReference ownerRef_;  // keeps the JS object (and the vocabulary) alive while we run
  Napi::Promise::Deferred deferred_;
  const FastTokenizer* tok_;
  bool chat_;
  std::string text_;
  std::vector<std::string> roles_, contents_;
  std::string tmpl_;
  bool addSpecial_;
  std::vector<int32_t> tokens_;
  int32_t status_ = 0;  // 0 ok, 1 template not recognised, 2 NUL bytes could not be carried through the template
  double workerUs_ = 0;
};
