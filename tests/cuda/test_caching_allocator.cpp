// The caching allocator's logic over a host backend that counts what reaches it (the CUDA backends
// only add cudaMalloc/cudaFree underneath).
#include <cstdlib>
#include <set>

#include <gtest/gtest.h>

#include "cuda/caching_allocator.h"

namespace zerodp::cuda {
namespace {

class CountingMemory final : public RawMemory {
 public:
  size_t limit = SIZE_MAX;  // bytes the "device" has
  size_t live = 0;
  int allocations = 0, frees = 0;
  std::set<void*> blocks;
  std::map<void*, size_t> sizes;

  void* allocate(size_t bytes) override {
    if (live + bytes > limit) return nullptr;
    void* p = std::malloc(bytes);
    live += bytes;
    ++allocations;
    blocks.insert(p);
    sizes[p] = bytes;
    return p;
  }
  void free(void* p) override {
    ASSERT_TRUE(blocks.count(p)) << "freed a block the backend never gave";
    live -= sizes[p];
    blocks.erase(p);
    sizes.erase(p);
    ++frees;
    std::free(p);
  }
};

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) - 1), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::size_class((2 << 20) + 1), size_t{4} << 20);
  EXPECT_THROW(CachingAllocator::size_class(SIZE_MAX - 10), OutOfMemory);
  for (size_t n : {size_t{3}, size_t{4097}, size_t{999999}, size_t{5} << 20, (size_t{7} << 30) + 3}) {
    const size_t c = CachingAllocator::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LT(c - n, n < (1u << 20) ? 512u : 2u << 20);
  }
}

// A training step's pattern: the same transient buffers freed and asked for again, step after step;
// after the first step nothing reaches the backend.
TEST(CachingAllocator, ASteadyStepReachesTheBackendOnlyOnce) {
  CountingMemory raw;
  CachingAllocator a(raw);
  const size_t sizes[] = {3000, 1 << 20, 777, 64 << 20, 3000};
  for (int step = 0; step < 5; ++step) {
    std::vector<void*> live;
    for (size_t s : sizes) live.push_back(a.allocate(s));
    EXPECT_EQ(std::set<void*>(live.begin(), live.end()).size(), live.size()) << "two live blocks alias";
    for (void* p : live) a.free(p);
  }
  EXPECT_EQ(raw.allocations, 5);
  EXPECT_EQ(a.misses(), 5u);
  EXPECT_EQ(a.hits(), 20u);
  EXPECT_EQ(a.in_use(), 0u);
  size_t want = 0;
  for (size_t s : sizes) want += CachingAllocator::size_class(s);
  EXPECT_EQ(a.reserved(), want);
  EXPECT_EQ(a.cached(), want);
  EXPECT_EQ(raw.live, want);
  a.release_cached();
  EXPECT_EQ(raw.live, 0u);
  EXPECT_EQ(a.reserved(), 0u);
}

TEST(CachingAllocator, ReusesOnlyTheSameClass) {
  CountingMemory raw;
  CachingAllocator a(raw);
  void* big = a.allocate(8 << 20);
  a.free(big);
  void* small = a.allocate(100);  // does not take (and split) the cached 8 MiB block
  EXPECT_NE(small, big);
  EXPECT_EQ(a.cached(), size_t{8} << 20);
  void* again = a.allocate((8 << 20) - 5);  // same class: the cached block
  EXPECT_EQ(again, big);
  a.free(small);
  a.free(again);
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheThenTriesAgain) {
  CountingMemory raw;
  raw.limit = 10 << 20;
  CachingAllocator a(raw);
  void* p = a.allocate(6 << 20);
  a.free(p);                      // 6 MiB cached
  void* q = a.allocate(8 << 20);  // does not fit beside the cache: the cache is given back first
  EXPECT_EQ(a.cached(), 0u);
  EXPECT_EQ(a.reserved(), size_t{8} << 20);
  EXPECT_THROW(a.allocate(4 << 20), OutOfMemory);  // truly out
  EXPECT_EQ(a.in_use(), size_t{8} << 20);           // nothing changed by the failure
  a.free(q);
}

TEST(CachingAllocator, FreeingAForeignPointerIsABug) {
  CountingMemory raw;
  CachingAllocator a(raw);
  int x = 0;
  EXPECT_THROW(a.free(&x), std::logic_error);
  a.free(nullptr);  // like free(NULL): nothing
}

TEST(CachingAllocator, GivesEverythingBackWhenDestroyed) {
  CountingMemory raw;
  {
    CachingAllocator a(raw);
    a.free(a.allocate(1000));
    a.allocate(5 << 20);  // never freed by its owner
  }
  EXPECT_EQ(raw.live, 0u);
  EXPECT_EQ(raw.allocations, raw.frees);
}

}  // namespace
}  // namespace zerodp::cuda
