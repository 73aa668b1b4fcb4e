{
  "variables": {
    "llama_bins%": "<!(node -p \"process.env.HEADROOM_LLAMA_BINS || 'HEADROOM_LLAMA_BINS-unset-run-scripts/build-native.mjs'\")"
  },
  "targets": [
    {
      "target_name": "headroom_llama",
      "sources": ["src/addon.cpp", "src/context.cpp", "src/host_bytes.cpp", "src/decode_worker.cpp", "src/fast_tokenizer.cpp", "src/tokenize_worker.cpp"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "vendor/llama.cpp/include",
        "vendor/llama.cpp/ggml/include"
      ],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED", "NAPI_CPP_EXCEPTIONS"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "libraries": [
        "-L<(llama_bins)",
        "<!@(node -p \"process.env.HEADROOM_LLAMA_LIBS || '-l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so'\")",
        "-Wl,-rpath,<(llama_bins)"
      ]
    }
  ]
}
