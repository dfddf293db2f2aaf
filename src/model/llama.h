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

#include "core/dtype.h"
#include "device/device.h"
#include "model/llama_config.h"
#include "model/transformer.h"

namespace zerodp::model {

// The activation memory Llama<P>::Llama allocates for micro-batches of B sequences of T tokens with
// kernels of these attention sizes (the `act` category while the model exists), RoPE tables included.
// model_activation_parts (model/model.h) is the architecture-neutral form.
template <class P>
ActivationBytes llama_activation_parts(const LlamaConfig& config, int B, int T, bool checkpointing,
                                       const device::AttentionSizes& sizes);

template <typename F>
struct LlamaActs;  // the activation arrays (llama.cpp)

template <typename F>
class Llama final : public Transformer<F, LlamaActs<F>> {
  using Base = Transformer<F, LlamaActs<F>>;
  using Acc = GradOf<F>;

 public:
  Llama(const ParamLayout& layout, int B, int T, bool checkpointing = false,
        device::Device& dev = device::default_device());
  ~Llama() override;

  // Where a block's tensors start inside its unit (the same for every block), and the outer ones.
  struct Offsets {
    size_t in_norm, qkv, qkv_bias, o, o_bias, q_norm, k_norm, post_norm, gate_up, down;  // npos: none
    size_t embed, norm, head;  // embed_tokens in unit 0; the final norm and lm_head in the head unit
  };

 private:
  void embed_forward(const F* p, const int32_t* inputs, int B, int T) override;
  void block_forward(int l, const F* p, int B, int T, bool write_output) override;
  void head_forward(const Acc* from, int rows, const F* p, Acc* logits) override;
  void head_backward(const F* p, Acc* g, int B, int T) override;
  void block_backward(int l, const F* p, Acc* g, int B, int T) override;
  void embed_backward(Acc* g, const int32_t* inputs, int B, int T) override;

  const LlamaConfig config_;
  Offsets off_;
};

extern template class Transformer<float, LlamaActs<float>>;
extern template class Transformer<double, LlamaActs<double>>;
extern template class Transformer<bf16, LlamaActs<bf16>>;
extern template class Transformer<fp16, LlamaActs<fp16>>;
extern template class Llama<float>;
extern template class Llama<double>;
extern template class Llama<bf16>;
extern template class Llama<fp16>;

}  // namespace zerodp::model
