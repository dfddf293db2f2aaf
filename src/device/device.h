// The compute seam: what the model, the engine and the optimizer ask of the hardware they run on, in
// one small interface. A Device owns
//   - memory: allocation in the ledger (its own memory in the device tier, and host memory in the
//     host tier: on the CPU device both are RAM, counted apart), copies, zeroing;
//   - GEMM: fp32, and 16-bit operands with fp32 accumulation;
//   - the models' kernels, forward beside backward, as one table for every architecture and one
//     object per compute type (ModelKernels<P>: float, double for the gradient checks, bf16 and fp16
//     for 16-bit compute), bound to the device's context; supports() says which compute types it has;
//   - the optimizer's update of a shard (AdamW, SGD, Muon's elementwise parts: optim/'s math) and dtype conversions;
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
#include <span>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/sgd.h"

namespace zerodp::device {

// The row stride, in elements, of a 16-bit GEMM operand of n columns in a kernel table's `operand16`:
// n rounded up to 8, so that every row starts 16 bytes apart whatever n (GPT-2's own vocabulary of
// 50 257 is odd, and a GPU's GEMMs read unaligned rows slowly or not at all with their fast kernels).
// Callers size operand16 for it; a device whose GEMMs do not care (the CPU's) keeps the rows packed.
constexpr size_t operand16_row(size_t n) { return (n + 7) / 8 * 8; }

// The kernels of every architecture, for compute type P, as the models call them (math in kernels/*.h):
// one table of operations (embeddings, LayerNorm and RMSNorm, dense layers in either weight layout,
// rotary embedding, attention with grouped-query heads, GELU and SwiGLU, residual, cross-entropy) from
// which GPT-2 and the Llama family alike are built, so that a new architecture adds at most the
// operations it alone has. An object a device makes and owns, bound to that device's context (a GPU's
// stream, GEMM handle and working memory), so that a call needs nothing global and two devices' kernels
// run side by side. Each entry issues its work on its device's queue, in call order. Acc is the type
// everything that accumulates is kept in: float for bf16/fp16 and float, double for double. For 16-bit
// P, `scratch`/`operand16` are the working memory of docs/design.md "16-bit compute" (operand16: N rows
// of operand16_row(n) elements for an operand of n columns); for float and double they are unused (may
// be null).
// What a kernel table's attention needs, in bytes: working memory shared by every block
// (attention_scratch_bytes), and what its forward saves in `att` for the backward, per block
// (attention_saved_bytes): the CPU's softmax probabilities [B,NH,T,T] in P, a flash attention's row
// log-sum-exp [B,NH,T] in fp32. Host arithmetic: no device is needed to answer, so the planner sizes a
// GPU's activations on a machine without one (attention_sizes).
class AttentionSizes {
 public:
  virtual ~AttentionSizes() = default;
  virtual size_t attention_scratch_bytes(const kernels::AttentionShape& shape) const = 0;
  virtual size_t attention_saved_bytes(const kernels::AttentionShape& shape) const = 0;
};

template <class P>
class ModelKernels : public AttentionSizes {
 public:
  using Acc = std::conditional_t<std::is_same_v<P, double>, double, float>;
  virtual ~ModelKernels() = default;

  // out[b,t,:] = wte[inp[b,t],:] (+ wpe[p,:] where the model learns positions; wpe may be null), p
  // the token's position: pos[b·T + t] with packed sequences (its position in its example), else t
  // (pos null); dwte[inp[n],:] += dout[n,:] summed in row order, dwpe[p,:] likewise (dwpe null: none).
  virtual void embedding_forward(Acc* out, const int32_t* inp, const int32_t* pos, const P* wte, const P* wpe, int B,
                                 int T, int C) const = 0;
  virtual void embedding_backward(Acc* dwte, Acc* dwpe, const Acc* dout, const int32_t* inp, const int32_t* pos, int B,
                                  int T, int C) const = 0;
  virtual void layernorm_forward(P* out, Acc* mean, Acc* rstd, const Acc* inp, const P* weight, const P* bias, int N,
                                 int C) const = 0;
  virtual void layernorm_backward(Acc* dinp, Acc* dweight, Acc* dbias, const Acc* dout, const Acc* inp,
                                  const P* weight, const Acc* mean, const Acc* rstd, int N, int C) const = 0;
  virtual void rmsnorm_forward(P* out, Acc* rstd, const Acc* inp, const P* weight, int N, int C,
                               double eps) const = 0;
  virtual void rmsnorm_backward(Acc* dinp, Acc* dweight, const Acc* dout, const Acc* inp, const P* weight,
                                const Acc* rstd, int N, int C) const = 0;
  // RMSNorm over each of `heads` heads of D values at the start of each of N rows `stride` apart (the
  // query or the key heads of qkv: Qwen 3's q_norm and k_norm, one weight [D]), in place, the heads
  // saved first into `saved` [N, heads·D] and rstd [N·heads] kept; the backward turns dx's heads (x's
  // layout) from the gradient of the normed heads into that of the heads before, and accumulates
  // dweight [D].
  virtual void head_rmsnorm_forward(P* x, P* saved, Acc* rstd, const P* weight, int N, int heads, int D,
                                    int64_t stride, double eps) const = 0;
  virtual void head_rmsnorm_backward(Acc* dx, Acc* dweight, const P* saved, const Acc* rstd, const P* weight, int N,
                                     int heads, int D, int64_t stride) const = 0;
  // A dense layer, its weight stored as `layout` says ([in, out]: GPT-2's Conv1D; [out, in]: PyTorch's
  // Linear, and every tied LM head): out[N,OC] = inp·W + bias (bias may be null), into the next GEMM's
  // input (P) or into the residual stream and the logits (Acc); the backward writes dinp (may be
  // null: skipped), accumulates dbias (may be null) and dW, or writes dW over what it holds (dw_mode
  // kWrite: the same bits as accumulating into zeros; kernels/matmul.h).
  virtual void linear_forward(P* out, const P* inp, const P* weight, const P* bias, int N, int C, int OC,
                              kernels::WeightLayout layout, float* scratch) const = 0;
  virtual void linear_forward_acc(Acc* out, const P* inp, const P* weight, const P* bias, int N, int C, int OC,
                                  kernels::WeightLayout layout, float* scratch) const = 0;
  virtual void linear_backward(Acc* dinp, Acc* dweight, Acc* dbias, const Acc* dout, const P* inp, const P* weight,
                               int N, int C, int OC, kernels::WeightLayout layout, P* operand16,
                               kernels::WeightGrad dw_mode) const = 0;
  // Rotates, in place, `heads` heads of D values at the start of each of N rows `stride` apart (the
  // query and key heads of qkv), row n at position pos[n] (packed sequences; pos null: n % T); the
  // backward rotates their gradient back.
  virtual void rope_forward(P* x, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads,
                            int D, int64_t stride) const = 0;
  virtual void rope_backward(Acc* dx, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads,
                             int D, int64_t stride) const = 0;
  // Causal attention over qkv's query heads and their key/value heads (grouped-query; as many of each:
  // multi-head), with the working memory and saved state its AttentionSizes say. The backward gets the
  // forward's output `out` too (a flash attention's D = rowsum(dO∘O) needs it).
  virtual void attention_forward(P* out, P* att, const P* qkv, void* scratch,
                                 const kernels::AttentionShape& shape) const = 0;
  virtual void attention_backward(Acc* dqkv, void* scratch, const Acc* dout, P* operand16, const P* qkv,
                                  const P* out, const P* att, const kernels::AttentionShape& shape) const = 0;
  virtual void gelu_forward(P* out, const P* inp, size_t n) const = 0;
  virtual void gelu_backward(Acc* dinp, const P* inp, const Acc* dout, size_t n) const = 0;
  // A dense layer's backward through the GELU after it, fused (kernels/gelu.h): dpre = gelu'(pre)·dgelu,
  // then linear_backward on dpre (pre [N,OC] the linear's output). float and double write dpre [N,OC]
  // (the GEMMs' operand); 16-bit P rounds it straight into operand16 and leaves dpre alone (may be
  // null): the same results as gelu_backward followed by linear_backward.
  virtual void gelu_linear_backward(Acc* dinp, Acc* dweight, Acc* dbias, Acc* dpre, const Acc* dgelu, const P* pre,
                                    const P* inp, const P* weight, int N, int C, int OC, kernels::WeightLayout layout,
                                    P* operand16, kernels::WeightGrad dw_mode) const = 0;
  // out[N,I] = silu(gate)·up of inp [N, 2I] (gate | up); dinp [N, 2I] written.
  virtual void swiglu_forward(P* out, const P* inp, int N, int I) const = 0;
  virtual void swiglu_backward(Acc* dinp, const Acc* dout, const P* inp, int N, int I) const = 0;
  virtual void residual_forward(Acc* out, const Acc* a, const Acc* b, size_t n) const = 0;
  // The classifier's loss over N rows of V logits (kernels/cross_entropy.h), in the two halves the
  // model runs apart. The forward writes losses [N] and keeps in `logits` [N,V] and `row_stats` [2N]
  // what the backward needs: the CPU turns the logits into their probabilities in place; the GPU (its
  // fused classifier) keeps them and writes each row's max and 1/Σ, and its backward makes the
  // probabilities again instead of writing them and reading them back. The backward turns them into
  // dlogits = dloss·(probs − onehot(targets)) and runs linear_backward on those with the classifier's
  // input and weight (no bias; dinp written, dweight as dw_mode says); `logits` then holds nothing the
  // caller may read. The same results as kernels::softmax_crossentropy_forward and _backward, then
  // linear_backward.
  virtual void classifier_loss_forward(Acc* losses, Acc* logits, Acc* row_stats, const int32_t* targets, int N,
                                       int V) const = 0;
  virtual void classifier_loss_backward(Acc* dinp, Acc* dweight, Acc* logits, const Acc* row_stats,
                                        const int32_t* targets, Acc dloss, const P* inp, const P* weight, int N, int C,
                                        int V, kernels::WeightLayout layout, P* operand16,
                                        kernels::WeightGrad dw_mode) const = 0;
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
  // Whether the models' kernels compute in `compute` here: whether the device has that table
  // (kernels<P>() with P of that dtype returns it rather than throwing).
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
  // out[i] = sum_squares of spans[i], each the bits sum_squares gives it; on a GPU with one wait for
  // all of them instead of one a span (the gradient norm's per-unit sums, every step).
  struct SquaresSpan {
    const void* x;
    DType type;
    size_t n;
  };
  virtual void sum_squares_each(std::span<const SquaresSpan> spans, double* out);
  // ZeRO++'s int8 block quantization (core/quantize.h): n values of `type` into
  // quantized_int8_bytes(n) bytes, and back, both in this device's memory and issued in the compute
  // queue's order; the same bytes and values on every device.
  virtual void quantize_int8(const void* x, DType type, size_t n, void* out) = 0;
  virtual void dequantize_int8(const void* q, size_t n, void* x, DType type) = 0;
  // n fp32 values rounded to bf16 stochastically (core/stochastic_round.h): element e draws from
  // (stream, first + e). The same bits on every device.
  virtual void round_bf16_stochastic(const float* x, void* out, size_t n, uint64_t stream, uint64_t first) = 0;

  // ---- GEMM: C[M,N] (fp32) = alpha·op(A)·op(B) + beta·C, row-major with leading dimensions -------------
  // A and B in `dtype`: fp32 (C's own precision), or bf16/fp16 (fp32 accumulation).
  virtual void gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,
                    const void* B, int ldb, float beta, float* C, int ldc) = 0;

  // ---- the optimizer's update of n elements (optim/adamw.h, optim/sgd.h: the same math and bits) --------
  virtual void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                            int64_t t, bool decay, float grad_scale) = 0;
  virtual void sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,
                          bool decay, float grad_scale) = 0;
  // Muon's elementwise parts (optim/muon.h): the momentum and direction, and the weights' step by O.
  virtual void muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s) = 0;
  virtual void muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s) = 0;

  // ---- transfers between the device and host tiers ------------------------------------------------------
  // A second queue beside the compute (on a GPU: a copy stream and its DMA engine), in order within
  // itself: transfer() converts n elements from src to dst there, as convert() does, and returns at
  // once; record_transfer() is an event after every transfer issued so far. The caller leaves src and
  // dst alone until that event is done. Offloading moves gradients down and parameters up through it
  // while the update of other sub-groups runs (zero/shard_optimizer_offload.cpp).
  virtual void transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) = 0;
  virtual std::unique_ptr<Event> record_transfer() = 0;

  // ---- the models' kernels ---------------------------------------------------------------------------
  // This device's kernels computing in P, alive as long as the device. A type it does not support
  // (supports()) is a RuntimeFailure naming the device and the dtypes it has.
  template <class P>
  const ModelKernels<P>& kernels() const;

  // ---- ordering ----------------------------------------------------------------------------------------
  // An event after everything issued so far.
  virtual std::unique_ptr<Event> record() = 0;
  // Waits until everything issued so far has finished.
  virtual void synchronize() = 0;

 protected:
  // The tables, or null where the device has none (the default): a device answers which dtypes it
  // computes in by which tables it has, never by throwing from a getter.
  virtual const ModelKernels<float>* kernels_f32() const { return nullptr; }
  virtual const ModelKernels<double>* kernels_f64() const { return nullptr; }
  virtual const ModelKernels<bf16>* kernels_bf16() const { return nullptr; }
  virtual const ModelKernels<fp16>* kernels_fp16() const { return nullptr; }

 private:
  [[noreturn]] void no_kernels(DType compute) const;
};

template <class P>
const ModelKernels<P>& Device::kernels() const {
  const ModelKernels<P>* table = nullptr;
  if constexpr (std::is_same_v<P, float>) table = kernels_f32();
  else if constexpr (std::is_same_v<P, double>) table = kernels_f64();
  else if constexpr (std::is_same_v<P, bf16>) table = kernels_bf16();
  else table = kernels_fp16();
  if (table == nullptr) no_kernels(dtype_of<P>);
  return *table;
}

// The process's CPU device (cpu_device.h): where the model and the engine compute when they are given
// no device, as on every CPU run.
Device& default_device();

// The attention sizes of the kernels a run computing in `compute` uses on the CPU, or on a CUDA GPU
// (gpu: its flash attention, flash_attention_sizes), answered in every build without opening a device.
const AttentionSizes& attention_sizes(bool gpu, DType compute);
// A flash attention's (the CUDA device's): it saves its row log-sum-exp, fp32 [B,NH,T], and its
// backward's scratch is D = rowsum(dO∘O), fp32 [B,NH,T]; nothing T×T, whatever the compute type.
const AttentionSizes& flash_attention_sizes();

// The operations above as a device class declares them, each overridden (cpu_device.h,
// cuda_device.h).
#define ZDP_DEVICE_OPERATIONS                                                                                   \
  Buffer allocate(size_t bytes, MemCategory category) override;                                                \
  Buffer allocate_host(size_t bytes, MemCategory category) override;                                           \
  void copy(void* dst, const void* src, size_t bytes) override;                                                \
  void fill_zero(void* dst, size_t bytes) override;                                                            \
  void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) override;                 \
  void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) override;                \
  double sum_squares(const void* x, DType type, size_t n) override;                                            \
  void quantize_int8(const void* x, DType type, size_t n, void* out) override;                                 \
  void dequantize_int8(const void* q, size_t n, void* x, DType type) override;                                 \
  void round_bf16_stochastic(const float* x, void* out, size_t n, uint64_t stream, uint64_t first) override;   \
  void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,       \
                    int64_t t, bool decay, float grad_scale) override;                                         \
  void sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp, int64_t t,   \
                  bool decay, float grad_scale) override;                                                      \
  void muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s) override;      \
  void muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s) override;                  \
  void gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,   \
            const void* B, int ldb, float beta, float* C, int ldc) override;                                   \
  void transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) override;                \
  std::unique_ptr<Event> record_transfer() override;                                                           \
  std::unique_ptr<Event> record() override;                                                                    \
  void synchronize() override;

}  // namespace zerodp::device
