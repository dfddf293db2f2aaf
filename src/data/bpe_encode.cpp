// Encoding one pre-token with a loaded BPE model (bpe_model.h): its first symbols (bytes, or
// characters with byte fallback and unknown tokens), the per-thread cache and the BPE merges.
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

// A pre-token's first symbols in a vocabulary that is not byte-level, as tokenizers' BPE::merge_word:
// each character's token; for a character without one, its bytes' <0xAB> tokens (byte_fallback,
// when all are there), else the unknown token (one for a run of them with fuse_unk), else nothing.
// A byte of an invalid UTF-8 sequence counts as a character of its own that has no token. (As in
// the library, an unknown token still pending is written after a byte fallback that follows it.)
void BpeModel::initial_chars(std::string_view w, std::vector<uint32_t>& sym) const {
  bool unk_pending = false;
  for (size_t i = 0; i < w.size();) {
    uint32_t cp = 0;
    size_t n = valid_utf8_at(w, i, cp);
    auto it = n ? char_id.find(cp) : char_id.end();
    if (n == 0) n = 1;
    if (it != char_id.end()) {
      if (unk_pending) sym.push_back(*unk_id);
      unk_pending = false;
      sym.push_back(it->second);
      i += n;
      continue;
    }
    bool fell_back = byte_fallback;
    for (size_t k = 0; fell_back && k < n; ++k) fell_back = fallback_id[static_cast<uint8_t>(w[i + k])] >= 0;
    if (fell_back) {
      for (size_t k = 0; k < n; ++k) sym.push_back(static_cast<uint32_t>(fallback_id[static_cast<uint8_t>(w[i + k])]));
    } else if (unk_id) {
      if (unk_pending && !fuse_unk) sym.push_back(*unk_id);
      unk_pending = true;
    }
    i += n;
  }
  if (unk_pending) sym.push_back(*unk_id);
}

// BPE of one pre-token.
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
  if (!byte_level) {
    initial_chars(w, sym);
  } else {
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


// A pre-token the pre-tokenizer leaves whole, cut where no merge can join across (bpe_model.h:
// word_cut), each piece through the cache.
void BpeModel::encode_whole(std::string_view w, std::vector<uint32_t>& out) const {
  if (word_cut.empty()) {
    encode_word(w, out);
    return;
  }
  size_t begin = 0;
  for (size_t at = w.find(word_cut, 1); at != std::string_view::npos; at = w.find(word_cut, at + 1)) {
    // (a character without a token of its own ends in a byte-fallback or unknown token, which a
    // merge might join: no cut after one)
    size_t prev_start;
    uint32_t prev = 0;
    prev_code_point(w, at, prev_start);
    if (prev_start + valid_utf8_at(w, prev_start, prev) != at) continue;  // an invalid byte
    if (joins_word_cut.count(prev) || !char_id.count(prev)) continue;
    encode_word(w.substr(begin, at - begin), out);
    begin = at;
  }
  encode_word(w.substr(begin), out);
}

}  // namespace zerodp::data
