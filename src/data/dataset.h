// A dataset (docs/reference/files.md#datasets): one stream of tokens made of one or more token
// files (shards), read end to end in sorted name order. `--data` and `--val-data` name it as
//   - a token file;
//   - a directory: every `*.bin` file in it (not its subdirectories);
//   - a glob pattern (glob(3): `*`, `?`, `[...]`): every regular file it matches.
// Positions index the whole stream: the offsets of docs/reference/data-order.md#ranks (modulo its
// length), the shuffled windows of data/loader.h and the validation windows all run across shard
// boundaries as if the files were one. Shards may mix uint16 and uint32 tokens (data/tokens.h);
// each is memory-mapped, never read whole, and validated (every token below the vocabulary) when
// the stream is opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokens.h"

namespace zerodp::data {

// At most this many shards in one stream (docs/limits.md): each is a mapping and an open descriptor.
constexpr size_t kMaxShards = 100'000;

// The files `spec` names, in the order the stream reads them (sorted by name, byte-wise). A UsageError
// naming the pattern when nothing matches (or a directory holds no `*.bin`), or when more than
// kMaxShards do. A spec that is neither an existing path nor a pattern is returned as it is, for
// TokenFile::open to say what is wrong with it.
std::vector<std::string> match_token_files(const std::string& spec);

class TokenStream {
 public:
  TokenStream() = default;
  // Opens every file `spec` names (match_token_files) with TokenFile::open.
  static TokenStream open(const std::string& spec, int vocab_size);
  // A stream of the given shards, in that order (at least one).
  explicit TokenStream(std::vector<TokenFile> shards, std::string spec = "");

  // Tokens in the whole stream.
  uint64_t size() const { return starts_.empty() ? 0 : starts_.back(); }
  size_t num_shards() const { return shards_.size(); }
  const TokenFile& shard(size_t i) const { return shards_.at(i); }
  // Where shard i starts in the stream.
  uint64_t shard_start(size_t i) const { return starts_.at(i); }
  const std::string& spec() const { return spec_; }
  // "'tok.bin'" or "'dir' (3 files)" for messages and logs.
  std::string describe() const;

  // Copies the n tokens at positions pos, pos + 1, ... of the stream (each modulo size()) into dst,
  // widened to int32: one contiguous copy per run within a shard (one lookup of the first shard).
  void read(uint64_t pos, size_t n, int32_t* dst) const;
  // The token at position pos (< size()).
  uint32_t at(uint64_t pos) const;

 private:
  size_t shard_of(uint64_t pos) const;  // pos < size()

  std::vector<TokenFile> shards_;
  std::vector<uint64_t> starts_;  // starts_[i]: shard i's first position; starts_.back(): size()
  std::string spec_;
};

}  // namespace zerodp::data
