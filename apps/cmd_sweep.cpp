// `zerodp sweep`: really trains (short runs through mpirun) across ZeRO stages and micro-batches
// under a per-rank --memory-budget, finds the largest micro-batch each stage fits (a run that exits
// 3 does not fit), compares every run's measured peaks with plan/estimator's prediction, and writes
// a CSV and PNG plots (docs/planner.md shows them; by default into docs/benchmarks/sweep/, plotted by
// bench/sweep/plot_sweep.py).
//
// Each search starts at the micro-batch the estimator predicts and walks up (or down) one at a time
// until the boundary is found, so a good prediction costs two runs.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/model_options.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/output_path.h"
#include "core/json.h"
#include "core/log.h"
#include "plan/estimator.h"
#include "plan/presets.h"
#include "train/train_config.h"

namespace zerodp::cli {
namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  int layers = 4, embd = 256, heads = 4, vocab = 256, seq = 16;
  std::string arch = "gpt2";
  LlamaOptions llama;  // --arch llama
  int gpus = 4;
  std::vector<int> worlds = {1, 2, 4};
  std::string dtype = "fp32";
  std::string memory_budget = "64MB";
  int max_micro_batch = 64;
  int steps = 2;
  std::string text = "data/tinyshakespeare.txt";
  std::string out_dir = "docs/benchmarks/sweep";
  std::string mpirun = "mpirun";
  std::string python = "/usr/bin/python3";
  std::string plot_script = "bench/sweep/plot_sweep.py";
  std::string reference_gpu_memory = "80GB";
  std::string work_dir;  // empty: a new temporary directory
};
SweepOptions g_sweep;

// What one run measured (the largest peak over its ranks, per category) and what was predicted.
struct Run {
  int world = 0, stage = 0, micro_batch = 0;
  bool fits = false;
  std::map<std::string, uint64_t> measured;
  plan::MemoryEstimate predicted;
  int64_t predicted_max = 0;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs a shell command with its output in `log`; returns its exit code.
int shell(const std::string& cmd, const fs::path& log) {
  const std::string full = cmd + " > " + quote(log.string()) + " 2>&1";
  const int status = std::system(full.c_str());
  ZDP_CHECK(status != -1, "could not start: {}", cmd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

class Sweeper {
 public:
  Sweeper(const SweepOptions& o) : o_(o), budget_(parse_bytes(o.memory_budget, "--memory-budget")) {
    self_ = fs::read_symlink("/proc/self/exe").string();
    fs::create_directories(o.out_dir);
    if (o.work_dir.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "zerodp-sweep-XXXXXX").string();
      ZDP_CHECK(mkdtemp(tmpl.data()) != nullptr, "cannot create a temporary directory {}", tmpl);
      work_ = tmpl;
    } else {
      work_ = o.work_dir;
      fs::create_directories(work_);
    }
    log::info("sweep: runs, logs and metrics in {}", work_.string());
    if (model::parse_arch(o.arch, "--arch") == model::Arch::kLlama) {
      model_ = llama_config(o.layers, o.heads, o.embd, o.vocab, o.seq, o.llama);
    } else {
      ZDP_REQUIRE(!any_llama_option(o.llama), "--kv-heads, --head-dim, ... are for --arch llama");
      model_ = model::GPT2Config{o.layers, o.heads, o.embd, o.vocab, o.seq};
    }
    model_.validate();
    dtype_ = parse_dtype(o.dtype);
  }

  void prepare() {
    ZDP_REQUIRE(fs::exists(o_.text), "--text {}: no such file (run from the repository root)", o_.text);
    tokens_ = (work_ / "tokens.bin").string();
    init_ = (work_ / (model_.is_gpt2() ? "init.safetensors" : "init")).string();
    int rc = shell(fmt::format("{} tokenize --text {} --out {}", quote(self_), quote(o_.text), quote(tokens_)),
                   work_ / "tokenize.log");
    ZDP_REQUIRE(rc == 0, "zerodp tokenize failed (exit {}), see {}", rc, (work_ / "tokenize.log").string());
    rc = shell(fmt::format("{} init --out {} --layers {} --heads {} --embd {} --vocab {} --ctx {} --seed 1{}", quote(self_),
                           quote(init_), o_.layers, o_.heads, o_.embd, o_.vocab, o_.seq,
                           model_.is_gpt2() ? std::string() : " --arch llama " + llama_flags(o_.llama)),
               work_ / "init.log");
    ZDP_REQUIRE(rc == 0, "zerodp init failed (exit {}), see {}", rc, (work_ / "init.log").string());
  }

  plan::PlanInput input(int world, int stage, int B) const {
    plan::PlanInput in;
    in.model = model_;
    in.world = world;
    in.zero.stage = stage;
    in.precision = train::TrainConfig{}.precision;  // zerodp train's: fp32 accumulation under bf16/fp16
    in.precision.dtype = dtype_;
    in.micro_batch = B;
    in.seq = o_.seq;
    return in;
  }

  const Run& run(int world, int stage, int B) {
    const auto key = std::make_tuple(world, stage, B);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    Run r;
    r.world = world;
    r.stage = stage;
    r.micro_batch = B;
    r.predicted = plan::estimate_memory(input(world, stage, B));
    r.predicted_max = plan::max_micro_batch(input(world, stage, 1), budget_).value_or(0);
    const std::string name = fmt::format("w{}_s{}_b{}", world, stage, B);
    const fs::path metrics = work_ / (name + ".jsonl"), log = work_ / (name + ".log");
    fs::remove(metrics);
    const std::string cmd = fmt::format(
        "OMP_NUM_THREADS=1 {} -n {} --oversubscribe {} train --init {} --data {} --steps {} --micro-batch {} --seq {} "
        "--zero-stage {} --dtype {} --memory-budget {} --metrics {} --log-every 0",
        o_.mpirun, world, quote(self_), quote(init_), quote(tokens_), o_.steps, B, o_.seq, stage, o_.dtype, budget_,
        quote(metrics.string()));
    const int rc = shell(cmd, log);
    ZDP_REQUIRE(rc == 0 || rc == 3, "a sweep run failed with exit code {} (not 0, not 3 for over budget): {}; see {}",
                rc, cmd, log.string());
    r.fits = rc == 0;
    if (r.fits) {
      std::ifstream in(metrics);
      std::string line;
      while (std::getline(in, line)) {
        const nlohmann::json j = parse_json(line, metrics.string());
        if (j.at("event") != "memory") continue;
        for (const auto& [k, v] : j.at("peak_bytes").items())
          r.measured[k] = std::max<uint64_t>(r.measured[k], v.get<uint64_t>());
      }
      ZDP_CHECK(r.measured.count("total"), "no memory record in {}", metrics.string());
    }
    log::info("sweep: W={} stage {} B={}: {} (predicted total {:.2f} MB, measured {:.2f} MB)", world, stage, B,
              r.fits ? "fits" : "over budget", r.predicted.total / 1e6,
              r.fits ? r.measured["total"] / 1e6 : 0.0);
    return cache_.emplace(key, std::move(r)).first->second;
  }

  // The largest micro-batch that trains under the budget, 0 if none; starts at the prediction.
  int largest_fit(int world, int stage) {
    const int64_t guess = plan::max_micro_batch(input(world, stage, 1), budget_).value_or(1);
    int B = static_cast<int>(std::clamp<int64_t>(guess, 1, o_.max_micro_batch));
    if (run(world, stage, B).fits) {
      while (B < o_.max_micro_batch && run(world, stage, B + 1).fits) ++B;
      return B;
    }
    while (B > 1 && !run(world, stage, B - 1).fits) --B;
    return B - 1;
  }

  const fs::path& work() const { return work_; }

  void write_csv(const fs::path& path) const {
    std::ofstream f(path);
    f << "world,stage,micro_batch,fits";
    for (const char* c : {"param", "grad", "master", "optim", "gathered", "comm", "act", "total"})
      f << ",measured_" << c;
    f << ",predicted_param,predicted_grad,predicted_master,predicted_optim,predicted_act,predicted_working,"
         "predicted_total,predicted_max_micro_batch,memory_budget\n";
    for (const auto& [key, r] : cache_) {
      f << r.world << ',' << r.stage << ',' << r.micro_batch << ',' << (r.fits ? 1 : 0);
      for (const char* c : {"param", "grad", "master", "optim", "gathered", "comm", "act", "total"}) {
        auto it = r.measured.find(c);
        f << ',' << (it == r.measured.end() ? std::string() : std::to_string(it->second));
      }
      const plan::MemoryEstimate& m = r.predicted;
      f << ',' << m.param << ',' << m.grad << ',' << m.master << ',' << m.optim << ',' << m.act << ',' << m.transient
        << ',' << m.total << ',' << r.predicted_max << ',' << budget_ << '\n';
    }
  }

  // The estimator alone for GPT-2 XL (bf16, fp32 gradient accumulation, T = 1024, checkpointing),
  // plain DP against ZeRO-2 on GPUs of --reference-gpu-memory: the global batch W·B reachable.
  void write_reference(const fs::path& path) const {
    const uint64_t gpu = parse_bytes(o_.reference_gpu_memory, "--reference-gpu-memory");
    std::ofstream f(path);
    f << "world,stage,activation_checkpointing,max_micro_batch,global_batch,gpu_memory\n";
    for (int W : {1, 2, 4, 8, 16, 32, 64}) {
      for (int stage : {0, 2}) {
        for (bool ckpt : {false, true}) {
          plan::PlanInput in;
          in.model = plan::gpt2_preset("gpt2-xl");
          in.world = W;
          in.zero.stage = stage;
          in.precision.dtype = DType::kBF16;
          in.precision.fp32_grad_accum = true;
          in.zero.activation_checkpointing = ckpt;
          const int64_t b = plan::max_micro_batch(in, gpu).value_or(0);
          f << W << ',' << stage << ',' << (ckpt ? 1 : 0) << ',' << b << ',' << W * b << ',' << gpu << '\n';
        }
      }
    }
  }

 private:
  const SweepOptions& o_;
  uint64_t budget_;
  std::string self_, tokens_, init_;
  fs::path work_;
  model::ModelConfig model_;
  DType dtype_;
  std::map<std::tuple<int, int, int>, Run> cache_;
};

int run_sweep(const SweepOptions& o) {
  ZDP_REQUIRE(o.gpus >= 1 && o.max_micro_batch >= 1 && o.steps >= 1, "--gpus, --max-micro-batch, --steps must be >= 1");
  check_output_path(o.out_dir, OutputKind::kDirectoryTree, "--out-dir");
  check_output_path(o.work_dir, OutputKind::kDirectoryTree, "--work-dir");
  Sweeper s(o);
  s.prepare();
  std::vector<std::string> summary;
  for (int stage = 0; stage <= 3; ++stage) {
    const int b = s.largest_fit(o.gpus, stage);
    summary.push_back(fmt::format("  W={} stage {}: largest micro-batch {}", o.gpus, stage, b));
  }
  for (int W : o.worlds) {
    for (int stage : {0, 2}) {
      const int b = s.largest_fit(W, stage);
      summary.push_back(fmt::format("  W={} stage {}: largest micro-batch {}, global batch {}", W, stage, b, W * b));
    }
  }
  const fs::path csv = fs::path(o.out_dir) / "sweep.csv", ref = fs::path(o.out_dir) / "gpt2xl_global_batch.csv";
  s.write_csv(csv);
  s.write_reference(ref);
  for (const auto& line : summary) fmt::print("{}\n", line);
  fmt::print("wrote {} and {}\n", csv.string(), ref.string());
  if (!o.plot_script.empty()) {
    const int rc = shell(fmt::format("{} {} {} {}", o.python, quote(o.plot_script), quote(o.out_dir), quote(o.out_dir)),
                         s.work() / "plot.log");
    ZDP_REQUIRE(rc == 0, "plotting failed (exit {}): see {}", rc, (s.work() / "plot.log").string());
    fmt::print("plots in {}\n", o.out_dir);
  }
  return 0;
}

void register_sweep(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "sweep", "Train short runs across ZeRO stages and micro-batches under a memory budget; CSV and plots");
  SweepOptions& o = g_sweep;
  cmd->add_option("--arch", o.arch, "gpt2 or llama")->capture_default_str();
  cmd->add_option("--layers", o.layers, "Layers")->capture_default_str();
  cmd->add_option("--embd", o.embd, "Width")->capture_default_str();
  cmd->add_option("--heads", o.heads, "Heads")->capture_default_str();
  cmd->add_option("--vocab", o.vocab, "Vocabulary (>= 256: the text is tokenized by bytes)")->capture_default_str();
  add_llama_options(cmd, o.llama);
  cmd->add_option("--seq", o.seq, "Tokens per sequence (also the context)")->capture_default_str();
  cmd->add_option("--gpus", o.gpus, "Ranks for the stage sweep")->capture_default_str();
  cmd->add_option("--worlds", o.worlds, "Ranks for the DP vs ZeRO-2 global batch sweep")->delimiter(',')->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "Compute dtype")->capture_default_str();
  cmd->add_option("--memory-budget", o.memory_budget, "Per-rank budget of every run")->capture_default_str();
  cmd->add_option("--max-micro-batch", o.max_micro_batch, "Largest micro-batch tried")->capture_default_str();
  cmd->add_option("--steps", o.steps, "Steps of each run")->capture_default_str();
  cmd->add_option("--text", o.text, "Training text (tokenized by bytes)")->capture_default_str();
  cmd->add_option("--out-dir", o.out_dir, "Where the CSV, plots and run logs go")->capture_default_str();
  cmd->add_option("--mpirun", o.mpirun, "The MPI launcher")->capture_default_str();
  cmd->add_option("--python", o.python, "A python3 with matplotlib")->capture_default_str();
  cmd->add_option("--plot-script", o.plot_script, "The plotting script (empty: no plots)")->capture_default_str();
  cmd->add_option("--reference-gpu-memory", o.reference_gpu_memory, "GPU memory for the GPT-2 XL DP vs ZeRO-2 estimate")
      ->capture_default_str();
  cmd->add_option("--work-dir", o.work_dir, "Where runs, logs and metrics go (default: a new temporary directory)");
  cmd->callback([&action] { action = [] { return run_sweep(g_sweep); }; });
}
const CommandRegistration sweep_registration(80, register_sweep);

}  // namespace
}  // namespace zerodp::cli
