// `zerodp info`: the version and what this build has (MPI, BLAS, the 16-bit GEMM library and the ISA
// it picked, OpenMP, CUDA).
#include <cstdio>

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include "apps/commands.h"
#include "comm/runtime.h"
#include "core/cpu.h"
#include "kernels/gemm16.h"
#include "zerodp_build_info.h"

namespace zerodp::cli {

namespace {
void register_info(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("info", "Print the version and the build's features");
  cmd->callback([&action] {
    action = [] {
      std::string mpi = comm::mpi_library_version();
      if (auto nl = mpi.find('\n'); nl != std::string::npos) mpi.resize(nl);
      fmt::print("zerodp {} ({}, {} build, {})\n", ZERODP_VERSION, ZERODP_GIT_REV, ZERODP_BUILD_TYPE,
                 ZERODP_CXX_COMPILER);
      fmt::print("  MPI:     {}\n", mpi);
      fmt::print("  BLAS:    {} ({} threads)\n", openblas_get_config(), openblas_get_num_threads());
      fmt::print("  CPU:     {} ({})\n", cpu_model_name(), cpu_features_string());
      for (DType t : {DType::kBF16, DType::kF16}) {
        const kernels::Gemm16Info& g = kernels::gemm16_info(t);
        fmt::print("  {} GEMM: {}; ISA: {} ({}){}\n", dtype_name(t), g.library, g.isa, g.reason,
                   g.impl == kernels::Gemm16Impl::kMkl ? fmt::format("; {} threads", kernels::gemm16_mkl_max_threads()) : "");
      }
      fmt::print("  OpenMP:  {} threads (omp_get_max_threads)\n", omp_get_max_threads());
      // The CUDA toolchain is detected and wired into the build (ZERODP_CUDA); the GPU backend
      // (kernels, NCCL communicator) is not part of this version yet.
      if (ZERODP_HAVE_CUDA)
        fmt::print("  CUDA:    toolkit {} enabled in the build; GPU backend: not yet (CPU training only)\n",
                   ZERODP_CUDA_VERSION);
      else
        fmt::print("  CUDA:    no (toolkit not found or ZERODP_CUDA=OFF); CPU training only\n");
      return 0;
    };
  });
}
const CommandRegistration registration(10, register_info);
}  // namespace

}  // namespace zerodp::cli
