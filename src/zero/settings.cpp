#include "zero/settings.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/overloaded.h"
#include "core/names.h"
#include "core/parse.h"

namespace zerodp::zero {

namespace {
constexpr Spelling<Offload> kOffloadNames[] = {{Offload::kNone, "none"}, {Offload::kCpu, "cpu"}, {Offload::kNvme, "nvme"}};

using Z = ZeroSettings;

// Every plain setting of ZeroSettings, in the order `zerodp train --help` lists them. The hybrid
// shard group (N, node or all) and the NVMe path (one for both offload sections) have rules of their
// own and are read by hand (train/flags.cpp, train/ds_config.cpp).
const ZeroSettingRow kRows[] = {
    {"--zero-stage", "S", "stage", "stage",
     "ZeRO stage: 0 (replicated), 1 (optimizer state), 2 (+gradients), 3 (+parameters)", &Z::stage, 0, 3},
    {"--reduce-bucket-size", "N", "reduce_bucket_size", "reduce_bucket_size",
     "Elements per gradient reduction bucket", &Z::reduce_bucket_size, 1, INT64_MAX, true},
    {"--allgather-bucket-size", "N", "allgather_bucket_size", "allgather_bucket_size",
     "Elements per parameter all-gather bucket", &Z::allgather_bucket_size, 1},
    {"--overlap-comm", "", "overlap_comm", "overlap_comm",
     "Overlap gradient reduction with the backward pass, and prefetch stage 3's parameters",
     &Z::overlap_comm, 0, INT64_MAX, true},
    {"--max-reductions-in-flight", "N", "max_reductions_in_flight", "max_reductions_in_flight",
     "With --overlap-comm: gradient reductions left in flight while the backward goes on, each holding its "
     "unit's buffers (fewer: less overlap, less memory)",
     &Z::max_reductions_in_flight, 1, 64, true},
    {"--contiguous-gradients", "", "contiguous_gradients", "contiguous_gradients",
     "Accepted for DeepSpeed compatibility: zerodp always keeps gradients in flat contiguous unit buffers",
     &Z::contiguous_gradients},
    {"--prefetch-bucket-size", "N", "stage3_prefetch_bucket_size", "stage3_prefetch_bucket_size",
     "Stage 3: elements of parameters fetched ahead (stage3_prefetch_bucket_size)", &Z::stage3_prefetch_bucket_size,
     1, INT64_MAX, true},
    {"--max-live-parameters", "N", "stage3_max_live_parameters", "stage3_max_live_parameters",
     "Stage 3: most gathered parameter elements alive at once (stage3_max_live_parameters)",
     &Z::stage3_max_live_parameters, 1, INT64_MAX, true},
    {"--param-persistence-threshold", "N", "stage3_param_persistence_threshold",
     "stage3_param_persistence_threshold",
     "Stage 3: units (blocks, embeddings) of fewer elements stay whole on every rank, never gathered "
     "(stage3_param_persistence_threshold; default 0: all sharded)",
     &Z::stage3_param_persistence_threshold, 0, INT64_MAX, true},
    {"--reshard-after-forward", "", "reshard_after_forward", "reshard_after_forward",
     "Stage 3: free gathered parameters after each unit's forward (gather again for backward)",
     &Z::reshard_after_forward, 0, INT64_MAX, true},
    {"--activation-checkpointing", "", "", "",
     "Keep only each block's input and recompute its activations during backward (less act memory)",
     &Z::activation_checkpointing, 0, INT64_MAX, true},
    {"--loss-chunk", "N", "", "loss_chunk",
     "Compute the classifier, softmax and loss N tokens at a time: only N x vocabulary logits exist at once, "
     "and the backward computes each chunk's again (one more head GEMM); the same losses within rounding. "
     "0: the whole micro-batch at once",
     &Z::loss_chunk, 0, 1 << 30, true},
    {"--mlp-chunk", "N", "", "mlp_chunk",
     "Run each block's MLP N tokens at a time (a tiled MLP): its hidden layer and that layer's gradient "
     "exist for N tokens at once, and the backward computes each chunk's hidden layer again (one more "
     "up-projection GEMM without --activation-checkpointing, none with it); the same losses within "
     "rounding. 0: the whole micro-batch at once",
     &Z::mlp_chunk, 0, 1 << 30, true},
    {"--offload-optimizer", "none|cpu|nvme", "offload_optimizer.device", "offload_optimizer",
     "ZeRO-Offload (stages 1-3): fp32 master weights and optimizer states in host memory, the update run "
     "there (nvme: in files under --nvme-path, read and written around each sub-group's update); same "
     "results, less device memory",
     &Z::offload_optimizer, 0, INT64_MAX, true},
    {"--sub-group-size", "N", "sub_group_size", "sub_group_size",
     "With --offload-optimizer: shard elements updated per host round trip, the size of the host gradient "
     "staging buffer (zero_optimization.sub_group_size)",
     &Z::sub_group_size, 1, INT64_MAX, true},
    {"--buffer-count", "N", "offload_optimizer.buffer_count", "offload_optimizer_buffer_count",
     "With --offload-optimizer nvme: host slots a sub-group's states pass through "
     "(zero_optimization.offload_optimizer.buffer_count)",
     &Z::optimizer_buffer_count, 1, 64, true},
    {"--offload-param", "none|cpu|nvme", "offload_param.device", "offload_param",
     "ZeRO-Infinity's parameter offload (stage 3): the parameter shards in host memory (nvme: in files under "
     "--nvme-path, with --offload-optimizer too), copied up for each gather; same results, less device memory",
     &Z::offload_param, 0, INT64_MAX, true},
    {"--param-buffer-count", "N", "offload_param.buffer_count", "offload_param_buffer_count",
     "With --offload-param nvme: host buffers the gathers read parameter shards through "
     "(zero_optimization.offload_param.buffer_count)",
     &Z::param_buffer_count, 1, 64, true},
    {"--max-in-cpu", "N", "offload_param.max_in_cpu", "offload_param_max_in_cpu",
     "With --offload-param nvme: shard elements kept in host memory, the units that fit taken in order "
     "(zero_optimization.offload_param.max_in_cpu; default 0: every shard on nvme)",
     &Z::param_max_in_cpu, 0, INT64_MAX, true},
    {"--zero-quantized-weights", "", "zero_quantized_weights", "zero_quantized_weights",
     "ZeRO++ qwZ (stage 3): gather parameters as int8 blocks of 256 with fp32 scales, about a quarter of fp32's "
     "bytes; forward and backward compute with the dequantized weights (the numbers change, the shards stay exact)",
     &Z::zero_quantized_weights, 0, INT64_MAX, true},
    {"--hpz-partition-size", "N", "zero_hpz_partition_size", "zero_hpz_partition_size",
     "ZeRO++ hpZ (stage 3): keep a secondary copy of each unit's parameters sharded over groups of N consecutive "
     "ranks (the ranks of a host) from its forward to its backward, whose gather then stays within the group; "
     "1: off",
     &Z::zero_hpz_partition_size, 1, 1 << 20, true},
    {"--zero-quantized-gradients", "", "zero_quantized_gradients", "zero_quantized_gradients",
     "ZeRO++ qgZ (stages 2-3): the gradient reduce-scatters send the partial sums and finished chunks that cross "
     "hosts as int8 blocks (--collectives host-aware across several hosts; exact within a host)",
     &Z::zero_quantized_gradients, 0, INT64_MAX, true},
};

}  // namespace

Offload parse_offload(std::string_view text, std::string_view what) {
  if (const auto o = find_spelling(kOffloadNames, text, /*ignore_case=*/false)) return *o;
  throw UsageError(fmt::format("{}: expected cpu, nvme or none, got '{}'", what, text));
}

const char* offload_name(Offload o) { return name_of(kOffloadNames, o); }

std::span<const ZeroSettingRow> zero_setting_rows() { return kRows; }

const ZeroSettingRow* find_zero_setting_by_flag(std::string_view flag) {
  for (const ZeroSettingRow& r : kRows)
    if (!r.flag.empty() && r.flag == flag) return &r;
  return nullptr;
}

const ZeroSettingRow* find_zero_setting_by_key(std::string_view ds_key) {
  for (const ZeroSettingRow& r : kRows)
    if (!r.ds_key.empty() && r.ds_key == ds_key) return &r;
  return nullptr;
}

std::string zero_setting_label(const ZeroSettingRow& r) {
  if (r.ds_key.empty()) return std::string(r.flag);
  if (r.flag.empty()) return fmt::format("zero_optimization.{}", r.ds_key);
  return fmt::format("{} (zero_optimization.{})", r.flag, r.ds_key);
}

bool is_switch(const ZeroSettingRow& r) { return std::holds_alternative<bool Z::*>(r.field); }

void set_zero_setting(ZeroSettings& z, const ZeroSettingRow& r, std::string_view text) {
  std::visit(Overloaded{[&](int Z::*f) { z.*f = parse_int32(text, r.flag); },
                        [&](int64_t Z::*f) { z.*f = parse_int(text, r.flag); },
                        [&](bool Z::*f) { z.*f = parse_bool(text, r.flag); },
                        [&](Offload Z::*f) { z.*f = parse_offload(text, r.flag); }},
             r.field);
}

std::string zero_setting_text(const ZeroSettings& z, const ZeroSettingRow& r) {
  return std::visit(Overloaded{[&](int Z::*f) { return std::to_string(z.*f); },
                               [&](int64_t Z::*f) { return std::to_string(z.*f); },
                               [&](bool Z::*f) { return std::string(z.*f ? "true" : "false"); },
                               [&](Offload Z::*f) { return std::string(offload_name(z.*f)); }},
                    r.field);
}

namespace {

// Each count within its row's range.
void check_ranges(const ZeroSettings& z) {
  for (const ZeroSettingRow& r : kRows) {
    int64_t v = 0;
    if (const auto* f = std::get_if<int Z::*>(&r.field)) v = z.**f;
    else if (const auto* g = std::get_if<int64_t Z::*>(&r.field)) v = z.**g;
    else continue;
    if (v >= r.min && v <= r.max) continue;
    if (r.max == INT64_MAX)
      throw UsageError(fmt::format("{} must be >= {}, got {}", zero_setting_label(r), r.min, v));
    throw UsageError(fmt::format("{} must be in {}..{}, got {}", zero_setting_label(r), r.min, r.max, v));
  }
}

}  // namespace

void check_zero_modes(const ZeroSettings& m, int world_size) {
  ZDP_REQUIRE(m.stage >= 0 && m.stage <= 3, "--zero-stage (zero_optimization.stage) must be 0, 1, 2 or 3, got {}",
              m.stage);
  // ZeRO-Offload moves the sharded optimizer: at stage 0 nothing is sharded.
  ZDP_REQUIRE(m.offload_optimizer == Offload::kNone || m.stage >= 1,
              "--offload-optimizer (zero_optimization.offload_optimizer.device) {} needs ZeRO stage 1, 2 or 3: the "
              "optimizer is only offloaded where it is sharded (stage {} asked)",
              offload_name(m.offload_optimizer), m.stage);
  // ZeRO-Infinity offloads the parameter shards, which only stage 3 has.
  ZDP_REQUIRE(m.offload_param == Offload::kNone || m.stage == 3,
              "--offload-param (zero_optimization.offload_param.device) {} needs ZeRO stage 3: only stage 3 shards "
              "the parameters (stage {} asked)",
              offload_name(m.offload_param), m.stage);
  // Parameters on NVMe are written from the offloaded update's host weights (zero/param_swap.h).
  ZDP_REQUIRE(m.offload_param != Offload::kNvme || m.offload_optimizer != Offload::kNone,
              "--offload-param (zero_optimization.offload_param.device) nvme needs --offload-optimizer cpu or nvme "
              "too: the offloaded update writes the parameter shards from host memory");
  check_ranges(m);
  ZDP_REQUIRE(m.shard_group_size >= 0,
              "--shard-group-size (zero_optimization.mics_shard_size) must be a number of ranks >= 1, got {}",
              m.shard_group_size);
  ZDP_REQUIRE(m.shard_group_size == 0 || world_size % m.shard_group_size == 0,
              "--shard-group-size (zero_optimization.mics_shard_size) {} does not divide the {} rank{}: hybrid "
              "sharding needs whole groups",
              m.shard_group_size, world_size, world_size == 1 ? "" : "s");
  ZDP_REQUIRE(!m.zero_quantized_gradients || m.stage >= 2,
              "--zero-quantized-gradients (zero_optimization.zero_quantized_gradients, ZeRO++ qgZ) needs ZeRO stage 2 "
              "or 3, whose gradients are reduce-scattered every micro-step (stage {} asked)",
              m.stage);
  const bool zeropp = m.zero_quantized_weights || m.zero_hpz_partition_size > 1;
  ZDP_REQUIRE(!zeropp || m.stage == 3,
              "--zero-quantized-weights and --hpz-partition-size (ZeRO++ qwZ and hpZ) need ZeRO stage 3: only stage 3 "
              "gathers parameters (stage {} asked)",
              m.stage);
  ZDP_REQUIRE(!zeropp || m.offload_param == Offload::kNone,
              "--zero-quantized-weights and --hpz-partition-size (ZeRO++) do not go with --offload-param {} yet",
              offload_name(m.offload_param));
  ZDP_REQUIRE(m.zero_hpz_partition_size == 1 || m.shard_group_size == 0,
              "--hpz-partition-size (zero_optimization.zero_hpz_partition_size) {} with --shard-group-size {}: hybrid "
              "sharding already gathers within its groups; use one or the other",
              m.zero_hpz_partition_size, m.shard_group_size);
  ZDP_REQUIRE(world_size % m.zero_hpz_partition_size == 0,
              "--hpz-partition-size (zero_optimization.zero_hpz_partition_size) {} does not divide the {} rank{}",
              m.zero_hpz_partition_size, world_size, world_size == 1 ? "" : "s");
}

int shard_group_ranks(const ZeroSettings& m, int world_size) {
  if (m.stage == 0 || m.shard_group_size == 0) return world_size;
  return static_cast<int>(m.shard_group_size);
}

}  // namespace zerodp::zero
