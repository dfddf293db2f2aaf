// zerodp-testing: the zerodp CLI with what only tests may reach. `train` (and the `train` that
// `zerodp launch` starts, which is this binary again) gains:
//   --inject-overflow-step S  the engine's step S (0-based; -1, the default: never) finds an Inf in
//                             one gradient element, as an fp16 overflow or a broken batch would leave
//   --inject-overflow-rank R  on rank R only (default 0)
//   --inject-overflow-unit U  in unit U (0: the embeddings' unit, 1 + i: block i; default 0)
// The fault is a hook of the run (train::TrainHooks), not a setting: the zerodp binary has no such flag.
#include <CLI/CLI.hpp>

#include "apps/train_options.h"
#include "zero/fault.h"

namespace zerodp::cli {
namespace {

zero::GradientFault g_fault;

void add_fault_flags(CLI::App* cmd) {
  cmd->add_option("--inject-overflow-step", g_fault.step, "Testing: make a gradient Inf at this step (-1: never)");
  cmd->add_option("--inject-overflow-rank", g_fault.rank, "Testing: the rank whose gradient becomes Inf");
  cmd->add_option("--inject-overflow-unit", g_fault.unit,
                  "Testing: the unit (0: embeddings, 1+i: block i) whose gradient becomes Inf");
}

train::TrainHooks fault_hooks() {
  train::TrainHooks hooks;
  if (g_fault.step >= 0) hooks.gradient_fault = g_fault;
  return hooks;
}

const bool installed = [] {
  train_extension() = {add_fault_flags, fault_hooks};
  return true;
}();

}  // namespace
}  // namespace zerodp::cli
