// Causal multi-head self-attention, per batch row b and head h (hs = C/NH, Q, K, V the [T,hs]
// column slices h·hs..(h+1)·hs of the q, k and v thirds of qkv [B,T,3C]):
//   forward:  S = Q·Kᵀ/sqrt(hs) ;  P = softmax(S) over j ≤ t of each row t (P[t,j>t] = 0) ;  O = P·V
//   backward: dP = dO·Vᵀ ;  dV += Pᵀ·dO ;  dS = P∘(dP − rowsum(P∘dP))/sqrt(hs)
//             dQ += dS·K ;  dK += dSᵀ·Q
// Every product goes through BLAS on strided views (leading dimension 3C or C), one (b, h) pair per
// OpenMP task. Rows are processed in blocks of kAttentionRowBlock so that only the blocks on or
// below the diagonal are multiplied (about half the flops of the full T×T products at T = 256).
#pragma once

#include <cstddef>

namespace zerodp::kernels {

inline constexpr int kAttentionRowBlock = 64;

// out [B,T,C]; att [B,NH,T,T] receives P (saved for backward; entries above the diagonal are 0).
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int T_, int C, int NH);

// Elements of working memory attention_backward needs: one row block of dP per (b, h), that is
// B·NH·min(T, kAttentionRowBlock)·T.
size_t attention_scratch_elems(int B, int T_, int NH);

// Accumulates into dqkv [B,T,3C]. scratch: at least attention_scratch_elems(B, T_, NH) elements,
// contents ignored and overwritten. Deterministic: each (b, h) is computed by one thread in a fixed
// order, so the result does not depend on the number of threads.
template <class T>
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int B, int T_,
                        int C, int NH);

}  // namespace zerodp::kernels

// ---- 16-bit compute (A = bf16 or fp16) ---------------------------------------------------------------
// The same math with qkv, out and the saved probabilities att in A, the scores, the softmax and dS in
// fp32, and every product through gemm16 (fp32 accumulation). The backward reads dout already rounded
// to A (dout16 [B,T,C]) and accumulates into an fp32 dqkv.
namespace zerodp::kernels {

// Bytes of working memory either direction needs: per (b, h) one row block of fp32 scores and A
// probabilities' gradient, and one row block of the fp32 output, 64-byte aligned.
size_t attention16_scratch_bytes(int B, int T_, int C, int NH);
template <class A>
void attention16_forward(A* out, A* att, const A* qkv, void* scratch, int B, int T_, int C, int NH);
template <class A>
void attention16_backward(float* dqkv, void* scratch, const A* dout16, const A* qkv, const A* att, int B, int T_,
                          int C, int NH);

}  // namespace zerodp::kernels
