// The compute seam's CPU device (device/cpu_device.h): memory in the ledger, copies, GEMMs, the
// GPT-2 kernel tables the model calls, and the ordering primitive.
#include "device/cpu_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "device/transfer_queue.h"
#include "core/memory.h"
#include "kernels/attention.h"
#include "kernels/gemm16.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"

namespace zerodp::device {
namespace {

TEST(CpuDevice, IsTheDefaultDevice) {
  EXPECT_EQ(default_device().name(), "cpu");
  EXPECT_NE(dynamic_cast<CpuDevice*>(&default_device()), nullptr);
}

TEST(CpuDevice, AllocatesInTheLedger) {
  MemoryLedger& ledger = MemoryLedger::global();
  const uint64_t before = ledger.live(MemCategory::kAct);
  {
    Buffer b = default_device().allocate(1000, MemCategory::kAct);
    EXPECT_EQ(ledger.live(MemCategory::kAct) - before, 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  }
  EXPECT_EQ(ledger.live(MemCategory::kAct), before);
}

// Host memory is RAM too on the CPU device, but the ledger counts it in the host tier, outside the
// device tier and its budget.
TEST(CpuDevice, AllocatesHostMemoryInTheHostTier) {
  MemoryLedger& ledger = MemoryLedger::global();
  const MemorySnapshot before = ledger.snapshot();
  const std::optional<uint64_t> budget = ledger.budget();
  ledger.set_budget(before.live_total);  // no device byte more
  {
    Buffer b = default_device().allocate_host(1000, MemCategory::kOptim);
    EXPECT_EQ(b.tier(), MemTier::kHost);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kOptim) - before.host.live_of(MemCategory::kOptim), 1000u);
    EXPECT_EQ(ledger.live(MemCategory::kOptim), before.live_of(MemCategory::kOptim));
    EXPECT_EQ(ledger.live_total(), before.live_total);
    EXPECT_THROW(default_device().allocate(1, MemCategory::kOptim), BudgetError);
  }
  ledger.set_budget(budget);
  EXPECT_EQ(ledger.live_total(MemTier::kHost), before.host.live_total);
}

TEST(CpuDevice, CopiesAndZeroes) {
  Device& dev = default_device();
  for (size_t n : {size_t{0}, size_t{5}, size_t{3} << 20}) {  // below and above the parallel threshold
    std::vector<uint8_t> a(n), b(n, 0xAB);
    std::iota(a.begin(), a.end(), 0);
    dev.copy(b.data(), a.data(), n);
    EXPECT_EQ(a, b);
    dev.fill_zero(b.data(), n);
    EXPECT_EQ(std::count(b.begin(), b.end(), 0), static_cast<long>(n));
  }
}

TEST(CpuDevice, SumSquaresEachIsSumSquaresOfEverySpan) {
  Device& dev = default_device();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(70001);
  for (float& v : x) v = normal(rng);
  std::vector<bf16> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i].bits = fp32_to_bf16(x[i]);
  const std::vector<Device::SquaresSpan> spans = {{x.data(), DType::kF32, 5},
                                                  {x.data() + 5, DType::kF32, 0},
                                                  {x.data() + 5, DType::kF32, x.size() - 5},
                                                  {x16.data(), DType::kBF16, x16.size()}};
  std::vector<double> each(spans.size(), -1.0);
  dev.sum_squares_each(spans, each.data());
  for (size_t i = 0; i < spans.size(); ++i)
    EXPECT_EQ(each[i], dev.sum_squares(spans[i].x, spans[i].type, spans[i].n)) << i;
  EXPECT_EQ(each[1], 0.0);
  EXPECT_GT(each[2], 60000.0);
}

TEST(CpuDevice, GemmIsTheKernelsGemm) {
  const int M = 33, N = 21, K = 47;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(M * K), b(K * N);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  std::vector<float> c1(M * N, 0.5f), c2 = c1;
  default_device().gemm(DType::kF32, false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 1.0f, c1.data(), N);
  kernels::gemm_f32(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 1.0f, c2.data(), N);
  EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), c1.size() * 4));
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  convert(a.data(), DType::kF32, a16.data(), DType::kBF16, a.size());
  convert(b.data(), DType::kF32, b16.data(), DType::kBF16, b.size());
  c1.assign(static_cast<size_t>(M) * M, 0.0f);
  c2 = c1;
  default_device().gemm(DType::kBF16, false, true, M, M, K, 1.0f, a16.data(), K, a16.data(), K, 0.0f, c1.data(), M);
  kernels::gemm16(DType::kBF16, false, true, M, M, K, 1.0f, a16.data(), K, a16.data(), K, 0.0f, c2.data(), M);
  EXPECT_EQ(0, std::memcmp(c1.data(), c2.data(), static_cast<size_t>(M) * M * 4));
}

TEST(CpuDevice, ModelKernelsAreTheKernelsOfKernelsRunOnTheCallersThread) {
  const Device& dev = default_device();
  const int N = 5, C = 24;
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> inp(N * C), w(C), b(C);
  for (auto* v : {&inp, &w, &b})
    for (float& x : *v) x = dist(rng);
  std::vector<float> out1(N * C), mean1(N), rstd1(N), out2(N * C), mean2(N), rstd2(N);
  kernels::layernorm_forward<float, float, float>(out1.data(), mean1.data(), rstd1.data(), inp.data(), w.data(),
                                                  b.data(), N, C);
  // fp32 runs call exactly the kernels of kernels/, and the work is done when the call returns.
  dev.kernels<float>().layernorm_forward(out2.data(), mean2.data(), rstd2.data(), inp.data(), w.data(), b.data(), N, C);
  EXPECT_EQ(0, std::memcmp(out1.data(), out2.data(), out1.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(rstd1.data(), rstd2.data(), rstd1.size() * sizeof(float)));
  // Attention scratch: fp32's row blocks of dP, 16-bit compute's per-head blocks.
  const kernels::AttentionShape mha = kernels::AttentionShape::mha(2, 70, 48, 4), gqa{2, 70, 4, 2, 12};
  EXPECT_EQ(dev.kernels<float>().attention_scratch_bytes(mha), kernels::attention_scratch_elems(mha) * sizeof(float));
  EXPECT_EQ(dev.kernels<bf16>().attention_scratch_bytes(gqa), kernels::attention16_scratch_bytes(gqa));
  EXPECT_EQ(dev.kernels<double>().attention_saved_bytes(mha), size_t{2} * 4 * 70 * 70 * sizeof(double));
}

TEST(CpuDevice, SupportsEveryComputeType) {
  const Device& dev = default_device();
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) EXPECT_TRUE(dev.supports(t)) << dtype_name(t);
}

// A device answers which dtypes it computes in by the tables it has: one without some answers
// supports() false for them, and asking for such a table is an error naming the device and the
// dtypes it does have (the CUDA device has no fp32 tables: its attention is 16-bit only).
class CpuWithoutFp32 : public CpuDevice {
 protected:
  const ModelKernels<float>* kernels_f32() const override { return nullptr; }
  const ModelKernels<fp16>* kernels_fp16() const override { return nullptr; }
};

TEST(Device, SaysWhichComputeTypesItHasAndNamesThemWhenAskedForAnother) {
  CpuWithoutFp32 dev;
  EXPECT_FALSE(dev.supports(DType::kF32));
  EXPECT_TRUE(dev.supports(DType::kBF16));
  EXPECT_FALSE(dev.supports(DType::kF16));
  auto message = [](auto&& get) {
    try {
      get();
    } catch (const RuntimeFailure& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { dev.kernels<float>(); }),
            "the cpu device has no kernels computing in fp32: use --dtype bf16");
  EXPECT_EQ(message([&] { dev.kernels<fp16>(); }),
            "the cpu device has no kernels computing in fp16: use --dtype bf16");
  EXPECT_NO_THROW(dev.kernels<bf16>());
}

TEST(CpuDevice, TwoDevicesShareNoState) {
  CpuDevice a, b;
  EXPECT_NE(&a.transfers(), &b.transfers());
  std::vector<float> src(64, 1.5f), dst(64, 0.0f);
  a.transfer(src.data(), DType::kF32, dst.data(), DType::kF32, src.size());
  a.record_transfer()->wait();
  EXPECT_EQ(dst, src);
}

TEST(CpuDevice, OptimizerUpdatesAreOptimsBitForBit) {
  const size_t n = 100000;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> p(n), g(n), m(n), v(n);
  for (auto* x : {&p, &g, &m, &v})
    for (float& e : *x) e = dist(rng);
  for (float& e : v) e = std::abs(e);
  auto p2 = p, m2 = m, v2 = v;
  const optim::AdamWParams hp{1e-3, 0.9, 0.999, 1e-8, 0.1};
  default_device().adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, 3, true, 0.5f);
  optim::adamw_update(p2.data(), g.data(), m2.data(), v2.data(), n, hp, 3, true, 0.5f);
  EXPECT_EQ(0, std::memcmp(p.data(), p2.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(m.data(), m2.data(), n * 4));
  EXPECT_EQ(0, std::memcmp(v.data(), v2.data(), n * 4));
  const optim::SGDParams sp{0.1, 0.9, 0.0, 0.01, true};
  default_device().sgd_update(p.data(), g.data(), m.data(), n, sp, 2, true, 1.0f);
  optim::sgd_update(p2.data(), g.data(), m2.data(), n, sp, 2, true, 1.0f);
  EXPECT_EQ(0, std::memcmp(p.data(), p2.data(), n * 4));
  std::vector<uint16_t> h(n), h2(n);
  default_device().convert(p.data(), DType::kF32, h.data(), DType::kBF16, n);
  convert(p.data(), DType::kF32, h2.data(), DType::kBF16, n);
  EXPECT_EQ(h, h2);
}

TEST(CpuDevice, EventsCompleteWhenRecorded) {
  Device& dev = default_device();
  auto e = dev.record();
  EXPECT_TRUE(e->done());
  e->wait();
  dev.synchronize();
}

// The transfer queue runs its work in order on a thread of its own: an event recorded after some
// work is not done while that work is held up, and is once it has run; later work waits for earlier.
TEST(TransferQueue, RunsInOrderBesideTheCallerAndEventsTrackIt) {
  TransferQueue q(/*inline_work=*/false);
  std::atomic<bool> release{false};
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  q.submit([&] {
    ran_on = std::this_thread::get_id();
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    order.push_back(1);
  });
  auto first = q.record();
  q.submit([&] { order.push_back(2); });
  auto second = q.record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(first->done());  // held up: the caller is not blocked by submit()
  EXPECT_FALSE(second->done());
  release = true;
  second->wait();
  EXPECT_TRUE(first->done());
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ran_on, caller);
  q.drain();
}

TEST(TransferQueue, InlineRunsAtSubmit) {
  TransferQueue q(/*inline_work=*/true);
  int ran = 0;
  q.submit([&] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(q.record()->done());
}

// Destroying the queue finishes what was submitted.
TEST(TransferQueue, DestructionFinishesTheWork) {
  std::atomic<int> ran{0};
  {
    TransferQueue q(false);
    for (int i = 0; i < 100; ++i) q.submit([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

// The device's transfer() converts as convert() does, once its event is done.
TEST(CpuDevice, TransferConvertsLikeConvert) {
  Device& dev = default_device();
  const size_t n = 100'003;
  std::vector<float> x(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  std::vector<uint16_t> via_transfer(n), via_convert(n);
  dev.transfer(x.data(), DType::kF32, via_transfer.data(), DType::kBF16, n);
  auto e = dev.record_transfer();
  dev.convert(x.data(), DType::kF32, via_convert.data(), DType::kBF16, n);
  e->wait();
  EXPECT_EQ(via_transfer, via_convert);
  dev.synchronize();
}

}  // namespace
}  // namespace zerodp::device
