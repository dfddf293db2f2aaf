#include "plan/estimator.h"

#include <vector>

#include "plan/plan_rules.h"

namespace zerodp::plan {

using namespace detail;

std::optional<int64_t> max_micro_batch(const PlanInput& in, uint64_t gpu_bytes) {
  if (!in.model) return std::nullopt;
  PlanInput q = in;
  auto fits = [&](int64_t B) {
    q.micro_batch = B;
    return estimate_memory(q).total <= gpu_bytes;
  };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;  // fits(lo), hi unknown
  constexpr int64_t kLimit = int64_t{1} << 30;
  while (hi < kLimit && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi >= kLimit) return lo;
  while (hi - lo > 1) {  // fits(lo), !fits(hi)
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::vector<StageEstimate> estimate_stages(const PlanInput& in, const std::vector<int>& stages, uint64_t gpu_bytes) {
  std::vector<StageEstimate> out;
  for (int s : stages) {
    PlanInput q = in;
    q.zero.stage = s;
    // Offload exists only where DeepSpeed has it; the other stages are shown without it.
    if (s < 1) q.zero.offload_optimizer = Offload::kNone;
    if (s < 3) q.zero.offload_param = Offload::kNone;
    if (s < 1) q.zero.shard_group_size = 0;  // stage 0 shards nothing
    // ZeRO++ where it exists: qwZ and hpZ at stage 3, qgZ at stages 2-3.
    if (s < 3) {
      q.zero.zero_quantized_weights = false;
      q.zero.zero_hpz_partition_size = 1;
    }
    if (s < 2) q.zero.zero_quantized_gradients = false;
    StageEstimate e;
    e.stage = s;
    e.memory = estimate_memory(q);
    e.traffic_bytes = traffic_bytes_per_step(q);
    e.traffic_inter_group_bytes = traffic_inter_group_bytes_per_step(q);
    if (q.ranks_per_host > 0 && q.ranks_per_host < q.world) e.traffic_inter_host_bytes = traffic_inter_host_bytes_per_step(q);
    e.hybrid = is_hybrid(q);
    e.max_micro_batch = max_micro_batch(q, gpu_bytes);
    out.push_back(e);
  }
  return out;
}

nlohmann::ordered_json to_json(const std::vector<StageEstimate>& stages) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const StageEstimate& e : stages) {
    nlohmann::ordered_json bytes;
    bytes["param"] = e.memory.param;
    bytes["grad"] = e.memory.grad;
    bytes["master"] = e.memory.master;
    bytes["optim"] = e.memory.optim;
    bytes["act"] = e.memory.act;
    bytes["total"] = e.memory.total;
    nlohmann::ordered_json s;
    s["stage"] = e.stage;
    s["bytes_per_rank"] = bytes;
    s["traffic_bytes_per_step"] = e.traffic_bytes;
    if (e.hybrid) s["traffic_inter_group_bytes_per_step"] = e.traffic_inter_group_bytes;
    if (e.traffic_inter_host_bytes) s["traffic_inter_host_bytes_per_step_all_ranks"] = *e.traffic_inter_host_bytes;
    s["max_micro_batch"] = e.max_micro_batch ? nlohmann::ordered_json(*e.max_micro_batch) : nlohmann::ordered_json(nullptr);
    if (e.memory.host || e.memory.nvme) {
      auto tier = [](const MemoryEstimate::Offloaded& o, uint64_t total) {
        nlohmann::ordered_json t;
        t["param"] = o.param;
        t["grad"] = o.grad;
        t["master"] = o.master;
        t["optim"] = o.optim;
        t["total"] = total;
        return t;
      };
      s["offloaded_bytes_per_rank"] = {{"host", tier(e.memory.host_by, e.memory.host)},
                                       {"nvme", tier(e.memory.nvme_by, e.memory.nvme)}};
    }
    list.push_back(s);
  }
  nlohmann::ordered_json root;
  root["stages"] = list;
  return root;
}

}  // namespace zerodp::plan
