// Replaced GPU kernels, for bench/micro_gpu's before-and-after timings (bench/gpu_baselines.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace zerodp::bench {

// *out = Σ x[i]² of n fp32 values (device memory), cuda::sum_squares's order and bits, by the kernels
// it had before 2026-11-28; partials: cuda::sum_squares_scratch_doubles(n) doubles.
void sum_squares_one_thread_a_block(double* out, const float* x, size_t n, double* partials, cudaStream_t stream);

}  // namespace zerodp::bench
