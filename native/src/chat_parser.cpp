#include "chat_parser.h"

#include <random>

#include "chat.h"

struct ChatParserState {
  common_chat_parser_params params;
  std::string text;
  common_chat_msg msg;
  std::vector<std::string> toolCallIds;
};

namespace {

// An id like llama-server's: 32 random letters and digits.
std::string randomId() {
  static thread_local std::mt19937 rng{std::random_device{}()};
  static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::uniform_int_distribution<int> pick(0, 61);
  std::string s(32, 'a');
  for (char& c : s) c = chars[pick(rng)];
  return s;
}

}  // namespace

Napi::Function ChatParser::Init(Napi::Env env) {
  return DefineClass(env, "ChatParser", {InstanceMethod<&ChatParser::Update>("update")});
}

ChatParser::ChatParser(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ChatParser>(info), state_(std::make_unique<ChatParserState>()) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "ChatParser: expected (paramsJson)");
  try {
    const common_json p = common_json::parse(info[0].As<Napi::String>().Utf8Value());
    auto& pp = state_->params;
    pp.format = static_cast<common_chat_format>(p.value("formatId", 0));
    pp.generation_prompt = p.value("generationPrompt", std::string());
    pp.reasoning_format = common_reasoning_format_from_name(p.value("reasoningFormat", std::string("deepseek")));
    pp.parse_tool_calls = p.value("parseToolCalls", false);
    pp.is_continuation = p.value("continuation", false);
    const std::string parser = p.value("parser", std::string());
    if (!parser.empty()) pp.parser.load(parser);
    if (pp.is_continuation) state_->msg = common_chat_parse("", true, pp);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("ChatParser: ") + e.what());
  }
}

ChatParser::~ChatParser() = default;

Napi::Value ChatParser::Update(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString()) throw Napi::TypeError::New(env, "update: expected (textAdded, isPartial)");
  ChatParserState& s = *state_;
  s.text += info[0].As<Napi::String>().Utf8Value();
  const bool partial = info[1].ToBoolean().Value();
  common_json out = common_json::object();
  try {
    common_chat_msg next = common_chat_parse(s.text, partial, s.params);
    common_json diffs = common_json::array();
    if (!next.empty()) {
      next.set_tool_call_ids(s.toolCallIds, randomId);
      for (const auto& d : common_chat_msg_diff::compute_diffs(s.msg, next)) {
        common_json j = common_json::object();
        if (!d.content_delta.empty()) j["content"] = d.content_delta;
        if (!d.reasoning_content_delta.empty()) j["reasoning"] = d.reasoning_content_delta;
        if (d.tool_call_index != std::string::npos) {
          j["toolIndex"] = static_cast<int>(d.tool_call_index);
          if (!d.tool_call_delta.id.empty()) j["id"] = d.tool_call_delta.id;
          if (!d.tool_call_delta.name.empty()) j["name"] = d.tool_call_delta.name;
          j["arguments"] = d.tool_call_delta.arguments;
        }
        diffs.push_back(j);
      }
      s.msg = std::move(next);
    }
    if (!partial) out["message"] = s.msg.to_json_oaicompat();
    out["diffs"] = diffs;
  } catch (const std::exception& e) {
    out["error"] = e.what();
    if (!partial) out["message"] = s.msg.to_json_oaicompat();
  }
  return Napi::String::New(env, out.dump());
}
