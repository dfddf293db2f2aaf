// Muon's whole-matrix part on ZeRO shards (docs/reference/optimizer.md#muon): each hidden matrix's
// Newton-Schulz iteration runs on one rank of the shard group, on the whole matrix, whatever the
// stage. Unit by unit:
//   1. every rank writes the Nesterov direction u of the matrix elements it updates (its shard at
//      stages 1-3, the whole unit at stage 0) into a unit-sized fp32 buffer;
//   2. stages 1-3: the buffer is all-gathered over the group, so that every rank has every matrix's u;
//   3. each matrix's owner (matrices_owner: the unit's matrices spread so the ranks' FLOPs balance)
//      runs NewtonSchulz5 on it through the device's GEMM and writes O over u; every other element of
//      the buffer becomes zero;
//   4. the buffer is reduce-scattered (stages 1-3) or all-reduced (stage 0): each element has one
//      non-zero term, so the sum is that term exactly, and each rank holds O where it updates.
// The momentum stays sharded as the stage shards AdamW's states; the steps are the same at every stage
// and W, so the bits are the same across stages at a given W.
//
// Working memory during the update (MemCategory kAct, freed when it ends): the unit buffer (the
// largest padded unit with a matrix), one copy of the largest matrix (the iteration's other X) and
// two m × m products (m: the largest matrix's smaller side); muon_work() says it for the planner.
// Traffic per unit with a matrix: one all-gather and one reduce-scatter of the padded unit in fp32
// (stages 1-3), or one all-reduce of it (stage 0), with a group of more than one rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/memory.h"
#include "model/layout.h"
#include "optim/muon.h"
#include "zero/model_states.h"

namespace zerodp::zero {

// The working memory of one update, in fp32 elements of each buffer (all zero without matrices).
struct MuonWork {
  size_t unit = 0;       // the largest padded unit that holds a matrix
  size_t matrix = 0;     // the largest matrix
  size_t product = 0;    // m² of the matrix with the largest smaller side
  uint64_t bytes() const { return 4 * (uint64_t{unit} + matrix + 2 * uint64_t{product}); }
};
// For `layout` sharded over `ranks` (the shard group).
MuonWork muon_work(const model::ParamLayout& layout, int ranks);
// Whether unit u holds a matrix (an exchange per update), and the padded elements of those units
// together: each is all-gathered and reduce-scattered (stages 1-3), or all-reduced (stage 0), in fp32.
bool unit_has_matrix(const model::ParamLayout& layout, int u);
uint64_t muon_exchanged_elements(const model::ParamLayout& layout, int ranks);

// The rank of `ranks` that runs the iteration of each matrix of unit u, in the order of
// layout.unit_params(u) (-1 for the tensors that are not matrices): the matrices by decreasing FLOPs
// (ties in unit order), each to the rank with the fewest FLOPs so far (ties: the lowest rank).
std::vector<int> matrices_owner(const model::ParamLayout& layout, int u, int ranks);

class MuonStep {
 public:
  MuonStep(ModelStates& states, comm::Communicator& group) : states_(states), group_(group) {}

  // Allocates the working memory for one update (begin) and frees it (end).
  void begin();
  void end();
  // The direction buffer's unit-local element i: where step 1 writes u.
  float* direction(size_t i) { return dir_.as<float>() + i; }
  // Steps 2-4 for unit u; then direction(i) holds O for every element the rank updates.
  void orthogonalise(int u);

 private:
  // NewtonSchulz5 of the rows × cols matrix u (in place: O replaces it).
  void newton_schulz(float* u, int64_t rows, int64_t cols);

  ModelStates& states_;
  comm::Communicator& group_;
  Buffer dir_, x_, a_, b_;
};

}  // namespace zerodp::zero
