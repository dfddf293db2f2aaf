#include "model/batch.h"

#include "core/error.h"
#include "core/targets.h"

namespace zerodp::model {

TokenBatch::TokenBatch(device::Device& dev, int B, int T) : dev_(dev) {
  const size_t BT = static_cast<size_t>(B) * T;
  storage_ = dev.allocate(bytes(B, T), MemCategory::kAct);
  inputs_ = storage_.as<int32_t>();
  targets_ = inputs_ + BT;
  positions_ = targets_ + BT;
}

void TokenBatch::load(const int32_t* inputs, const int32_t* targets, const int32_t* positions, int B, int T, int V) {
  const int n = B * T;
  for (int i = 0; i < n; ++i) {
    ZDP_CHECK(inputs[i] >= 0 && inputs[i] < V, "input token {} at position {} is outside [0, {})", inputs[i], i, V);
    ZDP_CHECK((targets[i] >= 0 && targets[i] < V) || targets[i] == kIgnoreTarget,
              "target token {} at position {} is outside [0, {})", targets[i], i, V);
  }
  // The device's memory: copied through it (a GPU's is not the host's).
  dev_.copy(inputs_, inputs, sizeof(int32_t) * n);
  dev_.copy(targets_, targets, sizeof(int32_t) * n);
  packed_ = positions != nullptr;
  if (!packed_) return;
  // The kernels read t − positions[t] as the first key of token t's example: it must lie in its row.
  for (int i = 0; i < n; ++i) {
    const int t = i % T;
    ZDP_CHECK(positions[i] == 0 || (t > 0 && positions[i] == positions[i - 1] + 1),
              "position {} of token {} of row {} neither starts an example (0) nor follows the token before",
              positions[i], t, i / T);
  }
  dev_.copy(positions_, positions, sizeof(int32_t) * n);
}

void TokenBatch::load_context(const int32_t* inputs, int t, int T, int V) {
  ZDP_REQUIRE(t > 0 && t <= T, "context of {} tokens does not fit the model's {} positions", t, T);
  packed_ = false;
  for (int i = 0; i < t; ++i)
    ZDP_REQUIRE(inputs[i] >= 0 && inputs[i] < V, "token {} is outside the vocabulary [0, {})", inputs[i], V);
  dev_.copy(inputs_, inputs, sizeof(int32_t) * t);
}

template <class Acc>
double mean_loss(device::Device& dev, const Acc* losses, int n, std::vector<Acc>& host) {
  host.resize(static_cast<size_t>(n));
  dev.copy(host.data(), losses, sizeof(Acc) * n);  // a host destination: waits for the device
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(host[i]);
  return sum / n;
}

template double mean_loss(device::Device&, const float*, int, std::vector<float>&);
template double mean_loss(device::Device&, const double*, int, std::vector<double>&);

}  // namespace zerodp::model
