// `zerodp train`: reads the initial weights and the token file, builds the ZeRO engine on the world
// communicator, runs the steps with a progress line each, writes the metrics of docs/reference/metrics.md and the
// consolidated weights (--out).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "train/train_config.h"
#include "zero/engine.h"
#include "zero/fault.h"

namespace zerodp::train {

// The engine settings a training configuration asks for.
zero::EngineConfig engine_config(const TrainConfig& cfg);

// "unit 0 (wte, wpe, ln_f)", "unit 3 (block 2)": a unit for messages.
std::string unit_label(const model::ParamLayout& layout, int unit);
// "'h.2.attn.c_attn.weight'[17]": element `element` of a unit, by its tensor.
std::string element_label(const model::ParamLayout& layout, int unit, size_t element);

struct TrainResult {
  std::vector<double> losses;  // per step
  double tokens_per_second = 0;
};

// What a test build of the CLI adds to a run (tests/tools/zerodp_testing.cpp); a user's run has none.
struct TrainHooks {
  std::optional<zero::GradientFault> gradient_fault;
};

// Runs the whole training on comm::world(). Throws zerodp::Error on bad input (exit 2), over budget (3).
TrainResult run_training(TrainConfig cfg, const TrainHooks& hooks = {});

}  // namespace zerodp::train
