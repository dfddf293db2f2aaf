// The MPI backend's two-level collectives (comm/host_layout.h): a reduce-scatter and an all-gather
// for a group of H hosts holding L consecutive ranks each, run over two private communicators, the
// host's L ranks (shared memory) and the H ranks of one local index, one per host (the link).
//
// All-gather: first across, each rank gathers the chunks of the ranks with its local index straight
// into their places; then within the host, every rank hands its H chunks to the others. Each host
// sends its L chunks to every other host once: on 2 hosts half the buffer crosses each way, where a
// ring over all W ranks carries (W − 1)/W of it across.
//
// Reduce-scatter, keeping the ordered reductions' bits (comm/mpi_ordered_reduction.h: every element is
// x_0 + x_1 + ... + x_{W−1} in fp32, rank after rank, rounded once): rank (h, l) of host h, local index
// l, reduces lane l, the H chunks owned by the ranks of local index l (chunk g·L + l, g = 0..H−1). For
// each chunk of the lane, piece after piece, the host's ranks hand (h, l) their values of it over shared
// memory; host 0 adds its L values in rank order into an fp32 partial sum, sends it across to host 1,
// which adds its own L values to it in rank order, and so on to the last host, which rounds the finished
// sum and sends it to its owner. Since the ranks are in host order, the additions are those of the flat
// reduction, in its order: the same bits. What crosses the link is one fp32 partial sum per element and
// host boundary plus the finished chunks, instead of every rank's values to every owner; the pieces
// flow down the chain of hosts as a pipeline. With quantize_across_hosts (ZeRO++ qgZ) the partial sums
// and the finished pieces cross as int8 blocks (core/quantize.h), dequantized on arrival: about a
// quarter of the bytes, and no longer the flat bits.
#pragma once

#include <cstddef>

#include "comm/communicator.h"
#include "comm/host_layout.h"
#include "comm/mpi_transfer.h"

namespace zerodp::comm {

// The two communicators of a group run in two levels, and this rank's place in them.
struct TwoLevelGroups {
  MPI_Comm within_host = MPI_COMM_NULL;  // the host's L ranks, ordered by rank
  MPI_Comm across_hosts = MPI_COMM_NULL;  // the H ranks of this local index, ordered by host
  int hosts = 1, ranks_per_host = 1;
  int host = 0, local = 0;
};

// Elements of one chunk the reduce-scatter moves per message (its pieces).
inline size_t two_level_piece_elements() { return kTwoLevelPieceElements; }
// Run `c` (checked; a sum or average reduce-scatter, or an all-gather, with elements) to completion
// over `t`; `g` is the whole group (its progress mode drives the waits). Return MPI's code.
int run_two_level_reduce_scatter(const MpiGroup& g, const TwoLevelGroups& t, const Collective& c, char* staging);
int run_two_level_all_gather(const MpiGroup& g, const TwoLevelGroups& t, const Collective& c);

}  // namespace zerodp::comm
