#include "data/tokenize.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/fs.h"
#include "data/tokens.h"

namespace zerodp::data {

size_t tokenize_bytes(const std::string& text_path, const std::string& out_path) {
  const MappedFile text(text_path);
  ZDP_REQUIRE(text.size() > 0, "text file '{}' is empty: nothing to tokenize", text_path);
  AtomicFile out(out_path);
  out.write(llmc_header(text.size()));
  constexpr size_t kChunk = 1 << 15;
  uint16_t tokens[kChunk];
  for (size_t done = 0; done < text.size();) {
    const size_t n = std::min(kChunk, text.size() - done);
    for (size_t i = 0; i < n; ++i) tokens[i] = text.data()[done + i];  // little-endian in memory
    out.write(tokens, n * sizeof(uint16_t));
    done += n;
  }
  out.commit();
  return text.size();
}

}  // namespace zerodp::data
