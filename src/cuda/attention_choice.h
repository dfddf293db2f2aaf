// Which CUDA attention runs (cuda/attention.h): the tensor-core kernels (cuda/attention_tc.cu) or the
// fp32 FMA kernels (cuda/attention.cu). Pure host C++ (no CUDA headers), so that the CPU test suite
// covers the decision (tests/cuda/test_attention_tc_tiling.cpp).
//
// The environment variable ZERODP_ATTENTION asks:
//   unset, "" or "auto": tensor cores where they can run, the FMA kernels elsewhere;
//   "tc":                tensor cores, and an error (not a silent fallback) where they cannot run, so that
//                        a benchmark asking for them measures them;
//   "fma":               the FMA kernels.
// Tensor cores can run when the head size is one they are built for, the GPU is sm_80 or newer (bf16
// mma.sync, cp.async, ldmatrix), the kernels' shared memory fits the GPU's per-block opt-in limit, and
// the pointers are aligned for the 16-byte copies (16-bit tensors) and 8-byte adds (fp32 dqkv).
#pragma once

#include <cstddef>
#include <cstring>

namespace zerodp::cuda {

enum class AttentionRequest { kAuto, kTensorCore, kFma };
enum class AttentionKernel { kFma, kTensorCore };

inline const char* attention_kernel_name(AttentionKernel k) { return k == AttentionKernel::kTensorCore ? "tc" : "fma"; }

// nullptr or "" reads as auto. False for anything else than auto, tc or fma.
inline bool parse_attention_request(const char* s, AttentionRequest* out) {
  if (s == nullptr || *s == '\0' || std::strcmp(s, "auto") == 0)
    *out = AttentionRequest::kAuto;
  else if (std::strcmp(s, "tc") == 0)
    *out = AttentionRequest::kTensorCore;
  else if (std::strcmp(s, "fma") == 0)
    *out = AttentionRequest::kFma;
  else
    return false;
  return true;
}

// What the tensor-core kernels need, as the caller found it.
struct TcCapability {
  int head_size = 0;
  bool head_size_supported = false;  // attn_tc::tc_supported_head_size(head_size)
  int cc_major = 0;                  // the GPU's compute capability (major)
  size_t smem_optin = 0;             // cudaDevAttrMaxSharedMemoryPerBlockOptin
  size_t smem_needed = 0;            // the largest of the kernels' shared memory for this head size
  bool pointers_aligned = false;     // 16-bit tensors 16-byte aligned, fp32 dqkv 8-byte aligned
};

// nullptr when the tensor-core kernels can run, else why not (a static string).
inline const char* tc_unsupported_reason(const TcCapability& c) {
  if (!c.head_size_supported) return "the head size is not one the tensor-core kernels are built for";
  if (c.cc_major < 8) return "the GPU is older than sm_80";
  if (c.smem_needed > c.smem_optin) return "the kernels' shared memory exceeds the GPU's per-block limit";
  if (!c.pointers_aligned) return "a tensor is not aligned for the 16-byte copies";
  return nullptr;
}

struct AttentionChoice {
  AttentionKernel kernel = AttentionKernel::kFma;
  const char* error = nullptr;  // set when "tc" was asked for and cannot run: the reason
};

inline AttentionChoice choose_attention_kernel(AttentionRequest request, const TcCapability& c) {
  if (request == AttentionRequest::kFma) return {AttentionKernel::kFma, nullptr};
  const char* why = tc_unsupported_reason(c);
  if (why == nullptr) return {AttentionKernel::kTensorCore, nullptr};
  if (request == AttentionRequest::kTensorCore) return {AttentionKernel::kTensorCore, why};
  return {AttentionKernel::kFma, nullptr};
}

}  // namespace zerodp::cuda
