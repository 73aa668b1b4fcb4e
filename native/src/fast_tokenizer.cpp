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

  // The one-pass split takes, at each position, the longest special text there. llama.cpp takes
  // the longest special text anywhere first; the two differ only when a special text's suffix
  // begins another special text at least as long, two specials share a text, or a stripping
  // special can eat into a special that starts or ends with whitespace.
  bool anyLstrip = false, anyRstrip = false, spaceEdged = false;
  for (llama_token id : specials_) {
    const std::string_view t(llama_vocab_get_text(vocab, id));
    if (t.empty()) continue;
    const int attr = llama_vocab_get_attr(vocab, id);
    anyLstrip |= (attr & LLAMA_TOKEN_ATTR_LSTRIP) != 0;
    anyRstrip |= (attr & LLAMA_TOKEN_ATTR_RSTRIP) != 0;
    spaceEdged |= isspace(static_cast<unsigned char>(t.front())) || isspace(static_cast<unsigned char>(t.back()));
  }
  onePass_ = !(spaceEdged && (anyLstrip || anyRstrip));
  for (llama_token id : specials_) {
    const std::string_view t(llama_vocab_get_text(vocab, id));
    if (t.empty()) continue;
    if (onePass_ && specialTrie_.longestAt(t, 0).second == t.size()) onePass_ = false;  // a duplicate text
    specialTrie_.add(t, id);
    if (llama_vocab_get_attr(vocab, id) & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN)) controlTrie_.add(t, id);
  }
  for (size_t i = 0; onePass_ && i < specials_.size(); i++) {
    const std::string_view t(llama_vocab_get_text(vocab, specials_[i]));
    for (size_t k = 1; onePass_ && k < t.size(); k++)
      if (specialTrie_.hasExtension(t.substr(k), t.size())) onePass_ = false;
  }

  // Probes: plain text, and text around this vocabulary's own special tokens.
  std::vector<std::string> probes = {"a", " hello  world", "\xc3\xa9\xe4\xb8\xad x", "The quick brown fox.", "\n\t x\x01y", "  \n\n 12345 don't"};
  for (size_t i = 0; i < specials_.size() && i < 4; i++) {
    const std::string t(llama_vocab_get_text(vocab, specials_[specials_.size() - 1 - i]));
    const std::string u(llama_vocab_get_text(vocab, specials_[i]));
    probes.push_back("a" + t + "b");
    probes.push_back(u + " hi " + t + "\n\nx " + u);
    probes.push_back(" \n" + t + t + "\n  y" + u + " ");
  }
  if (type == LLAMA_VOCAB_TYPE_SPM) {
    // Whether raw fragments get a space prefix is not in the public API: find out from the probes.
    for (bool prefix : {true, false}) {
      spacePrefix_ = prefix;
      mode_ = Mode::Spm;
      if (probesPass(probes)) return;
    }
  }
  mode_ = Mode::PerFragment;
  if (probesPass(probes)) return;
  mode_ = Mode::Reference;
}

bool FastTokenizer::probesPass(const std::vector<std::string>& probes) {
  for (const std::string& p : probes)
    for (bool add : {true, false})
      if (tokenize(p, add) != reference(p, add)) return false;
  return true;
}

const char* FastTokenizer::modeName() const {
  switch (mode_) {
    case Mode::Spm: return "spm";
    case Mode::PerFragment: return "per-fragment";
    default: return "llama_tokenize";
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

std::vector<llama_token> FastTokenizer::tokenize(const std::string& text, bool addSpecial, const ByteRanges* literal) const {
  if (literal != nullptr && literal->empty()) literal = nullptr;
  if (mode_ == Mode::Reference && literal == nullptr) return reference(text, addSpecial);
  std::vector<llama_token> out;
  out.reserve(text.size() / 2 + 8);
  const bool addBos = addSpecial && llama_vocab_get_add_bos(vocab_);
  if (addBos) out.push_back(llama_vocab_bos(vocab_));
  if (!text.empty()) {
    for (const Fragment& f : partition(text, literal)) {
      if (f.token != LLAMA_TOKEN_NULL) {
        out.push_back(f.token);
        continue;
      }
      rawFragment(text.substr(f.offset, f.length), out);
    }
  }
  if (addSpecial && llama_vocab_get_add_eos(vocab_)) out.push_back(llama_vocab_eos(vocab_));
  return out;
}

void FastTokenizer::rawFragment(const std::string& raw, std::vector<llama_token>& out) const {
  if (mode_ == Mode::Spm) {
    // Every raw fragment is first or follows a special token: llama.cpp's is_prev_special.
    spm(escapeWhitespace(spacePrefix_ ? " " + raw : raw), out);
    return;
  }
  // llama_tokenize on one fragment that holds no special text (or only literal text): special
  // parsing off, no BOS/EOS.
  std::vector<llama_token> buf(raw.size() + 8);
  int32_t n = llama_tokenize(vocab_, raw.data(), static_cast<int32_t>(raw.size()), buf.data(), static_cast<int32_t>(buf.size()), false, false);
  if (n < 0) {
    buf.resize(static_cast<size_t>(-static_cast<int64_t>(n)));
    n = llama_tokenize(vocab_, raw.data(), static_cast<int32_t>(raw.size()), buf.data(), static_cast<int32_t>(buf.size()), false, false);
  }
  if (n > 0) out.insert(out.end(), buf.begin(), buf.begin() + n);
}

namespace {

// The first literal range that ends after `pos` (or end()).
ByteRanges::const_iterator literalAfter(const ByteRanges& lit, size_t pos) {
  return std::upper_bound(lit.begin(), lit.end(), pos, [](size_t p, const std::pair<size_t, size_t>& r) { return p < r.second; });
}

bool overlapsLiteral(const ByteRanges* lit, size_t from, size_t to) {
  if (lit == nullptr) return false;
  auto it = literalAfter(*lit, from);
  return it != lit->end() && it->first < to;
}

}  // namespace

ByteRanges FastTokenizer::controlTexts(std::string_view text) const {
  ByteRanges found;
  if (controlTrie_.empty()) return found;
  for (size_t i = 0; i < text.size();) {
    const auto [id, len] = controlTrie_.longestAt(text, i);
    if (id == LLAMA_TOKEN_NULL) {
      i++;
      continue;
    }
    found.push_back({i, i + len});
    i += len;
  }
  return found;
}

std::vector<FastTokenizer::Fragment> FastTokenizer::partition(const std::string& text, const ByteRanges* literal) const {
  if (!onePass_) return partitionPasses(text, literal);
  std::vector<Fragment> frags;
  size_t rawStart = 0;
  auto lit = literal == nullptr ? ByteRanges::const_iterator{} : literal->begin();
  for (size_t i = 0; i < text.size();) {
    // No special token starts inside a literal range or runs into the next one.
    size_t limit = text.size();
    if (literal != nullptr) {
      while (lit != literal->end() && lit->second <= i) ++lit;
      if (lit != literal->end()) {
        if (lit->first <= i) {
          i = lit->second;
          continue;
        }
        limit = lit->first;
      }
    }
    const auto [id, len] = specialTrie_.longestAt(std::string_view(text.data(), limit), i);
    if (id == LLAMA_TOKEN_NULL) {
      i++;
      continue;
    }
    const int attr = llama_vocab_get_attr(vocab_, id);
    size_t leftEnd = i;
    if (attr & LLAMA_TOKEN_ATTR_LSTRIP)
      while (leftEnd > rawStart && isspace(static_cast<unsigned char>(text[leftEnd - 1]))) leftEnd--;
    if (leftEnd > rawStart) frags.push_back({LLAMA_TOKEN_NULL, rawStart, leftEnd - rawStart});
    frags.push_back({id, 0, 0});
    i += len;
    if (attr & LLAMA_TOKEN_ATTR_RSTRIP)
      while (i < text.size() && isspace(static_cast<unsigned char>(text[i]))) i++;
    rawStart = i;
  }
  if (rawStart < text.size()) frags.push_back({LLAMA_TOKEN_NULL, rawStart, text.size() - rawStart});
  return frags;
}

// llama.cpp's tokenizer_st_partition on a vector: for each special token, longest first, split
// every raw fragment at each leftmost non-overlapping occurrence, honouring lstrip/rstrip.
std::vector<FastTokenizer::Fragment> FastTokenizer::partitionPasses(const std::string& text, const ByteRanges* literal) const {
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
      size_t off = f.offset, len = f.length, from = f.offset;
      for (;;) {
        size_t match = std::string_view(text.data(), off + len).find(tok, from);
        while (match != std::string_view::npos && overlapsLiteral(literal, match, match + tok.size()))
          match = std::string_view(text.data(), off + len).find(tok, match + 1);
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
        from = rOff;
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
