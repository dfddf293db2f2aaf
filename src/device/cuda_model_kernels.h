// The CUDA device's kernel table (cuda_device.cpp): the models' entries on the cuda/ kernels and
// cuBLASLt, for bf16 and fp16. Internal to device/ (included by cuda_device.cpp only).
#pragma once

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "cuda/attention.h"
#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/llama_kernels.h"
#include "device/cuda_kernel_context.h"
#include "device/device.h"
#include "kernels/matmul.h"

namespace zerodp::device::detail {

// The table's plumbing: the context its work is issued with, the 16-bit type, the scratch of a call,
// and the cuBLASLt GEMMs of a dense layer on P operands. Made without a context (the sizing table),
// only the sizing entries may be called: ctx() refuses the others.
template <class P>
class CudaTable {
 protected:
  static constexpr DType kType = std::is_same_v<P, bf16> ? DType::kBF16 : DType::kF16;

  explicit CudaTable(const KernelContext* context) : context_(context) {}

  const KernelContext& ctx() const {
    ZDP_CHECK(context_ != nullptr, "a kernel of the CUDA table for sizing was called: kernels run through a "
                                   "CudaDevice's table");
    return *context_;
  }
  // The entry `name` begins: its GPU current, timed when profiling (Entry).
  Entry enter(const char* name) const { return Entry(ctx(), name); }

  // A kernel's working memory (column-sum partials), in the ledger under act like the CPU's activations'
  // scratch. Freed when the call returns, with the kernel maybe still running: the next user of the
  // block is issued on the same stream, after it (cuda/caching_allocator.h).
  Buffer scratch(size_t bytes) const { return Buffer(bytes, MemCategory::kAct, MemTier::kDevice, *ctx().memory); }

  // db[OC] += the column sums of dout [N,OC] (fp32), over partials in the call's scratch.
  void bias_grad(float* db, const float* dout, int N, int OC) const {
    Buffer partials = scratch(cuda::bias_backward_scratch_floats(N, OC) * sizeof(float));
    cuda::bias_backward(db, dout, N, OC, partials.as<float>(), ctx().stream);
  }

  // operand16 = round(src [N,n]) with rows operand16_row(n) apart (16-byte rows whatever n: an odd
  // vocabulary's LM head); returns that row stride, the GEMMs' leading dimension.
  int round_operand(P* operand16, const float* src, int N, int n) const {
    const int ld = static_cast<int>(operand16_row(static_cast<size_t>(n)));
    cuda::convert_rows(src, n, operand16, kType, ld, N, n, ctx().stream);
    return ld;
  }

  // A dense layer with W stored [C, OC] (kInOut, GPT-2's Conv1D) or [OC, C] (kOutIn, PyTorch's Linear):
  // out[N,OC] = inp[N,C]·W + bias, into P (the bias in the GEMM's epilogue, rounded once with it) or fp32
  // (the bias added after the GEMM: the CPU's addition).
  void dense_forward(void* out, DType out_type, const P* inp, const P* w, const P* b, int N, int C, int OC,
                     kernels::WeightLayout layout) const {
    const bool t = layout == kernels::WeightLayout::kOutIn;
    if (out_type == kType) {
      gemm(false, t, N, OC, C, inp, C, w, t ? C : OC, out, kType, OC, 0.0f,
           b != nullptr ? cuda::GemmEpilogue::kBias : cuda::GemmEpilogue::kNone, b);
      return;
    }
    gemm(false, t, N, OC, C, inp, C, w, t ? C : OC, out, DType::kF32, OC, 0.0f);
    if (b != nullptr) cuda::bias_add_rows(static_cast<float*>(out), b, N, OC, ctx().stream);
  }
  // dout16 = round(dout) (rows operand16_row(OC) apart), dbias += Σ_rows dout (fp32, column partials),
  // then the weight's GEMMs (dense_weight_grads).
  void dense_backward(float* dinp, float* dw, float* db, const float* dout, const P* inp, const P* w, int N, int C,
                      int OC, P* operand16, kernels::WeightLayout layout, kernels::WeightGrad dw_mode) const {
    const int ld = round_operand(operand16, dout, N, OC);
    if (db != nullptr) bias_grad(db, dout, N, OC);
    dense_weight_grads(dinp, dw, operand16, ld, inp, w, N, C, OC, layout, dw_mode);
  }
  // dinp = dout16·Wᵀ in the layer's terms (written; skipped when null) and dW += the weight's gradient,
  // over dout16 = round(dout) already in `dout16` (rows ld apart). dw_mode kWrite zeroes dW first and
  // runs the same GEMM: on a GPU the memset costs next to nothing, and the GEMM (its beta, and so
  // cuBLASLt's choice of algorithm) stays the one the GPU tests have checked.
  void dense_weight_grads(float* dinp, float* dw, const P* dout16, int ld, const P* inp, const P* w, int N, int C,
                          int OC, kernels::WeightLayout layout, kernels::WeightGrad dw_mode) const {
    if (dw_mode == kernels::WeightGrad::kWrite)
      ZDP_CUDA_CHECK(cudaMemsetAsync(dw, 0, static_cast<size_t>(C) * OC * sizeof(float), ctx().stream));
    if (layout == kernels::WeightLayout::kInOut) {  // dW [C,OC] += inpᵀ·dout16
      if (dinp != nullptr) gemm(false, true, N, C, OC, dout16, ld, w, OC, dinp, DType::kF32, C, 0.0f);
      gemm(true, false, C, OC, N, inp, C, dout16, ld, dw, DType::kF32, OC, 1.0f);
    } else {  // dW [OC,C] += dout16ᵀ·inp
      if (dinp != nullptr) gemm(false, false, N, C, OC, dout16, ld, w, C, dinp, DType::kF32, C, 0.0f);
      gemm(true, false, OC, C, N, dout16, ld, inp, C, dw, DType::kF32, C, 1.0f);
    }
  }

  // C[M,N] (c_type) = op(A)·op(B) (+ beta·C), A and B in P, row-major.
  void gemm(bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb, void* C,
            DType c_type, int ldc, float beta, cuda::GemmEpilogue epilogue = cuda::GemmEpilogue::kNone,
            const void* bias = nullptr) const {
    cuda::GemmArgs g = cuda::gemm_args(kType, c_type, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, 1.0f, beta);
    g.epilogue = epilogue;
    g.bias = const_cast<void*>(bias);
    ctx().gemm->gemm(g);
  }

 private:
  const KernelContext* context_;
};

// Packed sequences (several examples a row, positions restarting) are the CPU's alone for now.
inline void require_unpacked(const int32_t* positions) {
  ZDP_REQUIRE(positions == nullptr,
              "packed sequences (--packing): the GPU's kernels have no per-example positions and attention yet; "
              "run on the CPU, or train padded (without --packing)");
}

// The grouped-query shape as the CUDA attention takes it.
inline cuda::AttentionDims attention_dims(const kernels::AttentionShape& s) {
  ZDP_REQUIRE(s.window == 0 || s.window >= s.T,
              "a sliding window of {} keys over sequences of {} tokens: the GPU's attention has no window yet (run "
              "on the CPU, or use sequences of at most {} tokens)",
              s.window, s.T, s.window);
  require_unpacked(s.positions);
  return cuda::AttentionDims{s.B, s.T, s.heads, s.kv_heads, s.head_size};
}

// The models' kernels for 16-bit compute type P on the GPU of `context`, with the CPU's semantics
// (device/device.h, kernels/*.h): the same outputs written or accumulated, GEMMs through cuBLASLt on P
// operands with fp32 accumulation, statistics in fp32, 16-bit values computed in fp32 and rounded once.
// Each entry makes its GPU the thread's current device for the call, so kernels of two devices may be
// called in turn from one thread. Differences of layout, invisible to the models:
//   - the attention (cuda/attention.h, grouped-query heads) saves its row log-sum-exp [B,NH,T] fp32 in
//     `att` (where the CPU keeps the probabilities: attention_saved_bytes says how much), and its
//     backward reads it with the forward's output; nothing T×T is kept and nothing is recomputed;
//   - a dense layer into the fp32 stream adds its bias after the GEMM (cuda/kernels_bias.cu: the CPU's
//     addition), one into P in the GEMM's epilogue (rounded once with it); the fp32 bias gradients are
//     deterministic column sums (LayerNorm's partials) rather than cuBLASLt's epilogue;
//   - the embedding's gradient is summed in row order, bitwise the CPU's; RMSNorm's weight gradient is
//     LayerNorm's deterministic column sum.
// Made without a context (cuda_model_kernels), only the sizing entries may be called.
template <class P>
class CudaKernels final : public ModelKernels<P>, private CudaTable<P> {
  using Base = CudaTable<P>;
  using Base::ctx;
  using Base::kType;
  using Base::scratch;
  using Layout = kernels::WeightLayout;

 public:
  explicit CudaKernels(const KernelContext* context) : Base(context) {}

  void embedding_forward(float* out, const int32_t* inp, const int32_t* pos, const P* wte, const P* wpe, int B, int T,
                         int C) const override {
    require_unpacked(pos);
    const auto on = this->enter(__func__);
    // With learned positions (GPT-2's wpe) the fused encoder; without (RoPE models) the table alone.
    wpe ? cuda::encoder_forward(out, inp, wte, wpe, B, T, C, ctx().stream)
        : cuda::embedding_forward(out, inp, wte, B * T, C, ctx().stream);
  }
  void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, const int32_t* pos, int B,
                          int T, int C) const override {
    require_unpacked(pos);
    const auto on = this->enter(__func__);
    dwpe ? cuda::encoder_backward(dwte, dwpe, dout, inp, B, T, C, ctx().stream)
         : cuda::embedding_backward(dwte, dout, inp, B * T, C, ctx().stream);
  }
  void layernorm_forward(P* out, float* mean, float* rstd, const float* inp, const P* w, const P* b, int N,
                         int C) const override {
    const auto on = this->enter(__func__);
    cuda::layernorm_forward(out, mean, rstd, inp, w, b, N, C, ctx().stream);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const P* w,
                          const float* mean, const float* rstd, int N, int C) const override {
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::layernorm_backward_scratch_floats(N, C) * sizeof(float));
    cuda::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, partials.as<float>(), ctx().stream);
  }
  void rmsnorm_forward(P* out, float* rstd, const float* inp, const P* w, int N, int C, double eps) const override {
    ZDP_CHECK(N > 0 && C > 0 && eps >= 0, "rmsnorm_forward: bad shape N={} C={} or eps {}", N, C, eps);
    const auto on = this->enter(__func__);
    cuda::rmsnorm_forward(out, rstd, inp, w, N, C, static_cast<float>(eps), ctx().stream);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const P* w, const float* rstd,
                        int N, int C) const override {
    ZDP_CHECK(N > 0 && C > 0, "rmsnorm_backward: bad shape N={} C={}", N, C);
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::rmsnorm_backward_scratch_floats(N, C) * sizeof(float));
    cuda::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, partials.as<float>(), ctx().stream);
  }
  void head_rmsnorm_forward(P* x, P* saved, float* rstd, const P* w, int N, int heads, int D, int64_t stride,
                            double eps) const override {
    check_heads(N, heads, D, stride);
    ZDP_CHECK(eps >= 0, "head_rmsnorm_forward: eps {}", eps);
    const auto on = this->enter(__func__);
    cuda::head_rmsnorm_forward(x, saved, rstd, w, N, heads, D, stride, static_cast<float>(eps), ctx().stream);
  }
  void head_rmsnorm_backward(float* dx, float* dw, const P* saved, const float* rstd, const P* w, int N, int heads,
                             int D, int64_t stride) const override {
    check_heads(N, heads, D, stride);
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::head_rmsnorm_backward_scratch_floats(N, heads, D) * sizeof(float));
    cuda::head_rmsnorm_backward(dx, dw, saved, rstd, w, N, heads, D, stride, partials.as<float>(), ctx().stream);
  }
  void linear_forward(P* out, const P* inp, const P* w, const P* b, int N, int C, int OC, Layout layout,
                      float*) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(out, kType, inp, w, b, N, C, OC, layout);
  }
  void linear_forward_acc(float* out, const P* inp, const P* w, const P* b, int N, int C, int OC, Layout layout,
                          float*) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(out, DType::kF32, inp, w, b, N, C, OC, layout);
  }
  void linear_backward(float* dinp, float* dw, float* db, const float* dout, const P* inp, const P* w, int N, int C,
                       int OC, Layout layout, P* operand16, kernels::WeightGrad dw_mode) const override {
    const auto on = this->enter(__func__);
    this->dense_backward(dinp, dw, db, dout, inp, w, N, C, OC, operand16, layout, dw_mode);
  }
  void rope_forward(P* x, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads, int D,
                    int64_t stride) const override {
    check_rope(pos, N, T, heads, D, stride);
    const auto on = this->enter(__func__);
    cuda::rope_forward(x, cos, sin, N, T, heads, D, stride, ctx().stream);
  }
  void rope_backward(float* dx, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads, int D,
                     int64_t stride) const override {
    check_rope(pos, N, T, heads, D, stride);
    const auto on = this->enter(__func__);
    cuda::rope_backward(dx, cos, sin, N, T, heads, D, stride, ctx().stream);
  }
  // Flash attention: `att` keeps L [B,NH,T] fp32; the scratch is the backward's D [B,NH,T].
  size_t attention_scratch_bytes(const kernels::AttentionShape& shape) const override {
    return flash_attention_sizes().attention_scratch_bytes(shape);
  }
  size_t attention_saved_bytes(const kernels::AttentionShape& shape) const override {
    return flash_attention_sizes().attention_saved_bytes(shape);
  }
  void attention_forward(P* out, P* att, const P* qkv, void*, const kernels::AttentionShape& shape) const override {
    const auto on = this->enter(__func__);
    cuda::attention_forward(kType, out, reinterpret_cast<float*>(att), qkv, attention_dims(shape), ctx().stream);
  }
  void attention_backward(float* dqkv, void* scratch, const float* dout, P* operand16, const P* qkv, const P* out,
                          const P* att, const kernels::AttentionShape& shape) const override {
    const auto on = this->enter(__func__);
    const cuda::AttentionDims dims = attention_dims(shape);
    cuda::check_attention_shape("cuda attention_backward", kType, dims);  // before dout is rounded
    const size_t n = static_cast<size_t>(dims.B) * dims.T * dims.heads * dims.head_size;
    cuda::convert(dout, DType::kF32, operand16, kType, n, ctx().stream);
    cuda::attention_backward(kType, dqkv, scratch, operand16, out, reinterpret_cast<const float*>(att), qkv, dims,
                             ctx().stream);
  }
  void gelu_forward(P* out, const P* inp, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::gelu_forward(out, inp, n, ctx().stream);
  }
  void gelu_backward(float* dinp, const P* inp, const float* dout, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::gelu_backward(dinp, inp, dout, n, ctx().stream);
  }
  // dpre16 = round(gelu'(pre)·dgelu) into operand16 with the bias gradient of the unrounded values, then
  // the linear layer's GEMMs on it (dpre is not written: the 16-bit path leaves it alone, as the CPU's).
  void gelu_linear_backward(float* dinp, float* dw, float* db, float*, const float* dgelu, const P* pre, const P* inp,
                            const P* w, int N, int C, int OC, Layout layout, P* operand16,
                            kernels::WeightGrad dw_mode) const override {
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::gelu_bias_backward_scratch_floats(N, OC) * sizeof(float));
    cuda::gelu_bias_backward(operand16, db, pre, dgelu, N, OC, partials.as<float>(), ctx().stream);
    this->dense_weight_grads(dinp, dw, operand16, OC, inp, w, N, C, OC, layout, dw_mode);
  }
  void swiglu_forward(P* out, const P* inp, int N, int I) const override {
    const auto on = this->enter(__func__);
    cuda::swiglu_forward(out, inp, N, I, ctx().stream);
  }
  void swiglu_backward(float* dinp, const float* dout, const P* inp, int N, int I) const override {
    const auto on = this->enter(__func__);
    cuda::swiglu_backward(dinp, dout, inp, N, I, ctx().stream);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::residual_forward(out, a, b, n, ctx().stream);
  }
  // Fused (KernelContext::fused_classifier): the logits stay, with each row's max and 1/Σ, and the
  // backward rounds dlogits straight into operand16 (cuda::crossentropy_backward_rounded). Unfused: the
  // CPU's way, the probabilities and then their gradient in place of the logits, rounded after.
  void classifier_loss_forward(float* losses, float* logits, float* row_stats, const int32_t* targets, int N,
                               int V) const override {
    const auto on = this->enter(__func__);
    const bool fused = ctx().fused_classifier;
    cuda::softmax_crossentropy_forward(losses, fused ? nullptr : logits, logits, targets, N, V, ctx().stream,
                                       fused ? row_stats : nullptr);
  }
  void classifier_loss_backward(float* dinp, float* dw, float* logits, const float* row_stats, const int32_t* targets,
                                float dloss, const P* inp, const P* w, int N, int C, int V, Layout layout, P* operand16,
                                kernels::WeightGrad dw_mode) const override {
    const auto on = this->enter(__func__);
    if (!ctx().fused_classifier) {
      cuda::softmax_crossentropy_backward(logits, logits, targets, dloss, N, V, ctx().stream);
      this->dense_backward(dinp, dw, nullptr, logits, inp, w, N, C, V, operand16, layout, dw_mode);
      return;
    }
    const int ld = static_cast<int>(operand16_row(static_cast<size_t>(V)));
    cuda::crossentropy_backward_rounded(operand16, ld, logits, row_stats, targets, dloss, N, V, ctx().stream);
    this->dense_weight_grads(dinp, dw, operand16, ld, inp, w, N, C, V, layout, dw_mode);
  }

 private:
  // kernels/rmsnorm.cpp's check of a head norm's shape: the GPU cannot refuse one once launched.
  static void check_heads(int N, int heads, int D, int64_t stride) {
    ZDP_CHECK(N > 0 && heads > 0 && D > 0 && stride >= int64_t{heads} * D,
              "head_rmsnorm: bad shape N={} heads={} D={} stride={}", N, heads, D, stride);
  }
  // kernels/rope.cpp's check: the GPU cannot refuse a shape once launched.
  static void check_rope(const int32_t* pos, int N, int T, int heads, int D, int64_t stride) {
    require_unpacked(pos);
    ZDP_CHECK(N > 0 && T > 0 && heads > 0 && D > 0 && D % 2 == 0 && stride >= int64_t{heads} * D,
              "rope: bad shape N={} T={} heads={} D={} stride={}", N, T, heads, D, stride);
  }
};

}  // namespace zerodp::device::detail

#endif  // ZERODP_WITH_CUDA
