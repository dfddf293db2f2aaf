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
  // Room for B·T inputs, targets and positions in `dev`'s memory, under `act`.
  TokenBatch(device::Device& dev, int B, int T);
  // A micro-batch of B rows of T ids each, every one in [0, V) (a check: the data layer already bounds
  // them), and with packed sequences their positions (model/model.h; checked: each row's restart at 0
  // or go on by one).
  void load(const int32_t* inputs, const int32_t* targets, const int32_t* positions, int B, int T, int V);
  // A sampling context of t ids (0 < t <= T, each in [0, V): the caller's to get right, a UsageError).
  void load_context(const int32_t* inputs, int t, int T, int V);
  const int32_t* inputs() const { return inputs_; }
  const int32_t* targets() const { return targets_; }
  // The last micro-batch's positions when it was packed, else null.
  const int32_t* positions() const { return packed_ ? positions_ : nullptr; }
  // The bytes a TokenBatch for B·T ids holds under `act`: its inputs, targets and positions.
  static size_t bytes(int B, int T) { return 3 * static_cast<size_t>(B) * T * sizeof(int32_t); }

 private:
  device::Device& dev_;
  Buffer storage_;
  int32_t *inputs_, *targets_, *positions_;
  bool packed_ = false;
};

// The mean of n per-token losses in `dev`'s memory, read back into `host` and summed in double in
// token order (the same number whatever the device).
template <class Acc>
double mean_loss(device::Device& dev, const Acc* losses, int n, std::vector<Acc>& host);

// A model's activation memory by part (bytes of `act`): what the planner sums and reports.
struct ActivationBytes {
  uint64_t per_block = 0;  // what one block keeps for its backward: its saved set and its output
  uint64_t blocks = 0;     // all blocks: L·per_block, or L outputs and one shared set with checkpointing
  uint64_t head = 0;       // the embeddings, the final norm, the logits, the losses
  uint64_t backward = 0;   // backward working memory, 16-bit compute's GEMM working memory, the attention's
                           // scratch, RoPE tables
  uint64_t tokens = 0;     // the micro-batch's token ids
  uint64_t total() const { return blocks + head + backward + tokens; }
};

// The activation memory of a model whose arrays are Acts, for micro-batches of B sequences of T
// tokens: what acts.carve(carver, B, T, args...) lays out (counted, not allocated) by part, and its
// TokenBatch. Acts has `res` (the residual stream entering each block and leaving the last) and
// `layers` (the blocks' saved sets: one each, or one shared with checkpointing).
template <class Acts, class... Args>
ActivationBytes activation_bytes_of(int B, int T, const Args&... args) {
  Carver counter;
  Acts acts;
  acts.carve(counter, B, T, args...);
  const uint64_t L = acts.res.size() - 1, sets = acts.layers.size();
  ActivationBytes r;
  r.blocks = counter.parts[Carver::kBlockOutputs] + counter.parts[Carver::kBlockSets];
  r.per_block = counter.parts[Carver::kBlockOutputs] / L + counter.parts[Carver::kBlockSets] / sets;
  r.head = counter.parts[Carver::kHead];
  r.backward = counter.parts[Carver::kBackward];
  r.tokens = TokenBatch::bytes(B, T);
  return r;
}

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
