#include "train/report.h"

#include <fmt/format.h>

#include "optim/optimizer.h"

namespace zerodp::train {

std::array<uint64_t, kNumMemCategories> stage0_model_states(const zero::Engine& engine) {
  const zero::EngineConfig& c = engine.config();
  const uint64_t psi = engine.shards().total_padded();
  const uint64_t p = dtype_size(c.dtype);
  const uint64_t g = (c.fp32_grad_accum || c.dtype == DType::kF32) ? 4 : p;
  std::array<uint64_t, kNumMemCategories> out{};
  out[static_cast<size_t>(MemCategory::kParam)] = psi * p;
  out[static_cast<size_t>(MemCategory::kGrad)] = psi * g;
  out[static_cast<size_t>(MemCategory::kMaster)] = c.dtype == DType::kF32 ? 0 : psi * 4;
  out[static_cast<size_t>(MemCategory::kOptim)] = psi * 4 * optim::state_floats_per_param(c.optimizer);
  return out;
}

void print_memory_report(const std::vector<RankLedgers>& ledgers, const zero::Engine& engine) {
  const auto s0 = stage0_model_states(engine);
  const int stage = engine.config().stage;
  fmt::print("\nMemory per rank (ZeRO stage {}, {} ranks), against plain data parallelism (stage 0):\n", stage,
             ledgers.size());
  fmt::print("{:>4}  {:<9} {:>12} {:>12} {:>14} {:>8}\n", "rank", "category", "live (end)", "peak",
             "stage 0 holds", "ratio");
  for (const RankLedgers& l : ledgers) {
    uint64_t states = 0, states0 = 0;
    for (MemCategory c : kAllMemCategories) {
      const size_t i = static_cast<size_t>(c);
      const bool model_state = c == MemCategory::kParam || c == MemCategory::kGrad || c == MemCategory::kMaster ||
                               c == MemCategory::kOptim;
      if (model_state) {
        states += l.memory.live[i];
        states0 += s0[i];
      }
      if (l.memory.peak[i] == 0 && s0[i] == 0) continue;
      fmt::print("{:>4}  {:<9} {:>12} {:>12} {:>14} {:>8}\n", l.rank, mem_category_name(c),
                 format_bytes(l.memory.live[i]), format_bytes(l.memory.peak[i]),
                 model_state ? format_bytes(s0[i]) : std::string("-"),
                 model_state && s0[i] > 0 ? fmt::format("{:.2f}x", double(l.memory.live[i]) / double(s0[i]))
                                          : std::string(""));
    }
    fmt::print("{:>4}  {:<9} {:>12} {:>12} {:>14} {:>8}\n", l.rank, "states", format_bytes(states), "",
               format_bytes(states0), states0 ? fmt::format("{:.2f}x", double(states) / double(states0)) : "");
    fmt::print("{:>4}  {:<9} {:>12} {:>12}\n", l.rank, "total", format_bytes(l.memory.live_total),
               format_bytes(l.memory.peak_total));
  }
  fmt::print("\n");
  std::fflush(stdout);
}

}  // namespace zerodp::train
