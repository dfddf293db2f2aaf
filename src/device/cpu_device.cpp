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
#include "core/stochastic_round.h"
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

// The kernels of kernels/ for compute type P: the fp32/double kernels, or their 16-bit counterparts
// with the working memory of docs/design.md "16-bit compute". They need no context (they run on the
// calling thread and the OpenMP pool), so one object a type serves every caller.
template <class P>
class CpuKernels final : public ModelKernels<P> {
 public:
  using Acc = typename ModelKernels<P>::Acc;
  using Layout = kernels::WeightLayout;
  static constexpr bool k16 = std::is_same_v<P, bf16> || std::is_same_v<P, fp16>;

  void embedding_forward(Acc* out, const int32_t* inp, const int32_t* pos, const P* wte, const P* wpe, int B, int T,
                         int C) const override {
    if (wpe != nullptr) {
      kernels::encoder_forward<Acc, P>(out, inp, pos, wte, wpe, B, T, C);
    } else {
      kernels::embedding_forward<Acc, P>(out, inp, wte, B * T, C);
    }
  }
  void embedding_backward(Acc* dwte, Acc* dwpe, const Acc* dout, const int32_t* inp, const int32_t* pos, int B, int T,
                          int C) const override {
    if (dwpe != nullptr) {
      kernels::encoder_backward<Acc>(dwte, dwpe, dout, inp, pos, B, T, C);
    } else {
      kernels::embedding_backward<Acc>(dwte, dout, inp, B * T, C);
    }
  }
  void layernorm_forward(P* out, Acc* mean, Acc* rstd, const Acc* inp, const P* w, const P* b, int N,
                         int C) const override {
    kernels::layernorm_forward<Acc, P, P>(out, mean, rstd, inp, w, b, N, C);
  }
  void layernorm_backward(Acc* dinp, Acc* dw, Acc* db, const Acc* dout, const Acc* inp, const P* w, const Acc* mean,
                          const Acc* rstd, int N, int C) const override {
    kernels::layernorm_backward<Acc, P>(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  }
  void rmsnorm_forward(P* out, Acc* rstd, const Acc* inp, const P* w, int N, int C, double eps) const override {
    kernels::rmsnorm_forward<Acc, P, P>(out, rstd, inp, w, N, C, eps);
  }
  void rmsnorm_backward(Acc* dinp, Acc* dw, const Acc* dout, const Acc* inp, const P* w, const Acc* rstd, int N,
                        int C) const override {
    kernels::rmsnorm_backward<Acc, P>(dinp, dw, dout, inp, w, rstd, N, C);
  }
  void head_rmsnorm_forward(P* x, P* saved, Acc* rstd, const P* w, int N, int heads, int D, int64_t stride,
                            double eps) const override {
    kernels::head_rmsnorm_forward<P, Acc>(x, saved, rstd, w, N, heads, D, stride, eps);
  }
  void head_rmsnorm_backward(Acc* dx, Acc* dw, const P* saved, const Acc* rstd, const P* w, int N, int heads, int D,
                             int64_t stride) const override {
    kernels::head_rmsnorm_backward<P, Acc>(dx, dw, saved, rstd, w, N, heads, D, stride);
  }
  void linear_forward(P* out, const P* inp, const P* w, const P* b, int N, int C, int OC, Layout layout,
                      float* scratch) const override {
    dense_forward(out, inp, w, b, N, C, OC, layout, scratch);
  }
  void linear_forward_acc(Acc* out, const P* inp, const P* w, const P* b, int N, int C, int OC, Layout layout,
                          float* scratch) const override {
    dense_forward(out, inp, w, b, N, C, OC, layout, scratch);
  }
  void linear_backward(Acc* dinp, Acc* dw, Acc* db, const Acc* dout, const P* inp, const P* w, int N, int C, int OC,
                       Layout layout, P* operand16, kernels::WeightGrad dw_mode) const override {
    if constexpr (k16) {
      kernels::matmul16_backward(dinp, dw, db, dout, operand16, inp, w, N, C, OC, layout, dw_mode);
    } else {
      kernels::matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, layout, dw_mode);
    }
  }
  void rope_forward(P* x, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads, int D,
                    int64_t stride) const override {
    kernels::rope_forward<P>(x, x, cos, sin, pos, N, T, heads, D, stride);
  }
  void rope_backward(Acc* dx, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads, int D,
                     int64_t stride) const override {
    kernels::rope_backward<Acc>(dx, dx, cos, sin, pos, N, T, heads, D, stride);
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
  void gelu_forward(P* out, const P* inp, size_t n) const override { kernels::gelu_forward<P, P>(out, inp, n); }
  void gelu_backward(Acc* dinp, const P* inp, const Acc* dout, size_t n) const override {
    kernels::gelu_backward<Acc, P>(dinp, inp, dout, n);
  }
  void gelu_linear_backward(Acc* dinp, Acc* dw, Acc* db, Acc* dpre, const Acc* dgelu, const P* pre, const P* inp,
                            const P* w, int N, int C, int OC, Layout layout, P* operand16,
                            kernels::WeightGrad dw_mode) const override {
    if constexpr (k16) {
      kernels::gelu_round_bias_backward(operand16, db, pre, dgelu, N, OC);
      kernels::matmul16_backward_rounded(dinp, dw, operand16, inp, w, N, C, OC, layout, dw_mode);
    } else {
      kernels::gelu_bias_backward(dpre, db, pre, dgelu, N, OC);
      kernels::matmul_backward(dinp, dw, static_cast<Acc*>(nullptr), dpre, inp, w, N, C, OC, layout, dw_mode);
    }
  }
  void swiglu_forward(P* out, const P* inp, int N, int I) const override {
    kernels::swiglu_forward<P, P>(out, inp, N, I);
  }
  void swiglu_backward(Acc* dinp, const Acc* dout, const P* inp, int N, int I) const override {
    kernels::swiglu_backward<P, Acc>(dinp, dout, inp, N, I);
  }
  void residual_forward(Acc* out, const Acc* a, const Acc* b, size_t n) const override {
    kernels::residual_forward<Acc>(out, a, b, n);
  }
  // The probabilities, then their gradient, in place of the logits (row_stats unused).
  void classifier_loss_forward(Acc* losses, Acc* logits, Acc*, const int32_t* targets, int N, int V) const override {
    kernels::softmax_crossentropy_forward<Acc>(losses, logits, logits, targets, N, V);
  }
  void classifier_loss_backward(Acc* dinp, Acc* dw, Acc* logits, const Acc*, const int32_t* targets, Acc dloss,
                                const P* inp, const P* w, int N, int C, int V, Layout layout, P* operand16,
                                kernels::WeightGrad dw_mode) const override {
    kernels::softmax_crossentropy_backward<Acc>(logits, logits, targets, dloss, N, V);
    linear_backward(dinp, dw, nullptr, logits, inp, w, N, C, V, layout, operand16, dw_mode);
  }

  static const CpuKernels& instance() {
    static const CpuKernels table;
    return table;
  }

 private:
  // The fp32/double GEMMs, or the 16-bit ones with fp32 results (kernels/matmul.h), into P or Acc.
  template <class O>
  static void dense_forward(O* out, const P* inp, const P* w, const P* b, int N, int C, int OC, Layout layout,
                            float* scratch) {
    if constexpr (k16) {
      kernels::matmul16_forward(out, inp, w, b, N, C, OC, scratch, layout);
    } else {
      kernels::matmul_forward(out, inp, w, b, N, C, OC, layout);
    }
  }
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

void CpuDevice::round_bf16_stochastic(const float* x, void* out, size_t n, uint64_t stream, uint64_t first) {
  zerodp::round_bf16_stochastic(x, static_cast<uint16_t*>(out), n, stream, first);
}

void CpuDevice::adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                             int64_t t, bool decay, float grad_scale) {
  optim::adamw_update(p, g, m, v, n, hp, t, decay, grad_scale);
}

void CpuDevice::sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,
                           bool decay, float grad_scale) {
  optim::sgd_update(p, g, momentum, n, hp, t, decay, grad_scale);
}

void CpuDevice::muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s) {
  optim::muon_momentum(g, m, u, n, s);
}

void CpuDevice::muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s) {
  optim::muon_apply(w, o, n, s);
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

const ModelKernels<float>* CpuDevice::kernels_f32() const { return &CpuKernels<float>::instance(); }
const ModelKernels<double>* CpuDevice::kernels_f64() const { return &CpuKernels<double>::instance(); }
const ModelKernels<bf16>* CpuDevice::kernels_bf16() const { return &CpuKernels<bf16>::instance(); }
const ModelKernels<fp16>* CpuDevice::kernels_fp16() const { return &CpuKernels<fp16>::instance(); }

Device& default_device() {
  static CpuDevice cpu;
  return cpu;
}

std::string cpu_gemm_warning() { return kernels::blas_core_warning(); }

}  // namespace zerodp::device
