// Micro-benchmarks of the CPU kernels, forward + backward, at GPT-2 small sizes (C = 768, NH = 12,
// T = 256, V = 50257), in float. The matmul-like ops report GFLOP/s (multiply-add = 2 flops),
// the elementwise and row-wise ones bytes/s; wall-clock time (the kernels are multi-threaded). Attention counts the causal flops only (half the dense
// T×T products) and is compared with a naive loop implementation of the same math.
//   ./micro_kernels --benchmark_filter=Attention   (OMP_NUM_THREADS sets the threads)
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace {

using namespace zerodp::kernels;

constexpr int kT = 256, kC = 768, kNH = 12, kV = 50257;

std::vector<float> random_vector(size_t n, float stddev = 1.0f, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// A linear layer inp [N,C] -> [N,OC], forward and backward.
void BM_Linear(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0)) * kT, C = static_cast<int>(state.range(1)),
            OC = static_cast<int>(state.range(2));
  const auto inp = random_vector(size_t(N) * C), w = random_vector(size_t(C) * OC, 0.02f),
             bias = random_vector(OC), dout = random_vector(size_t(N) * OC);
  std::vector<float> out(size_t(N) * OC), dinp(size_t(N) * C), dw(size_t(C) * OC), db(OC);
  for (auto _ : state) {
    matmul_forward(out.data(), inp.data(), w.data(), bias.data(), N, C, OC);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(state, 6.0 * N * C * OC);
}
BENCHMARK(BM_Linear)
    ->ArgNames({"B", "C", "OC"})
    ->Args({1, kC, 3 * kC})
    ->Args({8, kC, 3 * kC})
    ->Args({8, kC, 4 * kC})
    ->Args({8, 4 * kC, kC})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// The tied LM head, forward and backward.
void BM_LmHead(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0)) * kT;
  const auto inp = random_vector(size_t(N) * kC), wte = random_vector(size_t(kV) * kC, 0.02f),
             dout = random_vector(size_t(N) * kV, 1e-3f);
  std::vector<float> out(size_t(N) * kV), dinp(size_t(N) * kC), dwte(size_t(kV) * kC);
  for (auto _ : state) {
    matmul_nt_forward(out.data(), inp.data(), wte.data(), N, kC, kV);
    matmul_nt_backward(dinp.data(), dwte.data(), dout.data(), inp.data(), wte.data(), N, kC, kV);
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(state, 6.0 * N * kC * kV);
}
BENCHMARK(BM_LmHead)->ArgNames({"B"})->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

double attention_causal_flops(int B) {
  const double hs = kC / kNH;
  // forward Q·Kᵀ and P·V, backward four products of the same size; half of each is causal.
  return 0.5 * (4.0 + 8.0) * B * kNH * double(kT) * kT * hs;
}

void BM_Attention(benchmark::State& state) {
  const int B = static_cast<int>(state.range(0));
  const auto qkv = random_vector(size_t(B) * kT * 3 * kC), dout = random_vector(size_t(B) * kT * kC);
  std::vector<float> out(size_t(B) * kT * kC), att(size_t(B) * kNH * kT * kT),
      dqkv(size_t(B) * kT * 3 * kC), scratch(attention_scratch_elems(B, kT, kNH));
  for (auto _ : state) {
    attention_forward(out.data(), att.data(), qkv.data(), B, kT, kC, kNH);
    attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, kT, kC, kNH);
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_flops(state, attention_causal_flops(B));
}
BENCHMARK(BM_Attention)->ArgNames({"B"})->Arg(1)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();

// Attention at the W = 2 benchmark's model (L4 C256 H4, T = 128, B = 8 a rank), fp32 against 16-bit
// compute (range(0) = 0: fp32, 1: bf16 through the chosen gemm16): many small per-head products, where
// a GEMM library's fixed cost per call shows.
void BM_AttentionL4(benchmark::State& state) {
  constexpr int B = 8, T = 128, C = 256, NH = 4;
  const auto qkv = random_vector(size_t(B) * T * 3 * C), dout = random_vector(size_t(B) * T * C);
  std::vector<float> dqkv(size_t(B) * T * 3 * C);
  if (state.range(0) == 0) {
    std::vector<float> out(size_t(B) * T * C), att(size_t(B) * NH * T * T), scratch(attention_scratch_elems(B, T, NH));
    for (auto _ : state) {
      attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
      attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
      benchmark::DoNotOptimize(dqkv.data());
    }
  } else {
    using zerodp::bf16;
    std::vector<bf16> qkv16(qkv.size()), dout16(dout.size()), out(size_t(B) * T * C), att(size_t(B) * NH * T * T);
    round_to(qkv16.data(), qkv.data(), qkv.size());
    round_to(dout16.data(), dout.data(), dout.size());
    std::vector<char> scratch(attention16_scratch_bytes(B, T, C, NH));
    for (auto _ : state) {
      attention16_forward(out.data(), att.data(), qkv16.data(), scratch.data(), B, T, C, NH);
      attention16_backward(dqkv.data(), scratch.data(), dout16.data(), qkv16.data(), att.data(), B, T, C, NH);
      benchmark::DoNotOptimize(dqkv.data());
    }
  }
  const double hs = C / NH;
  set_flops(state, 0.5 * 12.0 * B * NH * double(T) * T * hs);
}
BENCHMARK(BM_AttentionL4)->ArgNames({"bf16"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same attention written as plain loops over (b, t, h) and the keys t2 ≤ t, parallel over
// (b, t, h), the way a first CPU implementation does it: the baseline the BLAS version is measured
// against.
void naive_attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < NH; ++h) {
        const float* q = qkv + (size_t(b) * T + t) * 3 * C + h * hs;
        float* p = att + ((size_t(b) * NH + h) * T + t) * T;
        float m = -1e30f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (size_t(b) * T + t2) * 3 * C + C + h * hs;
          float s = 0;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          p[t2] = s * scale;
          m = std::max(m, p[t2]);
        }
        float sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) sum += (p[t2] = std::exp(p[t2] - m));
        for (int t2 = 0; t2 < T; ++t2) p[t2] = t2 <= t ? p[t2] / sum : 0.0f;
        float* o = out + (size_t(b) * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (size_t(b) * T + t2) * 3 * C + 2 * C + h * hs;
          for (int i = 0; i < hs; ++i) o[i] += p[t2] * v[i];
        }
      }
}

// Parallel over (b, h) only: the key rows dk, dv of a head receive contributions from every query
// row, so the query rows of one head cannot be split without atomics.
void naive_attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                              const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      float* dp = datt + (size_t(b) * NH + h) * T;  // one row of dP per (b, h)
      for (int t = 0; t < T; ++t) {
        const float* p = att + ((size_t(b) * NH + h) * T + t) * T;
        const float* d = dout + (size_t(b) * T + t) * C + h * hs;
        const float* q = qkv + (size_t(b) * T + t) * 3 * C + h * hs;
        float* dq = dqkv + (size_t(b) * T + t) * 3 * C + h * hs;
        float dot = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (size_t(b) * T + t2) * 3 * C + 2 * C + h * hs;
          float* dv = dqkv + (size_t(b) * T + t2) * 3 * C + 2 * C + h * hs;
          float s = 0;
          for (int i = 0; i < hs; ++i) {
            s += d[i] * v[i];
            dv[i] += p[t2] * d[i];
          }
          dp[t2] = s;
          dot += s * p[t2];
        }
        for (int t2 = 0; t2 <= t; ++t2) {
          const float ds = p[t2] * (dp[t2] - dot) * scale;
          const float* k = qkv + (size_t(b) * T + t2) * 3 * C + C + h * hs;
          float* dk = dqkv + (size_t(b) * T + t2) * 3 * C + C + h * hs;
          for (int i = 0; i < hs; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
}

void BM_AttentionNaive(benchmark::State& state) {
  const int B = static_cast<int>(state.range(0));
  const auto qkv = random_vector(size_t(B) * kT * 3 * kC), dout = random_vector(size_t(B) * kT * kC);
  std::vector<float> out(size_t(B) * kT * kC), att(size_t(B) * kNH * kT * kT),
      dqkv(size_t(B) * kT * 3 * kC), datt(size_t(B) * kNH * kT);
  for (auto _ : state) {
    naive_attention_forward(out.data(), att.data(), qkv.data(), B, kT, kC, kNH);
    naive_attention_backward(dqkv.data(), datt.data(), dout.data(), qkv.data(), att.data(), B, kT, kC,
                             kNH);
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_flops(state, attention_causal_flops(B));
}
BENCHMARK(BM_AttentionNaive)->ArgNames({"B"})->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNorm(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0)) * kT;
  const auto inp = random_vector(size_t(N) * kC), w = random_vector(kC), b = random_vector(kC),
             dout = random_vector(size_t(N) * kC);
  std::vector<float> out(size_t(N) * kC), mean(N), rstd(N), dinp(size_t(N) * kC), dw(kC), db(kC);
  for (auto _ : state) {
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, kC);
    layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                       rstd.data(), N, kC);
    benchmark::DoNotOptimize(dinp.data());
  }
  // forward reads inp, writes out; backward reads dout and inp (twice) and updates dinp
  state.SetBytesProcessed(int64_t(state.iterations()) * N * kC * sizeof(float) * 7);
}
BENCHMARK(BM_LayerNorm)->ArgNames({"B"})->Arg(1)->Arg(8)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Gelu(benchmark::State& state) {
  const size_t n = size_t(state.range(0)) * kT * 4 * kC;
  const auto inp = random_vector(n), dout = random_vector(n);
  std::vector<float> out(n), dinp(n);
  for (auto _ : state) {
    gelu_forward(out.data(), inp.data(), n);
    gelu_backward(dinp.data(), inp.data(), dout.data(), n);
    benchmark::DoNotOptimize(dinp.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * sizeof(float) * 6);
}
BENCHMARK(BM_Gelu)->ArgNames({"B"})->Arg(1)->Arg(8)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Residual(benchmark::State& state) {
  const size_t n = size_t(state.range(0)) * kT * kC;
  const auto a = random_vector(n), b = random_vector(n), dout = random_vector(n);
  std::vector<float> out(n), da(n), db(n);
  for (auto _ : state) {
    residual_forward(out.data(), a.data(), b.data(), n);
    residual_backward(da.data(), db.data(), dout.data(), n);
    benchmark::DoNotOptimize(da.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * sizeof(float) * 8);
}
BENCHMARK(BM_Residual)->ArgNames({"B"})->Arg(1)->Arg(8)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Encoder(benchmark::State& state) {
  const int B = static_cast<int>(state.range(0));
  std::vector<int32_t> tok(size_t(B) * kT);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = int32_t((i * 7919) % kV);
  const auto wte = random_vector(size_t(kV) * kC, 0.02f), wpe = random_vector(size_t(1024) * kC, 0.02f),
             dout = random_vector(size_t(B) * kT * kC);
  std::vector<float> out(size_t(B) * kT * kC), dwte(size_t(kV) * kC), dwpe(size_t(1024) * kC);
  for (auto _ : state) {
    encoder_forward(out.data(), tok.data(), nullptr, wte.data(), wpe.data(), B, kT, kC);
    encoder_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), nullptr, B, kT, kC);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Encoder)->ArgNames({"B"})->Arg(1)->Arg(8)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_SoftmaxCrossEntropy(benchmark::State& state) {
  const int N = static_cast<int>(state.range(0)) * kT;
  const auto logits = random_vector(size_t(N) * kV, 3.0f);
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = (i * 7919) % kV;
  std::vector<float> probs(size_t(N) * kV), losses(N);
  for (auto _ : state) {
    softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N, kV);
    softmax_crossentropy_backward(probs.data(), probs.data(), targets.data(), 1.0f / N, N, kV);
    benchmark::DoNotOptimize(probs.data());
  }
  // forward: read logits (max), read logits + write probs (exp), read + write probs (scale);
  // backward: read + write in place.
  state.SetBytesProcessed(int64_t(state.iterations()) * N * int64_t(kV) * sizeof(float) * 7);
}
BENCHMARK(BM_SoftmaxCrossEntropy)->ArgNames({"B"})->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
