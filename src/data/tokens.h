// Token files (docs/reference/files.md#token-files), memory-mapped: either a raw stream of
// little-endian uint16 tokens, or llm.c's layout, a 1024-byte header of 256 little-endian int32
// ([0] = 20240520, [1] = the token width: 1 for uint16 tokens, 2 for uint32 tokens, [2] = number of
// tokens) followed by the tokens.
// A file whose first 4 bytes are the magic number is ALWAYS read as that layout: there is no falling
// back to raw (a raw stream that happens to start with tokens 0xD888, 0x0134 is refused unless the
// rest of the header also holds). Raw files are uint16.
//
// Bounds (docs/limits.md): only regular files are opened (a FIFO is refused without waiting for a
// writer); the file is mapped, never copied; a header's count must match the file's size before
// any token is looked at, so a header that lies costs nothing whatever it claims.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/fs.h"

namespace zerodp::data {

constexpr int32_t kLlmcMagic = 20240520;
constexpr int32_t kLlmcVersion = 1;  // header [1] of uint16 tokens (2: uint32 tokens)
constexpr size_t kLlmcHeaderBytes = 1024;

class TokenFile {
 public:
  // Maps and validates `path`: not empty, a whole number of tokens, a well-formed header if there
  // is one (width 1 or 2, token count matching the file's size), and every token < vocab_size. Each
  // problem is a UsageError naming the file (and, for a bad token, its position and value).
  static TokenFile open(const std::string& path, int vocab_size);

  size_t size() const { return num_tokens_; }
  // Bytes per token: 2 (raw, or header [1] = 1) or 4 (header [1] = 2).
  int token_bytes() const { return token_bytes_; }
  // The tokens in place, of the file's width (the other is null).
  const uint16_t* tokens16() const { return token_bytes_ == 2 ? static_cast<const uint16_t*>(tokens_) : nullptr; }
  const uint32_t* tokens32() const { return token_bytes_ == 4 ? static_cast<const uint32_t*>(tokens_) : nullptr; }
  uint32_t operator[](size_t i) const { return token_bytes_ == 2 ? tokens16()[i] : tokens32()[i]; }
  // Copies tokens [begin, begin + n) (within the file) into dst, widened to int32 (every token is
  // below the vocabulary size, an int).
  void copy(size_t begin, size_t n, int32_t* dst) const;
  bool has_llmc_header() const { return has_header_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  const void* tokens_ = nullptr;
  size_t num_tokens_ = 0;
  int token_bytes_ = 2;
  bool has_header_ = false;
};

// The 1024-byte llm.c header for `num_tokens` tokens of `token_bytes` bytes each (2: header [1] = 1,
// 4: header [1] = 2).
std::string llmc_header(size_t num_tokens, int token_bytes = 2);
// Writes tokens atomically, in llm.c's layout (or raw, without the header).
void write_token_file(const std::string& path, const uint16_t* tokens, size_t n, bool llmc_layout = true);

}  // namespace zerodp::data
