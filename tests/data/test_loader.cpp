// Which tokens each rank reads (docs/reference/data-order.md#ranks): the formula itself, the same
// global batches whatever the split over ranks and micro-steps, wrap-around at the end of the file,
// and bad geometry.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "data/loader.h"
#include "data/tokens.h"

namespace zerodp::data {
namespace {

class LoaderTest : public ::testing::Test {
 protected:
  // A token file of n tokens with values (i * 7919 + 13) % 1000: no short period, so a misplaced
  // window shows.
  const TokenStream& make(size_t n) {
    const char* tmp = std::getenv("TMPDIR");
    path_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_loader_" + std::to_string(::getpid()) + ".bin";
    tokens_.resize(n);
    for (size_t i = 0; i < n; ++i) tokens_[i] = static_cast<uint16_t>((i * 7919 + 13) % 1000);
    write_token_file(path_, tokens_.data(), n);
    std::vector<TokenFile> one;
    one.push_back(TokenFile::open(path_, 1000));
    file_ = TokenStream(std::move(one));
    return file_;
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::string path_;
  std::vector<uint16_t> tokens_;
  TokenStream file_;
};

struct Geometry {
  int W, B, G;
};

// The global batch of `step` as one [W·G·B, T] array of inputs and one of targets, concatenated in
// (micro-step, rank) order.
void global_batch(const TokenStream& f, Geometry g, int T, uint64_t step, std::vector<int32_t>* in,
                  std::vector<int32_t>* tgt, ShuffleSpec shuffle = {}) {
  in->clear();
  tgt->clear();
  const size_t n = static_cast<size_t>(g.B) * static_cast<size_t>(T);
  std::vector<int32_t> x(n), y(n);
  for (int micro = 0; micro < g.G; ++micro) {
    for (int r = 0; r < g.W; ++r) {
      const BatchLoader loader(f, g.W, r, g.B, T, g.G, shuffle);
      loader.load(step, micro, x.data(), y.data());
      in->insert(in->end(), x.begin(), x.end());
      tgt->insert(tgt->end(), y.begin(), y.end());
    }
  }
}

TEST_F(LoaderTest, FollowsTheContractFormula) {
  const TokenStream& f = make(5003);
  const int W = 3, B = 2, T = 16, G = 2;
  std::vector<int32_t> x(B * T), y(B * T);
  for (uint64_t s : {0u, 1u, 7u, 40u}) {
    for (int g = 0; g < G; ++g) {
      for (int r = 0; r < W; ++r) {
        const BatchLoader loader(f, W, r, B, T, G);
        const uint64_t off = ((s * G + static_cast<uint64_t>(g)) * W + static_cast<uint64_t>(r)) * B * T;
        EXPECT_EQ(loader.offset(s, g), off % f.size());
        loader.load(s, g, x.data(), y.data());
        for (size_t k = 0; k < x.size(); ++k) {
          ASSERT_EQ(x[k], tokens_[(off + k) % f.size()])
              << "s " << s << " g " << g << " r " << r << " k " << k;
          ASSERT_EQ(y[k], tokens_[(off + k + 1) % f.size()]);
        }
      }
    }
  }
}

TEST_F(LoaderTest, SameGlobalBatchesHoweverSplit) {
  // 8 sequences of 16 tokens a step; 1000 tokens, so the steps wrap around the file several times.
  const TokenStream& f = make(1000);
  const int T = 16;
  const Geometry splits[] = {{1, 8, 1}, {4, 2, 1}, {2, 2, 2}, {1, 1, 8}, {8, 1, 1}};
  for (uint64_t step = 0; step < 30; ++step) {
    std::vector<int32_t> ref_in, ref_tgt;
    global_batch(f, splits[0], T, step, &ref_in, &ref_tgt);
    ASSERT_EQ(ref_in.size(), 8u * T);
    for (const Geometry& g : splits) {
      std::vector<int32_t> in, tgt;
      global_batch(f, g, T, step, &in, &tgt);
      ASSERT_EQ(in, ref_in) << "W " << g.W << " B " << g.B << " G " << g.G << " step " << step;
      ASSERT_EQ(tgt, ref_tgt) << "W " << g.W << " B " << g.B << " G " << g.G << " step " << step;
    }
  }
}

TEST_F(LoaderTest, WrapsAroundTheEndOfTheFile) {
  const TokenStream& f = make(10);  // shorter than one window: positions cycle
  const BatchLoader loader(f, 1, 0, 2, 8, 1);
  std::vector<int32_t> x(16), y(16);
  loader.load(0, 0, x.data(), y.data());
  for (size_t k = 0; k < 16; ++k) {
    EXPECT_EQ(x[k], tokens_[k % 10]) << k;
    EXPECT_EQ(y[k], tokens_[(k + 1) % 10]) << k;
  }
  // Step 1 starts at 16 mod 10 = 6.
  EXPECT_EQ(loader.offset(1, 0), 6u);
  loader.load(1, 0, x.data(), y.data());
  EXPECT_EQ(x[0], tokens_[6]);
  EXPECT_EQ(x[4], tokens_[0]);
  EXPECT_EQ(y[3], tokens_[0]);
  // Huge step numbers do not overflow: (s·G·W)·B·T is taken modulo the file in 128 bits.
  const uint64_t s = 1ull << 62;
  EXPECT_EQ(loader.offset(s, 0), static_cast<size_t>((static_cast<unsigned __int128>(s) * 16) % 10));
}

TEST_F(LoaderTest, BadGeometryIsRefused) {
  const TokenStream& f = make(100);
  EXPECT_THROW(BatchLoader(f, 0, 0, 1, 1, 1), UsageError);
  EXPECT_THROW(BatchLoader(f, 2, 2, 1, 1, 1), UsageError);
  EXPECT_THROW(BatchLoader(f, 2, -1, 1, 1, 1), UsageError);
  EXPECT_THROW(BatchLoader(f, 1, 0, 0, 1, 1), UsageError);
  EXPECT_THROW(BatchLoader(f, 1, 0, 1, 0, 1), UsageError);
  EXPECT_THROW(BatchLoader(f, 1, 0, 1, 1, 0), UsageError);
  const BatchLoader ok(f, 2, 1, 1, 1, 2);
  EXPECT_ANY_THROW(ok.offset(0, 2));  // micro-step outside [0, G)
}

TEST(WindowPermutation, IsABijectionForEverySize) {
  for (uint64_t n : {1ull, 2ull, 3ull, 4ull, 5ull, 17ull, 100ull, 1000ull, 4096ull, 4097ull, 65537ull}) {
    const WindowPermutation p(n, 1234, 0);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = p(i);
      ASSERT_LT(x, n) << "n " << n;
      ASSERT_FALSE(seen[x]) << "n " << n << ": " << x << " twice";
      seen[x] = true;
    }
  }
}

TEST(WindowPermutation, DependsOnSeedAndEpochAndShuffles) {
  const uint64_t n = 1000;
  auto order = [&](uint64_t seed, uint64_t epoch) {
    const WindowPermutation p(n, seed, epoch);
    std::vector<uint64_t> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = p(i);
    return v;
  };
  const auto a = order(1, 0);
  EXPECT_EQ(a, order(1, 0));  // a pure function of (seed, epoch)
  EXPECT_NE(a, order(2, 0));
  EXPECT_NE(a, order(1, 1));
  // Not the identity nor a near-identity: few fixed points, and neighbours scattered.
  int fixed = 0, adjacent = 0;
  for (uint64_t i = 0; i < n; ++i) {
    fixed += a[i] == i;
    if (i > 0) adjacent += (a[i] == a[i - 1] + 1);
  }
  EXPECT_LT(fixed, 10);
  EXPECT_LT(adjacent, 10);
  // Huge domains work without tables.
  const WindowPermutation big(uint64_t{1} << 40, 7, 3);
  EXPECT_LT(big(12345), uint64_t{1} << 40);
}

TEST_F(LoaderTest, ShuffledEpochsReadEveryWindowOnceInTheSameOrderHoweverSplit) {
  const TokenStream& f = make(16 * 50 + 7);  // K = 50 windows of 17 tokens, 6 tokens left over
  const int T = 16;
  const ShuffleSpec shuffle{true, 99};
  const BatchLoader probe(f, 1, 0, 8, T, 1, shuffle);
  ASSERT_EQ(probe.windows(), 50u);
  const Geometry splits[] = {{1, 8, 1}, {4, 2, 1}, {2, 2, 2}, {8, 1, 1}};
  std::vector<int> uses(50, 0);
  for (uint64_t step = 0; step < 25; ++step) {  // 200 sequences: exactly 4 epochs of 50 windows
    std::vector<int32_t> ref_in, ref_tgt;
    global_batch(f, splits[0], T, step, &ref_in, &ref_tgt, shuffle);
    for (const Geometry& g : splits) {
      std::vector<int32_t> in, tgt;
      global_batch(f, g, T, step, &in, &tgt, shuffle);
      ASSERT_EQ(in, ref_in) << "W " << g.W << " B " << g.B << " G " << g.G << " step " << step;
      ASSERT_EQ(tgt, ref_tgt);
    }
    for (uint64_t b = 0; b < 8; ++b) {
      const size_t start = probe.sequence_start(step * 8 + b);
      ASSERT_EQ(start % T, 0u);
      ASSERT_LE(start + T + 1, f.size()) << "a window runs past the end";
      ++uses[start / T];
      // The window's tokens, inputs then targets shifted by one.
      for (int t = 0; t < T; ++t) {
        ASSERT_EQ(ref_in[b * T + t], tokens_[start + t]);
        ASSERT_EQ(ref_tgt[b * T + t], tokens_[start + t + 1]);
      }
    }
    if ((step + 1) % 25 == 0 || (step * 8 + 8) % 50 == 0) {
      const int epochs = static_cast<int>((step * 8 + 8) / 50);
      for (int w = 0; w < 50; ++w) ASSERT_EQ(uses[w], epochs) << "window " << w << " after step " << step;
    }
  }
  // Epochs are different orders; the in-order reader is unchanged by all this.
  EXPECT_NE(probe.sequence_start(0), probe.sequence_start(50)) << "epochs 0 and 1 start alike (possible, unlikely)";
  EXPECT_EQ(BatchLoader(f, 1, 0, 8, T, 1).sequence_start(3), 3u * T);
}

TEST_F(LoaderTest, ShufflingNeedsOneWholeWindow) {
  const TokenStream& f = make(16);
  EXPECT_THROW(BatchLoader(f, 1, 0, 1, 16, 1, {true, 1}), UsageError);  // 16 tokens: no window of 17
  EXPECT_NO_THROW(BatchLoader(f, 1, 0, 1, 15, 1, {true, 1}));
  EXPECT_NO_THROW(BatchLoader(f, 1, 0, 1, 16, 1));  // in order, positions wrap
}

}  // namespace
}  // namespace zerodp::data
