#include "train/report.h"

#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "optim/optimizer.h"

namespace zerodp::train {

std::array<uint64_t, kNumMemCategories> stage0_model_states(const zero::Engine& engine) {
  const zero::EngineConfig& c = engine.config();
  const uint64_t psi = engine.shards().total_padded();
  const uint64_t p = dtype_size(c.precision.dtype);
  const uint64_t g = dtype_size(c.precision.grad_store_dtype());
  std::array<uint64_t, kNumMemCategories> out{};
  out[static_cast<size_t>(MemCategory::kParam)] = psi * p;
  out[static_cast<size_t>(MemCategory::kGrad)] = psi * g;
  out[static_cast<size_t>(MemCategory::kMaster)] = c.precision.fp32_masters() ? psi * 4 : 0;
  out[static_cast<size_t>(MemCategory::kOptim)] =
      psi * dtype_size(c.precision.state_dtype()) * optim::state_floats_per_param(c.optimizer);
  return out;
}

std::string format_memory_report(const std::vector<RankLedgers>& ledgers,
                                 const std::array<uint64_t, kNumMemCategories>& stage0, int stage) {
  // The host and nvme tiers get a column each only when some rank used them (offloading): without
  // offload the table is the device's alone. The columns are the same on every rank's rows.
  std::vector<MemTier> tiers;
  for (MemTier t : {MemTier::kHost, MemTier::kNvme}) {
    bool used = false;
    for (const RankLedgers& l : ledgers) used = used || l.memory.tier(t).any();
    if (used) tiers.push_back(t);
  }
  auto tier_cells = [&](auto cell) {
    std::string out;
    for (MemTier t : tiers) out += fmt::format(" {:>12}", cell(t));
    return out;
  };

  std::string out = fmt::format(
      "\nMemory per rank (ZeRO stage {}, {} ranks), against plain data parallelism (stage 0):\n", stage,
      ledgers.size());
  out += fmt::format("{:>4}  {:<9} {:>12} {:>12}{} {:>14} {:>8}\n", "rank", "category", "live (end)", "peak",
                     tier_cells([](MemTier t) { return fmt::format("{} peak", mem_tier_name(t)); }),
                     "stage 0 holds", "ratio");
  for (const RankLedgers& l : ledgers) {
    const MemorySnapshot& m = l.memory;
    uint64_t states = 0, states0 = 0;
    for (MemCategory c : kAllMemCategories) {
      const size_t i = static_cast<size_t>(c);
      const bool model_state = c == MemCategory::kParam || c == MemCategory::kGrad || c == MemCategory::kMaster ||
                               c == MemCategory::kOptim;
      if (model_state) {
        states += m.live[i];
        states0 += stage0[i];
      }
      bool held = m.peak[i] > 0 || stage0[i] > 0;
      for (MemTier t : tiers) held = held || m.tier(t).peak[i] > 0;
      if (!held) continue;
      out += fmt::format("{:>4}  {:<9} {:>12} {:>12}{} {:>14} {:>8}\n", l.rank, mem_category_name(c),
                         format_bytes(m.live[i]), format_bytes(m.peak[i]),
                         tier_cells([&](MemTier t) { return format_bytes(m.tier(t).peak[i]); }),
                         model_state ? format_bytes(stage0[i]) : std::string("-"),
                         model_state && stage0[i] > 0 ? fmt::format("{:.2f}x", double(m.live[i]) / double(stage0[i]))
                                                      : std::string(""));
    }
    // "states" compares the device's model states with stage 0's: the tier columns stay empty there.
    out += fmt::format("{:>4}  {:<9} {:>12} {:>12}{} {:>14} {:>8}\n", l.rank, "states", format_bytes(states), "",
                       tier_cells([](MemTier) { return std::string(); }), format_bytes(states0),
                       states0 ? fmt::format("{:.2f}x", double(states) / double(states0)) : "");
    out += fmt::format("{:>4}  {:<9} {:>12} {:>12}{}\n", l.rank, "total", format_bytes(m.live_total),
                       format_bytes(m.peak_total),
                       tier_cells([&](MemTier t) { return format_bytes(m.tier(t).peak_total); }));
  }
  out += "\n";
  return out;
}

void print_memory_report(const std::vector<RankLedgers>& ledgers, const zero::Engine& engine) {
  fmt::print("{}", format_memory_report(ledgers, stage0_model_states(engine), engine.config().zero.stage));
  std::fflush(stdout);
}

}  // namespace zerodp::train
