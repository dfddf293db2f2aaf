// What every architecture's model does with a micro-batch outside its layers: its token ids in the
// device's memory (checked against the vocabulary), the mean of its per-token losses read back, and
// its activation arrays carved out of one allocation under `act`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "device/device.h"
#include "model/carver.h"

namespace zerodp::model {

class TokenBatch {
 public:
  // Room for B·T inputs and targets in `dev`'s memory, under `act`.
  TokenBatch(device::Device& dev, int B, int T);
  // A micro-batch of n ids each, every one in [0, V) (a check: the data layer already bounds them).
  void load(const int32_t* inputs, const int32_t* targets, int n, int V);
  // A sampling context of t ids (0 < t <= T, each in [0, V): the caller's to get right, a UsageError).
  void load_context(const int32_t* inputs, int t, int T, int V);
  const int32_t* inputs() const { return inputs_; }
  const int32_t* targets() const { return targets_; }

 private:
  device::Device& dev_;
  Buffer storage_;
  int32_t *inputs_, *targets_;
};

// The mean of n per-token losses in `dev`'s memory, read back into `host` and summed in double in
// token order (the same number whatever the device).
template <class Acc>
double mean_loss(device::Device& dev, const Acc* losses, int n, std::vector<Acc>& host);

// Lays `acts` out over one allocation of `dev`'s memory under `act`: acts.carve(carver, args...) is
// called twice, to count and to carve. Returns the allocation.
template <class Acts, class... Args>
Buffer carve_activations(device::Device& dev, Acts& acts, const Args&... args) {
  Carver counter;
  acts.carve(counter, args...);
  Buffer storage = dev.allocate(counter.used, MemCategory::kAct);
  Carver carver{storage.template as<char>(), 0};
  acts.carve(carver, args...);
  return storage;
}

}  // namespace zerodp::model
