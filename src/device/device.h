// The compute seam: what the model, the engine and the optimizer ask of the hardware they run on, in
// one small interface. A Device owns
//   - memory: allocation in the ledger (its own memory in the device tier, and host memory in the
//     host tier: on the CPU device both are RAM, counted apart), copies, zeroing;
//   - GEMM: fp32, and 16-bit operands with fp32 accumulation;
//   - GPT-2's kernels, forward beside backward, as one object per compute type (Gpt2Kernels<P>:
//     float, double for the gradient checks, bf16 and fp16 for 16-bit compute), bound to the device's
//     context; supports() says which compute types it has;
//   - the optimizer's update of a shard (AdamW, SGD: optim/'s math) and dtype conversions;
//   - ordering: work is issued in order on the device's queue; an Event marks a point in it, and
//     synchronize() waits for all of it: what overlap with communication builds on.
// Everything a device's calls need (a GPU's streams, GEMM handle, allocators) belongs to the device
// object: devices share no state, and two of them (cuda:0 and cuda:1) can live in one process.
// The CPU device (cpu_device.h) runs each call on the caller's thread and the OpenMP pool before it
// returns, so its queue is always drained and its events complete when recorded; the CUDA device
// (cuda_device.h) issues the same calls on a stream and its events are CUDA events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/attention.h"
#include "optim/adamw.h"
#include "optim/sgd.h"

namespace zerodp::device {

// The row stride, in elements, of a 16-bit GEMM operand of n columns in a kernel table's `operand16`:
// n rounded up to 8, so that every row starts 16 bytes apart whatever n (GPT-2's own vocabulary of
// 50 257 is odd, and a GPU's GEMMs read unaligned rows slowly or not at all with their fast kernels).
// Callers size operand16 for it; a device whose GEMMs do not care (the CPU's) keeps the rows packed.
constexpr size_t operand16_row(size_t n) { return (n + 7) / 8 * 8; }

// GPT-2's kernels for compute type P, as the model calls them (math in kernels/*.h): an object a
// device makes and owns, bound to that device's context (a GPU's stream, GEMM handle and working
// memory), so that a call needs nothing global and two devices' kernels run side by side. Each entry
// issues its work on its device's queue, in call order. Acc is the type everything that accumulates
// is kept in: float for bf16/fp16 and float, double for double. For 16-bit P, `scratch`/`operand16`
// are the working memory of docs/design.md "16-bit compute" (operand16: N rows of operand16_row(n)
// elements for an operand of n columns); for float and double they are unused (may be null).
template <class P>
class Gpt2Kernels {
 public:
  using Acc = std::conditional_t<std::is_same_v<P, double>, double, float>;
  virtual ~Gpt2Kernels() = default;

  virtual void encoder_forward(Acc* out, const int32_t* inp, const P* wte, const P* wpe, int B, int T,
                               int C) const = 0;
  virtual void encoder_backward(Acc* dwte, Acc* dwpe, const Acc* dout, const int32_t* inp, int B, int T,
                                int C) const = 0;
  virtual void layernorm_forward(P* out, Acc* mean, Acc* rstd, const Acc* inp, const P* weight, const P* bias, int N,
                                 int C) const = 0;
  virtual void layernorm_backward(Acc* dinp, Acc* dweight, Acc* dbias, const Acc* dout, const Acc* inp,
                                  const P* weight, const Acc* mean, const Acc* rstd, int N, int C) const = 0;
  // out[N,OC] = inp·W + bias, into the next GEMM's input (P) or into the residual stream (Acc).
  virtual void linear_forward(P* out, const P* inp, const P* weight, const P* bias, int N, int C, int OC,
                              float* scratch) const = 0;
  virtual void linear_forward_acc(Acc* out, const P* inp, const P* weight, const P* bias, int N, int C, int OC,
                                  float* scratch) const = 0;
  virtual void linear_backward(Acc* dinp, Acc* dweight, Acc* dbias, const Acc* dout, const P* inp, const P* weight,
                               int N, int C, int OC, P* operand16) const = 0;
  // The tied LM head: logits[N,V] = inp·wteᵀ.
  virtual void head_forward(Acc* logits, const P* inp, const P* wte, int N, int C, int V) const = 0;
  virtual void head_backward(Acc* dinp, Acc* dwte, const Acc* dlogits, const P* inp, const P* wte, int N, int C,
                             int V, P* operand16) const = 0;
  // Working memory the attention needs (bytes), shared by every block; what its forward saves in
  // `att` for the backward, per block (bytes): the CPU's softmax probabilities [B,NH,T,T] in P, a
  // flash attention's row log-sum-exp [B,NH,T] in fp32; then its two directions. The backward gets
  // the forward's output `out` too (a flash attention's D = rowsum(dO∘O) needs it). The two sizes
  // are host arithmetic: they need no device.
  virtual size_t attention_scratch_bytes(int B, int T, int C, int NH) const = 0;
  virtual size_t attention_saved_bytes(int B, int T, int NH) const = 0;
  virtual void attention_forward(P* out, P* att, const P* qkv, void* scratch, int B, int T, int C,
                                 int NH) const = 0;
  virtual void attention_backward(Acc* dqkv, void* scratch, const Acc* dout, P* operand16, const P* qkv,
                                  const P* out, const P* att, int B, int T, int C, int NH) const = 0;
  virtual void gelu_forward(P* out, const P* inp, size_t n) const = 0;
  virtual void gelu_backward(Acc* dinp, const P* inp, const Acc* dout, size_t n) const = 0;
  // The MLP's first linear layer backward through the GELU after it, fused (kernels/gelu.h):
  // dpre = gelu'(pre)·dgelu, then linear_backward on dpre (pre [N,OC] the linear's output). float and
  // double write dpre [N,OC] (the GEMMs' operand); 16-bit P rounds it straight into operand16 and
  // leaves dpre alone (may be null): the same results as gelu_backward followed by linear_backward.
  virtual void gelu_linear_backward(Acc* dinp, Acc* dweight, Acc* dbias, Acc* dpre, const Acc* dgelu, const P* pre,
                                    const P* inp, const P* weight, int N, int C, int OC, P* operand16) const = 0;
  virtual void residual_forward(Acc* out, const Acc* a, const Acc* b, size_t n) const = 0;
  virtual void softmax_crossentropy_forward(Acc* losses, Acc* probs, const Acc* logits, const int32_t* targets,
                                            int N, int V) const = 0;
  virtual void softmax_crossentropy_backward(Acc* dlogits, const Acc* probs, const int32_t* targets, Acc dloss,
                                             int N, int V) const = 0;
};

// The Llama family's kernels for compute type P (math in kernels/*.h: rmsnorm, rope, swiglu, the
// grouped-query attention, dense layers with PyTorch's [out, in] weights), bound to the device's
// context as Gpt2Kernels are, with the same types and working memory: Acc accumulates, 16-bit P
// stores what feeds a GEMM or the attention, `scratch` / `operand16` are 16-bit compute's.
template <class P>
class LlamaKernels {
 public:
  using Acc = typename Gpt2Kernels<P>::Acc;
  virtual ~LlamaKernels() = default;

  // out[n,:] = table[inp[n],:] ; dtable[inp[n],:] += dout[n,:] (summed in row order).
  virtual void embedding_forward(Acc* out, const int32_t* inp, const P* table, int N, int C) const = 0;
  virtual void embedding_backward(Acc* dtable, const Acc* dout, const int32_t* inp, int N, int C) const = 0;
  virtual void rmsnorm_forward(P* out, Acc* rstd, const Acc* inp, const P* weight, int N, int C,
                               double eps) const = 0;
  virtual void rmsnorm_backward(Acc* dinp, Acc* dweight, const Acc* dout, const Acc* inp, const P* weight,
                                const Acc* rstd, int N, int C) const = 0;
  // out[N,OC] = inp·Wᵀ + bias with W [OC, C] (bias may be null), into the next GEMM's input (P) or
  // into the residual stream and the logits (Acc); the backward writes dinp, accumulates dW and dbias
  // (dbias may be null).
  virtual void linear_forward(P* out, const P* inp, const P* weight, const P* bias, int N, int C, int OC,
                              float* scratch) const = 0;
  virtual void linear_forward_acc(Acc* out, const P* inp, const P* weight, const P* bias, int N, int C, int OC,
                                  float* scratch) const = 0;
  virtual void linear_backward(Acc* dinp, Acc* dweight, Acc* dbias, const Acc* dout, const P* inp, const P* weight,
                               int N, int C, int OC, P* operand16) const = 0;
  // Rotates, in place, `heads` heads of D values at the start of each of N rows `stride` apart (the
  // query and key heads of qkv), row n at position n % T; the backward rotates their gradient back.
  virtual void rope_forward(P* x, const float* cos, const float* sin, int N, int T, int heads, int D,
                            int64_t stride) const = 0;
  virtual void rope_backward(Acc* dx, const float* cos, const float* sin, int N, int T, int heads, int D,
                             int64_t stride) const = 0;
  // As Gpt2Kernels' attention, for grouped-query heads.
  virtual size_t attention_scratch_bytes(const kernels::AttentionShape& shape) const = 0;
  virtual size_t attention_saved_bytes(const kernels::AttentionShape& shape) const = 0;
  virtual void attention_forward(P* out, P* att, const P* qkv, void* scratch,
                                 const kernels::AttentionShape& shape) const = 0;
  virtual void attention_backward(Acc* dqkv, void* scratch, const Acc* dout, P* operand16, const P* qkv,
                                  const P* out, const P* att, const kernels::AttentionShape& shape) const = 0;
  // out[N,I] = silu(gate)·up of inp [N, 2I] (gate | up); dinp [N, 2I] written.
  virtual void swiglu_forward(P* out, const P* inp, int N, int I) const = 0;
  virtual void swiglu_backward(Acc* dinp, const Acc* dout, const P* inp, int N, int I) const = 0;
  virtual void residual_forward(Acc* out, const Acc* a, const Acc* b, size_t n) const = 0;
  virtual void softmax_crossentropy_forward(Acc* losses, Acc* probs, const Acc* logits, const int32_t* targets,
                                            int N, int V) const = 0;
  virtual void softmax_crossentropy_backward(Acc* dlogits, const Acc* probs, const int32_t* targets, Acc dloss,
                                             int N, int V) const = 0;
};

// A point in a device's queue of work.
class Event {
 public:
  virtual ~Event() = default;
  virtual bool done() const = 0;  // everything issued before it has finished
  virtual void wait() = 0;        // the calling thread blocks until done()
};

class Device {
 public:
  virtual ~Device() = default;
  // "cpu", "cuda:N".
  virtual std::string name() const = 0;
  // Whether GPT-2's kernels compute in `compute` here: whether the device has that table (gpt2<P>()
  // with P of that dtype returns it rather than throwing).
  bool supports(DType compute) const;
  // Whether the host reads and writes this device's memory in place (the CPU device: it is the
  // host's RAM). Where it does not (a GPU), host-side code (loading, checkpoints, consolidation, the
  // batch's tokens) goes through host buffers: device/host_access.h.
  virtual bool host_addressable() const = 0;
  // The device that computes on this device's host memory (allocate_host's): ZeRO-Offload's update
  // of the host's weights and optimizer states, conversions between host buffers. The CPU device is
  // its own; a GPU's is the CPU device (its kernels would reach page-locked memory only across PCIe).
  virtual Device& host() { return *this; }

  // ---- memory ------------------------------------------------------------------------------------
  // `bytes` of this device's memory in the ledger under `category` (64-byte aligned), in the device
  // tier: what --memory-budget caps.
  virtual Buffer allocate(size_t bytes, MemCategory category) = 0;
  // `bytes` of host memory this device copies to and from (where offloading keeps what it moves out
  // of the device; the CUDA device gives page-locked memory), in the ledger's host tier under
  // `category`, 64-byte aligned, outside the budget.
  virtual Buffer allocate_host(size_t bytes, MemCategory category) = 0;
  // In the compute queue's order. Into host memory it returns once the bytes are there; into device
  // memory it may return at once (a GPU's copy runs later, in its stream), so a host source stays as it
  // is until an event recorded after the copy is done, or synchronize().
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(void* dst, size_t bytes) = 0;
  // n elements from one dtype to another (core/dtype.h's rounding).
  virtual void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) = 0;
  // dst[i] = round(dst[i] + src[i]), added in fp32 (kernels/precision.h).
  virtual void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) = 0;
  // Σ x[i]² in double, in a fixed order (kernels/precision.h): the gradient norm's partial sum.
  virtual double sum_squares(const void* x, DType type, size_t n) = 0;
  // ZeRO++'s int8 block quantization (core/quantize.h): n values of `type` into
  // quantized_int8_bytes(n) bytes, and back, both in this device's memory and issued in the compute
  // queue's order; the same bytes and values on every device.
  virtual void quantize_int8(const void* x, DType type, size_t n, void* out) = 0;
  virtual void dequantize_int8(const void* q, size_t n, void* x, DType type) = 0;

  // ---- GEMM: C[M,N] (fp32) = alpha·op(A)·op(B) + beta·C, row-major with leading dimensions -------------
  // A and B in `dtype`: fp32 (C's own precision), or bf16/fp16 (fp32 accumulation).
  virtual void gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,
                    const void* B, int ldb, float beta, float* C, int ldc) = 0;

  // ---- the optimizer's update of n elements (optim/adamw.h, optim/sgd.h: the same math and bits) --------
  virtual void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                            int64_t t, bool decay, float grad_scale) = 0;
  virtual void sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,
                          bool decay, float grad_scale) = 0;

  // ---- transfers between the device and host tiers ------------------------------------------------------
  // A second queue beside the compute (on a GPU: a copy stream and its DMA engine), in order within
  // itself: transfer() converts n elements from src to dst there, as convert() does, and returns at
  // once; record_transfer() is an event after every transfer issued so far. The caller leaves src and
  // dst alone until that event is done. Offloading moves gradients down and parameters up through it
  // while the update of other sub-groups runs (zero/shard_optimizer_offload.cpp).
  virtual void transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) = 0;
  virtual std::unique_ptr<Event> record_transfer() = 0;

  // ---- GPT-2's kernels ---------------------------------------------------------------------------------
  // This device's kernels computing in P, alive as long as the device. A type it does not support
  // (supports()) is a RuntimeFailure naming the device and the dtypes it has.
  template <class P>
  const Gpt2Kernels<P>& gpt2() const;
  // Whether the Llama family's kernels compute in `compute` here; llama<P>() for a type without them
  // is a RuntimeFailure naming the device.
  bool supports_llama(DType compute) const;
  template <class P>
  const LlamaKernels<P>& llama() const;

  // ---- ordering ----------------------------------------------------------------------------------------
  // An event after everything issued so far.
  virtual std::unique_ptr<Event> record() = 0;
  // Waits until everything issued so far has finished.
  virtual void synchronize() = 0;

 protected:
  // Each architecture's tables, or null where the device has none (the default): a device answers
  // which dtypes it computes in by which tables it has, never by throwing from a getter.
  virtual const Gpt2Kernels<float>* gpt2_f32() const { return nullptr; }
  virtual const Gpt2Kernels<double>* gpt2_f64() const { return nullptr; }
  virtual const Gpt2Kernels<bf16>* gpt2_bf16() const { return nullptr; }
  virtual const Gpt2Kernels<fp16>* gpt2_fp16() const { return nullptr; }
  virtual const LlamaKernels<float>* llama_f32() const { return nullptr; }
  virtual const LlamaKernels<double>* llama_f64() const { return nullptr; }
  virtual const LlamaKernels<bf16>* llama_bf16() const { return nullptr; }
  virtual const LlamaKernels<fp16>* llama_fp16() const { return nullptr; }

 private:
  // The one of four tables (float, double, bf16, fp16) that computes in P.
  template <class P, class F32, class F64, class BF16, class FP16>
  static auto of_type(F32* f32, F64* f64, BF16* b16, FP16* h16) {
    if constexpr (std::is_same_v<P, float>) return f32;
    else if constexpr (std::is_same_v<P, double>) return f64;
    else if constexpr (std::is_same_v<P, bf16>) return b16;
    else return h16;
  }
  // *table, or the RuntimeFailure naming the device and the dtypes it has when there is none.
  template <class P, class Table>
  const Table& require(const Table* table, const char* family) const {
    if (table == nullptr) no_kernels(family, dtype_of<P>);
    return *table;
  }
  [[noreturn]] void no_kernels(const char* family, DType compute) const;
};

template <class P>
const Gpt2Kernels<P>& Device::gpt2() const {
  return require<P>(of_type<P>(gpt2_f32(), gpt2_f64(), gpt2_bf16(), gpt2_fp16()), "GPT-2");
}

template <class P>
const LlamaKernels<P>& Device::llama() const {
  return require<P>(of_type<P>(llama_f32(), llama_f64(), llama_bf16(), llama_fp16()), "Llama-family");
}

// The process's CPU device (cpu_device.h): where the model and the engine compute when they are given
// no device, as on every CPU run.
Device& default_device();

}  // namespace zerodp::device
