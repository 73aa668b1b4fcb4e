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
// fragment when the vocabulary asks for one) on flat vectors. The special-token split is one pass
// over a trie of the special texts (leftmost, longest), which equals llama.cpp's longest-first
// passes unless two special texts can overlap (then the per-token passes are used, still without
// the quadratic list walk). Raw fragments go to this class's SPM merge for SPM vocabularies and to
// llama_tokenize one fragment at a time (special parsing off) for the others, which is linear in
// the number of fragments; a vocabulary whose probe strings do not tokenize identically at load
// goes to llama_tokenize unchanged (`fast()` says which). test/engine/runner/llama/
// fast-tokenizer.test.ts checks equality with llama_tokenize on random text.
//
// Literal ranges: byte ranges of the input where no special token may match (message text that
// spells a control token, api: no forged turns); raw fragments holding them are tokenized with
// special parsing off, as llama_tokenize(parse_special = false) tokenizes them.
//
// Thread safety: immutable after construction; tokenize() may run on any thread at once.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "llama.h"
#include "special_trie.h"

// Sorted, non-overlapping [from, to) byte ranges.
using ByteRanges = std::vector<std::pair<size_t, size_t>>;

class FastTokenizer {
 public:
  explicit FastTokenizer(const llama_vocab* vocab);

  // addSpecial: BOS/EOS as the vocabulary asks; special tokens in the text are parsed except
  // inside `literal` ranges.
  std::vector<llama_token> tokenize(const std::string& text, bool addSpecial, const ByteRanges* literal = nullptr) const;
  // The fast path is in use (false: every call without literal ranges goes to llama_tokenize).
  bool fast() const { return mode_ != Mode::Reference; }
  const llama_vocab* vocab() const { return vocab_; }
  // "spm", "per-fragment" or "llama_tokenize": how raw text is tokenized (the load log says it).
  const char* modeName() const;
  // The special-token split is one pass over the trie (false: one pass per special token).
  bool onePass() const { return onePass_; }
  // Leftmost-longest occurrences of control (and unknown) token texts in `text`: what a message
  // would smuggle in as markup.
  ByteRanges controlTexts(std::string_view text) const;
  // Most bytes of input text one token can stand for (the longest rendered piece, special
  // tokens included): a text of B bytes has at least ceil(B / maxTokenBytes) tokens. 0 when no
  // such bound holds (special tokens that strip whitespace, a normalising tokenizer).
  size_t maxTokenBytes() const { return maxTokenBytes_; }

 private:
  struct Fragment {
    llama_token token;  // LLAMA_TOKEN_NULL for raw text
    size_t offset, length;
  };
  enum class Mode { Spm, PerFragment, Reference };
  std::vector<Fragment> partition(const std::string& text, const ByteRanges* literal) const;
  std::vector<Fragment> partitionPasses(const std::string& text, const ByteRanges* literal) const;
  void spm(const std::string& text, std::vector<llama_token>& out) const;
  void rawFragment(const std::string& text, std::vector<llama_token>& out) const;
  bool probesPass(const std::vector<std::string>& probes);
  std::vector<llama_token> reference(const std::string& text, bool addSpecial) const;
  llama_token byteToken(unsigned char c) const;
  llama_token lookup(const std::string& s) const;

  const llama_vocab* vocab_;
  Mode mode_ = Mode::Reference;
  bool spacePrefix_ = false;
  // The one-pass split equals llama.cpp's (no two special texts overlap, no strip next to a space-edged special).
  bool onePass_ = false;
  SpecialTrie specialTrie_, controlTrie_;
  size_t maxTokenBytes_ = 1;
  std::unordered_map<std::string, llama_token> byText_;
  std::vector<llama_token> specials_;  // longest text first, as llama.cpp orders them
  std::vector<float> scores_;
};
