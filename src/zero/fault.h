// A gradient fault, for the tests of the non-finite paths (fp16's loss scaling, skipping a step,
// stopping a run): at the engine's `step`-th call of step() (0-based) the first gradient element of
// `unit` that `rank` owns becomes Inf, on that rank only. Not a setting: no flag or key of `zerodp`
// reaches it; the test build of the CLI (tests/tools/zerodp_testing.cpp) adds flags that set it.
#pragma once

namespace zerodp::zero {

struct GradientFault {
  int step = -1;  // -1: never
  int rank = 0;
  int unit = 0;   // 0: the embeddings' unit, 1 + i: block i
};

}  // namespace zerodp::zero
