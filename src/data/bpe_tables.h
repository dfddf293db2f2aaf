// The byte-level BPE tokenizer's flat tables (bpe.h): the merge table (left id, right id) ->
// (rank, merged id), and the per-thread cache of pre-token bytes -> ids. Both sit on the encoding's
// hot path, so they are header-only and open-addressed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "data/hash.h"

namespace zerodp::data {

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

inline constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

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


}  // namespace zerodp::data
