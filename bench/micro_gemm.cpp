// zerodp's GEMMs: fp32 (OpenBLAS's cblas_sgemm, what kernels/blas.h calls) against the 16-bit GEMMs
// with fp32 accumulation (kernels/gemm16.h: oneMKL on CPUs with AMX / AVX-512 BF16, the widening
// fallback elsewhere), at 2048³ in the three layouts the model uses (NN forward, NT dinp, TN dW).
// GFLOP/s = 2·M·N·K per call. The 16-bit operands are converted beforehand (not timed).
//   ./micro_gemm                               (OMP_NUM_THREADS sets the threads)
//   ZERODP_GEMM16=blas ./micro_gemm            (the fallback)
// Issue 12 asks for bf16 ≥ 5× fp32 at 2048³ on a CPU with AMX: compare the rows of one run.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/gemm16.h"

namespace {

using zerodp::DType;

constexpr int kN = 2048;

std::vector<float> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void set_flops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// range(0): 0 = NN, 1 = NT, 2 = TN
void layout_label(benchmark::State& state) {
  static const char* names[] = {"NN", "NT", "TN"};
  state.SetLabel(names[state.range(0)]);
}

void BM_GemmFp32(benchmark::State& state) {
  const int n = kN, op = static_cast<int>(state.range(0));
  const auto a = random_vector(size_t(n) * n, 1), b = random_vector(size_t(n) * n, 2);
  std::vector<float> c(size_t(n) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, op == 2 ? CblasTrans : CblasNoTrans, op == 1 ? CblasTrans : CblasNoTrans, n, n, n,
                1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  layout_label(state);
  set_flops(state, 2.0 * n * n * n);
}

template <DType kType>
void BM_Gemm16(benchmark::State& state) {
  const int n = kN, op = static_cast<int>(state.range(0));
  const auto af = random_vector(size_t(n) * n, 1), bf = random_vector(size_t(n) * n, 2);
  std::vector<uint16_t> a(af.size()), b(bf.size());
  zerodp::convert(af.data(), DType::kF32, a.data(), kType, af.size());
  zerodp::convert(bf.data(), DType::kF32, b.data(), kType, bf.size());
  std::vector<float> c(size_t(n) * n);
  // The first call loads and initialises the library (about half a second for oneMKL): not timed.
  zerodp::kernels::gemm16(kType, op == 2, op == 1, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  for (auto _ : state) {
    zerodp::kernels::gemm16(kType, op == 2, op == 1, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  const auto& info = zerodp::kernels::gemm16_info(kType);
  state.SetLabel(std::string(op == 0 ? "NN" : op == 1 ? "NT" : "TN") + " " + zerodp::kernels::gemm16_impl_name(info.impl));
  set_flops(state, 2.0 * n * n * n);
}

BENCHMARK(BM_GemmFp32)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK_TEMPLATE(BM_Gemm16, DType::kBF16)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK_TEMPLATE(BM_Gemm16, DType::kF16)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
