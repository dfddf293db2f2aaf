// The SiLU-gated MLP's activation (Llama's act_fn(gate_proj(x)) · up_proj(x), act_fn = SiLU), on one
// GEMM's output of gate_proj and up_proj stacked: row n holds the gate in columns [0, I) and the up
// projection in [I, 2I).
//   forward:  σ(g) = 1/(1 + e^−g), silu(g) = g·σ(g), out = silu(g)·u
//   backward: dg = dout·u·σ(g)·(1 + g·(1 − σ(g))) ;  du = dout·silu(g)
// e^x in float is kernels/vec_math.h's fast_exp (within 1.3 ulp; vectorizes, where libm's expf is a
// scalar call per element), in double libm's.
#pragma once

namespace zerodp::kernels {

// inp [N, 2I], out [N, I]. X is the stored input type and O the output's (float, double, or 16-bit:
// computed in float, rounded once).
template <class X, class O>
void swiglu_forward(O* out, const X* inp, int N, int I);
// dinp [N, 2I] is written (not accumulated): the gradient of the GEMM's output, gate then up. T is
// the gradient type (float, or double for gradient checks).
template <class X, class T>
void swiglu_backward(T* dinp, const T* dout, const X* inp, int N, int I);

}  // namespace zerodp::kernels
