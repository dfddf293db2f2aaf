// The end-of-run memory table: per rank and category, the bytes held (live at the end, and peak)
// against what plain data parallelism (stage 0) would hold for the same model and precision.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "train/metrics.h"
#include "zero/engine.h"

namespace zerodp::train {

// Steady-state bytes per category that stage 0 would keep for this engine's model, dtype and optimizer
// (param, grad, master, optim; 0 for the transient categories).
std::array<uint64_t, kNumMemCategories> stage0_model_states(const zero::Engine& engine);

void print_memory_report(const std::vector<RankLedgers>& ledgers, const zero::Engine& engine);

}  // namespace zerodp::train
