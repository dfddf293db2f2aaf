// Dense layers through BLAS (sgemm for float, dgemm for double), row-major.
//   linear:   out[N,OC] = inp[N,C]·W[C,OC] + bias[OC]           (W stored [in, out], as GPT-2's Conv1D)
//             dinp = dout·Wᵀ ;  dW += inpᵀ·dout ;  dbias += Σ_rows dout
//             or, W stored [out, in] (PyTorch's Linear, the Llama family): out = inp·Wᵀ + bias,
//             dinp = dout·W ;  dW += doutᵀ·inp
//   LM head:  out[N,V] = inp[N,C]·wteᵀ with wte [V,C] (tied to the embedding), no bias
//             dinp = dout·wte ;  dwte += doutᵀ·inp
// The input's gradient is written (each activation gradient has one producer, so nobody zeroes it
// first); the parameters' gradients accumulate (micro-steps, the tied embedding), or the weight's is
// written over a buffer nobody zeroed (WeightGrad::kWrite).
// BLAS runs on the OpenMP pool here; its results are reproducible run to run for a fixed number of
// threads (tests/kernels/test_determinism.cpp checks it), not necessarily across thread counts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zerodp::kernels {

// How a dense layer's weight is stored (the same GEMMs, transposed).
enum class WeightLayout : uint8_t {
  kInOut,  // [in, out]: GPT-2's Conv1D
  kOutIn,  // [out, in]: PyTorch's Linear
};

// What a backward does with the weight's gradient: adds it into dweight, or writes it over whatever
// dweight holds (its first writer in a gradient buffer nobody zeroed: UnitAccess::grads_fresh). The
// GEMM's beta, 1 or 0: writing gives the bits of adding into zeros (the products' sums start from +0,
// so 0 + sum is sum exactly).
enum class WeightGrad : uint8_t { kAdd, kWrite };

// bias may be null (no bias).
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC,
                    WeightLayout layout = WeightLayout::kInOut);

// Writes dinp, accumulates dweight (or writes it: dw_mode) and dbias. dinp or dbias may be null: that
// gradient is skipped. dbias is summed over rows in row order by the thread that owns each column.
template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int N, int C, int OC,
                     WeightLayout layout = WeightLayout::kInOut, WeightGrad dw_mode = WeightGrad::kAdd);

// dbias[OC] += Σ_rows dout[N,OC], each column summed in row order by the thread that owns it.
template <class T>
void bias_backward(T* dbias, const T* dout, int N, int OC);
template <class T>
void matmul_nt_forward(T* out, const T* inp, const T* wte, int N, int C, int V);

// Writes dinp [N,C], accumulates into dwte [V,C]; dinp may be null (skipped).
template <class T>
void matmul_nt_backward(T* dinp, T* dwte, const T* dout, const T* inp, const T* wte, int N, int C,
                        int V);

}  // namespace zerodp::kernels

// ---- 16-bit compute (A = bf16 or fp16): operands in A, products accumulated in fp32 by gemm16 ------
// The same math as above. Forward outputs are fp32 (O = float: the residual stream, the logits) or
// A (rounded once from the fp32 result plus bias: the next layer's input); `scratch` is fp32 [N, OC]
// working memory when O is A (unused, may be null, when O is float). Backward gradients are fp32
// (dinp written, the rest accumulated, as above):
// dout is rounded to A into `dout16` [N, OC] (working memory) to be a GEMM operand, while dbias sums
// the fp32 dout itself.
namespace zerodp::kernels {

template <class A, class O>
void matmul16_forward(O* out, const A* inp, const A* weight, const A* bias, int N, int C, int OC, float* scratch,
                      WeightLayout layout = WeightLayout::kInOut);
template <class A>
void matmul16_backward(float* dinp, float* dweight, float* dbias, const float* dout, A* dout16, const A* inp,
                       const A* weight, int N, int C, int OC, WeightLayout layout = WeightLayout::kInOut,
                       WeightGrad dw_mode = WeightGrad::kAdd);
// matmul16_backward's two GEMMs, for a dout already rounded (and its bias gradient already summed)
// by the kernel that produced it (gelu_round_bias_backward).
template <class A>
void matmul16_backward_rounded(float* dinp, float* dweight, const A* dout16, const A* inp, const A* weight, int N,
                               int C, int OC, WeightLayout layout = WeightLayout::kInOut,
                               WeightGrad dw_mode = WeightGrad::kAdd);
template <class A>
void matmul16_nt_forward(float* out, const A* inp, const A* wte, int N, int C, int V);
template <class A>
void matmul16_nt_backward(float* dinp, float* dwte, const float* dout, A* dout16, const A* inp, const A* wte,
                          int N, int C, int V);
// dst[i] = dst's type of src[i] (rounded to nearest even), in parallel.
template <class A>
void round_to(A* dst, const float* src, size_t n);

}  // namespace zerodp::kernels
