// The model seam: what the engine, evaluation and sampling run, without naming an architecture. A
// model owns its activations (allocated once, for micro-batches of up to B sequences of T tokens,
// under the ledger's `act`); parameters and gradients are not its own but are handed to it unit by
// unit through a UnitAccess, in the order of its layout's UnitSchedule (model/units.h).
//
// P is what the model computes on: float (fp32 compute), double (gradient checks), or bf16 / fp16
// (16-bit compute, its parameters read in P; gradients and the loss accumulate in fp32).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "device/device.h"
#include "model/batch.h"
#include "model/layout.h"
#include "model/units.h"

namespace zerodp::model {

// How a model keeps its activations.
struct ActivationSettings {
  // (A bare bool is `checkpointing` alone.)
  ActivationSettings(bool checkpoint_blocks = false, int64_t loss_chunk_tokens = 0,  // NOLINT(google-explicit-constructor)
                     int64_t mlp_chunk_tokens = 0)
      : checkpointing(checkpoint_blocks), loss_chunk(loss_chunk_tokens), mlp_chunk(mlp_chunk_tokens) {}
  // Keep only each block's input and recompute its activations during its backward (the gradients are
  // bitwise the same).
  bool checkpointing = false;
  // Tokens the classifier (logits, softmax, loss) computes at a time: only loss_chunk × V logits exist
  // at once, and the backward computes each chunk's again (one more classifier GEMM a micro-step).
  // The losses and gradients agree with whole-batch ones within rounding (the classifier's weight
  // gradient sums the chunks one after another). 0, or B·T or more: the micro-batch's B·T rows at once.
  int64_t loss_chunk = 0;
  // Tokens each block's MLP computes at a time (the tiled MLP of Arctic's long-sequence training): its
  // hidden layer and that layer's gradient exist for mlp_chunk rows only, and the backward computes each
  // chunk's hidden layer again from the saved norm output (one more up-projection GEMM a block when the
  // blocks are not checkpointed; none when they are: the recompute skips the MLP). The losses and
  // gradients agree with whole-batch ones within rounding (the MLP's weight gradients sum the chunks one
  // after another). 0, or B·T or more: the micro-batch's B·T rows at once.
  int64_t mlp_chunk = 0;
  // The rows of logits a model for micro-batches of `rows` tokens holds at once.
  int64_t logit_rows(int64_t rows) const { return loss_chunk > 0 && loss_chunk < rows ? loss_chunk : rows; }
  // The rows of MLP hidden layer it holds at once.
  int64_t mlp_rows(int64_t rows) const { return mlp_chunk > 0 && mlp_chunk < rows ? mlp_chunk : rows; }
};

template <typename P>
class Model {
 public:
  using Acc = GradOf<P>;
  virtual ~Model() = default;

  virtual int max_batch() const = 0;
  virtual int max_seq() const = 0;

  // Runs the forward pass of a micro-batch ([B, T] token ids, targets in [0, V) or kIgnoreTarget) and
  // returns the mean cross-entropy over its B·T tokens. Keeps what backward needs. `positions` [B, T]:
  // packed sequences, each token's position in its example (0 where an example starts, else one more
  // than the token before): a token attends only to its own example's tokens and is embedded at its
  // position there, so that each example computes as it would alone. Null: each row one sequence.
  virtual double forward(const int32_t* inputs, const int32_t* targets, const int32_t* positions,
                         UnitAccess<P>& units) = 0;
  // The per-token losses of the last forward, [B·T], in the device's memory.
  virtual const Acc* losses() const = 0;
  // The same, read back into host memory by the forward (row-major [B, T]).
  virtual const std::vector<Acc>& host_losses() const = 0;
  // Backward of the last forward: the gradient of Σ_tokens dloss·loss_token, accumulated into
  // units.grads(u). dloss = loss scale / number of tokens the step's loss averages over.
  virtual void backward(Acc dloss, UnitAccess<P>& units) = 0;
  // Inference: logits [V] of the next token after the t tokens of `inputs` (one sequence, t <= T).
  virtual void next_token_logits(const int32_t* inputs, int t, UnitAccess<P>& units, Acc* logits) = 0;
};

// The model `layout` describes, with activations for micro-batches of up to B sequences of T tokens
// on `dev`, kept as `acts` says.
template <typename P>
std::unique_ptr<Model<P>> make_model(const ParamLayout& layout, int B, int T, ActivationSettings acts = {},
                                     device::Device& dev = device::default_device());

// The activation memory make_model's model allocates computing in `compute` with kernels of these
// attention sizes (the `act` category while it exists), by part: what the planner sums, for any
// device without opening it (device::attention_sizes).
ActivationBytes model_activation_parts(const ModelConfig& config, int B, int T, ActivationSettings acts,
                                       DType compute, const device::AttentionSizes& sizes);
// Its total on the CPU device.
size_t model_activation_bytes(const ModelConfig& config, int B, int T, ActivationSettings acts = {},
                              DType compute = DType::kF32);

extern template std::unique_ptr<Model<float>> make_model(const ParamLayout&, int, int, ActivationSettings,
                                                                     device::Device&);
extern template std::unique_ptr<Model<double>> make_model(const ParamLayout&, int, int, ActivationSettings,
                                                                     device::Device&);
extern template std::unique_ptr<Model<bf16>> make_model(const ParamLayout&, int, int, ActivationSettings,
                                                                     device::Device&);
extern template std::unique_ptr<Model<fp16>> make_model(const ParamLayout&, int, int, ActivationSettings,
                                                                     device::Device&);

}  // namespace zerodp::model
