{
  "variables": {
    "llama_bins%": "<!(node -p \"process.env.HEADROOM_LLAMA_BINS || 'HEADROOM_LLAMA_BINS-unset-run-scripts/build-native.mjs'\")",
    "llama_commit%": "<!(node -p \"process.env.HEADROOM_LLAMA_COMMIT || 'unknown'\")"
  },
  "targets": [
    {
      "target_name": "llama_common",
      "type": "static_library",
      "sources": [
        "vendor/llama.cpp/common/chat.cpp",
        "vendor/llama.cpp/common/chat-auto-parser-generator.cpp",
        "vendor/llama.cpp/common/chat-auto-parser-helpers.cpp",
        "vendor/llama.cpp/common/chat-diff-analyzer.cpp",
        "vendor/llama.cpp/common/chat-peg-parser.cpp",
        "vendor/llama.cpp/common/peg-parser.cpp",
        "vendor/llama.cpp/common/json-schema-to-grammar.cpp",
        "vendor/llama.cpp/common/json.cpp",
        "vendor/llama.cpp/common/log.cpp",
        "vendor/llama.cpp/common/unicode.cpp",
        "vendor/llama.cpp/common/trie.cpp",
        "vendor/llama.cpp/common/common.cpp",
        "vendor/llama.cpp/common/sampling.cpp",
        "vendor/llama.cpp/common/speculative.cpp",
        "vendor/llama.cpp/common/fit.cpp",
        "vendor/llama.cpp/common/ngram-cache.cpp",
        "vendor/llama.cpp/common/ngram-map.cpp",
        "vendor/llama.cpp/common/ngram-mod.cpp",
        "vendor/llama.cpp/common/reasoning-budget.cpp",
        "<!@(node -p \"require('fs').readdirSync('vendor/llama.cpp/common/jinja').filter(f => f.endsWith('.cpp')).map(f => 'vendor/llama.cpp/common/jinja/' + f).join(' ')\")",
        "src/llama_build_info.cpp"
      ],
      "include_dirs": [
        "vendor/llama.cpp/common",
        "vendor/llama.cpp/vendor",
        "vendor/llama.cpp/include",
        "vendor/llama.cpp/ggml/include"
      ],
      "defines": ["HEADROOM_LLAMA_COMMIT=\"<(llama_commit)\""],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-fPIC", "-fexceptions", "-w"],
      "direct_dependent_settings": {
        "include_dirs": ["vendor/llama.cpp/common", "vendor/llama.cpp/vendor"]
      }
    },
    {
      "target_name": "headroom_llama",
      "dependencies": ["llama_common"],
      "sources": ["src/addon.cpp", "src/context.cpp", "src/host_bytes.cpp", "src/decode_worker.cpp", "src/fast_tokenizer.cpp", "src/tokenize_worker.cpp", "src/chat_templates.cpp", "src/chat_parser.cpp"],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "vendor/llama.cpp/include",
        "vendor/llama.cpp/ggml/include"
      ],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED", "NAPI_CPP_EXCEPTIONS"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unused-function"],
      "libraries": [
        "-L<(llama_bins)",
        "<!@(node -p \"process.env.HEADROOM_LLAMA_LIBS || '-l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so'\")",
        "-Wl,-rpath,<(llama_bins)"
      ]
    }
  ]
}
