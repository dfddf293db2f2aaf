// The process-wide distributed runtime: MPI started on first use (MPI_THREAD_MULTIPLE, so a
// progress thread can drive collectives while the caller computes), the world communicator, and
// the failure path that ends the whole job instead of letting the other ranks hang.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace zerodp::comm {

// Initialises MPI if needed and returns the communicator of all ranks. Works without mpirun too
// (a singleton world of one rank).
std::shared_ptr<Communicator> world();
bool runtime_initialized();

// This process's rank and the world size as the launcher announced them (OpenMPI, PMI or Slurm
// environment variables), without starting MPI; 0 and 1 when not launched by one.
int launcher_rank();
int launcher_size();

// Ends the whole job with `exit_code`: with MPI up and more than one rank, MPI_Abort brings every
// rank down (the launcher kills the rest); otherwise the process exits. Never returns. First leaves
// a failure note for `zerodp launch` (leave_failure_note).
[[noreturn]] void abort_job(int exit_code);
// Under `zerodp launch` (ZERODP_LAUNCH_STATUS_DIR set): writes "<exit code>" to rank-<rank> there, so
// that the launch can end an mpirun that would otherwise wait minutes on a host it cannot reach.
void leave_failure_note(int exit_code);

// Orderly shutdown at the end of a successful run (no-op when MPI was never started).
void finalize();

// "Open MPI v4.1.4, ..." as MPI_Get_library_version reports it (available before MPI_Init).
std::string mpi_library_version();

}  // namespace zerodp::comm
