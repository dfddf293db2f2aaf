// `zerodp bench-train`: the measurements bench/train/run.sh needs besides `zerodp train` itself.
// Sub-commands:
//   sgemm   the sgemm peak of this machine: cblas_sgemm (the same OpenBLAS the kernels call, on the
//           same OpenMP threads) on square n×n×n fp32 matrices, 2·n³ FLOPs a call; prints one JSON
//           object with the best and the median GFLOP/s over --reps timed calls.
// A separate top-level command (not `zerodp bench train`) so that it does not share a file with
// `zerodp bench comm`.
#include <algorithm>
#include <chrono>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "apps/commands.h"
#include "core/error.h"
#include "core/memory.h"

namespace zerodp::cli {

namespace {

struct SgemmPeakOptions {
  int size = 2048;
  int reps = 5;
  int warmup = 1;
};

int run_sgemm_peak(const SgemmPeakOptions& o) {
  ZDP_REQUIRE(o.size >= 16 && o.size <= 16384, "bench-train sgemm: --size must be in [16, 16384], got {}", o.size);
  ZDP_REQUIRE(o.reps >= 1 && o.warmup >= 0, "bench-train sgemm: need --reps >= 1 and --warmup >= 0");
  const size_t n = static_cast<size_t>(o.size);
  Buffer a(n * n * sizeof(float), MemCategory::kAct), b(n * n * sizeof(float), MemCategory::kAct),
      c(n * n * sizeof(float), MemCategory::kAct);
  // Values of moderate size, neither zeros nor subnormals, so that no fast path distorts the time.
  float* pa = a.as<float>();
  float* pb = b.as<float>();
  for (size_t i = 0; i < n * n; ++i) {
    pa[i] = 0.5f + 0.001f * static_cast<float>(i % 97);
    pb[i] = 0.25f - 0.001f * static_cast<float>(i % 89);
  }
  c.zero();
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::vector<double> gflops;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o.size, o.size, o.size, 1.f, pa, o.size, pb, o.size,
                0.f, c.as<float>(), o.size);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= o.warmup) gflops.push_back(flops / s / 1e9);
  }
  std::sort(gflops.begin(), gflops.end());
  const size_t k = gflops.size();
  const double median = k % 2 == 1 ? gflops[k / 2] : 0.5 * (gflops[k / 2 - 1] + gflops[k / 2]);
  nlohmann::json j;
  j["bench"] = "sgemm";
  j["size"] = o.size;
  j["reps"] = o.reps;
  j["omp_threads"] = omp_get_max_threads();
  j["blas_threads"] = openblas_get_num_threads();
  j["blas"] = openblas_get_config();
  j["best_gflops"] = gflops.back();
  j["median_gflops"] = median;
  j["all_gflops"] = gflops;
  fmt::print("{}\n", j.dump());
  return 0;
}

void register_bench_train(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("bench-train",
                                 "Measurements for the training benchmarks (bench/train/run.sh): the sgemm peak");
  cmd->require_subcommand(1);
  static SgemmPeakOptions opts;
  auto* sgemm = cmd->add_subcommand(
      "sgemm", "Peak of cblas_sgemm on n x n x n fp32 matrices with this process's threads (OMP_NUM_THREADS); "
               "prints JSON");
  sgemm->add_option("--size", opts.size, "Matrix size n")->capture_default_str();
  sgemm->add_option("--reps", opts.reps, "Timed calls (best and median reported)")->capture_default_str();
  sgemm->add_option("--warmup", opts.warmup, "Untimed calls first")->capture_default_str();
  sgemm->callback([&action] { action = [] { return run_sgemm_peak(opts); }; });
}

const CommandRegistration bench_train_registration(91, register_bench_train);

}  // namespace

}  // namespace zerodp::cli
