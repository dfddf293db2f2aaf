// The rules that size ZeRO-Offload's host memory, as plain functions: the engine allocates by them
// (zero/model_states.cpp, zero/optimizer_swap.cpp) and the planner sums them (plan/estimator.cpp), so
// that a change to how the offloaded update stages its work is made here once.
//
// The offloaded update (zero/shard_optimizer_offload.cpp) walks the rank's shard in sub-groups: each
// sub-group's gradient comes down into a host staging buffer while the previous sub-group is updated;
// on NVMe each sub-group's masters and states pass through one of a few host slots.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace zerodp::zero {

// The sub-group size the offloaded update uses for a requested one: on NVMe rounded up to whole 4 KiB
// blocks of fp32 (so that every sub-group starts on an I/O block), in host memory as requested.
constexpr uint64_t offload_sub_group(uint64_t requested, bool nvme) {
  return nvme ? (requested + 1023) / 1024 * 1024 : requested;
}

// The sub-groups of a shard of `shard` elements (at least one).
constexpr uint64_t offload_sub_groups(uint64_t shard, uint64_t sub_group) {
  return std::max<uint64_t>(1, (shard + sub_group - 1) / sub_group);
}

// The host buffers of fp32 gradient a shard's update stages, each min(sub_group, shard) elements: two
// when it has two sub-groups or more (one coming down while the other is updated), else one.
constexpr uint64_t offload_grad_staging_buffers(uint64_t shard, uint64_t sub_group) {
  return shard > sub_group ? 2 : 1;
}

// NVMe: the host slots the sub-groups' masters and states pass through, buffer_count of them but never
// more than there are sub-groups (the others would never be used).
constexpr uint64_t offload_nvme_slots(uint64_t buffer_count, uint64_t shard, uint64_t sub_group) {
  return std::min(buffer_count, offload_sub_groups(shard, sub_group));
}

}  // namespace zerodp::zero
