#include "model/units.h"

#include "core/error.h"

namespace zerodp::model {

UnitSchedule::UnitSchedule(std::vector<UnitUse> uses, int num_units) : uses_(std::move(uses)) {
  const int n = size();
  ZDP_CHECK(num_units > 0, "a schedule over {} units", num_units);
  std::vector<int> forward(num_units, 0), backward(num_units, 0);
  bool in_backward = false;
  for (int k = 0; k < n; ++k) {
    const UnitUse& use = uses_[k];
    ZDP_CHECK(use.unit >= 0 && use.unit < num_units, "use {} names unit {} of {}", k, use.unit, num_units);
    if (use.pass == Pass::kBackward) {
      in_backward = true;
      ++backward[use.unit];
    } else {
      ZDP_CHECK(!in_backward, "use {} ({} of unit {}) is a forward after the backward began", k, use.part, use.unit);
      ++forward[use.unit];
      ++forward_uses_;
    }
  }
  for (int u = 0; u < num_units; ++u)
    ZDP_CHECK(forward[u] > 0 && backward[u] > 0, "unit {} is used {} times forward and {} backward", u, forward[u],
              backward[u]);

  flags_.assign(n, 0);
  param_read_index_.assign(n, -1);
  // Walking backwards: whether a later use reads the unit, and whether one is a backward.
  std::vector<bool> read_later(num_units, false), backward_later(num_units, false);
  std::vector<int> next_use(num_units, -1);
  for (int k = n - 1; k >= 0; --k) {
    const UnitUse& use = uses_[k];
    uint8_t f = 0;
    if (next_use[use.unit] == k + 1) f |= kNextFollows;
    if (!read_later[use.unit]) f |= kLastParamRead;
    if (use.pass == Pass::kBackward && !backward_later[use.unit]) f |= kCompletesGradient;
    flags_[k] = f;
    next_use[use.unit] = k;
    if (use.reads_params) read_later[use.unit] = true;
    if (use.pass == Pass::kBackward) backward_later[use.unit] = true;
  }
  for (int k = 0; k < n; ++k) {
    if (!uses_[k].reads_params) continue;
    param_read_index_[k] = static_cast<int>(param_reads_.size());
    param_reads_.push_back(uses_[k].unit);
    if (uses_[k].pass == Pass::kForward) ++forward_param_reads_;
  }
}

}  // namespace zerodp::model
