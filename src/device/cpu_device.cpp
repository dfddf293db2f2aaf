#include "device/cpu_device.h"

#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/quantize.h"
#include "kernels/attention.h"
#include "kernels/blas_info.h"
#include "kernels/cross_entropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/gemm16.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/precision.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace zerodp::device {

namespace {

class CompleteEvent final : public Event {
 public:
  bool done() const override { return true; }
  void wait() override {}
};

// A dense layer in compute type P, its weight stored as `layout` says: the fp32/double GEMMs, or the
// 16-bit ones with fp32 results (kernels/matmul.h). Both architectures' tables call it.
template <class P, kernels::WeightLayout layout>
struct CpuDense {
  using Acc = typename Gpt2Kernels<P>::Acc;
  static constexpr bool k16 = std::is_same_v<P, bf16> || std::is_same_v<P, fp16>;
  template <class O>
  static void forward(O* out, const P* inp, const P* w, const P* b, int N, int C, int OC, float* scratch) {
    if constexpr (k16) {
      kernels::matmul16_forward(out, inp, w, b, N, C, OC, scratch, layout);
    } else {
      kernels::matmul_forward(out, inp, w, b, N, C, OC, layout);
    }
  }
  static void backward(Acc* dinp, Acc* dw, Acc* db, const Acc* dout, const P* inp, const P* w, int N, int C, int OC,
                       P* operand16) {
    if constexpr (k16) {
      kernels::matmul16_backward(dinp, dw, db, dout, operand16, inp, w, N, C, OC, layout);
    } else {
      kernels::matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, layout);
    }
  }
};

// The kernels of kernels/ for compute type P: the fp32/double kernels, or their 16-bit counterparts
// with the working memory of docs/design.md "16-bit compute". They need no context (they run on the
// calling thread and the OpenMP pool), so one object a type serves every caller.
template <class P>
class CpuGpt2 final : public Gpt2Kernels<P> {
 public:
  using Acc = typename Gpt2Kernels<P>::Acc;
  static constexpr bool k16 = std::is_same_v<P, bf16> || std::is_same_v<P, fp16>;

  void encoder_forward(Acc* out, const int32_t* inp, const P* wte, const P* wpe, int B, int T, int C) const override {
    kernels::encoder_forward<Acc, P>(out, inp, wte, wpe, B, T, C);
  }
  void encoder_backward(Acc* dwte, Acc* dwpe, const Acc* dout, const int32_t* inp, int B, int T,
                        int C) const override {
    kernels::encoder_backward<Acc>(dwte, dwpe, dout, inp, B, T, C);
  }
  void layernorm_forward(P* out, Acc* mean, Acc* rstd, const Acc* inp, const P* w, const P* b, int N,
                         int C) const override {
    kernels::layernorm_forward<Acc, P, P>(out, mean, rstd, inp, w, b, N, C);
  }
  void layernorm_backward(Acc* dinp, Acc* dw, Acc* db, const Acc* dout, const Acc* inp, const P* w, const Acc* mean,
                          const Acc* rstd, int N, int C) const override {
    kernels::layernorm_backward<Acc, P>(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void linear_forward(P* out, const P* inp, const P* w, const P* b, int N, int C, int OC,
                      float* scratch) const override {
    Dense::forward(out, inp, w, b, N, C, OC, scratch);
  }
  void linear_forward_acc(Acc* out, const P* inp, const P* w, const P* b, int N, int C, int OC,
                          float* scratch) const override {
    Dense::forward(out, inp, w, b, N, C, OC, scratch);
  }
  void linear_backward(Acc* dinp, Acc* dw, Acc* db, const Acc* dout, const P* inp, const P* w, int N, int C, int OC,
                       P* operand16) const override {
    Dense::backward(dinp, dw, db, dout, inp, w, N, C, OC, operand16);
  }
  void gelu_linear_backward(Acc* dinp, Acc* dw, Acc* db, Acc* dpre, const Acc* dgelu, const P* pre, const P* inp,
                            const P* w, int N, int C, int OC, P* operand16) const override {
    if constexpr (k16) {
      kernels::gelu_round_bias_backward(operand16, db, pre, dgelu, N, OC);
      kernels::matmul16_backward_rounded(dinp, dw, operand16, inp, w, N, C, OC);
    } else {
      kernels::gelu_bias_backward(dpre, db, pre, dgelu, N, OC);
      kernels::matmul_backward(dinp, dw, static_cast<Acc*>(nullptr), dpre, inp, w, N, C, OC);
    }
  }
  void head_forward(Acc* logits, const P* inp, const P* wte, int N, int C, int V) const override {
    if constexpr (k16) {
      kernels::matmul16_nt_forward(logits, inp, wte, N, C, V);
    } else {
      kernels::matmul_nt_forward(logits, inp, wte, N, C, V);
    }
  }
  void head_backward(Acc* dinp, Acc* dwte, const Acc* dlogits, const P* inp, const P* wte, int N, int C, int V,
                     P* operand16) const override {
    if constexpr (k16) {
      kernels::matmul16_nt_backward(dinp, dwte, dlogits, operand16, inp, wte, N, C, V);
    } else {
      kernels::matmul_nt_backward(dinp, dwte, dlogits, inp, wte, N, C, V);
    }
  }
  size_t attention_scratch_bytes(int B, int T, int C, int NH) const override {
    if constexpr (k16) {
      return kernels::attention16_scratch_bytes(B, T, C, NH);
    } else {
      return kernels::attention_scratch_elems(B, T, NH) * sizeof(Acc);
    }
  }
  // The probabilities [B,NH,T,T].
  size_t attention_saved_bytes(int B, int T, int NH) const override {
    return static_cast<size_t>(B) * NH * T * T * sizeof(P);
  }
  void attention_forward(P* out, P* att, const P* qkv, void* scratch, int B, int T, int C, int NH) const override {
    if constexpr (k16) {
      kernels::attention16_forward(out, att, qkv, scratch, B, T, C, NH);
    } else {
      kernels::attention_forward(out, att, qkv, B, T, C, NH);
    }
  }
  void attention_backward(Acc* dqkv, void* scratch, const Acc* dout, P* operand16, const P* qkv, const P*,
                          const P* att, int B, int T, int C, int NH) const override {
    if constexpr (k16) {
      kernels::round_to(operand16, dout, static_cast<size_t>(B) * T * C);
      kernels::attention16_backward(dqkv, scratch, operand16, qkv, att, B, T, C, NH);
    } else {
      kernels::attention_backward(dqkv, static_cast<Acc*>(scratch), dout, qkv, att, B, T, C, NH);
    }
  }
  void gelu_forward(P* out, const P* inp, size_t n) const override { kernels::gelu_forward<P, P>(out, inp, n); }
  void gelu_backward(Acc* dinp, const P* inp, const Acc* dout, size_t n) const override {
    kernels::gelu_backward<Acc, P>(dinp, inp, dout, n);
  }
  void residual_forward(Acc* out, const Acc* a, const Acc* b, size_t n) const override {
    kernels::residual_forward<Acc>(out, a, b, n);
  }
  void softmax_crossentropy_forward(Acc* losses, Acc* probs, const Acc* logits, const int32_t* targets, int N,
                                    int V) const override {
    kernels::softmax_crossentropy_forward<Acc>(losses, probs, logits, targets, N, V);
  }
  void softmax_crossentropy_backward(Acc* dlogits, const Acc* probs, const int32_t* targets, Acc dloss, int N,
                                     int V) const override {
    kernels::softmax_crossentropy_backward<Acc>(dlogits, probs, targets, dloss, N, V);
  }

  static const CpuGpt2& instance() {
    static const CpuGpt2 table;
    return table;
  }

 private:
  using Dense = CpuDense<P, kernels::WeightLayout::kInOut>;  // GPT-2's Conv1D weights
};

// The Llama family's kernels of kernels/ for compute type P, as CpuGpt2 holds GPT-2's: no context,
// one object a type.
template <class P>
class CpuLlama final : public LlamaKernels<P> {
 public:
  using Acc = typename LlamaKernels<P>::Acc;
  static constexpr bool k16 = std::is_same_v<P, bf16> || std::is_same_v<P, fp16>;

  void embedding_forward(Acc* out, const int32_t* inp, const P* table, int N, int C) const override {
    kernels::embedding_forward<Acc, P>(out, inp, table, N, C);
  }
  void embedding_backward(Acc* dtable, const Acc* dout, const int32_t* inp, int N, int C) const override {
    kernels::embedding_backward<Acc>(dtable, dout, inp, N, C);
  }
  void rmsnorm_forward(P* out, Acc* rstd, const Acc* inp, const P* w, int N, int C, double eps) const override {
    kernels::rmsnorm_forward<Acc, P, P>(out, rstd, inp, w, N, C, eps);
  }
  void rmsnorm_backward(Acc* dinp, Acc* dw, const Acc* dout, const Acc* inp, const P* w, const Acc* rstd, int N,
                        int C) const override {
    kernels::rmsnorm_backward<Acc, P>(dinp, dw, dout, inp, w, rstd, N, C);
  }
  void linear_forward(P* out, const P* inp, const P* w, const P* b, int N, int C, int OC,
                      float* scratch) const override {
    Dense::forward(out, inp, w, b, N, C, OC, scratch);
  }
  void linear_forward_acc(Acc* out, const P* inp, const P* w, const P* b, int N, int C, int OC,
                          float* scratch) const override {
    Dense::forward(out, inp, w, b, N, C, OC, scratch);
  }
  void linear_backward(Acc* dinp, Acc* dw, Acc* db, const Acc* dout, const P* inp, const P* w, int N, int C, int OC,
                       P* operand16) const override {
    Dense::backward(dinp, dw, db, dout, inp, w, N, C, OC, operand16);
  }
  void rope_forward(P* x, const float* cos, const float* sin, int N, int T, int heads, int D,
                    int64_t stride) const override {
    kernels::rope_forward<P>(x, x, cos, sin, N, T, heads, D, stride);
  }
  void rope_backward(Acc* dx, const float* cos, const float* sin, int N, int T, int heads, int D,
                     int64_t stride) const override {
    kernels::rope_backward<Acc>(dx, dx, cos, sin, N, T, heads, D, stride);
  }
  size_t attention_scratch_bytes(const kernels::AttentionShape& shape) const override {
    if constexpr (k16) {
      return kernels::attention16_scratch_bytes(shape);
    } else {
      return kernels::attention_scratch_elems(shape) * sizeof(Acc);
    }
  }
  // The probabilities [B,NH,T,T].
  size_t attention_saved_bytes(const kernels::AttentionShape& shape) const override {
    return static_cast<size_t>(shape.B) * shape.heads * shape.T * shape.T * sizeof(P);
  }
  void attention_forward(P* out, P* att, const P* qkv, void* scratch,
                         const kernels::AttentionShape& shape) const override {
    if constexpr (k16) {
      kernels::attention16_forward(out, att, qkv, scratch, shape);
    } else {
      kernels::attention_forward(out, att, qkv, shape);
    }
  }
  void attention_backward(Acc* dqkv, void* scratch, const Acc* dout, P* operand16, const P* qkv, const P*,
                          const P* att, const kernels::AttentionShape& shape) const override {
    if constexpr (k16) {
      kernels::round_to(operand16, dout, static_cast<size_t>(shape.B) * shape.T * shape.heads * shape.head_size);
      kernels::attention16_backward(dqkv, scratch, operand16, qkv, att, shape);
    } else {
      kernels::attention_backward(dqkv, static_cast<Acc*>(scratch), dout, qkv, att, shape);
    }
  }
  void swiglu_forward(P* out, const P* inp, int N, int I) const override {
    kernels::swiglu_forward<P, P>(out, inp, N, I);
  }
  void swiglu_backward(Acc* dinp, const Acc* dout, const P* inp, int N, int I) const override {
    kernels::swiglu_backward<P, Acc>(dinp, dout, inp, N, I);
  }
  void residual_forward(Acc* out, const Acc* a, const Acc* b, size_t n) const override {
    CpuGpt2<P>::instance().residual_forward(out, a, b, n);
  }
  void softmax_crossentropy_forward(Acc* losses, Acc* probs, const Acc* logits, const int32_t* targets, int N,
                                    int V) const override {
    CpuGpt2<P>::instance().softmax_crossentropy_forward(losses, probs, logits, targets, N, V);
  }
  void softmax_crossentropy_backward(Acc* dlogits, const Acc* probs, const int32_t* targets, Acc dloss, int N,
                                     int V) const override {
    CpuGpt2<P>::instance().softmax_crossentropy_backward(dlogits, probs, targets, dloss, N, V);
  }

  static const CpuLlama& instance() {
    static const CpuLlama table;
    return table;
  }

 private:
  using Dense = CpuDense<P, kernels::WeightLayout::kOutIn>;  // PyTorch's Linear weights
};

}  // namespace

Buffer CpuDevice::allocate(size_t bytes, MemCategory category) { return Buffer(bytes, category); }

// The same RAM as allocate(): only the ledger's tier tells them apart.
Buffer CpuDevice::allocate_host(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kHost);
}

void CpuDevice::copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuDevice::fill_zero(void* dst, size_t bytes) { zerodp::fill_zero(dst, bytes); }

void CpuDevice::convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  zerodp::convert(src, src_type, dst, dst_type, n);
}

void CpuDevice::add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  kernels::add_into(dst, dst_type, src, src_type, n);
}

double CpuDevice::sum_squares(const void* x, DType type, size_t n) { return kernels::sum_squares(x, type, n); }

void CpuDevice::quantize_int8(const void* x, DType type, size_t n, void* out) { zerodp::quantize_int8(x, type, n, out); }

void CpuDevice::dequantize_int8(const void* q, size_t n, void* x, DType type) { zerodp::dequantize_int8(q, n, x, type); }

void CpuDevice::adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                             int64_t t, bool decay, float grad_scale) {
  optim::adamw_update(p, g, m, v, n, hp, t, decay, grad_scale);
}

void CpuDevice::sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,
                           bool decay, float grad_scale) {
  optim::sgd_update(p, g, momentum, n, hp, t, decay, grad_scale);
}

void CpuDevice::gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,
                     const void* B, int ldb, float beta, float* C, int ldc) {
  if (dtype == DType::kF32) {
    kernels::gemm_f32(trans_a, trans_b, M, N, K, alpha, static_cast<const float*>(A), lda,
                      static_cast<const float*>(B), ldb, beta, C, ldc);
  } else {
    kernels::gemm16(dtype, trans_a, trans_b, M, N, K, alpha, static_cast<const uint16_t*>(A), lda,
                    static_cast<const uint16_t*>(B), ldb, beta, C, ldc);
  }
}

TransferQueue& CpuDevice::transfers() {
  std::call_once(transfers_once_,
                 [this] { transfers_ = std::make_unique<TransferQueue>(TransferQueue::inline_from_environment()); });
  return *transfers_;
}

void CpuDevice::transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  transfers().submit([=] { zerodp::convert(src, src_type, dst, dst_type, n); });
}

std::unique_ptr<Event> CpuDevice::record_transfer() { return transfers().record(); }

std::unique_ptr<Event> CpuDevice::record() { return std::make_unique<CompleteEvent>(); }

// The compute queue is always empty; the transfers are what may still be running.
void CpuDevice::synchronize() { transfers().drain(); }

const Gpt2Kernels<float>* CpuDevice::gpt2_f32() const { return &CpuGpt2<float>::instance(); }
const Gpt2Kernels<double>* CpuDevice::gpt2_f64() const { return &CpuGpt2<double>::instance(); }
const Gpt2Kernels<bf16>* CpuDevice::gpt2_bf16() const { return &CpuGpt2<bf16>::instance(); }
const Gpt2Kernels<fp16>* CpuDevice::gpt2_fp16() const { return &CpuGpt2<fp16>::instance(); }
const LlamaKernels<float>* CpuDevice::llama_f32() const { return &CpuLlama<float>::instance(); }
const LlamaKernels<double>* CpuDevice::llama_f64() const { return &CpuLlama<double>::instance(); }
const LlamaKernels<bf16>* CpuDevice::llama_bf16() const { return &CpuLlama<bf16>::instance(); }
const LlamaKernels<fp16>* CpuDevice::llama_fp16() const { return &CpuLlama<fp16>::instance(); }

Device& default_device() {
  static CpuDevice cpu;
  return cpu;
}

std::string cpu_gemm_warning() { return kernels::blas_core_warning(); }

}  // namespace zerodp::device
