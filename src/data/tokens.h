// Token files (contract §4), memory-mapped: either a raw stream of little-endian uint16 tokens, or
// llm.c's layout, a 1024-byte header of 256 little-endian int32 ([0] = 20240520, [1] = 1,
// [2] = number of tokens) followed by the uint16 tokens. The layout is told apart by the magic
// number in the first 4 bytes (a raw stream that happens to start with tokens 0xD888, 0x0134 would
// be taken for a header; it is then refused unless the rest of the header also holds).
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
constexpr int32_t kLlmcVersion = 1;
constexpr size_t kLlmcHeaderBytes = 1024;

class TokenFile {
 public:
  // Maps and validates `path`: not empty, an even number of bytes, a well-formed header if there
  // is one (version, token count matching the file's size), and every token < vocab_size. Each
  // problem is a UsageError naming the file (and, for a bad token, its position and value).
  static TokenFile open(const std::string& path, int vocab_size);

  size_t size() const { return num_tokens_; }
  const uint16_t* tokens() const { return tokens_; }
  uint16_t operator[](size_t i) const { return tokens_[i]; }
  bool has_llmc_header() const { return has_header_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  const uint16_t* tokens_ = nullptr;
  size_t num_tokens_ = 0;
  bool has_header_ = false;
};

// The 1024-byte llm.c header for `num_tokens` tokens.
std::string llmc_header(size_t num_tokens);
// Writes tokens atomically, in llm.c's layout (or raw, without the header).
void write_token_file(const std::string& path, const uint16_t* tokens, size_t n, bool llmc_layout = true);

}  // namespace zerodp::data
