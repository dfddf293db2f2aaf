// Errors from the CUDA runtime, cuBLASLt and NCCL become zerodp errors (RuntimeFailure, exit 1) that
// name the call, the source line and the library's own words. Host code only: kernels cannot throw.
#pragma once

#include <cuda_runtime.h>

namespace zerodp::cuda {

// Throws RuntimeFailure "<file>:<line>: <what> failed: <error name>: <error string>" unless e is success.
void check(cudaError_t e, const char* what, const char* file, int line);

}  // namespace zerodp::cuda

// ZDP_CUDA_CHECK(cudaMalloc(&p, n)): the call, checked.
#define ZDP_CUDA_CHECK(expr) ::zerodp::cuda::check((expr), #expr, __FILE__, __LINE__)
