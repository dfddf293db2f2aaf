// Token files from outside (docs/limits.md): a header whose count lies, whatever the size it claims,
// is refused from the header and the file's size alone (no token is read, nothing is allocated), and
// what is not a regular file (a FIFO, a directory, a device) is refused without waiting on it.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/tokens.h"

namespace zerodp::data {
namespace {

namespace fs = std::filesystem;

class TokenLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_toklim_" + std::to_string(::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // A file of `size` bytes whose first bytes are `head` (the rest a hole: no disk, no memory).
  std::string sparse(const std::string& name, const std::string& head, uint64_t size) {
    const std::string p = path(name);
    write_file_atomic(p, head);
    fs::resize_file(p, size);
    return p;
  }

  // The message of the UsageError opening `file` throws; it must name the file, stay on one short
  // line and come at once.
  std::string refusal(const std::string& file, int vocab = 256) {
    const auto start = std::chrono::steady_clock::now();
    std::string what;
    try {
      TokenFile::open(file, vocab);
      ADD_FAILURE() << "opened " << file;
    } catch (const UsageError& e) {
      what = e.what();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(secs, 0.5) << what;
    EXPECT_NE(what.find(file), std::string::npos) << what;
    EXPECT_LT(what.size(), 300u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    return what;
  }

  std::string dir_;
};

std::string header(int32_t count) {
  std::string h = llmc_header(0);
  for (int b = 0; b < 4; ++b) h[static_cast<size_t>(8 + b)] = static_cast<char>((static_cast<uint32_t>(count) >> (8 * b)) & 0xFF);
  return h;
}

TEST_F(TokenLimitsTest, LyingHeaderCountsAreRefusedFromTheSizeAlone) {
  // Claims the most an int32 allows over 10 tokens.
  std::string f = path("max.bin");
  write_file_atomic(f, header(INT32_MAX) + std::string(20, '\x01'));
  EXPECT_NE(refusal(f).find("announces 2147483647 tokens but 20 bytes"), std::string::npos);
  // Claims 5 tokens over 32 GiB (sparse): refused without scanning a byte of the tokens.
  f = sparse("huge.bin", header(5), uint64_t{32} << 30);
  EXPECT_NE(refusal(f).find("announces 5 tokens"), std::string::npos);
  // A negative count (a uint32 over 2^31 read as int32).
  f = path("neg.bin");
  write_file_atomic(f, header(INT32_MIN) + std::string(4, '\x01'));
  EXPECT_NE(refusal(f).find("-2147483648 tokens"), std::string::npos);
  // One token more, one fewer than the file holds.
  f = path("plus1.bin");
  write_file_atomic(f, header(3) + std::string(4, '\x01'));
  EXPECT_NE(refusal(f).find("announces 3 tokens"), std::string::npos);
  f = path("minus1.bin");
  write_file_atomic(f, header(1) + std::string(4, '\x01'));
  EXPECT_NE(refusal(f).find("announces 1 tokens"), std::string::npos);
}

TEST_F(TokenLimitsTest, WhatIsNotARegularFileIsRefusedWithoutWaiting) {
  const std::string fifo = path("fifo.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(refusal(fifo).find("not a regular file"), std::string::npos);  // no writer: must not block
  EXPECT_NE(refusal(dir_).find("not a regular file"), std::string::npos);
  if (fs::exists("/dev/zero")) {
    EXPECT_NE(refusal("/dev/zero").find("not a regular file"), std::string::npos);
  }
}

TEST_F(TokenLimitsTest, SmallFileReadsAreBoundedAndRegularOnly) {
  const std::string big = sparse("big.json", "{}", uint64_t{8} << 30);
  const auto start = std::chrono::steady_clock::now();
  try {
    read_small_file(big, 1 << 20);
    ADD_FAILURE() << "read an 8 GiB file as a small one";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("8589934592 bytes, over the 1048576 allowed"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  const std::string fifo = path("fifo.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(read_small_file(fifo, 1 << 20), UsageError);
  EXPECT_THROW(read_small_file(dir_, 1 << 20), UsageError);
  const std::string ok = path("ok.json");
  write_file_atomic(ok, std::string("{\"a\": 1}"));
  EXPECT_EQ(read_small_file(ok, 8), "{\"a\": 1}");
  EXPECT_THROW(read_small_file(ok, 7), UsageError);
}

}  // namespace
}  // namespace zerodp::data
