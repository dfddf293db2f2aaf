#include "optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/error.h"
#include "core/names.h"
#include "core/strings.h"

namespace zerodp::optim {


namespace {
constexpr Spelling<OptimizerKind> kOptimizerNames[] = {
    {OptimizerKind::kAdamW, "AdamW"}, {OptimizerKind::kSGD, "SGD"}, {OptimizerKind::kMuon, "Muon"}};
}  // namespace

const char* optimizer_name(OptimizerKind k) { return name_of(kOptimizerNames, k); }

OptimizerKind parse_optimizer(std::string_view name) {
  if (const auto k = find_spelling(kOptimizerNames, name, /*ignore_case=*/true)) return *k;
  throw UsageError(fmt::format("unknown optimizer '{}' (expected AdamW, SGD or Muon)", name));
}

size_t state_floats_per_param(const OptimizerSpec& spec) {
  switch (spec.kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kMuon: return 2;
    case OptimizerKind::kSGD: return spec.momentum != 0.0 ? 1 : 0;
  }
  return 0;
}

AdamWParams adamw_params(const OptimizerSpec& spec, double lr) {
  return AdamWParams{lr, spec.beta1, spec.beta2, spec.eps, spec.weight_decay};
}

SGDParams sgd_params(const OptimizerSpec& spec, double lr) {
  return SGDParams{lr, spec.momentum, spec.dampening, spec.weight_decay, spec.nesterov};
}

MuonParams muon_params(const OptimizerSpec& spec, double lr) {
  return MuonParams{lr, spec.momentum, spec.nesterov, spec.weight_decay};
}

void optimizer_step(const OptimizerSpec& spec, double lr, int64_t t, float* p, const float* g,
                    float* state, size_t n, std::span<const ParamSegment> segments,
                    float grad_scale) {
  for (const ParamSegment& s : segments)
    ZDP_CHECK(s.offset <= n && s.count <= n - s.offset,
              "segment [{}, {}) lies outside the shard of {} elements", s.offset,
              s.offset + s.count, n);
  switch (spec.kind) {
    case OptimizerKind::kAdamW:
      adamw_update_segments(p, g, state, state + n, segments, adamw_params(spec, lr), t, grad_scale);
      return;
    case OptimizerKind::kSGD:
      sgd_update_segments(p, g, state_floats_per_param(spec) > 0 ? state : nullptr, segments,
                          sgd_params(spec, lr), t, grad_scale);
      return;
    case OptimizerKind::kMuon:
      break;
  }
  throw RuntimeFailure("optimizer_step updates AdamW and SGD shards; Muon's matrices are updated whole by the engine");
}

}  // namespace zerodp::optim
