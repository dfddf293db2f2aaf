// The core's FMA peak, for reading GEMM rates as a fraction of it: twelve independent chains of
// fused multiply-adds on registers (no memory traffic), 8 lanes (AVX2) and, where the CPU has it,
// 16 lanes (AVX-512). One thread: compare it with the single-thread GEMM figures.
//   ./fma_peak            prints "avx2 <GFLOP/s>" and "avx512 <GFLOP/s>" (or "avx512 none")
#include <immintrin.h>

#include <chrono>
#include <cstdio>

namespace {

constexpr int kChains = 12;  // more than FMA latency × ports: the units never wait on a result
constexpr long kIterations = 100'000'000;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The two loops differ only in vector type; each needs its own target attribute.
#define FMA_CHAINS(V, SET, FMA, STORE)                                      \
  V acc[kChains];                                                           \
  for (int i = 0; i < kChains; ++i) acc[i] = SET(1.0f + i * 1e-3f);         \
  const V m = SET(0.999999f), c = SET(1e-6f);                               \
  const auto t0 = std::chrono::steady_clock::now();                         \
  for (long it = 0; it < kIterations; ++it) {                               \
    _Pragma("GCC unroll 12") for (int i = 0; i < kChains; ++i) acc[i] = FMA(acc[i], m, c); \
  }                                                                         \
  const double s = seconds_since(t0);                                       \
  for (int i = 1; i < kChains; ++i) acc[0] = FMA(acc[0], m, acc[i]);        \
  float out[16];                                                            \
  STORE(out, acc[0]);                                                       \
  *sink += out[0];                                                          \
  return kIterations * double(kChains) * (sizeof(V) / 4) * 2 / s * 1e-9;

__attribute__((target("avx2,fma"))) double avx2_gflops(float* sink) {
  FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)
}
__attribute__((target("avx512f"))) double avx512_gflops(float* sink) {
  FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
}

}  // namespace

int main() {
  float sink = 0;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("fma")) {
    std::printf("avx2 none\n");
    return 0;
  }
  std::printf("avx2 %.1f\n", avx2_gflops(&sink));
  if (__builtin_cpu_supports("avx512f"))
    std::printf("avx512 %.1f\n", avx512_gflops(&sink));
  else
    std::printf("avx512 none\n");
  return sink == 12345.f;  // keeps the chains' results alive
}
