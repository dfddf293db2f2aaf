// Token files written by `zerodp tokenize` (docs/reference/files.md#token-files): llm.c's layout, a
// 1024-byte header of 256 little-endian int32 ([0] = 20240520, [1] = 1 for uint16 tokens or 2 for
// uint32 tokens, [2] = number of tokens) followed by the tokens, little-endian. uint16 when every
// id fits (vocabulary ≤ 65,536), uint32 otherwise.
//
// TokenWriter streams: the header goes first with a count of 0 and is patched with the real count
// at commit(), just before the file is published atomically (core/fs.h's AtomicFile: until then
// the tokens live in a temporary beside the target, and an existing file at the path is untouched).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/fs.h"

namespace zerodp::data {

constexpr int32_t kLlmcVersionU16 = 1;
constexpr int32_t kLlmcVersionU32 = 2;
// The most tokens one file may hold: the header's count is an int32.
constexpr size_t kMaxTokensPerFile = 2147483647;

// The header version for a vocabulary: 1 (uint16) when vocab_size ≤ 65,536, else 2 (uint32).
int32_t token_file_version(int64_t vocab_size);
// The 1024-byte header for `num_tokens` tokens of `version`.
std::string token_file_header(size_t num_tokens, int32_t version);

class TokenWriter {
 public:
  // Starts the file at `path` (nothing visible there until commit()). Ids must be < vocab_size.
  TokenWriter(std::string path, int64_t vocab_size);
  ~TokenWriter();
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  // Appends tokens; a UsageError when the file would pass kMaxTokensPerFile tokens.
  void append(std::span<const uint32_t> ids);
  // Patches the header's count and publishes the file. A file of no tokens is a UsageError.
  void commit();

  size_t count() const { return count_; }
  const std::string& path() const { return file_->path(); }
  int32_t version() const { return version_; }

 private:
  std::unique_ptr<AtomicFile> file_;
  int64_t vocab_size_;
  int32_t version_;
  size_t count_ = 0;
  std::vector<uint16_t> narrow_;
};

// Writes `ids` to `path` in one go (atomically).
void write_tokens(const std::string& path, std::span<const uint32_t> ids, int64_t vocab_size);

// Reads a token file of either version (or a raw uint16 stream without a header) into ids, checking
// each id < vocab_size. UsageError naming the file for a bad header, a count that does not match
// the size, or an id out of range.
std::vector<uint32_t> read_tokens(const std::string& path, int64_t vocab_size);

}  // namespace zerodp::data
