// `zerodp bench`: benchmarks run on all ranks of the job. Sub-commands:
//   comm   time, algbw and busbw of all-reduce, reduce-scatter and all-gather over a range of sizes,
//          and the overlap an async all-reduce achieves with a matmul (cblas_sgemm) on the caller.
//
// Times are the median over --iters iterations (after --warmup), each the slowest rank's time of
// that iteration (ranks start together after a barrier). Bandwidths follow nccl-tests: algbw = full
// buffer bytes / time; busbw = algbw·2(W-1)/W for all-reduce and algbw·(W-1)/W for reduce-scatter and
// all-gather, the rate each rank's link runs at in a ring.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <cblas.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "apps/commands.h"
#include "comm/mpi_communicator.h"
#include "comm/runtime.h"
#include "core/error.h"
#include "core/memory.h"

namespace zerodp::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct CommBenchOptions {
  bool json = false;
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 64ull << 20;
  int step = 4;
  int iters = 10;
  int warmup = 2;
  std::string dtype = "fp32";
  std::string progress;  // empty: the default (ZERODP_COMM_PROGRESS or block); the overlap runs both
  uint64_t overlap_bytes = 16ull << 20;
  int fail_rank = -1;  // hidden, for tests: this rank throws while the others wait in an all-reduce
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One run of `body` on every rank, started together after a barrier: the slowest rank's seconds.
template <typename Body>
double time_once(comm::Communicator& c, Body body) {
  c.barrier();
  const auto t0 = Clock::now();
  body();
  float t = static_cast<float>(seconds_since(t0));
  c.all_reduce(&t, 1, DType::kF32, comm::ReduceOp::kMax);
  return t;
}

// The median of `iters` runs of `body` after `warmup` untimed ones.
template <typename Body>
double time_collectively(comm::Communicator& c, int warmup, int iters, Body body) {
  std::vector<double> times;
  for (int i = 0; i < warmup + iters; ++i) {
    const double t = time_once(c, body);
    if (i >= warmup) times.push_back(t);
  }
  return median(times);
}

struct CollectiveResult {
  const char* name;
  uint64_t bytes;  // the full buffer
  size_t count;    // elements per call (per rank for reduce-scatter and all-gather)
  double seconds;
  double algbw;  // GB/s
  double busbw;
};

std::vector<CollectiveResult> bench_collectives(comm::Communicator& c, const CommBenchOptions& o, DType t) {
  const size_t es = dtype_size(t);
  const uint64_t w = static_cast<uint64_t>(c.size());
  std::vector<CollectiveResult> results;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= static_cast<uint64_t>(o.step)) {
    // Zeros stay zeros under repeated sums: no overflow to Inf, no subnormals.
    const size_t n = bytes / es, chunk = bytes / (w * es);
    Buffer a(n * es, MemCategory::kComm), b(n * es, MemCategory::kComm);
    a.zero();
    b.zero();
    const double ring = static_cast<double>(w - 1) / static_cast<double>(w);
    if (n > 0) {
      const double s = time_collectively(c, o.warmup, o.iters, [&] { c.all_reduce(a.data(), n, t); });
      const double alg = static_cast<double>(n * es) / s / 1e9;
      results.push_back({"all_reduce", n * es, n, s, alg, alg * 2 * ring});
    }
    if (chunk > 0) {
      const uint64_t full = chunk * w * es;
      double s = time_collectively(c, o.warmup, o.iters, [&] { c.reduce_scatter(a.data(), b.data(), chunk, t); });
      double alg = static_cast<double>(full) / s / 1e9;
      results.push_back({"reduce_scatter", full, chunk, s, alg, alg * ring});
      s = time_collectively(c, o.warmup, o.iters, [&] { c.all_gather(a.data(), b.data(), chunk, t); });
      alg = static_cast<double>(full) / s / 1e9;
      results.push_back({"all_gather", full, chunk, s, alg, alg * ring});
    }
    if (bytes > o.max_bytes / static_cast<uint64_t>(o.step)) break;  // the next step would overflow past max
  }
  return results;
}

struct OverlapResult {
  std::string progress;
  uint64_t bytes;
  int gemm_n;
  double t_comm, t_compute, t_both, overlap;
};

void sgemm(int n, const Buffer& a, const Buffer& b, Buffer& out) {
  // out = a·b, n×n row-major fp32.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.as<float>(), n, b.as<float>(), n, 0.f,
              out.as<float>(), n);
}

// The overlap of an async fp32 all-reduce of `bytes` with an n×n×n sgemm sized to take about as
// long as the all-reduce alone: (t_comm + t_compute - t_both) / min(t_comm, t_compute); 1 is
// perfect overlap, 0 none.
OverlapResult bench_overlap(comm::Communicator& c, const CommBenchOptions& o, const std::string& mode) {
  const size_t n_elems = o.overlap_bytes / 4;
  Buffer grads(n_elems * 4, MemCategory::kComm);
  grads.zero();
  const double t_comm_alone =
      time_collectively(c, o.warmup, 3, [&] { c.all_reduce(grads.data(), n_elems, DType::kF32); });

  // Size the matmul to take about as long as the all-reduce alone, all ranks computing at once as
  // they will: from n = 256, rescale n by the cube root of the time ratio, three times.
  constexpr int kMaxN = 4096;
  int n = 256;
  for (int round = 0; round < 3; ++round) {
    Buffer a(size_t(n) * n * 4, MemCategory::kAct), b(size_t(n) * n * 4, MemCategory::kAct),
        out(size_t(n) * n * 4, MemCategory::kAct);
    std::fill_n(a.as<float>(), size_t(n) * n, 0.5f);
    std::fill_n(b.as<float>(), size_t(n) * n, 0.25f);
    const double t = std::max(time_once(c, [&] { sgemm(n, a, b, out); }), 1e-6);
    const double next = std::clamp(n * std::cbrt(t_comm_alone / t), 64.0, double(kMaxN));
    n = (static_cast<int>(next) + 15) / 16 * 16;  // the same on every rank: t is the slowest rank's
  }
  Buffer a(size_t(n) * n * 4, MemCategory::kAct), b(size_t(n) * n * 4, MemCategory::kAct),
      out(size_t(n) * n * 4, MemCategory::kAct);
  std::fill_n(a.as<float>(), size_t(n) * n, 0.5f);
  std::fill_n(b.as<float>(), size_t(n) * n, 0.25f);

  // The three measurements alternate within each iteration, so that a change in the machine's load
  // (other jobs) affects them alike.
  std::vector<double> comm_times, compute_times, both_times;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const double tc = time_once(c, [&] { c.all_reduce(grads.data(), n_elems, DType::kF32); });
    const double tp = time_once(c, [&] { sgemm(n, a, b, out); });
    const double tb = time_once(c, [&] {
      auto work = c.all_reduce_async(grads.data(), n_elems, DType::kF32, comm::ReduceOp::kSum);
      sgemm(n, a, b, out);
      work->wait();
    });
    if (i < o.warmup) continue;
    comm_times.push_back(tc);
    compute_times.push_back(tp);
    both_times.push_back(tb);
  }
  const double t_comm = median(comm_times), t_compute = median(compute_times), t_both = median(both_times);
  const double overlap = (t_comm + t_compute - t_both) / std::min(t_comm, t_compute);
  return {mode, n_elems * 4, n, t_comm, t_compute, t_both, overlap};
}

int run_comm_bench(const CommBenchOptions& o) {
  ZDP_REQUIRE(o.min_bytes >= 1 && o.min_bytes <= o.max_bytes, "bench comm: need 1 <= --min-bytes ({}) <= --max-bytes ({})",
              o.min_bytes, o.max_bytes);
  ZDP_REQUIRE(o.iters >= 1 && o.warmup >= 0, "bench comm: --iters must be >= 1 and --warmup >= 0");
  const DType t = parse_dtype(o.dtype);
  auto world = comm::world();
  auto& mpi = dynamic_cast<comm::MpiCommunicator&>(*world);
  const int rank = world->rank(), w = world->size();

  if (o.fail_rank >= 0) {
    std::vector<float> x(1024, 1.f);
    world->barrier();
    if (rank == o.fail_rank)
      throw RuntimeFailure(fmt::format("bench comm: injected failure on rank {} (--fail-rank)", rank));
    world->all_reduce(x.data(), x.size(), DType::kF32);
    return 1;  // not reached: the failing rank ends the job
  }

  comm::MpiOptions options = mpi.options();
  if (!o.progress.empty()) options.progress = comm::parse_progress_mode(o.progress);
  auto c = mpi.split_mpi(0, rank, options);
  const auto results = bench_collectives(*c, o, t);

  std::vector<OverlapResult> overlaps;
  std::vector<comm::ProgressMode> modes = {comm::ProgressMode::kPoll, comm::ProgressMode::kBlocking};
  if (!o.progress.empty()) modes = {options.progress};
  for (comm::ProgressMode m : modes) {
    comm::MpiOptions mo = options;
    mo.progress = m;
    auto cm = mpi.split_mpi(0, rank, mo);
    overlaps.push_back(bench_overlap(*cm, o, comm::progress_mode_name(m)));
  }
  if (rank != 0) return 0;

  const int blas_threads = openblas_get_num_threads();
  if (o.json) {
    nlohmann::json j;
    j["bench"] = "comm";
    j["world_size"] = w;
    j["dtype"] = dtype_name(t);
    j["progress"] = comm::progress_mode_name(options.progress);
    j["iters"] = o.iters;
    j["warmup"] = o.warmup;
    j["mpi"] = comm::mpi_library_version().substr(0, comm::mpi_library_version().find('\n'));
    for (const auto& r : results)
      j["collectives"].push_back({{"collective", r.name}, {"bytes", r.bytes}, {"count", r.count},
                                  {"time_us", r.seconds * 1e6}, {"algbw_gbps", r.algbw}, {"busbw_gbps", r.busbw}});
    for (const auto& v : overlaps)
      j["overlap"].push_back({{"progress", v.progress}, {"bytes", v.bytes}, {"gemm_n", v.gemm_n},
                              {"blas_threads", blas_threads}, {"t_comm_ms", v.t_comm * 1e3},
                              {"t_compute_ms", v.t_compute * 1e3}, {"t_both_ms", v.t_both * 1e3},
                              {"overlap", v.overlap}});
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("# zerodp bench comm: {} ranks, {}, progress {}, median of {} iterations after {} warm-up\n", w,
             dtype_name(t), comm::progress_mode_name(options.progress), o.iters, o.warmup);
  fmt::print("# busbw: all_reduce algbw*2(W-1)/W, reduce_scatter and all_gather algbw*(W-1)/W\n");
  fmt::print("{:<16}{:>12}{:>12}{:>12}{:>12}{:>12}\n", "collective", "bytes", "count", "time_us", "algbw_GB/s",
             "busbw_GB/s");
  for (const auto& r : results)
    fmt::print("{:<16}{:>12}{:>12}{:>12.1f}{:>12.3f}{:>12.3f}\n", r.name, r.bytes, r.count, r.seconds * 1e6, r.algbw,
               r.busbw);
  fmt::print("\n# overlap: async fp32 all_reduce during an n*n*n sgemm ({} BLAS threads per rank); "
             "overlap = (t_comm + t_compute - t_both) / min(t_comm, t_compute)\n",
             blas_threads);
  fmt::print("{:<10}{:>12}{:>8}{:>12}{:>14}{:>12}{:>10}\n", "progress", "bytes", "gemm_n", "t_comm_ms", "t_compute_ms",
             "t_both_ms", "overlap");
  for (const auto& v : overlaps)
    fmt::print("{:<10}{:>12}{:>8}{:>12.2f}{:>14.2f}{:>12.2f}{:>10.2f}\n", v.progress, v.bytes, v.gemm_n, v.t_comm * 1e3,
               v.t_compute * 1e3, v.t_both * 1e3, v.overlap);
  return 0;
}

void register_bench(CLI::App& app, Action& action) {
  auto* bench = app.add_subcommand("bench", "Benchmarks (run on every rank: mpirun -n W zerodp bench ...)");
  bench->require_subcommand(1);

  auto opts = std::make_shared<CommBenchOptions>();
  auto* comm_cmd = bench->add_subcommand(
      "comm", "Collective bandwidth (all-reduce, reduce-scatter, all-gather) and compute/communication overlap");
  comm_cmd->add_flag("--json", opts->json, "Print one JSON object instead of tables");
  comm_cmd->add_option("--min-bytes", opts->min_bytes, "Smallest buffer (full bytes; suffixes KiB, MiB)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  comm_cmd->add_option("--max-bytes", opts->max_bytes, "Largest buffer")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  comm_cmd->add_option("--step", opts->step, "Factor between sizes")->check(CLI::Range(2, 1024))->capture_default_str();
  comm_cmd->add_option("--iters", opts->iters, "Timed iterations per size (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  comm_cmd->add_option("--warmup", opts->warmup, "Untimed iterations first")->check(CLI::Range(0, 100000))->capture_default_str();
  comm_cmd->add_option("--dtype", opts->dtype, "fp32, bf16 or fp16")->capture_default_str();
  comm_cmd->add_option("--progress", opts->progress,
                       "How the communication thread drives MPI: block or poll (default: ZERODP_COMM_PROGRESS, "
                       "else block; the overlap is then measured in both)")
      ->check(CLI::IsMember({"poll", "block"}));
  comm_cmd->add_option("--overlap-bytes", opts->overlap_bytes, "Size of the all-reduce overlapped with a matmul")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  comm_cmd->add_option("--fail-rank", opts->fail_rank, "For tests: this rank fails while the others wait in a collective")
      ->group("");
  comm_cmd->callback([&action, opts] { action = [opts] { return run_comm_bench(*opts); }; });
}

const CommandRegistration bench_registration(90, register_bench);

}  // namespace

}  // namespace zerodp::cli
