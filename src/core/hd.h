// ZDP_HD marks the functions that kernels and host code share (index arithmetic, tiling parameters,
// rounding rules): __host__ __device__ under nvcc, plain inline C++ elsewhere, so that the CPU test
// suite covers them on machines without a GPU.
#pragma once

#ifdef __CUDACC__
#define ZDP_HD __host__ __device__
#else
#define ZDP_HD
#endif
