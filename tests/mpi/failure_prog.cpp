// A job in which rank 1 of 3 fails while ranks 0 and 2 wait in an all-reduce: it must end, every
// rank, with the failure's exit code and "[rank 1] error: ..." on stderr (check_failure.sh).
// The main handles failures as apps/zerodp.cpp does. Modes:
//   throw       rank 1 throws a RuntimeFailure (exit 1) from the main thread
//   usage       rank 1 throws a UsageError (exit 2)
//   budget      rank 1 throws a BudgetError (exit 3)
//   worker      rank 1's all-reduce fails inside the communication worker (an MPI error); wait()
//               rethrows it
//   unobserved  as worker, but rank 1 never waits on it: the worker ends the job after the grace
//               period (ZERODP_COMM_ERROR_GRACE_S)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/runtime.h"
#include "core/error.h"

namespace {

int run(const std::string& mode) {
  using namespace zerodp;
  auto world = comm::world();
  ZDP_REQUIRE(world->size() == 3, "run with mpirun -n 3 (got {} ranks)", world->size());
  std::vector<float> grads(1000, 1.f);
  world->barrier();
  if (world->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others are inside the all-reduce
    if (mode == "throw") throw RuntimeFailure("injected failure on rank 1");
    if (mode == "usage") throw UsageError("injected usage error on rank 1");
    if (mode == "budget") throw BudgetError("injected budget error on rank 1");
    auto& mpi = dynamic_cast<comm::MpiCommunicator&>(*world);
    mpi.inject_mpi_error_for_testing();
    auto work = world->all_reduce_async(grads.data(), grads.size(), DType::kF32, comm::ReduceOp::kSum);
    if (mode == "worker") {
      work->wait();
    } else if (mode == "unobserved") {
      work.reset();
      std::this_thread::sleep_for(std::chrono::seconds(3600));
    }
    throw UsageError("unknown mode '" + mode + "'");
  }
  world->all_reduce(grads.data(), grads.size(), DType::kF32, comm::ReduceOp::kSum);
  std::fprintf(stderr, "[rank %d] error: the all-reduce completed without rank 1\n", world->rank());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int code = run(argc > 1 ? argv[1] : "");
    zerodp::comm::finalize();
    return code;
  } catch (const std::exception& e) {
    const int code = zerodp::exit_code_of(e);
    std::fprintf(stderr, "[rank %d] error: %s\n", zerodp::comm::launcher_rank(), e.what());
    std::fflush(stderr);
    zerodp::comm::abort_job(code);
  }
}
