#include "comm/mpi_ordered_reduction.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/reduce_kernels.h"

namespace zerodp::comm {

namespace {

constexpr int kOrderedTag = 0x5a4f;

// Where each rank's chunk starts: W + 1 offsets, the last the end of the buffer.
std::vector<size_t> chunk_begins(const Collective& c, int W) {
  std::vector<size_t> begin(static_cast<size_t>(W) + 1);
  const bool scatter = c.kind == CollectiveKind::kReduceScatter;
  for (int j = 0; j <= W; ++j)
    begin[j] = scatter ? static_cast<size_t>(j) * c.count : c.count * static_cast<size_t>(j) / static_cast<size_t>(W);
  return begin;
}

// out = the in-order sum (over rank j = 0..W-1) of rows[j], `n` elements of `dtype`, divided by W for
// kAvg and rounded once; acc: n floats of scratch.
void sum_rows_in_order(const std::vector<const char*>& rows, DType dtype, ReduceOp op, float* acc, char* out,
                       size_t n) {
  const int W = static_cast<int>(rows.size());
  if (dtype == DType::kF32) {  // no widening or rounding: one pass, the same sums in the same order
    std::vector<const float*> f(rows.size());
    for (size_t j = 0; j < rows.size(); ++j) f[j] = reinterpret_cast<const float*>(rows[j]);
    sum_f32_in_order(f.data(), W, reinterpret_cast<float*>(out), n, op == ReduceOp::kAvg ? W : 1);
    return;
  }
  widen_to_f32(rows[0], dtype, acc, n);
  for (int j = 1; j < W; ++j) accumulate_f32(rows[j], dtype, acc, n);
  if (op == ReduceOp::kAvg)
    for (size_t i = 0; i < n; ++i) acc[i] /= static_cast<float>(W);
  narrow_from_f32(acc, out, dtype, n);
}

// Every rank gathers every rank's values in one MPI_Allgather and adds them all itself, in rank
// order, so all ranks hold the same bits without a second phase.
int small_all_reduce(const MpiGroup& g, const Collective& c, char* staging) {
  const DType dtype = c.type.dtype();
  const size_t n = c.count, es = dtype_size(dtype);
  const MPI_Datatype type = mpi_type(dtype);
  float* acc = reinterpret_cast<float*>(staging);
  char* all = staging + n * sizeof(float);  // W·n values, rank j's at j·n
  const int ni = static_cast<int>(n);
  std::vector<MPI_Request> req(1);
  const int rc = g.blocking() ? MPI_Allgather(c.recv, ni, type, all, ni, type, g.comm)
                              : MPI_Iallgather(c.recv, ni, type, all, ni, type, g.comm, req.data());
  if (rc != MPI_SUCCESS) return rc;
  if (!g.blocking())
    if (const int rc2 = complete_requests(g, req); rc2 != MPI_SUCCESS) return rc2;
  std::vector<const char*> rows(static_cast<size_t>(g.size));
  for (int j = 0; j < g.size; ++j) rows[j] = all + static_cast<size_t>(j) * n * es;
  sum_rows_in_order(rows, dtype, c.op, acc, static_cast<char*>(c.recv), n);
  return MPI_SUCCESS;
}

// The all-reduce's second phase: every rank's reduced chunk to everyone.
int gather_chunks(const MpiGroup& g, const Collective& c, const std::vector<size_t>& begin) {
  const int W = g.size;
  const size_t es = c.type.size();
  const MPI_Datatype type = mpi_type(c.type);
  if (c.count > g.options.max_count) {  // displacements past int: each chunk from its owner, in pieces
    for (int j = 0; j < W; ++j)
      if (const int rc = broadcast_in_pieces(g, static_cast<char*>(c.recv) + begin[j] * es, begin[j + 1] - begin[j],
                                             es, type, j);
          rc != MPI_SUCCESS)
        return rc;
    return MPI_SUCCESS;
  }
  std::vector<int> counts(static_cast<size_t>(W)), displs(static_cast<size_t>(W));
  for (int j = 0; j < W; ++j) {
    counts[j] = static_cast<int>(begin[j + 1] - begin[j]);
    displs[j] = static_cast<int>(begin[j]);
  }
  if (g.blocking())
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, counts.data(), displs.data(), type, g.comm);
  std::vector<MPI_Request> gather(1);
  const int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.recv, counts.data(), displs.data(), type,
                                 g.comm, gather.data());
  return rc != MPI_SUCCESS ? rc : complete_requests(g, gather);
}

}  // namespace

int run_ordered_reduction(const MpiGroup& g, const Collective& c, char* staging) {
  const int W = g.size, r = g.rank;
  const DType dtype = c.type.dtype();
  const size_t es = dtype_size(dtype);
  const MPI_Datatype type = mpi_type(dtype);
  const bool scatter = c.kind == CollectiveKind::kReduceScatter;
  if (W == 1) {  // the sum (and the average) of one rank's values is those values
    if (scatter && !c.in_place) std::memcpy(c.recv, c.send, c.count * es);
    return MPI_SUCCESS;
  }
  if (!scatter && is_small_all_reduce(c.count, dtype, W)) return small_all_reduce(g, c, staging);
  const std::vector<size_t> begin = chunk_begins(c, W);
  const auto len = [&](int j) { return begin[j + 1] - begin[j]; };
  // The W chunks to reduce, and where this rank's reduced chunk goes.
  const char* in = static_cast<const char*>(scatter ? (c.in_place ? in_place_base(c, r) : c.send) : c.recv);
  char* out = static_cast<char*>(c.recv) + (scatter ? 0 : begin[r] * es);

  size_t longest = 0;
  for (int j = 0; j < W; ++j) longest = std::max(longest, len(j));
  const size_t piece = std::min(longest, ordered_reduction_piece_elements(W));
  float* acc = reinterpret_cast<float*>(staging);
  // Peer j's values in slot j (j < r) or j − 1; one slot more than needed keeps the size formula
  // shared with the small all-reduce (W slots of n values).
  char* slots = staging + piece * sizeof(float);
  const auto slot = [&](int j) { return slots + static_cast<size_t>(j < r ? j : j - 1) * piece * es; };

  std::vector<MPI_Request> reqs;
  reqs.reserve(2 * static_cast<size_t>(W));
  std::vector<const char*> rows(static_cast<size_t>(W));
  for (size_t k = 0; k < longest; k += piece) {
    const auto part = [&](int j) { return k < len(j) ? std::min(piece, len(j) - k) : size_t{0}; };
    const size_t mine = part(r);
    reqs.clear();
    for (int j = 0; j < W; ++j) {
      if (j == r) continue;
      int rc = MPI_SUCCESS;
      if (mine > 0) {
        reqs.emplace_back();
        rc = MPI_Irecv(slot(j), static_cast<int>(mine), type, j, kOrderedTag, g.comm, &reqs.back());
      }
      if (rc == MPI_SUCCESS && part(j) > 0) {
        reqs.emplace_back();
        rc = MPI_Isend(in + (begin[j] + k) * es, static_cast<int>(part(j)), type, j, kOrderedTag, g.comm, &reqs.back());
      }
      if (rc != MPI_SUCCESS) return rc;
    }
    if (const int rc = complete_requests(g, reqs); rc != MPI_SUCCESS) return rc;
    if (mine == 0) continue;
    for (int j = 0; j < W; ++j) rows[j] = j == r ? in + (begin[r] + k) * es : slot(j);
    sum_rows_in_order(rows, dtype, c.op, acc, out + k * es, mine);
  }
  return scatter ? MPI_SUCCESS : gather_chunks(g, c, begin);
}

}  // namespace zerodp::comm
