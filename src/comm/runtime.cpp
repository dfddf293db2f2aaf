#include "comm/runtime.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "comm/mpi_c.h"

#include <fmt/format.h>

#include "comm/mpi_communicator.h"
#include "comm/mpi_leak_scope.h"
#include "comm/watchdog.h"
#include "core/error.h"

namespace zerodp::comm {

namespace {

std::mutex g_mu;
std::shared_ptr<Communicator> g_world;
bool g_we_initialized = false;  // MPI_Finalize is ours to call only if MPI_Init was

// The first of `vars` that is set to a non-negative integer, else `fallback`.
int launcher_env(std::initializer_list<const char*> vars, int fallback) {
  for (const char* var : vars) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end == '\0' && x >= 0 && x < (1L << 30)) return static_cast<int>(x);
  }
  return fallback;
}

}  // namespace

bool runtime_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

std::shared_ptr<Communicator> world() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_world) return g_world;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw RuntimeFailure("comm::world(): MPI was already finalized");
  int provided = 0;
  if (!initialized) {
    // OpenMPI busy-polls inside blocking calls; the communication threads share the cores with
    // the computing ones, so ask it to yield while it polls (unless the user said otherwise).
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
    // MPI's default handler aborts on an error here, which is what a failed start should do.
    const MpiLeakScope openmpi_keeps_this;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    g_we_initialized = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    throw RuntimeFailure(fmt::format(
        "the MPI library provides thread level {} but zerodp needs MPI_THREAD_MULTIPLE ({}) for its "
        "communication threads ({})",
        provided, static_cast<int>(MPI_THREAD_MULTIPLE), mpi_library_version()));
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler(MPI_COMM_WORLD)");
  MPI_Comm dup = MPI_COMM_NULL;
  const MpiLeakScope openmpi_keeps_this;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup(MPI_COMM_WORLD)");
  g_world = std::make_shared<MpiCommunicator>(dup, MpiOptions::from_env());
  start_status_service();  // collective, like the dup above: every rank gets here in the same order
  return g_world;
}

int launcher_rank() { return launcher_env({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, 0); }

int launcher_size() { return launcher_env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 1); }

void leave_failure_note(int exit_code) {
  const char* dir = std::getenv("ZERODP_LAUNCH_STATUS_DIR");
  if (dir == nullptr || *dir == '\0') return;
  const std::string path = fmt::format("{}/rank-{}", dir, launcher_rank()), tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return;  // best effort: the launcher then waits for mpirun as before
  const bool written = std::fprintf(f, "%d\n", exit_code) > 0;
  if (std::fclose(f) == 0 && written) std::rename(tmp.c_str(), path.c_str());
}

void abort_job(int exit_code) {
  std::fflush(stdout);
  std::fflush(stderr);
  leave_failure_note(exit_code);
  if (runtime_initialized()) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // The launcher kills every other rank, wherever it is blocked, and exits with exit_code.
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
    // Alone: end cleanly unless a communication thread is the one ending the job (it cannot join itself).
    if (!on_comm_worker_thread()) {
      try {
        finalize();
      } catch (...) {
      }
      std::exit(exit_code);
    }
    std::_Exit(exit_code);
  }
  std::exit(exit_code);
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!runtime_initialized()) return;
  stop_status_service();
  shutdown_all_mpi_communicators();
  g_world.reset();
  if (g_we_initialized) {
    const MpiLeakScope openmpi_keeps_this;
    MPI_Finalize();
  }
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown MPI library";
  std::string v(text, static_cast<size_t>(len));
  while (!v.empty() && (v.back() == '\0' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

}  // namespace zerodp::comm
