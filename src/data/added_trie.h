// The added tokens of a byte-level BPE (bpe.h) as a byte trie: the longest token that starts at a
// position of a text is found in as many steps as it has bytes (at most BpeLimits::kMaxTokenBytes),
// whatever the number of tokens. A tokenizer.json with 300,000 added tokens used to load in time
// quadratic in their number and to compare each position of a text with every token of its first
// byte; the trie costs time linear in the tokens' bytes to build and none per token to match.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace zerodp::data {

class AddedTrie {
 public:
  static constexpr int32_t kNone = -1;

  AddedTrie();

  // Adds `bytes` (not empty) as token `index`. False if the same bytes were added already.
  bool insert(std::string_view bytes, uint32_t index);

  // The token of the longest prefix of s[at, ...) that is a token: its index, and its length in
  // `len`; kNone when no token starts there.
  int32_t longest(std::string_view s, size_t at, size_t& len) const;

  // Whether some token starts with byte c (a scan skips the other bytes without a lookup).
  bool starts_with(uint8_t c) const { return root_[c] != kNoNode; }
  // The only first byte of all the tokens, or -1 when there are several or none (a scan then uses
  // memchr: the special tokens of most tokenizers all start with '<').
  int single_first_byte() const;
  bool empty() const { return terminal_.size() == 1; }

 private:
  static constexpr uint32_t kNoNode = 0xFFFFFFFFu;
  // Edges below the root: (node, byte) -> child, open addressing on one key.
  static uint64_t edge_key(uint32_t node, uint8_t c) { return uint64_t{node} << 8 | c; }
  uint32_t child(uint32_t node, uint8_t c) const;
  uint32_t add_child(uint32_t node, uint8_t c);
  void grow();

  uint32_t root_[256];                // the root's children, directly
  std::vector<int32_t> terminal_;     // node -> the token ending there, or kNone (node 0: the root)
  std::vector<uint64_t> keys_;        // edge_key, or kEmpty
  std::vector<uint32_t> children_;    // beside keys_
  size_t edges_ = 0;
  size_t mask_ = 0;
};

}  // namespace zerodp::data
