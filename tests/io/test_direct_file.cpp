// The NVMe offload file: every length and many requests in flight come back as written, through
// io_uring and through the synchronous fallback; the file has no name from the moment it is open;
// misuse (unaligned offsets or buffers, a name that exists) is an error, not a silent copy.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "core/error.h"
#include "io/direct_file.h"

namespace zerodp::io {
namespace {

namespace fs = std::filesystem;

struct AlignedBytes {
  explicit AlignedBytes(size_t n) : n(n), p(static_cast<char*>(std::aligned_alloc(kIoBlock, align_up_block(n + 1)))) {}
  ~AlignedBytes() { std::free(p); }
  size_t n;
  char* p;
};

void fill_random(char* p, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(rng());
}

class DirectFileTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zerodp_io_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    setenv("ZERODP_IO_URING", GetParam() ? "1" : "0", 1);
  }
  void TearDown() override {
    unsetenv("ZERODP_IO_URING");
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_P(DirectFileTest, EveryLengthReadsBackAsWritten) {
  DirectFile f(dir_.string(), "rank0-test", 8 << 20);
  EXPECT_EQ(f.uring(), GetParam());
  EXPECT_EQ(f.size(), size_t{8} << 20);
  uint64_t off = 0;
  unsigned seed = 1;
  for (size_t n : {size_t{1}, size_t{100}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{(1 << 20) + 5},
                   size_t{3 << 20}}) {
    AlignedBytes w(n), r(n);
    fill_random(w.p, n, seed);
    std::memset(r.p, 0x5a, n + 1);
    f.write(w.p, n, off);
    f.read(r.p, n, off);
    EXPECT_EQ(std::memcmp(w.p, r.p, n), 0) << n << " bytes";
    EXPECT_EQ(r.p[n], 0x5a) << "a read of " << n << " bytes wrote past them";
    off += align_up_block(n);
    ++seed;
  }
  EXPECT_GT(f.stats().bytes_written, 0u);
  EXPECT_EQ(f.stats().bytes_read, f.stats().bytes_written);
}

TEST_P(DirectFileTest, ManyRequestsInFlight) {
  const size_t piece = (1 << 20) + 4096 * 3, count = 24;
  DirectFile f(dir_.string(), "rank3-many", piece * count);
  std::vector<std::unique_ptr<AlignedBytes>> w, r;
  std::vector<DirectFile::Ticket> t;
  for (size_t i = 0; i < count; ++i) {
    w.push_back(std::make_unique<AlignedBytes>(piece));
    fill_random(w.back()->p, piece, 100 + i);
    t.push_back(f.write_async(w.back()->p, piece, i * piece));
  }
  f.wait_all();
  t.clear();
  for (size_t i = 0; i < count; ++i) {
    r.push_back(std::make_unique<AlignedBytes>(piece));
    t.push_back(f.read_async(r.back()->p, piece, (count - 1 - i) * piece));
  }
  for (size_t i = 0; i < count; ++i) {
    f.wait(t[i]);
    f.wait(t[i]);  // a second wait returns at once
    EXPECT_EQ(std::memcmp(r[i]->p, w[count - 1 - i]->p, piece), 0) << i;
  }
}

TEST_P(DirectFileTest, TheFileHasNoNameWhileOpen) {
  {
    DirectFile f(dir_.string(), "rank1-optim", 1 << 20);
    EXPECT_TRUE(fs::is_empty(dir_)) << "the offload file kept its name";
    AlignedBytes b(4096);
    fill_random(b.p, 4096, 7);
    f.write(b.p, 4096, 0);
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_P(DirectFileTest, MisuseIsAnError) {
  DirectFile f(dir_.string(), "rank0-x", 1 << 20);
  AlignedBytes b(8192);
  EXPECT_THROW(f.write(b.p, 4096, 100), RuntimeFailure);      // unaligned offset
  EXPECT_THROW(f.write(b.p + 8, 4096, 0), RuntimeFailure);    // unaligned buffer
  EXPECT_THROW(f.read(b.p, 8192, (1 << 20) - 4096), RuntimeFailure);  // past the end
  std::FILE* taken = std::fopen((dir_ / "rank0-taken").c_str(), "w");
  std::fclose(taken);
  try {
    DirectFile g(dir_.string(), "rank0-taken", 4096);
    FAIL() << "an existing name was reused";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank0-taken"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DirectFile((dir_ / "missing").string(), "rank0-y", 4096), RuntimeFailure);
}

INSTANTIATE_TEST_SUITE_P(UringAndSync, DirectFileTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "io_uring" : "pread_pwrite"; });

}  // namespace
}  // namespace zerodp::io
