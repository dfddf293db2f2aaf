// Encoding with a loaded byte-level BPE model (bpe_model.h): added tokens split out, pre-tokenizer
// steps, the per-thread cache and BPE merges, in the order bpe.h describes.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <queue>

#include "data/bpe.h"
#include "data/bpe_model.h"
#include "data/byte_level.h"
#include "data/hash.h"

namespace zerodp::data {

uint64_t next_bpe_model_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

// Splits text[b, e) on the added tokens of pass `pass` (0: not normalized, 1: normalized; with
// one pass, all), as tokenizers' AddedVocabulary::find_matches. Appends (token index or -1, range).
void BpeModel::find_added(std::string_view text, size_t b, size_t e, int pass, std::vector<std::pair<int32_t, Piece>>& out) const {
  const std::string_view s = text.substr(b, e - b);
  size_t start_offset = 0;
  size_t i = 0;
  const AddedTrie& trie = added_tries[pass];
  while (i < s.size()) {
    if (single_first[pass] >= 0) {
      const void* hit_at = std::memchr(s.data() + i, single_first[pass], s.size() - i);
      if (!hit_at) break;
      i = static_cast<size_t>(static_cast<const char*>(hit_at) - s.data());
    } else if (!trie.starts_with(static_cast<uint8_t>(s[i]))) {
      ++i;
      continue;
    }
    // Leftmost-longest, as tokenizers' Aho-Corasick (MatchKind::LeftmostLongest): the first position
    // where a token starts, the longest token there.
    size_t len = 0;
    const int32_t hit = trie.longest(s, i, len);
    if (hit == AddedTrie::kNone) {
      ++i;
      continue;
    }
    const AddedToken& t = added[hit];
    size_t start = i, stop = i + len;
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

bool BpeModel::starts_with_word(std::string_view s, size_t at) const {
  size_t ms, me;
  RegexBudget budget(4);  // one character class on one character
  return word_char->find(s.data(), std::min(s.size(), at + 4), at, ms, me, budget) && ms == at;
}

bool BpeModel::ends_with_word(std::string_view s, size_t end) const {
  size_t cs;
  prev_code_point(s, end, cs);
  size_t ms, me;
  RegexBudget budget(4);
  return word_char->find(s.data(), end, cs, ms, me, budget) && ms == cs;
}

// BPE of one pre-token's bytes.
void BpeModel::bpe(std::string_view w, std::vector<uint32_t>& out) const {
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
void BpeModel::merge_small(std::vector<uint32_t>& sym) const {
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
void BpeModel::merge_large(std::vector<uint32_t>& sym) const {
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
void BpeModel::encode_word(std::string_view w, std::vector<uint32_t>& out) const {
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

// Runs steps[k..] over subject[from, to) (the regexes see all of subject) and BPE-encodes the
// pre-tokens.
void BpeModel::pretokenize(size_t k, std::string_view subject, size_t from, size_t to, RegexBudget& budget,
                           std::vector<uint32_t>& out) const {
  if (k == steps.size()) {
    encode_word(subject.substr(from, to - from), out);
    return;
  }
  const PreStep& st = steps[k];
  auto next = [&](size_t b, size_t e) {
    if (k + 1 == steps.size()) encode_word(subject.substr(b, e - b), out);
    else pretokenize(k + 1, subject.substr(b, e - b), 0, e - b, budget, out);
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
      if (!st.regex->find(subject.data(), subject.size(), pos, ms, me, budget) || ms >= to) break;
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
void BpeModel::encode_text(std::string_view text, size_t sb, size_t se, size_t from, size_t to, std::vector<uint32_t>& out) const {
  if (to <= from) return;
  std::string_view subject = text.substr(sb, se - sb);
  from -= sb, to -= sb;
  if (prefix_space && subject[0] != ' ') {
    thread_local std::string buf;
    buf.assign(1, ' ');
    buf.append(subject);
    subject = buf;
    to = subject.size();  // never cut (cuttable is false with a prefix space)
  }
  if (steps.empty()) {
    encode_word(subject.substr(from, to - from), out);
  } else {
    // One budget for all the steps' regexes over this text (bpe_regex.h); a Sequence's later steps
    // see the pieces of the earlier ones, the same bytes again.
    RegexBudget budget(to - from, regex_steps);
    pretokenize(0, subject, from, to, budget, out);
  }
}

// The pieces of `text` between and around added tokens.
void BpeModel::split_added(std::string_view text, std::vector<std::pair<int32_t, Piece>>& parts) const {
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
  }}


}  // namespace zerodp::data
