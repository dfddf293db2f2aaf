// The CUDA device through the seam against the CPU device: the same calls, the same answers (bit for
// bit where the operations are the same IEEE operations in the same order), the ledger's bytes, and
// the ordering of the compute and copy streams.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/quantize.h"
#include "device/cpu_device.h"
#include "device/cuda_device.h"

namespace zerodp::device {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Host vector -> new device buffer, and back.
Buffer upload(CudaDevice& dev, const void* host, size_t bytes, MemCategory c = MemCategory::kAct) {
  Buffer b = dev.allocate(bytes, c);
  dev.copy(b.data(), host, bytes);
  return b;
}
template <class T>
std::vector<T> download(CudaDevice& dev, const Buffer& b) {
  std::vector<T> out(b.size() / sizeof(T));
  dev.copy(out.data(), b.data(), b.size());  // a host destination: copy waits for it
  return out;
}

TEST(CudaDevice, MemoryIsCountedInTheLedgerExactly) {
  CudaDevice dev(0);
  MemoryLedger& ledger = MemoryLedger::global();
  const uint64_t act = ledger.live(MemCategory::kAct), host = ledger.live(MemTier::kHost, MemCategory::kComm);
  {
    Buffer a = dev.allocate(1000, MemCategory::kAct);
    Buffer h = dev.allocate_host(777, MemCategory::kComm);
    EXPECT_EQ(ledger.live(MemCategory::kAct), act + 1000);
    EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kComm), host + 777);
    EXPECT_GE(dev.reserved_bytes(), 1000u);
    EXPECT_GE(dev.reserved_host_bytes(), 777u);
    std::memset(h.data(), 7, h.size());  // page-locked host memory is the host's to touch
    EXPECT_THROW(a.zero(), RuntimeFailure);  // device bytes are zeroed by the device
  }
  EXPECT_EQ(ledger.live(MemCategory::kAct), act);
  EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kComm), host);
}

TEST(CudaDevice, OutOfGpuMemoryIsABudgetError) {
  CudaDevice dev(0);
  EXPECT_THROW(dev.allocate(size_t{1} << 50, MemCategory::kAct), BudgetError);  // a petabyte
}

TEST(CudaDevice, CopyFillAndConvertAsTheCpuDevice) {
  CudaDevice dev(0);
  CpuDevice cpu;
  const size_t n = 100003;
  const std::vector<float> x = random_floats(n, 1, 3.0f);
  Buffer dx = upload(dev, x.data(), n * 4);
  for (DType to : {DType::kBF16, DType::kF16}) {
    Buffer d16 = dev.allocate(n * 2, MemCategory::kAct);
    dev.convert(dx.data(), DType::kF32, d16.data(), to, n);
    std::vector<uint16_t> want(n);
    cpu.convert(x.data(), DType::kF32, want.data(), to, n);
    EXPECT_EQ(download<uint16_t>(dev, d16), want) << dtype_name(to);
    // add_into: dst = round(dst + src) in fp32.
    std::vector<uint16_t> acc = want;
    cpu.add_into(acc.data(), to, x.data(), DType::kF32, n);
    dev.add_into(d16.data(), to, dx.data(), DType::kF32, n);
    EXPECT_EQ(download<uint16_t>(dev, d16), acc) << dtype_name(to);
  }
  dev.fill_zero(dx.data(), n * 4);
  const std::vector<float> zeros = download<float>(dev, dx);
  EXPECT_EQ(zeros, std::vector<float>(n, 0.0f));
}

// ZeRO++'s int8 blocks on the GPU: the CPU device's bytes (scales, NaN scales of non-finite blocks, the
// int8 values) and, back, its values bit for bit, for each dtype, a partial last block, a zero block and
// blocks holding a NaN and an Inf.
TEST(CudaDevice, QuantizationIsTheCpuDevicesBitForBit) {
  CudaDevice dev(0);
  CpuDevice cpu;
  for (const size_t n : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{100003}}) {
    std::vector<float> x = random_floats(n, 9 + static_cast<uint32_t>(n), 2.0f);
    if (n > 1000) {
      std::fill(x.begin() + 256, x.begin() + 512, 0.0f);   // block 1: zeros (scale 0)
      x[600] = std::numeric_limits<float>::quiet_NaN();    // block 2
      x[900] = -std::numeric_limits<float>::infinity();    // block 3
      x[1000] = 1e30f;                                     // block 3 too: no matter, it is non-finite
      x[1300] = -0.0f;
    }
    for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " n=" << n);
      std::vector<char> typed(n * dtype_size(t));
      cpu.convert(x.data(), DType::kF32, typed.data(), t, n);
      Buffer dx = upload(dev, typed.data(), typed.size());
      const size_t qn = quantized_int8_bytes(n);
      std::vector<char> want(qn);
      cpu.quantize_int8(typed.data(), t, n, want.data());
      Buffer dq = dev.allocate(qn, MemCategory::kComm);
      dev.quantize_int8(dx.data(), t, n, dq.data());
      EXPECT_EQ(download<char>(dev, dq), want) << "quantized bytes";
      std::vector<char> back(typed.size());
      cpu.dequantize_int8(want.data(), n, back.data(), t);
      Buffer dback = dev.allocate(typed.size(), MemCategory::kAct);
      dev.dequantize_int8(dq.data(), n, dback.data(), t);
      EXPECT_EQ(download<char>(dev, dback), back) << "dequantized values";
    }
  }
}

// $ZERODP_GPU_PROFILE: each device operation timed by name, the outermost only, and nothing without it.
TEST(CudaDevice, ProfilingTimesEachOperationByName) {
  {
    CudaDevice quiet(0);
    EXPECT_EQ(quiet.kernel_time_report(), "");
  }
  setenv("ZERODP_GPU_PROFILE", "1", 1);
  CudaDevice dev(0);
  unsetenv("ZERODP_GPU_PROFILE");
  const size_t n = 1 << 20;
  const std::vector<float> x = random_floats(n, 5);
  Buffer dx = upload(dev, x.data(), n * 4);
  Buffer d16 = dev.allocate(n * 2, MemCategory::kAct);
  for (int i = 0; i < 3; ++i) dev.convert(dx.data(), DType::kF32, d16.data(), DType::kBF16, n);
  (void)dev.sum_squares(dx.data(), DType::kF32, n);
  const std::string r = dev.kernel_time_report();
  EXPECT_NE(r.find("GPU time by entry"), std::string::npos) << r;
  const size_t at = r.find("  convert ");
  ASSERT_NE(at, std::string::npos) << r;
  EXPECT_NE(r.substr(at, 50).find(" 3 "), std::string::npos) << r;  // three calls
  EXPECT_NE(r.find("  sum_squares "), std::string::npos) << r;
  EXPECT_NE(r.find("cover"), std::string::npos) << r;
}

TEST(CudaDevice, SumOfSquaresIsTheCpuDevicesInFp32) {
  CudaDevice dev(0);
  CpuDevice cpu;
  for (size_t n : {size_t{1}, size_t{4095}, size_t{4096}, size_t{1000001}}) {
    const std::vector<float> x = random_floats(n, 2 + static_cast<uint32_t>(n));
    Buffer dx = upload(dev, x.data(), n * 4);
    EXPECT_EQ(dev.sum_squares(dx.data(), DType::kF32, n), cpu.sum_squares(x.data(), DType::kF32, n)) << n;
  }
}

TEST(CudaDevice, SumsOfSquaresWithOneWaitAreEachSpansOwn) {
  CudaDevice dev(0);
  CpuDevice cpu;
  // More spans than the device has slots at first, empty ones among them, and a second call with fewer.
  const std::vector<size_t> sizes = {4096, 0, 1, 1000001, 4095, 0, 77, 123457, 3, 65536, 9, 2, 8191, 5, 4097, 1};
  size_t total = 0;
  for (size_t n : sizes) total += n;
  const std::vector<float> x = random_floats(total, 21);
  Buffer dx = upload(dev, x.data(), total * 4);
  std::vector<Device::SquaresSpan> spans, host_spans;
  size_t at = 0;
  for (size_t n : sizes) {
    spans.push_back({dx.as<float>() + at, DType::kF32, n});
    host_spans.push_back({x.data() + at, DType::kF32, n});
    at += n;
  }
  for (size_t count : {sizes.size(), size_t{3}}) {
    std::vector<double> each(count, -1.0), want(count);
    dev.sum_squares_each({spans.data(), count}, each.data());
    cpu.sum_squares_each({host_spans.data(), count}, want.data());
    EXPECT_EQ(each, want) << count;
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(each[i], dev.sum_squares(spans[i].x, DType::kF32, spans[i].n)) << i;
  }
}

TEST(CudaDevice, AdamWIsTheCpuDevicesBitForBit) {
  CudaDevice dev(0);
  CpuDevice cpu;
  const size_t n = 65537;
  std::vector<float> p = random_floats(n, 3), g = random_floats(n, 4, 0.1f), m(n, 0.0f), v(n, 0.0f);
  Buffer dp = upload(dev, p.data(), n * 4), dg = upload(dev, g.data(), n * 4), dm = upload(dev, m.data(), n * 4),
         dv = upload(dev, v.data(), n * 4);
  optim::AdamWParams hp;
  hp.weight_decay = 0.1;
  for (int64_t t = 1; t <= 3; ++t) {
    cpu.adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, t, /*decay=*/t != 2, 0.5f);
    dev.adamw_update(dp.as<float>(), dg.as<float>(), dm.as<float>(), dv.as<float>(), n, hp, t, t != 2, 0.5f);
  }
  EXPECT_EQ(download<float>(dev, dp), p);
  EXPECT_EQ(download<float>(dev, dm), m);
  EXPECT_EQ(download<float>(dev, dv), v);
}

// Every variant of SGD (no momentum, momentum with dampening, nesterov; decay on and off; the first
// step and later ones) is the CPU's bit for bit.
TEST(CudaDevice, SgdIsTheCpuDevicesBitForBit) {
  CudaDevice dev(0);
  CpuDevice cpu;
  const size_t n = 65537;
  struct Variant {
    double momentum, dampening;
    bool nesterov;
  };
  for (const Variant& k : {Variant{0.0, 0.0, false}, Variant{0.9, 0.1, false}, Variant{0.9, 0.0, true}}) {
    std::vector<float> p = random_floats(n, 13), g = random_floats(n, 14, 0.1f), buf(n, 0.0f);
    Buffer dp = upload(dev, p.data(), n * 4), dg = upload(dev, g.data(), n * 4), db = upload(dev, buf.data(), n * 4);
    optim::SGDParams hp;
    hp.lr = 0.05;
    hp.weight_decay = 0.1;
    hp.momentum = k.momentum;
    hp.dampening = k.dampening;
    hp.nesterov = k.nesterov;
    for (int64_t t = 1; t <= 3; ++t) {
      cpu.sgd_update(p.data(), g.data(), buf.data(), n, hp, t, /*decay=*/t != 2, 0.5f);
      dev.sgd_update(dp.as<float>(), dg.as<float>(), db.as<float>(), n, hp, t, t != 2, 0.5f);
    }
    EXPECT_EQ(download<float>(dev, dp), p) << "momentum " << k.momentum << " nesterov " << k.nesterov;
    if (k.momentum != 0.0) {
      EXPECT_EQ(download<float>(dev, db), buf) << "momentum " << k.momentum;
    }
  }
}

// fp32 GEMM through cuBLASLt (TF32 off) against OpenBLAS: the same products, summed in another
// order: within K·2^-24 of Σ|a·b| per element.
TEST(CudaDevice, Fp32GemmAgreesWithTheCpuDevice) {
  CudaDevice dev(0);
  CpuDevice cpu;
  const int M = 67, N = 129, K = 300;
  const std::vector<float> a = random_floats(size_t(M) * K, 5), b = random_floats(size_t(K) * N, 6);
  std::vector<float> c(size_t(M) * N, 0.0f), abs_c(size_t(M) * N, 0.0f);
  cpu.gemm(DType::kF32, false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, c.data(), N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) abs_c[size_t(i) * N + j] += std::fabs(a[size_t(i) * K + k] * b[size_t(k) * N + j]);
  Buffer da = upload(dev, a.data(), a.size() * 4), db = upload(dev, b.data(), b.size() * 4);
  Buffer dc = dev.allocate(c.size() * 4, MemCategory::kAct);
  dev.gemm(DType::kF32, false, false, M, N, K, 1.0f, da.data(), K, db.data(), N, 0.0f, dc.as<float>(), N);
  const std::vector<float> got = download<float>(dev, dc);
  for (size_t i = 0; i < c.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - c[i]), 4.0 * (K + 1) * 0x1p-24 * abs_c[i] + 1e-30) << i;
}

// A transfer after compute sees the compute's result; its event says when the destination is ready.
TEST(CudaDevice, TransfersAreOrderedAfterTheComputeIssuedBeforeThem) {
  CudaDevice dev(0);
  const size_t n = size_t{1} << 22;
  const std::vector<float> x = random_floats(n, 7);
  Buffer dx = upload(dev, x.data(), n * 4);
  Buffer host = dev.allocate_host(n * 2, MemCategory::kComm);
  dev.fill_zero(dx.data(), n * 4);  // compute: zero it...
  dev.transfer(dx.data(), DType::kF32, host.data(), DType::kBF16, n);  // ...then bring it down as bf16
  std::unique_ptr<Event> done = dev.record_transfer();
  done->wait();
  EXPECT_TRUE(done->done());
  const uint16_t* h = host.as<uint16_t>();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(h[i], 0u) << i;
  std::unique_ptr<Event> e = dev.record();
  dev.synchronize();
  EXPECT_TRUE(e->done());
}

TEST(CudaDevice, WhatIsNotWiredSaysSo) {
  CudaDevice dev(0);
  EXPECT_EQ(dev.name(), "cuda:0");
  EXPECT_FALSE(dev.supports(DType::kF32));
  EXPECT_TRUE(dev.supports(DType::kBF16));
  EXPECT_TRUE(dev.supports(DType::kF16));
  try {
    dev.kernels<float>();
    ADD_FAILURE();
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype bf16"), std::string::npos) << e.what();
  }
}

// Two devices in one process, driven in turn from one thread: each keeps its own streams, allocator and
// GEMM handle, and each call runs on its own GPU whichever is current (cuda:1 where there is one, else
// a second device on GPU 0).
TEST(CudaDevice, TwoDevicesLiveSideBySide) {
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  CudaDevice a(0);
  CudaDevice b(gpus > 1 ? 1 : 0);
  EXPECT_NE(a.compute_stream(), b.compute_stream());
  const size_t n = 4096;
  const std::vector<float> x = random_floats(n, 7);
  Buffer xa = upload(a, x.data(), n * sizeof(float));
  Buffer xb = upload(b, x.data(), n * sizeof(float));
  const ModelKernels<bf16>& ka = a.kernels<bf16>();
  const ModelKernels<bf16>& kb = b.kernels<bf16>();
  EXPECT_NE(&ka, &kb);
  Buffer ya = a.allocate(n * sizeof(float), MemCategory::kAct);
  Buffer yb = b.allocate(n * sizeof(float), MemCategory::kAct);
  ka.residual_forward(ya.as<float>(), xa.as<float>(), xa.as<float>(), n);  // b's GPU is current here
  kb.residual_forward(yb.as<float>(), xb.as<float>(), xb.as<float>(), n);
  EXPECT_EQ(a.sum_squares(ya.data(), DType::kF32, n), b.sum_squares(yb.data(), DType::kF32, n));
  const std::vector<float> ra = download<float>(a, ya), rb = download<float>(b, yb);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(ra[i], 2.0f * x[i]) << i;
  EXPECT_EQ(0, std::memcmp(ra.data(), rb.data(), n * sizeof(float)));
}

}  // namespace
}  // namespace zerodp::device
