// TokenizeWorker: chat templating and tokenization off the JS thread (an N-API AsyncWorker), so a
// large prompt never stalls the event loop. Runs on the libuv pool beside DecodeWorker; the JS
// runner bounds how many run at once so a decode always finds a pool thread.
//
// Chat: the request is rendered by ChatTemplates (llama.cpp's chat code; std::string throughout,
// so NUL bytes in messages are carried exactly), then tokenized with the literal ranges it returns.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

class HeadroomLlama;
class FastTokenizer;
class ChatTemplates;

class TokenizeWorker : public Napi::AsyncWorker {
 public:
  // Plain text: `text` tokenized. Chat: the request (JSON) rendered by `chat`, then tokenized.
  TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok, std::string text,
                 bool addSpecial, bool asText);
  TokenizeWorker(Napi::Env env, HeadroomLlama* owner, Napi::ObjectReference ownerRef, const FastTokenizer* tok,
                 const ChatTemplates* chat, std::string requestJson, bool literalControlText);
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override;
  void OnOK() override;
  void OnError(const Napi::Error& e) override;

 private:
  HeadroomLlama* owner_;
  Napi::ObjectReference ownerRef_;  // keeps the JS object (and the vocabulary) alive while we run
  Napi::Promise::Deferred deferred_;
  const FastTokenizer* tok_;
  const ChatTemplates* chat_ = nullptr;
  std::string text_;  // the text, or the chat request
  bool addSpecial_;
  bool literalControlText_ = false;
  std::vector<int32_t> tokens_;
  std::string params_, error_;
  int32_t status_ = 0;  // 0 ok, 1 a request the chat code refuses, 2 the template failed
  double workerUs_ = 0;
};
