// zerodp's AdamW and SGD against torch.optim.AdamW / torch.optim.SGD, run by
// scripts/test/optim_reference.py with /usr/bin/python3 (or $ZERODP_PYTHON): several steps on
// random data, tensors with and without weight decay, a changing lr and clipping-style gradient
// scales. zerodp's side updates the tensors as one flat buffer cut into shards, as ZeRO does.
// All cases go to Python in one call (importing torch costs seconds). The reference is required:
// when torch cannot be imported (scripts/setup/setup.sh installs python3-torch) or the script fails, the
// test FAILS, saying why; it never skips.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "optim/lr_schedule.h"
#include "optim/optim_test_util.h"
#include "optim/optimizer.h"

namespace zerodp::optim {
namespace {

namespace fs = std::filesystem;
using testing::random_normal;

std::string python() {
  const char* env = std::getenv("ZERODP_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

fs::path source_dir() {
  if (const char* env = std::getenv("ZERODP_SOURCE_DIR"); env && *env) return env;
  return fs::path(__FILE__).parent_path().parent_path().parent_path();  // tests/optim/x.cpp -> root
}

void write_floats(const fs::path& path, const std::vector<float>& x) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  if (!f.good()) throw std::runtime_error("cannot write " + path.string());
}

std::vector<float> read_floats(const fs::path& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f.good()) return {};
  std::vector<float> x(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  return x;
}

struct Tensor {
  std::vector<int64_t> shape;
  size_t size() const {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    return n;
  }
  bool decay() const { return shape.size() >= 2; }  // docs/reference/optimizer.md#decay
};

struct Case {
  OptimizerSpec spec;
  std::vector<Tensor> tensors;
  std::vector<double> lrs;
  std::vector<float> grad_scales;
  int world = 3;  // zerodp updates the flat buffer as this many shards
  uint32_t seed = 0;

  size_t numel() const {
    size_t n = 0;
    for (const Tensor& t : tensors) n += t.size();
    return n;
  }
  std::vector<float> initial_params() const { return random_normal(numel(), seed, 0.5f); }
  std::vector<float> grads() const { return random_normal(numel() * lrs.size(), seed + 1, 0.1f); }
};

struct Result {
  std::vector<float> params, state;
};

// A small GPT-like set of tensors; the 256x160 one is large enough for the parallel path, and the
// odd sizes leave vector tails.
std::vector<Tensor> gpt_like() { return {{{96, 48}}, {{48}}, {{256, 160}}, {{160}}, {{7, 13}}, {{5}}}; }

std::map<std::string, Case> all_cases() {
  std::map<std::string, Case> cases;
  {
    Case c;
    c.spec = {OptimizerKind::kAdamW, 0.9, 0.95, 1e-8, 0.1, 0, 0, false};
    c.tensors = gpt_like();
    LrScheduleParams sp;
    sp.kind = LrScheduleKind::kWarmupCosineLR;
    sp.warmup_num_steps = 3;
    sp.total_num_steps = 10;
    sp.cos_min_ratio = 0.1;
    const LrSchedule sched(sp, 1e-2, 10);
    for (int s = 0; s < 10; ++s) {
      c.lrs.push_back(sched.lr_at(s));
      c.grad_scales.push_back(s % 3 == 1 ? 0.3f : 1.0f);
    }
    c.seed = 1000;
    cases["adamw_cosine_clip"] = c;
  }
  {
    Case c;
    c.spec = {OptimizerKind::kAdamW, 0.9, 0.999, 1e-8, 0.0, 0, 0, false};
    c.tensors = gpt_like();
    c.lrs.assign(6, 1e-3);
    c.grad_scales.assign(6, 1.0f);
    c.world = 4;
    c.seed = 2000;
    cases["adamw_no_decay"] = c;
  }
  {
    Case c;
    c.spec = {OptimizerKind::kSGD, 0.9, 0.999, 1e-8, 0.01, 0.9, 0.1, false};
    c.tensors = gpt_like();
    c.lrs = {0.1, 0.1, 0.05, 0.05, 0.02};
    c.grad_scales = {1.0f, 0.5f, 1.0f, 1.0f, 0.25f};
    c.seed = 3000;
    cases["sgd_momentum_wd"] = c;
  }
  {
    Case c;
    c.spec = {OptimizerKind::kSGD, 0.9, 0.999, 1e-8, 0.0, 0.8, 0.0, true};
    c.tensors = gpt_like();
    c.lrs.assign(5, 0.05);
    c.grad_scales.assign(5, 1.0f);
    c.world = 2;
    c.seed = 4000;
    cases["sgd_nesterov"] = c;
  }
  return cases;
}

// The run with zerodp: one flat buffer, cut into `world` shards, each updated with its segments
// (tensor ∩ shard) and its own state planes, as the engine holds them.
Result run_zerodp(const Case& c) {
  const std::vector<float> p0 = c.initial_params(), grads = c.grads();
  const size_t n = p0.size();
  const size_t planes = state_floats_per_param(c.spec);
  std::vector<ParamSegment> tensors;
  size_t off = 0;
  for (const Tensor& t : c.tensors) {
    tensors.push_back({off, t.size(), t.decay()});
    off += t.size();
  }
  const size_t world = static_cast<size_t>(c.world);
  const size_t shard = (n + world - 1) / world;
  Result r{p0, std::vector<float>(planes * n, 0.0f)};
  std::vector<std::vector<float>> state(world);
  for (size_t step = 0; step < c.lrs.size(); ++step) {
    for (size_t rank = 0; rank < world; ++rank) {
      const size_t lo = std::min(n, rank * shard), hi = std::min(n, lo + shard), len = hi - lo;
      state[rank].resize(planes * len, 0.0f);
      std::vector<ParamSegment> mine;
      for (const ParamSegment& s : tensors) {
        const size_t b = std::max(lo, s.offset), e = std::min(hi, s.offset + s.count);
        if (b < e) mine.push_back({b - lo, e - b, s.decay});
      }
      optimizer_step(c.spec, c.lrs[step], static_cast<int64_t>(step) + 1, r.params.data() + lo,
                     grads.data() + step * n + lo, state[rank].data(), len, mine, c.grad_scales[step]);
    }
  }
  // Reassemble the state planes in torch's order: all first moments, then all second moments.
  for (size_t rank = 0; rank < world; ++rank) {
    const size_t lo = std::min(n, rank * shard), len = std::min(n, lo + shard) - lo;
    for (size_t k = 0; k < planes; ++k)
      std::copy_n(state[rank].begin() + static_cast<std::ptrdiff_t>(k * len), len,
                  r.state.begin() + static_cast<std::ptrdiff_t>(k * n + lo));
  }
  return r;
}

struct TorchRun {
  std::string unavailable;  // non-empty: the torch reference could not run at all
  std::string failure;      // non-empty: the script failed
  std::map<std::string, Result> results;
};

// Runs every case through torch once per test binary.
const TorchRun& torch_run() {
  static const TorchRun run = [] {
    TorchRun r;
    const fs::path script = source_dir() / "scripts/test/optim_reference.py";
    if (!fs::exists(script)) {
      r.unavailable = script.string() + " not found (set ZERODP_SOURCE_DIR to the source tree)";
      return r;
    }
    const fs::path root = fs::temp_directory_path() / fmt::format("zerodp_optim_torch_{}", ::getpid());
    std::string dirs;
    for (const auto& [name, c] : all_cases()) {
      const fs::path dir = root / name;
      fs::create_directories(dir);
      nlohmann::json spec = {{"optimizer", c.spec.kind == OptimizerKind::kAdamW ? "adamw" : "sgd"},
                             {"lrs", c.lrs},
                             {"grad_scales", c.grad_scales},
                             {"beta1", c.spec.beta1},
                             {"beta2", c.spec.beta2},
                             {"eps", c.spec.eps},
                             {"weight_decay", c.spec.weight_decay},
                             {"momentum", c.spec.momentum},
                             {"dampening", c.spec.dampening},
                             {"nesterov", c.spec.nesterov}};
      for (const Tensor& t : c.tensors) {
        spec["shapes"].push_back(t.shape);
        spec["decay"].push_back(t.decay());
      }
      std::ofstream(dir / "spec.json") << spec.dump();
      write_floats(dir / "params.bin", c.initial_params());
      write_floats(dir / "grads.bin", c.grads());
      dirs += ' ';
      dirs += dir.string();
    }
    const std::string cmd = fmt::format("{} {}{} 2>&1", python(), script.string(), dirs);
    std::string output;
    int status = -1;
    if (FILE* pipe = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, pipe)) output += buf;
      status = ::pclose(pipe);
    }
    const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == 77 || code == 127) {  // 77: torch or numpy cannot be imported; 127: no such python
      r.unavailable = fmt::format("{} (exit {}): {}", python(), code, output);
    } else if (code != 0) {
      r.failure = fmt::format("`{}` exited {}:\n{}", cmd, code, output);
    } else {
      for (const auto& [name, c] : all_cases())
        r.results[name] = {read_floats(root / name / "out_params.bin"),
                           read_floats(root / name / "out_state.bin")};
    }
    std::error_code ec;
    fs::remove_all(root, ec);
    return r;
  }();
  return run;
}

// The largest |a − b| / (atol + rtol·|b|) (<= 1 passes), where it is, and the largest relative
// difference.
struct Diff {
  double worst = 0, max_rel = 0;
  size_t at = 0;
};
Diff diff(const std::vector<float>& a, const std::vector<float>& b, double atol, double rtol) {
  Diff d;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double e = std::abs(static_cast<double>(a[i]) - b[i]);
    const double r = e / (atol + rtol * std::abs(static_cast<double>(b[i])));
    if (!(r <= d.worst)) d.worst = r, d.at = i;
    if (b[i] != 0) d.max_rel = std::max(d.max_rel, e / std::abs(static_cast<double>(b[i])));
  }
  return d;
}

void compare_with_torch(const TorchRun& run, const std::string& name) {
  SCOPED_TRACE(name);
  const Case c = all_cases().at(name);
  const Result& ref = run.results.at(name);
  const Result ours = run_zerodp(c);
  ASSERT_EQ(ref.params.size(), ours.params.size());
  ASSERT_EQ(ref.state.size(), ours.state.size());
  // 1e-5 relative, with an absolute floor for values that cancel to near zero. (On an AVX2
  // machine with Debian's torch 1.13 the two agree bit for bit.)
  const Diff dp = diff(ours.params, ref.params, 1e-7, 1e-5);
  const Diff ds = diff(ours.state, ref.state, 1e-9, 1e-5);
  EXPECT_LE(dp.worst, 1.0) << "parameter " << dp.at << ": zerodp " << ours.params[dp.at] << ", torch "
                           << ref.params[dp.at];
  EXPECT_LE(ds.worst, 1.0) << "state " << ds.at << ": zerodp " << ours.state[ds.at] << ", torch "
                           << ref.state[ds.at];
  // The parameters did move: a comparison of untouched buffers would prove nothing.
  const std::vector<float> p0 = c.initial_params();
  double moved = 0;
  for (size_t i = 0; i < p0.size(); ++i) moved = std::max(moved, std::abs(double(ref.params[i]) - p0[i]));
  EXPECT_GT(moved, 1e-4);
  ::testing::Test::RecordProperty("max_rel_diff_params_" + name, fmt::format("{:.3g}", dp.max_rel));
  ::testing::Test::RecordProperty("max_rel_diff_state_" + name, fmt::format("{:.3g}", ds.max_rel));
  std::printf("%s: max relative difference vs torch: params %.3g, state %.3g\n", name.c_str(),
              dp.max_rel, ds.max_rel);
}

// One test for all cases: ctest runs each test in its own process, and each process would pay for
// importing torch again.
TEST(OptimVsTorch, AdamWAndSGDMatchTorchOptim) {
  const TorchRun& run = torch_run();
  ASSERT_TRUE(run.unavailable.empty())
      << "the torch reference is unavailable, so zerodp's optimizers cannot be checked against it: "
      << run.unavailable
      << "\nInstall Debian's python3-torch and python3-numpy for /usr/bin/python3 (scripts/setup/setup.sh), or set "
         "ZERODP_PYTHON to a python3 that has them.";
  ASSERT_TRUE(run.failure.empty()) << run.failure;
  // adamw_cosine_clip: decay on 2-D tensors, a warmup-cosine lr, clipping scales on some steps;
  // adamw_no_decay: torch's defaults with weight decay 0; sgd_momentum_wd: momentum, dampening and
  // L2 decay; sgd_nesterov.
  for (const auto& [name, c] : all_cases()) compare_with_torch(run, name);
}

}  // namespace
}  // namespace zerodp::optim
