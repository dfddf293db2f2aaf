#include "data/added_trie.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "data/hash.h"

namespace zerodp::data {

namespace {
constexpr uint64_t kEmpty = ~uint64_t{0};
}

AddedTrie::AddedTrie() : terminal_(1, kNone), keys_(16, kEmpty), children_(16, 0), mask_(15) {
  std::fill(std::begin(root_), std::end(root_), kNoNode);
}

uint32_t AddedTrie::child(uint32_t node, uint8_t c) const {
  if (node == 0) return root_[c];
  const uint64_t k = edge_key(node, c);
  for (size_t i = mix64(k) & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == k) return children_[i];
    if (keys_[i] == kEmpty) return kNoNode;
  }
}

uint32_t AddedTrie::add_child(uint32_t node, uint8_t c) {
  const auto made = static_cast<uint32_t>(terminal_.size());
  terminal_.push_back(kNone);
  if (node == 0) {
    root_[c] = made;
    return made;
  }
  // At most half full, so that a miss ends after a probe or two.
  if (2 * (edges_ + 1) > keys_.size()) grow();
  const uint64_t k = edge_key(node, c);
  size_t i = mix64(k) & mask_;
  while (keys_[i] != kEmpty) i = (i + 1) & mask_;
  keys_[i] = k;
  children_[i] = made;
  ++edges_;
  return made;
}

void AddedTrie::grow() {
  std::vector<uint64_t> old_keys = std::move(keys_);
  std::vector<uint32_t> old_children = std::move(children_);
  keys_.assign(old_keys.size() * 2, kEmpty);
  children_.assign(old_keys.size() * 2, 0);
  mask_ = keys_.size() - 1;
  for (size_t j = 0; j < old_keys.size(); ++j) {
    if (old_keys[j] == kEmpty) continue;
    size_t i = mix64(old_keys[j]) & mask_;
    while (keys_[i] != kEmpty) i = (i + 1) & mask_;
    keys_[i] = old_keys[j];
    children_[i] = old_children[j];
  }
}

bool AddedTrie::insert(std::string_view bytes, uint32_t index) {
  uint32_t node = 0;
  for (char ch : bytes) {
    const auto c = static_cast<uint8_t>(ch);
    const uint32_t next = child(node, c);
    node = next != kNoNode ? next : add_child(node, c);
  }
  if (terminal_[node] != kNone) return false;
  terminal_[node] = static_cast<int32_t>(index);
  return true;
}

int32_t AddedTrie::longest(std::string_view s, size_t at, size_t& len) const {
  int32_t found = kNone;
  uint32_t node = 0;
  for (size_t i = at; i < s.size(); ++i) {
    node = child(node, static_cast<uint8_t>(s[i]));
    if (node == kNoNode) break;
    if (terminal_[node] != kNone) {
      found = terminal_[node];
      len = i + 1 - at;
    }
  }
  return found;
}

int AddedTrie::single_first_byte() const {
  int only = -1;
  for (int c = 0; c < 256; ++c) {
    if (root_[c] == kNoNode) continue;
    if (only >= 0) return -1;
    only = c;
  }
  return only;
}

}  // namespace zerodp::data
