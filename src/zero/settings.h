// The ZeRO modes a run asks for, and the rules between them: which stage shards what (so what it
// can offload), and how hybrid sharding divides the ranks. The rules live here once, with the
// messages users see; the command line's validation, the planner and the engine all call
// check_zero_modes(), none repeats a rule.
#pragma once

#include <cstdint>
#include <string_view>

namespace zerodp::zero {

// Where an offloaded state lives (DeepSpeed's offload_optimizer.device / offload_param.device).
enum class Offload : uint8_t { kNone, kCpu, kNvme };
// "none", "cpu", "nvme"; UsageError naming `what` (the flag or key) otherwise.
Offload parse_offload(std::string_view text, std::string_view what);
const char* offload_name(Offload o);

struct ZeroModes {
  int stage = 0;                               // 0..3
  Offload offload_optimizer = Offload::kNone;  // the fp32 masters and optimizer states (stages 1-3)
  Offload offload_param = Offload::kNone;      // stage 3's parameter shards
  int64_t shard_group_size = 0;                // hybrid sharding's group; 0: one group of all ranks
  int64_t sub_group_size = 1;                  // shard elements per offloaded update
};

// UsageError, naming the flags and DeepSpeed keys involved, when the modes do not go together:
//   - the stage is 0, 1, 2 or 3;
//   - an optimizer offload needs a sharded optimizer (stage >= 1);
//   - a parameter offload needs sharded parameters (stage 3);
//   - parameters on nvme need the optimizer offloaded too (the host-side update writes them);
//   - the sub-group is at least one element;
//   - a shard group is >= 0 and divides the world size.
void check_zero_modes(const ZeroModes& modes, int world_size);

// The ranks each state is sharded over: the shard group at stages 1-3 with hybrid sharding, else all.
int shard_group_ranks(const ZeroModes& modes, int world_size);

}  // namespace zerodp::zero
