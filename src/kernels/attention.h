// Causal multi-head self-attention with grouped-query heads, per batch row b and query head h (Q, K,
// V the [T,hs] column slices of qkv [B,T,(NH + 2·NKV)·hs]: the NH query heads, then the NKV key heads,
// then the NKV value heads; query head h reads key/value head h / (NH/NKV)):
//   forward:  S = Q·Kᵀ/sqrt(hs) ;  P = softmax(S) over j ≤ t of each row t (P[t,j>t] = 0) ;  O = P·V
//             (with a sliding window w: over t − w < j ≤ t, P = 0 elsewhere: Mistral's; with packed
//             sequences, only over the keys of row t's own example, which starts at t − position[t])
//   backward: dP = dO·Vᵀ ;  dV += Pᵀ·dO ;  dS = P∘(dP − rowsum(P∘dP))/sqrt(hs)
//             dQ += dS·K ;  dK += dSᵀ·Q
// GPT-2 is the case NKV = NH (qkv [B,T,3C], hs = C/NH). Every product goes through BLAS on strided
// views, one (b, h) pair per OpenMP task forward and one (b, key/value head) backward, whose query
// heads run in order (they add into the same dK, dV). Rows are processed in blocks of
// kAttentionRowBlock so that only the blocks on or below the diagonal are multiplied (about half the
// flops of the full T×T products at T = 256).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace zerodp::kernels {

inline constexpr int kAttentionRowBlock = 64;

struct AttentionShape {
  int B = 0, T = 0;
  int heads = 0;     // NH, query heads
  int kv_heads = 0;  // NKV, key and value heads, dividing NH
  int head_size = 0;
  int window = 0;  // sliding window: row t attends to keys t − window < j ≤ t; 0 = every j ≤ t
  // Packed sequences: each token's position in its example, [B, T] (positions restart at 0 where an
  // example starts: token t of row b attends only to keys from t − positions[b·T + t] on). Null: every
  // row is one sequence.
  const int32_t* positions = nullptr;
  // The first key of row b that row t attends to.
  int first_key(int b, int t) const {
    const int lo = window > 0 && t >= window ? t - window + 1 : 0;
    return positions ? std::max(lo, t - positions[static_cast<ptrdiff_t>(b) * T + t]) : lo;
  }
  // GPT-2's: as many key/value heads as query heads, C/NH values each (a check fails unless NH divides C).
  static AttentionShape mha(int B, int T, int C, int NH);
};

// out [B,T,NH·hs]; att [B,NH,T,T] receives P (saved for backward; entries above the diagonal are 0).
template <class T>
void attention_forward(T* out, T* att, const T* qkv, const AttentionShape& shape);

// Elements of working memory attention_backward needs: one row block of dP per (b, key/value head),
// that is B·NKV·min(T, kAttentionRowBlock)·T.
size_t attention_scratch_elems(const AttentionShape& shape);

// Accumulates into dqkv (qkv's layout). scratch: at least attention_scratch_elems(shape) elements,
// contents ignored and overwritten. Deterministic: each (b, key/value head) is computed by one thread
// in a fixed order, so the result does not depend on the number of threads.
template <class T>
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, const AttentionShape& shape);

// GPT-2's forms (qkv [B,T,3C], NH heads of C/NH).
template <class T>
void attention_forward(T* out, T* att, const T* qkv, int B, int T_, int C, int NH) {
  attention_forward(out, att, qkv, AttentionShape::mha(B, T_, C, NH));
}
inline size_t attention_scratch_elems(int B, int T_, int NH) {
  return attention_scratch_elems(AttentionShape{B, T_, NH, NH, 1});
}
template <class T>
void attention_backward(T* dqkv, T* scratch, const T* dout, const T* qkv, const T* att, int B, int T_, int C,
                        int NH) {
  attention_backward(dqkv, scratch, dout, qkv, att, AttentionShape::mha(B, T_, C, NH));
}

}  // namespace zerodp::kernels

// ---- 16-bit compute (A = bf16 or fp16) ---------------------------------------------------------------
// The same math with qkv, out and the saved probabilities att in A, the scores, the softmax and dS in
// fp32, and every product through gemm16 (fp32 accumulation). The backward reads dout already rounded
// to A (dout16 [B,T,C]) and accumulates into an fp32 dqkv.
namespace zerodp::kernels {

// Bytes of working memory either direction needs: per (b, query head) one row block of fp32 scores
// and A probabilities' gradient, and one row block of the fp32 output, 64-byte aligned.
size_t attention16_scratch_bytes(const AttentionShape& shape);
template <class A>
void attention16_forward(A* out, A* att, const A* qkv, void* scratch, const AttentionShape& shape);
template <class A>
void attention16_backward(float* dqkv, void* scratch, const A* dout16, const A* qkv, const A* att,
                          const AttentionShape& shape);

// GPT-2's forms (qkv [B,T,3C], NH heads of C/NH).
inline size_t attention16_scratch_bytes(int B, int T_, int C, int NH) {
  return attention16_scratch_bytes(AttentionShape::mha(B, T_, C, NH));
}
template <class A>
void attention16_forward(A* out, A* att, const A* qkv, void* scratch, int B, int T_, int C, int NH) {
  attention16_forward(out, att, qkv, scratch, AttentionShape::mha(B, T_, C, NH));
}
template <class A>
void attention16_backward(float* dqkv, void* scratch, const A* dout16, const A* qkv, const A* att, int B, int T_,
                          int C, int NH) {
  attention16_backward(dqkv, scratch, dout16, qkv, att, AttentionShape::mha(B, T_, C, NH));
}

}  // namespace zerodp::kernels
