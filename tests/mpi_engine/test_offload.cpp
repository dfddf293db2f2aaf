// Optimizer offload (EngineConfig::offload_optimizer) and parameter offload (offload_param) on the W ranks of this binary (mpirun -n W):
// the same arithmetic in another place, so an offloaded run gives the same bits as the same run
// without offload (losses, gradient norms, consolidated weights), with sub-groups that cut through
// units and tensors; and the ledger holds exactly what docs/design.md says, tier by tier.
// Parameter offload (stage 3): the same, alone and with the optimizer offloaded too.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/runtime.h"
#include "core/error.h"
#include "core/memory.h"
#include "model/init.h"
#include "model/layout.h"
#include "tests/mpi_engine/small_engine.h"
#include "zero/engine.h"

using namespace zerodp;
using namespace zerodp::zero;

namespace {

model::GPT2Config offload_model() { return engine_tests::padded_model(); }

struct Trained {
  std::vector<double> losses, norms;
  std::vector<std::vector<float>> params;  // consolidated (rank 0)
  MemorySnapshot grown;                    // live bytes the engine added, after the last step
  MemorySnapshot peak;                     // peaks over the run (from live before it)
};

// `steps` steps of W ranks × B = 2 sequences of 16 tokens of a fixed token stream.
Trained train(const EngineConfig& cfg, int steps) {
  const model::ParamLayout layout(offload_model());
  std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
  const int W = comm->size(), r = comm->rank();
  std::vector<int32_t> stream;
  std::mt19937 rng(7);
  for (int i = 0; i < 8192; ++i) stream.push_back(static_cast<int32_t>((i * 5 + (rng() % 4 == 0 ? rng() : 0)) % 64));
  Trained out;
  MemoryLedger& ledger = MemoryLedger::global();
  const MemorySnapshot before = ledger.snapshot();
  ledger.reset_peaks();
  {
    Engine engine(layout, comm, cfg);
    engine.load([&](int u, size_t b, size_t n, float* dst) {
      model::init_unit_range(layout.config(), layout, u, b, n, 77, dst);
    });
    for (int s = 0; s < steps; ++s) {
      const StepResult res = engine.step(
          1,
          [&](int, int32_t* in, int32_t* tg) {
            const size_t off = (static_cast<size_t>(s) * W + r) * cfg.micro_batch * cfg.seq;
            for (int i = 0; i < cfg.micro_batch * cfg.seq; ++i) {
              in[i] = stream[(off + i) % stream.size()];
              tg[i] = stream[(off + i + 1) % stream.size()];
            }
          },
          3e-3, 1.0);
      out.losses.push_back(res.loss);
      out.norms.push_back(res.grad_norm);
    }
    const MemorySnapshot after = ledger.snapshot();
    for (MemTier t : kAllMemTiers) {
      for (MemCategory c : kAllMemCategories) {
        const size_t k = static_cast<size_t>(c);
        out.grown.tier(t).live[k] = after.tier(t).live[k] - before.tier(t).live[k];
        out.peak.tier(t).peak[k] = after.tier(t).peak[k] - before.tier(t).live[k];
      }
      out.grown.tier(t).live_total = after.tier(t).live_total - before.tier(t).live_total;
    }
    out.params.resize(layout.num_units());
    engine.consolidate([&](int u, const float* d) { out.params[u].assign(d, d + layout.unit_numel(u)); });
  }
  return out;
}

EngineConfig config(int stage, DType dtype, bool offload, size_t sub_group = 1'000'000'000,
                    bool offload_param = false) {
  EngineConfig c = engine_tests::small_engine_config(stage, dtype);
  c.zero.offload_optimizer = offload ? zero::Offload::kCpu : zero::Offload::kNone;
  c.zero.sub_group_size = sub_group;
  c.zero.offload_param = offload_param ? zero::Offload::kCpu : zero::Offload::kNone;
  return c;
}

void expect_same_bits(const Trained& got, const Trained& want, const std::string& what) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_EQ(got.losses[s], want.losses[s]) << what << " step " << s;
    EXPECT_EQ(got.norms[s], want.norms[s]) << what << " step " << s;
  }
  if (comm::world()->rank() != 0) return;
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t u = 0; u < want.params.size(); ++u)
    ASSERT_EQ(0, std::memcmp(got.params[u].data(), want.params[u].data(), want.params[u].size() * 4))
        << what << ": unit " << u << " differs";
}

std::string name(int stage, DType dt, size_t sub_group) {
  return std::string(dtype_name(dt)) + " stage " + std::to_string(stage) + " sub-group " + std::to_string(sub_group);
}

}  // namespace

// Sub-groups of 1000 elements cut every unit's shard (thousands of elements) and its tensors; one of
// 7 is not a multiple of anything; 1e9 takes the whole shard at once.
TEST(Offload, SameBitsAsWithoutOffload) {
  const int steps = 3;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int stage = 1; stage <= 3; ++stage) {
      const Trained want = train(config(stage, dt, false), steps);
      for (size_t sub_group : {size_t{1000}, size_t{7}, size_t{1'000'000'000}}) {
        if (sub_group == 7 && stage != 2) continue;  // slow; once is enough
        expect_same_bits(train(config(stage, dt, true, sub_group), steps), want, name(stage, dt, sub_group));
      }
    }
  }
}

// SGD with momentum (one state) and without (none: no optim bytes at all).
TEST(Offload, SgdSameBitsAsWithoutOffload) {
  for (double momentum : {0.9, 0.0}) {
    EngineConfig a = config(2, DType::kBF16, false), b = config(2, DType::kBF16, true, 999);
    for (EngineConfig* c : {&a, &b}) {
      c->optimizer.kind = optim::OptimizerKind::kSGD;
      c->optimizer.momentum = momentum;
    }
    const Trained got = train(b, 3);
    expect_same_bits(got, train(a, 3), "SGD momentum " + std::to_string(momentum));
    EXPECT_EQ(got.grown.host.live_of(MemCategory::kOptim), momentum > 0 ? got.grown.host.live_of(MemCategory::kMaster) : 0u);
  }
}

// ZeRO-Infinity's optimizer offload to NVMe (a directory under /tmp here): the same bits with 1, 2 and
// 4 I/O slots, sub-groups that cut units (rounded up to 1024 elements) or take the whole shard, AdamW
// and SGD with and without momentum (1 and 0 states); the states are in the nvme tier, the host holds
// only slots and staging after a step, and nothing is left in the directory once the engines are gone.
TEST(Offload, NvmeSameBitsAsWithoutOffload) {
  const std::string dir = "/tmp/zerodp-nvme-test-" + std::to_string(::getppid());  // the ranks' launcher
  std::filesystem::create_directories(dir);
  struct Case {
    int stage;
    DType dt;
    size_t sub_group;
    int slots;
    optim::OptimizerKind kind;
    double momentum;
  };
  const Case cases[] = {{1, DType::kF32, 1000, 4, optim::OptimizerKind::kAdamW, 0},
                        {2, DType::kBF16, 3000, 2, optim::OptimizerKind::kAdamW, 0},
                        {3, DType::kF16, 1000, 1, optim::OptimizerKind::kAdamW, 0},
                        {3, DType::kBF16, 1'000'000'000, 4, optim::OptimizerKind::kAdamW, 0},
                        {2, DType::kF32, 2000, 3, optim::OptimizerKind::kSGD, 0.9},
                        {3, DType::kBF16, 1000, 2, optim::OptimizerKind::kSGD, 0.0}};
  for (const Case& k : cases) {
    EngineConfig plain = config(k.stage, k.dt, false), nvme = config(k.stage, k.dt, true, k.sub_group);
    for (EngineConfig* c : {&plain, &nvme}) {
      c->optimizer.kind = k.kind;
      c->optimizer.momentum = k.momentum;
    }
    nvme.zero.offload_optimizer = zero::Offload::kNvme;
    nvme.zero.nvme_path = dir;
    nvme.zero.optimizer_buffer_count = k.slots;
    const std::string what = name(k.stage, k.dt, k.sub_group) + " slots " + std::to_string(k.slots) +
                             (k.kind == optim::OptimizerKind::kSGD ? " SGD" : " AdamW");
    const Trained got = train(nvme, 3);
    expect_same_bits(got, train(plain, 3), what);
    const int states = k.kind == optim::OptimizerKind::kAdamW ? 2 : (k.momentum > 0 ? 1 : 0);
    const uint64_t shard_bytes = got.grown.nvme.live_of(MemCategory::kMaster);
    EXPECT_GT(shard_bytes, 0u) << what;
    EXPECT_EQ(got.grown.nvme.live_of(MemCategory::kOptim), states * shard_bytes) << what;
    EXPECT_EQ(got.grown.live_of(MemCategory::kMaster) + got.grown.live_of(MemCategory::kOptim), 0u) << what;
    // The host: the slots (one sub-group of each state, as many as asked and as there are sub-groups).
    const uint64_t sub = std::min<uint64_t>(offload_sub_group(k.sub_group, /*nvme=*/true) * 4, shard_bytes);
    const uint64_t groups = (shard_bytes + sub - 1) / sub;
    EXPECT_EQ(got.grown.host.live_of(MemCategory::kMaster), std::min<uint64_t>(k.slots, groups) * sub) << what;
    EXPECT_EQ(got.grown.host.live_of(MemCategory::kOptim), states * std::min<uint64_t>(k.slots, groups) * sub)
        << what;
  }
  comm::world()->barrier();
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir << " holds what the runs left";
  comm::world()->barrier();
  if (comm::world()->rank() == 0) std::filesystem::remove_all(dir);
}

// Device tier: master and optim gone, everything else exactly as without offload (peaks per category);
// host tier: the fp32 master of the shard, the optimizer states, one sub-group of fp32 gradient.
TEST(Offload, LedgerHoldsTheOffloadedStatesInTheHostTier) {
  const int W = comm::world()->size();
  const model::ParamLayout layout(offload_model());
  const ShardLayout sh(layout, W, 0);
  const uint64_t shard = sh.total_shard();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int stage = 1; stage <= 3; ++stage) {
      for (size_t sub_group : {size_t{1000}, size_t{1'000'000'000}}) {
        const std::string what = name(stage, dt, sub_group) + " W=" + std::to_string(W);
        const Trained plain = train(config(stage, dt, false), 2);
        const Trained off = train(config(stage, dt, true, sub_group), 2);
        EXPECT_EQ(off.grown.live_of(MemCategory::kMaster), 0u) << what;
        EXPECT_EQ(off.grown.live_of(MemCategory::kOptim), 0u) << what;
        EXPECT_EQ(off.peak.peak_of(MemCategory::kMaster), 0u) << what;
        EXPECT_EQ(off.peak.peak_of(MemCategory::kOptim), 0u) << what;
        for (MemCategory c : {MemCategory::kParam, MemCategory::kGrad, MemCategory::kGathered, MemCategory::kComm,
                              MemCategory::kAct}) {
          EXPECT_EQ(off.grown.live_of(c), plain.grown.live_of(c)) << what << " " << mem_category_name(c);
          EXPECT_EQ(off.peak.peak_of(c), plain.peak.peak_of(c)) << what << " " << mem_category_name(c);
        }
        EXPECT_EQ(off.grown.host.live_of(MemCategory::kMaster), shard * 4) << what;
        EXPECT_EQ(off.grown.host.live_of(MemCategory::kOptim), shard * 8) << what;
        // Two sub-groups staged (one coming down while the other updates) when there are two.
        EXPECT_EQ(off.grown.host.live_of(MemCategory::kGrad),
                  (shard > sub_group ? 2 : 1) * std::min<uint64_t>(sub_group, shard) * 4)
            << what;
        EXPECT_EQ(off.grown.host.live_of(MemCategory::kParam), 0u) << what;
        EXPECT_EQ(plain.grown.host.live_total, 0u) << what;
      }
    }
  }
}

TEST(Offload, NeedsAShardedOptimizer) {
  const model::ParamLayout layout(offload_model());
  std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
  EXPECT_THROW({ Engine e(layout, comm, config(0, DType::kF32, true)); }, UsageError);
  EXPECT_THROW({ Engine e(layout, comm, config(1, DType::kF32, true, 0)); }, UsageError);
}

// ---- parameter offload (stage 3) -----------------------------------------------------------------

// Stage 3 with the parameter shards in host memory: the same bits as without, alone and with the
// optimizer offloaded too, in every dtype; with a persistence threshold that keeps unit 0 whole on the
// device (a block is 28272 elements, unit 0 = 64·48 + 32·48 + 96 = 4704) and without; without
// prefetching (overlap_comm off) too.
TEST(ParamOffload, SameBitsAsWithoutIt) {
  const int steps = 3;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (size_t threshold : {size_t{0}, size_t{5000}}) {
      EngineConfig plain = config(3, dt, false);
      plain.zero.stage3_param_persistence_threshold = threshold;
      const Trained want = train(plain, steps);
      for (bool opt : {false, true}) {
        EngineConfig c = config(3, dt, opt, 1000, true);
        c.zero.stage3_param_persistence_threshold = threshold;
        const std::string what = std::string("param offload ") + dtype_name(dt) + (opt ? " + optimizer offload" : "") +
                                 " threshold " + std::to_string(threshold);
        expect_same_bits(train(c, steps), want, what);
      }
    }
    EngineConfig serial = config(3, dt, false, 1000, true);
    serial.zero.overlap_comm = false;
    EngineConfig serial_plain = config(3, dt, false);
    serial_plain.zero.overlap_comm = false;
    expect_same_bits(train(serial, steps), train(serial_plain, steps),
                     std::string("param offload without prefetch ") + dtype_name(dt));
  }
}

// Stage 3 with the parameter shards on NVMe (the optimizer offloaded too, to cpu or nvme): the same
// bits, every dtype, with and without a unit kept whole (then without prefetching too); the shards
// are in the nvme tier, the device keeps parameters only of a unit kept whole.
TEST(ParamOffload, NvmeSameBitsAsWithoutIt) {
  const std::string dir = "/tmp/zerodp-nvme-param-test-" + std::to_string(::getppid());
  std::filesystem::create_directories(dir);
  struct Case {
    size_t threshold;
    bool prefetch, optimizer_nvme;
  };
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const Case& k : {Case{0, true, false}, Case{0, true, true}, Case{5000, false, true}}) {
      EngineConfig plain = config(3, dt, false);
      plain.zero.stage3_param_persistence_threshold = k.threshold;
      plain.zero.overlap_comm = k.prefetch;
      EngineConfig c = config(3, dt, true, 1000, true);
      c.zero.stage3_param_persistence_threshold = k.threshold;
      c.zero.overlap_comm = k.prefetch;
      c.zero.offload_param = zero::Offload::kNvme;
      if (k.optimizer_nvme) c.zero.offload_optimizer = zero::Offload::kNvme;
      c.zero.nvme_path = dir;
      const std::string what = std::string("param nvme ") + dtype_name(dt) + " threshold " +
                               std::to_string(k.threshold) + (k.prefetch ? "" : " no prefetch") +
                               (k.optimizer_nvme ? " optimizer nvme" : " optimizer cpu");
      const Trained got = train(c, 3);
      expect_same_bits(got, train(plain, 3), what);
      EXPECT_GT(got.grown.nvme.live_of(MemCategory::kParam), 0u) << what;
      EXPECT_EQ(got.grown.live_of(MemCategory::kParam) == 0, k.threshold == 0) << what;
    }
  }
  // Without the optimizer offloaded there is no host copy of the weights to write the shards from.
  EngineConfig alone = config(3, DType::kBF16, false, 1000, true);
  alone.zero.offload_param = zero::Offload::kNvme;
  alone.zero.nvme_path = dir;
  const model::ParamLayout layout(offload_model());
  std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
  EXPECT_THROW({ Engine e(layout, comm, alone); }, UsageError);
  comm::world()->barrier();
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir << " holds what the runs left";
  comm::world()->barrier();
  if (comm::world()->rank() == 0) std::filesystem::remove_all(dir);
}

// offload_param.buffer_count (1: no read prefetched beside the one in use; 2) and max_in_cpu (the
// units whose shards fit stay in host memory, in unit order; all of them: no file at all): the same
// bits, and the host and nvme tiers hold exactly the shards each way plus buffer_count + 2 buffers of
// the largest shard in the file.
TEST(ParamOffload, NvmeBufferCountAndMaxInCpu) {
  const std::string dir = "/tmp/zerodp-nvme-param-cap-test-" + std::to_string(::getppid());
  std::filesystem::create_directories(dir);
  const int W = comm::world()->size();
  const model::ParamLayout layout(offload_model());
  const ShardLayout sh(layout, W, 0);
  const size_t s0 = sh.unit(0).shard, sb = sh.unit(1).shard;  // the embeddings' shard, a block's
  struct Case {
    int buffers;
    size_t max_in_cpu;
    int units_in_host;  // the first ones
  };
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const uint64_t p = dtype_size(dt);
    const Trained want = train(config(3, dt, false), 3);
    for (const Case& k : {Case{1, 0, 0}, Case{2, s0 + sb - 1, 1}, Case{5, s0 + sb, 2}, Case{3, size_t{1} << 40, 3}}) {
      EngineConfig c = config(3, dt, true, 1000, true);
      c.zero.offload_param = zero::Offload::kNvme;
      c.zero.param_buffer_count = k.buffers;
      c.zero.param_max_in_cpu = k.max_in_cpu;
      c.zero.nvme_path = dir;
      const std::string what = std::string(dtype_name(dt)) + " buffer_count " + std::to_string(k.buffers) +
                               " max_in_cpu " + std::to_string(k.max_in_cpu) + " W=" + std::to_string(W);
      const Trained got = train(c, 3);
      expect_same_bits(got, want, what);
      uint64_t in_host = 0, in_file = 0, largest = 0;
      for (int u = 0; u < layout.num_units(); ++u) {
        const uint64_t n = sh.unit(u).shard;
        if (u < k.units_in_host) {
          in_host += n;
        } else {
          in_file += n;
          largest = std::max(largest, n);
        }
      }
      EXPECT_EQ(got.grown.nvme.live_of(MemCategory::kParam), in_file * p) << what;
      const uint64_t buffers = in_file > 0 ? (static_cast<uint64_t>(k.buffers) + 2) * largest : 0;
      EXPECT_EQ(got.grown.host.live_of(MemCategory::kParam), (in_host + buffers) * p) << what;
      EXPECT_EQ(got.grown.live_of(MemCategory::kParam), 0u) << what;
    }
  }
  comm::world()->barrier();
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << dir << " holds what the runs left";
  comm::world()->barrier();
  if (comm::world()->rank() == 0) std::filesystem::remove_all(dir);
}

// Device tier: no parameter bytes (or only the units kept whole), the gathered copies as without
// offload, comm higher by at most the staging of the gathers in flight (the unit in use and four
// prefetched); host tier: the parameter shards of the sharded units, in the compute dtype.
TEST(ParamOffload, LedgerHoldsTheShardsInTheHostTier) {
  const int W = comm::world()->size();
  const model::ParamLayout layout(offload_model());
  const ShardLayout sh(layout, W, 0);
  uint64_t largest = 0;
  for (int u = 0; u < layout.num_units(); ++u) largest = std::max<uint64_t>(largest, sh.unit(u).shard);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const uint64_t p = dtype_size(dt);
    for (bool opt : {false, true}) {
      for (size_t threshold : {size_t{0}, size_t{5000}}) {
        const std::string what = std::string(dtype_name(dt)) + (opt ? " + optimizer offload" : "") + " threshold " +
                                 std::to_string(threshold) + " W=" + std::to_string(W);
        EngineConfig a = config(3, dt, opt, 1000), b = config(3, dt, opt, 1000, true);
        a.zero.stage3_param_persistence_threshold = b.zero.stage3_param_persistence_threshold = threshold;
        const Trained plain = train(a, 2), off = train(b, 2);
        // Unit 0 (4704 elements) is kept whole below a threshold of 5000; the blocks never are.
        uint64_t whole = 0, sharded = 0;
        for (int u = 0; u < layout.num_units(); ++u)
          (layout.unit_numel(u) < threshold ? whole : sharded) += layout.unit_numel(u) < threshold ? sh.unit(u).padded
                                                                                                 : sh.unit(u).shard;
        EXPECT_EQ(off.grown.live_of(MemCategory::kParam), whole * p) << what;
        EXPECT_EQ(off.peak.peak_of(MemCategory::kParam), whole * p) << what;
        EXPECT_EQ(plain.grown.live_of(MemCategory::kParam), (whole + sharded) * p) << what;
        EXPECT_EQ(off.grown.host.live_of(MemCategory::kParam), sharded * p) << what;
        EXPECT_EQ(off.peak.host.peak_of(MemCategory::kParam), sharded * p) << what;
        EXPECT_EQ(off.grown.host.live_total - plain.grown.host.live_total, sharded * p) << what;
        for (MemCategory c : {MemCategory::kGrad, MemCategory::kMaster, MemCategory::kOptim, MemCategory::kGathered,
                              MemCategory::kAct}) {
          EXPECT_EQ(off.grown.live_of(c), plain.grown.live_of(c)) << what << " " << mem_category_name(c);
          EXPECT_EQ(off.peak.peak_of(c), plain.peak.peak_of(c)) << what << " " << mem_category_name(c);
          EXPECT_EQ(off.grown.host.live_of(c), plain.grown.host.live_of(c)) << what << " " << mem_category_name(c);
        }
        // Nothing staged between steps; while a step runs, one shard per gather in flight at most.
        EXPECT_EQ(off.grown.live_of(MemCategory::kComm), plain.grown.live_of(MemCategory::kComm)) << what;
        EXPECT_GE(off.peak.peak_of(MemCategory::kComm), plain.peak.peak_of(MemCategory::kComm)) << what;
        EXPECT_GE(off.peak.peak_of(MemCategory::kComm), largest * p) << what;  // a block's shard, staged
        EXPECT_LE(off.peak.peak_of(MemCategory::kComm), plain.peak.peak_of(MemCategory::kComm) + 5 * largest * p)
            << what;
      }
    }
  }
}

TEST(ParamOffload, NeedsStageThree) {
  const model::ParamLayout layout(offload_model());
  std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
  for (int stage : {0, 1, 2})
    EXPECT_THROW({ Engine e(layout, comm, config(stage, DType::kF32, false, 1000, true)); }, UsageError) << stage;
}
