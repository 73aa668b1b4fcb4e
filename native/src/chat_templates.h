// ChatTemplates: the model's chat template and tool-call format through llama.cpp's own common chat
// code (common/chat.h, linked into the addon as a static library): the GGUF's Jinja template
// rendered by llama.cpp's Jinja engine with the inputs llama-server --jinja gives it (tools,
// tool_choice, the date, enable_thinking, a leading BOS stripped when the tokenizer adds one), and
// what the format needs at sampling and parsing time (a tool-call grammar, lazy or not, its
// triggers, extra stops, the generation prompt, the output parser).
//
// No forged turns: with `literalControlText`, every control-token text inside a message or tool
// definition (e.g. "<|im_end|>" typed by a user) is swapped for a marker before rendering and put
// back after; the byte ranges it occupies in the prompt are returned, and the tokenizer matches no
// special token inside them, so only the template's own markup becomes control tokens.
//
// Thread safety: immutable after construction; render() may run on any thread at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fast_tokenizer.h"
#include "llama.h"

struct common_chat_templates;

struct ChatRendered {
  std::string prompt;
  ByteRanges literal;       // message text that spells a control token, tokenized as text
  std::string paramsJson;   // what sampling and parsing need (see ChatTemplates::render)
};

class ChatTemplates {
 public:
  // overrideSrc: a Jinja template to use instead of the GGUF's ("" = the GGUF's, else ChatML).
  // Throws std::exception when the template does not parse.
  ChatTemplates(const llama_model* model, const FastTokenizer* tokenizer, const std::string& overrideSrc);
  ~ChatTemplates();

  // requestJson: {messages, tools?, tool_choice?, parallel_tool_calls?, chat_template_kwargs?,
  // reasoning_format?, reasoning_effort?, now? (epoch seconds: the date templates print)} in
  // OpenAI's shapes. Throws std::invalid_argument for a
  // request the chat code refuses (the caller's 400) and std::runtime_error when the template
  // fails to render (500).
  ChatRendered render(const std::string& requestJson, bool literalControlText) const;

  // {source, explicit, toolUseTemplate, supportsThinking, caps: {...}} as JSON.
  std::string infoJson() const;

 private:
  struct Deleter {
    void operator()(common_chat_templates* t) const;
  };
  std::unique_ptr<common_chat_templates, Deleter> tmpls_;
  const FastTokenizer* tokenizer_;
  bool supportsThinking_ = false;
  std::string source_;
};
