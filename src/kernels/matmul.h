// Dense layers through BLAS (sgemm for float, dgemm for double), row-major.
//   linear:   out[N,OC] = inp[N,C]·W[C,OC] + bias[OC]           (W stored [in, out], as GPT-2's Conv1D)
//             dinp += dout·Wᵀ ;  dW += inpᵀ·dout ;  dbias += Σ_rows dout
//   LM head:  out[N,V] = inp[N,C]·wteᵀ with wte [V,C] (tied to the embedding), no bias
//             dinp += dout·wte ;  dwte += doutᵀ·inp
// BLAS runs on the OpenMP pool here; its results are reproducible run to run for a fixed number of
// threads (tests/kernels/test_determinism.cpp checks it), not necessarily across thread counts.
#pragma once

namespace zerodp::kernels {

// bias may be null (no bias).
template <class T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC);

// Accumulates. dinp or dbias may be null: that gradient is skipped. dbias is summed over rows in
// row order by the thread that owns each column.
template <class T>
void matmul_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                     int N, int C, int OC);

template <class T>
void matmul_nt_forward(T* out, const T* inp, const T* wte, int N, int C, int V);

// Accumulates into dinp [N,C] and dwte [V,C]; dinp may be null (skipped).
template <class T>
void matmul_nt_backward(T* dinp, T* dwte, const T* dout, const T* inp, const T* wte, int N, int C,
                        int V);

}  // namespace zerodp::kernels
