// FastTokenizer: llama_tokenize's exact output, in time linear in the input.
//
// Why it exists: llama.cpp v0.4.0's tokenizer is quadratic on two inputs a client controls
// (measured: 80,000 x "é中" took 2.0 s, twice that input 4x as long; 30,000 chat messages froze
// the server for 25 s):
// - the SPM session's byte fallback calls `output.reserve(output.size() + n)` per unknown
//   symbol, which defeats geometric growth: every non-ASCII character not in the vocabulary
//   reallocates and copies the whole output so far;
// - the special-token partition calls std::distance over a forward_list per match, so a prompt
//   with k special tokens costs O(k^2).
// This class repeats both steps with the same rules (special tokens longest first, lstrip/rstrip,
// SPM bigram merges by score then leftmost, byte fallback, a space prefix before every raw
// fragment when the vocabulary asks for one) on flat vectors. Vocabularies other than SPM, and
// an SPM vocabulary whose probe strings do not tokenize identically at load, go to
// llama_tokenize unchanged (`fast()` says which). test/engine/runner/llama/fast-tokenizer.test.ts
// checks equality with llama_tokenize on random text.
//
// Thread safety: immutable after construction; tokenize() may run on any thread at once.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "llama.h"

class FastTokenizer {
 public:
  explicit FastTokenizer(const llama_vocab* vocab);

  // addSpecial: BOS/EOS as the vocabulary asks; special tokens in the text are always parsed.
  std::vector<llama_token> tokenize(const std::string& text, bool addSpecial) const;
  // The fast path is in use (false: every call goes to llama_tokenize).
  bool fast() const { return fast_; }
  // Most bytes of input text one token can stand for (the longest rendered piece, special
  // tokens included): a text of B bytes has at least ceil(B / maxTokenBytes) tokens. 0 when no
  // such bound holds (special tokens that strip whitespace, a normalising tokenizer).
  size_t maxTokenBytes() const { return maxTokenBytes_; }

 private:
  struct Fragment {
    llama_token token;  // LLAMA_TOKEN_NULL for raw text
    size_t offset, length;
  };
  std::vector<Fragment> partition(const std::string& text) const;
  void spm(const std::string& text, std::vector<llama_token>& out) const;
  std::vector<llama_token> reference(const std::string& text, bool addSpecial) const;
  llama_token byteToken(unsigned char c) const;
  llama_token lookup(const std::string& s) const;

  const llama_vocab* vocab_;
  bool fast_ = false;
  bool spacePrefix_ = false;
  size_t maxTokenBytes_ = 1;
  std::unordered_map<std::string, llama_token> byText_;
  std::vector<llama_token> specials_;  // longest text first, as llama.cpp orders them
  std::vector<float> scores_;
};
