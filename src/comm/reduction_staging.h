// The staging memory of the MPI backend's ordered reductions (comm/mpi_ordered_reduction.h), as plain
// arithmetic without MPI: the backend allocates by it and the planner (plan/estimator.cpp) predicts by
// it, so the rule is written once.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerodp::comm {

// A small all-reduce (W·count·size ≤ 256 KiB: the loss and norm sums, tiny buckets) is one all-gather
// after which every rank adds everyone's values itself.
bool is_small_all_reduce(size_t count, DType dtype, int group_size);
// The ordered reductions' pieces: elements of one chunk sent to one peer per message.
size_t ordered_reduction_piece_elements(int group_size);
// The staging an ordered reduction allocates (category comm) when the longest chunk it reduces has
// `chunk_elements` elements: one piece of fp32 accumulator and W pieces of the dtype (a small
// all-reduce of n elements, W·n·size ≤ 256 KiB, gathers everyone's whole buffer: chunk = n).
size_t ordered_reduction_staging_bytes(size_t chunk_elements, DType dtype, int group_size);
// The staging one sum or average of `count` elements needs: all_reduce_async (all_reduce) or
// reduce_scatter_async (count per rank) in a group of `group_size`; 0 for one rank or no elements.
size_t ordered_reduction_staging_bytes_for(bool all_reduce, size_t count, DType dtype, int group_size);

}  // namespace zerodp::comm
