#include "data/token_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "data/tokens.h"

namespace zerodp::data {

static_assert(std::endian::native == std::endian::little, "token files are written as little-endian memory");

namespace {

void store_le32(char* p, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((u >> (8 * i)) & 0xFF);
}
int32_t load_le32(const uint8_t* p) {
  return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                              static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

int32_t token_file_version(int64_t vocab_size) { return vocab_size <= 65536 ? kLlmcVersionU16 : kLlmcVersionU32; }

std::string token_file_header(size_t num_tokens, int32_t version) {
  ZDP_REQUIRE(num_tokens <= kMaxTokensPerFile, "{} tokens do not fit the llm.c header's int32 count", num_tokens);
  std::string h(kLlmcHeaderBytes, '\0');
  store_le32(h.data(), kLlmcMagic);
  store_le32(h.data() + 4, version);
  store_le32(h.data() + 8, static_cast<int32_t>(num_tokens));
  return h;
}

TokenWriter::TokenWriter(std::string path, int64_t vocab_size)
    : file_(std::make_unique<AtomicFile>(std::move(path))), vocab_size_(vocab_size),
      version_(token_file_version(vocab_size)) {
  file_->write(token_file_header(0, version_));
}

TokenWriter::~TokenWriter() = default;

void TokenWriter::append(std::span<const uint32_t> ids) {
  ZDP_REQUIRE(ids.size() <= kMaxTokensPerFile - count_,
              "token file '{}': more than {} tokens, which the llm.c header's int32 count cannot hold "
              "(write shards: --out-prefix with --shard-tokens)",
              file_->path(), kMaxTokensPerFile);
  if (version_ == kLlmcVersionU16) {
    narrow_.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) narrow_[i] = static_cast<uint16_t>(ids[i]);
    file_->write(narrow_.data(), narrow_.size() * sizeof(uint16_t));
  } else {
    file_->write(ids.data(), ids.size() * sizeof(uint32_t));
  }
  count_ += ids.size();
}

void TokenWriter::commit() {
  ZDP_REQUIRE(count_ > 0, "token file '{}' would hold no tokens (a token file may not be empty)", file_->path());
  // The count, written over the placeholder through a second descriptor to the same temporary:
  // commit()'s fsync flushes the file's pages whichever descriptor dirtied them.
  const std::string header = token_file_header(count_, version_);
  const int fd = ::open(file_->temp_path().c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::pwrite(fd, header.data() + 8, 4, 8) != 4) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    file_->abandon();
    throw RuntimeFailure(fmt::format("writing the header of '{}' (temporary '{}'): {}", file_->path(),
                                     file_->temp_path(), std::strerror(err)));
  }
  ::close(fd);
  file_->commit();
}

void write_tokens(const std::string& path, std::span<const uint32_t> ids, int64_t vocab_size) {
  TokenWriter w(path, vocab_size);
  w.append(ids);
  w.commit();
}

std::vector<uint32_t> read_tokens(const std::string& path, int64_t vocab_size) {
  const MappedFile f(path);
  const uint8_t* p = f.data();
  const size_t size = f.size();
  ZDP_REQUIRE(size > 0, "token file '{}' is empty", path);
  size_t width = 2, skip = 0;
  if (size >= 4 && load_le32(p) == kLlmcMagic) {
    ZDP_REQUIRE(size >= kLlmcHeaderBytes, "token file '{}': bad header: {} bytes, less than the {}-byte header", path,
                size, kLlmcHeaderBytes);
    const int32_t version = load_le32(p + 4);
    ZDP_REQUIRE(version == kLlmcVersionU16 || version == kLlmcVersionU32,
                "token file '{}': bad header: version {} (1: uint16 tokens, 2: uint32 tokens)", path, version);
    width = version == kLlmcVersionU16 ? 2 : 4;
    const int32_t count = load_le32(p + 8);
    ZDP_REQUIRE(count >= 0 && static_cast<uint64_t>(count) * width == size - kLlmcHeaderBytes,
                "token file '{}': bad header: it announces {} tokens but {} bytes of {}-byte tokens follow it", path,
                count, size - kLlmcHeaderBytes, width);
    skip = kLlmcHeaderBytes;
  }
  ZDP_REQUIRE((size - skip) % width == 0, "token file '{}': {} bytes of tokens, not a multiple of {}", path,
              size - skip, width);
  const size_t n = (size - skip) / width;
  std::vector<uint32_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = 0;
    std::memcpy(&v, p + skip + i * width, width);
    ZDP_REQUIRE(v < static_cast<uint64_t>(vocab_size),
                "token file '{}': token {} at position {} is not below the vocabulary size {}", path, v, i, vocab_size);
    ids[i] = v;
  }
  return ids;
}

}  // namespace zerodp::data
