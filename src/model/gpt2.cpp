#include "model/gpt2.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"

namespace zerodp::model {

using namespace zerodp::kernels;

const char* unit_phase_name(UnitPhase p) {
  switch (p) {
    case UnitPhase::kEmbedForward: return "embed-forward";
    case UnitPhase::kBlockForward: return "block-forward";
    case UnitPhase::kHeadForward: return "head-forward";
    case UnitPhase::kHeadBackward: return "head-backward";
    case UnitPhase::kBlockBackward: return "block-backward";
    case UnitPhase::kEmbedBackward: return "embed-backward";
  }
  return "?";
}

namespace {

// Hands out consecutive slices of one allocation; with a null base it only counts.
template <typename F>
struct Carver {
  F* base = nullptr;
  size_t used = 0;
  F* take(size_t n) {
    F* p = base ? base + used : nullptr;
    used += n;
    return p;
  }
};

template <typename F>
struct LayerActs {
  F *ln1, *ln1_mean, *ln1_rstd;  // LayerNorm 1 output [BT,C] and statistics [BT]
  F* qkv;                        // [BT,3C]
  F* atty;                       // attention output before c_proj [BT,C]
  F* att;                        // softmax probabilities [B,NH,T,T]
  F* res2;                       // residual stream after attention [BT,C]
  F *ln2, *ln2_mean, *ln2_rstd;  // LayerNorm 2
  F *fch, *fch_gelu;             // MLP hidden before and after GELU [BT,4C]
};

}  // namespace

template <typename F>
struct GPT2<F>::Acts {
  Buffer storage;  // all of the F arrays below
  Buffer tokens;   // inputs and targets of the last forward
  std::vector<F*> res;  // residual stream: res[0] = embeddings, res[l+1] = output of block l
  std::vector<LayerActs<F>> layers;
  F *lnf, *lnf_mean, *lnf_rstd;
  F* probs;   // logits, then softmax probabilities in place, then their gradient in place [BT,V]
  F* losses;  // [BT]
  // Backward working memory, reused by every block.
  F *dres, *dln, *datty, *dqkv, *dfch_gelu, *dfch, *att_scratch;
  int32_t *inputs, *targets;

  // Lays the arrays out over `c` (counting only when c.base is null).
  void carve(Carver<F>& c, const GPT2Config& g, int B, int T, bool checkpointing) {
    const size_t BT = static_cast<size_t>(B) * T, C = g.n_embd, V = g.vocab_size;
    const size_t NH = g.n_head;
    res.assign(static_cast<size_t>(g.n_layer) + 1, nullptr);
    for (auto& r : res) r = c.take(BT * C);
    // With checkpointing all blocks share one set of activations, recomputed in backward.
    layers.assign(checkpointing ? 1 : static_cast<size_t>(g.n_layer), {});
    for (auto& a : layers) {
      a.ln1 = c.take(BT * C);
      a.ln1_mean = c.take(BT);
      a.ln1_rstd = c.take(BT);
      a.qkv = c.take(BT * 3 * C);
      a.atty = c.take(BT * C);
      a.att = c.take(static_cast<size_t>(B) * NH * T * T);
      a.res2 = c.take(BT * C);
      a.ln2 = c.take(BT * C);
      a.ln2_mean = c.take(BT);
      a.ln2_rstd = c.take(BT);
      a.fch = c.take(BT * 4 * C);
      a.fch_gelu = c.take(BT * 4 * C);
    }
    lnf = c.take(BT * C);
    lnf_mean = c.take(BT);
    lnf_rstd = c.take(BT);
    probs = c.take(BT * V);
    losses = c.take(BT);
    dres = c.take(BT * C);
    dln = c.take(BT * C);
    datty = c.take(BT * C);
    dqkv = c.take(BT * 3 * C);
    dfch_gelu = c.take(BT * 4 * C);
    dfch = c.take(BT * 4 * C);
    att_scratch = c.take(attention_scratch_elems(B, T, g.n_head));
  }
};

size_t activation_bytes(const GPT2Config& config, int B, int T, bool checkpointing, size_t elem_size) {
  Carver<float> counter;
  GPT2<float>::Acts acts;
  acts.carve(counter, config, B, T, checkpointing);
  return counter.used * elem_size + 2 * static_cast<size_t>(B) * T * sizeof(int32_t);
}

template <typename F>
GPT2<F>::GPT2(const ParamLayout& layout, int B, int T, bool checkpointing)
    : layout_(layout), B_(B), T_(T), checkpointing_(checkpointing) {
  const GPT2Config& g = layout.config();
  ZDP_REQUIRE(B > 0 && T > 0, "micro-batch ({}) and sequence length ({}) must be positive", B, T);
  ZDP_REQUIRE(T <= g.n_ctx, "sequence length {} exceeds the model's context n_ctx = {}", T, g.n_ctx);
  acts_ = std::make_unique<Acts>();
  Carver<F> counter;
  acts_->carve(counter, g, B, T, checkpointing);
  acts_->storage = Buffer(counter.used * sizeof(F), MemCategory::kAct);
  Carver<F> carver{acts_->storage.template as<F>(), 0};
  acts_->carve(carver, g, B, T, checkpointing);
  const size_t BT = static_cast<size_t>(B) * T;
  acts_->tokens = Buffer(2 * BT * sizeof(int32_t), MemCategory::kAct);
  acts_->inputs = acts_->tokens.template as<int32_t>();
  acts_->targets = acts_->inputs + BT;
}

template <typename F>
GPT2<F>::~GPT2() = default;

template <typename F>
const F* GPT2<F>::losses() const {
  return acts_->losses;
}

template <typename F>
void GPT2<F>::forward_trunk(const int32_t* inputs, int B, int T, UnitAccess<F>& units) {
  const GPT2Config& g = layout_.config();
  const int C = g.n_embd;
  Acts& a = *acts_;

  units.begin(ParamLayout::kEmbeddingUnit, UnitPhase::kEmbedForward);
  {
    const F* p = units.params(ParamLayout::kEmbeddingUnit);
    encoder_forward(a.res[0], inputs, p + layout_.param(0, kWte).offset, p + layout_.param(0, kWpe).offset,
                    B, T, C);
  }
  units.end(ParamLayout::kEmbeddingUnit, UnitPhase::kEmbedForward);

  for (int l = 0; l < g.n_layer; ++l) {
    const int u = ParamLayout::block_unit(l);
    units.begin(u, UnitPhase::kBlockForward);
    block_forward(l, units.params(u), B, T, true);
    units.end(u, UnitPhase::kBlockForward);
  }
}

template <typename F>
void GPT2<F>::block_forward(int l, const F* p, int B, int T, bool write_output) {
  const GPT2Config& g = layout_.config();
  const int C = g.n_embd, NH = g.n_head, BT = B * T;
  const int u = ParamLayout::block_unit(l);
  Acts& a = *acts_;
  auto w = [&](int k) { return p + layout_.param(u, k).offset; };
  LayerActs<F>& x = a.layers[checkpointing_ ? 0 : static_cast<size_t>(l)];
  const size_t n = static_cast<size_t>(BT) * C;
  layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, a.res[l], w(kLn1W), w(kLn1B), BT, C);
  matmul_forward(x.qkv, x.ln1, w(kAttnW), w(kAttnB), BT, C, 3 * C);
  attention_forward(x.atty, x.att, x.qkv, B, T, C, NH);
  matmul_forward(x.res2, x.atty, w(kAttnProjW), w(kAttnProjB), BT, C, C);
  residual_forward(x.res2, x.res2, a.res[l], n);  // res2 = res + attn
  layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, w(kLn2W), w(kLn2B), BT, C);
  matmul_forward(x.fch, x.ln2, w(kFcW), w(kFcB), BT, C, 4 * C);
  gelu_forward(x.fch_gelu, x.fch, static_cast<size_t>(BT) * 4 * C);
  if (!write_output) return;  // recomputing for backward: the block's output is not needed
  matmul_forward(a.res[l + 1], x.fch_gelu, w(kFcProjW), w(kFcProjB), BT, 4 * C, C);
  residual_forward(a.res[l + 1], a.res[l + 1], x.res2, n);  // res' = res2 + mlp
}

template <typename F>
double GPT2<F>::forward(const int32_t* inputs, const int32_t* targets, UnitAccess<F>& units) {
  const GPT2Config& g = layout_.config();
  const int B = B_, T = T_, C = g.n_embd, V = g.vocab_size, BT = B * T;
  Acts& a = *acts_;
  for (int i = 0; i < BT; ++i) {
    ZDP_CHECK(inputs[i] >= 0 && inputs[i] < V, "input token {} at position {} is outside [0, {})", inputs[i], i, V);
    ZDP_CHECK(targets[i] >= 0 && targets[i] < V, "target token {} at position {} is outside [0, {})", targets[i], i, V);
  }
  std::memcpy(a.inputs, inputs, sizeof(int32_t) * BT);
  std::memcpy(a.targets, targets, sizeof(int32_t) * BT);

  forward_trunk(a.inputs, B, T, units);

  units.begin(ParamLayout::kEmbeddingUnit, UnitPhase::kHeadForward);
  {
    const F* p = units.params(ParamLayout::kEmbeddingUnit);
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.res[g.n_layer], p + layout_.param(0, kLnfW).offset,
                      p + layout_.param(0, kLnfB).offset, BT, C);
    matmul_nt_forward(a.probs, a.lnf, p + layout_.param(0, kWte).offset, BT, C, V);
    softmax_crossentropy_forward(a.losses, a.probs, a.probs, a.targets, BT, V);
  }
  units.end(ParamLayout::kEmbeddingUnit, UnitPhase::kHeadForward);

  double sum = 0;
  for (int i = 0; i < BT; ++i) sum += static_cast<double>(a.losses[i]);
  last_B_ = B;
  last_T_ = T;
  return sum / BT;
}

template <typename F>
void GPT2<F>::backward(F dloss, UnitAccess<F>& units) {
  ZDP_CHECK(last_B_ > 0, "backward without a forward");
  const GPT2Config& g = layout_.config();
  const int B = last_B_, T = last_T_, C = g.n_embd, V = g.vocab_size, NH = g.n_head, BT = B * T;
  const size_t n = static_cast<size_t>(BT) * C;
  Acts& a = *acts_;
  auto zero = [](F* p, size_t count) { std::fill(p, p + count, F(0)); };

  // Head: softmax-cross-entropy, tied LM head, ln_f. dres becomes ∂loss/∂res[L].
  units.begin(ParamLayout::kEmbeddingUnit, UnitPhase::kHeadBackward);
  {
    const F* p = units.params(ParamLayout::kEmbeddingUnit);
    F* d = units.grads(ParamLayout::kEmbeddingUnit);
    auto off = [&](int k) { return layout_.param(0, k).offset; };
    softmax_crossentropy_backward(a.probs, a.probs, a.targets, dloss, BT, V);
    zero(a.dln, n);
    matmul_nt_backward(a.dln, d + off(kWte), a.probs, a.lnf, p + off(kWte), BT, C, V);
    zero(a.dres, n);
    layernorm_backward(a.dres, d + off(kLnfW), d + off(kLnfB), a.dln, a.res[g.n_layer], p + off(kLnfW),
                       a.lnf_mean, a.lnf_rstd, BT, C);
  }
  units.end(ParamLayout::kEmbeddingUnit, UnitPhase::kHeadBackward);
  last_B_ = 0;  // the probabilities now hold their gradient: no second backward

  for (int l = g.n_layer - 1; l >= 0; --l) {
    const int u = ParamLayout::block_unit(l);
    units.begin(u, UnitPhase::kBlockBackward);
    const F* p = units.params(u);
    F* d = units.grads(u);
    auto w = [&](int k) { return p + layout_.param(u, k).offset; };
    auto dw = [&](int k) { return d + layout_.param(u, k).offset; };
    if (checkpointing_) block_forward(l, p, B, T, false);  // recompute what the backward reads
    LayerActs<F>& x = a.layers[checkpointing_ ? 0 : static_cast<size_t>(l)];
    const size_t n4 = 4 * n;
    // MLP: res' = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres flows through the residual unchanged.
    zero(a.dfch_gelu, n4);
    matmul_backward(a.dfch_gelu, dw(kFcProjW), dw(kFcProjB), a.dres, x.fch_gelu, w(kFcProjW), BT, 4 * C, C);
    zero(a.dfch, n4);
    gelu_backward(a.dfch, x.fch, a.dfch_gelu, n4);
    zero(a.dln, n);
    matmul_backward(a.dln, dw(kFcW), dw(kFcB), a.dfch, x.ln2, w(kFcW), BT, C, 4 * C);
    layernorm_backward(a.dres, dw(kLn2W), dw(kLn2B), a.dln, x.res2, w(kLn2W), x.ln2_mean, x.ln2_rstd, BT, C);
    // Attention: res2 = res + c_proj(attn(c_attn(ln_1(res)))).
    zero(a.datty, n);
    matmul_backward(a.datty, dw(kAttnProjW), dw(kAttnProjB), a.dres, x.atty, w(kAttnProjW), BT, C, C);
    zero(a.dqkv, 3 * n);
    attention_backward(a.dqkv, a.att_scratch, a.datty, x.qkv, x.att, B, T, C, NH);
    zero(a.dln, n);
    matmul_backward(a.dln, dw(kAttnW), dw(kAttnB), a.dqkv, x.ln1, w(kAttnW), BT, C, 3 * C);
    layernorm_backward(a.dres, dw(kLn1W), dw(kLn1B), a.dln, a.res[l], w(kLn1W), x.ln1_mean, x.ln1_rstd, BT, C);
    units.end(u, UnitPhase::kBlockBackward);
  }

  // Embeddings: needs only the token ids and the gradient buffer.
  units.begin(ParamLayout::kEmbeddingUnit, UnitPhase::kEmbedBackward);
  {
    F* d = units.grads(ParamLayout::kEmbeddingUnit);
    encoder_backward(d + layout_.param(0, kWte).offset, d + layout_.param(0, kWpe).offset, a.dres, a.inputs,
                     B, T, C);
  }
  units.end(ParamLayout::kEmbeddingUnit, UnitPhase::kEmbedBackward);
}

template <typename F>
void GPT2<F>::next_token_logits(const int32_t* inputs, int t, UnitAccess<F>& units, F* logits) {
  const GPT2Config& g = layout_.config();
  ZDP_REQUIRE(t > 0 && t <= T_, "context of {} tokens does not fit the model's {} positions", t, T_);
  const int C = g.n_embd, V = g.vocab_size;
  for (int i = 0; i < t; ++i)
    ZDP_REQUIRE(inputs[i] >= 0 && inputs[i] < V, "token {} is outside the vocabulary [0, {})", inputs[i], V);
  Acts& a = *acts_;
  forward_trunk(inputs, 1, t, units);
  units.begin(ParamLayout::kEmbeddingUnit, UnitPhase::kHeadForward);
  const F* p = units.params(ParamLayout::kEmbeddingUnit);
  const F* last = a.res[g.n_layer] + static_cast<size_t>(t - 1) * C;
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, last, p + layout_.param(0, kLnfW).offset,
                    p + layout_.param(0, kLnfB).offset, 1, C);
  matmul_nt_forward(logits, a.lnf, p + layout_.param(0, kWte).offset, 1, C, V);
  units.end(ParamLayout::kEmbeddingUnit, UnitPhase::kHeadForward);
  last_B_ = 0;
}

template class GPT2<float>;
template class GPT2<double>;

}  // namespace zerodp::model
