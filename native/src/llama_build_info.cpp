// llama.cpp's common library expects a generated build-info.cpp (CMake writes it from git); the
// addon links common's chat code without CMake, so these say which llama.cpp it is by the commit
// build-native.mjs passes in.
#include <cstdio>
#include <string>

#ifndef HEADROOM_LLAMA_COMMIT
#define HEADROOM_LLAMA_COMMIT "unknown"
#endif

int llama_build_number(void) { return 0; }
const char* llama_commit(void) { return HEADROOM_LLAMA_COMMIT; }
const char* llama_compiler(void) { return "headroom node-gyp"; }
const char* llama_build_target(void) { return "headroom_llama"; }
const char* llama_build_info(void) {
  static const std::string s = std::string("headroom-") + HEADROOM_LLAMA_COMMIT;
  return s.c_str();
}
void llama_print_build_info(const char* version, FILE* stream) { fprintf(stream, "version: %s (commit %s)\n", version, llama_commit()); }
