// The ZeRO engine on the W ranks this binary runs on (mpirun -n W, W = 1..4).
//
// References need no communication: every rank also trains the same model alone (a communicator of
// one rank) on the same global batch, B_ref = W·B·G sequences in one micro-step (docs/reference/data-order.md#ranks makes
// the global batches identical), and compares.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "comm/runtime.h"
#include "core/error.h"
#include "core/memory.h"
#include "model/init.h"
#include "model/layout.h"
#include "zero/engine.h"

using namespace zerodp;
using namespace zerodp::zero;

namespace {

std::shared_ptr<comm::Communicator> world() { return comm::world(); }

// A communicator of all ranks (or of this rank alone) with its own traffic ledger.
struct Group {
  std::unique_ptr<comm::TrafficLedger> ledger = std::make_unique<comm::TrafficLedger>();
  std::shared_ptr<comm::Communicator> comm;
  explicit Group(bool alone) {
    comm = world()->split(alone ? world()->rank() : 0, world()->rank());
    comm->set_traffic_ledger(ledger.get());
  }
};

model::GPT2Config small_model() { return {2, 4, 64, 64, 32}; }  // L2 H4 C64 V64 N32

// A Llama of the same vocabulary: grouped-query heads, an untied head (a unit of its own), q/k/v/o
// biases and llama3 RoPE scaling, so every path of the architecture is in the bits compared.
model::LlamaConfig small_llama() {
  model::LlamaConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 64;
  c.head_dim = 16;
  c.intermediate_size = 96;
  c.vocab_size = 64;
  c.n_ctx = 32;
  c.attention_bias = true;
  c.rope_scaling = model::Llama3RopeScaling{8.0, 1.0, 4.0, 8};
  return c;
}

// A token stream with structure to learn (a noisy repeating pattern), read as docs/reference/data-order.md#ranks says.
struct Stream {
  std::vector<int32_t> tokens;
  explicit Stream(int V) {
    std::mt19937 rng(99);
    for (int i = 0; i < 20000; ++i) tokens.push_back((i * 7 + (rng() % 5 == 0 ? rng() % V : 0)) % V);
  }
  // Rank r's micro-batch g of step s for (W, B, T, G).
  void load(int64_t s, int g, int W, int r, int B, int T, int G, int32_t* in, int32_t* tg) const {
    const size_t off = ((static_cast<size_t>(s) * G + g) * W + r) * B * T;
    for (int i = 0; i < B * T; ++i) {
      in[i] = tokens[(off + i) % tokens.size()];
      tg[i] = tokens[(off + i + 1) % tokens.size()];
    }
  }
};

UnitSource init_source(const model::ParamLayout& layout) {
  return [&layout](int u, size_t b, size_t n, float* dst) {
    model::init_unit_range(layout.config(), layout, u, b, n, 1234, dst);
  };
}

struct RunResult {
  std::vector<double> losses, norms;
  std::vector<bool> skipped;
  std::vector<std::vector<int>> nonfinite_units;
  std::vector<std::vector<float>> params;  // consolidated, every unit (rank 0 only)
  uint64_t traffic = 0;
  double lr = 0;
};

RunResult run(bool alone, EngineConfig cfg, int G, int steps, double lr = 1e-3, double clip = 0.0,
              GradientFault fault = {}, const model::ModelConfig& model = small_model()) {
  Group group(alone);
  const model::ParamLayout layout(model);
  const int W = group.comm->size(), r = group.comm->rank();
  static const Stream stream(small_model().vocab_size);
  RunResult out;
  out.lr = lr;
  {
    Engine engine(layout, group.comm, cfg);
    engine.set_gradient_fault(fault);
    engine.load(init_source(layout));
    for (int s = 0; s < steps; ++s) {
      const StepResult res = engine.step(
          G, [&](int g, int32_t* in, int32_t* tg) { stream.load(s, g, W, r, cfg.micro_batch, cfg.seq, G, in, tg); },
          lr, clip);
      out.losses.push_back(res.loss);
      out.norms.push_back(res.grad_norm);
      out.skipped.push_back(res.skipped);
      out.nonfinite_units.push_back(res.nonfinite_units);
    }
    out.traffic = group.ledger->total_bytes_sent();
    out.params.resize(layout.num_units());
    engine.consolidate([&](int u, const float* d) { out.params[u].assign(d, d + layout.unit_numel(u)); });
  }
  return out;
}

EngineConfig config(int stage, int B, int T = 16, DType dtype = DType::kF32) {
  EngineConfig c;
  c.zero.stage = stage;
  c.micro_batch = B;
  c.seq = T;
  c.precision.dtype = dtype;
  c.optimizer.weight_decay = 0.1;
  c.zero.reduce_bucket_size = 20000;  // several buckets
  c.zero.allgather_bucket_size = 20000;
  c.zero.stage3_max_live_parameters = 120000;
  c.zero.stage3_prefetch_bucket_size = 60000;
  return c;
}

void expect_same_training(const RunResult& got, const RunResult& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    EXPECT_NEAR(got.losses[s], ref.losses[s], tol * std::fabs(ref.losses[s])) << what << " step " << s;
    EXPECT_NEAR(got.norms[s], ref.norms[s], 10 * tol * std::fabs(ref.norms[s])) << what << " step " << s;
  }
  if (world()->rank() != 0) return;
  // Parameters: AdamW divides each gradient by its own running magnitude, so an element whose
  // gradient is ~0 (at the level of the rounding that another summation order changes) moves by up to
  // ±lr a step either way; such elements are rare, and no element can move further than 2·lr a step.
  // So: at most 1 in 10,000 elements (at least one) beyond tol, none beyond 2·lr·steps.
  double worst = 0;
  size_t beyond = 0, total = 0;
  for (size_t u = 0; u < ref.params.size(); ++u)
    for (size_t i = 0; i < ref.params[u].size(); ++i) {
      const double d = std::fabs(got.params[u][i] - ref.params[u][i]);
      worst = std::max(worst, d);
      beyond += d >= tol;
      ++total;
    }
  EXPECT_LE(beyond, std::max<size_t>(1, total / 10000)) << what << ": parameters differing by " << tol << " or more";
  EXPECT_LT(worst, 2 * ref.lr * static_cast<double>(ref.losses.size())) << what << ": largest parameter difference";
}

}  // namespace

// ---- results: every stage equals one-rank training on the same global batch --------------------

TEST(Engine, EveryStageMatchesSingleRankTraining) {
  const int W = world()->size();
  const int B = 2, steps = 6;
  const RunResult ref = run(true, config(0, W * B), 1, steps);
  for (int stage = 0; stage <= 3; ++stage) {
    const RunResult got = run(false, config(stage, B), 1, steps);
    expect_same_training(got, ref, 1e-4, "stage " + std::to_string(stage));
  }
}

TEST(Engine, Stage3PersistentUnitsMatchAndStayWhole) {
  const int W = world()->size();
  const int B = 2, steps = 4;
  const model::ParamLayout layout(small_model());
  const RunResult ref = run(true, config(0, W * B), 1, steps);
  // Blocks (about 50k elements) stay whole; the embedding unit (about 20k)... both, then one.
  for (size_t threshold : {size_t{1} << 30, layout.unit_numel(1)}) {
    EngineConfig c = config(3, B);
    c.zero.stage3_param_persistence_threshold = threshold;
    const uint64_t before = MemoryLedger::global().live(MemCategory::kParam);
    RunResult got;
    uint64_t param_bytes = 0;
    {
      Group group(false);
      Engine engine(layout, group.comm, c);
      param_bytes = MemoryLedger::global().live(MemCategory::kParam) - before;
      uint64_t want = 0;
      for (int u = 0; u < layout.num_units(); ++u)
        want += 4 * (layout.unit_numel(u) < threshold ? engine.shards().unit(u).padded : engine.shards().unit(u).shard);
      EXPECT_EQ(param_bytes, want) << "threshold " << threshold;
    }
    got = run(false, c, 1, steps);
    expect_same_training(got, ref, 1e-4, "stage 3 persistence " + std::to_string(threshold));
    // Whole units are never gathered: with every unit whole, stage 3 moves what stage 2 moves (the
    // reduce-scatters, and the all-gathers after each update).
    if (threshold == size_t{1} << 30) {
      EXPECT_EQ(got.traffic, run(false, config(2, B), 1, steps).traffic);
    }
  }
}

TEST(Engine, AccumulationMatchesSingleRankTraining) {
  const int W = world()->size();
  const int B = 2, G = 2, steps = 6;
  const RunResult ref = run(true, config(0, W * B * G), 1, steps);
  for (int stage : {0, 1, 2, 3}) {
    const RunResult got = run(false, config(stage, B), G, steps);
    expect_same_training(got, ref, 1e-4, "G=2 stage " + std::to_string(stage));
  }
}

TEST(Engine, Stage3LargerMicroBatchAndClipping) {
  const int W = world()->size();
  const int B = 4, steps = 6;
  const RunResult ref = run(true, config(0, W * B), 1, steps, 1e-3, 0.5);
  for (bool reshard : {true, false}) {
    EngineConfig c = config(3, B);
    c.zero.reshard_after_forward = reshard;
    const RunResult got = run(false, c, 1, steps, 1e-3, 0.5);
    expect_same_training(got, ref, 1e-4, reshard ? "stage 3 clip" : "stage 3 no reshard clip");
  }
}

TEST(Engine, ActivationCheckpointingChangesNothingButMemory) {
  for (int stage : {0, 3}) {
    EngineConfig a = config(stage, 2), b = config(stage, 2);
    b.zero.activation_checkpointing = true;
    const RunResult ra = run(false, a, 1, 3), rb = run(false, b, 1, 3);
    for (int s = 0; s < 3; ++s) EXPECT_EQ(ra.losses[s], rb.losses[s]) << "stage " << stage;
  }
}

TEST(Engine, WithoutOverlapTheResultsAreTheSame) {
  const int B = 2, steps = 3;
  for (int stage : {0, 3}) {
    EngineConfig a = config(stage, B), b = config(stage, B);
    b.zero.overlap_comm = false;
    const RunResult ra = run(false, a, 1, steps), rb = run(false, b, 1, steps);
    for (int s = 0; s < steps; ++s) EXPECT_EQ(ra.losses[s], rb.losses[s]) << "stage " << stage;
  }
}

// ---- determinism: the same bits at every stage ------------------------------------------------
//
// Gradients are reduced in one dtype at every stage, and the communicator sums every element in
// rank order whatever the collective (stage 0 all-reduces buckets of several units, stages 1-3
// reduce-scatter unit by unit), so at one world size the stages train identically, bit for bit.

void expect_bitwise_equal(const RunResult& got, const RunResult& ref, const std::string& what) {
  ASSERT_EQ(got.losses.size(), ref.losses.size());
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    EXPECT_EQ(got.losses[s], ref.losses[s]) << what << " step " << s;
    EXPECT_EQ(got.norms[s], ref.norms[s]) << what << " step " << s;
  }
  if (world()->rank() != 0) return;
  for (size_t u = 0; u < ref.params.size(); ++u)
    ASSERT_EQ(0, std::memcmp(got.params[u].data(), ref.params[u].data(), ref.params[u].size() * 4))
        << what << ": unit " << u << " differs";
}

struct PrecisionCase {
  DType dtype;
  bool fp32_accum;
  std::optional<DType> reduce;
  std::string name() const {
    return std::string(dtype_name(dtype)) + (fp32_accum ? " fp32-accum" : "") +
           (reduce ? std::string(" reduce ") + dtype_name(*reduce) : "");
  }
};
const PrecisionCase kPrecisions[] = {{DType::kF32, false, std::nullopt},
                                     {DType::kBF16, false, std::nullopt},
                                     {DType::kBF16, true, std::nullopt},
                                     {DType::kBF16, true, DType::kF32},
                                     {DType::kF16, true, std::nullopt}};

EngineConfig precision_config(int stage, const PrecisionCase& p) {
  EngineConfig c = config(stage, 2, 16, p.dtype);
  c.precision.fp32_grad_accum = p.fp32_accum;
  c.precision.reduce_dtype = p.reduce;
  return c;
}

TEST(Engine, StagesAgreeBitwiseAtTheSameWorldSize) {
  const int steps = 4;
  for (const PrecisionCase& p : kPrecisions) {
    const RunResult ref = run(false, precision_config(0, p), 1, steps, 3e-3, 1.0);
    for (int stage = 1; stage <= 3; ++stage)
      expect_bitwise_equal(run(false, precision_config(stage, p), 1, steps, 3e-3, 1.0), ref,
                           p.name() + " stage " + std::to_string(stage) + " against stage 0");
  }
}

// The same for the Llama family: every stage's bits equal stage 0's (fp32 and bf16 with fp32
// gradient accumulation), and each stage matches one-rank training on the global batch.
TEST(Engine, LlamaStagesAgreeBitwiseAndMatchSingleRankTraining) {
  const int steps = 3;
  for (const PrecisionCase& p : {kPrecisions[0], kPrecisions[2]}) {
    const RunResult ref = run(false, precision_config(0, p), 1, steps, 3e-3, 1.0, {}, small_llama());
    for (int stage = 1; stage <= 3; ++stage)
      expect_bitwise_equal(run(false, precision_config(stage, p), 1, steps, 3e-3, 1.0, {}, small_llama()), ref,
                           "llama " + p.name() + " stage " + std::to_string(stage) + " against stage 0");
  }
  const int W = world()->size();
  EngineConfig alone = config(0, 2 * W);
  const RunResult single = run(true, alone, 1, steps, 1e-3, 0.0, {}, small_llama());
  for (int stage = 0; stage <= 3; ++stage)
    expect_same_training(run(false, config(stage, 2), 1, steps, 1e-3, 0.0, {}, small_llama()), single, 1e-4,
                         "llama stage " + std::to_string(stage));
}

// Stage 3 without reshard_after_forward keeps the units gathered from forward to backward: the same
// bits as with it, for an untied model too. (Its embeddings, read by their forward alone, once stayed
// gathered to the next step, which then embedded with the weights before the update.)
TEST(Engine, LlamaStageThreeWithoutReshardAfterForwardIsTheSameBits) {
  const int steps = 3;
  for (const PrecisionCase& p : {kPrecisions[0], kPrecisions[2]}) {
    const RunResult with = run(false, precision_config(3, p), 1, steps, 3e-3, 1.0, {}, small_llama());
    EngineConfig c = precision_config(3, p);
    c.zero.reshard_after_forward = false;
    expect_bitwise_equal(run(false, c, 1, steps, 3e-3, 1.0, {}, small_llama()), with,
                         "llama " + p.name() + " stage 3 without reshard_after_forward");
  }
}

// With G micro-steps, stages 0-1 add the micro-steps' gradients and reduce once while stages 2-3
// reduce every micro-step and add the reduced shards: two orders of the same sums. Within each
// pair the bits agree.
TEST(Engine, WithAccumulationStagesAgreeBitwisePairwise) {
  for (const PrecisionCase& p : {kPrecisions[0], kPrecisions[2]}) {
    const RunResult s0 = run(false, precision_config(0, p), 2, 3, 3e-3);
    expect_bitwise_equal(run(false, precision_config(1, p), 2, 3, 3e-3), s0, p.name() + " G=2 stage 1 vs 0");
    const RunResult s2 = run(false, precision_config(2, p), 2, 3, 3e-3);
    expect_bitwise_equal(run(false, precision_config(3, p), 2, 3, 3e-3), s2, p.name() + " G=2 stage 3 vs 2");
  }
}

// ---- non-finite gradients ----------------------------------------------------------------------

// A NaN or Inf anywhere in the gradient (here an Inf on one rank, in block 1's unit) makes the step
// change nothing on any rank, at every stage and precision; the step names the unit.
TEST(Engine, NonFiniteGradientsChangeNothingAndNameTheirUnit) {
  const int W = world()->size();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const std::string what = std::string(dtype_name(dt)) + " stage " + std::to_string(stage);
      const EngineConfig c = config(stage, 2, 16, dt);
      const RunResult got = run(false, c, 1, 2, 1e-3, 0.0, GradientFault{.step = 1, .rank = W - 1, .unit = 2});
      EXPECT_FALSE(got.skipped[0]) << what;
      EXPECT_TRUE(got.skipped[1]) << what;
      EXPECT_TRUE(std::isinf(got.norms[1])) << what;
      EXPECT_EQ(got.nonfinite_units[1], std::vector<int>{2}) << what;
      const RunResult clean1 = run(false, config(stage, 2, 16, dt), 1, 1);
      if (world()->rank() == 0) {
        for (size_t u = 0; u < clean1.params.size(); ++u) {
          ASSERT_EQ(0, std::memcmp(got.params[u].data(), clean1.params[u].data(), clean1.params[u].size() * 4))
              << what << ": unit " << u << " changed in the skipped step";
        }
      }
    }
  }
}

// ---- memory: the ledger meets the formulas of docs/design.md byte for byte ---------------------

TEST(Engine, ModelStatesMatchTheFormulasExactly) {
  const int W = world()->size();
  const model::ParamLayout layout(small_model());
  struct Case {
    DType dtype;
    bool fp32_accum;
  };
  for (Case cs : {Case{DType::kF32, false}, Case{DType::kBF16, false}, Case{DType::kBF16, true},
                  Case{DType::kF16, false}}) {
    for (int stage = 0; stage <= 3; ++stage) {
      EngineConfig c = config(stage, 2, 16, cs.dtype);
      c.precision.fp32_grad_accum = cs.fp32_accum;
      const MemorySnapshot before = MemoryLedger::global().snapshot();
      auto group = std::make_unique<Group>(false);
      Engine engine(layout, group->comm, c);
      engine.load(init_source(layout));
      static const Stream stream(small_model().vocab_size);
      engine.step(1, [&](int g, int32_t* in, int32_t* tg) { stream.load(0, g, W, engine.comm().rank(), 2, 16, 1, in, tg); },
                  1e-3, 0);
      const MemorySnapshot after = MemoryLedger::global().snapshot();
      auto live = [&](MemCategory k) { return after.live_of(k) - before.live_of(k); };
      const uint64_t psi = engine.shards().total_padded();
      const uint64_t shard = engine.shards().total_shard();
      ASSERT_EQ(psi, shard * W);
      const uint64_t p = dtype_size(cs.dtype);
      const uint64_t g = (cs.dtype == DType::kF32 || cs.fp32_accum) ? 4 : p;
      const bool mixed = cs.dtype != DType::kF32;
      // param, grad, master, optim: the table of docs/design.md.
      const uint64_t want_param = stage == 3 ? shard * p : psi * p;
      const uint64_t want_grad = stage <= 1 ? psi * g : shard * g;
      const uint64_t want_master = !mixed ? 0 : stage == 0 ? psi * 4 : shard * 4;
      const uint64_t want_optim = stage == 0 ? psi * 8 : shard * 8;
      const std::string what = std::string(dtype_name(cs.dtype)) + (cs.fp32_accum ? "+fp32acc" : "") + " stage " +
                               std::to_string(stage) + " W=" + std::to_string(W);
      EXPECT_EQ(live(MemCategory::kParam), want_param) << what;
      EXPECT_EQ(live(MemCategory::kGrad), want_grad) << what;
      EXPECT_EQ(live(MemCategory::kMaster), want_master) << what;
      EXPECT_EQ(live(MemCategory::kOptim), want_optim) << what;
      // The headline totals: fp32 16Ψ, 8Ψ+8Ψ/W, 4Ψ+12Ψ/W, 16Ψ/W; bf16 16Ψ, 4Ψ+12Ψ/W, 2Ψ+14Ψ/W, 16Ψ/W.
      const uint64_t states = want_param + want_grad + want_master + want_optim;
      const uint64_t headline_16 = !cs.fp32_accum ? (stage == 0   ? 16 * psi
                                                     : stage == 3 ? 16 * shard
                                                                  : 0)
                                                  : 0;
      if (headline_16) {
        EXPECT_EQ(states, headline_16) << what;
      }
      if (!mixed && stage == 1) {
        EXPECT_EQ(states, 8 * psi + 8 * shard) << what;
      }
      if (!mixed && stage == 2) {
        EXPECT_EQ(states, 4 * psi + 12 * shard) << what;
      }
      if (mixed && !cs.fp32_accum && stage == 1) {
        EXPECT_EQ(states, 4 * psi + 12 * shard) << what;
      }
      if (mixed && !cs.fp32_accum && stage == 2) {
        EXPECT_EQ(states, 2 * psi + 14 * shard) << what;
      }
      if (mixed && cs.fp32_accum && stage == 0) {
        EXPECT_EQ(states, 18 * psi) << what;
      }
      // Nothing transient is left between steps.
      EXPECT_EQ(live(MemCategory::kGathered), 0u) << what;
      EXPECT_EQ(live(MemCategory::kComm), 0u) << what;
      if (stage == 3 && W > 1) {
        EXPECT_GT(after.peak_of(MemCategory::kGathered), 0u) << what;
      }
    }
  }
}

// ---- traffic: stages 1-2 move exactly what stage 0 moves; stage 3 1.5x -------------------------

TEST(Engine, TrafficPerStage) {
  const int W = world()->size();
  std::vector<uint64_t> bytes;
  for (int stage = 0; stage <= 3; ++stage) bytes.push_back(run(false, config(stage, 2), 1, 2).traffic);
  if (W == 1) {
    for (uint64_t b : bytes) EXPECT_EQ(b, 0u);
    return;
  }
  EXPECT_EQ(bytes[1], bytes[0]);
  EXPECT_EQ(bytes[2], bytes[0]);
  // Stage 3: two all-gathers and a reduce-scatter per micro-step = 3 × (W-1)/W·Ψ per step against
  // stage 0's 2 × (W-1)/W·Ψ, plus the same small scalar all-reduce each step.
  const model::ParamLayout layout(small_model());
  const ShardLayout sh(layout, W, 0);
  const uint64_t scalar = 2 * (2ull * (W - 1) * 8 / W);  // two steps of an 8-byte all-reduce
  const uint64_t unit = (W - 1) * sh.total_padded() * 4 / W;
  EXPECT_EQ(bytes[0], 2 * 2 * unit + scalar);
  EXPECT_EQ(bytes[3], 2 * 3 * unit + scalar);
  EXPECT_LE(static_cast<double>(bytes[3]), 1.5 * bytes[0]);
}

// ---- hybrid sharding: shard within groups of N ranks, replicate across ----------------------------

// Every N that divides W (N < W): stages 1-3 train as the fully sharded run does (another order of
// the same sums: the groups' sums added across groups), with and without accumulation.
TEST(Engine, HybridShardingMatchesFullSharding) {
  const int W = world()->size();
  for (int N = 1; N < W; ++N) {
    if (W % N != 0) continue;
    for (int stage = 1; stage <= 3; ++stage) {
      for (int G : {1, 2}) {
        EngineConfig c = config(stage, 2);
        const RunResult want = run(false, c, G, 4);
        c.zero.shard_group_size = N;
        const std::string what = "W=" + std::to_string(W) + " N=" + std::to_string(N) + " stage " +
                                 std::to_string(stage) + " G=" + std::to_string(G);
        expect_same_training(run(false, c, G, 4), want, 1e-5, what);
      }
    }
    EngineConfig c = config(2, 2, 16, DType::kBF16);
    const RunResult want = run(false, c, 1, 3);
    c.zero.shard_group_size = N;
    expect_same_training(run(false, c, 1, 3), want, 2e-2, "bf16 N=" + std::to_string(N));
  }
}

// The model states are those of an N-rank run (docs/design.md's table with N in place of W), and the
// traffic is the group's reduce-scatters and all-gathers plus one all-reduce of each unit's shard
// across the W/N groups (ring bytes over the groups' size).
TEST(Engine, HybridShardingHoldsAndMovesWhatAnNRankRunDoes) {
  const int W = world()->size();
  const model::ParamLayout layout(small_model());
  static const Stream stream(small_model().vocab_size);
  for (int N = 1; N < W; ++N) {
    if (W % N != 0) continue;
    for (int stage = 1; stage <= 3; ++stage) {
      EngineConfig c = config(stage, 2);
      c.zero.shard_group_size = N;
      const std::string what = "W=" + std::to_string(W) + " N=" + std::to_string(N) + " stage " + std::to_string(stage);
      const MemorySnapshot before = MemoryLedger::global().snapshot();
      Group group(false);
      Engine engine(layout, group.comm, c);
      EXPECT_EQ(engine.shard_group_size(), N) << what;
      EXPECT_EQ(engine.replica(), world()->rank() / N) << what;
      const ShardLayout& sh = engine.shards();
      EXPECT_EQ(sh.world(), N) << what;
      EXPECT_EQ(sh.rank(), world()->rank() % N) << what;
      engine.load(init_source(layout));
      group.ledger->reset();
      engine.step(1, [&](int g, int32_t* in, int32_t* tg) { stream.load(0, g, W, world()->rank(), 2, 16, 1, in, tg); },
                  1e-3, 0);
      const MemorySnapshot after = MemoryLedger::global().snapshot();
      auto live = [&](MemCategory k) { return after.live_of(k) - before.live_of(k); };
      const uint64_t psi = sh.total_padded(), shard = sh.total_shard();
      EXPECT_EQ(psi, shard * N) << what;
      EXPECT_EQ(live(MemCategory::kParam), (stage == 3 ? shard : psi) * 4) << what;
      EXPECT_EQ(live(MemCategory::kGrad), (stage <= 1 ? psi : shard) * 4) << what;
      EXPECT_EQ(live(MemCategory::kOptim), shard * 8) << what;
      EXPECT_EQ(live(MemCategory::kMaster), 0u) << what;
      // Traffic of the step, by kind.
      const int R = W / N;
      uint64_t rs = 0, ag = 0, ar = comm::ring_bytes_sent(comm::CollectiveKind::kAllReduce, 8, W);
      for (int u = 0; u < sh.num_units(); ++u) {
        const uint64_t full = sh.unit(u).padded * 4;
        rs += comm::ring_bytes_sent(comm::CollectiveKind::kReduceScatter, full, N);
        ag += comm::ring_bytes_sent(comm::CollectiveKind::kAllGather, full, N) * (stage == 3 ? 2 : 1);
        ar += comm::ring_bytes_sent(comm::CollectiveKind::kAllReduce, sh.unit(u).shard * 4, R);
      }
      const comm::TrafficLedger& t = *group.ledger;
      EXPECT_EQ(t.bytes_sent(comm::CollectiveKind::kReduceScatter), rs) << what;
      EXPECT_EQ(t.bytes_sent(comm::CollectiveKind::kAllGather), ag) << what;
      EXPECT_EQ(t.bytes_sent(comm::CollectiveKind::kAllReduce), ar) << what;
      // Across groups: the all-reduces over the groups, and the scalar all-reduce over all W ranks
      // where this rank is the last of its group (its ring successor is in the next group).
      const uint64_t scalar = comm::ring_bytes_sent(comm::CollectiveKind::kAllReduce, 8, W);
      const bool last_of_group = (world()->rank() + 1) % N == 0;
      EXPECT_EQ(t.bytes_sent_inter_group(comm::CollectiveKind::kAllReduce), ar - scalar + (last_of_group ? scalar : 0))
          << what;
      EXPECT_EQ(t.bytes_sent_inter_group(comm::CollectiveKind::kReduceScatter), 0u) << what;
      EXPECT_EQ(t.bytes_sent_inter_group(comm::CollectiveKind::kAllGather), 0u) << what;
    }
  }
  // N must divide W.
  if (W >= 2) {
    EngineConfig c = config(2, 2);
    c.zero.shard_group_size = W + 1;
    Group group(false);
    EXPECT_THROW({ Engine e(layout, group.comm, c); }, UsageError);
  }
}

// ---- mixed precision ---------------------------------------------------------------------------

TEST(Engine, MixedPrecisionTrainsLikeFp32) {
  const int steps = 20;
  const RunResult f32 = run(false, config(2, 2), 1, steps, 3e-3);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (int stage : {0, 3}) {
      const RunResult mp = run(false, config(stage, 2, 16, dt), 1, steps, 3e-3);
      const std::string what = std::string(dtype_name(dt)) + " stage " + std::to_string(stage);
      // It learns: the last loss well below the first.
      EXPECT_LT(mp.losses.back(), mp.losses.front() - 0.5) << what;
      // And like fp32: bf16 keeps 8 bits of mantissa in the weights (relative error 2^-9 per
      // rounding), so the losses stay within a few percent of fp32's over 20 steps.
      for (int s = 0; s < steps; ++s) EXPECT_NEAR(mp.losses[s], f32.losses[s], 0.03 * f32.losses[s]) << what << " step " << s;
    }
  }
}

TEST(Engine, InjectedOverflowIsSkippedOnEveryRank) {
  const int W = world()->size();
  const EngineConfig c = config(2, 2, 16, DType::kF16);
  const GradientFault fault{.step = 2, .rank = W - 1, .unit = 0};
  const RunResult got = run(false, c, 1, 5, 1e-3, 0.0, fault);
  for (int step = 0; step < 5; ++step) EXPECT_EQ(got.skipped[step], step == 2) << "step " << step;
  // A skipped step leaves the weights exactly as they were: three steps with the third skipped end
  // where two clean steps end, bit for bit.
  const RunResult skipped3 = run(false, c, 1, 3, 1e-3, 0.0, fault);
  const RunResult clean2 = run(false, config(2, 2, 16, DType::kF16), 1, 2);
  EXPECT_TRUE(skipped3.skipped[2]);
  if (world()->rank() == 0) {
    for (size_t u = 0; u < clean2.params.size(); ++u) {
      ASSERT_EQ(0, std::memcmp(skipped3.params[u].data(), clean2.params[u].data(), clean2.params[u].size() * 4))
          << "unit " << u;
    }
  }
}
