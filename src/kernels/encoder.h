// GPT-2's input embedding: token embedding plus learned position embedding.
//   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
//   backward: dwte[v,:] += Σ_{b,t: inp[b,t]=v} dout[b,t,:] ;  dwpe[t,:] += Σ_b dout[b,t,:]
// Tokens must lie in [0, V) for the wte they index (the data layer checks them against V).
#pragma once

#include <cstdint>

namespace zerodp::kernels {

// wte and wpe may be 16-bit (bf16, fp16) with out in float.
template <class T, class W>
void encoder_forward(T* out, const int32_t* inp, const W* wte, const W* wpe, int B, int T_, int C);

// Accumulates into dwte [V,C] and dwpe [T_,C]. Deterministic: each output element is summed by one
// thread, over (b, t) in order, whatever the number of threads.
template <class T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* inp, int B, int T_, int C);

}  // namespace zerodp::kernels
