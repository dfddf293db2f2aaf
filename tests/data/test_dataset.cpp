// Datasets in shards (docs/reference/files.md#datasets, data/dataset.h): a file, a directory or a
// glob names files read in sorted name order as one stream; the loader's positions (in order and
// shuffled) run across shard boundaries exactly as over one file of the same tokens, uint16 and
// uint32 shards mixed; and the validation windows' split over ranks (data/loader.h EvalWindows)
// counts every window once.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/tokens.h"

namespace zerodp::data {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = 70000;  // over uint16's range: uint32 shards hold tokens above 65535

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    dir_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_dataset_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/shards");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Token i of the test stream: no short period, some values above 65535 (in uint32 shards).
  static uint32_t value(size_t i, bool wide) {
    return wide ? static_cast<uint32_t>((i * 104729 + 17) % kVocab) : static_cast<uint32_t>((i * 7919 + 13) % 60000);
  }
  // Writes tokens [begin, end) of the stream as `name` (uint32 when wide), appending them to all_.
  void shard(const std::string& name, size_t n, bool wide) {
    std::vector<uint32_t> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = value(all_.size() + i, wide);
    const std::string path = dir_ + "/shards/" + name;
    if (wide) {
      std::string bytes = llmc_header(n, 4);
      for (uint32_t v : t)
        for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((v >> (8 * b)) & 0xFF));
      write_file_atomic(path, bytes);
    } else {
      std::vector<uint16_t> s(t.begin(), t.end());
      write_token_file(path, s.data(), n);
    }
    all_.insert(all_.end(), t.begin(), t.end());
  }
  // The same tokens as one uint32 file.
  std::string whole() {
    std::string bytes = llmc_header(all_.size(), 4);
    for (uint32_t v : all_)
      for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<char>((v >> (8 * b)) & 0xFF));
    const std::string path = dir_ + "/whole.bin";
    write_file_atomic(path, bytes);
    return path;
  }
  std::string error_of(const std::string& spec) {
    try {
      TokenStream::open(spec, kVocab);
    } catch (const UsageError& e) {
      return e.what();
    }
    ADD_FAILURE() << "opened " << spec;
    return "";
  }

  std::string dir_;
  std::vector<uint32_t> all_;
};

TEST_F(DatasetTest, DirectoryAndGlobReadSortedNamesAsOneStream) {
  // Written out of name order: the stream is in name order (b before c before d), uneven sizes,
  // uint16 and uint32 mixed.
  shard("part_b.bin", 37, false);
  shard("part_c.bin", 5, true);
  shard("part_d.bin", 101, false);
  write_file_atomic(dir_ + "/shards/notes.txt", std::string("not a token file"));
  fs::create_directories(dir_ + "/shards/sub.bin");  // a directory named *.bin is not a shard
  for (const std::string& spec : {dir_ + "/shards", dir_ + "/shards/", dir_ + "/shards/part_*.bin",
                                  dir_ + "/shards/part_[bcd].bin"}) {
    const TokenStream s = TokenStream::open(spec, kVocab);
    ASSERT_EQ(s.num_shards(), 3u) << spec;
    ASSERT_EQ(s.size(), all_.size()) << spec;
    EXPECT_EQ(s.shard(0).path(), dir_ + "/shards/part_b.bin") << spec;
    EXPECT_EQ(s.shard(1).token_bytes(), 4);
    EXPECT_EQ(s.shard_start(2), 42u);
    for (size_t i = 0; i < all_.size(); ++i) ASSERT_EQ(s.at(i), all_[i]) << spec << " position " << i;
    EXPECT_NE(s.describe().find("3 files"), std::string::npos) << s.describe();
  }
  const TokenStream one = TokenStream::open(dir_ + "/shards/part_c.bin", kVocab);
  EXPECT_EQ(one.num_shards(), 1u);
  EXPECT_EQ(one.describe(), "'" + dir_ + "/shards/part_c.bin'");
}

TEST_F(DatasetTest, ReadsRunAcrossShardsAndWrapAround) {
  shard("a.bin", 7, false);
  shard("b.bin", 3, true);
  shard("c.bin", 11, false);
  const TokenStream s = TokenStream::open(dir_ + "/shards", kVocab);
  const size_t N = all_.size();
  for (uint64_t pos : {uint64_t{0}, uint64_t{5}, uint64_t{6}, uint64_t{7}, uint64_t{9}, uint64_t{10}, uint64_t{20},
                       uint64_t{21}, uint64_t{1000003}}) {
    for (size_t n : {size_t{1}, size_t{4}, size_t{15}, size_t{50}}) {
      std::vector<int32_t> got(n);
      s.read(pos, n, got.data());
      for (size_t k = 0; k < n; ++k)
        ASSERT_EQ(static_cast<uint32_t>(got[k]), all_[(pos + k) % N]) << "pos " << pos << " n " << n << " k " << k;
    }
  }
}

TEST_F(DatasetTest, LoaderOverShardsIsTheLoaderOverOneFile) {
  // Windows straddle the boundaries at 50, 53 and 130 (T = 16).
  shard("s0.bin", 50, false);
  shard("s1.bin", 3, true);
  shard("s2.bin", 77, false);
  shard("s3.bin", 61, true);
  const TokenStream sharded = TokenStream::open(dir_ + "/shards/s*.bin", kVocab);
  const TokenStream one = TokenStream::open(whole(), kVocab);
  ASSERT_EQ(sharded.size(), one.size());
  const int T = 16;
  for (const ShuffleSpec shuffle : {ShuffleSpec{false, 0}, ShuffleSpec{true, 5}}) {
    for (const int W : {1, 3}) {
      for (int r = 0; r < W; ++r) {
        const BatchLoader a(sharded, W, r, 2, T, 2, shuffle), b(one, W, r, 2, T, 2, shuffle);
        EXPECT_EQ(a.windows(), b.windows());
        std::vector<int32_t> xa(2 * T), ya(2 * T), xb(2 * T), yb(2 * T);
        for (uint64_t step = 0; step < 12; ++step) {
          for (int g = 0; g < 2; ++g) {
            a.load(step, g, xa.data(), ya.data());
            b.load(step, g, xb.data(), yb.data());
            ASSERT_EQ(xa, xb) << "shuffle " << shuffle.enabled << " W " << W << " r " << r << " step " << step;
            ASSERT_EQ(ya, yb);
          }
        }
      }
    }
  }
}

TEST_F(DatasetTest, NothingMatchingIsAnErrorNamingThePattern) {
  EXPECT_NE(error_of(dir_ + "/shards/*.bin").find("no token file matches the pattern"), std::string::npos);
  EXPECT_NE(error_of(dir_ + "/shards/*.bin").find(dir_ + "/shards/*.bin"), std::string::npos);
  EXPECT_NE(error_of(dir_ + "/shards").find("holds no *.bin"), std::string::npos);
  EXPECT_NE(error_of(dir_ + "/missing.bin").find("missing.bin"), std::string::npos);
  // A bad shard is named, whichever it is.
  shard("a.bin", 4, false);
  write_file_atomic(dir_ + "/shards/b.bin", std::string("x"));
  EXPECT_NE(error_of(dir_ + "/shards").find("b.bin"), std::string::npos);
}

// ---- validation windows -----------------------------------------------------------------------------

TEST(EvalWindows, EveryWindowCountedOnceWhateverTheSplit) {
  for (uint64_t K : {uint64_t{1}, uint64_t{2}, uint64_t{5}, uint64_t{7}, uint64_t{12}, uint64_t{13}}) {
    for (int W = 1; W <= 4; ++W) {
      for (int B = 1; B <= 3; ++B) {
        std::vector<int> counted(K, 0);
        uint64_t passes = 0;
        for (int r = 0; r < W; ++r) {
          const EvalWindows e(K, W, r, B, 8);
          if (r == 0) passes = e.passes();
          ASSERT_EQ(e.passes(), passes) << "every rank runs the same passes (K " << K << " W " << W << " B " << B << ")";
          int64_t last = -1;
          for (uint64_t p = 0; p < e.passes(); ++p) {
            for (int b = 0; b < B; ++b) {
              const int64_t q = e.window(p, b);
              if (q < 0) continue;
              ASSERT_LT(q, static_cast<int64_t>(K));
              ASSERT_EQ(q % W, r) << "rank r takes windows r, r+W, ...";
              ASSERT_GT(q, last) << "in order";
              last = q;
              ++counted[static_cast<size_t>(q)];
            }
          }
        }
        for (uint64_t q = 0; q < K; ++q) ASSERT_EQ(counted[q], 1) << "window " << q << " K " << K << " W " << W << " B " << B;
        // No pass more than needed: the busiest rank (rank 0) fills all but its last pass.
        EXPECT_EQ(passes, ((K + W - 1) / W + B - 1) / B);
      }
    }
  }
  EXPECT_THROW(EvalWindows(0, 1, 0, 1, 8), UsageError);
  EXPECT_THROW(EvalWindows(4, 2, 2, 1, 8), UsageError);
}

TEST_F(DatasetTest, EvalWindowsReadTheirTokensAcrossShards) {
  shard("a.bin", 10, false);
  shard("b.bin", 9, true);  // 19 tokens: K = 3 windows of 6 need 19
  const TokenStream s = TokenStream::open(dir_ + "/shards", kVocab);
  const int T = 6, B = 2;
  const EvalWindows e(3, 2, 1, B, T);  // rank 1 of 2: window 1, then padding
  ASSERT_EQ(e.passes(), 1u);
  EXPECT_EQ(e.window(0, 0), 1);
  EXPECT_EQ(e.window(0, 1), -1);
  std::vector<int32_t> x(B * T), y(B * T);
  e.load(s, 0, x.data(), y.data());
  for (int t = 0; t < T; ++t) {
    EXPECT_EQ(static_cast<uint32_t>(x[t]), all_[6 + t]);          // window 1 straddles the shards at 10
    EXPECT_EQ(static_cast<uint32_t>(y[t]), all_[7 + t]);
    EXPECT_EQ(static_cast<uint32_t>(x[T + t]), all_[t]);          // padding: window 0
    EXPECT_EQ(static_cast<uint32_t>(y[T + t]), all_[1 + t]);
  }
}

}  // namespace
}  // namespace zerodp::data
