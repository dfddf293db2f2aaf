// The engine's states in and out: loading weights (and optimizer states) into the ranges each rank
// keeps, consolidating full fp32 weights on rank 0, and checking the weights are finite.
#pragma once

#include <cstddef>
#include <functional>

#include "comm/communicator.h"
#include "zero/model_states.h"

namespace zerodp::zero {

// Fills dst[0..count) with elements [begin, begin+count) of unit `unit` of state `state` (-1: the
// fp32 weights; 0, 1, ...: the optimizer's states).
using StateSource = std::function<void(int state, int unit, size_t begin, size_t count, float* dst)>;

// Reads the weights each rank keeps in fp32 chunks, stores them in the compute dtype and, where it
// updates them, as masters; with_states also the optimizer states of the range it updates. At stage 0
// the rank reads everything; at stages 1-3 only its own range of each unit (its shard): the rest of
// the units kept whole is the other ranks' to read, and the caller all-gathers them
// (ParamGatherer::gather_after_update), so no rank reads what another reads.
void load_states(ModelStates& st, const StateSource& source, bool with_states);

// Calls sink(u, data) where `root` (on one rank of the job) with unit u's full fp32 weights, unit by
// unit; collective over `comm`, the rank's shard group. Shards are all-gathered (not counted as
// training traffic) where the root does not hold them already.
void consolidate_weights(ModelStates& st, comm::Communicator& comm, bool root,
                         const std::function<void(int unit, const float* data)>& sink);

// Whether every fp32 weight on every rank is finite; collective (not counted as training traffic).
bool all_weights_finite(ModelStates& st, comm::Communicator& comm);

}  // namespace zerodp::zero
