#include "chat_templates.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <regex>
#include <stdexcept>

#include "chat.h"

namespace {

// Markers for literal control text: "@@<nonce>_<index>_@@", made of characters that no Jinja
// filter a chat template uses (trim, upper, lower, tojson, escaping) changes.
struct Literals {
  std::string prefix;
  std::vector<std::string> texts;  // the control text each index stands for
};

void markControlText(common_json& v, const FastTokenizer& tok, Literals& lit) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    const ByteRanges found = tok.controlTexts(s);
    if (found.empty()) return;
    std::string out;
    size_t last = 0;
    for (const auto& [from, to] : found) {
      out.append(s, last, from - last);
      out += lit.prefix + std::to_string(lit.texts.size()) + "_@@";
      lit.texts.push_back(s.substr(from, to - from));
      last = to;
    }
    out.append(s, last, std::string::npos);
    v = out;
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); i++) markControlText(v.at(i), tok, lit);
  } else if (v.is_object()) {
    for (const auto& entry : v.items()) {
      if (entry.key() == "role" || entry.key() == "type") continue;
      markControlText(entry.value(), tok, lit);
    }
  }
}

// Puts the control text back where its marker landed; returns the byte ranges it occupies.
ByteRanges restoreControlText(std::string& prompt, const Literals& lit) {
  ByteRanges ranges;
  if (lit.texts.empty()) return ranges;
  std::string out;
  out.reserve(prompt.size());
  size_t last = 0;
  for (size_t p = prompt.find(lit.prefix); p != std::string::npos; p = prompt.find(lit.prefix, last)) {
    size_t q = p + lit.prefix.size();
    size_t index = 0;
    const size_t digits = q;
    while (q < prompt.size() && prompt[q] >= '0' && prompt[q] <= '9') index = index * 10 + static_cast<size_t>(prompt[q++] - '0');
    if (q == digits || prompt.compare(q, 3, "_@@") != 0 || index >= lit.texts.size())
      throw std::runtime_error("the chat template altered message text that spells a control token; it cannot be carried as text");
    out.append(prompt, last, p - last);
    ranges.push_back({out.size(), out.size() + lit.texts[index].size()});
    out += lit.texts[index];
    last = q + 3;
  }
  out.append(prompt, last, std::string::npos);
  prompt.swap(out);
  return ranges;
}

// A forced call (tool_choice "required" or a named function) starts at once: the root rule of
// llama.cpp's tool grammar lets free text come first (`until-N?`, Gemma 4's `message*
// scan-to-toolcall`), which a model may never leave; those items are dropped from the root rule,
// so the first token after the generation prompt (and an optional reasoning block) opens the call.
//
// With parallel_tool_calls false, a forced call is one call: llama.cpp's `tool-calls ::= (tool-call
// space)+` would let a model that never stops add calls until max_tokens.
std::string forceCall(std::string grammar, bool parallel) {
  if (!parallel) grammar = std::regex_replace(grammar, std::regex(R"(\ntool-calls ::= \(tool-call space\)\+\n)"), "\ntool-calls ::= tool-call space\n");
  static const std::regex item(R"(\s(until-[0-9]+\?|message\*|scan-to-toolcall)(?=\s|$))");
  size_t at = grammar.rfind("\nroot ::= ");
  at = at == std::string::npos ? (grammar.compare(0, 9, "root ::= ") == 0 ? 0 : std::string::npos) : at + 1;
  if (at == std::string::npos) return grammar;
  size_t end = grammar.find('\n', at);
  if (end == std::string::npos) end = grammar.size();
  return grammar.substr(0, at) + std::regex_replace(grammar.substr(at, end - at), item, "") + grammar.substr(end);
}

}  // namespace

void ChatTemplates::Deleter::operator()(common_chat_templates* t) const { common_chat_templates_free(t); }

ChatTemplates::ChatTemplates(const llama_model* model, const FastTokenizer* tokenizer, const std::string& overrideSrc)
    : tmpls_(common_chat_templates_init(model, overrideSrc).release()), tokenizer_(tokenizer) {
  // As llama-server decides it: thinking is on by default when the template supports it.
  supportsThinking_ = common_chat_templates_support_enable_thinking(tmpls_.get());
  if (!overrideSrc.empty()) source_ = "override";
  else if (common_chat_templates_was_explicit(tmpls_.get())) source_ = "gguf";
  else source_ = "chatml (none in GGUF)";
}

ChatTemplates::~ChatTemplates() = default;

std::string ChatTemplates::infoJson() const {
  common_json caps = common_json::object();
  for (const auto& [k, v] : common_chat_templates_get_caps(tmpls_.get())) caps[k] = v;
  common_json o = common_json::object();
  o["source"] = source_;
  o["toolUseTemplate"] = !common_chat_templates_source(tmpls_.get(), "tool_use").empty();
  o["supportsThinking"] = supportsThinking_;
  o["caps"] = caps;
  o["template"] = common_chat_templates_source(tmpls_.get());
  return o.dump();
}

ChatRendered ChatTemplates::render(const std::string& requestJson, bool literalControlText) const {
  common_json body = common_json::parse(requestJson);
  Literals lit;
  if (literalControlText) {
    // A prefix found nowhere in the request, so every one in the prompt is a marker we placed.
    for (unsigned k = 0;; k++) {
      lit.prefix = "@@" + std::to_string(k) + "_";
      if (requestJson.find(lit.prefix) == std::string::npos && common_chat_templates_source(tmpls_.get()).find(lit.prefix) == std::string::npos) break;
    }
    if (body.contains("messages")) markControlText(body.at("messages"), *tokenizer_, lit);
    if (body.contains("tools")) markControlText(body.at("tools"), *tokenizer_, lit);
  }
  const auto caps = common_chat_templates_get_caps(tmpls_.get());
  common_chat_templates_inputs inputs;
  inputs.messages = common_chat_msgs_parse_oaicompat(body.at("messages"));
  if (body.contains("tools") && body.at("tools").is_array()) inputs.tools = common_chat_tools_parse_oaicompat(body.at("tools"));
  inputs.tool_choice = common_chat_tool_choice_parse_oaicompat(body.value("tool_choice", std::string("auto")));
  auto par = caps.find("supports_parallel_tool_calls");
  inputs.parallel_tool_calls = body.value("parallel_tool_calls", par != caps.end() && par->second);
  inputs.add_generation_prompt = true;
  // A trailing assistant message is continued, as llama-server's prefill_assistant does.
  if (!inputs.messages.empty() && inputs.messages.back().role == "assistant") {
    if (inputs.messages.size() >= 2 && inputs.messages[inputs.messages.size() - 2].role == "assistant")
      throw std::invalid_argument("Cannot have 2 or more assistant messages at the end of the list.");
    if (!inputs.messages.back().tool_calls.empty()) throw std::invalid_argument("Cannot continue an assistant message that contains tool calls.");
    inputs.continue_final_message = COMMON_CHAT_CONTINUATION_AUTO;
    inputs.add_generation_prompt = false;
  }
  inputs.reasoning_format = common_reasoning_format_from_name(body.value("reasoning_format", std::string("deepseek")));
  // Seconds since the epoch, handed to llama.cpp's inputs.now. At the vendored commit llama.cpp does
  // not read it: strftime_now, `datetime` and `date_string` come from the wall clock, in llama-server
  // as here, so the fixture test compares a recorded date as today's (chat-fixtures.test.ts).
  if (body.contains("now")) inputs.now = std::chrono::system_clock::time_point(std::chrono::seconds(body.value("now", static_cast<int64_t>(0))));
  inputs.enable_thinking = supportsThinking_;
  // llama-server's default (common/arg.cpp): earlier turns keep their reasoning; a request may say otherwise.
  inputs.chat_template_kwargs["preserve_reasoning"] = "true";
  if (body.contains("chat_template_kwargs")) {
    for (const auto& entry : body.at("chat_template_kwargs").items()) inputs.chat_template_kwargs[entry.key()] = entry.value().dump();
  }
  auto et = inputs.chat_template_kwargs.find("enable_thinking");
  if (et != inputs.chat_template_kwargs.end()) {
    if (et->second == "true") inputs.enable_thinking = true;
    else if (et->second == "false") inputs.enable_thinking = false;
    else throw std::invalid_argument("chat_template_kwargs.enable_thinking must be a boolean");
  }
  const std::string effort = body.value("reasoning_effort", std::string(""));
  if (effort == "none") {
    inputs.enable_thinking = false;
    inputs.chat_template_kwargs.erase("reasoning_effort");
  } else if (!effort.empty()) {
    inputs.chat_template_kwargs["reasoning_effort"] = common_json::make(effort).dump();
  }

  common_chat_params p = common_chat_templates_apply(tmpls_.get(), inputs);
  if (inputs.tool_choice == COMMON_CHAT_TOOL_CHOICE_REQUIRED && !inputs.tools.empty()) {
    if (p.grammar.empty()) throw std::invalid_argument("this model's chat template has no tool-call format, so tool_choice \"required\" (or a named function) cannot be enforced");
    p.grammar = forceCall(p.grammar, inputs.parallel_tool_calls);
  }
  ChatRendered r;
  r.literal = restoreControlText(p.prompt, lit);
  r.prompt = std::move(p.prompt);
  common_json out = common_json::object();
  out["format"] = common_chat_format_name(p.format);
  out["formatId"] = static_cast<int>(p.format);
  out["grammar"] = p.grammar;
  out["grammarLazy"] = p.grammar_lazy;
  // What the sampler needs, resolved as llama-server resolves it (server-schema.cpp, common/sampling.cpp):
  // preserved tokens that are one token; a trigger word that is one preserved token becomes a
  // token trigger, other words a regex; a grammar that is not lazy first accepts the generation
  // prompt's tokens (the template put them in the prompt already).
  const llama_vocab* vocab = tokenizer_->vocab();
  std::vector<llama_token> preservedIds;
  common_json preserved = common_json::array();
  for (const auto& t : p.preserved_tokens) {
    const auto ids = common_tokenize(vocab, t, false, true);
    if (ids.size() == 1) {
      preservedIds.push_back(ids[0]);
      preserved.push_back(common_json::make(static_cast<int>(ids[0])));
    }
  }
  common_json patterns = common_json::array();
  common_json tokens = common_json::array();
  for (const auto& t : p.grammar_triggers) {
    switch (t.type) {
      case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: {
        const auto ids = common_tokenize(vocab, t.value, false, true);
        if (ids.size() == 1 && std::find(preservedIds.begin(), preservedIds.end(), ids[0]) != preservedIds.end())
          tokens.push_back(common_json::make(static_cast<int>(ids[0])));
        else
          patterns.push_back(common_json::make(regex_escape(t.value)));
        break;
      }
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN: patterns.push_back(common_json::make(t.value)); break;
      case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
        std::string anchored = "^$";
        if (!t.value.empty()) anchored = (t.value.front() != '^' ? "^" : "") + t.value + (t.value.back() != '$' ? "$" : "");
        patterns.push_back(common_json::make(anchored));
        break;
      }
      case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: tokens.push_back(common_json::make(static_cast<int>(t.token))); break;
    }
  }
  if (p.grammar_lazy && patterns.empty() && tokens.empty()) throw std::runtime_error("the chat format asked for a lazy grammar with no triggers");
  common_json prefill = common_json::array();
  if (!p.grammar.empty() && !p.grammar_lazy && !p.generation_prompt.empty()) {
    const auto ids = common_tokenize(vocab, p.generation_prompt, false, true);
    for (size_t i = 0; i < ids.size(); i++) {
      const std::string piece = common_token_to_piece(vocab, ids[i], true);
      if (i == 0 && !piece.empty() && isspace(static_cast<unsigned char>(piece[0])) && !isspace(static_cast<unsigned char>(p.generation_prompt[0]))) continue;
      prefill.push_back(common_json::make(static_cast<int>(ids[i])));
    }
  }
  out["triggerPatterns"] = patterns;
  out["triggerTokens"] = tokens;
  out["grammarPrefill"] = prefill;
  out["preservedTokens"] = preserved;
  common_json stops = common_json::array();
  for (const auto& s : p.additional_stops) stops.push_back(common_json::make(s));
  out["additionalStops"] = stops;
  out["generationPrompt"] = p.generation_prompt;
  out["parser"] = p.parser;
  out["supportsThinking"] = p.supports_thinking;
  out["thinkingStartTag"] = p.thinking_start_tag;
  out["reasoningFormat"] = common_reasoning_format_name(inputs.reasoning_format);
  out["continuation"] = inputs.continue_final_message != COMMON_CHAT_CONTINUATION_NONE;
  out["parseToolCalls"] = !inputs.tools.empty() && inputs.tool_choice != COMMON_CHAT_TOOL_CHOICE_NONE;
  r.paramsJson = out.dump();
  return r;
}
