#include "model/gpt2.h"

#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "model/batch.h"

namespace zerodp::model {

namespace {

// GPT-2's dense layers keep their weights as its Conv1D does, [in, out]; its LM head is the token
// embedding wte [V, C], read as PyTorch's [out, in].
constexpr kernels::WeightLayout kConv1D = kernels::WeightLayout::kInOut;
constexpr kernels::WeightLayout kTiedHead = kernels::WeightLayout::kOutIn;

template <typename P, typename Acc>
struct LayerActs {
  P* ln1;                    // LayerNorm 1 output [BT,C]
  Acc *ln1_mean, *ln1_rstd;  // and its statistics [BT]
  P* qkv;                    // [BT,3C]
  P* atty;                   // attention output before c_proj [BT,C]
  P* att;                    // what the attention saves: the CPU's softmax probabilities [B,NH,T,T]
  Acc* res2;                 // residual stream after attention [BT,C]
  P* ln2;                    // LayerNorm 2
  Acc *ln2_mean, *ln2_rstd;
  P *fch, *fch_gelu;  // MLP hidden before and after GELU [BT,4C]
};

}  // namespace

template <typename F>
struct GPT2<F>::Acts {
  using P = F;
  static constexpr bool k16 = kIs16<F>;
  Buffer storage;  // all of the arrays below
  std::vector<Acc*> res;  // residual stream: res[0] = embeddings, res[l+1] = output of block l
  std::vector<LayerActs<P, Acc>> layers;
  P* lnf;
  Acc *lnf_mean, *lnf_rstd;
  Acc* probs;   // logits, then softmax probabilities in place, then their gradient in place [BT,V]
  Acc* losses;  // [BT]
  // Backward working memory, reused by every block:
  Acc *dres, *dln, *datty, *dqkv, *dfch_gelu;
  // 16-bit compute's working memory: fp32 products before rounding [BT,4C] and 16-bit GEMM operands
  // [BT, max(4C, V)] (rows padded to device::operand16_row); and the attention's, as large as the
  // device's kernels ask.
  float* gemm_out = nullptr;
  P* operand16 = nullptr;
  char* att_scratch = nullptr;

  // Lays the arrays out over `c` (counting only when c.base is null).
  void carve(Carver& c, int B, int T, const GPT2Config& g, bool checkpointing, const device::AttentionSizes& k) {
    const size_t BT = static_cast<size_t>(B) * T, C = g.n_embd, V = g.vocab_size;
    const kernels::AttentionShape shape = kernels::AttentionShape::mha(B, T, g.n_embd, g.n_head);
    if (k16) c.align = 64;
    res.assign(static_cast<size_t>(g.n_layer) + 1, nullptr);
    for (auto& r : res) {
      r = c.take<Acc>(BT * C);
      c.part = Carver::kBlockOutputs;  // res[0], the embeddings, is the head's
    }
    // With checkpointing all blocks share one set of activations, recomputed in backward.
    layers.assign(checkpointing ? 1 : static_cast<size_t>(g.n_layer), {});
    c.part = Carver::kBlockSets;
    for (auto& a : layers) {
      a.ln1 = c.take<P>(BT * C);
      a.ln1_mean = c.take<Acc>(BT);
      a.ln1_rstd = c.take<Acc>(BT);
      a.qkv = c.take<P>(BT * 3 * C);
      a.atty = c.take<P>(BT * C);
      // What the attention's forward saves for its backward (the device's kernels say how much).
      a.att = reinterpret_cast<P*>(c.take<char>(k.attention_saved_bytes(shape)));
      a.res2 = c.take<Acc>(BT * C);
      a.ln2 = c.take<P>(BT * C);
      a.ln2_mean = c.take<Acc>(BT);
      a.ln2_rstd = c.take<Acc>(BT);
      a.fch = c.take<P>(BT * 4 * C);
      a.fch_gelu = c.take<P>(BT * 4 * C);
    }
    c.part = Carver::kHead;
    lnf = c.take<P>(BT * C);
    lnf_mean = c.take<Acc>(BT);
    lnf_rstd = c.take<Acc>(BT);
    probs = c.take<Acc>(BT * V);
    losses = c.take<Acc>(BT);
    c.part = Carver::kBackward;
    dres = c.take<Acc>(BT * C);
    dln = c.take<Acc>(BT * C);
    datty = c.take<Acc>(BT * C);
    dqkv = c.take<Acc>(BT * 3 * C);
    dfch_gelu = c.take<Acc>(BT * 4 * C);  // then, in place, the gradient before the GELU
    if constexpr (k16) {
      gemm_out = c.take<float>(BT * 4 * C);
      operand16 = c.take<P>(BT * std::max(device::operand16_row(4 * C), device::operand16_row(V)));
    }
    att_scratch = c.take<char>(k.attention_scratch_bytes(shape));
  }
};

template <class P>
ActivationBytes gpt2_activation_parts(const GPT2Config& config, int B, int T, bool checkpointing,
                                      const device::AttentionSizes& sizes) {
  return activation_bytes_of<typename GPT2<P>::Acts>(B, T, config, checkpointing, sizes);
}
template ActivationBytes gpt2_activation_parts<float>(const GPT2Config&, int, int, bool, const device::AttentionSizes&);
template ActivationBytes gpt2_activation_parts<bf16>(const GPT2Config&, int, int, bool, const device::AttentionSizes&);
template ActivationBytes gpt2_activation_parts<fp16>(const GPT2Config&, int, int, bool, const device::AttentionSizes&);

template <typename F>
GPT2<F>::GPT2(const ParamLayout& layout, int B, int T, bool checkpointing, device::Device& dev)
    : layout_(layout), B_(B), T_(T), checkpointing_(checkpointing), dev_(dev), k_(dev.kernels<F>()) {
  const GPT2Config& g = layout.config().gpt2();
  ZDP_REQUIRE(B > 0 && T > 0, "micro-batch ({}) and sequence length ({}) must be positive", B, T);
  ZDP_REQUIRE(T <= g.n_ctx, "sequence length {} exceeds the model's context n_ctx = {}", T, g.n_ctx);
  acts_ = std::make_unique<Acts>();
  acts_->storage = carve_activations(dev_, *acts_, B, T, g, checkpointing, k_);
  tokens_ = std::make_unique<TokenBatch>(dev_, B, T);
}

template <typename F>
GPT2<F>::~GPT2() = default;

template <typename F>
auto GPT2<F>::losses() const -> const Acc* {
  return acts_->losses;
}

template <typename F>
void GPT2<F>::forward_trunk(const int32_t* inputs, int B, int T, UnitAccess<F>& units) {
  const GPT2Config& g = layout_.config().gpt2();
  const ScheduleUses uses{g.n_layer};
  const int C = g.n_embd;
  Acts& a = *acts_;

  units.begin(uses.embed_forward());
  {
    const F* p = units.params(ParamLayout::kEmbeddingUnit);
    k_.embedding_forward(a.res[0], inputs, p + layout_.param(0, kWte).offset, p + layout_.param(0, kWpe).offset, B,
                         T, C);
  }
  units.end(uses.embed_forward());

  for (int l = 0; l < g.n_layer; ++l) {
    const int u = ParamLayout::block_unit(l);
    units.begin(uses.block_forward(l));
    block_forward(l, units.params(u), B, T, true);
    units.end(uses.block_forward(l));
  }
}

template <typename F>
void GPT2<F>::block_forward(int l, const F* p, int B, int T, bool write_output) {
  const GPT2Config& g = layout_.config().gpt2();
  const int C = g.n_embd, NH = g.n_head, BT = B * T;
  const int u = ParamLayout::block_unit(l);
  Acts& a = *acts_;
  auto w = [&](int k) { return p + layout_.param(u, k).offset; };
  auto& x = a.layers[checkpointing_ ? 0 : static_cast<size_t>(l)];
  const size_t n = static_cast<size_t>(BT) * C;
  k_.layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, a.res[l], w(kLn1W), w(kLn1B), BT, C);
  k_.linear_forward(x.qkv, x.ln1, w(kAttnW), w(kAttnB), BT, C, 3 * C, kConv1D, a.gemm_out);
  k_.attention_forward(x.atty, x.att, x.qkv, a.att_scratch, kernels::AttentionShape::mha(B, T, C, NH));
  k_.linear_forward_acc(x.res2, x.atty, w(kAttnProjW), w(kAttnProjB), BT, C, C, kConv1D, a.gemm_out);
  k_.residual_forward(x.res2, x.res2, a.res[l], n);  // res2 = res + attn
  k_.layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, w(kLn2W), w(kLn2B), BT, C);
  k_.linear_forward(x.fch, x.ln2, w(kFcW), w(kFcB), BT, C, 4 * C, kConv1D, a.gemm_out);
  k_.gelu_forward(x.fch_gelu, x.fch, static_cast<size_t>(BT) * 4 * C);
  if (!write_output) return;  // recomputing for backward: the block's output is not needed
  k_.linear_forward_acc(a.res[l + 1], x.fch_gelu, w(kFcProjW), w(kFcProjB), BT, 4 * C, C, kConv1D,
                        a.gemm_out);
  k_.residual_forward(a.res[l + 1], a.res[l + 1], x.res2, n);  // res' = res2 + mlp
}

template <typename F>
double GPT2<F>::forward(const int32_t* inputs, const int32_t* targets, UnitAccess<F>& units) {
  const GPT2Config& g = layout_.config().gpt2();
  const ScheduleUses uses{g.n_layer};
  const int B = B_, T = T_, C = g.n_embd, V = g.vocab_size, BT = B * T;
  Acts& a = *acts_;
  tokens_->load(inputs, targets, BT, V);
  forward_trunk(tokens_->inputs(), B, T, units);

  units.begin(uses.head_forward());
  {
    const F* p = units.params(ParamLayout::kEmbeddingUnit);
    k_.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.res[g.n_layer], p + layout_.param(0, kLnfW).offset,
                         p + layout_.param(0, kLnfB).offset, BT, C);
    k_.linear_forward_acc(a.probs, a.lnf, p + layout_.param(0, kWte).offset, nullptr, BT, C, V, kTiedHead, nullptr);
    k_.softmax_crossentropy_forward(a.losses, a.probs, a.probs, tokens_->targets(), BT, V);
  }
  units.end(uses.head_forward());

  last_B_ = B;
  last_T_ = T;
  return mean_loss(dev_, a.losses, BT, host_losses_);
}

template <typename F>
void GPT2<F>::backward(Acc dloss, UnitAccess<F>& units) {
  ZDP_CHECK(last_B_ > 0, "backward without a forward");
  const GPT2Config& g = layout_.config().gpt2();
  const ScheduleUses uses{g.n_layer};
  const int B = last_B_, T = last_T_, C = g.n_embd, V = g.vocab_size, NH = g.n_head, BT = B * T;
  const size_t n = static_cast<size_t>(BT) * C;
  Acts& a = *acts_;
  // Activation gradients are written by the one kernel that produces each (linear, head, GELU); the
  // residual stream's gradient and the attention's accumulate, so those are zeroed first.
  auto zero = [this](Acc* p, size_t count) { dev_.fill_zero(p, count * sizeof(Acc)); };

  // Head: softmax-cross-entropy, tied LM head, ln_f. dres becomes ∂loss/∂res[L].
  units.begin(uses.head_backward());
  {
    const F* p = units.params(ParamLayout::kEmbeddingUnit);
    Acc* d = units.grads(ParamLayout::kEmbeddingUnit);
    auto off = [&](int k) { return layout_.param(0, k).offset; };
    k_.softmax_crossentropy_backward(a.probs, a.probs, tokens_->targets(), dloss, BT, V);
    k_.linear_backward(a.dln, d + off(kWte), nullptr, a.probs, a.lnf, p + off(kWte), BT, C, V, kTiedHead,
                       a.operand16);
    zero(a.dres, n);
    k_.layernorm_backward(a.dres, d + off(kLnfW), d + off(kLnfB), a.dln, a.res[g.n_layer], p + off(kLnfW),
                       a.lnf_mean, a.lnf_rstd, BT, C);
  }
  units.end(uses.head_backward());
  last_B_ = 0;  // the probabilities now hold their gradient: no second backward

  for (int l = g.n_layer - 1; l >= 0; --l) {
    const int u = ParamLayout::block_unit(l);
    units.begin(uses.block_backward(l));
    const F* p = units.params(u);
    Acc* d = units.grads(u);
    auto w = [&](int k) { return p + layout_.param(u, k).offset; };
    auto dw = [&](int k) { return d + layout_.param(u, k).offset; };
    if (checkpointing_) block_forward(l, p, B, T, false);  // recompute what the backward reads
    auto& x = a.layers[checkpointing_ ? 0 : static_cast<size_t>(l)];
    // MLP: res' = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres flows through the residual unchanged.
    k_.linear_backward(a.dfch_gelu, dw(kFcProjW), dw(kFcProjB), a.dres, x.fch_gelu, w(kFcProjW), BT, 4 * C, C,
                       kConv1D, a.operand16);
    k_.gelu_linear_backward(a.dln, dw(kFcW), dw(kFcB), a.dfch_gelu, a.dfch_gelu, x.fch, x.ln2, w(kFcW), BT, C, 4 * C,
                            kConv1D, a.operand16);
    k_.layernorm_backward(a.dres, dw(kLn2W), dw(kLn2B), a.dln, x.res2, w(kLn2W), x.ln2_mean, x.ln2_rstd, BT, C);
    // Attention: res2 = res + c_proj(attn(c_attn(ln_1(res)))).
    k_.linear_backward(a.datty, dw(kAttnProjW), dw(kAttnProjB), a.dres, x.atty, w(kAttnProjW), BT, C, C, kConv1D,
                       a.operand16);
    zero(a.dqkv, 3 * n);
    k_.attention_backward(a.dqkv, a.att_scratch, a.datty, a.operand16, x.qkv, x.atty, x.att,
                          kernels::AttentionShape::mha(B, T, C, NH));
    k_.linear_backward(a.dln, dw(kAttnW), dw(kAttnB), a.dqkv, x.ln1, w(kAttnW), BT, C, 3 * C, kConv1D, a.operand16);
    k_.layernorm_backward(a.dres, dw(kLn1W), dw(kLn1B), a.dln, a.res[l], w(kLn1W), x.ln1_mean, x.ln1_rstd, BT, C);
    units.end(uses.block_backward(l));
  }

  // Embeddings: needs only the token ids and the gradient buffer.
  units.begin(uses.embed_backward());
  {
    Acc* d = units.grads(ParamLayout::kEmbeddingUnit);
    k_.embedding_backward(d + layout_.param(0, kWte).offset, d + layout_.param(0, kWpe).offset, a.dres,
                          tokens_->inputs(), B, T, C);
  }
  units.end(uses.embed_backward());
}

template <typename F>
void GPT2<F>::next_token_logits(const int32_t* inputs, int t, UnitAccess<F>& units, Acc* logits) {
  const GPT2Config& g = layout_.config().gpt2();
  const ScheduleUses uses{g.n_layer};
  const int C = g.n_embd, V = g.vocab_size;
  tokens_->load_context(inputs, t, T_, V);
  Acts& a = *acts_;
  forward_trunk(tokens_->inputs(), 1, t, units);
  units.begin(uses.head_forward());
  const F* p = units.params(ParamLayout::kEmbeddingUnit);
  const Acc* last = a.res[g.n_layer] + static_cast<size_t>(t - 1) * C;
  k_.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, p + layout_.param(0, kLnfW).offset,
                       p + layout_.param(0, kLnfB).offset, 1, C);
  k_.linear_forward_acc(logits, a.lnf, p + layout_.param(0, kWte).offset, nullptr, 1, C, V, kTiedHead, nullptr);
  units.end(uses.head_forward());
  last_B_ = 0;
}

template class GPT2<float>;
template class GPT2<double>;
template class GPT2<bf16>;
template class GPT2<fp16>;

}  // namespace zerodp::model
