// The CUDA attention's entry points (cuda/attention.h): the shape check and the choice between the
// tensor-core and the FMA kernels (cuda/attention_choice.h), in a .cpp because the error messages use
// fmt, which nvcc cannot compile. The kernels are in attention_tc.cu and attention.cu.
#include "cuda/attention.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "cuda/attention_impl.h"
#include "cuda/attention_tc_tiling.h"
#include "cuda/attention_tiling.h"
#include "cuda/check.h"

namespace zerodp::cuda {

void check_attention_shape(const char* what, DType dtype, const AttentionDims& d) {
  ZDP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "{}: the CUDA attention computes in bf16 or fp16, not {}",
            what, dtype_name(dtype));
  ZDP_CHECK(d.B > 0 && d.T > 0 && d.heads > 0 && d.kv_heads > 0 && d.head_size > 0 && d.heads % d.kv_heads == 0,
            "{}: bad shape B={} T={} heads={} kv_heads={} head_size={} (kv_heads must divide heads)", what, d.B, d.T,
            d.heads, d.kv_heads, d.head_size);
  const int hs = d.head_size;
  ZDP_CHECK(attn::supported_head_size(hs), "{}: head size {} is not supported by the CUDA attention (32, 64 or 128)",
            what, hs);
  ZDP_CHECK(attn::grid_fits(d.B, d.T, d.heads, hs),
            "{}: B={} T={} NH={} exceeds the CUDA attention's grid (B·NH < 2^31, T ≤ {})", what, d.B, d.T, d.heads,
            attn::kMaxGridY * attn::min_int(attn::block_rows(hs), attn::block_cols(hs)));
  ZDP_CHECK(static_cast<int64_t>(d.B) * d.T * (static_cast<int64_t>(d.heads) + 2 * d.kv_heads) * hs <
                (int64_t{1} << 62),
            "{}: B={} T={} heads={} kv_heads={} head_size={} is too large", what, d.B, d.T, d.heads, d.kv_heads, hs);
}

void check_attention_shape(const char* what, DType dtype, int B, int T, int C, int NH) {
  ZDP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "{}: the CUDA attention computes in bf16 or fp16, not {}",
            what, dtype_name(dtype));
  ZDP_CHECK(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0,
            "{}: bad shape B={} T={} C={} NH={} (C must be a multiple of NH)", what, B, T, C, NH);
  const int hs = C / NH;
  ZDP_CHECK(attn::supported_head_size(hs),
            "{}: head size {} (C={} / NH={}) is not supported by the CUDA attention (32, 64 or 128)", what, hs, C,
            NH);
  check_attention_shape(what, dtype, AttentionDims{B, T, NH, NH, hs});
}

size_t attention_backward_scratch_bytes(const AttentionDims& d) {
  return static_cast<size_t>(d.B) * d.heads * d.T * sizeof(float);
}
size_t attention_backward_scratch_bytes(int B, int T, int NH) {
  return attention_backward_scratch_bytes(AttentionDims{B, T, NH, NH, 1});
}

namespace {

bool aligned(const void* p, size_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

AttentionRequest request_from_env() {
  const char* env = std::getenv("ZERODP_ATTENTION");
  AttentionRequest r = AttentionRequest::kAuto;
  ZDP_REQUIRE(parse_attention_request(env, &r), "environment variable ZERODP_ATTENTION='{}': expected auto, tc or fma",
              env != nullptr ? env : "");
  return r;
}

// What the tensor-core kernels need, on the current device.
TcCapability tc_capability(int hs, bool pointers_aligned) {
  int dev = 0, major = 0, optin = 0;
  ZDP_CUDA_CHECK(cudaGetDevice(&dev));
  ZDP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  ZDP_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  TcCapability c;
  c.head_size = hs;
  c.head_size_supported = attn_tc::tc_supported_head_size(hs);
  c.cc_major = major;
  c.smem_optin = static_cast<size_t>(optin);
  c.smem_needed = c.head_size_supported ? attn_tc::tc_max_smem_bytes(hs) : 0;
  c.pointers_aligned = pointers_aligned;
  return c;
}

AttentionKernel choose(const char* what, AttentionRequest request, int hs, bool pointers_aligned) {
  if (request == AttentionRequest::kFma) return AttentionKernel::kFma;  // no device query needed
  const AttentionChoice choice = choose_attention_kernel(request, tc_capability(hs, pointers_aligned));
  ZDP_REQUIRE(choice.error == nullptr,
              "{}: ZERODP_ATTENTION=tc asks for the tensor-core attention, which cannot run head size {} here: {}", what,
              hs, choice.error);
  return choice.kernel;
}

void require_tc(const char* what, int hs, bool pointers_aligned) {
  const char* why = tc_unsupported_reason(tc_capability(hs, pointers_aligned));
  ZDP_CHECK(why == nullptr, "{}: the tensor-core attention cannot run head size {} here: {}", what, hs, why);
}

void run_forward(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& d,
                 cudaStream_t stream) {
  if (kernel == AttentionKernel::kTensorCore)
    detail::tc_attention_forward(dtype, out, lse, qkv, d, stream);
  else
    detail::fma_attention_forward(dtype, out, lse, qkv, d, stream);
}

void run_backward(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout, const void* out,
                  const float* lse, const void* qkv, const AttentionDims& d, cudaStream_t stream) {
  if (kernel == AttentionKernel::kTensorCore)
    detail::tc_attention_backward(dtype, dqkv, scratch, dout, out, lse, qkv, d, stream);
  else
    detail::fma_attention_backward(dtype, dqkv, scratch, dout, out, lse, qkv, d, stream);
}

bool forward_aligned(const void* out, const void* qkv) { return aligned(out, 16) && aligned(qkv, 16); }
bool backward_aligned(const float* dqkv, const void* dout, const void* out, const void* qkv) {
  return aligned(dout, 16) && aligned(out, 16) && aligned(qkv, 16) && aligned(dqkv, 8);
}

// GPT-2's shape, checked with its own message (C a multiple of NH) before it becomes AttentionDims.
AttentionDims mha_dims(const char* what, DType dtype, int B, int T, int C, int NH) {
  check_attention_shape(what, dtype, B, T, C, NH);
  return AttentionDims{B, T, NH, NH, C / NH};
}

constexpr const char* kForward = "cuda attention_forward";
constexpr const char* kBackward = "cuda attention_backward";

}  // namespace

AttentionKernel attention_kernel_for(int C, int NH) {
  ZDP_CHECK(C > 0 && NH > 0 && C % NH == 0, "attention_kernel_for: bad shape C={} NH={}", C, NH);
  return choose("cuda attention", request_from_env(), C / NH, true);
}

void attention_forward_with(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv,
                            const AttentionDims& d, cudaStream_t stream) {
  check_attention_shape(kForward, dtype, d);
  if (kernel == AttentionKernel::kTensorCore) require_tc(kForward, d.head_size, forward_aligned(out, qkv));
  run_forward(kernel, dtype, out, lse, qkv, d, stream);
}
void attention_forward_with(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv, int B, int T,
                            int C, int NH, cudaStream_t stream) {
  attention_forward_with(kernel, dtype, out, lse, qkv, mha_dims(kForward, dtype, B, T, C, NH), stream);
}

void attention_backward_with(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout,
                             const void* out, const float* lse, const void* qkv, const AttentionDims& d,
                             cudaStream_t stream) {
  check_attention_shape(kBackward, dtype, d);
  if (kernel == AttentionKernel::kTensorCore)
    require_tc(kBackward, d.head_size, backward_aligned(dqkv, dout, out, qkv));
  run_backward(kernel, dtype, dqkv, scratch, dout, out, lse, qkv, d, stream);
}
void attention_backward_with(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout,
                             const void* out, const float* lse, const void* qkv, int B, int T, int C, int NH,
                             cudaStream_t stream) {
  attention_backward_with(kernel, dtype, dqkv, scratch, dout, out, lse, qkv, mha_dims(kBackward, dtype, B, T, C, NH),
                          stream);
}

void attention_forward(DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& d,
                       cudaStream_t stream) {
  check_attention_shape(kForward, dtype, d);
  const AttentionKernel k = choose(kForward, request_from_env(), d.head_size, forward_aligned(out, qkv));
  run_forward(k, dtype, out, lse, qkv, d, stream);
}
void attention_forward(DType dtype, void* out, float* lse, const void* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  attention_forward(dtype, out, lse, qkv, mha_dims(kForward, dtype, B, T, C, NH), stream);
}

void attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out, const float* lse,
                        const void* qkv, const AttentionDims& d, cudaStream_t stream) {
  check_attention_shape(kBackward, dtype, d);
  const AttentionKernel k = choose(kBackward, request_from_env(), d.head_size, backward_aligned(dqkv, dout, out, qkv));
  run_backward(k, dtype, dqkv, scratch, dout, out, lse, qkv, d, stream);
}
void attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out, const float* lse,
                        const void* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
  attention_backward(dtype, dqkv, scratch, dout, out, lse, qkv, mha_dims(kBackward, dtype, B, T, C, NH), stream);
}

}  // namespace zerodp::cuda
