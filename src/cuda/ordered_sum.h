// The device half of the GPU communicators' deterministic reductions (comm/nccl_communicator.h):
// after an all-to-all has put every rank's values of a chunk side by side, this reduces them in
// rank order, with the arithmetic of the MPI backend (comm/reduce_kernels.h), so that a GPU run's
// sums have the same bits as a CPU run's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace zerodp::cuda {

enum class OrderedOp : uint8_t { kSum, kAvg, kMax };

// out[i] = in[0·stride + i] ⊕ in[1·stride + i] ⊕ ... ⊕ in[(chunks−1)·stride + i] for i < n, in that
// order, enqueued on `stream` (elements of `dtype`; stride and n in elements):
//  - kSum: each value widened to fp32 exactly, added left to right in fp32, rounded once to the dtype
//    (nearest, ties to even; NaN stays a quiet NaN with its sign: core's conversions);
//  - kAvg: the same fp32 sum divided (a true IEEE division) by `chunks`, then rounded once;
//  - kMax: b replaces the running maximum a when b > a (MPI_MAX's rule in reduce_kernels.cpp).
// `out` may be one of the chunks (every element is read from all chunks before it is written); n = 0
// launches nothing. Launch errors throw RuntimeFailure.
void ordered_reduce(const void* in, size_t stride, int chunks, void* out, size_t n, DType dtype, OrderedOp op,
                    cudaStream_t stream);

}  // namespace zerodp::cuda
