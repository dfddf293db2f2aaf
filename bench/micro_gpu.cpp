// The GPU backend's pieces at GPT-2 124M's shapes (B·T = 8 × 1024 tokens, C 768, 12 heads, vocabulary
// 50304), timed with CUDA events on one stream (Google Benchmark's manual time):
//   - bf16 GEMMs through cuBLASLt (cuda/gemm.h), forward and both backward layouts, and 8192³;
//   - the flash attention forward and backward (cuda/attention.h), causal flops counted;
//   - LayerNorm forward and backward, the multi-tensor AdamW over 124M parameters (GB/s moved);
//   - the classifier's loss, fused and unfused (the GEMMs left out);
//   - the gradient norm's sum of squares (per unit and over the whole model), beside the kernels it
//     replaced (bench/gpu_baselines.cu), and the FMA attention's dK/dV in one pass and in two at head
//     size 128, and the LM head's backward GEMMs at an odd vocabulary with rows packed and padded: each
//     change measured against what it changed in the same run.
// TFLOP/s = flops / time; "of peak" against the dense bf16 peak of the GPU when it is an H100 or H200
// (989.4 TFLOP/s, SXM). Without a GPU it says so and exits 77.
//   ./micro_gpu [--benchmark_filter=Gemm]
#include <benchmark/benchmark.h>

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/gpu_baselines.h"
#include "cuda/attention.h"
#include "cuda/attention_impl.h"
#include "cuda/check.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/runtime.h"
#include "device/cuda_device.h"

namespace {

using zerodp::DType;
namespace cuda = zerodp::cuda;

constexpr int kTokens = 8 * 1024, kC = 768, kNH = 12, kV = 50304;
double g_peak_tflops = 0;  // 0: unknown GPU

// A device allocation filled with small values (zeros are too easy on some units), freed at scope end.
class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes) : bytes_(bytes) {
    ZDP_CUDA_CHECK(cudaMalloc(&p_, bytes));
    ZDP_CUDA_CHECK(cudaMemset(p_, 0x3c, bytes));  // 0x3c3c: 0.0115 in bf16, 1.06 in fp16
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

// Runs `body` once per iteration between two events on `stream`; the iteration's time is the GPU's.
template <class F>
void time_on_gpu(benchmark::State& state, cudaStream_t stream, F&& body) {
  cudaEvent_t start, stop;
  ZDP_CUDA_CHECK(cudaEventCreate(&start));
  ZDP_CUDA_CHECK(cudaEventCreate(&stop));
  body();  // warm-up: plans, first-touch
  ZDP_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (auto _ : state) {
    ZDP_CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    ZDP_CUDA_CHECK(cudaEventRecord(stop, stream));
    ZDP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ZDP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

void report_flops(benchmark::State& state, double flops) {
  state.counters["TFLOP/s"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  if (g_peak_tflops > 0)
    state.counters["of_peak"] =
        benchmark::Counter(flops * 1e-12 / g_peak_tflops, benchmark::Counter::kIsIterationInvariantRate);
}

// range: M, N, K, layout (0: NN forward, 1: NT dinp = dout·Wᵀ, 2: TN dW = inpᵀ·dout).
void BM_GemmBf16(benchmark::State& state) {
  const int M = static_cast<int>(state.range(0)), N = static_cast<int>(state.range(1)),
            K = static_cast<int>(state.range(2)), layout = static_cast<int>(state.range(3));
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    cuda::GemmContext ctx(stream);
    DeviceArray a(size_t(M) * K * 2), b(size_t(K) * N * 2), c(size_t(M) * N * 2);
    const bool ta = layout == 2, tb = layout == 1;
    const cuda::GemmArgs g = cuda::gemm_args(DType::kBF16, DType::kBF16, ta, tb, M, N, K, a.get(), ta ? M : K, b.get(),
                                             tb ? K : N, c.get(), N);
    time_on_gpu(state, stream, [&] { ctx.gemm(g); });
    report_flops(state, 2.0 * M * N * K);
    static const char* names[] = {"NN", "NT", "TN"};
    state.SetLabel(names[layout]);
  }
  cudaStreamDestroy(stream);
}

// The block's and the head's GEMMs at 8192 tokens, in the three layouts a step runs, and a large square.
void gemm_args(benchmark::internal::Benchmark* b) {
  const int shapes[][3] = {{kTokens, 3 * kC, kC}, {kTokens, kC, kC}, {kTokens, 4 * kC, kC},
                           {kTokens, kC, 4 * kC}, {kTokens, kV, kC}};
  for (const auto& s : shapes)
    for (int layout = 0; layout < 3; ++layout) b->Args({s[0], s[1], s[2], layout});
  b->Args({8192, 8192, 8192, 0});
}
BENCHMARK(BM_GemmBf16)->Apply(gemm_args)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The LM head's backward GEMMs at GPT-2's own odd vocabulary (50 257) on the rounded dlogits [8192, V]
// stored with rows V apart (before) or operand16_row(V) = 50 264 apart (16-byte rows, in use).
// Args: row stride, GEMM (0: dinp[N,C] = dl·wte, 1: dwte[V,C] = dlᵀ·inp).
void BM_HeadBackwardOddVocabulary(benchmark::State& state) {
  constexpr int kVodd = 50257;
  const int ld = static_cast<int>(state.range(0)), which = static_cast<int>(state.range(1));
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    cuda::GemmContext ctx(stream);
    DeviceArray dl(size_t(kTokens) * ld * 2), wte(size_t(kVodd) * kC * 2), inp(size_t(kTokens) * kC * 2),
        out(size_t(kVodd) * kC * 4);
    const cuda::GemmArgs g =
        which == 0 ? cuda::gemm_args(DType::kBF16, DType::kF32, false, false, kTokens, kC, kVodd, dl.get(), ld,
                                     wte.get(), kC, out.get(), kC)
                   : cuda::gemm_args(DType::kBF16, DType::kF32, true, false, kVodd, kC, kTokens, dl.get(), ld,
                                     inp.get(), kC, out.get(), kC);
    time_on_gpu(state, stream, [&] { ctx.gemm(g); });
    report_flops(state, 2.0 * kTokens * kVodd * kC);
    state.SetLabel(std::string(which == 0 ? "dinp" : "dwte") + (ld % 8 == 0 ? ", rows padded" : ", rows of V"));
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_HeadBackwardOddVocabulary)
    ->Args({50257, 0})->Args({50264, 0})->Args({50257, 1})->Args({50264, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// range: T (B = 8192 / T sequences), direction (0 forward, 1 backward). Causal flops: QKᵀ and PV over
// the lower triangle, 2·2·B·NH·(T²/2)·hs forward; the backward recomputes P and does four products.
// Args: T, direction (0 forward, 1 backward), kernel (0 tensor cores, 1 FMA). The flops are the
// model's (forward 4·causal; backward 10·causal: QKᵀ, dO·Vᵀ, PᵀdO, dSᵀQ, dS·K), whatever a kernel
// recomputes; the tensor-core backward executes 14·causal (dQ's pass recomputes S and dP).
void BM_AttentionBf16(benchmark::State& state) {
  const int T = static_cast<int>(state.range(0)), B = std::max(1, kTokens / T), backward = static_cast<int>(state.range(1));
  const cuda::AttentionKernel kernel =
      state.range(2) == 0 ? cuda::AttentionKernel::kTensorCore : cuda::AttentionKernel::kFma;
  const int hs = kC / kNH;
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    DeviceArray qkv(size_t(B) * T * 3 * kC * 2), out(size_t(B) * T * kC * 2), lse(size_t(B) * kNH * T * 4),
        dout(size_t(B) * T * kC * 2), dqkv(size_t(B) * T * 3 * kC * 4),
        scratch(cuda::attention_backward_scratch_bytes(B, T, kNH));
    cuda::attention_forward_with(kernel, DType::kBF16, out.get(), lse.get<float>(), qkv.get(), B, T, kC, kNH, stream);
    const double causal = double(B) * kNH * (double(T) * (T + 1) / 2) * hs;
    if (backward == 0) {
      time_on_gpu(state, stream, [&] {
        cuda::attention_forward_with(kernel, DType::kBF16, out.get(), lse.get<float>(), qkv.get(), B, T, kC, kNH,
                                     stream);
      });
      report_flops(state, 4.0 * causal);
    } else {
      time_on_gpu(state, stream, [&] {
        cuda::attention_backward_with(kernel, DType::kBF16, dqkv.get<float>(), scratch.get(), dout.get(), out.get(),
                                      lse.get<float>(), qkv.get(), B, T, kC, kNH, stream);
      });
      report_flops(state, 10.0 * causal);
    }
    state.SetLabel(std::string(cuda::attention_kernel_name(kernel)) + (backward ? " backward" : " forward"));
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_AttentionBf16)
    ->Args({1024, 0, 0})->Args({1024, 1, 0})->Args({1024, 0, 1})->Args({1024, 1, 1})
    ->Args({256, 0, 0})->Args({256, 1, 0})->Args({1000, 0, 0})->Args({1000, 1, 0})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// The FMA attention's backward at head size 128 (6 heads of 128 = GPT-2 124M's width), dK and dV in
// one pass or in two (attention_tiling.h's kv_parts_apart: two is the default at 128). Args: T, passes
// (1 together, 2 apart).
void BM_AttentionFmaHead128(benchmark::State& state) {
  const int T = static_cast<int>(state.range(0)), B = std::max(1, kTokens / T), NH = kC / 128;
  const auto passes = state.range(1) == 1 ? cuda::detail::FmaKvPasses::kTogether : cuda::detail::FmaKvPasses::kApart;
  const cuda::AttentionDims dims{B, T, NH, NH, 128};
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    DeviceArray qkv(size_t(B) * T * 3 * kC * 2), out(size_t(B) * T * kC * 2), lse(size_t(B) * NH * T * 4),
        dout(size_t(B) * T * kC * 2), dqkv(size_t(B) * T * 3 * kC * 4),
        scratch(cuda::attention_backward_scratch_bytes(dims));
    cuda::detail::fma_attention_forward(DType::kBF16, out.get(), lse.get<float>(), qkv.get(), dims, stream);
    time_on_gpu(state, stream, [&] {
      cuda::detail::fma_attention_backward(DType::kBF16, dqkv.get<float>(), scratch.get(), dout.get(), out.get(),
                                           lse.get<float>(), qkv.get(), dims, stream, passes);
    });
    report_flops(state, 10.0 * double(B) * NH * (double(T) * (T + 1) / 2) * 128);
    state.SetLabel(state.range(1) == 1 ? "fma backward, dK dV together" : "fma backward, dV then dK");
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_AttentionFmaHead128)->Args({1024, 1})->Args({1024, 2})->UseManualTime()->Unit(benchmark::kMicrosecond);

void report_bytes(benchmark::State& state, double bytes) {
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LayerNormBf16(benchmark::State& state) {
  const int N = kTokens, C = kC, backward = static_cast<int>(state.range(0));
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    DeviceArray inp(size_t(N) * C * 4), out(size_t(N) * C * 2), w(C * 2), b(C * 2), mean(N * 4), rstd(N * 4),
        dinp(size_t(N) * C * 4), dw(C * 4), db(C * 4), dout(size_t(N) * C * 4),
        scratch(cuda::layernorm_backward_scratch_floats(N, C) * 4);
    using zerodp::bf16;
    cuda::layernorm_forward(out.get<bf16>(), mean.get<float>(), rstd.get<float>(), inp.get<float>(), w.get<bf16>(),
                            b.get<bf16>(), N, C, stream);
    if (backward == 0) {
      time_on_gpu(state, stream, [&] {
        cuda::layernorm_forward(out.get<bf16>(), mean.get<float>(), rstd.get<float>(), inp.get<float>(),
                                w.get<bf16>(), b.get<bf16>(), N, C, stream);
      });
      report_bytes(state, double(N) * C * (4 + 2));  // fp32 in, bf16 out
    } else {
      time_on_gpu(state, stream, [&] {
        cuda::layernorm_backward(dinp.get<float>(), dw.get<float>(), db.get<float>(), dout.get<float>(),
                                 inp.get<float>(), w.get<bf16>(), mean.get<float>(), rstd.get<float>(), N, C,
                                 scratch.get<float>(), stream);
      });
      report_bytes(state, double(N) * C * (4 + 4 + 4 + 4));  // dout, inp in; dinp read and written
    }
    state.SetLabel(backward ? "backward" : "forward");
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_LayerNormBf16)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

// AdamW over GPT-2 124M's parameters (124,475,904), the bf16 compute copy written in the same pass:
// p, g, m, v read, p, m, v written, p16 written: 30 bytes a parameter.
void BM_AdamW124M(benchmark::State& state) {
  const size_t n = 124475904;
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    DeviceArray p(n * 4), g(n * 4), m(n * 4), v(n * 4), p16(n * 2);
    ZDP_CUDA_CHECK(cudaMemset(m.get(), 0, n * 4));
    ZDP_CUDA_CHECK(cudaMemset(v.get(), 0, n * 4));
    const zerodp::optim::ParamSegment seg{0, n, true};
    zerodp::optim::AdamWParams hp;
    int64_t t = 1;
    time_on_gpu(state, stream, [&] {
      cuda::adamw_update_segments(p.get<float>(), g.get<float>(), m.get<float>(), v.get<float>(), &seg, 1, hp, t++,
                                  1.0f, p16.get(), DType::kBF16, stream);
    });
    report_bytes(state, 30.0 * n);
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_AdamW124M)->UseManualTime()->Unit(benchmark::kMillisecond);

// The classifier's loss at GPT-2 124M's B = 8 step (8192 rows of 50 304 fp32 logits), forward and
// backward up to the 16-bit GEMM operand, without the GEMMs: range(0) = 0 the unfused path (the
// probabilities written over the logits, then their gradient, then rounded: three fp32 reads and one
// write more a logit), 1 the fused one (device/cuda_model_kernels.h's classifier_loss_*).
void BM_ClassifierLoss(benchmark::State& state) {
  const int N = kTokens, V = kV;
  const bool fused = state.range(0) == 1;
  const int64_t ld = static_cast<int64_t>(zerodp::device::operand16_row(V));
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    DeviceArray logits(size_t(N) * V * 4), op16(size_t(N) * ld * 2), losses(N * 4), stats(2 * N * 4), targets(N * 4);
    ZDP_CUDA_CHECK(cudaMemset(targets.get(), 0, N * 4));  // token 0 everywhere: every row's target valid
    const auto* t = targets.get<int32_t>();
    using zerodp::bf16;
    time_on_gpu(state, stream, [&] {
      float* x = logits.get<float>();
      if (fused) {
        cuda::softmax_crossentropy_forward(losses.get<float>(), nullptr, x, t, N, V, stream, stats.get<float>());
        cuda::crossentropy_backward_rounded(op16.get<bf16>(), ld, x, stats.get<float>(), t, 1.0f / N, N, V, stream);
      } else {
        cuda::softmax_crossentropy_forward(losses.get<float>(), x, x, t, N, V, stream);
        cuda::softmax_crossentropy_backward(x, x, t, 1.0f / N, N, V, stream);
        cuda::convert_rows(x, V, op16.get(), DType::kBF16, ld, N, V, stream);
      }
    });
    state.SetLabel(fused ? "fused (in use)" : "unfused (before)");
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_ClassifierLoss)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The gradient norm's Σ x² over n fp32 values, as the engine calls it once per unit (GPT-2 124M's
// block: 7 087 872 parameters; its embeddings: 39 383 808) and over the whole model (124 475 904).
// Args: n, kernel (0 in use, 1 the one-thread-a-block kernels it replaced).
void BM_SumSquaresF32(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const bool before = state.range(1) == 1;
  cudaStream_t stream;
  ZDP_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    DeviceArray x(n * 4), out(8), partials(cuda::sum_squares_scratch_doubles(n) * 8);
    time_on_gpu(state, stream, [&] {
      if (before)
        zerodp::bench::sum_squares_one_thread_a_block(out.get<double>(), x.get<float>(), n, partials.get<double>(),
                                                      stream);
      else
        cuda::sum_squares(out.get<double>(), x.get(), DType::kF32, n, partials.get<double>(), stream);
    });
    report_bytes(state, 4.0 * double(n));
    state.SetLabel(before ? "one thread a block (before)" : "staged (in use)");
  }
  cudaStreamDestroy(stream);
}
BENCHMARK(BM_SumSquaresF32)
    ->Args({7087872, 0})->Args({7087872, 1})->Args({39383808, 0})->Args({39383808, 1})
    ->Args({124475904, 0})->Args({124475904, 1})
    ->UseManualTime()->Unit(benchmark::kMicrosecond);

// The gradient norm's per-unit sums of a GPT-2 124M step (the embeddings, 12 blocks, the final
// LayerNorm) through the CUDA device: one host wait a unit, as before, against sum_squares_each's one
// wait for all (range(0) = 1: one a unit). Wall time: the waits are the host's.
void BM_GradNormWaits(benchmark::State& state) {
  const bool one_a_unit = state.range(0) == 1;
  zerodp::device::CudaDevice dev(0);
  std::vector<size_t> sizes = {50304 * 768 + 1024 * 768};
  for (int l = 0; l < 12; ++l) sizes.push_back(7087872);
  sizes.push_back(2 * 768);
  size_t total = 0;
  for (size_t n : sizes) total += n;
  DeviceArray x(total * 4);
  ZDP_CUDA_CHECK(cudaMemset(x.get(), 0, total * 4));
  std::vector<zerodp::device::Device::SquaresSpan> spans;
  size_t at = 0;
  for (size_t n : sizes) {
    spans.push_back({x.get<float>() + at, DType::kF32, n});
    at += n;
  }
  std::vector<double> out(spans.size());
  for (auto _ : state) {
    if (one_a_unit)
      for (size_t i = 0; i < spans.size(); ++i) out[i] = dev.sum_squares(spans[i].x, DType::kF32, spans[i].n);
    else
      dev.sum_squares_each(spans, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  report_bytes(state, 4.0 * double(total));
  state.SetLabel(one_a_unit ? "a wait a unit (before)" : "one wait (in use)");
}
BENCHMARK(BM_GradNormWaits)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  const cuda::RuntimeInfo info = cuda::query_runtime();
  if (info.gpus.empty()) {
    std::printf("SKIPPED: no GPU visible (%s)\n", info.why_none.c_str());
    return 77;
  }
  const std::string& name = info.gpus[0].name;
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) g_peak_tflops = 989.4;
  std::printf("GPU 0: %s; bf16 dense peak %s\n", name.c_str(),
              g_peak_tflops > 0 ? "989.4 TFLOP/s (H100/H200 SXM)" : "unknown (no of_peak column)");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#else  // no CUDA in this build

#include <algorithm>
#include <cstdio>
int main() {
  std::printf("SKIPPED: this build has no CUDA backend (ZERODP_CUDA=OFF or no nvcc)\n");
  return 77;
}

#endif
