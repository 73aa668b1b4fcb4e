// ChatParser: one response's output parsed as its chat format says (llama.cpp's common chat
// parser, the one llama-server runs): content, reasoning_content and tool calls, re-parsed as text
// arrives, with the differences since the last call (what a stream sends as deltas). Tool calls
// get ids that stay fixed across calls. JS-facing:
//
//   new ChatParser(paramsJson)            // ChatTemplates::render's paramsJson
//   parser.update(textAdded, isPartial)   // -> JSON {diffs, message (final call only), error?}
//
// A text that does not parse in the format gives {error} and no diffs; on the final call message
// is then what the last successful parse held.
//
// Owns no model state: usable on the JS thread while a decode runs.
#pragma once

#include <napi.h>

#include <memory>
#include <string>
#include <vector>

struct ChatParserState;

class ChatParser : public Napi::ObjectWrap<ChatParser> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit ChatParser(const Napi::CallbackInfo& info);
  ~ChatParser() override;

 private:
  Napi::Value Update(const Napi::CallbackInfo& info);
  std::unique_ptr<ChatParserState> state_;
};
