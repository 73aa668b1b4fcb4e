// headroom_llama: a thin N-API addon over llama.cpp's C API (batched decode, native sampling,
// llama_memory_* sequence ops, tokenizer, and llama.cpp's own chat code: templates, tool-call grammars and parsers). Policy lives in TypeScript.
#include <napi.h>

#include "chat_parser.h"
#include "context.h"

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("HeadroomLlama", HeadroomLlama::Init(env));
  exports.Set("ChatParser", ChatParser::Init(env));
  exports.Set("abiVersion", Napi::Number::New(env, 9));
  return exports;
}

NODE_API_MODULE(headroom_llama, InitAll)
