// The end-of-run memory table: per rank and category, the device bytes held (live at the end, and
// peak) against what plain data parallelism (stage 0) would hold for the same model and precision,
// and the peaks of the host and nvme tiers in columns of their own when any rank used that tier.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/memory.h"
#include "train/metrics.h"
#include "zero/engine.h"

namespace zerodp::train {

// Steady-state bytes per category that stage 0 would keep for this engine's model, dtype and optimizer
// (param, grad, master, optim; 0 for the transient categories).
std::array<uint64_t, kNumMemCategories> stage0_model_states(const zero::Engine& engine);

// The table for `ledgers`, given stage 0's bytes per category (stage0_model_states) and the stage.
std::string format_memory_report(const std::vector<RankLedgers>& ledgers,
                                 const std::array<uint64_t, kNumMemCategories>& stage0, int stage);
// Prints format_memory_report for this engine to stdout.
void print_memory_report(const std::vector<RankLedgers>& ledgers, const zero::Engine& engine);

}  // namespace zerodp::train
