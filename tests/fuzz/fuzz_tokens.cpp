// libFuzzer target: zerodp::data::TokenFile::open, which takes a path and maps the file. The input is
// written to an anonymous in-memory file (memfd_create, created once) that is opened as
// /proc/self/fd/N, so no disk is touched. Each input is opened with a byte-level vocabulary (256,
// the demo's) and GPT-2's (50257), so that both the accepted path and the bad-token path run. An
// accepted file must have exactly as many tokens as its bytes allow (uint16, or uint32 under a
// header), all below the vocabulary.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "data/tokens.h"
#include "fuzz/fuzz_common.h"

namespace {

int input_fd() {
  static const int fd = [] {
    const int f = memfd_create("zerodp-fuzz-tokens", MFD_CLOEXEC);
    if (f < 0) {
      std::fprintf(stderr, "fuzz_tokens: memfd_create: %s\n", std::strerror(errno));
      std::abort();
    }
    return f;
  }();
  return fd;
}

void write_input(int fd, const uint8_t* data, size_t size) {
  if (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    std::fprintf(stderr, "fuzz_tokens: ftruncate: %s\n", std::strerror(errno));
    std::abort();
  }
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) {
      std::fprintf(stderr, "fuzz_tokens: pwrite: %s\n", std::strerror(errno));
      std::abort();
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = input_fd();
  write_input(fd, data, size);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  for (const int vocab : {256, 50257}) {
    zerodp::fuzz::only_zerodp_errors("tokens", [&] {
      const auto f = zerodp::data::TokenFile::open(path, vocab);
      const size_t header = f.has_llmc_header() ? zerodp::data::kLlmcHeaderBytes : 0;
      const size_t width = static_cast<size_t>(f.token_bytes());
      if ((width != 2 && width != 4) || (width == 4 && header == 0))
        zerodp::fuzz::property_failed("tokens", "a token width other than uint16, or uint32 without a header");
      if (size < header || f.size() != (size - header) / width || f.size() == 0)
        zerodp::fuzz::property_failed("tokens", "the token count does not match the file's size");
      for (size_t i = 0; i < f.size(); ++i)
        if (f[i] >= static_cast<uint32_t>(vocab)) zerodp::fuzz::property_failed("tokens", "an accepted token is not below the vocabulary");
    });
  }
  return 0;
}
