#include "fast_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <queue>
#include <string_view>

namespace {

// llama.cpp's unicode_len_utf8: the length of a UTF-8 sequence from its lead byte.
size_t utf8Len(unsigned char c) {
  static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[c >> 4];
}

std::string escapeWhitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  for (char c : s) {
    if (c == ' ') out += "\xe2\x96\x81";
    else out += c;
  }
  return out;
}

struct Symbol {
  int prev, next;
  const char* text;
  size_t n;
};

struct Bigram {
  int left, right;
  float score;
  size_t size;
};

// Same order as llama.cpp's llm_bigram_spm::comparator: highest score first, then leftmost.
struct BigramOrder {
  bool operator()(const Bigram& l, const Bigram& r) const { return l.score < r.score || (l.score == r.score && l.left > r.left); }
};

}  // namespace

FastTokenizer::FastTokenizer(const llama_vocab* vocab) : vocab_(vocab) {
  const int32_t n = llama_vocab_n_tokens(vocab);
  scores_.resize(static_cast<size_t>(n));
  char buf[512];
  for (llama_token id = 0; id < n; id++) {
    byText_[llama_vocab_get_text(vocab, id)] = id;  // later ids win, as in llama.cpp's token_to_id
    scores_[static_cast<size_t>(id)] = llama_vocab_get_score(vocab, id);
    const int attr = llama_vocab_get_attr(vocab, id);
    if (attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN)) specials_.push_back(id);
    // The text a token stands for in the input: its rendered piece (special tokens as their text).
    int32_t len = llama_token_to_piece(vocab, id, buf, sizeof(buf), 0, true);
    size_t bytes = len >= 0 ? static_cast<size_t>(len) : static_cast<size_t>(-len);
    // A special token is matched on its raw text, which may be longer than its piece.
    if (attr & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED | LLAMA_TOKEN_ATTR_UNKNOWN))
      bytes = std::max(bytes, std::string_view(llama_vocab_get_text(vocab, id)).size());
    maxTokenBytes_ = std::max(maxTokenBytes_, bytes);
  }
  // The bound fails if a special token swallows whitespace next to it, or the tokenizer normalises
  // text (anything but SPM and byte-level BPE): report "no bound".
  const enum llama_vocab_type type = llama_vocab_type(vocab);
  if (type != LLAMA_VOCAB_TYPE_SPM && type != LLAMA_VOCAB_TYPE_BPE) maxTokenBytes_ = 0;
  for (llama_token id : specials_)
    if (llama_vocab_get_attr(vocab, id) & (LLAMA_TOKEN_ATTR_LSTRIP | LLAMA_TOKEN_ATTR_RSTRIP)) maxTokenBytes_ = 0;
  std::sort(specials_.begin(), specials_.end(), [&](llama_token a, llama_token b) {
    return std::string_view(llama_vocab_get_text(vocab, a)).size() > std::string_view(llama_vocab_get_text(vocab, b)).size();
  });
  if (llama_vocab_type(vocab) != LLAMA_VOCAB_TYPE_SPM) return;
  // Whether raw fragments get a space prefix is not in the public API: find out from probes, and
  // keep the fast path only if every probe tokenizes exactly as llama.cpp does.
  const char* probes[] = {"a", " hello  world", "\xc3\xa9\xe4\xb8\xad x", "The quick brown fox.", "\n\t x\x01y"};
  for (bool prefix : {true, false}) {
    spacePrefix_ = prefix;
    fast_ = true;
    for (const char* p : probes) {
      for (bool add : {true, false}) {
        if (tokenize(p, add) != reference(p, add)) fast_ = false;
      }
    }
    if (fast_) return;
  }
}

std::vector<llama_token> FastTokenizer::reference(const std::string& text, bool addSpecial) const {
  std::vector<llama_token> out(text.size() + 8);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(), static_cast<int32_t>(out.size()), addSpecial, true);
  if (n < 0) {
    out.resize(static_cast<size_t>(-static_cast<int64_t>(n)));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), out.data(), static_cast<int32_t>(out.size()), addSpecial, true);
  }
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::vector<llama_token> FastTokenizer::tokenize(const std::string& text, bool addSpecial) const {
  if (!fast_) return reference(text, addSpecial);
  std::vector<llama_token> out;
  out.reserve(text.size() / 2 + 8);
  const bool addBos = addSpecial && llama_vocab_get_add_bos(vocab_);
  if (addBos) out.push_back(llama_vocab_bos(vocab_));
  if (!text.empty()) {
    for (const Fragment& f : partition(text)) {
      if (f.token != LLAMA_TOKEN_NULL) {
        out.push_back(f.token);
        continue;
      }
      // Every raw fragment is first or follows a special token: llama.cpp's is_prev_special.
      std::string raw = spacePrefix_ ? " " : "";
      raw.append(text, f.offset, f.length);
      spm(escapeWhitespace(raw), out);
    }
  }
  if (addSpecial && llama_vocab_get_add_eos(vocab_)) out.push_back(llama_vocab_eos(vocab_));
  return out;
}

// llama.cpp's tokenizer_st_partition on a vector: for each special token, longest first, split
// every raw fragment at each leftmost non-overlapping occurrence, honouring lstrip/rstrip.
std::vector<FastTokenizer::Fragment> FastTokenizer::partition(const std::string& text) const {
  std::vector<Fragment> frags{{LLAMA_TOKEN_NULL, 0, text.size()}};
  std::vector<Fragment> next;
  for (llama_token id : specials_) {
    const std::string_view tok(llama_vocab_get_text(vocab_, id));
    if (tok.empty()) continue;
    const int attr = llama_vocab_get_attr(vocab_, id);
    bool any = false;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token != LLAMA_TOKEN_NULL) {
        next.push_back(f);
        continue;
      }
      size_t off = f.offset, len = f.length;
      for (;;) {
        const size_t match = std::string_view(text.data(), off + len).find(tok, off);
        if (match == std::string_view::npos) {
          next.push_back({LLAMA_TOKEN_NULL, off, len});
          break;
        }
        any = true;
        size_t leftLen = match - off;
        if (attr & LLAMA_TOKEN_ATTR_LSTRIP)
          while (leftLen > 0 && isspace(static_cast<unsigned char>(text[off + leftLen - 1]))) leftLen--;
        if (leftLen > 0) next.push_back({LLAMA_TOKEN_NULL, off, leftLen});
        next.push_back({id, 0, 0});
        if (match + tok.size() >= off + len) break;
        size_t rOff = match + tok.size();
        size_t rLen = len - ((match - off) + tok.size());
        if (attr & LLAMA_TOKEN_ATTR_RSTRIP)
          while (rLen > 0 && isspace(static_cast<unsigned char>(text[rOff]))) {
            rOff++;
            rLen--;
          }
        if (rLen == 0) break;
        off = rOff;
        len = rLen;
      }
    }
    if (any) frags.swap(next);
  }
  return frags;
}

llama_token FastTokenizer::lookup(const std::string& s) const {
  auto it = byText_.find(s);
  return it == byText_.end() ? LLAMA_TOKEN_NULL : it->second;
}

llama_token FastTokenizer::byteToken(unsigned char c) const {
  static const char* hex = "0123456789ABCDEF";
  const char buf[7] = {'<', '0', 'x', hex[c >> 4], hex[c & 15], '>', 0};
  llama_token t = lookup(buf);
  if (t != LLAMA_TOKEN_NULL) return t;
  t = lookup(std::string(1, static_cast<char>(c)));
  return t == LLAMA_TOKEN_NULL ? llama_vocab_bos(vocab_) : t;  // llama.cpp throws here; unreachable with byte tokens
}

// llm_tokenizer_spm_session::tokenize with amortised output growth.
void FastTokenizer::spm(const std::string& text, std::vector<llama_token>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(utf8Len(static_cast<unsigned char>(text[offs])), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + n == text.size() ? -1 : index + 1, text.data() + offs, n});
    offs += n;
  }
  if (symbols.empty()) return;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  std::unordered_map<std::string, std::pair<int, int>> revMerge;
  auto tryAdd = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    std::string s(symbols[left].text, symbols[left].n + symbols[right].n);
    const llama_token t = lookup(s);
    if (t == LLAMA_TOKEN_NULL || static_cast<size_t>(t) >= scores_.size()) return;
    queue.push({left, right, scores_[static_cast<size_t>(t)], s.size()});
    revMerge[std::move(s)] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); i++) tryAdd(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    tryAdd(l.prev, b.left);
    tryAdd(b.left, l.next);
  }
  // resegment, iteratively (llama.cpp recurses; depth is bounded by merges, but a stack is cheaper).
  std::vector<int> stack;
  for (int i = 0; i != -1; i = symbols[i].next) {
    stack.push_back(i);
    while (!stack.empty()) {
      const Symbol& s = symbols[stack.back()];
      stack.pop_back();
      std::string str(s.text, s.n);
      const llama_token t = lookup(str);
      if (t != LLAMA_TOKEN_NULL) {
        out.push_back(t);
        continue;
      }
      auto p = revMerge.find(str);
      if (p == revMerge.end()) {
        for (size_t j = 0; j < s.n; j++) out.push_back(byteToken(static_cast<unsigned char>(s.text[j])));
        continue;
      }
      stack.push_back(p->second.second);  // right after left
      stack.push_back(p->second.first);
    }
  }
}
