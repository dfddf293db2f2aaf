// The estimator against published figures (ZeRO paper, the 7B/4-GPU table, Megatron's 18 bytes a
// parameter), against the padding rule of zero/sharding.h worked by hand, and its JSON's exact shape.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/layout.h"
#include "plan/estimator.h"
#include "plan/presets.h"

namespace zerodp::plan {
namespace {

uint64_t model_states(const MemoryEstimate& m) { return m.param + m.grad + m.master + m.optim; }

PlanInput bare(double params, int W, int stage, DType dtype) {
  PlanInput in;
  in.params = static_cast<uint64_t>(params);
  in.world = W;
  in.zero.stage = stage;
  in.precision.dtype = dtype;
  return in;
}

void expect_within_1pct(double got, double want, const char* what) {
  EXPECT_LE(std::abs(got - want), 0.01 * want) << what << ": got " << got << ", published " << want;
}

// Rajbhandari et al. 2020 (ZeRO), Figure 1: Ψ = 7.5B, N_d = 64, K = 12 (mixed-precision Adam:
// fp16 parameters and gradients, fp32 masters and m, v): 120, 31.4, 16.6, 1.9 GB per GPU.
TEST(Estimator, ZeroPaperSevenPointFiveBillionOnSixtyFourGpus) {
  const double published[] = {120, 31.4, 16.6, 1.9};
  for (int s = 0; s <= 3; ++s) {
    const double gb = model_states(estimate_memory(bare(7.5e9, 64, s, DType::kF16))) / 1e9;
    if (s < 3) {
      expect_within_1pct(gb, published[s], "ZeRO paper");
    } else {
      // The paper prints 16Ψ/N_d = 1.875 rounded to one decimal: check the rounding and the formula.
      EXPECT_NEAR(gb, 1.9, 0.05);
      expect_within_1pct(gb, 16 * 7.5 / 64, "ZeRO paper, P_os+g+p");
    }
  }
  // The paper's K = 12 is master (4) + AdamW m, v (8), in zerodp's categories.
  const MemoryEstimate m = estimate_memory(bare(7.5e9, 64, 0, DType::kBF16));
  EXPECT_EQ(m.master + m.optim, 12 * 7'500'000'000ULL);
  EXPECT_EQ(m.act, 0u);  // a bare count models no activations
}

TEST(Estimator, SevenBillionOnFourGpusInBf16) {
  const double published[] = {112, 49, 38.5, 28};
  for (int s = 0; s <= 3; ++s) {
    const double gb = model_states(estimate_memory(bare(7e9, 4, s, DType::kBF16))) / 1e9;
    expect_within_1pct(gb, published[s], "7B on 4 GPUs");
  }
}

TEST(Estimator, SixteenBytesAParameterEighteenWithFp32Accumulation) {
  PlanInput in = bare(1.56e9, 1, 0, DType::kBF16);
  EXPECT_EQ(model_states(estimate_memory(in)), 16 * 1'560'000'000ULL);
  in.precision.fp32_grad_accum = true;
  const MemoryEstimate m = estimate_memory(in);
  expect_within_1pct(model_states(m) / 1e9, 28.08, "GPT-2 XL, 18 bytes a parameter");
  EXPECT_EQ(m.grad, 4 * 1'560'000'000ULL);
  // The real GPT-2 XL, padded for one rank: 1,557,611,200 parameters.
  PlanInput xl;
  xl.model = gpt2_preset("gpt2-xl");
  xl.precision.dtype = DType::kBF16;
  xl.precision.fp32_grad_accum = true;
  EXPECT_EQ(param_counts(xl).numel, 1'557'611'200u);
  expect_within_1pct(model_states(estimate_memory(xl)) / 1e9, 28.08, "gpt2-xl preset, 18 bytes a parameter");
  // fp32 training: 4 + 4 + 0 + 8.
  EXPECT_EQ(model_states(estimate_memory(bare(1e6, 1, 0, DType::kF32))), 16'000'000u);
}

TEST(Estimator, ZeroOneMovesWhatPlainDataParallelismMoves) {
  const uint64_t dp = traffic_bytes_per_step(bare(1e9, 8, 0, DType::kBF16));
  const uint64_t z1 = traffic_bytes_per_step(bare(1e9, 8, 1, DType::kBF16));
  EXPECT_EQ(dp, z1);
  // 2·(7/8)·2 GB of bf16 gradients, plus the two fp32 scalars all-reduced: 2·(7/8)·8 = 14 bytes.
  EXPECT_EQ(dp, 3'500'000'000ULL + 14);
  // Stage 2 at G = 1 too; stage 3 moves 1.5 times; stage 2 at G = 4 moves 2.5 times.
  PlanInput in = bare(1e9, 8, 2, DType::kBF16);
  EXPECT_EQ(traffic_bytes_per_step(in), dp);
  in.zero.stage = 3;
  EXPECT_EQ(traffic_bytes_per_step(in) - 14, 5'250'000'000ULL);
  in.zero.stage = 2;
  in.accum = 4;
  EXPECT_EQ(traffic_bytes_per_step(in) - 14, 8'750'000'000ULL);
  // One rank sends nothing.
  EXPECT_EQ(traffic_bytes_per_step(bare(1e9, 1, 0, DType::kBF16)), 0u);
}

// Hybrid sharding: the states of an N-rank run; the group's collectives over N plus one all-reduce
// of the shard across the W/N groups, which is all that crosses a group boundary.
TEST(Estimator, HybridShardingHoldsAnNRankRunsStatesAndAllReducesAcrossGroups) {
  PlanInput in = bare(1e9, 16, 2, DType::kBF16);
  in.zero.shard_group_size = 4;
  PlanInput four = bare(1e9, 4, 2, DType::kBF16);
  EXPECT_EQ(model_states(estimate_memory(in)), model_states(estimate_memory(four)));
  EXPECT_GT(model_states(estimate_memory(in)), model_states(estimate_memory(bare(1e9, 16, 2, DType::kBF16))));
  // Group: reduce-scatter and all-gather over 4 of 2 GB: 2·(3/4)·2 GB; across 4 groups: the 500 MB
  // bf16 shard all-reduced, 2·(3/4)·500 MB; the scalars over all 16 ranks: 2·(15/16)·8 = 15 bytes.
  EXPECT_EQ(traffic_inter_group_bytes_per_step(in), 750'000'000ULL);
  EXPECT_EQ(traffic_bytes_per_step(in), 3'000'000'000ULL + 750'000'000ULL + 15);
  // One group of all ranks, stage 0, and N = W are full sharding: nothing crosses.
  in.zero.shard_group_size = 16;
  EXPECT_EQ(traffic_inter_group_bytes_per_step(in), 0u);
  EXPECT_EQ(traffic_bytes_per_step(in), traffic_bytes_per_step(bare(1e9, 16, 2, DType::kBF16)));
  in.zero.shard_group_size = 4;
  in.zero.stage = 0;
  EXPECT_EQ(traffic_inter_group_bytes_per_step(in), 0u);
  in.zero.shard_group_size = 5;  // does not divide 16
  EXPECT_THROW(estimate_memory(in), UsageError);
  // The JSON names the inter-group bytes for hybrid stages only.
  PlanInput h = bare(1e9, 16, 0, DType::kBF16);
  h.zero.shard_group_size = 4;
  const auto json = to_json(estimate_stages(h, {0, 3}, 80'000'000'000ULL));
  EXPECT_FALSE(json["stages"][0].contains("traffic_inter_group_bytes_per_step"));
  EXPECT_EQ(json["stages"][1]["traffic_inter_group_bytes_per_step"], 750'000'000ULL);
}

// Gradients travel in one dtype at every stage (the engine's reduce dtype), whatever dtype they are
// accumulated in: the compute dtype by default, fp32 when asked.
TEST(Estimator, GradientsTravelInTheReduceDtypeAtEveryStage) {
  PlanInput in = bare(1e9, 8, 0, DType::kBF16);
  in.precision.fp32_grad_accum = true;
  const uint64_t bf16[] = {3'500'000'000ULL, 3'500'000'000ULL, 3'500'000'000ULL};  // 2·7/8·2, 7/8·(2+2)
  const uint64_t fp32[] = {7'000'000'000ULL, 5'250'000'000ULL, 5'250'000'000ULL};  // 2·7/8·4, 7/8·(4+2)
  for (int stage = 0; stage <= 2; ++stage) {
    in.zero.stage = stage;
    in.precision.reduce_dtype.reset();
    EXPECT_EQ(traffic_bytes_per_step(in) - 14, bf16[stage]) << "stage " << stage;
    in.precision.reduce_dtype = DType::kF32;
    EXPECT_EQ(traffic_bytes_per_step(in) - 14, fp32[stage]) << "stage " << stage << " reduce fp32";
  }
}

// A GPT-2 small enough to pad by hand: L2 H2 C8 V10 N6, W = 3.
//   unit 0: wte 80 + wpe 48 + ln_f 16 = 144 -> ⌈144/3⌉ = 48 -> S0 = 48, P0 = 144
//   block:  12·64 + 13·8 = 872          -> ⌈872/3⌉ = 291 -> S = 304, P = 912
//   Ψ = 144 + 2·912 = 1968, Σ S = 48 + 2·304 = 656
TEST(Estimator, PadsUnitsAsTheEngineShardsThem) {
  PlanInput in;
  in.model = model::GPT2Config{2, 2, 8, 10, 6};
  in.world = 3;
  const ParamCounts c = param_counts(in);
  EXPECT_EQ(c.numel, model::ParamLayout(*in.model).total_numel());
  EXPECT_EQ(c.numel, 144u + 2 * 872u);
  EXPECT_EQ(c.padded, 1968u);
  EXPECT_EQ(c.shard, 656u);
  in.precision.dtype = DType::kBF16;
  for (int s = 0; s <= 3; ++s) {
    in.zero.stage = s;
    const MemoryEstimate m = estimate_memory(in);
    EXPECT_EQ(m.param, (s == 3 ? 656u : 1968u) * 2) << s;
    EXPECT_EQ(m.grad, (s <= 1 ? 1968u : 656u) * 2) << s;
    EXPECT_EQ(m.master, (s == 0 ? 1968u : 656u) * 4) << s;
    EXPECT_EQ(m.optim, (s == 0 ? 1968u : 656u) * 8) << s;
  }
  in.precision.dtype = DType::kF32;
  EXPECT_EQ(estimate_memory(in).master, 0u);
}

// The optimizer offload moves what zerodp's engine moves: master (fp32 runs too) and optim to the
// host, plus two sub-groups of fp32 gradient staging (one when one takes the shard); the gradients
// stay on the device.
TEST(Estimator, OptimizerOffloadMovesWhatTheEngineMoves) {
  PlanInput in = bare(1e9, 8, 2, DType::kBF16);  // shard 125M elements
  in.zero.offload_optimizer = Offload::kCpu;
  MemoryEstimate m = estimate_memory(in);
  EXPECT_EQ(m.param, 2'000'000'000u);
  EXPECT_EQ(m.grad, 250'000'000u);  // the bf16 gradient shard stays
  EXPECT_EQ(m.master + m.optim, 0u);
  EXPECT_EQ(m.host_by.master, 500'000'000u);
  EXPECT_EQ(m.host_by.optim, 1'000'000'000u);
  EXPECT_EQ(m.host_by.grad, 500'000'000u);  // sub_group_size 1e9 > the shard: all of it
  EXPECT_EQ(m.host, 2'000'000'000u);
  in.zero.sub_group_size = 1000;
  EXPECT_EQ(estimate_memory(in).host_by.grad, 2 * 4000u);
  in.precision.dtype = DType::kF32;  // the host keeps an fp32 master copy in fp32 runs too
  m = estimate_memory(in);
  EXPECT_EQ(m.master, 0u);
  EXPECT_EQ(m.host_by.master, 500'000'000u);
  in.zero.stage = 3;
  in.zero.offload_optimizer = Offload::kNvme;
  in.zero.offload_param = Offload::kNvme;
  m = estimate_memory(in);
  EXPECT_EQ(model_states(m), 500'000'000u);  // the fp32 gradient shard
  EXPECT_EQ(m.nvme, 500'000'000u * 4);  // parameters, masters, m and v
  // Two staging buffers and 4 slots of masters, m and v, of one sub-group rounded up to 1024 elements
  // (no unit window: a bare count has no units).
  EXPECT_EQ(m.host_by.grad, 2 * 1024u * 4);
  EXPECT_EQ(m.host_by.master, 4u * 1024 * 4);
  EXPECT_EQ(m.host_by.optim, 2u * 4 * 1024 * 4);
  in.zero.optimizer_buffer_count = 2;
  EXPECT_EQ(estimate_memory(in).host_by.master, 2u * 1024 * 4);
  in.zero.stage = 0;
  EXPECT_THROW(estimate_memory(in), UsageError);
  in.zero.stage = 2;
  EXPECT_THROW(estimate_memory(in), UsageError);  // parameters offload at stage 3 only
  EXPECT_THROW(zero::parse_offload("disk", "--offload-param"), UsageError);
}

// The parameter offload moves what zerodp's engine moves: stage 3's parameter shards to the host;
// each gather in flight stages one shard on the device (transient), ahead of its use.
TEST(Estimator, ParamOffloadMovesTheShardsAndStagesTheGathersInFlight) {
  PlanInput in = bare(1e9, 8, 3, DType::kBF16);  // shard 125M elements
  in.zero.offload_param = Offload::kCpu;
  MemoryEstimate m = estimate_memory(in);
  EXPECT_EQ(m.param, 0u);
  EXPECT_EQ(m.host_by.param, 250'000'000u);
  EXPECT_EQ(m.host, 250'000'000u);
  EXPECT_EQ(m.master, 500'000'000u);  // the optimizer stays unless offloaded too
  in.zero.offload_optimizer = Offload::kCpu;
  m = estimate_memory(in);
  EXPECT_EQ(m.host, 250'000'000u + 500'000'000u * 4);  // + masters, m, v and the gradient staging
  // A GPT-2: the blocks prefetched ahead of the one in use each hold a staged shard.
  PlanInput g;
  g.model = model::GPT2Config{12, 12, 768, 50257, 1024};
  g.world = 4;
  g.zero.stage = 3;
  g.precision.dtype = DType::kBF16;
  const MemoryEstimate plain = estimate_memory(g);
  g.zero.offload_param = Offload::kCpu;
  const MemoryEstimate off = estimate_memory(g);
  EXPECT_EQ(off.param, 0u);
  EXPECT_EQ(off.host_by.param, plain.param);
  EXPECT_GT(off.transient, plain.transient);
  const model::ParamLayout layout(*g.model);
  const uint64_t sb = (layout.unit_numel(1) + 3) / 4;  // a block's shard (already a multiple of 16 here)
  EXPECT_LE(off.transient - plain.transient, 4 * 2 * sb);
}

// Gradient accumulation at stages 2-3: the reducer keeps three reductions in flight and waits for
// them only after the last micro-step, so the second micro-step begins with the first one's last
// three (unit 0's and both blocks') still in flight. Worked by hand for L2 C64 V256 N64 at W = 2,
// fp32, stage 3: units of 20608 and 49984 elements (shards 10304 and 24992, already multiples of
// 16); with one micro-step the peak is the second block's backward (unit 0's and its gradient, the
// first's reduction, summed in place, the staging and its parameters); with two, the first block's
// of the second micro-step, beside the three carried over: their fp32 gradients, 4·(p0 + 2·pb) more.
// The third also begins with their receive buffers (the second's sums were added, not written):
// 4·(s0 + 2·sb) more; from then on every micro-step repeats.
TEST(Estimator, GradientAccumulationKeepsTheLastReductionsInFlight) {
  PlanInput in;
  in.model = model::GPT2Config{2, 4, 64, 256, 64};
  in.world = 2;
  in.zero.stage = 3;
  in.micro_batch = 2;
  in.seq = 32;
  const uint64_t p0 = 20608, pb = 49984, s0 = 10304, sb = 24992;
  const uint64_t one = estimate_memory(in).transient;
  const uint64_t staging = sb * 4 + 2 * sb * 4;  // a block's reduce-scatter: an fp32 piece and W pieces
  EXPECT_EQ(one, 4 * p0 + 4 * pb + 4 * pb + staging + 4 * pb);
  in.accum = 2;
  const uint64_t two = estimate_memory(in).transient;
  EXPECT_EQ(two - one, 4 * (p0 + 2 * pb));
  in.accum = 3;
  const uint64_t three = estimate_memory(in).transient;
  EXPECT_EQ(three - two, 4 * (s0 + 2 * sb));
  in.accum = 8;
  EXPECT_EQ(estimate_memory(in).transient, three);
  // Stage 2 carries the same reductions; stage 1 reduces once, after the last micro-step; one rank
  // reduces nothing.
  in.zero.stage = 2;
  in.accum = 1;
  const uint64_t stage2 = estimate_memory(in).transient;
  in.accum = 2;
  EXPECT_EQ(estimate_memory(in).transient - stage2, 4 * (p0 + 2 * pb));
  for (auto [stage, world] : {std::pair{1, 2}, std::pair{3, 1}}) {
    in.zero.stage = stage;
    in.world = world;
    in.accum = 1;
    const uint64_t base = estimate_memory(in).transient;
    in.accum = 3;
    EXPECT_EQ(estimate_memory(in).transient, base) << "stage " << stage << ", W = " << world;
  }
}

// Stages 0-1 reduce after the last micro-step only, in backward order (blocks from the last, then
// unit 0): stage 1 each unit's reduce-scatter, stage 0 each bucket's all-reduce once its lowest unit
// is stored. In another dtype than the stored gradient a reduction holds conversion buffers (stage 1:
// the unit and its shard; stage 0: the bucket) until it is retired, three kept in flight and a
// fourth's allocated before the oldest retires; the communicator's staging is held beside them at the
// largest issued so far. Values worked by hand, each equal to what `zerodp train --metrics` measured
// as the peak of gathered + comm on both ranks (docs/planner.md).
TEST(Estimator, StagesZeroOneHoldTheConversionsOfTheReductionsInFlight) {
  PlanInput in;
  in.model = model::GPT2Config{5, 4, 48, 256, 32};
  in.world = 2;
  in.precision.dtype = DType::kBF16;
  in.micro_batch = 2;
  in.seq = 16;
  const uint64_t p0 = 13920, pb = 28288, sb = 14144;
  const uint64_t wg0 = 4 * p0, wgb = 4 * pb;  // the fp32 working gradients (bf16 storage)
  auto transient = [&](int stage, bool fp32_accum, bool reduce_fp32, uint64_t bucket) {
    in.zero.stage = stage;
    in.precision.fp32_grad_accum = fp32_accum;
    in.precision.reduce_dtype = reduce_fp32 ? std::optional<DType>(DType::kF32) : std::nullopt;
    in.zero.reduce_bucket_size = bucket;
    uint64_t t = 0;
    for (int64_t G : {1, 2, 3}) {  // the earlier micro-steps leave nothing in flight
      in.accum = G;
      const uint64_t got = estimate_memory(in).transient;
      if (G > 1) {
        EXPECT_EQ(got, t) << "stage " << stage << " accum " << G;
      }
      t = got;
    }
    return t;
  };
  // Stage 1, fp32 gradients reduced in bf16: at the fourth block's launch, four blocks' conversions
  // (P + S bf16 each) beside a block's reduce-scatter staging (an fp32 piece and W bf16 pieces).
  EXPECT_EQ(transient(1, true, false, 25'000'000), 4 * (pb + sb) * 2 + (4 + 2 * 2) * sb);  // 452608
  // bf16 gradients reduced in fp32: the same, with unit 0's working gradient still open beside them
  // (a block's was freed when added into the store, before its reduction was launched).
  EXPECT_EQ(transient(1, false, true, 25'000'000), wg0 + 4 * (pb + sb) * 4 + (4 + 2 * 4) * sb);  // 904320
  // In the stored dtype the reduce-scatter runs in place: a block's backward beside the staging.
  EXPECT_EQ(transient(1, false, false, 25'000'000), wg0 + wgb + (4 + 2 * 2) * sb);
  // Stage 0, one bucket of everything, launched when unit 0 is stored: the working gradients are
  // freed by then, and the all-reduce (W·count·size > 256 KiB) stages its longest chunk, Ψ/W.
  const uint64_t psi = p0 + 5 * pb;
  EXPECT_EQ(transient(0, false, false, 25'000'000), (4 + 2 * 2) * (psi / 2));  // in place: the staging only
  EXPECT_EQ(transient(0, false, true, 25'000'000), psi * 4 + (4 + 2 * 4) * (psi / 2));
  // Buckets of 30000 elements: {5, 4}, {3, 2}, {1, 0}; all three in flight at the last launch, beside
  // the two-block bucket's staging (the largest).
  EXPECT_EQ(transient(0, false, true, 30'000), 2 * (2 * pb) * 4 + (pb + p0) * 4 + (4 + 2 * 4) * pb);  // 960896
  // fp32 gradients in bf16: a two-block bucket's all-reduce is small enough (W·count·2 ≤ 256 KiB) to
  // gather everyone's whole buffer.
  EXPECT_EQ(transient(0, true, false, 30'000), 2 * (2 * pb) * 2 + (pb + p0) * 2 + (4 + 2 * 2) * 2 * pb);  // 763328
  // Buckets of 60000: {5, 4, 3}, {2, 1, 0}, the staging of the first (chunks of 3·pb/2) kept.
  EXPECT_EQ(transient(0, false, true, 60'000), 3 * pb * 4 + (2 * pb + p0) * 4 + (4 + 2 * 4) * (3 * pb / 2));  // 1130624
  // One rank reduces nothing: the head's gradient beside a block's.
  in.world = 1;
  EXPECT_EQ(transient(1, false, true, 25'000'000), 4 * (13920 + 28272));  // unpadded at W = 1
}

// Parameters to nvme: max_in_cpu keeps the units whose shards fit in host memory, in unit order (the
// embeddings first); the host holds buffer_count + 2 buffers of the largest shard left in the file.
TEST(Estimator, ParamNvmeKeepsWhatMaxInCpuHoldsInHostMemory) {
  PlanInput g;
  g.model = model::GPT2Config{4, 12, 768, 50257, 1024};
  g.world = 4;
  g.zero.stage = 3;
  g.precision.dtype = DType::kBF16;
  g.zero.offload_optimizer = Offload::kCpu;
  g.zero.offload_param = Offload::kNvme;
  const model::ParamLayout layout(*g.model);
  const uint64_t s0 = (layout.unit_numel(0) + 3) / 4, sb = (layout.unit_numel(1) + 3) / 4;
  ASSERT_GT(s0, sb);  // the embeddings' shard is the largest
  const uint64_t states = estimate_memory(g).host_by.param;  // the 5 + 2 buffers only
  EXPECT_EQ(states, 7 * s0 * 2);
  EXPECT_EQ(estimate_memory(g).nvme_by.param, (s0 + 4 * sb) * 2);
  g.zero.param_max_in_cpu = s0 + sb;  // the embeddings and block 1
  g.zero.param_buffer_count = 2;
  MemoryEstimate m = estimate_memory(g);
  EXPECT_EQ(m.nvme_by.param, 3 * sb * 2);
  EXPECT_EQ(m.host_by.param, (s0 + sb + 4 * sb) * 2);
  g.zero.param_max_in_cpu = s0 - 1;  // not the embeddings: the blocks that fit in what is left
  m = estimate_memory(g);
  const uint64_t blocks_in = std::min<uint64_t>(4, (s0 - 1) / sb);
  EXPECT_EQ(m.nvme_by.param, (s0 + sb * (4 - blocks_in)) * 2);
  EXPECT_EQ(m.host_by.param, (blocks_in * sb + (2 + 2) * s0) * 2);  // buffer_count 2
  g.zero.param_max_in_cpu = s0 + 4 * sb;  // everything: no file, no buffers
  m = estimate_memory(g);
  EXPECT_EQ(m.nvme_by.param, 0u);
  EXPECT_EQ(m.host_by.param, (s0 + 4 * sb) * 2);
}

TEST(Estimator, LargestMicroBatchIsTheLastThatFits) {
  PlanInput in;
  in.model = gpt2_preset("gpt2");
  in.world = 8;
  in.precision.dtype = DType::kBF16;
  const uint64_t gpu = 16'000'000'000ULL;
  for (int s = 0; s <= 3; ++s) {
    in.zero.stage = s;
    const std::optional<int64_t> b = max_micro_batch(in, gpu);
    ASSERT_TRUE(b.has_value());
    ASSERT_GE(*b, 1);
    in.micro_batch = *b;
    EXPECT_LE(estimate_memory(in).total, gpu);
    in.micro_batch = *b + 1;
    EXPECT_GT(estimate_memory(in).total, gpu);
    in.micro_batch = 1;
  }
  // Checkpointing fits more; sharding more fits more.
  in.zero.stage = 0;
  const int64_t plain = *max_micro_batch(in, gpu);
  in.zero.activation_checkpointing = true;
  EXPECT_GT(*max_micro_batch(in, gpu), plain);
  in.zero.activation_checkpointing = false;
  in.zero.stage = 3;
  EXPECT_GT(*max_micro_batch(in, gpu), plain);
  EXPECT_EQ(max_micro_batch(in, 1000), 0);
  EXPECT_FALSE(max_micro_batch(bare(1e9, 8, 0, DType::kBF16), gpu).has_value());
}

// ZeRO++ on GPT-2 124M, W = 16 on 2 hosts of 8, bf16, stage 3, one micro-step, worked unit by unit
// (u0: the embeddings and tied head; 12 blocks; shards S padded to P = 16·S). Exact: per micro-step every
// unit is gathered twice over all 16 ranks (15·S·2 bytes each) and reduce-scattered once. hpZ (P = 8):
// the second gather of each unit reads the slices within the host (7·P/8·2 bytes) and never crosses;
// qwZ: each gather over all ranks sends int8 blocks, 15·(S + 4·⌈S/256⌉) bytes; qgZ: the reduce-scatter's
// partial sums and finished chunks cross as int8 pieces, 8·1·3·quantized_chunk_bytes(S) over all ranks.
TEST(Estimator, ZeroPlusPlusMovesWhatTheEngineMovesUnitByUnit) {
  PlanInput in;
  in.model = model::GPT2Config{12, 12, 768, 50257, 1024};
  in.world = 16;
  in.ranks_per_host = 8;
  in.zero.stage = 3;
  in.precision.dtype = DType::kBF16;
  const model::ParamLayout layout(*in.model);
  const auto shard = [](uint64_t n) { return ((n + 15) / 16 + 15) / 16 * 16; };
  const uint64_t s0 = shard(layout.unit_numel(0)), sb = shard(layout.unit_numel(1));
  const uint64_t psi = 16 * (s0 + 12 * sb), scalar = 2 * 15 * 8 / 16;
  const uint64_t scatter = 15 * (s0 + 12 * sb) * 2;  // bf16, in rank order
  EXPECT_EQ(traffic_bytes_per_step(in), 2 * 15 * (s0 + 12 * sb) * 2 + scatter + scalar);
  // Across: each gather half the buffer (H − 1 = 1 of 2 hosts), the sums' fp32 partials and the last
  // host's finished chunks; the scalars' ring crosses at the 2 host boundaries.
  const uint64_t across_scalar = 2 * scalar, across_scatter = 4 * psi + psi * 2 / 2;
  EXPECT_EQ(*traffic_inter_host_bytes_per_step(in), 2 * psi * 2 + across_scatter + across_scalar);

  PlanInput hpz = in;
  hpz.zero.zero_hpz_partition_size = 8;
  EXPECT_EQ(traffic_bytes_per_step(hpz), 15 * (s0 + 12 * sb) * 2 + 7 * (s0 + 12 * sb) * 2 * 2 + scatter + scalar);
  EXPECT_EQ(*traffic_inter_host_bytes_per_step(hpz), psi * 2 + across_scatter + across_scalar);
  // Every block's slice (16·sb/8 elements, bf16) is held from its forward to its backward.
  EXPECT_GE(estimate_memory(hpz).transient, estimate_memory(in).transient);
  EXPECT_LE(estimate_memory(hpz).transient - estimate_memory(in).transient, 12 * 2 * sb * 2);

  PlanInput qwz = in;
  qwz.zero.zero_quantized_weights = true;
  const auto q = [](uint64_t n) { return n + 4 * ((n + 255) / 256); };
  EXPECT_EQ(traffic_bytes_per_step(qwz), 2 * 15 * (q(s0) + 12 * q(sb)) + scatter + scalar);
  EXPECT_EQ(*traffic_inter_host_bytes_per_step(qwz), 2 * 16 * (q(s0) + 12 * q(sb)) + across_scatter + across_scalar);

  PlanInput qgz = in;
  qgz.zero.zero_quantized_gradients = true;
  const auto chunk = [&](uint64_t n) {  // pieces of 2^17 elements, each its own blocks
    uint64_t b = 0;
    for (uint64_t k = 0; k < n; k += 1 << 17) b += q(std::min<uint64_t>(1 << 17, n - k));
    return b;
  };
  EXPECT_EQ(traffic_bytes_per_step(qgz), traffic_bytes_per_step(in));  // the ledger counts the exact bytes
  EXPECT_EQ(*traffic_inter_host_bytes_per_step(qgz), 2 * psi * 2 + 8 * 3 * (chunk(s0) + 12 * chunk(sb)) + across_scalar);
  // Its staging holds the quantized pieces too.
  EXPECT_GT(estimate_memory(qgz).transient, estimate_memory(in).transient);

  // hpZ groups that span hosts (P = 16 over 2 hosts of 8) cross in two levels; P = 4 on hosts of 8 not at all.
  hpz.zero.zero_hpz_partition_size = 16;
  EXPECT_EQ(*traffic_inter_host_bytes_per_step(hpz), 2 * psi * 2 + across_scatter + across_scalar);
  hpz.zero.zero_hpz_partition_size = 4;
  EXPECT_EQ(*traffic_inter_host_bytes_per_step(hpz), psi * 2 + across_scatter + across_scalar);
  // Stages 0-2 have no qwZ or hpZ: estimate_stages shows them without.
  qwz.zero.zero_hpz_partition_size = 8;
  const std::vector<StageEstimate> all = estimate_stages(qwz, {1, 2, 3}, uint64_t{80} << 30);
  PlanInput at2 = in;
  at2.zero.stage = 2;
  EXPECT_EQ(all[1].traffic_bytes, traffic_bytes_per_step(at2));
  EXPECT_LT(all[2].traffic_bytes, traffic_bytes_per_step(in));
}

// stage3_param_persistence_threshold: units of fewer elements stay whole on every rank, never
// gathered for a use and all-gathered after each update: with every unit whole, stage 3 holds and moves
// what stage 2 does; with unit 0 whole, it holds unit 0 in full beside the blocks' shards.
TEST(Estimator, PersistentUnitsStayWholeAtStageThree) {
  PlanInput in;
  in.model = model::GPT2Config{2, 4, 48, 256, 32};  // unit 0: 13920 elements, a block 28272
  in.world = 2;
  in.micro_batch = 2;
  in.zero.stage = 3;
  in.precision.dtype = DType::kF32;
  const MemoryEstimate sharded = estimate_memory(in);
  in.zero.stage3_param_persistence_threshold = 30000;
  PlanInput at2 = in;
  at2.zero.stage = 2;
  EXPECT_EQ(estimate_memory(in).param, estimate_memory(at2).param);
  EXPECT_EQ(traffic_bytes_per_step(in), traffic_bytes_per_step(at2));
  EXPECT_LT(estimate_memory(in).transient, sharded.transient);  // nothing gathered
  in.zero.stage3_param_persistence_threshold = 20000;
  EXPECT_EQ(estimate_memory(in).param, sharded.param + 4 * (13920 - 6960));  // its shard 6960, unpadded
  in.zero.offload_param = Offload::kCpu;
  EXPECT_EQ(estimate_memory(in).param, 4u * 13920);  // the whole unit stays on the device
  EXPECT_EQ(estimate_memory(in).host_by.param, sharded.param - 4 * 6960);
}

// Stage 3 without reshard_after_forward (fp32, W = 2, eight blocks: unit 0 13920 elements, shard 6960; a
// block 28272, padded to 28288 for shards of 16-element multiples, shard 14144): every block stays
// gathered to its backward. The peak is the second block of the backward: unit 0's open gradient, the
// block's gradient, the first block's reduction in flight (its fp32 gradient, reduced in place), the
// staging of a block's reduce-scatter (an fp32 piece and W pieces) and the seven blocks still gathered:
// nine blocks' worth, against seven resharded (the block in use, four prefetched, one in flight) with
// one reduction in flight. Without overlap_comm nothing stays in flight: the peak is the first block's
// launch, beside the seven blocks still gathered. Worked by hand; `plan_cli_keep_gathered` and
// `plan_cli_no_overlap` check such runs against the engine's measured peaks.
TEST(Estimator, KeepGatheredAndNoOverlapFollowTheEngine) {
  PlanInput in;
  in.model = model::GPT2Config{8, 4, 48, 256, 32};
  in.world = 2;
  in.micro_batch = 1;
  in.seq = 8;
  in.zero.stage = 3;
  in.zero.max_reductions_in_flight = 1;
  in.precision.dtype = DType::kF32;
  const uint64_t p0 = 13920, pb = 28288, sb = 14144, staging = 4 * sb + 2 * 4 * sb;
  EXPECT_EQ(estimate_memory(in).transient, 4 * p0 + 4 * pb + 4 * pb + staging + 5 * 4 * pb);
  in.zero.reshard_after_forward = false;
  EXPECT_EQ(estimate_memory(in).transient, 4 * p0 + 4 * pb + 4 * pb + staging + 7 * 4 * pb);
  in.zero.overlap_comm = false;
  EXPECT_EQ(estimate_memory(in).transient, 4 * p0 + 7 * 4 * pb + 4 * pb + staging);
  // Resharded without overlap it holds less: no block kept, none gathered ahead.
  in.zero.reshard_after_forward = true;
  EXPECT_LT(estimate_memory(in).transient, 4 * p0 + 7 * 4 * pb + 4 * pb + staging);
}

TEST(Estimator, JsonHasExactlyTheDocumentedShape) {
  StageEstimate e;
  e.stage = 2;
  e.memory.param = 1;
  e.memory.grad = 2;
  e.memory.master = 3;
  e.memory.optim = 4;
  e.memory.act = 5;
  e.memory.transient = 99;  // not part of the JSON
  e.memory.total = 6;
  e.traffic_bytes = 7;
  e.max_micro_batch = 8;
  StageEstimate bare_count = e;
  bare_count.stage = 3;
  bare_count.max_micro_batch.reset();
  EXPECT_EQ(to_json({e, bare_count}).dump(),
            R"({"stages":[{"stage":2,"bytes_per_rank":{"param":1,"grad":2,"master":3,"optim":4,"act":5,"total":6},)"
            R"("traffic_bytes_per_step":7,"max_micro_batch":8},{"stage":3,"bytes_per_rank":{"param":1,"grad":2,)"
            R"("master":3,"optim":4,"act":5,"total":6},"traffic_bytes_per_step":7,"max_micro_batch":null}]})");
}

TEST(Estimator, RefusesWhatIsOutOfRange) {
  EXPECT_THROW(estimate_memory(PlanInput{}), UsageError);  // no model
  EXPECT_THROW(estimate_memory(bare(1e9, 0, 0, DType::kF32)), UsageError);
  EXPECT_THROW(estimate_memory(bare(1e9, 8, 4, DType::kF32)), UsageError);
  PlanInput in;
  in.model = gpt2_preset("gpt2");
  in.seq = 2048;
  EXPECT_THROW(estimate_memory(in), UsageError);
  EXPECT_THROW(gpt2_preset("gpt3"), UsageError);
}

TEST(Presets, HaveThePublishedParameterCounts) {
  const std::pair<const char*, uint64_t> counts[] = {
      {"gpt2", 124'439'808}, {"gpt2-medium", 354'823'168}, {"gpt2-large", 774'030'080}, {"gpt2-xl", 1'557'611'200}};
  for (const auto& [name, n] : counts) EXPECT_EQ(model::ParamLayout(gpt2_preset(name)).total_numel(), n) << name;
  EXPECT_EQ(gpt2_preset_names().size(), 4u);
}

// --max-reductions-in-flight: each reduction in flight holds its unit's conversion buffers, so fewer
// in flight hold less, down to one (plan_cli_tests' stages01 checks the bytes against the ledger).
TEST(Estimator, FewerReductionsInFlightHoldLess) {
  PlanInput in;
  in.model = model::GPT2Config{6, 4, 48, 256, 32};
  in.world = 2;
  in.precision.dtype = DType::kBF16;
  in.precision.reduce_dtype = DType::kF32;  // conversions beside every reduction
  in.micro_batch = 2;
  in.seq = 16;
  for (int stage : {1, 2}) {
    in.zero.stage = stage;
    uint64_t before = 0;
    for (int64_t n : {1, 2, 3, 5}) {
      in.zero.max_reductions_in_flight = n;
      const uint64_t t = estimate_memory(in).transient;
      EXPECT_GT(t, before) << "stage " << stage << ", " << n << " in flight";
      before = t;
    }
  }
  in.zero.max_reductions_in_flight = 0;
  EXPECT_THROW(estimate_memory(in), UsageError);
}

}  // namespace
}  // namespace zerodp::plan
