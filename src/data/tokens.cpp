#include "data/tokens.h"

#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::data {

namespace {

int32_t load_le32(const uint8_t* p) {
  const uint32_t u = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                     static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
  return static_cast<int32_t>(u);
}

void store_le32(char* p, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((u >> (8 * i)) & 0xFF);
}

// The index of the first token >= vocab_size, or n when all are below it.
size_t first_token_out_of_range(const uint16_t* tokens, size_t n, int vocab_size) {
  if (vocab_size > std::numeric_limits<uint16_t>::max()) return n;
  const uint16_t limit = static_cast<uint16_t>(vocab_size);
  size_t first = n;
#pragma omp parallel for reduction(min : first) schedule(static) if (n > (1u << 20))
  for (size_t i = 0; i < n; ++i)
    if (tokens[i] >= limit && i < first) first = i;
  return first;
}

}  // namespace

TokenFile TokenFile::open(const std::string& path, int vocab_size) {
  ZDP_REQUIRE(vocab_size > 0, "token file '{}': vocabulary size {} is not positive", path, vocab_size);
  TokenFile f;
  f.file_ = MappedFile(path);
  const uint8_t* bytes = f.file_.data();
  const size_t size = f.file_.size();
  ZDP_REQUIRE(size > 0, "token file '{}' is empty", path);

  size_t token_bytes = size;
  const uint8_t* first = bytes;
  if (size >= 4 && load_le32(bytes) == kLlmcMagic) {
    ZDP_REQUIRE(
        size >= kLlmcHeaderBytes,
        "token file '{}': bad header: it starts with the llm.c magic {} but is only {} bytes, less than "
        "the {}-byte header",
        path, kLlmcMagic, size, kLlmcHeaderBytes);
    const int32_t version = load_le32(bytes + 4);
    ZDP_REQUIRE(version == kLlmcVersion,
                "token file '{}': bad header: version {} (expected {}, uint16 tokens)", path, version,
                kLlmcVersion);
    const int32_t count = load_le32(bytes + 8);
    token_bytes = size - kLlmcHeaderBytes;
    ZDP_REQUIRE(
        count >= 0 && static_cast<uint64_t>(count) * 2 == token_bytes,
        "token file '{}': bad header: it announces {} tokens but {} bytes of tokens follow it ({} tokens)",
        path, count, token_bytes, token_bytes / 2);
    ZDP_REQUIRE(count > 0, "token file '{}' holds no tokens (its header says 0)", path);
    first += kLlmcHeaderBytes;
    f.has_header_ = true;
  }
  ZDP_REQUIRE(token_bytes % 2 == 0, "token file '{}': {} bytes of tokens, an odd number (tokens are uint16)",
              path, token_bytes);
  f.num_tokens_ = token_bytes / 2;
  // The mapping is page-aligned and the header 1024 bytes: the tokens are 2-byte aligned. The file
  // is little-endian, as is every machine zerodp runs on.
  static_assert(std::endian::native == std::endian::little, "token files are read in place as little-endian");
  f.tokens_ = reinterpret_cast<const uint16_t*>(first);

  const size_t bad = first_token_out_of_range(f.tokens_, f.num_tokens_, vocab_size);
  ZDP_REQUIRE(bad == f.num_tokens_,
              "token file '{}': token {} at position {} is not below the vocabulary size {}", path,
              f.tokens_[bad], bad, vocab_size);
  return f;
}

std::string llmc_header(size_t num_tokens) {
  ZDP_REQUIRE(num_tokens <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "{} tokens do not fit the llm.c header's int32 count", num_tokens);
  std::string h(kLlmcHeaderBytes, '\0');
  store_le32(h.data(), kLlmcMagic);
  store_le32(h.data() + 4, kLlmcVersion);
  store_le32(h.data() + 8, static_cast<int32_t>(num_tokens));
  return h;
}

void write_token_file(const std::string& path, const uint16_t* tokens, size_t n, bool llmc_layout) {
  AtomicFile out(path);
  if (llmc_layout) out.write(llmc_header(n));
  out.write(tokens, n * sizeof(uint16_t));
  out.commit();
}

}  // namespace zerodp::data
