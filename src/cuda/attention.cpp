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

void check_attention_shape(const char* what, DType dtype, int B, int T, int C, int NH) {
  ZDP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "{}: the CUDA attention computes in bf16 or fp16, not {}",
            what, dtype_name(dtype));
  ZDP_CHECK(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0,
            "{}: bad shape B={} T={} C={} NH={} (C must be a multiple of NH)", what, B, T, C, NH);
  const int hs = C / NH;
  ZDP_CHECK(attn::supported_head_size(hs),
            "{}: head size {} (C={} / NH={}) is not supported by the CUDA attention (32, 64 or 128)", what, hs, C,
            NH);
  ZDP_CHECK(attn::grid_fits(B, T, NH, hs), "{}: B={} T={} NH={} exceeds the CUDA attention's grid (B·NH < 2^31, T ≤ {})",
            what, B, T, NH, attn::kMaxGridY * attn::min_int(attn::block_rows(hs), attn::block_cols(hs)));
  ZDP_CHECK(static_cast<int64_t>(B) * T * 3 * C < (int64_t{1} << 62), "{}: B={} T={} C={} is too large", what, B,
            T, C);
}

size_t attention_backward_scratch_bytes(int B, int T, int NH) {
  return static_cast<size_t>(B) * NH * T * sizeof(float);
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

void run_forward(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv, int B, int T, int C, int NH,
                 cudaStream_t stream) {
  if (kernel == AttentionKernel::kTensorCore)
    detail::tc_attention_forward(dtype, out, lse, qkv, B, T, C, NH, stream);
  else
    detail::fma_attention_forward(dtype, out, lse, qkv, B, T, C, NH, stream);
}

void run_backward(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout, const void* out,
                  const float* lse, const void* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
  if (kernel == AttentionKernel::kTensorCore)
    detail::tc_attention_backward(dtype, dqkv, scratch, dout, out, lse, qkv, B, T, C, NH, stream);
  else
    detail::fma_attention_backward(dtype, dqkv, scratch, dout, out, lse, qkv, B, T, C, NH, stream);
}

bool forward_aligned(const void* out, const void* qkv) { return aligned(out, 16) && aligned(qkv, 16); }
bool backward_aligned(const float* dqkv, const void* dout, const void* out, const void* qkv) {
  return aligned(dout, 16) && aligned(out, 16) && aligned(qkv, 16) && aligned(dqkv, 8);
}

}  // namespace

AttentionKernel attention_kernel_for(int C, int NH) {
  ZDP_CHECK(C > 0 && NH > 0 && C % NH == 0, "attention_kernel_for: bad shape C={} NH={}", C, NH);
  return choose("cuda attention", request_from_env(), C / NH, true);
}

void attention_forward_with(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv, int B, int T,
                            int C, int NH, cudaStream_t stream) {
  const char* what = "cuda attention_forward";
  check_attention_shape(what, dtype, B, T, C, NH);
  if (kernel == AttentionKernel::kTensorCore) require_tc(what, C / NH, forward_aligned(out, qkv));
  run_forward(kernel, dtype, out, lse, qkv, B, T, C, NH, stream);
}

void attention_backward_with(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout,
                             const void* out, const float* lse, const void* qkv, int B, int T, int C, int NH,
                             cudaStream_t stream) {
  const char* what = "cuda attention_backward";
  check_attention_shape(what, dtype, B, T, C, NH);
  if (kernel == AttentionKernel::kTensorCore) require_tc(what, C / NH, backward_aligned(dqkv, dout, out, qkv));
  run_backward(kernel, dtype, dqkv, scratch, dout, out, lse, qkv, B, T, C, NH, stream);
}

void attention_forward(DType dtype, void* out, float* lse, const void* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream) {
  const char* what = "cuda attention_forward";
  check_attention_shape(what, dtype, B, T, C, NH);
  const AttentionKernel k = choose(what, request_from_env(), C / NH, forward_aligned(out, qkv));
  run_forward(k, dtype, out, lse, qkv, B, T, C, NH, stream);
}

void attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out, const float* lse,
                        const void* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
  const char* what = "cuda attention_backward";
  check_attention_shape(what, dtype, B, T, C, NH);
  const AttentionKernel k = choose(what, request_from_env(), C / NH, backward_aligned(dqkv, dout, out, qkv));
  run_backward(k, dtype, dqkv, scratch, dout, out, lse, qkv, B, T, C, NH, stream);
}

}  // namespace zerodp::cuda
