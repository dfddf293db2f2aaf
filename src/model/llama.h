// The Llama family's forward and backward over flat parameter units (Hugging Face's LlamaForCausalLM,
// Qwen2ForCausalLM and Qwen3ForCausalLM; docs/reference/model.md#the-llama-family-the-function), on the model seam as GPT2 is: the model owns its
// activations, its parameters and gradients are handed to it unit by unit.
//
// A block, with x the fp32 residual stream:
//   h = rmsnorm(x)·w1 ; q,k,v = h·[Wq;Wk;Wv]ᵀ (+ biases)
//   q,k = rmsnorm(q)·wq, rmsnorm(k)·wk over each head   (Qwen 3's q_norm, k_norm)
//   q,k = rope(q), rope(k)
//   x += o_proj(attention(q, k, v))          (grouped-query: KV heads shared by NH/KV query heads)
//   h = rmsnorm(x)·w2 ; x += down(silu(h·Wgateᵀ) · (h·Wupᵀ))
// then logits = rmsnorm(x)·w · lm_headᵀ (lm_head = embed_tokens when tied).
//
// Its uses of the units (model_schedule; the layout's schedule()), in order:
//   forward:  embed (unit 0) → blocks (1..L) → head (unit 0 when tied, L+1 when not)
//   backward: head → blocks (L..1) → embed (unit 0; reads no parameters, adds into its gradient)
//
// Types as in GPT2 (model/gpt2.h): P the compute type of parameters and of the activations that feed
// a GEMM or the attention, fp32 (Acc) for the residual stream, statistics, logits and every gradient.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "device/device.h"
#include "model/batch.h"
#include "model/layout.h"
#include "model/llama_config.h"
#include "model/model.h"

namespace zerodp::model {

// The activation memory Llama<P>::Llama allocates for micro-batches of B sequences of T tokens with
// kernels of these attention sizes (the `act` category while the model exists), RoPE tables included.
// model_activation_parts (model/model.h) is the architecture-neutral form.
template <class P>
ActivationBytes llama_activation_parts(const LlamaConfig& config, int B, int T, bool checkpointing,
                                       const device::AttentionSizes& sizes);

template <typename F>
class Llama final : public Model<F> {
  using Acc = GradOf<F>;

 public:
  Llama(const ParamLayout& layout, int B, int T, bool checkpointing = false,
        device::Device& dev = device::default_device());
  ~Llama() override;
  Llama(const Llama&) = delete;
  Llama& operator=(const Llama&) = delete;

  int max_batch() const override { return B_; }
  int max_seq() const override { return T_; }
  double forward(const int32_t* inputs, const int32_t* targets, UnitAccess<F>& units) override;
  const Acc* losses() const override;
  const std::vector<Acc>& host_losses() const override { return host_losses_; }
  void backward(Acc dloss, UnitAccess<F>& units) override;
  void next_token_logits(const int32_t* inputs, int t, UnitAccess<F>& units, Acc* logits) override;

  struct Acts;  // the activation arrays (opaque; public so llama_activation_parts can lay them out)
  // Where a block's tensors start inside its unit (the same for every block), and the outer ones.
  struct Offsets {
    size_t in_norm, qkv, qkv_bias, o, o_bias, q_norm, k_norm, post_norm, gate_up, down;  // npos: none
    size_t embed, norm, head;  // embed_tokens in unit 0; the final norm and lm_head in the head unit
  };

 private:
  void forward_trunk(const int32_t* inputs, int B, int T, UnitAccess<F>& units);
  void block_forward(int l, const F* p, int B, int T, bool write_output);
  // The final norm and the logits of `rows` rows of the last residual stream starting at `from`.
  void head_forward(const Acc* from, int rows, const F* p, Acc* logits);

  const ParamLayout& layout_;
  const LlamaConfig config_;
  int B_, T_;
  bool checkpointing_;
  device::Device& dev_;
  const device::ModelKernels<F>& k_;
  Offsets off_;
  std::unique_ptr<Acts> acts_;
  std::unique_ptr<TokenBatch> tokens_;  // the last micro-batch's (or context's) token ids
  std::vector<Acc> host_losses_;
  int last_B_ = 0, last_T_ = 0;
};

extern template class Llama<float>;
extern template class Llama<double>;
extern template class Llama<bf16>;
extern template class Llama<fp16>;

}  // namespace zerodp::model
