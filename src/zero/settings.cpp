#include "zero/settings.h"

#include "core/error.h"
#include "core/names.h"

namespace zerodp::zero {

namespace {
constexpr Spelling<Offload> kOffloadNames[] = {{Offload::kNone, "none"}, {Offload::kCpu, "cpu"}, {Offload::kNvme, "nvme"}};
}  // namespace

Offload parse_offload(std::string_view text, std::string_view what) {
  if (const auto o = find_spelling(kOffloadNames, text, /*ignore_case=*/false)) return *o;
  throw UsageError(fmt::format("{}: expected cpu, nvme or none, got '{}'", what, text));
}

const char* offload_name(Offload o) { return name_of(kOffloadNames, o); }

void check_zero_modes(const ZeroModes& m, int world_size) {
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
  ZDP_REQUIRE(m.sub_group_size >= 1, "--sub-group-size (zero_optimization.sub_group_size) must be >= 1, got {}",
              m.sub_group_size);
  ZDP_REQUIRE(m.shard_group_size >= 0,
              "--shard-group-size (zero_optimization.mics_shard_size) must be a number of ranks >= 1, got {}",
              m.shard_group_size);
  ZDP_REQUIRE(m.shard_group_size == 0 || world_size % m.shard_group_size == 0,
              "--shard-group-size (zero_optimization.mics_shard_size) {} does not divide the {} rank{}: hybrid "
              "sharding needs whole groups",
              m.shard_group_size, world_size, world_size == 1 ? "" : "s");
}

int shard_group_ranks(const ZeroModes& m, int world_size) {
  if (m.stage == 0 || m.shard_group_size == 0) return world_size;
  return static_cast<int>(m.shard_group_size);
}

}  // namespace zerodp::zero
