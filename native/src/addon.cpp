// headroom_llama: a thin N-API addon over llama.cpp's C API (batched decode, native sampling,
// llama_memory_* sequence ops, tokenizer, chat template). Policy lives in TypeScript.
#include <napi.h>

#include "context.h"

Napi::Object InitAll(Napi::Env env, Napi::Object exports) {
  exports.Set("HeadroomLlama", HeadroomLlama::Init(env));
  exports.Set("abiVersion", Napi::Number::New(env, 8));
  return exports;
}

NODE_API_MODULE(headroom_llama, InitAll)
