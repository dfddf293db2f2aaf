// zero::Engine::evaluate on the W ranks this binary runs on: forward passes only, the same per-sequence
// losses at every stage (stage 3 gathering each unit, with and without resharding after the forward),
// none of its collectives in the traffic ledger, no gathered unit left behind, and training after it
// bitwise what it is without it.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/runtime.h"
#include "core/memory.h"
#include "model/init.h"
#include "model/layout.h"
#include "zero/engine.h"

using namespace zerodp;
using namespace zerodp::zero;

namespace {

model::GPT2Config eval_model() { return {2, 4, 64, 64, 32}; }  // L2 H4 C64 V64 N32

std::vector<int32_t> eval_stream() {
  std::mt19937 rng(7);
  std::vector<int32_t> t(6000);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 5 + rng() % 3) % 64);
  return t;
}

struct EvalRun {
  std::vector<std::vector<double>> sums;  // per evaluation: B per pass
  std::vector<double> losses;
  std::vector<std::vector<float>> params;
  uint64_t traffic = 0;
  int64_t gathered_after_eval = -1;  // bytes live under `gathered` right after an evaluation
};

// Three steps; with `evaluate`, an evaluation of 3 passes before the first step and after each step.
EvalRun run(int stage, bool reshard, bool evaluate) {
  const std::shared_ptr<comm::Communicator> world = comm::world();
  comm::TrafficLedger ledger;
  const std::shared_ptr<comm::Communicator> comm = world->split(0, world->rank());
  comm->set_traffic_ledger(&ledger);
  const model::ParamLayout layout(eval_model());
  const int W = comm->size(), r = comm->rank(), B = 2, T = 16;
  static const std::vector<int32_t> stream = eval_stream();
  const auto fill = [&](size_t off, int32_t* in, int32_t* tg) {
    for (int i = 0; i < B * T; ++i) {
      in[i] = stream[(off + i) % stream.size()];
      tg[i] = stream[(off + i + 1) % stream.size()];
    }
  };
  EngineConfig cfg;
  cfg.zero.stage = stage;
  cfg.micro_batch = B;
  cfg.seq = T;
  cfg.zero.reshard_after_forward = reshard;
  cfg.zero.stage3_max_live_parameters = 120000;
  cfg.zero.stage3_prefetch_bucket_size = 60000;
  EvalRun out;
  Engine engine(layout, comm, cfg);
  engine.load([&layout](int u, size_t b, size_t n, float* dst) {
    model::init_unit_range(layout.config(), layout, u, b, n, 4321, dst);
  });
  const auto eval = [&] {
    const uint64_t before = ledger.total_bytes_sent();
    out.sums.push_back(engine.evaluate(3, [&](uint64_t p, int32_t* in, int32_t* tg) {
      fill(3000 + (p * W + static_cast<uint64_t>(r)) * B * T, in, tg);
    }));
    EXPECT_EQ(ledger.total_bytes_sent(), before) << "evaluation's collectives are not training traffic";
    out.gathered_after_eval = static_cast<int64_t>(MemoryLedger::global().live(MemCategory::kGathered));
  };
  if (evaluate) eval();
  for (int s = 0; s < 3; ++s) {
    const StepResult res = engine.step(
        1, [&](int, int32_t* in, int32_t* tg) { fill((static_cast<size_t>(s) * W + r) * B * T, in, tg); }, 1e-2, 0);
    out.losses.push_back(res.loss);
    if (evaluate) eval();
  }
  out.traffic = ledger.total_bytes_sent();
  out.params.resize(layout.num_units());
  engine.consolidate([&](int u, const float* d) { out.params[u].assign(d, d + layout.unit_numel(u)); });
  return out;
}

TEST(Evaluate, ForwardOnlyTheSameAtEveryStageAndTrainingUnchanged) {
  const EvalRun ref = run(0, true, true);
  ASSERT_EQ(ref.sums.size(), 4u);
  for (const auto& s : ref.sums) ASSERT_EQ(s.size(), 6u);  // 3 passes of B = 2
  // Each sum is T = 16 tokens' cross-entropy (about ln 64 each at the start), and each evaluation sees
  // the weights of its moment.
  for (double x : ref.sums.front()) EXPECT_NEAR(x, 16 * std::log(64.0), 16.0);
  EXPECT_NE(ref.sums.front(), ref.sums.back());
  for (int stage = 0; stage <= 3; ++stage) {
    for (const bool reshard : {true, false}) {
      if (stage < 3 && !reshard) continue;
      const std::string what = "stage " + std::to_string(stage) + (reshard ? "" : " (kept gathered)");
      const EvalRun with = run(stage, reshard, true), without = run(stage, reshard, false);
      EXPECT_EQ(with.sums, ref.sums) << what << ": the forward's per-sequence losses, bit for bit";
      EXPECT_EQ(with.losses, without.losses) << what;
      EXPECT_EQ(with.traffic, without.traffic) << what;
      if (comm::world()->rank() == 0) {
        EXPECT_EQ(with.params, without.params) << what;
      }
      if (stage == 3) {
        EXPECT_EQ(with.gathered_after_eval, 0) << what << ": every gathered unit released";
      }
    }
  }
}

}  // namespace
