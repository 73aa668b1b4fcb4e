// SpecialTrie: the texts of a vocabulary's special tokens in a byte trie, so that finding the
// special token that starts at a position costs the length of the longest match, not one search
// per special token (Gemma's vocabularies have thousands). Immutable after construction; safe to
// read from any thread.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "llama.h"

class SpecialTrie {
 public:
  SpecialTrie() : nodes_(1) {}

  void add(std::string_view text, llama_token id) {
    if (text.empty()) return;
    int32_t n = 0;
    for (unsigned char c : text) {
      int32_t next = child(n, c);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(n)].children.push_back({c, next});
        nodes_.emplace_back();
      }
      n = next;
    }
    Node& leaf = nodes_[static_cast<size_t>(n)];
    if (leaf.token == LLAMA_TOKEN_NULL) leaf.token = id;  // the first one added wins a duplicate text
    maxLen_ = std::max(maxLen_, text.size());
  }

  // The longest special text starting at text[i] ({LLAMA_TOKEN_NULL, 0} when none).
  std::pair<llama_token, size_t> longestAt(std::string_view text, size_t i) const {
    std::pair<llama_token, size_t> best{LLAMA_TOKEN_NULL, 0};
    int32_t n = 0;
    for (size_t j = i; j < text.size(); j++) {
      n = child(n, static_cast<unsigned char>(text[j]));
      if (n < 0) break;
      const llama_token t = nodes_[static_cast<size_t>(n)].token;
      if (t != LLAMA_TOKEN_NULL) best = {t, j + 1 - i};
    }
    return best;
  }

  // Whether some special text of at least `minLen` bytes starts with `prefix`.
  bool hasExtension(std::string_view prefix, size_t minLen) const {
    int32_t n = 0;
    for (unsigned char c : prefix) {
      n = child(n, c);
      if (n < 0) return false;
    }
    // Depth-first below n: any token at depth >= minLen?
    std::vector<std::pair<int32_t, size_t>> stack{{n, prefix.size()}};
    while (!stack.empty()) {
      auto [at, depth] = stack.back();
      stack.pop_back();
      if (depth >= minLen && nodes_[static_cast<size_t>(at)].token != LLAMA_TOKEN_NULL) return true;
      for (const auto& [c, next] : nodes_[static_cast<size_t>(at)].children) stack.push_back({next, depth + 1});
    }
    return false;
  }

  bool empty() const { return nodes_.size() == 1; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    llama_token token = LLAMA_TOKEN_NULL;
  };

  int32_t child(int32_t n, unsigned char c) const {
    for (const auto& [b, next] : nodes_[static_cast<size_t>(n)].children)
      if (b == c) return next;
    return -1;
  }

  std::vector<Node> nodes_;
  size_t maxLen_ = 0;
};
