// The element-wise arithmetic of the reductions, independent of MPI: the MPI backend's user-defined
// operators for bf16 and fp16 call these, and kAvg's final division is one of them.
//
// 16-bit values are widened to fp32 (exact), combined in fp32, and rounded once back to 16 bits
// (nearest, ties to even), so a reduction over W ranks rounds once per partial sum.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerodp::comm {

// inout[i] = inout[i] + in[i]
void sum_into(const void* in, void* inout, size_t n, DType dtype);
// inout[i] = max(inout[i], in[i]); a NaN operand is not propagated (as MPI_MAX on floats).
void max_into(const void* in, void* inout, size_t n, DType dtype);
// buf[i] = buf[i] / divisor, the division done in fp32 and rounded once to the dtype.
void divide_in_place(void* buf, size_t n, DType dtype, int divisor);

// acc[i] += float(in[i]): a value of the dtype widened exactly and added in fp32. The ordered
// reductions of the MPI backend build every sum from these, one rank's values after the other.
void accumulate_f32(const void* in, DType dtype, float* acc, size_t n);
// acc[i] = float(in[i]), exactly.
void widen_to_f32(const void* in, DType dtype, float* acc, size_t n);
// out[i] = acc[i] rounded to the dtype (nearest, ties to even; NaN stays NaN): the bits of
// core's convert(), on the communication thread alone (no OpenMP team) and vectorised.
void narrow_from_f32(const float* acc, void* out, DType dtype, size_t n);

// out[i] = (((rows[0][i] + rows[1][i]) + rows[2][i]) + ...) / divisor over `count` fp32 rows, summed in
// that order (the bits of widen_to_f32, accumulate_f32 for each further row, divide, narrow), in one
// pass. out may be one of the rows: each element is read from every row before it is written.
void sum_f32_in_order(const float* const* rows, int count, float* out, size_t n, int divisor);

}  // namespace zerodp::comm
