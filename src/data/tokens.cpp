#include "data/tokens.h"

#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::data {

namespace {

constexpr int32_t kVersionUint32 = 2;  // header [1] of uint32 tokens

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
template <class Tok>
size_t first_token_out_of_range(const Tok* tokens, size_t n, int vocab_size) {
  if (static_cast<uint64_t>(vocab_size) > std::numeric_limits<Tok>::max()) return n;
  const Tok limit = static_cast<Tok>(vocab_size);
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
    // The magic number always means the llm.c layout: a header that does not hold is an error,
    // never a raw stream.
    ZDP_REQUIRE(
        size >= kLlmcHeaderBytes,
        "token file '{}': bad header: it starts with the llm.c magic {} but is only {} bytes, less than "
        "the {}-byte header",
        path, kLlmcMagic, size, kLlmcHeaderBytes);
    const int32_t version = load_le32(bytes + 4);
    ZDP_REQUIRE(version == kLlmcVersion || version == kVersionUint32,
                "token file '{}': bad header: version {} (expected {} for uint16 tokens or {} for uint32 tokens)",
                path, version, kLlmcVersion, kVersionUint32);
    f.token_bytes_ = version == kLlmcVersion ? 2 : 4;
    const int32_t count = load_le32(bytes + 8);
    token_bytes = size - kLlmcHeaderBytes;
    const uint64_t width = static_cast<uint64_t>(f.token_bytes_);
    ZDP_REQUIRE(count >= 0 && static_cast<uint64_t>(count) * width == token_bytes,
                "token file '{}': bad header: it announces {} tokens but {} bytes of uint{} tokens follow it ({} tokens), "
                "in a file of {} bytes",
                path, count, token_bytes, 8 * width, token_bytes / width, size);
    ZDP_REQUIRE(count > 0, "token file '{}' holds no tokens (its header says 0)", path);
    first += kLlmcHeaderBytes;
    f.has_header_ = true;
  }
  ZDP_REQUIRE(token_bytes % 2 == 0, "token file '{}': {} bytes of tokens, an odd number (tokens are uint16)",
              path, token_bytes);
  f.num_tokens_ = token_bytes / static_cast<size_t>(f.token_bytes_);
  // The mapping is page-aligned and the header 1024 bytes: the tokens are aligned to their width.
  // The file is little-endian, as is every machine zerodp runs on.
  static_assert(std::endian::native == std::endian::little, "token files are read in place as little-endian");
  f.tokens_ = first;

  const size_t bad = f.token_bytes_ == 2
                         ? first_token_out_of_range(f.tokens16(), f.num_tokens_, vocab_size)
                         : first_token_out_of_range(f.tokens32(), f.num_tokens_, vocab_size);
  ZDP_REQUIRE(bad == f.num_tokens_,
              "token file '{}': token {} at position {} is not below the vocabulary size {}", path, f[bad], bad,
              vocab_size);
  return f;
}

void TokenFile::copy(size_t begin, size_t n, int32_t* dst) const {
  ZDP_CHECK(begin <= num_tokens_ && n <= num_tokens_ - begin, "tokens [{}, {}+{}) of the {} of '{}'", begin, begin,
            n, num_tokens_, path());
  if (token_bytes_ == 2) {
    const uint16_t* src = tokens16() + begin;
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    const uint32_t* src = tokens32() + begin;
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int32_t>(src[i]);
  }
}

std::string llmc_header(size_t num_tokens, int token_bytes) {
  ZDP_REQUIRE(num_tokens <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "{} tokens do not fit the llm.c header's int32 count", num_tokens);
  ZDP_CHECK(token_bytes == 2 || token_bytes == 4, "tokens of {} bytes", token_bytes);
  std::string h(kLlmcHeaderBytes, '\0');
  store_le32(h.data(), kLlmcMagic);
  store_le32(h.data() + 4, token_bytes == 2 ? kLlmcVersion : kVersionUint32);
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
