// The MPI backend's transfers as its worker runs them (comm/mpi_communicator.h): MPI's errors,
// datatypes and the 16-bit operators, completing requests in either progress mode, and moving
// buffers larger than one MPI call (an int count) in pieces.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_c.h"
#include "comm/mpi_options.h"

namespace zerodp::comm {

// Turns an MPI return code into a RuntimeFailure "<what>: <MPI error string>"; no-op on MPI_SUCCESS.
void check_mpi(int rc, std::string_view what);

// Creates the bf16 and fp16 operators (once, after MPI_Init; MPI_Finalize frees them).
void create_mpi_user_ops();
// fp32 travels as MPI_FLOAT, bf16 and fp16 as MPI_UINT16_T, bytes as MPI_BYTE.
MPI_Datatype mpi_type(ElementType t);
// kMax: MPI_MAX or the 16-bit operator; kSum and kAvg: the sum (kAvg divides afterwards).
MPI_Op mpi_op(ReduceOp op, DType t);

// The communicator a transfer runs over, as its worker sees it.
struct MpiGroup {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  MpiOptions options;

  bool blocking() const { return options.progress == ProgressMode::kBlocking; }
};

// Between two rounds of tests that completed nothing: first yield, then sleep, doubling up to
// max_sleep_us.
void back_off(int idle_rounds, int max_sleep_us);
// Completes the requests: MPI_Waitall (blocking), or MPI_Testall with back_off.
int complete_requests(const MpiGroup& g, std::vector<MPI_Request>& reqs);

// The start of an in-place reduce-scatter's buffer: recv = send + rank·count, and writable.
char* in_place_base(const Collective& c, int rank);

// A broadcast or all-gather of more than max_count elements: run_in_pieces moves it.
bool needs_pieces(const MpiGroup& g, const Collective& c);
// Broadcasts `count` elements of `es` bytes at `buf` from `root` in calls of at most max_count.
int broadcast_in_pieces(const MpiGroup& g, char* buf, size_t count, size_t es, MPI_Datatype type, int root);
// A large broadcast in pieces; a large all-gather as each rank's chunk broadcast from it in turn, in
// pieces (out of place, the rank's own chunk is copied into place first). `type` may be an invalid
// datatype (an injected error).
int run_in_pieces(const MpiGroup& g, const Collective& c, MPI_Datatype type);

}  // namespace zerodp::comm
