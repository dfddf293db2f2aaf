// The MPI backend's ordered reductions: sums and averages that do not go through MPI_Allreduce or
// MPI_Reduce_scatter_block. Which algorithm those pick, and so the order in which they add, depends
// on the message size, the group size and the collective, and a float sum depends on its order:
// stage 0 all-reduces a bucket of units where stage 2 reduce-scatters one unit at a time, and both
// must give the same bits. Here every element's result is x_0 + x_1 + ... + x_{W-1}: the ranks'
// values widened to fp32 and added in rank order, then rounded once to the dtype (divided by W
// first for kAvg). The element's owner receives everyone's value of it and adds them itself:
//   reduce-scatter: chunk j (count elements at j·count) belongs to rank j;
//   all-reduce:     chunk j is [count·j/W, count·(j+1)/W), then an all-gather of the chunks.
// Every rank sends (W−1)/W of the buffer, as a ring reduce-scatter does, in pieces of at most
// ordered_reduction_piece_elements() per peer, so the staging memory stays bounded (category comm).
// A small all-reduce (W·count·size ≤ 256 KiB: the loss and norm sums, tiny buckets) is
// latency-bound: every rank gathers everyone's values in one MPI_Allgather and adds them itself.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "comm/mpi_transfer.h"
#include "comm/reduction_staging.h"
#include "core/dtype.h"

namespace zerodp::comm {

// Whether the MPI backend runs `c` as an ordered reduction (a sum or average with elements).
inline bool is_ordered_reduction(const Collective& c) {
  return c.is_reduction() && c.op != ReduceOp::kMax && c.count > 0;
}

// Runs the ordered reduction `c` over `g` to completion, staging in `staging` (at least
// ordered_reduction_staging_bytes_for bytes); returns MPI's code.
int run_ordered_reduction(const MpiGroup& g, const Collective& c, char* staging);

}  // namespace zerodp::comm
