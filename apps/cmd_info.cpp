// `zerodp info`: the version and what this build has (MPI, BLAS, the 16-bit GEMM library and the ISA
// it picked, OpenMP, CUDA).
#include <cstdio>

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include "apps/commands.h"
#include "comm/runtime.h"
#include "core/cpu.h"
#include "core/memory.h"
#include "kernels/blas_info.h"
#include "kernels/dispatch.h"
#include "kernels/gemm16.h"
#include "zerodp_build_info.h"
#if ZERODP_HAVE_CUDA
#include "cuda/runtime.h"
#endif

namespace zerodp::cli {

namespace {

// The CUDA line: whether the backend is built in, the runtime and driver, and each visible GPU.
void print_cuda() {
#if ZERODP_HAVE_CUDA
  const cuda::RuntimeInfo info = cuda::query_runtime();
  fmt::print("  CUDA:    built in (nvcc {}, runtime {}, driver {}; cuBLASLt, NCCL); training: --device cuda, bf16 "
             "or fp16\n",
             ZERODP_CUDA_VERSION, cuda::version_string(info.runtime_version),
             info.driver_version ? cuda::version_string(info.driver_version) : "none");
  if (info.gpus.empty()) fmt::print("  GPUs:    none visible ({})\n", info.why_none);
  for (const cuda::GpuInfo& g : info.gpus)
    fmt::print("  GPU {}:   {} (compute capability {}.{}, {} SMs, {})\n", g.index, g.name, g.cc_major, g.cc_minor,
               g.multiprocessors, format_bytes(g.total_memory));
#else
  fmt::print("  CUDA:    not built in (ZERODP_CUDA=OFF, or no nvcc when configured); CPU only\n");
#endif
}

void register_info(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("info", "Print the version and the build's features");
  cmd->callback([&action] {
    action = [] {
      std::string mpi = comm::mpi_library_version();
      if (auto nl = mpi.find('\n'); nl != std::string::npos) mpi.resize(nl);
      fmt::print("zerodp {} ({}, {} build, {})\n", ZERODP_VERSION, ZERODP_GIT_REV, ZERODP_BUILD_TYPE,
                 ZERODP_CXX_COMPILER);
      fmt::print("  MPI:     {}\n", mpi);
      fmt::print("  BLAS:    {} ({} threads); {}\n", openblas_get_config(), openblas_get_num_threads(),
                 kernels::blas_core_summary());
      if (const std::string w = kernels::blas_core_warning(); !w.empty()) fmt::print("  warning: {}\n", w);
      fmt::print("  CPU:     {} ({}); kernels: {}{}\n", cpu_model_name(), cpu_features_string(), kernels::kernels_isa(),
                 cpu_isa_limit().empty() ? "" : fmt::format(" (held to {} by ZERODP_MAX_CPU_ISA)", cpu_isa_limit()));
      const kernels::Gemm32Info& g32 = kernels::gemm32_info();
      fmt::print("  fp32 GEMM: {} ({})\n", g32.mkl ? g32.library : "OpenBLAS sgemm", g32.reason);
      for (DType t : {DType::kBF16, DType::kF16}) {
        const kernels::Gemm16Info& g = kernels::gemm16_info(t);
        fmt::print("  {} GEMM: {}; ISA: {} ({}){}\n", dtype_name(t), g.library, g.isa, g.reason,
                   g.impl == kernels::Gemm16Impl::kMkl ? fmt::format("; {} threads", kernels::gemm16_mkl_max_threads()) : "");
      }
      fmt::print("  OpenMP:  {} threads (omp_get_max_threads)\n", omp_get_max_threads());
      print_cuda();
      return 0;
    };
  });
}
const CommandRegistration info_registration(10, register_info);
}  // namespace

}  // namespace zerodp::cli
