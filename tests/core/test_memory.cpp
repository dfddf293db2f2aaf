// The memory ledger: exact live and peak bytes per category and in total, each tier apart, budgets
// (device tier only), Buffer RAII under its tier.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "core/sanitizers.h"
#include "core/tensor.h"

using namespace zerodp;

TEST(MemoryLedger, CountsLiveAndPeakExactly) {
  MemoryLedger L;
  L.on_alloc(MemCategory::kParam, 1000);
  L.on_alloc(MemCategory::kAct, 333);
  L.on_free(MemCategory::kAct, 333);
  L.on_alloc(MemCategory::kAct, 100);
  auto s = L.snapshot();
  EXPECT_EQ(s.live_of(MemCategory::kParam), 1000u);
  EXPECT_EQ(s.live_of(MemCategory::kAct), 100u);
  EXPECT_EQ(s.peak_of(MemCategory::kAct), 333u);
  EXPECT_EQ(s.live_total, 1100u);
  EXPECT_EQ(s.peak_total, 1333u);  // peak of the sum
  EXPECT_EQ(s.live_of(MemCategory::kGrad), 0u);
  L.reset_peaks();
  EXPECT_EQ(L.peak(MemCategory::kAct), 100u);
  EXPECT_EQ(L.peak_total(), 1100u);
}

TEST(MemoryLedger, FreeingMoreThanLiveIsABug) {
  MemoryLedger L;
  L.on_alloc(MemCategory::kGrad, 10);
  EXPECT_THROW(L.on_free(MemCategory::kGrad, 11), RuntimeFailure);
}

TEST(MemoryLedger, BudgetNamesCategoryBytesLiveAndBudget) {
  MemoryLedger L;
  L.set_budget(10000);
  L.on_alloc(MemCategory::kParam, 6000);
  try {
    L.on_alloc(MemCategory::kOptim, 5000);
    FAIL() << "over budget accepted";
  } catch (const BudgetError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ExitCode::kBudget);
    EXPECT_NE(m.find("'optim'"), std::string::npos) << m;
    EXPECT_NE(m.find("5000 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("6000 bytes live"), std::string::npos) << m;
    EXPECT_NE(m.find("budget of 10000 bytes"), std::string::npos) << m;
  }
  // The refused allocation counted nothing; exactly filling the budget is allowed.
  EXPECT_EQ(L.live_total(), 6000u);
  EXPECT_EQ(L.live(MemCategory::kOptim), 0u);
  L.on_alloc(MemCategory::kOptim, 4000);
  EXPECT_EQ(L.live_total(), 10000u);
  L.set_budget(std::nullopt);
  L.on_alloc(MemCategory::kOptim, 1);
}

TEST(MemoryTier, NamesMatchTheContract) {
  const char* want[] = {"device", "host", "nvme"};
  for (size_t i = 0; i < kNumMemTiers; ++i) EXPECT_STREQ(mem_tier_name(kAllMemTiers[i]), want[i]);
}

TEST(MemoryLedger, TiersAreCountedApart) {
  MemoryLedger L;
  L.on_alloc(MemCategory::kParam, 100);  // the two-argument form: the device tier
  L.on_alloc(MemTier::kDevice, MemCategory::kOptim, 10);
  L.on_alloc(MemTier::kHost, MemCategory::kOptim, 200);
  L.on_alloc(MemTier::kHost, MemCategory::kMaster, 20);
  L.on_alloc(MemTier::kNvme, MemCategory::kOptim, 3000);
  const MemorySnapshot s = L.snapshot();
  // The snapshot's own fields are the device tier, and tier(kDevice) is the same numbers.
  EXPECT_EQ(s.live_of(MemCategory::kParam), 100u);
  EXPECT_EQ(s.live_of(MemCategory::kOptim), 10u);
  EXPECT_EQ(s.live_total, 110u);
  EXPECT_EQ(&s.tier(MemTier::kDevice), static_cast<const MemoryUsage*>(&s));
  EXPECT_EQ(s.tier(MemTier::kHost).live_of(MemCategory::kOptim), 200u);
  EXPECT_EQ(s.tier(MemTier::kHost).live_of(MemCategory::kMaster), 20u);
  EXPECT_EQ(s.tier(MemTier::kHost).live_of(MemCategory::kParam), 0u);
  EXPECT_EQ(s.host.live_total, 220u);
  EXPECT_EQ(s.nvme.live_of(MemCategory::kOptim), 3000u);
  EXPECT_EQ(s.nvme.live_total, 3000u);
  EXPECT_EQ(s.nvme.peak_total, 3000u);
  // The ledger's accessors: per tier, and the device tier without one.
  EXPECT_EQ(L.live(MemCategory::kOptim), 10u);
  EXPECT_EQ(L.live(MemTier::kHost, MemCategory::kOptim), 200u);
  EXPECT_EQ(L.peak(MemTier::kNvme, MemCategory::kOptim), 3000u);
  EXPECT_EQ(L.live_total(), 110u);
  EXPECT_EQ(L.live_total(MemTier::kHost), 220u);
  EXPECT_EQ(L.peak_total(MemTier::kNvme), 3000u);
  // Freeing in one tier leaves the others alone.
  L.on_free(MemTier::kHost, MemCategory::kOptim, 200);
  EXPECT_EQ(L.live(MemTier::kHost, MemCategory::kOptim), 0u);
  EXPECT_EQ(L.live(MemCategory::kOptim), 10u);
  EXPECT_EQ(L.live(MemTier::kNvme, MemCategory::kOptim), 3000u);
}

TEST(MemoryLedger, FreeingInAnotherTierIsABug) {
  MemoryLedger L;
  L.on_alloc(MemTier::kHost, MemCategory::kGrad, 10);
  try {
    L.on_free(MemCategory::kGrad, 10);  // the device tier holds none
    FAIL() << "freeing device bytes that were counted in the host tier accepted";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("in the device tier"), std::string::npos) << e.what();
  }
  EXPECT_EQ(L.live(MemTier::kHost, MemCategory::kGrad), 10u);
  EXPECT_THROW(L.on_free(MemTier::kNvme, MemCategory::kGrad, 1), RuntimeFailure);
}

TEST(MemoryLedger, PeaksPerTier) {
  MemoryLedger L;
  L.on_alloc(MemTier::kHost, MemCategory::kOptim, 500);
  L.on_free(MemTier::kHost, MemCategory::kOptim, 500);
  L.on_alloc(MemTier::kHost, MemCategory::kMaster, 300);
  L.on_alloc(MemTier::kDevice, MemCategory::kAct, 700);
  L.on_free(MemTier::kDevice, MemCategory::kAct, 700);
  L.on_alloc(MemTier::kNvme, MemCategory::kParam, 40);
  const MemorySnapshot s = L.snapshot();
  EXPECT_EQ(s.host.peak_of(MemCategory::kOptim), 500u);
  EXPECT_EQ(s.host.peak_of(MemCategory::kMaster), 300u);
  EXPECT_EQ(s.host.peak_total, 500u);  // the peak of the host tier's sum, not 500 + 300
  EXPECT_EQ(s.host.live_total, 300u);
  EXPECT_EQ(s.peak_of(MemCategory::kAct), 700u);
  EXPECT_EQ(s.peak_total, 700u);  // the device's peak: host and nvme bytes are not in it
  EXPECT_EQ(s.peak_of(MemCategory::kOptim), 0u);
  EXPECT_EQ(s.nvme.peak_total, 40u);
  EXPECT_TRUE(s.host.any());
  EXPECT_TRUE(s.nvme.any());
  EXPECT_FALSE(MemoryLedger().snapshot().host.any());
}

TEST(MemoryLedger, ResetPeaksResetsEveryTier) {
  MemoryLedger L;
  L.on_alloc(MemTier::kDevice, MemCategory::kAct, 100);
  L.on_alloc(MemTier::kHost, MemCategory::kOptim, 200);
  L.on_alloc(MemTier::kNvme, MemCategory::kOptim, 300);
  L.on_free(MemTier::kDevice, MemCategory::kAct, 60);
  L.on_free(MemTier::kHost, MemCategory::kOptim, 150);
  L.on_free(MemTier::kNvme, MemCategory::kOptim, 300);
  L.reset_peaks();
  const MemorySnapshot s = L.snapshot();
  EXPECT_EQ(s.peak_of(MemCategory::kAct), 40u);
  EXPECT_EQ(s.peak_total, 40u);
  EXPECT_EQ(s.host.peak_of(MemCategory::kOptim), 50u);
  EXPECT_EQ(s.host.peak_total, 50u);
  EXPECT_EQ(s.nvme.peak_of(MemCategory::kOptim), 0u);
  EXPECT_EQ(s.nvme.peak_total, 0u);
  EXPECT_FALSE(s.nvme.any());
}

TEST(MemoryLedger, BudgetCapsTheDeviceTierOnly) {
  MemoryLedger L;
  L.set_budget(1000);
  // Host and nvme bytes are outside the budget, and do not count against the device's.
  L.on_alloc(MemTier::kHost, MemCategory::kOptim, 5000);
  L.on_alloc(MemTier::kNvme, MemCategory::kOptim, 50000);
  L.on_alloc(MemCategory::kParam, 1000);
  EXPECT_EQ(L.live_total(), 1000u);
  try {
    L.on_alloc(MemTier::kDevice, MemCategory::kAct, 1);
    FAIL() << "over the device budget accepted";
  } catch (const BudgetError& e) {
    EXPECT_NE(std::string(e.what()).find("with 1000 bytes live"), std::string::npos) << e.what();
  }
  EXPECT_EQ(L.live(MemCategory::kAct), 0u);
  L.on_alloc(MemTier::kHost, MemCategory::kAct, 1);  // the host tier still takes more
  EXPECT_EQ(L.live_total(MemTier::kHost), 5001u);
}

TEST(Buffer, FreesUnderItsTier) {
  MemoryLedger L;
  L.set_budget(100);
  {
    Buffer host(1000, MemCategory::kOptim, MemTier::kHost, L);  // over the budget, but not device memory
    EXPECT_EQ(host.tier(), MemTier::kHost);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(host.data()) % 64, 0u);
    EXPECT_EQ(L.live(MemTier::kHost, MemCategory::kOptim), 1000u);
    EXPECT_EQ(L.live(MemCategory::kOptim), 0u);
    Buffer dev(100, MemCategory::kOptim, L);
    EXPECT_EQ(dev.tier(), MemTier::kDevice);
    EXPECT_EQ(L.live(MemCategory::kOptim), 100u);
    // A move carries the tier: the moved-to buffer frees under the host tier.
    Buffer moved(std::move(host));
    EXPECT_EQ(moved.tier(), MemTier::kHost);
    Buffer assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.tier(), MemTier::kHost);
    assigned.release();
    EXPECT_EQ(L.live(MemTier::kHost, MemCategory::kOptim), 0u);
    EXPECT_EQ(L.live(MemCategory::kOptim), 100u);
    // Assigning over a host buffer frees it under the host tier, then holds the device one.
    Buffer h2(10, MemCategory::kMaster, MemTier::kHost, L);
    h2 = std::move(dev);
    EXPECT_EQ(L.live(MemTier::kHost, MemCategory::kMaster), 0u);
    EXPECT_EQ(h2.tier(), MemTier::kDevice);
  }
  EXPECT_EQ(L.live_total(), 0u);
  EXPECT_EQ(L.live_total(MemTier::kHost), 0u);
  EXPECT_EQ(L.peak(MemTier::kHost, MemCategory::kOptim), 1000u);
  EXPECT_EQ(L.peak(MemTier::kHost, MemCategory::kMaster), 10u);
  EXPECT_EQ(L.peak(MemCategory::kOptim), 100u);
}

TEST(Buffer, NvmeIsNotABuffer) {
  MemoryLedger L;
  EXPECT_THROW(Buffer(64, MemCategory::kOptim, MemTier::kNvme, L), RuntimeFailure);
  EXPECT_EQ(L.peak_total(MemTier::kNvme), 0u);
}

TEST(Buffer, AlignedAccountedAndReleased) {
  MemoryLedger L;
  {
    Buffer a(1001, MemCategory::kComm, L);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    EXPECT_EQ(L.live(MemCategory::kComm), 1001u);  // the bytes asked for, not the rounding
    a.zero();
    EXPECT_EQ(a.as<uint8_t>()[1000], 0);
    Buffer b(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(L.live(MemCategory::kComm), 1001u);
    Buffer c;
    c = std::move(b);
    EXPECT_EQ(c.size(), 1001u);
    Buffer zero(0, MemCategory::kAct, L);
    EXPECT_TRUE(zero.empty());
  }
  EXPECT_EQ(L.live_total(), 0u);
  EXPECT_EQ(L.peak(MemCategory::kComm), 1001u);
}

TEST(Buffer, OverBudgetAllocatesNothing) {
  MemoryLedger L;
  L.set_budget(100);
  EXPECT_THROW(Buffer(101, MemCategory::kParam, L), BudgetError);
  EXPECT_EQ(L.live_total(), 0u);
  Buffer ok(100, MemCategory::kParam, L);
  EXPECT_EQ(L.live_total(), 100u);
}

TEST(MemoryLedger, ThreadSafeCounting) {
  MemoryLedger L;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&L] {
      for (int i = 0; i < 10000; ++i) {
        Buffer b(64, MemCategory::kAct, L);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(L.live_total(), 0u);
  EXPECT_GE(L.peak(MemCategory::kAct), 64u);
  EXPECT_LE(L.peak(MemCategory::kAct), 4u * 64u);
}

// The C library takes the thresholds (a mapping threshold above glibc's 32 MiB cap is capped, not
// refused), and freed memory still comes back for the next allocation of that size.
TEST(HostMemory, RetainsFreedMemoryWhereTheCLibraryCan) {
#if defined(ZERODP_ASAN)
  // AddressSanitizer's allocator replaces glibc's, and its mallopt takes nothing.
  EXPECT_FALSE(retain_freed_host_memory());
#elif defined(__GLIBC__)
  EXPECT_TRUE(retain_freed_host_memory());
  EXPECT_TRUE(retain_freed_host_memory(size_t{1} << 33, size_t{1} << 40));
#else
  EXPECT_FALSE(retain_freed_host_memory());
#endif
  for (int i = 0; i < 3; ++i) {
    Buffer b(size_t{3} << 20, MemCategory::kComm);
    ASSERT_NE(b.data(), nullptr);
    b.as<char>()[b.size() - 1] = 1;
  }
}

TEST(MemoryCategory, NamesMatchTheContract) {
  const char* want[] = {"param", "grad", "master", "optim", "gathered", "comm", "act"};
  for (size_t i = 0; i < kNumMemCategories; ++i) {
    EXPECT_STREQ(mem_category_name(kAllMemCategories[i]), want[i]);
    EXPECT_EQ(parse_mem_category(want[i]), kAllMemCategories[i]);
  }
  EXPECT_THROW(parse_mem_category("weights"), UsageError);
}

TEST(Tensor, OwnsViewsReshapesAndSlices) {
  const uint64_t before = MemoryLedger::global().live(MemCategory::kAct);
  {
    Tensor t = Tensor::zeros({3, 4}, DType::kF32, MemCategory::kAct);
    EXPECT_EQ(MemoryLedger::global().live(MemCategory::kAct), before + 48);
    EXPECT_EQ(t.numel(), 12);
    EXPECT_EQ(t.nbytes(), 48u);
    t.data_as<float>()[5] = 7.0f;
    Tensor r = t.reshape({2, 6});
    EXPECT_EQ(r.data_as<float>()[5], 7.0f);
    Tensor s = t.slice_rows(1, 3);
    EXPECT_EQ(s.dim(0), 2);
    EXPECT_EQ(s.data_as<float>()[1], 7.0f);
    EXPECT_THROW(t.reshape({5}), RuntimeFailure);
    EXPECT_THROW(t.slice_rows(2, 4), RuntimeFailure);
    Tensor h = Tensor::empty({5}, DType::kBF16, MemCategory::kAct);
    EXPECT_EQ(h.nbytes(), 10u);
    float x[4];
    Tensor v = Tensor::view(x, {4}, DType::kF32);
    EXPECT_EQ(v.data(), x);
    EXPECT_EQ(shape_str(t.shape()), "[3, 4]");
  }
  EXPECT_EQ(MemoryLedger::global().live(MemCategory::kAct), before);
}

namespace zerodp {
namespace {

// A source that hands out heap blocks and remembers what is outstanding (as a GPU allocator would).
class CountingSource final : public BufferSource {
 public:
  int live = 0;
  size_t bytes_out = 0;
  bool fail = false;
  void* allocate(size_t bytes) override {
    if (fail) throw BudgetError("source is full");
    ++live;
    bytes_out += bytes;
    return std::malloc(bytes);
  }
  void deallocate(void* p, size_t bytes) noexcept override {
    --live;
    bytes_out -= bytes;
    std::free(p);
  }
};

TEST(BufferSource, TheLedgerCountsTheBytesAskedForAndTheSourceGetsThemBack) {
  MemoryLedger ledger;
  CountingSource source;
  {
    Buffer a(1000, MemCategory::kAct, MemTier::kDevice, source, ledger);
    Buffer b(24, MemCategory::kComm, MemTier::kHost, source, ledger);
    EXPECT_EQ(source.live, 2);
    EXPECT_EQ(ledger.live(MemCategory::kAct), 1000u);
    EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kComm), 24u);
    Buffer moved = std::move(a);  // the source moves with the bytes
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(moved.size(), 1000u);
    b = std::move(moved);  // b's own bytes go back to the source first
    EXPECT_EQ(source.live, 1);
    EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kComm), 0u);
    EXPECT_THROW(b.zero(), RuntimeFailure);  // not addressable here in general: the device zeroes it
  }
  EXPECT_EQ(source.live, 0);
  EXPECT_EQ(source.bytes_out, 0u);
  EXPECT_EQ(ledger.live_total(), 0u);
  EXPECT_EQ(ledger.peak_total(), 1000u);
}

TEST(BufferSource, AFailedAllocationCountsNothing) {
  MemoryLedger ledger;
  CountingSource source;
  source.fail = true;
  EXPECT_THROW(Buffer(64, MemCategory::kParam, MemTier::kDevice, source, ledger), BudgetError);
  EXPECT_EQ(ledger.live_total(), 0u);
  // Over the budget: the source is never asked.
  ledger.set_budget(10);
  source.fail = false;
  EXPECT_THROW(Buffer(64, MemCategory::kParam, MemTier::kDevice, source, ledger), BudgetError);
  EXPECT_EQ(source.live, 0);
}

}  // namespace
}  // namespace zerodp
