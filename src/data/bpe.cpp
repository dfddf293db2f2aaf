#include "data/bpe.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"

namespace zerodp::data {

using nlohmann::json;

// ---- GPT-2's byte <-> character table -----------------------------------------------------------

namespace {

// Bytes that stand for themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'.
bool byte_is_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

struct ByteTable {
  uint32_t to_char[256];
  int16_t from_char[512];  // code point (< 512) -> byte, or -1
  ByteTable() {
    std::fill(std::begin(from_char), std::end(from_char), int16_t{-1});
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_char[b] = byte_is_printable(b) ? static_cast<uint32_t>(b) : next++;
      from_char[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

// Decodes the UTF-8 code point at s[i] (valid UTF-8: JSON strings are). Advances i.
uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto c = static_cast<uint8_t>(s[i]);
  int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

// Byte-length of the UTF-8 sequence starting with lead byte c (1 for a stray byte).
size_t utf8_len(uint8_t c) { return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 1; }

// Unicode White_Space (Rust's char::is_whitespace, the regex crate's \s).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point that ends at s[end) (for a valid sequence; a stray byte otherwise), and its start.
uint32_t prev_code_point(std::string_view s, size_t end, size_t& start) {
  size_t b = end - 1;
  int back = 0;
  while (b > 0 && back < 3 && (static_cast<uint8_t>(s[b]) & 0xC0) == 0x80) --b, ++back;
  size_t i = b;
  const uint32_t cp = next_code_point(s, i);
  if (i != end) {  // not a well-formed sequence ending at `end`
    start = end - 1;
    return static_cast<uint8_t>(s[end - 1]);
  }
  start = b;
  return cp;
}

// ---- hashing and flat tables --------------------------------------------------------------------

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
  }
  return mix64(h);
}

// (left id, right id) -> (rank, merged id), open addressing.
class PairTable {
 public:
  struct Value {
    uint32_t rank, id;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    keys_.assign(cap, kEmpty);
    vals_.assign(cap, Value{});
    mask_ = cap - 1;
  }
  // False if the pair is already there (a repeated merge).
  bool insert(uint32_t a, uint32_t b, Value v) {
    const uint64_t k = key(a, b);
    for (size_t i = mix64(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == k) return false;
      if (keys_[i] == kEmpty) {
        keys_[i] = k;
        vals_[i] = v;
        return true;
      }
    }
  }
  const Value* find(uint32_t a, uint32_t b) const {
    const uint64_t k = key(a, b);
    for (size_t i = mix64(k) & mask_;; i = (i + 1) & mask_) {
      if (keys_[i] == k) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t key(uint32_t a, uint32_t b) { return uint64_t{a} << 32 | b; }
  std::vector<uint64_t> keys_{kEmpty};
  std::vector<Value> vals_{Value{}};
  size_t mask_ = 0;
};

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

// Per-thread cache of pre-token bytes -> ids. One tokenizer at a time per thread (owner): a thread
// that switches tokenizers starts afresh.
class WordCache {
 public:
  static constexpr size_t kMaxKeyBytes = 128;  // longer pre-tokens are not cached
  static constexpr size_t kMaxEntries = size_t{1} << 18;  // then it starts afresh (~20 MB a thread)

  void reset(uint64_t owner) {
    owner_ = owner;
    slots_.assign(size_t{1} << 12, Slot{});
    mask_ = slots_.size() - 1;
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }
  uint64_t owner() const { return owner_; }

  // The cached ids of `key`, or nullptr (valid until the next insert).
  const uint32_t* find(uint64_t h, std::string_view key, uint32_t& n) const {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return nullptr;
      if (s.hash == h && s.key_len == key.size() &&
          std::memcmp(key.size() <= kInline ? s.key : keys_.data() + s.key_off(), key.data(), key.size()) == 0) {
        n = s.n_ids;
        return s.n_ids == 1 ? &s.ids : ids_.data() + s.ids;
      }
    }
  }
  void insert(uint64_t h, std::string_view key, const uint32_t* ids, uint32_t n) {
    if (count_ >= kMaxEntries) reset(owner_);
    if (2 * (count_ + 1) > slots_.size()) grow();
    Slot s;
    s.hash = h;
    s.key_len = static_cast<uint16_t>(key.size());
    if (key.size() <= kInline) {
      std::memcpy(s.key, key.data(), key.size());
    } else {
      const uint64_t off = keys_.size();
      std::memcpy(s.key, &off, sizeof off);
      keys_.append(key);
    }
    s.n_ids = static_cast<uint16_t>(n);
    if (n == 1) {
      s.ids = ids[0];
    } else {
      s.ids = static_cast<uint32_t>(ids_.size());
      ids_.insert(ids_.end(), ids, ids + n);
    }
    place(s);
    ++count_;
  }

 private:
  static constexpr size_t kInline = 16;
  // 32 bytes: short keys and single ids live in the slot itself (one cache line holds two).
  struct Slot {
    uint64_t hash = 0;
    char key[kInline] = {};  // the key when key_len <= kInline, else its offset in keys_
    uint16_t key_len = 0;    // 0: empty (pre-tokens are never empty)
    uint16_t n_ids = 0;      // at most kMaxKeyBytes (one id per byte at most)
    uint32_t ids = 0;        // the id when n_ids == 1, else the offset in ids_
    uint64_t key_off() const {
      uint64_t off;
      std::memcpy(&off, key, sizeof off);
      return off;
    }
  };
  static_assert(sizeof(Slot) == 32);
  void place(const Slot& s) {
    size_t i = s.hash & mask_;
    while (slots_[i].key_len != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.key_len != 0) place(s);
  }

  uint64_t owner_ = 0;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string keys_;
  std::vector<uint32_t> ids_;
  size_t count_ = 0;
};

std::atomic<uint64_t> next_model_serial{1};

// ---- PCRE2 --------------------------------------------------------------------------------------

// `tokenizers` runs its regexes in Oniguruma, whose \s is Unicode's White_Space; PCRE2's (with UCP)
// also takes U+180E MONGOLIAN VOWEL SEPARATOR. \s and \S become \p{White_Space} and \P{White_Space}
// (inside character classes too); escaped backslashes and \Q...\E stay as written.
std::string oniguruma_spaces(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 32);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\' || i + 1 == p.size()) {
      out += p[i];
      continue;
    }
    const char c = p[i + 1];
    if (c == 's' || c == 'S') {
      out += c == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
    } else if (c == 'Q') {
      const size_t e = p.find("\\E", i + 2);
      const size_t stop = e == std::string::npos ? p.size() : e + 2;
      out.append(p, i, stop - i);
      i = stop - 1;
      continue;
    } else {
      out += '\\';
      out += c;
    }
    ++i;
  }
  return out;
}

class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    const std::string compiled = oniguruma_spaces(pattern);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      // (the offset is in the pattern as written only when no \s was rewritten)
      const std::string at = compiled == pattern ? fmt::format(" at offset {}", offset) : std::string();
      throw UsageError(fmt::format("{}: regex \"{}\" does not compile{}: {}", where, describe_text(pattern), at,
                                   reinterpret_cast<const char*>(msg)));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // The first match in subject[0, n) starting at or after `from`: true and [ms, me), or false.
  bool find(const char* subject, size_t n, size_t from, size_t& ms, size_t& me) const {
    Scratch& s = scratch();
    const auto* p = reinterpret_cast<PCRE2_SPTR>(subject);
    const int rc = jit_ ? pcre2_jit_match(code_, p, n, from, 0, s.data, s.context)
                        : pcre2_match(code_, p, n, from, 0, s.data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_HEAPLIMIT)
      throw UsageError(fmt::format("pre-tokenizer regex \"{}\" backtracks past PCRE2's limits on a text",
                                   describe_text(pattern_)));
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw RuntimeFailure(fmt::format("pre-tokenizer regex {} failed on a text: {}", describe_text(pattern_),
                                       reinterpret_cast<const char*>(msg)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    ms = ov[0];
    me = ov[1];
    return true;
  }

 private:
  // Match data and a JIT stack per thread (a match never re-enters another one).
  struct Scratch {
    pcre2_match_data* data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    Scratch() {
      data = pcre2_match_data_create(4, nullptr);
      context = pcre2_match_context_create(nullptr);
      stack = pcre2_jit_stack_create(32 << 10, 8 << 20, nullptr);
      pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~Scratch() {
      pcre2_match_data_free(data);
      pcre2_match_context_free(context);
      pcre2_jit_stack_free(stack);
    }
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }

  std::string pattern_;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

// Regexes after which a text may be cut after '\n' and before a letter with no change in ids
// (bpe.h: TextChunk): no alternative matches '\n' followed by a letter, and each alternative's
// lookahead is satisfied the same way by the text beyond the cut.
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool cut_safe_pattern(const std::string& p) { return p == kGpt2Pattern || p == kLlama3Pattern || p == kQwen2Pattern; }

}  // namespace

uint32_t byte_level_char(uint8_t b) { return byte_table().to_char[b]; }

// ---- the model ----------------------------------------------------------------------------------

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreStep {
  std::unique_ptr<Regex> regex;  // Split(Regex), Digits, ByteLevel(use_regex)
  std::string literal;           // Split(String)
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
};

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false, single_word = false, lstrip = false, rstrip = false, normalized = false;
};

struct Piece {
  size_t b, e;
  bool match;
};

class BpeModel {
 public:
  std::string name;        // "tokenizer 'path'"
  std::string short_name;  // for describe()
  std::vector<std::string> token_bytes;  // id -> bytes (decode)
  std::vector<uint8_t> has_token;        // id -> 1 when some token has this id
  int32_t byte_id[256];
  PairTable pairs;
  std::unordered_map<std::string, uint32_t> whole;  // BPE vocabulary bytes -> id (ignore_merges)
  bool ignore_merges = false;
  std::optional<uint32_t> unk_id;
  bool fuse_unk = false;
  std::vector<AddedToken> added;
  // Added tokens by first byte, longest first; split_first: those not normalized (matched first).
  std::vector<uint32_t> by_first[256];
  bool first_byte[2][256] = {};
  int single_first[2] = {-1, -1};  // the only first byte of a pass's added tokens, if only one
  bool two_passes = false;
  std::vector<PreStep> steps;
  bool prefix_space = false;
  bool byte_level = false;  // a ByteLevel pre-tokenizer step was given
  bool cuttable = false;
  std::optional<uint32_t> eos;
  std::string pattern_label;
  size_t merges_count = 0;
  uint64_t serial = next_model_serial.fetch_add(1);
  std::unique_ptr<Regex> word_char;  // \w at a position (single_word)
  std::unique_ptr<Regex> letter;     // \p{L} at a position (cuts)

  // ---- added tokens
  // Splits text[b, e) on the added tokens of pass `pass` (0: not normalized, 1: normalized; with
  // one pass, all), as tokenizers' AddedVocabulary::find_matches. Appends (token index or -1, range).
  void find_added(std::string_view text, size_t b, size_t e, int pass, std::vector<std::pair<int32_t, Piece>>& out) const {
    const std::string_view s = text.substr(b, e - b);
    size_t start_offset = 0;
    size_t i = 0;
    const bool* first = first_byte[pass];
    while (i < s.size()) {
      if (single_first[pass] >= 0) {
        const void* hit_at = std::memchr(s.data() + i, single_first[pass], s.size() - i);
        if (!hit_at) break;
        i = static_cast<size_t>(static_cast<const char*>(hit_at) - s.data());
      } else if (!first[static_cast<uint8_t>(s[i])]) {
        ++i;
        continue;
      }
      int32_t hit = -1;
      for (uint32_t k : by_first[static_cast<uint8_t>(s[i])]) {
        const AddedToken& t = added[k];
        if ((two_passes && (t.normalized ? 1 : 0) != pass)) continue;
        if (s.compare(i, t.content.size(), t.content) == 0) {
          hit = static_cast<int32_t>(k);
          break;
        }
      }
      if (hit < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = added[hit];
      size_t start = i, stop = i + t.content.size();
      i = stop;
      if (t.single_word) {
        const bool start_space = start == 0 || !ends_with_word(s, start);
        const bool stop_space = stop == s.size() || !starts_with_word(s, stop);
        if (!start_space || !stop_space) continue;
      }
      if (t.lstrip) {
        size_t ns = start;
        while (ns > 0) {
          size_t cs;
          const uint32_t c = prev_code_point(s, ns, cs);
          if (!is_white_space(c)) break;
          ns = cs;
        }
        start = std::max(ns, start_offset);
      }
      if (t.rstrip) {
        size_t j = stop;
        while (j < s.size()) {
          size_t k = j;
          const uint32_t c = next_code_point(s, k);
          if (!is_white_space(c)) break;
          j = k;
        }
        stop = j;
        i = std::max(i, stop);
      }
      if (start_offset < start) out.push_back({-1, Piece{b + start_offset, b + start, false}});
      out.push_back({hit, Piece{b + start, b + stop, true}});
      start_offset = stop;
    }
    if (start_offset < s.size()) out.push_back({-1, Piece{b + start_offset, e, false}});
  }
  bool starts_with_word(std::string_view s, size_t at) const {
    size_t ms, me;
    return word_char->find(s.data(), std::min(s.size(), at + 4), at, ms, me) && ms == at;
  }
  bool ends_with_word(std::string_view s, size_t end) const {
    size_t cs;
    prev_code_point(s, end, cs);
    size_t ms, me;
    return word_char->find(s.data(), end, cs, ms, me) && ms == cs;
  }

  // ---- BPE of one pre-token's bytes
  void bpe(std::string_view w, std::vector<uint32_t>& out) const {
    if (ignore_merges) {
      auto it = whole.find(std::string(w));
      if (it != whole.end()) {
        out.push_back(it->second);
        return;
      }
    }
    thread_local std::vector<uint32_t> sym;
    sym.clear();
    bool last_unk = false;
    for (char ch : w) {
      const int32_t id = byte_id[static_cast<uint8_t>(ch)];
      if (id >= 0) {
        sym.push_back(static_cast<uint32_t>(id));
        last_unk = false;
      } else if (unk_id) {
        if (!(fuse_unk && last_unk)) sym.push_back(*unk_id);
        last_unk = true;
      }
    }
    if (sym.size() <= 64) {
      merge_small(sym);
    } else {
      merge_large(sym);
    }
    out.insert(out.end(), sym.begin(), sym.end());
  }

  // Lowest rank first, leftmost among equals: a scan of the pairs' ranks (short words).
  void merge_small(std::vector<uint32_t>& sym) const {
    size_t n = sym.size();
    if (n < 2) return;
    uint32_t rank[64], merged[64];
    for (size_t i = 0; i + 1 < n; ++i) {
      const PairTable::Value* v = pairs.find(sym[i], sym[i + 1]);
      rank[i] = v ? v->rank : kNoRank;
      merged[i] = v ? v->id : 0;
    }
    while (n > 1) {
      size_t best = 0;
      uint32_t r = rank[0];
      for (size_t i = 1; i + 1 < n; ++i)
        if (rank[i] < r) r = rank[i], best = i;
      if (r == kNoRank) break;
      sym[best] = merged[best];
      for (size_t i = best + 1; i + 1 < n; ++i) sym[i] = sym[i + 1];
      for (size_t i = best + 1; i + 2 < n; ++i) rank[i] = rank[i + 1], merged[i] = merged[i + 1];
      --n;
      auto relink = [&](size_t i) {
        const PairTable::Value* v = pairs.find(sym[i], sym[i + 1]);
        rank[i] = v ? v->rank : kNoRank;
        merged[i] = v ? v->id : 0;
      };
      if (best > 0) relink(best - 1);
      if (best + 1 < n) relink(best);
    }
    sym.resize(n);
  }

  // The same with a heap and a linked list (long pre-tokens: whitespace runs, long numbers).
  void merge_large(std::vector<uint32_t>& sym) const {
    const size_t n = sym.size();
    std::vector<int64_t> prev(n), next(n);
    for (size_t i = 0; i < n; ++i) prev[i] = static_cast<int64_t>(i) - 1, next[i] = i + 1 < n ? static_cast<int64_t>(i) + 1 : -1;
    std::vector<uint8_t> alive(n, 1);
    using Entry = std::pair<uint32_t, size_t>;  // (rank, position of the left symbol)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    for (size_t i = 0; i + 1 < n; ++i)
      if (const PairTable::Value* v = pairs.find(sym[i], sym[i + 1])) heap.push({v->rank, i});
    while (!heap.empty()) {
      const auto [r, i] = heap.top();
      heap.pop();
      if (!alive[i] || next[i] < 0) continue;
      const size_t j = static_cast<size_t>(next[i]);
      const PairTable::Value* v = pairs.find(sym[i], sym[j]);
      if (!v || v->rank != r) continue;  // stale
      sym[i] = v->id;
      alive[j] = 0;
      next[i] = next[j];
      if (next[j] >= 0) prev[static_cast<size_t>(next[j])] = static_cast<int64_t>(i);
      if (prev[i] >= 0) {
        const size_t p = static_cast<size_t>(prev[i]);
        if (const PairTable::Value* u = pairs.find(sym[p], sym[i])) heap.push({u->rank, p});
      }
      if (next[i] >= 0) {
        if (const PairTable::Value* u = pairs.find(sym[i], sym[static_cast<size_t>(next[i])])) heap.push({u->rank, i});
      }
    }
    size_t k = 0;
    for (size_t i = 0; i < n; ++i)
      if (alive[i]) sym[k++] = sym[i];
    sym.resize(k);
  }

  // One pre-token, through the thread's cache.
  void encode_word(std::string_view w, std::vector<uint32_t>& out) const {
    if (w.empty()) return;
    if (w.size() > WordCache::kMaxKeyBytes) {
      bpe(w, out);
      return;
    }
    thread_local WordCache cache;
    if (cache.owner() != serial) cache.reset(serial);
    const uint64_t h = hash_bytes(w.data(), w.size());
    uint32_t n = 0;
    if (const uint32_t* ids = cache.find(h, w, n)) {
      out.insert(out.end(), ids, ids + n);
      return;
    }
    const size_t before = out.size();
    bpe(w, out);
    cache.insert(h, w, out.data() + before, static_cast<uint32_t>(out.size() - before));
  }

  // ---- pre-tokenization
  // Runs steps[k..] over subject[from, to) (the regexes see all of subject) and BPE-encodes the
  // pre-tokens.
  void pretokenize(size_t k, std::string_view subject, size_t from, size_t to, std::vector<uint32_t>& out) const {
    if (k == steps.size()) {
      encode_word(subject.substr(from, to - from), out);
      return;
    }
    const PreStep& st = steps[k];
    auto next = [&](size_t b, size_t e) {
      if (k + 1 == steps.size()) encode_word(subject.substr(b, e - b), out);
      else pretokenize(k + 1, subject.substr(b, e - b), 0, e - b, out);
    };
    // One buffer pair per depth, sized once (a reference into them must survive the recursion).
    thread_local std::vector<std::vector<Piece>> levels(BpeLimits::kMaxPreTokenizers + 1);
    std::vector<Piece>& pieces = levels[k];
    pieces.clear();
    // Isolated (every pre-tokenizer of GPT-2, Llama 3, Qwen 2): each match and each gap is a piece,
    // passed on as soon as found.
    const bool stream = st.behavior == Behavior::kIsolated;
    // Matches and the gaps between them, covering [from, to).
    size_t gap = from, pos = from;
    while (pos < to) {
      size_t ms, me;
      if (st.regex) {
        if (!st.regex->find(subject.data(), subject.size(), pos, ms, me) || ms >= to) break;
      } else {
        const size_t f = subject.substr(0, to).find(st.literal, pos);
        if (f == std::string_view::npos) break;
        ms = f, me = f + st.literal.size();
      }
      if (me == ms) {  // an empty match splits nothing
        pos = ms + utf8_len(static_cast<uint8_t>(subject[ms]));
        continue;
      }
      if (stream) {
        if (gap < ms) next(gap, ms);
        next(ms, me);
      } else {
        if (gap < ms) pieces.push_back({gap, ms, st.invert});
        pieces.push_back({ms, me, !st.invert});
      }
      gap = pos = me;
    }
    if (stream) {
      if (gap < to) next(gap, to);
      return;
    }
    if (gap < to) pieces.push_back({gap, to, st.invert});
    // Group by behaviour (tokenizers' NormalizedString::split).
    thread_local std::vector<std::vector<Piece>> grouped_levels(BpeLimits::kMaxPreTokenizers + 1);
    std::vector<Piece>& g = grouped_levels[k];
    g.clear();
    switch (st.behavior) {
      case Behavior::kIsolated: break;  // streamed above
      case Behavior::kRemoved:
        for (const Piece& p : pieces)
          if (!p.match) g.push_back(p);
        break;
      case Behavior::kContiguous: {
        bool prev_match = false;
        for (const Piece& p : pieces) {
          if (!g.empty() && p.match == prev_match) g.back().e = p.e;
          else g.push_back(p);
          prev_match = p.match;
        }
        break;
      }
      case Behavior::kMergedWithPrevious: {
        bool prev_match = false;
        for (const Piece& p : pieces) {
          if (p.match && !prev_match && !g.empty()) g.back().e = p.e;
          else g.push_back(p);
          prev_match = p.match;
        }
        break;
      }
      case Behavior::kMergedWithNext: {
        bool prev_match = false;
        for (size_t i = pieces.size(); i-- > 0;) {
          const Piece& p = pieces[i];
          if (p.match && !prev_match && !g.empty()) g.back().b = p.b;
          else g.push_back(p);
          prev_match = p.match;
        }
        std::reverse(g.begin(), g.end());
        break;
      }
    }
    for (const Piece& p : g)
      if (p.e > p.b) next(p.b, p.e);
  }

  // A piece of text between added tokens, or a chunk [from, to) of one ([sb, se)).
  void encode_text(std::string_view text, size_t sb, size_t se, size_t from, size_t to, std::vector<uint32_t>& out) const {
    if (to <= from) return;
    std::string_view subject = text.substr(sb, se - sb);
    from -= sb, to -= sb;
    if (prefix_space && subject[0] != ' ') {
      thread_local std::string buf;
      buf.assign(" ");
      buf.append(subject);
      subject = buf;
      to = subject.size();  // never cut (cuttable is false with a prefix space)
    }
    if (steps.empty()) {
      encode_word(subject.substr(from, to - from), out);
    } else {
      pretokenize(0, subject, from, to, out);
    }
  }

  // The pieces of `text` between and around added tokens.
  void split_added(std::string_view text, std::vector<std::pair<int32_t, Piece>>& parts) const {
    parts.clear();
    if (added.empty()) {
      if (!text.empty()) parts.push_back({-1, Piece{0, text.size(), false}});
      return;
    }
    find_added(text, 0, text.size(), 0, parts);
    if (!two_passes) return;
    std::vector<std::pair<int32_t, Piece>> first;
    first.swap(parts);
    for (const auto& [idx, p] : first) {
      if (idx >= 0) parts.push_back({idx, p});
      else find_added(text, p.b, p.e, 1, parts);
    }
  }
};

// ---- loading ------------------------------------------------------------------------------------

namespace {

class Reader {
 public:
  explicit Reader(const std::string& name) : name_(name) {}
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw UsageError(fmt::format("{}: {}: {}", name_, key, what));
  }
  const json& get(const json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path.empty() ? key : path + "." + key, "missing");
    return *it;
  }
  const json* opt(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& object(const json& v, const std::string& key) const {
    if (!v.is_object()) fail(key, fmt::format("must be an object, got {}", describe_json(v)));
    return v;
  }
  const json& array(const json& v, const std::string& key) const {
    if (!v.is_array()) fail(key, fmt::format("must be an array, got {}", describe_json(v)));
    return v;
  }
  const std::string& string(const json& v, const std::string& key, size_t max = BpeLimits::kMaxTokenBytes) const {
    if (!v.is_string()) fail(key, fmt::format("must be a string, got {}", describe_json(v)));
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max) fail(key, fmt::format("a string of {} bytes, over the {} allowed", s.size(), max));
    return s;
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool dflt) const {
    const json* v = opt(obj, key);
    if (!v) return dflt;
    if (!v->is_boolean()) fail(path + "." + key, fmt::format("must be true or false, got {}", describe_json(*v)));
    return v->get<bool>();
  }
  uint32_t id(const json& v, const std::string& key) const {
    if (!v.is_number_integer()) fail(key, fmt::format("must be an integer id, got {}", describe_json(v)));
    const int64_t i = v.get<int64_t>();
    if (i < 0 || static_cast<uint64_t>(i) >= BpeLimits::kMaxVocab)
      fail(key, fmt::format("id {} is outside 0..{}", i, BpeLimits::kMaxVocab - 1));
    return static_cast<uint32_t>(i);
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// The bytes a byte-level vocabulary string stands for; false if it has a character outside the table.
bool unmap_bytes(std::string_view s, std::string& out) {
  out.clear();
  const ByteTable& t = byte_table();
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = next_code_point(s, i);
    if (cp >= 512 || t.from_char[cp] < 0) return false;
    out.push_back(static_cast<char>(t.from_char[cp]));
  }
  return true;
}

void read_pre_tokenizer(const Reader& r, const json& v, const std::string& key, BpeModel& m, bool top) {
  r.object(v, key);
  const std::string& type = r.string(r.get(v, key, "type"), key + ".type");
  if (type == "Sequence") {
    if (!top) r.fail(key, "a Sequence inside a Sequence is not supported");
    const json& list = r.array(r.get(v, key, "pretokenizers"), key + ".pretokenizers");
    if (list.size() > BpeLimits::kMaxPreTokenizers)
      r.fail(key + ".pretokenizers", fmt::format("{} steps, over the {} allowed", list.size(), BpeLimits::kMaxPreTokenizers));
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(r, list[i], fmt::format("{}.pretokenizers[{}]", key, i), m, false);
    return;
  }
  PreStep step;
  if (type == "ByteLevel") {
    m.byte_level = true;
    const bool prefix = r.boolean(v, key, "add_prefix_space", false);
    if (prefix) {
      if (!m.steps.empty()) r.fail(key + ".add_prefix_space", "true is supported only on the first pre-tokenizer");
      m.prefix_space = true;
    }
    if (!r.boolean(v, key, "use_regex", true)) return;  // the mapping to characters only: implicit
    step.regex = std::make_unique<Regex>(kGpt2Pattern, r.name() + ": " + key);
  } else if (type == "Split") {
    const json& pat = r.object(r.get(v, key, "pattern"), key + ".pattern");
    if (const json* re = r.opt(pat, "Regex")) {
      step.regex = std::make_unique<Regex>(r.string(*re, key + ".pattern.Regex", BpeLimits::kMaxPatternBytes),
                                           r.name() + ": " + key + ".pattern.Regex");
    } else if (const json* lit = r.opt(pat, "String")) {
      step.literal = r.string(*lit, key + ".pattern.String", BpeLimits::kMaxPatternBytes);
      if (step.literal.empty()) r.fail(key + ".pattern.String", "must not be empty");
    } else {
      r.fail(key + ".pattern", "must hold \"Regex\" or \"String\"");
    }
    const std::string& b = r.string(r.get(v, key, "behavior"), key + ".behavior");
    if (b == "Removed") step.behavior = Behavior::kRemoved;
    else if (b == "Isolated") step.behavior = Behavior::kIsolated;
    else if (b == "MergedWithPrevious") step.behavior = Behavior::kMergedWithPrevious;
    else if (b == "MergedWithNext") step.behavior = Behavior::kMergedWithNext;
    else if (b == "Contiguous") step.behavior = Behavior::kContiguous;
    else r.fail(key + ".behavior", fmt::format("unknown behavior \"{}\"", describe_text(b)));
    step.invert = r.boolean(v, key, "invert", false);
  } else if (type == "Digits") {
    const bool individual = r.boolean(v, key, "individual_digits", false);
    step.regex = std::make_unique<Regex>(individual ? "\\p{N}" : "\\p{N}+", r.name() + ": " + key);
  } else {
    r.fail(key + ".type", fmt::format("pre-tokenizer \"{}\" is not supported (ByteLevel, Split, Digits, Sequence are)",
                                      describe_text(type)));
  }
  m.steps.push_back(std::move(step));
}

void check_null_or(const Reader& r, const json& root, const char* key, const char* why) {
  if (const json* v = r.opt(root, key)) r.fail(key, fmt::format("{} (got {})", why, describe_json(*v)));
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_json(std::string_view json_text, const std::string& name) {
  JsonLimits limits;
  limits.max_bytes = BpeLimits::kMaxFileBytes;
  limits.max_depth = 16;
  const json root = parse_json(json_text, name, limits);
  const Reader r(name);
  r.object(root, "(top level)");
  auto m = std::make_unique<BpeModel>();
  m->name = name;

  if (const json* n = r.opt(root, "normalizer")) {  // null, or an empty Sequence (the same)
    const bool empty_sequence = n->is_object() && n->value("type", json()) == "Sequence" &&
                                n->contains("normalizers") && (*n)["normalizers"].is_array() &&
                                (*n)["normalizers"].empty();
    if (!empty_sequence)
      r.fail("normalizer", fmt::format("only a null normalizer is supported (got {})", describe_json(*n)));
  }
  check_null_or(r, root, "truncation", "must be null (truncation would change the ids)");
  check_null_or(r, root, "padding", "must be null (padding would change the ids)");

  // model
  const json& model = r.object(r.get(root, "", "model"), "model");
  if (const json* t = r.opt(model, "type")) {
    const std::string& type = r.string(*t, "model.type");
    if (type != "BPE") r.fail("model.type", fmt::format("\"{}\" is not supported (only \"BPE\")", describe_text(type)));
  }
  if (const json* d = r.opt(model, "dropout")) {
    if (!d->is_number() || d->get<double>() != 0.0) r.fail("model.dropout", fmt::format("must be null, got {}", describe_json(*d)));
  }
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = r.opt(model, k)) {
      if (!r.string(*v, std::string("model.") + k).empty())
        r.fail(std::string("model.") + k, fmt::format("must be null or empty, got {}", describe_json(*v)));
    }
  }
  if (r.boolean(model, "model", "byte_fallback", false)) r.fail("model.byte_fallback", "true is not supported");
  m->ignore_merges = r.boolean(model, "model", "ignore_merges", false);
  m->fuse_unk = r.boolean(model, "model", "fuse_unk", false);

  const json& vocab = r.object(r.get(model, "model", "vocab"), "model.vocab");
  if (vocab.size() > BpeLimits::kMaxVocab)
    r.fail("model.vocab", fmt::format("{} tokens, over the {} allowed", vocab.size(), BpeLimits::kMaxVocab));
  std::unordered_map<std::string, uint32_t> ids;  // vocabulary string -> id
  ids.reserve(vocab.size());
  uint32_t max_id = 0;
  std::string bytes;
  std::vector<std::pair<uint32_t, std::string>> entries;
  entries.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto key = [&] { return fmt::format("model.vocab[{}]", describe_text(it.key(), 32)); };
    if (it.key().size() > BpeLimits::kMaxTokenBytes)
      r.fail(key(), fmt::format("a token of {} bytes, over the {} allowed", it.key().size(), BpeLimits::kMaxTokenBytes));
    if (!it.value().is_number_integer()) r.fail(key(), fmt::format("must be an integer id, got {}", describe_json(it.value())));
    const int64_t raw = it.value().get<int64_t>();
    if (raw < 0 || static_cast<uint64_t>(raw) >= BpeLimits::kMaxVocab)
      r.fail(key(), fmt::format("id {} is outside 0..{}", raw, BpeLimits::kMaxVocab - 1));
    const auto id = static_cast<uint32_t>(raw);
    max_id = std::max(max_id, id);
    ids.emplace(it.key(), id);
    entries.emplace_back(id, it.key());
  }
  if (entries.empty()) r.fail("model.vocab", "is empty");

  // added tokens
  if (const json* at = r.opt(root, "added_tokens")) {
    r.array(*at, "added_tokens");
    if (at->size() > BpeLimits::kMaxVocab)
      r.fail("added_tokens", fmt::format("{} tokens, over the {} allowed", at->size(), BpeLimits::kMaxVocab));
    for (size_t i = 0; i < at->size(); ++i) {
      const std::string key = fmt::format("added_tokens[{}]", i);
      const json& t = r.object((*at)[i], key);
      AddedToken a;
      a.id = r.id(r.get(t, key, "id"), key + ".id");
      a.content = r.string(r.get(t, key, "content"), key + ".content");
      if (a.content.empty()) r.fail(key + ".content", "must not be empty");
      a.special = r.boolean(t, key, "special", false);
      a.single_word = r.boolean(t, key, "single_word", false);
      a.lstrip = r.boolean(t, key, "lstrip", false);
      a.rstrip = r.boolean(t, key, "rstrip", false);
      a.normalized = r.boolean(t, key, "normalized", !a.special);
      for (const AddedToken& b : m->added)
        if (b.content == a.content) r.fail(key + ".content", fmt::format("{} is added twice", describe_text(a.content)));
      max_id = std::max(max_id, a.id);
      m->added.push_back(std::move(a));
    }
  }

  // id -> bytes. Ids are (nearly) dense in real files; holes are allowed only as many as there are
  // tokens, so that the table below is sized by what the file holds, never by an id it merely names.
  const size_t given = entries.size() + m->added.size();
  if (size_t{max_id} >= 2 * given + 1024)
    r.fail("model.vocab", fmt::format("id {} is far beyond the {} tokens the file gives (ids must be nearly dense)",
                                      max_id, given));
  const size_t V = size_t{max_id} + 1;
  m->token_bytes.assign(V, std::string());
  m->has_token.assign(V, 0);
  std::fill(std::begin(m->byte_id), std::end(m->byte_id), -1);
  m->whole.reserve(entries.size());
  for (const auto& [id, s] : entries) {
    if (m->has_token[id])
      r.fail(fmt::format("model.vocab[{}]", describe_text(s, 32)), fmt::format("id {} is given to two tokens", id));
    m->has_token[id] = 1;
    if (unmap_bytes(s, bytes)) {
      m->token_bytes[id] = bytes;
      if (bytes.size() == 1) m->byte_id[static_cast<uint8_t>(bytes[0])] = static_cast<int32_t>(id);
      m->whole.emplace(bytes, id);
    } else {
      m->token_bytes[id] = s;  // a string outside the byte alphabet decodes to itself (as ByteLevel's decoder)
    }
  }
  for (const AddedToken& a : m->added) {
    m->token_bytes[a.id] = a.content;
    m->has_token[a.id] = 1;
  }

  if (const json* u = r.opt(model, "unk_token")) {
    const std::string& s = r.string(*u, "model.unk_token");
    auto it = ids.find(s);
    if (it == ids.end()) r.fail("model.unk_token", fmt::format("{} is not in the vocabulary", describe_text(s)));
    m->unk_id = it->second;
  }

  // merges: "a b" or ["a", "b"]
  const json& merges = r.array(r.get(model, "model", "merges"), "model.merges");
  if (merges.size() > BpeLimits::kMaxMerges)
    r.fail("model.merges", fmt::format("{} merges, over the {} allowed", merges.size(), BpeLimits::kMaxMerges));
  m->pairs.reserve(merges.size());
  m->merges_count = merges.size();
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    const json& e = merges[i];
    std::string a, b;
    if (e.is_string()) {
      const std::string& s = r.string(e, key, 2 * BpeLimits::kMaxTokenBytes + 1);
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        r.fail(key, fmt::format("must be two tokens separated by one space, got {}", describe_json(e)));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array()) {
      if (e.size() != 2) r.fail(key, fmt::format("must be a pair of tokens, got {}", describe_json(e)));
      a = r.string(e[0], key + "[0]");
      b = r.string(e[1], key + "[1]");
    } else {
      r.fail(key, fmt::format("must be a string \"a b\" or a pair [\"a\", \"b\"], got {}", describe_json(e)));
    }
    auto ia = ids.find(a), ib = ids.find(b), ic = ids.find(a + b);
    if (ia == ids.end()) r.fail(key, fmt::format("token {} is not in the vocabulary", describe_text(a)));
    if (ib == ids.end()) r.fail(key, fmt::format("token {} is not in the vocabulary", describe_text(b)));
    if (ic == ids.end()) r.fail(key, fmt::format("the merged token {} is not in the vocabulary", describe_text(a + b)));
    // A repeated pair keeps its first (lowest) rank, as tokenizers' map built in order would keep the last;
    // real files never repeat one.
    if (!m->pairs.insert(ia->second, ib->second, {static_cast<uint32_t>(i), ic->second}))
      r.fail(key, fmt::format("the pair {} {} is merged twice", describe_text(a), describe_text(b)));
  }

  // pre-tokenizer, decoder
  {
    const json* pt = r.opt(root, "pre_tokenizer");
    if (!pt) r.fail("pre_tokenizer", "must be ByteLevel or a Sequence with ByteLevel (byte-level BPE), got null");
    read_pre_tokenizer(r, *pt, "pre_tokenizer", *m, true);
    if (!m->byte_level)
      r.fail("pre_tokenizer", "has no ByteLevel step: only byte-level BPE is supported");
  }
  {
    const json* d = r.opt(root, "decoder");
    if (!d) r.fail("decoder", "must be a ByteLevel decoder, got null");
    r.object(*d, "decoder");
    const std::string& type = r.string(r.get(*d, "decoder", "type"), "decoder.type");
    if (type != "ByteLevel") r.fail("decoder.type", fmt::format("\"{}\" is not supported (only \"ByteLevel\")", describe_text(type)));
  }

  // added tokens by first byte, longest first
  for (size_t k = 0; k < m->added.size(); ++k) {
    const AddedToken& a = m->added[k];
    const auto c = static_cast<uint8_t>(a.content[0]);
    m->by_first[c].push_back(static_cast<uint32_t>(k));
  }
  bool any_norm = false, any_raw = false;
  for (const AddedToken& a : m->added) (a.normalized ? any_norm : any_raw) = true;
  m->two_passes = any_norm && any_raw;
  for (const AddedToken& a : m->added) {
    const auto c = static_cast<uint8_t>(a.content[0]);
    const int pass = m->two_passes && a.normalized ? 1 : 0;
    m->first_byte[pass][c] = true;
  }
  for (int pass = 0; pass < 2; ++pass) {
    int count = 0, only = -1;
    for (int c = 0; c < 256; ++c)
      if (m->first_byte[pass][c]) ++count, only = c;
    if (count == 1) m->single_first[pass] = only;
  }
  for (auto& list : m->by_first)
    std::stable_sort(list.begin(), list.end(),
                     [&](uint32_t x, uint32_t y) { return m->added[x].content.size() > m->added[y].content.size(); });
  // Rust's regex \w, what tokenizers' single_word tests: Unicode word characters.
  m->word_char = std::make_unique<Regex>("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", name);
  m->letter = std::make_unique<Regex>("\\p{L}", name);

  // end of text: the first of these that is an added token
  for (const char* s : {"<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>", "<|im_end|>", "</s>", "<eos>", "<s>"}) {
    for (const AddedToken& a : m->added)
      if (a.content == s) {
        m->eos = a.id;
        break;
      }
    if (m->eos) break;
  }

  // cutting big texts for threads
  m->cuttable = !m->prefix_space && !m->steps.empty();
  for (const PreStep& st : m->steps) {
    const bool safe = st.regex && st.behavior == Behavior::kIsolated && !st.invert &&
                      (cut_safe_pattern(st.regex->pattern()) || st.regex->pattern() == "\\p{N}" || st.regex->pattern() == "\\p{N}+");
    if (!safe) m->cuttable = false;
  }
  for (const PreStep& st : m->steps) {
    if (!st.regex) continue;
    const std::string& p = st.regex->pattern();
    m->pattern_label = p == kGpt2Pattern ? "GPT-2 pattern" : p == kLlama3Pattern ? "Llama 3 pattern"
                       : p == kQwen2Pattern ? "Qwen 2 pattern" : m->pattern_label.empty() ? "custom pattern" : m->pattern_label;
  }
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(m)));
}

// ---- the Tokenizer interface ----------------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::unique_ptr<BpeModel> m) : m_(std::move(m)) {}
BpeTokenizer::~BpeTokenizer() = default;

int64_t BpeTokenizer::vocab_size() const { return static_cast<int64_t>(m_->token_bytes.size()); }
std::optional<uint32_t> BpeTokenizer::eos_id() const { return m_->eos; }

std::string BpeTokenizer::describe() const {
  return fmt::format("BPE {} (V = {}, {} merges{}{})", m_->name.substr(m_->name.find(' ') + 1), vocab_size(),
                     m_->merges_count, m_->pattern_label.empty() ? "" : ", ", m_->pattern_label);
}

void BpeTokenizer::chunk(std::string_view text, size_t target_bytes, std::vector<TextChunk>& chunks) const {
  thread_local std::vector<std::pair<int32_t, Piece>> parts;
  m_->split_added(text, parts);
  for (const auto& [idx, p] : parts) {
    if (idx >= 0) {
      chunks.push_back({m_->added[idx].id, p.b, p.e, p.b, p.e});
      continue;
    }
    size_t b = p.b;
    while (m_->cuttable && p.e - b > target_bytes + target_bytes / 2) {
      // The first '\n' followed by a letter at or after b + target_bytes.
      size_t cut = std::string_view::npos;
      for (size_t at = b + target_bytes; at + 1 < p.e;) {
        const size_t nl = text.find('\n', at);
        if (nl == std::string_view::npos || nl + 1 >= p.e) break;
        const auto c = static_cast<uint8_t>(text[nl + 1]);
        // A letter (\p{L}): ASCII at once, other characters through PCRE2.
        size_t ms, me;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= 0x80 && m_->letter->find(text.data(), std::min(p.e, nl + 5), nl + 1, ms, me) && ms == nl + 1)) {
          cut = nl + 1;
          break;
        }
        at = nl + 1;
      }
      if (cut == std::string_view::npos) break;
      chunks.push_back({TextChunk::kText, b, cut, p.b, p.e});
      b = cut;
    }
    chunks.push_back({TextChunk::kText, b, p.e, p.b, p.e});
  }
}

void BpeTokenizer::encode_chunk(std::string_view text, const TextChunk& c, std::vector<uint32_t>& out) const {
  if (c.added != TextChunk::kText) {
    out.push_back(c.added);
    return;
  }
  m_->encode_text(text, c.seg_begin, c.seg_end, c.begin, c.end, out);
}

void BpeTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  std::vector<std::pair<int32_t, Piece>> parts;
  m_->split_added(text, parts);
  for (const auto& [idx, p] : parts) {
    if (idx >= 0) out.push_back(m_->added[idx].id);
    else m_->encode_text(text, p.b, p.e, p.b, p.e, out);
  }
}

std::string BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id >= m_->token_bytes.size() || !m_->has_token[id])
      throw UsageError(fmt::format("{}: id {} at position {} is not a token of the vocabulary (V = {})", m_->name, id,
                                   i, vocab_size()));
    s += m_->token_bytes[id];
  }
  return s;
}

}  // namespace zerodp::data
