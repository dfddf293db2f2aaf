// Which host each rank of a group runs on, and what that means for the bytes that cross between
// hosts. A group whose hosts each hold the same number L of consecutive ranks (host h: ranks h·L to
// h·L + L − 1, what `mpirun --map-by slot` gives) is regular; the MPI backend can then run its
// reduce-scatters and all-gathers in two levels (comm/mpi_two_level.h), whose messages cross the
// link once per pair of hosts instead of once per pair of ranks.
//
// The traffic ledger counts the bytes each rank sends to another host (bytes_across_hosts): for a
// collective that runs in two levels, exactly what that algorithm sends across; for the others, the
// ring model's, like every other count of the ledger: a rank whose ring successor is on another host
// sends its whole ring share across, the others nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "comm/traffic.h"
#include "core/dtype.h"

namespace zerodp::comm {

struct HostLayout {
  // Per rank of the group, its host, numbered in the order of the hosts' lowest ranks. Empty: not
  // learned (a group taken to be on one host).
  std::vector<int> host_of;
  int hosts = 1;
  // L when the layout is regular (see above), else 0.
  int ranks_per_host = 0;
  // Reduce-scatters (sums and averages) and all-gathers run in two levels (a regular layout over
  // several hosts with several ranks each, asked for).
  bool two_level = false;

  // The layout of ranks placed on hosts `host_of` (any host numbers; renumbered as above).
  static HostLayout from_hosts(const std::vector<int>& host_of);
  bool spans_hosts() const { return hosts > 1; }
};

// Whether a collective of this kind and `count` elements runs in two levels in `layout` (`is_sum`: a
// sum or an average, not a max). All-gathers describe their strided chunks with MPI datatypes of
// int counts: L·count must fit.
bool runs_in_two_levels(const HostLayout& layout, CollectiveKind kind, bool is_sum, size_t count);

// Elements of one chunk a two-level reduce-scatter moves per message (its pieces; comm/mpi_two_level.h).
inline constexpr size_t kTwoLevelPieceElements = size_t{1} << 17;
// The bytes of one chunk of `count` elements sent quantized (qgZ), piece by piece, each piece its own
// int8 blocks (core/quantize.h).
uint64_t quantized_chunk_bytes(size_t count);

// The staging a two-level reduce-scatter of `count` elements (a chunk) of `dtype` allocates on each
// rank (category comm), part by part, each part starting on a 64-byte boundary (the fp32 partial sums
// follow 16-bit slots of any length): the host's other ranks' values of one piece, two fp32 partial
// sums and two finished pieces (each pair alternating, one in flight while the next is computed);
// quantized (qgZ), also two quantized pieces going out, one coming in, and every quantized piece of the
// rank's own chunk. Offsets in bytes from the buffer's start; `total` its size.
struct TwoLevelStaging {
  size_t slots = 0, partial[2] = {}, finished[2] = {}, outgoing[2] = {}, incoming = 0, own = 0, total = 0;
};
TwoLevelStaging two_level_staging(size_t count, DType dtype, int ranks_per_host, bool quantized);
inline size_t two_level_staging_bytes(size_t count, DType dtype, int ranks_per_host, bool quantized) {
  return two_level_staging(count, dtype, ranks_per_host, quantized).total;
}

// The bytes rank `rank` sends to other hosts for one collective of `count` elements of `elem_bytes`
// (two_level: as runs_in_two_levels says it runs). In two levels, for H hosts, chunk bytes b = count·elem_bytes:
//   all-gather: its chunk to the rank of the same local index on each other host, (H − 1)·b;
//   reduce-scatter: on hosts 0 to H − 2, the fp32 partial sums of its lane (the H chunks of its local
//   index), 4·H·count; on the last host, the finished chunks to their owners on the others, (H − 1)·b;
//   quantized (qgZ): H·quantized_chunk_bytes(count) and (H − 1)·quantized_chunk_bytes(count).
uint64_t bytes_across_hosts(const HostLayout& layout, CollectiveKind kind, size_t count, size_t elem_bytes, int rank,
                            bool two_level, bool quantized = false);

}  // namespace zerodp::comm
