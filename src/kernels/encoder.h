// Input embeddings. GPT-2's: token embedding plus learned position embedding; the Llama family's:
// the token embedding alone (positions enter through RoPE).
//   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[p(b,t),:]   (embedding: out[n,:] = wte[inp[n],:])
//   backward: dwte[v,:] += Σ_{b,t: inp[b,t]=v} dout[b,t,:] ;  dwpe[p,:] += Σ_{b,t: p(b,t)=p} dout[b,t,:]
// p(b,t) = pos[b·T + t] with packed sequences (each token's position in its example), else t.
// Tokens must lie in [0, V) for the wte they index (the data layer checks them against V).
#pragma once

#include <cstdint>

namespace zerodp::kernels {

// wte and wpe may be 16-bit (bf16, fp16) with out in float.
template <class T, class W>
void encoder_forward(T* out, const int32_t* inp, const int32_t* pos, const W* wte, const W* wpe, int B, int T_, int C);

// Accumulates into dwte [V,C] and dwpe [T_,C]. Deterministic: each output element is summed by one
// thread, over (b, t) in order, whatever the number of threads.
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* inp, const int32_t* pos, int B, int T_, int C);

// The token embedding alone over N rows: out [N,C] (float or double; wte may be 16-bit); dwte
// accumulated as encoder_backward accumulates it (the same bits).
template <class T, class W>
void embedding_forward(T* out, const int32_t* inp, const W* wte, int N, int C);
template <class T>
void embedding_backward(T* dwte, const T* dout, const int32_t* inp, int N, int C);

}  // namespace zerodp::kernels
