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
// every gradient (of activations and of parameters) are fp32 (GradOf<P>).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "device/device.h"
#include "model/gpt2_config.h"
#include "model/transformer.h"

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
struct Gpt2Acts;  // the activation arrays (gpt2.cpp)

template <typename F>
class GPT2 final : public Transformer<F, Gpt2Acts<F>> {
  using Base = Transformer<F, Gpt2Acts<F>>;
  using Acc = GradOf<F>;

 public:
  // Allocates the activations for micro-batches of up to B sequences of T tokens, under `act`.
  // `checkpointing`: keep only the residual stream entering each block and recompute the block's
  // activations during its backward (one more block forward per block, far less memory).
  // Its memory and kernels are `dev`'s (the compute seam, device/device.h).
  GPT2(const ParamLayout& layout, int B, int T, bool checkpointing = false,
       device::Device& dev = device::default_device());
  ~GPT2() override;

 private:
  void embed_forward(const F* p, const int32_t* inputs, int B, int T) override;
  void block_forward(int l, const F* p, int B, int T, bool write_output) override;
  void head_forward(const Acc* from, int rows, const F* p, Acc* logits) override;
  void head_backward(const F* p, Acc* g, int B, int T) override;
  void block_backward(int l, const F* p, Acc* g, int B, int T) override;
  void embed_backward(Acc* g, const int32_t* inputs, int B, int T) override;
  size_t offset(int unit, int tensor) const { return this->layout_.param(unit, tensor).offset; }

  const GPT2Config& config_;
};

extern template class Transformer<float, Gpt2Acts<float>>;
extern template class Transformer<double, Gpt2Acts<double>>;
extern template class Transformer<bf16, Gpt2Acts<bf16>>;
extern template class Transformer<fp16, Gpt2Acts<fp16>>;
extern template class GPT2<float>;
extern template class GPT2<double>;
extern template class GPT2<bf16>;
extern template class GPT2<fp16>;

}  // namespace zerodp::model
