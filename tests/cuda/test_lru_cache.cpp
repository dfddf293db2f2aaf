// The GEMM plan cache's bound (cuda/lru_cache.h): the least recently used entry goes first.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "cuda/lru_cache.h"

namespace zerodp::cuda {
namespace {

TEST(LruCache, ForgetsTheLeastRecentlyUsedWhenFull) {
  LruCache<int, std::string> c(3);
  c.insert(1, "one");
  c.insert(2, "two");
  c.insert(3, "three");
  ASSERT_NE(c.find(1), nullptr);  // 1 is now the most recent: 2 is the oldest
  c.insert(4, "four");
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.evictions(), 1u);
  EXPECT_EQ(c.find(2), nullptr);
  ASSERT_NE(c.find(1), nullptr);
  EXPECT_EQ(*c.find(1), "one");
  EXPECT_EQ(*c.find(3), "three");
  EXPECT_EQ(*c.find(4), "four");
}

TEST(LruCache, StaysBoundedOverManyKeysAndKeepsReferencesOfLiveEntries) {
  LruCache<int, std::unique_ptr<int>> c(16);
  int* hot = c.insert(-1, std::make_unique<int>(-1)).get();
  for (int k = 0; k < 10000; ++k) {
    c.insert(k, std::make_unique<int>(k));
    ASSERT_NE(c.find(-1), nullptr) << k;  // used every time: never the oldest
    EXPECT_LE(c.size(), 16u);
  }
  EXPECT_EQ(c.find(-1)->get(), hot);
  EXPECT_EQ(c.evictions(), 10000u + 1 - 16);
  EXPECT_EQ(c.find(0), nullptr);
  ASSERT_NE(c.find(9999), nullptr);
  c.clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.find(9999), nullptr);
}

TEST(LruCache, CapacityZeroIsRefused) { EXPECT_THROW((LruCache<int, int>(0)), std::invalid_argument); }

}  // namespace
}  // namespace zerodp::cuda
