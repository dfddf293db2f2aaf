// GPT-2's non-GEMM, non-attention kernels on the GPU (the Llama family's own are cuda/llama_kernels.h):
// host-callable launchers (plain device pointers, sizes and a stream), the same math as the CPU kernels
// of src/kernels (the reference), which each .cu file restates beside its kernels. Includable from plain
// C++ (only cuda_runtime.h is needed); the 16-bit types are core/dtype.h's bf16/fp16, raw bits with the
// layout of __nv_bfloat16/__half.
//
// Conventions:
//   - every launcher enqueues on `stream` and checks the launch (cudaGetLastError, ZDP_CUDA_CHECK);
//   - a launcher templated on P takes the parameters' type: float, bf16 or fp16, each instantiated in
//     its .cu file (so are llama_kernels.h's; head RMSNorm's in the 16-bit types only);
//   - 16-bit values are computed in fp32 and rounded once, to nearest even, exactly as core/dtype.h
//     rounds (NaNs included);
//   - every reduction has a fixed order: the results are bitwise the same run to run (no float
//     atomics). Where a launcher takes `scratch`, it is a device buffer of the size its *_scratch_*
//     function gives; nullptr makes it allocate one with cudaMallocAsync on the stream (and free it).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/sgd.h"
#include "optim/segment.h"

namespace zerodp::cuda {

// ---- encoder (kernels/encoder.h) ----------------------------------------------------------------
// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] (fp32 out; tables in fp32 or 16 bits).
template <class P>
void encoder_forward(float* out, const int32_t* inp, const P* wte, const P* wpe, int B, int T, int C,
                     cudaStream_t stream);
// dwte[v,:] += Σ_{inp[b,t]=v} dout[b,t,:] ; dwpe[t,:] += Σ_b dout[b,t,:], each summed in (b, t) order:
// bitwise the CPU's encoder_backward. Tokens must lie in [0, V) of dwte (the data layer checks).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream);
// The token embedding alone (the Llama family's: positions enter through RoPE) over N rows:
// out[n,:] = wte[inp[n],:] (fp32 out) ; dwte[v,:] += Σ_{inp[n]=v} dout[n,:] summed in row order, the
// kernel encoder_backward's dwte is: bitwise the CPU's embedding_backward.
template <class P>
void embedding_forward(float* out, const int32_t* inp, const P* wte, int N, int C, cudaStream_t stream);
void embedding_backward(float* dwte, const float* dout, const int32_t* inp, int N, int C, cudaStream_t stream);

// ---- LayerNorm (kernels/layernorm.h) -----------------------------------------------------------------
// inp [N,C] fp32; out [N,C] in the parameters' type; mean, rstd [N] fp32.
template <class P>
void layernorm_forward(P* out, float* mean, float* rstd, const float* inp, const P* weight, const P* bias, int N, int C,
                       cudaStream_t stream);
// Accumulates into dinp [N,C], dweight, dbias [C] (deterministic column sums over `scratch`).
size_t layernorm_backward_scratch_floats(int N, int C);
template <class P>
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const P* weight,
                        const float* mean, const float* rstd, int N, int C, float* scratch, cudaStream_t stream);

// ---- GELU, tanh approximation (kernels/gelu.h) -------------------------------------------------------
template <class P>
void gelu_forward(P* out, const P* inp, size_t n, cudaStream_t stream);
// dinp = gelu'(inp)·dout (writes; dinp may alias dout).
template <class P>
void gelu_backward(float* dinp, const P* inp, const float* dout, size_t n, cudaStream_t stream);
// The elementwise part of gelu_linear_backward, fused with the bias gradient: over pre, dout [N,OC],
//   dpre = gelu'(pre)·dout ;  dbias[c] += Σ_r dpre[r,c]   (fp32 sums, deterministic)
// fp32: dpre written in fp32 (may alias dout). 16-bit: dpre16 = round(dpre) (the GEMM operand) and
// the sums are of the unrounded values (kernels::gelu_round_bias_backward).
size_t gelu_bias_backward_scratch_floats(int N, int OC);
template <class P>
void gelu_bias_backward(P* dpre16, float* dbias, const P* pre, const float* dout, int N, int OC, float* scratch,
                        cudaStream_t stream);

// ---- residual (kernels/residual.h) -------------------------------------------------------------------
void residual_forward(float* out, const float* a, const float* b, size_t n, cudaStream_t stream);  // may alias
void residual_backward(float* da, float* db, const float* dout, size_t n, cudaStream_t stream);

// ---- softmax + cross-entropy (kernels/cross_entropy.h) ----------------------------------------------
// losses [N]; probs [N,V] (may alias logits; nullptr: only the losses). A target of kIgnoreTarget
// (core/targets.h) gives a loss of 0 and a zero gradient row; another outside [0, V) gives a NaN loss
// (and, with probs, leaves the row's probabilities computed): the GPU cannot throw, the data layer
// checks targets against V before they get here. row_stats [2N] (may be null): each row's max m and
// the fp32 1/Σ its probabilities are made with, for crossentropy_backward_rounded.
void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets, int N,
                                  int V, cudaStream_t stream, float* row_stats = nullptr);
// dlogits = dloss·(probs − onehot(target)) (writes; may alias probs). An out-of-range target: no onehot.
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int N,
                                   int V, cudaStream_t stream);
// The two above and the rounding of dlogits for the GEMMs in one pass, from the logits and the forward's
// row_stats: dlogits16[r·ld + j] = round(dloss·(probs[r,j] − onehot)) for j < V (ld ≥ V; the padding
// is not written), the probabilities recomputed bit for bit. The same bits as softmax_crossentropy_
// forward with probs, _backward and convert_rows.
template <class P>
void crossentropy_backward_rounded(P* dlogits16, int64_t ld, const float* logits, const float* row_stats,
                                   const int32_t* targets, float dloss, int N, int V, cudaStream_t stream);

// ---- bias (kernels/matmul.h's linear layer, where cuBLASLt's epilogues do not fit) ----------------
// out[r,c] += bias[c] (fp32 out, 16-bit or fp32 bias): one fp32 addition, the CPU's.
template <class P>
void bias_add_rows(float* out, const P* bias, int N, int OC, cudaStream_t stream);
// dbias[c] += Σ_r dout[r,c] (deterministic column sums over `scratch`, as LayerNorm's: not the CPU's
// row-order bits).
size_t bias_backward_scratch_floats(int N, int OC);
void bias_backward(float* dbias, const float* dout, int N, int OC, float* scratch, cudaStream_t stream);

// ---- precision (core/dtype.h, kernels/precision.h) -------------------------------------------------
// n elements from one dtype to another, core/dtype.h's rounding bit for bit (src, dst not overlapping
// unless the types are equal and the pointers too).
void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n, cudaStream_t stream);
// dst[i] = round(dst[i] + src[i]), added in fp32.
void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n, cudaStream_t stream);
// dst[r·dst_ld + c] = round_dst(src[r·src_ld + c]) for rows × cols (fp32 src): convert() over a matrix
// whose rows are apart in memory (a GEMM operand with padded rows); the padding is not written.
void convert_rows(const float* src, int64_t src_ld, void* dst, DType dst_type, int64_t dst_ld, int64_t rows,
                  int64_t cols, cudaStream_t stream);
// ZeRO++'s int8 block quantization (core/quantize.h) of n values of `type` in device memory into
// quantized_int8_bytes(n) bytes of device memory, and back: the CPU's bytes and values bit for bit.
void quantize_int8(const void* x, DType type, size_t n, void* out, cudaStream_t stream);
void dequantize_int8(const void* q, size_t n, void* x, DType type, cudaStream_t stream);
// core/stochastic_round.h's round_bf16_stochastic, in device memory: the CPU's bits.
void round_bf16_stochastic(const float* x, uint16_t* out, size_t n, uint64_t stream, uint64_t first,
                           cudaStream_t cuda_stream);
// *out (device memory) = Σ x[i]² in double, blocks of 4096 each summed in order, then the blocks in
// order: fp32 gives kernels::sum_squares's bits exactly; bf16/fp16 are deterministic but summed in
// that blocked order (the CPU sums them in one sequence).
size_t sum_squares_scratch_doubles(size_t n);
void sum_squares(double* out, const void* x, DType type, size_t n, double* scratch, cudaStream_t stream);

// ---- AdamW (optim/adamw.h) --------------------------------------------------------------------------
// The update of optim::adamw_update_segments over a shard's segments (offsets into p, g, m, v), in
// ceil(segments / 48) launches, bitwise the CPU's (IEEE-rounded fp32 operations, no contraction). With
// p16 non-null, also writes p16[i] = round(p[i]) in p16_type (bf16 or fp16: the compute copy).
void adamw_update_segments(float* p, const float* g, float* m, float* v, const optim::ParamSegment* segments,
                           size_t num_segments, const optim::AdamWParams& hp, int64_t t, float grad_scale,
                           void* p16, DType p16_type, cudaStream_t stream);
// One range: optim::adamw_update.
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp, int64_t t,
                  bool decay, float grad_scale, cudaStream_t stream);

// ---- SGD (optim/sgd.h) ------------------------------------------------------------------------------
// optim::sgd_update on one range, bitwise the CPU's (IEEE-rounded fp32 operations in its order).
void sgd_update(float* p, const float* g, float* buf, size_t n, const optim::SGDParams& hp, int64_t t, bool decay,
                float grad_scale, cudaStream_t stream);

// ---- Muon's elementwise parts (optim/muon.h) ----------------------------------------------------------
// optim::muon_momentum and optim::muon_apply, bitwise the CPU's.
void muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s, cudaStream_t stream);
void muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s, cudaStream_t stream);

}  // namespace zerodp::cuda
