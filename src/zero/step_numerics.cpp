#include "zero/step_numerics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "device/device.h"

namespace zerodp::zero {

GlobalNumbers global_numbers(const ModelStates& st, comm::Communicator& world, bool counts_norm, double loss_sum,
                             double global_tokens, double loss_scale, bool name_units) {
  const int U = st.num_units();
  std::vector<float> unit_nonfinite(static_cast<size_t>(U), 0.0f);
  // Each unit's own gradient elements, summed on the device with one wait for all, then added here in
  // unit order.
  std::vector<device::Device::SquaresSpan> spans;
  std::vector<int> span_unit;
  for (int u = 0; u < U; ++u) {
    const UnitShard& s = st.unit(u);
    if (s.own_begin >= s.own_end) continue;
    spans.push_back({st.grad_at(u, s.own_begin), st.grad_dtype(), s.own_end - s.own_begin});
    span_unit.push_back(u);
  }
  std::vector<double> unit_sumsq(spans.size());
  st.dev().sum_squares_each(spans, unit_sumsq.data());
  double sumsq = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!std::isfinite(unit_sumsq[i])) unit_nonfinite[span_unit[i]] = 1.0f;
    sumsq += unit_sumsq[i];
  }
  const double counted = counts_norm || !std::isfinite(sumsq) ? sumsq : 0.0;
  // Summed in fp32, as every reduction of the run is (comm/communicator.h).
  float pair[2] = {static_cast<float>(loss_sum), static_cast<float>(counted)};
  world.all_reduce(pair, 2, DType::kF32, comm::ReduceOp::kSum);
  GlobalNumbers out;
  out.loss = pair[0] / global_tokens;
  const double scaled_norm = std::sqrt(static_cast<double>(pair[1]));
  out.grad_norm = scaled_norm / loss_scale;
  out.nonfinite = !std::isfinite(pair[0]) || !std::isfinite(scaled_norm);
  if (out.nonfinite && name_units) {
    world.all_reduce(unit_nonfinite.data(), unit_nonfinite.size(), DType::kF32, comm::ReduceOp::kMax);
    for (int u = 0; u < U; ++u)
      if (unit_nonfinite[u] != 0.0f) out.nonfinite_units.push_back(u);
  }
  return out;
}

float gradient_factor(double grad_norm, double clip, double loss_scale) {
  double coef = 1.0;
  if (clip > 0) coef = std::min(1.0, clip / (grad_norm + 1e-6));
  return static_cast<float>(coef / loss_scale);
}

}  // namespace zerodp::zero
