// zerodp: ZeRO-sharded data-parallel training. The entry point parses the command line, runs the
// chosen subcommand, and turns any failure into `[rank r] error: ...` and the exit code of
// docs/reference/command-line.md#exit-codes, ending every rank of the job (MPI_Abort) so that nobody hangs.
#include <algorithm>
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "apps/commands.h"
#include "zerodp_build_info.h"
#include "comm/runtime.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "kernels/blas_info.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"zerodp: ZeRO-sharded data-parallel training of GPT-2 and the Llama family (stages 0-3), in C++ on MPI.\n"
               "Launch several ranks with `mpirun -n W zerodp <command> ...`.",
               "zerodp"};
  app.require_subcommand(1);
  app.set_version_flag("--version", ZERODP_VERSION_STRING);
  bool all_ranks = false, verbose = false;
  app.add_flag("--log-all-ranks", all_ranks, "Print info messages from every rank, not only rank 0");
  app.add_flag("-v,--verbose", verbose, "Print debug messages");

  zerodp::cli::Action action;
  auto registry = zerodp::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  for (const auto& entry : registry) entry.add(app, action);

  try {
    app.parse(zerodp::cli::set_aside_launched_command(argc, argv), argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; anything else is bad usage (exit 2), printed by rank 0 only.
    if (zerodp::comm::launcher_rank() == 0 || e.get_exit_code() != 0) {
      const int code = app.exit(e);
      return code == 0 ? 0 : static_cast<int>(zerodp::ExitCode::kUsage);
    }
    return e.get_exit_code() == 0 ? 0 : static_cast<int>(zerodp::ExitCode::kUsage);
  }
  zerodp::log::init(zerodp::comm::launcher_rank(), zerodp::comm::launcher_size(), all_ranks);
  zerodp::log::set_verbose(verbose);
  const int code = action ? action() : 0;
  zerodp::comm::finalize();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Before MPI or any thread starts: may run this program again with OpenBLAS's AVX-512 kernels.
  zerodp::kernels::select_wide_blas_kernels(argv);
  // Every step frees and re-allocates the same transient buffers: keep them in the process.
  zerodp::retain_freed_host_memory();
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    const int code = zerodp::exit_code_of(e);
    std::fprintf(stderr, "[rank %d] error: %s\n", zerodp::comm::launcher_rank(), e.what());
    std::fflush(stderr);
    zerodp::comm::abort_job(code);
  }
}
