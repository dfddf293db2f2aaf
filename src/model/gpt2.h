// GPT-2 forward and backward over flat parameter units (docs/reference/model.md#gpt2), llm.c style: the model owns
// its activations; parameters and gradients are not its own but are handed to it unit by unit by
// whoever runs it (the ZeRO engine gathers a unit just before it is needed and may free it after).
//
// Its uses of the units (model/units.h; the layout's schedule(), model_schedule), in order:
//   forward:  embed (unit 0: wte, wpe) → blocks (1..L) → head (unit 0: ln_f, wte)
//   backward: head (unit 0) → blocks (L..1) → embed (unit 0; reads no parameters, only adds into the
//             gradient buffer: the tied wte and wpe gradients are finished here)
//
// The element type P is what the model computes on: float (fp32 compute), double (gradient checks),
// or bf16 / fp16 (16-bit compute). In 16-bit compute the parameters are read in P; the activations
// that feed a GEMM or the attention (LayerNorm outputs, qkv, attention output and probabilities,
// the MLP's hidden layer before and after GELU) are stored in P; every GEMM accumulates in fp32
// (kernels/gemm16.h); the residual stream, LayerNorm/softmax/cross-entropy statistics, the logits and
// every gradient (of activations and of parameters) are fp32 (ComputeTypes<P>::Acc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/memory.h"
#include "device/device.h"
#include "model/batch.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/units.h"

namespace zerodp::model {

// The activation memory GPT2<P>::GPT2 allocates for a micro-batch of B sequences of T tokens with
// kernels of these attention sizes (what the `act` category holds while the model exists). With
// activation checkpointing only the residual stream entering each block is kept; one block's
// activations are recomputed in backward. model_activation_parts (model/model.h) is the
// architecture-neutral form.
template <class P>
ActivationBytes gpt2_activation_parts(const GPT2Config& config, int B, int T, bool checkpointing,
                                      const device::AttentionSizes& sizes);

template <typename F>
class GPT2 final : public Model<F> {
  using Acc = GradOf<F>;

 public:
  // Allocates the activations for micro-batches of up to B sequences of T tokens, under `act`.
  // `checkpointing`: keep only the residual stream entering each block and recompute the block's
  // activations during its backward (one more block forward per block, far less memory).
  // Its memory and kernels are `dev`'s (the compute seam, device/device.h).
  GPT2(const ParamLayout& layout, int B, int T, bool checkpointing = false,
       device::Device& dev = device::default_device());
  ~GPT2() override;
  GPT2(const GPT2&) = delete;
  GPT2& operator=(const GPT2&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int max_batch() const override { return B_; }
  int max_seq() const override { return T_; }

  double forward(const int32_t* inputs, const int32_t* targets, UnitAccess<F>& units) override;
  const Acc* losses() const override;
  const std::vector<Acc>& host_losses() const override { return host_losses_; }
  void backward(Acc dloss, UnitAccess<F>& units) override;
  void next_token_logits(const int32_t* inputs, int t, UnitAccess<F>& units, Acc* logits) override;

  struct Acts;  // the activation arrays (opaque; public so gpt2_activation_parts can lay them out)

 private:
  void forward_trunk(const int32_t* inputs, int B, int T, UnitAccess<F>& units);
  // Block l's forward from res[l]; writes res[l+1] unless recomputing for backward.
  void block_forward(int l, const F* p, int B, int T, bool write_output);

  const ParamLayout& layout_;
  int B_, T_;
  bool checkpointing_;
  device::Device& dev_;
  const device::ModelKernels<F>& k_;
  std::unique_ptr<Acts> acts_;
  std::unique_ptr<TokenBatch> tokens_;  // the last micro-batch's (or context's) token ids
  std::vector<Acc> host_losses_;  // the last forward's per-token losses, read back to sum them
  int last_B_ = 0, last_T_ = 0;
};

extern template class GPT2<float>;
extern template class GPT2<double>;
extern template class GPT2<bf16>;
extern template class GPT2<fp16>;

}  // namespace zerodp::model
