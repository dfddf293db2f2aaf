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
// Types as in GPT2 (model/gpt2.cpp): P the compute type of parameters and of the activations that feed
// a GEMM or the attention, fp32 (Acc) for the residual stream, statistics, logits and every gradient.


#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "model/architectures.h"
#include "model/llama_config.h"
#include "model/transformer.h"
#include "model/batch.h"
#include "model/rope.h"

namespace zerodp::model {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);
// Every dense layer's weight is PyTorch's Linear's, [out, in].
constexpr kernels::WeightLayout kLinear = kernels::WeightLayout::kOutIn;

template <typename P, typename Acc>
struct LlamaLayerActs {
  P* ln1;        // input_layernorm's output [BT,C]
  Acc* rstd1;    // and its statistic [BT]
  P* qkv;        // q, k (normed where the model norms them, rotated), v [BT, (NH + 2·KV)·D]
  P* qk_pre;     // q's heads [BT, NH·D] then k's [BT, KV·D] before their norms (null without them)
  Acc* qk_rstd;  // and the norms' statistics, [BT·NH] then [BT·KV]
  P* atty;       // attention output before o_proj [BT, NH·D]
  P* att;        // what the attention saves for its backward
  Acc* res2;     // residual stream after attention [BT,C]
  P* ln2;        // post_attention_layernorm's output
  Acc* rstd2;
  P* gate_up;    // gate | up [BT, 2I]; in chunks, [rows, 2I] of one chunk (every block's)
  P* act;        // silu(gate)·up [BT, I]; in chunks, [rows, I]
};

// The sizes of a config the model's arrays and calls use.
struct Dims {
  int C, D, NH, KV, I, V, L;
  int window;  // sliding window of the attention, 0: none
  int qd() const { return NH * D; }
  int qkv() const { return (NH + 2 * KV) * D; }
  explicit Dims(const LlamaConfig& c)
      : C(c.n_embd), D(c.head_dim), NH(c.n_head), KV(c.n_kv_head), I(c.intermediate_size), V(c.vocab_size),
        L(c.n_layer), window(c.sliding_window) {}
  kernels::AttentionShape attention(int B, int T) const { return {B, T, NH, KV, D, window}; }
};

size_t offset_of(const ParamLayout& layout, const std::string& name, bool optional = false) {
  const ParamInfo* p = layout.find(name);
  ZDP_CHECK(p != nullptr || optional, "the Llama layout has no '{}'", name);
  return p ? p->offset : kNone;
}

}  // namespace

template <typename F>
struct LlamaActs : TransformerActs<F, LlamaLayerActs<F, GradOf<F>>> {
  using P = F;
  using Acc = GradOf<F>;
  Acc* rstdf;                  // the final norm's statistic [BT]
  Acc *dgate_up, *dact;        // the MLP's gradients [BT,2I], [BT,I] (MLP in chunks: the chunk's rows)
  float *rope_cos, *rope_sin;  // [T, D/2]

  void carve(Carver& c, int B, int T, const LlamaConfig& cfg, const ActivationSettings& s,
             const device::AttentionSizes& k) {
    const Dims d(cfg);
    const size_t BT = static_cast<size_t>(B) * T, C = d.C, V = d.V, I = d.I;
    const size_t LR = static_cast<size_t>(s.logit_rows(static_cast<int64_t>(BT)));  // rows of logits at once
    const size_t MR = static_cast<size_t>(s.mlp_rows(static_cast<int64_t>(BT)));    // rows of MLP hidden layer
    const size_t QD = d.qd(), QKV = d.qkv();
    if (kIs16<F>) c.align = 64;
    c.take_blocks(this->res, this->layers, d.L, s.checkpointing, BT * C);
    for (auto& a : this->layers) {
      a.ln1 = c.take<P>(BT * C);
      a.rstd1 = c.take<Acc>(BT);
      a.qkv = c.take<P>(BT * QKV);
      if (cfg.qk_norm()) {
        a.qk_pre = c.take<P>(BT * (QKV - d.KV * d.D));
        a.qk_rstd = c.take<Acc>(BT * (d.NH + d.KV));
      }
      a.atty = c.take<P>(BT * QD);
      a.att = reinterpret_cast<P*>(c.take<char>(k.attention_saved_bytes(d.attention(B, T))));
      a.res2 = c.take<Acc>(BT * C);
      a.ln2 = c.take<P>(BT * C);
      a.rstd2 = c.take<Acc>(BT);
      if (MR < BT) continue;  // the MLP's hidden layer: one chunk's, below
      a.gate_up = c.take<P>(BT * 2 * I);
      a.act = c.take<P>(BT * I);
    }
    c.part = Carver::kHead;
    this->lnf = c.take<P>(BT * C);
    rstdf = c.take<Acc>(BT);
    this->logits = c.take<Acc>(LR * V);
    this->logit_stats = c.take<Acc>(2 * LR);
    this->losses = c.take<Acc>(BT);
    c.part = Carver::kBackward;
    this->dres = c.take<Acc>(BT * C);
    this->dln = c.take<Acc>(BT * C);
    this->datty = c.take<Acc>(BT * QD);
    this->dqkv = c.take<Acc>(BT * QKV);
    if (MR < BT) {
      P* gate_up = c.take<P>(MR * 2 * I);
      P* act = c.take<P>(MR * I);
      for (auto& a : this->layers) {
        a.gate_up = gate_up;
        a.act = act;
      }
    }
    dgate_up = c.take<Acc>(MR * 2 * I);
    dact = c.take<Acc>(MR * I);
    if constexpr (kIs16<F>) {  // the 16-bit GEMM outputs (qkv, gate_up) and the gradients rounded for GEMMs
      this->gemm_out = c.take<float>(std::max(BT * QKV, MR * 2 * I));
      this->operand16 = c.take<P>(std::max({BT * device::operand16_row(std::max(QKV, C)),
                                            MR * device::operand16_row(2 * I), LR * device::operand16_row(V)}));
    }
    this->att_scratch = c.take<char>(k.attention_scratch_bytes(d.attention(B, T)));
    rope_cos = c.take<float>(static_cast<size_t>(T) * (d.D / 2));
    rope_sin = c.take<float>(static_cast<size_t>(T) * (d.D / 2));
  }
};

template <typename F>
class Llama final : public Transformer<F, LlamaActs<F>> {
  using Base = Transformer<F, LlamaActs<F>>;
  using Acc = GradOf<F>;

 public:
  Llama(const ParamLayout& layout, int B, int T, ActivationSettings acts, device::Device& dev);

  // Where a block's tensors start inside its unit (the same for every block), and the outer ones.
  struct Offsets {
    size_t in_norm, qkv, qkv_bias, o, o_bias, q_norm, k_norm, post_norm, gate_up, down;  // npos: none
    size_t embed, norm, head;  // embed_tokens in unit 0; the final norm and lm_head in the head unit
  };

 private:
  ZDP_TRANSFORMER_STEPS
  void mlp_hidden(LlamaLayerActs<F, Acc>& x, const F* p, int r0, int rows);

  const LlamaConfig config_;
  Offsets off_;
};

template <typename F>
Llama<F>::Llama(const ParamLayout& layout, int B, int T, ActivationSettings acts, device::Device& dev)
    : Base(layout, layout.config().llama(), B, T, acts, dev), config_(layout.config().llama()) {
  const std::string block = "model.layers.0.";
  off_.in_norm = offset_of(layout, block + "input_layernorm.weight");
  off_.qkv = offset_of(layout, block + "self_attn.q_proj.weight");
  off_.qkv_bias = offset_of(layout, block + "self_attn.q_proj.bias", true);
  off_.o = offset_of(layout, block + "self_attn.o_proj.weight");
  off_.o_bias = offset_of(layout, block + "self_attn.o_proj.bias", true);
  off_.q_norm = offset_of(layout, block + "self_attn.q_norm.weight", true);
  off_.k_norm = offset_of(layout, block + "self_attn.k_norm.weight", true);
  off_.post_norm = offset_of(layout, block + "post_attention_layernorm.weight");
  off_.gate_up = offset_of(layout, block + "mlp.gate_proj.weight");
  off_.down = offset_of(layout, block + "mlp.down_proj.weight");
  off_.embed = offset_of(layout, "model.embed_tokens.weight");
  off_.norm = offset_of(layout, "model.norm.weight");
  off_.head = config_.tie_word_embeddings ? off_.embed : offset_of(layout, "lm_head.weight");

  // The rotary tables of positions [0, T), computed on the host, copied to the device once.
  const int half = config_.head_dim / 2;
  const std::vector<float> inv_freq = rope_inv_freq(
      config_.rope_theta, config_.head_dim, config_.rope_scaling ? &*config_.rope_scaling : nullptr);
  std::vector<float> cos(static_cast<size_t>(T) * half), sin(cos.size());
  rope_tables(cos.data(), sin.data(), inv_freq.data(), T, half);
  this->dev_.copy(this->acts_->rope_cos, cos.data(), cos.size() * sizeof(float));
  this->dev_.copy(this->acts_->rope_sin, sin.data(), sin.size() * sizeof(float));
  this->dev_.synchronize();  // the host tables go out of scope
}

template <typename F>
void Llama<F>::embed_forward(const F* p, const int32_t* inputs, int B, int T) {
  this->k_.embedding_forward(this->acts_->res[0], inputs, nullptr, p + off_.embed, nullptr, B, T, config_.n_embd);
}

template <typename F>
void Llama<F>::block_forward(int l, const F* p, int B, int T, bool write_output) {
  const Dims d(config_);
  const int BT = B * T, C = d.C, QKV = d.qkv(), I = d.I;
  const size_t n = static_cast<size_t>(BT) * C;
  const double eps = config_.rms_norm_eps;
  const device::ModelKernels<F>& k = this->k_;
  LlamaActs<F>& a = *this->acts_;
  auto& x = this->block_acts(l);
  const F* qkv_bias = off_.qkv_bias == kNone ? nullptr : p + off_.qkv_bias;
  const F* o_bias = off_.o_bias == kNone ? nullptr : p + off_.o_bias;
  k.rmsnorm_forward(x.ln1, x.rstd1, a.res[l], p + off_.in_norm, BT, C, eps);
  k.linear_forward(x.qkv, x.ln1, p + off_.qkv, qkv_bias, BT, C, QKV, kLinear, a.gemm_out);
  if (off_.q_norm != kNone) {  // each q head, then each k head (they follow the q heads in a row)
    const size_t q = static_cast<size_t>(d.qd()), rows = static_cast<size_t>(BT);
    k.head_rmsnorm_forward(x.qkv, x.qk_pre, x.qk_rstd, p + off_.q_norm, BT, d.NH, d.D, QKV, eps);
    k.head_rmsnorm_forward(x.qkv + q, x.qk_pre + rows * q, x.qk_rstd + rows * d.NH, p + off_.k_norm, BT, d.KV, d.D,
                           QKV, eps);
  }
  k.rope_forward(x.qkv, a.rope_cos, a.rope_sin, this->positions(), BT, T, d.NH + d.KV, d.D, QKV);  // q and k heads
  k.attention_forward(x.atty, x.att, x.qkv, a.att_scratch, this->packed(d.attention(B, T)));
  k.linear_forward_acc(x.res2, x.atty, p + off_.o, o_bias, BT, d.qd(), C, kLinear, a.gemm_out);
  k.residual_forward(x.res2, x.res2, a.res[l], n);
  k.rmsnorm_forward(x.ln2, x.rstd2, x.res2, p + off_.post_norm, BT, C, eps);
  if (!write_output && this->mlp_chunked()) return;  // the backward computes each chunk's hidden layer
  this->for_each_mlp_chunk(BT, [&](int r0, int rows) {
    mlp_hidden(x, p, r0, rows);
    if (write_output)
      k.linear_forward_acc(a.res[l + 1] + static_cast<size_t>(r0) * C, x.act, p + off_.down, nullptr, rows, I, C,
                           kLinear, a.gemm_out);
  });
  if (!write_output) return;  // recomputing for backward
  k.residual_forward(a.res[l + 1], a.res[l + 1], x.res2, n);
}

// The MLP's hidden layer of rows [r0, r0 + rows): gate | up from post_attention_layernorm's output, then
// silu(gate)·up, at the start of gate_up and act (one chunk's, or all rows at once).
template <typename F>
void Llama<F>::mlp_hidden(LlamaLayerActs<F, Acc>& x, const F* p, int r0, int rows) {
  const int C = config_.n_embd, I = config_.intermediate_size;
  this->k_.linear_forward(x.gate_up, x.ln2 + static_cast<size_t>(r0) * C, p + off_.gate_up, nullptr, rows, C, 2 * I,
                          kLinear, this->acts_->gemm_out);
  this->k_.swiglu_forward(x.act, x.gate_up, rows, I);
}

// The final norm, then lm_head (embed_tokens when tied).
template <typename F>
void Llama<F>::head_norm_forward(const Acc* from, int rows, const F* p) {
  LlamaActs<F>& a = *this->acts_;
  this->k_.rmsnorm_forward(a.lnf, a.rstdf, from, p + off_.norm, rows, config_.n_embd, config_.rms_norm_eps);
}

// lm_head, or embed_tokens when tied (off_.head says which).
template <typename F>
ClassifierWeight Llama<F>::classifier() const {
  return {off_.head, kLinear};
}

template <typename F>
void Llama<F>::head_norm_backward(const F* p, Acc* g, int rows) {
  LlamaActs<F>& a = *this->acts_;
  const int C = config_.n_embd;
  this->k_.rmsnorm_backward(a.dres, g + off_.norm, a.dln, a.res[config_.n_layer], p + off_.norm, a.rstdf, rows, C);
}

template <typename F>
void Llama<F>::block_backward(int l, const F* p, Acc* g, int B, int T, kernels::WeightGrad dw_mode) {
  const Dims d(config_);
  const int BT = B * T, C = d.C, I = d.I, QKV = d.qkv();
  const device::ModelKernels<F>& k = this->k_;
  LlamaActs<F>& a = *this->acts_;
  auto& x = this->block_acts(l);
  Acc* qkv_bias_grad = off_.qkv_bias == kNone ? nullptr : g + off_.qkv_bias;
  Acc* o_bias_grad = off_.o_bias == kNone ? nullptr : g + off_.o_bias;
  // MLP: x' = res2 + down(silu(gate)·up); dres flows through the residual unchanged. In chunks of rows,
  // each chunk's hidden layer computed again first; the weight gradients sum the chunks in order.
  this->for_each_mlp_chunk(BT, [&](int r0, int rows) {
    const size_t row0 = static_cast<size_t>(r0) * C;
    const kernels::WeightGrad mlp_mode = r0 == 0 ? dw_mode : kernels::WeightGrad::kAdd;
    if (this->mlp_chunked()) mlp_hidden(x, p, r0, rows);
    k.linear_backward(a.dact, g + off_.down, nullptr, a.dres + row0, x.act, p + off_.down, rows, I, C, kLinear,
                      a.operand16, mlp_mode);
    k.swiglu_backward(a.dgate_up, a.dact, x.gate_up, rows, I);
    k.linear_backward(a.dln + row0, g + off_.gate_up, nullptr, a.dgate_up, x.ln2 + row0, p + off_.gate_up, rows, C,
                      2 * I, kLinear, a.operand16, mlp_mode);
  });
  k.rmsnorm_backward(a.dres, g + off_.post_norm, a.dln, x.res2, p + off_.post_norm, x.rstd2, BT, C);
  // Attention: res2 = res + o_proj(attention(rope(q), rope(k), v)).
  k.linear_backward(a.datty, g + off_.o, o_bias_grad, a.dres, x.atty, p + off_.o, BT, d.qd(), C, kLinear, a.operand16,
                    dw_mode);
  this->zero(a.dqkv, static_cast<size_t>(BT) * QKV);
  k.attention_backward(a.dqkv, a.att_scratch, a.datty, a.operand16, x.qkv, x.atty, x.att,
                       this->packed(d.attention(B, T)));
  k.rope_backward(a.dqkv, a.rope_cos, a.rope_sin, this->positions(), BT, T, d.NH + d.KV, d.D, QKV);
  if (off_.q_norm != kNone) {
    const size_t q = static_cast<size_t>(d.qd()), rows = static_cast<size_t>(BT);
    k.head_rmsnorm_backward(a.dqkv, g + off_.q_norm, x.qk_pre, x.qk_rstd, p + off_.q_norm, BT, d.NH, d.D, QKV);
    k.head_rmsnorm_backward(a.dqkv + q, g + off_.k_norm, x.qk_pre + rows * q, x.qk_rstd + rows * d.NH,
                            p + off_.k_norm, BT, d.KV, d.D, QKV);
  }
  k.linear_backward(a.dln, g + off_.qkv, qkv_bias_grad, a.dqkv, x.ln1, p + off_.qkv, BT, C, QKV, kLinear, a.operand16,
                    dw_mode);
  k.rmsnorm_backward(a.dres, g + off_.in_norm, a.dln, a.res[l], p + off_.in_norm, x.rstd1, BT, C);
}

template <typename F>
void Llama<F>::embed_backward(Acc* g, const int32_t* inputs, int B, int T) {
  this->k_.embedding_backward(g + off_.embed, nullptr, this->acts_->dres, inputs, nullptr, B, T, config_.n_embd);
}

template <typename P>
Architecture<P> llama_architecture() {
  return architecture_of<P, Llama, LlamaActs, &ModelConfig::llama>();
}

#define ZDP_LLAMA_ARCHITECTURE(P) template Architecture<P> llama_architecture<P>();
ZDP_FOR_EACH_MODEL_TYPE(ZDP_LLAMA_ARCHITECTURE)

}  // namespace zerodp::model
