// A map of at most `capacity` entries that forgets the least recently used one to make room: the GEMM
// plan cache (cuda/gemm.cpp). Without a bound that cache grew by a few plans with every token `zerodp
// sample` generated (each new sequence length is a new GEMM shape), for as long as the process lived.
// Forgetting a plan costs a heuristic call when its shape comes back, and changes no result: the
// heuristic's first choice for a key is the same every time on the same GPU and library.
//
// Host logic only, so that the CPU test suite covers it (tests/cuda/). Not thread-safe: its owner
// serializes the calls (GemmContext's mutex).
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace zerodp::cuda {

template <class K, class V, class Hash = std::hash<K>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {
    if (capacity_ == 0) throw std::invalid_argument("LruCache: capacity 0");
  }

  // The value for `key`, now the most recently used; nullptr when absent.
  V* find(const K& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Inserts (key, value) as the most recently used, first forgetting the least recently used entry
  // when full; the key must be absent. The reference stays valid until that entry is forgotten.
  V& insert(const K& key, V value) {
    if (index_.size() == capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return order_.front().second;
  }

  void clear() {
    index_.clear();
    order_.clear();
  }
  size_t size() const { return index_.size(); }
  size_t capacity() const { return capacity_; }
  size_t evictions() const { return evictions_; }

 private:
  using Entry = std::pair<K, V>;
  size_t capacity_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<K, typename std::list<Entry>::iterator, Hash> index_;
  size_t evictions_ = 0;
};

}  // namespace zerodp::cuda
