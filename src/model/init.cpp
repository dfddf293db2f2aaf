#include "model/init.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/error.h"
#include "core/rng.h"

namespace zerodp::model {

namespace {
constexpr float kInitStd = 0.02f;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

InitRule init_rule(const ParamInfo& p, const ModelConfig& config) {
  const std::string_view name = p.name;
  if (ends_with(name, ".bias")) return {InitRule::Kind::kZeros, 0.0f};
  if (config.is_llama()) {
    if (ends_with(name, "layernorm.weight") || name == "model.norm.weight") return {InitRule::Kind::kOnes, 0.0f};
    return {InitRule::Kind::kNormal, kInitStd};
  }
  if (ends_with(name, "ln_1.weight") || ends_with(name, "ln_2.weight") || name == "ln_f.weight")
    return {InitRule::Kind::kOnes, 0.0f};
  if (ends_with(name, ".c_proj.weight"))
    return {InitRule::Kind::kNormal,
            static_cast<float>(kInitStd / std::sqrt(2.0 * static_cast<double>(config.n_layer())))};
  return {InitRule::Kind::kNormal, kInitStd};
}

void init_unit_range(const ModelConfig& config, const ParamLayout& layout, int unit, size_t begin,
                     size_t count, uint64_t seed, float* dst) {
  ZDP_CHECK(layout.config() == config, "layout of {} used with config {}", layout.config().summary(),
            config.summary());
  ZDP_CHECK(unit >= 0 && unit < layout.num_units(), "unit {} of {}", unit, layout.num_units());
  const size_t unit_numel = layout.unit_numel(unit);
  ZDP_CHECK(begin <= unit_numel && count <= unit_numel - begin,
            "elements [{}, {}) are outside unit {} ({} elements)", begin, begin + count, unit, unit_numel);
  const size_t end = begin + count;
  for (const ParamInfo* p : layout.unit_params(unit)) {
    // The part of [begin, end) that falls in this tensor, in the tensor's own element indices.
    const size_t lo = std::max(begin, p->offset), hi = std::min(end, p->offset + p->numel);
    if (lo >= hi) continue;
    float* out = dst + (lo - begin);
    const size_t n = hi - lo;
    const InitRule rule = init_rule(*p, config);
    switch (rule.kind) {
      case InitRule::Kind::kZeros: std::fill(out, out + n, 0.0f); break;
      case InitRule::Kind::kOnes: std::fill(out, out + n, 1.0f); break;
      case InitRule::Kind::kNormal:
        CounterRng(seed, fnv1a64(p->name)).fill_normal(lo - p->offset, n, 0.0f, rule.std, out);
        break;
    }
  }
}

}  // namespace zerodp::model
