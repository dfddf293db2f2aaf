#include "device/cuda_device.h"

#if ZERODP_WITH_CUDA

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/quantize.h"
#include "core/log.h"
#include "cuda/attention.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/device_memory.h"
#include "cuda/gemm.h"
#include "cuda/kernel_times.h"
#include "cuda/kernels.h"
#include "cuda/llama_kernels.h"
#include "device/cpu_device.h"
#include "kernels/matmul.h"

namespace zerodp::device {

namespace {

// The allocator's blocks as a Buffer's source. Out of GPU memory is the memory-limit error (exit 3),
// as an allocation over --memory-budget is.
class AllocatorSource final : public BufferSource {
 public:
  AllocatorSource(cuda::RawMemory& raw, const char* what) : allocator_(raw), what_(what) {}
  void* allocate(size_t bytes) override {
    try {
      return allocator_.allocate(bytes);
    } catch (const cuda::OutOfMemory& e) {
      throw BudgetError(fmt::format("{}: {}", what_, e.what()));
    }
  }
  void deallocate(void* p, size_t) noexcept override {
    try {
      allocator_.free(p);
    } catch (...) {
      // Only a pointer the allocator never gave can fail here: a bug that must not end in terminate().
    }
  }
  cuda::CachingAllocator& allocator() { return allocator_; }

 private:
  cuda::CachingAllocator allocator_;
  const char* what_;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(cudaStream_t stream) {
    ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    ZDP_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool done() const override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    ZDP_CUDA_CHECK(e);
    return true;
  }
  void wait() override { ZDP_CUDA_CHECK(cudaEventSynchronize(event_)); }

 private:
  cudaEvent_t event_ = nullptr;
};

bool is_host_pointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return true;  // memory CUDA does not know: the C library's
  }
  return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeUnregistered;
}

// $ZERODP_GPU_PROFILE=1: every kernel-table entry and device operation is timed on the GPU with a pair
// of events on the compute stream, and the times by entry (cuda/kernel_times.h says why zerodp times
// itself) are logged when the device goes. Off, an entry costs one branch. Only the outermost entry
// of a thread is timed (an entry calling another would count twice). The events come from a pool;
// finished ones are read every kDrainEvery entries, so that a long run holds a bounded number.
class KernelProfiler {
 public:
  struct Span {
    cudaEvent_t start = nullptr, stop = nullptr;
    const char* name = nullptr;
  };

  KernelProfiler() {
    const char* v = std::getenv("ZERODP_GPU_PROFILE");
    enabled_ = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }
  KernelProfiler(const KernelProfiler&) = delete;
  KernelProfiler& operator=(const KernelProfiler&) = delete;
  ~KernelProfiler() { release(); }

  bool enabled() const { return enabled_; }

  // Records the span's start on `stream`; false when this thread is already inside a timed entry.
  bool begin(cudaStream_t stream, Span& span) {
    if (depth()++ > 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    span.start = take_event();
    span.stop = take_event();
    ZDP_CUDA_CHECK(cudaEventRecord(span.start, stream));
    if (first_ == nullptr) {
      first_ = take_event();
      last_ = take_event();
      ZDP_CUDA_CHECK(cudaEventRecord(first_, stream));
    }
    return true;
  }
  // Ends a span begin() started (noexcept: it runs in a destructor, also while an error unwinds).
  void end(cudaStream_t stream, Span& span, const char* name) noexcept {
    --depth();
    std::lock_guard<std::mutex> lock(mu_);
    if (cudaEventRecord(span.stop, stream) != cudaSuccess || cudaEventRecord(last_, stream) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    span.name = name;
    pending_.push_back(span);
    if (pending_.size() >= kDrainEvery) drain_locked();
  }
  void leave() noexcept { --depth(); }

  // The table (empty when nothing was timed); reads every pending span first.
  std::string report() {
    std::lock_guard<std::mutex> lock(mu_);
    drain_locked();
    if (times_.empty()) return {};
    float span_ms = 0;
    if (first_ != nullptr && cudaEventElapsedTime(&span_ms, first_, last_) != cudaSuccess) {
      cudaGetLastError();
      span_ms = 0;
    }
    return times_.report(span_ms);
  }

  // Destroys every event (the device's GPU current).
  void release() noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Span& s : pending_) {
      cudaEventDestroy(s.start);
      cudaEventDestroy(s.stop);
    }
    pending_.clear();
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
    pool_.clear();
    if (first_ != nullptr) cudaEventDestroy(first_);
    if (last_ != nullptr) cudaEventDestroy(last_);
    first_ = last_ = nullptr;
    cudaGetLastError();
  }

 private:
  static constexpr size_t kDrainEvery = 4096;

  static int& depth() {
    thread_local int d = 0;
    return d;
  }
  cudaEvent_t take_event() {
    if (!pool_.empty()) {
      cudaEvent_t e = pool_.back();
      pool_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    ZDP_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  // Waits for the pending spans' last stop, adds each one's time and returns its events to the pool.
  void drain_locked() noexcept {
    if (pending_.empty()) return;
    if (cudaEventSynchronize(pending_.back().stop) != cudaSuccess) cudaGetLastError();
    for (const Span& s : pending_) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, s.start, s.stop) == cudaSuccess)
        times_.add(s.name, ms);
      else
        cudaGetLastError();
      pool_.push_back(s.start);
      pool_.push_back(s.stop);
    }
    pending_.clear();
  }

  bool enabled_ = false;
  std::mutex mu_;
  std::vector<cudaEvent_t> pool_;
  std::vector<Span> pending_;
  cudaEvent_t first_ = nullptr, last_ = nullptr;  // the first entry's start, the latest one's end
  cuda::KernelTimes times_;
};

// What a CUDA device's GPT-2 kernels issue their work with: the GPU, its compute stream, its GEMM
// handle, the allocator their working memory comes from, and the profiler. The device's own
// (CudaDevice::Impl).
struct KernelContext {
  int ordinal = 0;
  cudaStream_t stream = nullptr;
  cuda::GemmContext* gemm = nullptr;
  BufferSource* memory = nullptr;
  KernelProfiler* profiler = nullptr;
};

// An entry of the device (a kernel-table entry, a device operation): its GPU current for the call,
// and the call timed when profiling. Made as `const auto on = enter(__func__)`: the name is the entry's.
class Entry {
 public:
  Entry(const KernelContext& c, const char* name)
      : guard_(c.ordinal),
        profiler_(c.profiler != nullptr && c.profiler->enabled() ? c.profiler : nullptr),
        stream_(c.stream),
        name_(name) {
    if (profiler_ != nullptr) timed_ = profiler_->begin(stream_, span_);
  }
  ~Entry() {
    if (profiler_ == nullptr) return;
    if (timed_)
      profiler_->end(stream_, span_, name_);
    else
      profiler_->leave();
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

 private:
  cuda::DeviceGuard guard_;
  KernelProfiler* profiler_;
  cudaStream_t stream_;
  const char* name_;
  KernelProfiler::Span span_;
  bool timed_ = false;
};

// What both kernel tables share: the context their work is issued with, the 16-bit type, the scratch
// of a call, and the cuBLASLt GEMM on P operands. Made without a context (the sizing tables), only a
// table's sizing entries may be called: ctx() refuses the others.
template <class P>
class CudaTable {
 protected:
  static constexpr DType kType = std::is_same_v<P, bf16> ? DType::kBF16 : DType::kF16;

  CudaTable(const KernelContext* context, const char* family) : context_(context), family_(family) {}

  const KernelContext& ctx() const {
    ZDP_CHECK(context_ != nullptr, "a {} kernel of the CUDA table for sizing was called: kernels run through a "
                                   "CudaDevice's table", family_);
    return *context_;
  }
  // The entry `name` begins: its GPU current, timed when profiling (Entry).
  Entry enter(const char* name) const { return Entry(ctx(), name); }

  // A kernel's working memory (column-sum partials), in the ledger under act like the CPU's activations'
  // scratch. Freed when the call returns, with the kernel maybe still running: the next user of the
  // block is issued on the same stream, after it (cuda/caching_allocator.h).
  Buffer scratch(size_t bytes) const { return Buffer(bytes, MemCategory::kAct, MemTier::kDevice, *ctx().memory); }

  // db[OC] += the column sums of dout [N,OC] (fp32), over partials in the call's scratch.
  void bias_grad(float* db, const float* dout, int N, int OC) const {
    Buffer partials = scratch(cuda::bias_backward_scratch_floats(N, OC) * sizeof(float));
    cuda::bias_backward(db, dout, N, OC, partials.as<float>(), ctx().stream);
  }

  // operand16 = round(src [N,n]) with rows operand16_row(n) apart (16-byte rows whatever n: an odd
  // vocabulary's LM head); returns that row stride, the GEMMs' leading dimension.
  int round_operand(P* operand16, const float* src, int N, int n) const {
    const int ld = static_cast<int>(operand16_row(static_cast<size_t>(n)));
    cuda::convert_rows(src, n, operand16, kType, ld, N, n, ctx().stream);
    return ld;
  }

  // A dense layer with W stored [C, OC] (kInOut, GPT-2's Conv1D) or [OC, C] (kOutIn, PyTorch's Linear):
  // out[N,OC] = inp[N,C]·W + bias, into P (the bias in the GEMM's epilogue, rounded once with it) or fp32
  // (the bias added after the GEMM: the CPU's addition).
  void dense_forward(void* out, DType out_type, const P* inp, const P* w, const P* b, int N, int C, int OC,
                     kernels::WeightLayout layout) const {
    const bool t = layout == kernels::WeightLayout::kOutIn;
    if (out_type == kType) {
      gemm(false, t, N, OC, C, inp, C, w, t ? C : OC, out, kType, OC, 0.0f,
           b != nullptr ? cuda::GemmEpilogue::kBias : cuda::GemmEpilogue::kNone, b);
      return;
    }
    gemm(false, t, N, OC, C, inp, C, w, t ? C : OC, out, DType::kF32, OC, 0.0f);
    if (b != nullptr) cuda::bias_add_rows(static_cast<float*>(out), b, N, OC, ctx().stream);
  }
  // dout16 = round(dout) (rows operand16_row(OC) apart), dbias += Σ_rows dout (fp32, column partials),
  // then the weight's GEMMs (dense_weight_grads).
  void dense_backward(float* dinp, float* dw, float* db, const float* dout, const P* inp, const P* w, int N, int C,
                      int OC, P* operand16, kernels::WeightLayout layout) const {
    const int ld = round_operand(operand16, dout, N, OC);
    if (db != nullptr) bias_grad(db, dout, N, OC);
    dense_weight_grads(dinp, dw, operand16, ld, inp, w, N, C, OC, layout);
  }
  // dinp = dout16·Wᵀ in the layer's terms (written; skipped when null) and dW += the weight's gradient,
  // over dout16 = round(dout) already in `dout16` (rows ld apart).
  void dense_weight_grads(float* dinp, float* dw, const P* dout16, int ld, const P* inp, const P* w, int N, int C,
                          int OC, kernels::WeightLayout layout) const {
    if (layout == kernels::WeightLayout::kInOut) {  // dW [C,OC] += inpᵀ·dout16
      if (dinp != nullptr) gemm(false, true, N, C, OC, dout16, ld, w, OC, dinp, DType::kF32, C, 0.0f);
      gemm(true, false, C, OC, N, inp, C, dout16, ld, dw, DType::kF32, OC, 1.0f);
    } else {  // dW [OC,C] += dout16ᵀ·inp
      if (dinp != nullptr) gemm(false, false, N, C, OC, dout16, ld, w, C, dinp, DType::kF32, C, 0.0f);
      gemm(true, false, OC, C, N, dout16, ld, inp, C, dw, DType::kF32, C, 1.0f);
    }
  }

  // C[M,N] (c_type) = op(A)·op(B) (+ beta·C), A and B in P, row-major.
  void gemm(bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb, void* C,
            DType c_type, int ldc, float beta, cuda::GemmEpilogue epilogue = cuda::GemmEpilogue::kNone,
            const void* bias = nullptr) const {
    cuda::GemmArgs g = cuda::gemm_args(kType, c_type, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, 1.0f, beta);
    g.epilogue = epilogue;
    g.bias = const_cast<void*>(bias);
    ctx().gemm->gemm(g);
  }

 private:
  const KernelContext* context_;
  const char* family_;
};

// GPT-2's kernels for 16-bit compute type P on the GPU of `context`, with the CPU's semantics
// (device/device.h, kernels/*.h): the same outputs written or accumulated, GEMMs through cuBLASLt on P
// operands with fp32 accumulation, statistics in fp32. Each entry makes its GPU the thread's current
// device for the call, so kernels of two devices may be called in turn from one thread. Two differences
// of layout, invisible to the model:
//   - attention saves its row log-sum-exp [B,NH,T] in `att` (where the CPU keeps the probabilities:
//     attention_saved_bytes says how much), and the backward reads it with the forward's output;
//   - linear_forward into the fp32 stream adds the bias after the GEMM (cuda/kernels_bias.cu), and the
//     fp32 bias gradients are deterministic column sums (LayerNorm's partials) rather than cuBLASLt's
//     epilogue.
// Made without a context (cuda_gpt2_kernels), only the sizing entries may be called.
template <class P>
class CudaGpt2 final : public Gpt2Kernels<P>, private CudaTable<P> {
  using Base = CudaTable<P>;
  using Base::ctx;
  using Base::gemm;
  using Base::kType;
  using Base::scratch;

 public:
  explicit CudaGpt2(const KernelContext* context) : Base(context, "GPT-2") {}

  void encoder_forward(float* out, const int32_t* inp, const P* wte, const P* wpe, int B, int T,
                       int C) const override {
    const auto on = this->enter(__func__);
    cuda::encoder_forward(out, inp, wte, wpe, B, T, C, ctx().stream);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T,
                        int C) const override {
    const auto on = this->enter(__func__);
    cuda::encoder_backward(dwte, dwpe, dout, inp, B, T, C, ctx().stream);
  }
  void layernorm_forward(P* out, float* mean, float* rstd, const float* inp, const P* w, const P* b, int N,
                         int C) const override {
    const auto on = this->enter(__func__);
    cuda::layernorm_forward(out, mean, rstd, inp, w, b, N, C, ctx().stream);
  }
  void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const P* w,
                          const float* mean, const float* rstd, int N, int C) const override {
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::layernorm_backward_scratch_floats(N, C) * sizeof(float));
    cuda::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, partials.as<float>(), ctx().stream);
  }
  // out[N,OC] = inp[N,C]·W[C,OC] + bias (CudaTable::dense_forward, W in GPT-2's [in, out]).
  void linear_forward(P* out, const P* inp, const P* w, const P* b, int N, int C, int OC, float*) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(out, kType, inp, w, b, N, C, OC, kInOut);
  }
  void linear_forward_acc(float* out, const P* inp, const P* w, const P* b, int N, int C, int OC,
                          float*) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(out, DType::kF32, inp, w, b, N, C, OC, kInOut);
  }
  void linear_backward(float* dinp, float* dw, float* db, const float* dout, const P* inp, const P* w, int N, int C,
                       int OC, P* operand16) const override {
    const auto on = this->enter(__func__);
    this->dense_backward(dinp, dw, db, dout, inp, w, N, C, OC, operand16, kInOut);
  }
  // The tied LM head is a dense layer with wte [V, C] as PyTorch's [out, in] weight, without a bias:
  // logits[N,V] = inp·wteᵀ; dinp = dlogits16·wte, dwte += dlogits16ᵀ·inp.
  void head_forward(float* logits, const P* inp, const P* wte, int N, int C, int V) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(logits, DType::kF32, inp, wte, nullptr, N, C, V, kernels::WeightLayout::kOutIn);
  }
  void head_backward(float* dinp, float* dwte, const float* dlogits, const P* inp, const P* wte, int N, int C, int V,
                     P* operand16) const override {
    const auto on = this->enter(__func__);
    this->dense_backward(dinp, dwte, nullptr, dlogits, inp, wte, N, C, V, operand16, kernels::WeightLayout::kOutIn);
  }

  // Flash attention: the forward saves its row log-sum-exp L [B,NH,T] (fp32) in the block's `att`
  // and the output in `out` (the model keeps it: c_proj's input); the backward reads both, so
  // nothing T×T is kept and nothing is recomputed. Scratch: the backward's D [B,NH,T].
  size_t attention_scratch_bytes(int B, int T, int, int NH) const override {
    return cuda::attention_backward_scratch_bytes(B, T, NH);
  }
  size_t attention_saved_bytes(int B, int T, int NH) const override {
    return static_cast<size_t>(B) * NH * T * sizeof(float);
  }
  void attention_forward(P* out, P* att, const P* qkv, void*, int B, int T, int C, int NH) const override {
    const auto on = this->enter(__func__);
    cuda::attention_forward(kType, out, reinterpret_cast<float*>(att), qkv, B, T, C, NH, ctx().stream);
  }
  void attention_backward(float* dqkv, void* scratch, const float* dout, P* operand16, const P* qkv, const P* out,
                          const P* att, int B, int T, int C, int NH) const override {
    const auto on = this->enter(__func__);
    cuda::convert(dout, DType::kF32, operand16, kType, static_cast<size_t>(B) * T * C, ctx().stream);
    cuda::attention_backward(kType, dqkv, scratch, operand16, out, reinterpret_cast<const float*>(att), qkv, B, T, C,
                             NH, ctx().stream);
  }
  void gelu_forward(P* out, const P* inp, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::gelu_forward(out, inp, n, ctx().stream);
  }
  void gelu_backward(float* dinp, const P* inp, const float* dout, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::gelu_backward(dinp, inp, dout, n, ctx().stream);
  }
  // dpre16 = round(gelu'(pre)·dgelu) into operand16 with the bias gradient of the unrounded values, then
  // the linear layer's GEMMs on it (dpre is not written: the 16-bit path leaves it alone, as the CPU's).
  void gelu_linear_backward(float* dinp, float* dw, float* db, float*, const float* dgelu, const P* pre,
                            const P* inp, const P* w, int N, int C, int OC, P* operand16) const override {
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::gelu_bias_backward_scratch_floats(N, OC) * sizeof(float));
    cuda::gelu_bias_backward(operand16, db, pre, dgelu, N, OC, partials.as<float>(), ctx().stream);
    this->dense_weight_grads(dinp, dw, operand16, OC, inp, w, N, C, OC, kInOut);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::residual_forward(out, a, b, n, ctx().stream);
  }
  void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets, int N,
                                    int V) const override {
    const auto on = this->enter(__func__);
    cuda::softmax_crossentropy_forward(losses, probs, logits, targets, N, V, ctx().stream);
  }
  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int N,
                                     int V) const override {
    const auto on = this->enter(__func__);
    cuda::softmax_crossentropy_backward(dlogits, probs, targets, dloss, N, V, ctx().stream);
  }

 private:
  static constexpr kernels::WeightLayout kInOut = kernels::WeightLayout::kInOut;
};

// The grouped-query shape as the CUDA attention takes it.
cuda::AttentionDims attention_dims(const kernels::AttentionShape& s) {
  return cuda::AttentionDims{s.B, s.T, s.heads, s.kv_heads, s.head_size};
}

// The Llama family's kernels for 16-bit compute type P on the GPU of `context`, with CpuLlama's
// semantics (device/device.h, kernels/{rmsnorm,rope,swiglu,encoder,matmul,attention}.h): the same
// outputs written or accumulated, statistics in fp32, 16-bit values computed in fp32 and rounded once.
// As CudaGpt2:
//   - dense layers are cuBLASLt GEMMs on P operands with fp32 accumulation, here with PyTorch's [out, in]
//     weights (W read transposed); a 16-bit output gets its bias in the GEMM's epilogue (rounded once
//     with it), an fp32 one after the GEMM (cuda/kernels_bias.cu: the CPU's addition); the fp32 bias
//     gradient is a deterministic column sum (LayerNorm's partials);
//   - the attention (cuda/attention.h, grouped-query heads) saves its row log-sum-exp [B,NH,T] fp32 in
//     `att` (attention_saved_bytes), and its backward reads it with the forward's output;
//   - the embedding's gradient is summed in row order, bitwise the CPU's; RMSNorm's weight gradient is
//     LayerNorm's deterministic column sum.
// Made without a context (cuda_llama_kernels), only the sizing entries may be called.
template <class P>
class CudaLlama final : public LlamaKernels<P>, private CudaTable<P> {
  using Base = CudaTable<P>;
  using Base::ctx;
  using Base::gemm;
  using Base::kType;
  using Base::scratch;

 public:
  explicit CudaLlama(const KernelContext* context) : Base(context, "Llama") {}

  void embedding_forward(float* out, const int32_t* inp, const P* table, int N, int C) const override {
    const auto on = this->enter(__func__);
    cuda::embedding_forward(out, inp, table, N, C, ctx().stream);
  }
  void embedding_backward(float* dtable, const float* dout, const int32_t* inp, int N, int C) const override {
    const auto on = this->enter(__func__);
    cuda::embedding_backward(dtable, dout, inp, N, C, ctx().stream);
  }
  void rmsnorm_forward(P* out, float* rstd, const float* inp, const P* w, int N, int C, double eps) const override {
    ZDP_CHECK(N > 0 && C > 0 && eps >= 0, "rmsnorm_forward: bad shape N={} C={} or eps {}", N, C, eps);
    const auto on = this->enter(__func__);
    cuda::rmsnorm_forward(out, rstd, inp, w, N, C, static_cast<float>(eps), ctx().stream);
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const P* w, const float* rstd,
                        int N, int C) const override {
    ZDP_CHECK(N > 0 && C > 0, "rmsnorm_backward: bad shape N={} C={}", N, C);
    const auto on = this->enter(__func__);
    Buffer partials = scratch(cuda::rmsnorm_backward_scratch_floats(N, C) * sizeof(float));
    cuda::rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, partials.as<float>(), ctx().stream);
  }
  // out[N,OC] = inp[N,C]·Wᵀ + bias with W [OC,C] (CudaTable::dense_forward, PyTorch's [out, in]).
  void linear_forward(P* out, const P* inp, const P* w, const P* b, int N, int C, int OC, float*) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(out, kType, inp, w, b, N, C, OC, kernels::WeightLayout::kOutIn);
  }
  void linear_forward_acc(float* out, const P* inp, const P* w, const P* b, int N, int C, int OC,
                          float*) const override {
    const auto on = this->enter(__func__);
    this->dense_forward(out, DType::kF32, inp, w, b, N, C, OC, kernels::WeightLayout::kOutIn);
  }
  void linear_backward(float* dinp, float* dw, float* db, const float* dout, const P* inp, const P* w, int N, int C,
                       int OC, P* operand16) const override {
    const auto on = this->enter(__func__);
    this->dense_backward(dinp, dw, db, dout, inp, w, N, C, OC, operand16, kernels::WeightLayout::kOutIn);
  }
  void rope_forward(P* x, const float* cos, const float* sin, int N, int T, int heads, int D,
                    int64_t stride) const override {
    check_rope(N, T, heads, D, stride);
    const auto on = this->enter(__func__);
    cuda::rope_forward(x, cos, sin, N, T, heads, D, stride, ctx().stream);
  }
  void rope_backward(float* dx, const float* cos, const float* sin, int N, int T, int heads, int D,
                     int64_t stride) const override {
    check_rope(N, T, heads, D, stride);
    const auto on = this->enter(__func__);
    cuda::rope_backward(dx, cos, sin, N, T, heads, D, stride, ctx().stream);
  }
  // Flash attention with grouped-query heads, as CudaGpt2's: `att` keeps L [B,NH,T] fp32; the scratch is
  // the backward's D [B,NH,T].
  size_t attention_scratch_bytes(const kernels::AttentionShape& shape) const override {
    return cuda::attention_backward_scratch_bytes(attention_dims(shape));
  }
  size_t attention_saved_bytes(const kernels::AttentionShape& shape) const override {
    return static_cast<size_t>(shape.B) * shape.heads * shape.T * sizeof(float);
  }
  void attention_forward(P* out, P* att, const P* qkv, void*, const kernels::AttentionShape& shape) const override {
    const auto on = this->enter(__func__);
    cuda::attention_forward(kType, out, reinterpret_cast<float*>(att), qkv, attention_dims(shape), ctx().stream);
  }
  void attention_backward(float* dqkv, void* scratch, const float* dout, P* operand16, const P* qkv, const P* out,
                          const P* att, const kernels::AttentionShape& shape) const override {
    const auto on = this->enter(__func__);
    const cuda::AttentionDims dims = attention_dims(shape);
    cuda::check_attention_shape("cuda attention_backward", kType, dims);  // before dout is rounded
    const size_t n = static_cast<size_t>(dims.B) * dims.T * dims.heads * dims.head_size;
    cuda::convert(dout, DType::kF32, operand16, kType, n, ctx().stream);
    cuda::attention_backward(kType, dqkv, scratch, operand16, out, reinterpret_cast<const float*>(att), qkv, dims,
                             ctx().stream);
  }
  void swiglu_forward(P* out, const P* inp, int N, int I) const override {
    const auto on = this->enter(__func__);
    cuda::swiglu_forward(out, inp, N, I, ctx().stream);
  }
  void swiglu_backward(float* dinp, const float* dout, const P* inp, int N, int I) const override {
    const auto on = this->enter(__func__);
    cuda::swiglu_backward(dinp, dout, inp, N, I, ctx().stream);
  }
  void residual_forward(float* out, const float* a, const float* b, size_t n) const override {
    const auto on = this->enter(__func__);
    cuda::residual_forward(out, a, b, n, ctx().stream);
  }
  void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets, int N,
                                    int V) const override {
    const auto on = this->enter(__func__);
    cuda::softmax_crossentropy_forward(losses, probs, logits, targets, N, V, ctx().stream);
  }
  void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int N,
                                     int V) const override {
    const auto on = this->enter(__func__);
    cuda::softmax_crossentropy_backward(dlogits, probs, targets, dloss, N, V, ctx().stream);
  }

 private:
  // kernels/rope.cpp's check: the GPU cannot refuse a shape once launched.
  static void check_rope(int N, int T, int heads, int D, int64_t stride) {
    ZDP_CHECK(N > 0 && T > 0 && heads > 0 && D > 0 && D % 2 == 0 && stride >= int64_t{heads} * D,
              "rope: bad shape N={} T={} heads={} D={} stride={}", N, T, heads, D, stride);
  }
};

}  // namespace

struct CudaDevice::Impl {
  int ordinal;
  cudaStream_t compute = nullptr;
  cudaStream_t copies = nullptr;
  cuda::CudaDeviceMemory device_raw;
  cuda::PinnedHostMemory host_raw;
  AllocatorSource device_memory{device_raw, "out of GPU memory"};
  AllocatorSource host_memory{host_raw, "out of page-locked host memory"};
  Buffer gemm_workspace;  // cuBLASLt's, counted in the ledger (act: the GEMMs' working memory)
  std::unique_ptr<cuda::GemmContext> gemm;
  double* sum_result = nullptr;  // page-locked: sum_squares' answer lands here
  CpuDevice host;  // computes on the page-locked host buffers (offload)
  KernelProfiler profiler;  // before the context that points at it
  KernelContext kernel_context;
  CudaGpt2<bf16> kernels_bf16{&kernel_context};
  CudaGpt2<fp16> kernels_fp16{&kernel_context};
  CudaLlama<bf16> llama_kernels_bf16{&kernel_context};
  CudaLlama<fp16> llama_kernels_fp16{&kernel_context};

  explicit Impl(int n) : ordinal(n), device_raw(n) {
    ZDP_CUDA_CHECK(cudaSetDevice(n));
    try {  // a constructor that throws runs no destructor: what is made so far is released here
      ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
      ZDP_CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
      ZDP_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&sum_result), sizeof(double)));
      gemm_workspace = Buffer(cuda::GemmContext::kWorkspaceBytes, MemCategory::kAct, MemTier::kDevice, device_memory);
      gemm = std::make_unique<cuda::GemmContext>(compute, gemm_workspace.data());
    } catch (...) {
      release();
      throw;
    }
    kernel_context = {ordinal, compute, gemm.get(), &device_memory, &profiler};
  }
  ~Impl() { release(); }
  // Whatever exists of the streams, the GEMM context and its workspace, and the sum's landing place.
  void release() noexcept {
    // The streams are this GPU's: it is current while they go, and the caller's device after.
    int previous = -1;
    const bool switched =
        cudaGetDevice(&previous) == cudaSuccess && previous != ordinal && cudaSetDevice(ordinal) == cudaSuccess;
    if (profiler.enabled()) {
      try {
        const std::string table = profiler.report();
        if (!table.empty()) log::info("cuda:{} {}", ordinal, table);
      } catch (...) {
        // Nothing to report from a device going away with an error.
      }
    }
    profiler.release();
    gemm.reset();
    gemm_workspace.release();
    if (compute != nullptr) cudaStreamSynchronize(compute);
    if (copies != nullptr) cudaStreamSynchronize(copies);
    if (sum_result != nullptr) cudaFreeHost(sum_result);
    if (copies != nullptr) cudaStreamDestroy(copies);
    if (compute != nullptr) cudaStreamDestroy(compute);
    sum_result = nullptr;
    copies = compute = nullptr;
    if (switched) cudaSetDevice(previous);
    cudaGetLastError();  // nothing here can be reported: clear what failed for the next caller
  }
};

CudaDevice::CudaDevice(int ordinal) : impl_(std::make_unique<Impl>(ordinal)) {}
CudaDevice::~CudaDevice() = default;

std::string CudaDevice::name() const { return fmt::format("cuda:{}", impl_->ordinal); }
int CudaDevice::ordinal() const { return impl_->ordinal; }
void* CudaDevice::compute_stream() const { return impl_->compute; }
size_t CudaDevice::reserved_bytes() const { return impl_->device_memory.allocator().reserved(); }
size_t CudaDevice::reserved_host_bytes() const { return impl_->host_memory.allocator().reserved(); }

std::string CudaDevice::kernel_time_report() {
  if (!impl_->profiler.enabled()) return {};
  const cuda::DeviceGuard on(impl_->ordinal);
  return impl_->profiler.report();
}

Device& CudaDevice::host() { return impl_->host; }

Buffer CudaDevice::allocate(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kDevice, impl_->device_memory);
}

Buffer CudaDevice::allocate_host(size_t bytes, MemCategory category) {
  return Buffer(bytes, category, MemTier::kHost, impl_->host_memory);
}

void CudaDevice::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Entry on(impl_->kernel_context, "copy");
  ZDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, impl_->compute));
  // The CPU device's callers read a host destination as soon as copy returns.
  if (is_host_pointer(dst)) ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
}

void CudaDevice::fill_zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  const Entry on(impl_->kernel_context, "fill_zero");
  ZDP_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, impl_->compute));
}

void CudaDevice::convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  const Entry on(impl_->kernel_context, "convert");
  cuda::convert(src, src_type, dst, dst_type, n, impl_->compute);
}

void CudaDevice::add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  const Entry on(impl_->kernel_context, "add_into");
  cuda::add_into(dst, dst_type, src, src_type, n, impl_->compute);
}

double CudaDevice::sum_squares(const void* x, DType type, size_t n) {
  if (n == 0) return 0.0;
  const Entry on(impl_->kernel_context, "sum_squares");
  Buffer scratch = allocate(cuda::sum_squares_scratch_doubles(n) * sizeof(double), MemCategory::kComm);
  cuda::sum_squares(impl_->sum_result, x, type, n, scratch.as<double>(), impl_->compute);
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));  // the answer is the host's now
  return *impl_->sum_result;
}

void CudaDevice::quantize_int8(const void* x, DType type, size_t n, void* out) {
  const Entry on(impl_->kernel_context, "quantize_int8");
  cuda::quantize_int8(x, type, n, out, impl_->compute);
}

void CudaDevice::dequantize_int8(const void* qbytes, size_t n, void* x, DType type) {
  const Entry on(impl_->kernel_context, "dequantize_int8");
  cuda::dequantize_int8(qbytes, n, x, type, impl_->compute);
}

void CudaDevice::adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp,
                              int64_t t, bool decay, float grad_scale) {
  const Entry on(impl_->kernel_context, "adamw_update");
  cuda::adamw_update(p, g, m, v, n, hp, t, decay, grad_scale, impl_->compute);
}

void CudaDevice::sgd_update(float* p, const float* g, float* momentum, size_t n, const optim::SGDParams& hp,
                            int64_t t, bool decay, float grad_scale) {
  ZDP_CHECK(momentum != nullptr || hp.momentum == 0.0 || n == 0, "SGD with momentum needs a buffer");
  const Entry on(impl_->kernel_context, "sgd_update");
  cuda::sgd_update(p, g, momentum, n, hp, t, decay, grad_scale, impl_->compute);
}

void CudaDevice::gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                      int lda, const void* B, int ldb, float beta, float* C, int ldc) {
  const Entry on(impl_->kernel_context, "gemm");
  impl_->gemm->gemm(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void CudaDevice::transfer(const void* src, DType src_type, void* dst, DType dst_type, size_t n) {
  if (n == 0) return;
  const cuda::DeviceGuard on(impl_->ordinal);
  // After the compute issued so far (which may still be writing src), on the copy stream.
  cudaEvent_t ready = nullptr;
  ZDP_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  ZDP_CUDA_CHECK(cudaEventRecord(ready, impl_->compute));
  ZDP_CUDA_CHECK(cudaStreamWaitEvent(impl_->copies, ready, 0));
  ZDP_CUDA_CHECK(cudaEventDestroy(ready));  // destroyed once the wait it was recorded for has run
  if (src_type == dst_type)
    ZDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * dtype_size(src_type), cudaMemcpyDefault, impl_->copies));
  else
    // Page-locked host memory is addressable from the GPU: the conversion reads or writes it directly.
    cuda::convert(src, src_type, dst, dst_type, n, impl_->copies);
}

std::unique_ptr<Event> CudaDevice::record_transfer() {
  const cuda::DeviceGuard on(impl_->ordinal);
  return std::make_unique<CudaEvent>(impl_->copies);
}

std::unique_ptr<Event> CudaDevice::record() {
  const cuda::DeviceGuard on(impl_->ordinal);
  return std::make_unique<CudaEvent>(impl_->compute);
}

void CudaDevice::synchronize() {
  const cuda::DeviceGuard on(impl_->ordinal);
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->compute));
  ZDP_CUDA_CHECK(cudaStreamSynchronize(impl_->copies));
}

// No fp32 or fp64 tables: the attention kernels are 16-bit only (cuda_device_supports).
const Gpt2Kernels<bf16>* CudaDevice::gpt2_bf16() const { return &impl_->kernels_bf16; }
const Gpt2Kernels<fp16>* CudaDevice::gpt2_fp16() const { return &impl_->kernels_fp16; }

const LlamaKernels<bf16>* CudaDevice::llama_bf16() const { return &impl_->llama_kernels_bf16; }
const LlamaKernels<fp16>* CudaDevice::llama_fp16() const { return &impl_->llama_kernels_fp16; }

template <class P>
const Gpt2Kernels<P>& cuda_gpt2_kernels() {
  static const CudaGpt2<P> sizing(nullptr);
  return sizing;
}
template const Gpt2Kernels<bf16>& cuda_gpt2_kernels<bf16>();
template const Gpt2Kernels<fp16>& cuda_gpt2_kernels<fp16>();

template <class P>
const LlamaKernels<P>& cuda_llama_kernels() {
  static const CudaLlama<P> sizing(nullptr);
  return sizing;
}
template const LlamaKernels<bf16>& cuda_llama_kernels<bf16>();
template const LlamaKernels<fp16>& cuda_llama_kernels<fp16>();

}  // namespace zerodp::device

#endif  // ZERODP_WITH_CUDA
