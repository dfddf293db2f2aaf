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


#include <algorithm>
#include <type_traits>

#include "core/error.h"
#include "model/architectures.h"
#include "model/gpt2_config.h"
#include "model/transformer.h"
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
  P *fch, *fch_gelu;  // MLP hidden before and after GELU [BT,4C] (MLP in chunks: the chunk's, shared)
};

}  // namespace

template <typename F>
struct Gpt2Acts : TransformerActs<F, LayerActs<F, GradOf<F>>> {
  using P = F;
  using Acc = GradOf<F>;
  Acc *lnf_mean, *lnf_rstd;  // ln_f's statistics [BT]
  Acc* dfch_gelu;  // the MLP's hidden gradient [BT,4C] (MLP in chunks: the chunk's rows), then in place the one
                   // before the GELU

  // Lays the arrays out over `c` (counting only when c.base is null).
  void carve(Carver& c, int B, int T, const GPT2Config& g, const ActivationSettings& s,
             const device::AttentionSizes& k) {
    const size_t BT = static_cast<size_t>(B) * T, C = g.n_embd, V = g.vocab_size;
    const size_t LR = static_cast<size_t>(s.logit_rows(static_cast<int64_t>(BT)));  // rows of logits at once
    const size_t MR = static_cast<size_t>(s.mlp_rows(static_cast<int64_t>(BT)));    // rows of MLP hidden layer
    const kernels::AttentionShape shape = kernels::AttentionShape::mha(B, T, g.n_embd, g.n_head);
    if (kIs16<F>) c.align = 64;
    c.take_blocks(this->res, this->layers, g.n_layer, s.checkpointing, BT * C);
    for (auto& a : this->layers) {
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
      if (MR < BT) continue;  // the MLP's hidden layer: one chunk's, below
      a.fch = c.take<P>(BT * 4 * C);
      a.fch_gelu = c.take<P>(BT * 4 * C);
    }
    c.part = Carver::kHead;
    this->lnf = c.take<P>(BT * C);
    lnf_mean = c.take<Acc>(BT);
    lnf_rstd = c.take<Acc>(BT);
    this->logits = c.take<Acc>(LR * V);
    this->logit_stats = c.take<Acc>(2 * LR);
    this->losses = c.take<Acc>(BT);
    c.part = Carver::kBackward;
    this->dres = c.take<Acc>(BT * C);
    this->dln = c.take<Acc>(BT * C);
    this->datty = c.take<Acc>(BT * C);
    this->dqkv = c.take<Acc>(BT * 3 * C);
    if (MR < BT) {
      P* fch = c.take<P>(MR * 4 * C);
      P* fch_gelu = c.take<P>(MR * 4 * C);
      for (auto& a : this->layers) {
        a.fch = fch;
        a.fch_gelu = fch_gelu;
      }
    }
    dfch_gelu = c.take<Acc>(MR * 4 * C);  // then, in place, the gradient before the GELU
    if constexpr (kIs16<F>) {             // the 16-bit GEMM outputs (qkv, fch) and the gradients rounded for GEMMs
      this->gemm_out = c.take<float>(std::max(BT * 3 * C, MR * 4 * C));
      this->operand16 = c.take<P>(std::max(
          {BT * device::operand16_row(3 * C), MR * device::operand16_row(4 * C), LR * device::operand16_row(V)}));
    }
    this->att_scratch = c.take<char>(k.attention_scratch_bytes(shape));
  }
};

template <typename F>
class GPT2 final : public Transformer<F, Gpt2Acts<F>> {
  using Base = Transformer<F, Gpt2Acts<F>>;
  using Acc = GradOf<F>;

 public:
  // Allocates the activations for micro-batches of up to B sequences of T tokens, under `act`, kept as
  // `acts` says. Its memory and kernels are `dev`'s (the compute seam, device/device.h).
  GPT2(const ParamLayout& layout, int B, int T, ActivationSettings acts, device::Device& dev);

 private:
  ZDP_TRANSFORMER_STEPS
  void mlp_hidden(LayerActs<F, Acc>& x, const F* p, int u, int r0, int rows);
  size_t offset(int unit, int tensor) const { return this->layout_.param(unit, tensor).offset; }

  const GPT2Config& config_;
};

template <typename F>
GPT2<F>::GPT2(const ParamLayout& layout, int B, int T, ActivationSettings acts, device::Device& dev)
    : Base(layout, layout.config().gpt2(), B, T, acts, dev), config_(layout.config().gpt2()) {}

template <typename F>
void GPT2<F>::embed_forward(const F* p, const int32_t* inputs, int B, int T) {
  this->k_.embedding_forward(this->acts_->res[0], inputs, this->positions(), p + offset(0, kWte), p + offset(0, kWpe),
                             B, T, config_.n_embd);
}

template <typename F>
void GPT2<F>::block_forward(int l, const F* p, int B, int T, bool write_output) {
  const int C = config_.n_embd, NH = config_.n_head, BT = B * T;
  const int u = ParamLayout::block_unit(l);
  const device::ModelKernels<F>& k = this->k_;
  Gpt2Acts<F>& a = *this->acts_;
  auto w = [&](int t) { return p + offset(u, t); };
  auto& x = this->block_acts(l);
  const size_t n = static_cast<size_t>(BT) * C;
  k.layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, a.res[l], w(kLn1W), w(kLn1B), BT, C);
  k.linear_forward(x.qkv, x.ln1, w(kAttnW), w(kAttnB), BT, C, 3 * C, kConv1D, a.gemm_out);
  k.attention_forward(x.atty, x.att, x.qkv, a.att_scratch, this->packed(kernels::AttentionShape::mha(B, T, C, NH)));
  k.linear_forward_acc(x.res2, x.atty, w(kAttnProjW), w(kAttnProjB), BT, C, C, kConv1D, a.gemm_out);
  k.residual_forward(x.res2, x.res2, a.res[l], n);  // res2 = res + attn
  k.layernorm_forward(x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, w(kLn2W), w(kLn2B), BT, C);
  if (!write_output && this->mlp_chunked()) return;  // the backward computes each chunk's hidden layer
  this->for_each_mlp_chunk(BT, [&](int r0, int rows) {
    mlp_hidden(x, p, u, r0, rows);
    if (write_output)
      k.linear_forward_acc(a.res[l + 1] + static_cast<size_t>(r0) * C, x.fch_gelu, w(kFcProjW), w(kFcProjB), rows,
                           4 * C, C, kConv1D, a.gemm_out);
  });
  if (!write_output) return;  // recomputing for backward: the block's output is not needed
  k.residual_forward(a.res[l + 1], a.res[l + 1], x.res2, n);  // res' = res2 + mlp
}

// The MLP's hidden layer of rows [r0, r0 + rows) of block unit u: c_fc of ln_2's output, then the GELU,
// at the start of fch and fch_gelu (one chunk's, or all rows at once).
template <typename F>
void GPT2<F>::mlp_hidden(LayerActs<F, Acc>& x, const F* p, int u, int r0, int rows) {
  const int C = config_.n_embd;
  this->k_.linear_forward(x.fch, x.ln2 + static_cast<size_t>(r0) * C, p + offset(u, kFcW), p + offset(u, kFcB), rows, C,
                          4 * C, kConv1D, this->acts_->gemm_out);
  this->k_.gelu_forward(x.fch_gelu, x.fch, static_cast<size_t>(rows) * 4 * C);
}

// ln_f, then the tied LM head.
template <typename F>
void GPT2<F>::head_norm_forward(const Acc* from, int rows, const F* p) {
  Gpt2Acts<F>& a = *this->acts_;
  this->k_.layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, from, p + offset(0, kLnfW), p + offset(0, kLnfB), rows,
                             config_.n_embd);
}

// The LM head is the token embedding (tied).
template <typename F>
ClassifierWeight GPT2<F>::classifier() const {
  return {offset(0, kWte), kTiedHead};
}

// Activation gradients are written by the one kernel that produces each (linear, head, GELU); the
// residual stream's gradient and the attention's accumulate, so those are zeroed first.
template <typename F>
void GPT2<F>::head_norm_backward(const F* p, Acc* g, int rows) {
  Gpt2Acts<F>& a = *this->acts_;
  const int C = config_.n_embd;
  this->k_.layernorm_backward(a.dres, g + offset(0, kLnfW), g + offset(0, kLnfB), a.dln, a.res[config_.n_layer],
                              p + offset(0, kLnfW), a.lnf_mean, a.lnf_rstd, rows, C);
}

template <typename F>
void GPT2<F>::block_backward(int l, const F* p, Acc* g, int B, int T, kernels::WeightGrad dw_mode) {
  const int C = config_.n_embd, NH = config_.n_head, BT = B * T;
  const int u = ParamLayout::block_unit(l);
  const device::ModelKernels<F>& k = this->k_;
  Gpt2Acts<F>& a = *this->acts_;
  auto w = [&](int t) { return p + offset(u, t); };
  auto dw = [&](int t) { return g + offset(u, t); };
  auto& x = this->block_acts(l);
  // MLP: res' = res2 + c_proj(gelu(c_fc(ln_2(res2)))); dres flows through the residual unchanged. In
  // chunks of rows, each chunk's hidden layer computed again first; the weight gradients sum the chunks.
  this->for_each_mlp_chunk(BT, [&](int r0, int rows) {
    const size_t row0 = static_cast<size_t>(r0) * C;
    const kernels::WeightGrad mlp_mode = r0 == 0 ? dw_mode : kernels::WeightGrad::kAdd;
    if (this->mlp_chunked()) mlp_hidden(x, p, u, r0, rows);
    k.linear_backward(a.dfch_gelu, dw(kFcProjW), dw(kFcProjB), a.dres + row0, x.fch_gelu, w(kFcProjW), rows, 4 * C, C,
                      kConv1D, a.operand16, mlp_mode);
    k.gelu_linear_backward(a.dln + row0, dw(kFcW), dw(kFcB), a.dfch_gelu, a.dfch_gelu, x.fch, x.ln2 + row0, w(kFcW),
                           rows, C, 4 * C, kConv1D, a.operand16, mlp_mode);
  });
  k.layernorm_backward(a.dres, dw(kLn2W), dw(kLn2B), a.dln, x.res2, w(kLn2W), x.ln2_mean, x.ln2_rstd, BT, C);
  // Attention: res2 = res + c_proj(attn(c_attn(ln_1(res)))).
  k.linear_backward(a.datty, dw(kAttnProjW), dw(kAttnProjB), a.dres, x.atty, w(kAttnProjW), BT, C, C, kConv1D,
                    a.operand16, dw_mode);
  this->zero(a.dqkv, 3 * static_cast<size_t>(BT) * C);
  k.attention_backward(a.dqkv, a.att_scratch, a.datty, a.operand16, x.qkv, x.atty, x.att,
                       this->packed(kernels::AttentionShape::mha(B, T, C, NH)));
  k.linear_backward(a.dln, dw(kAttnW), dw(kAttnB), a.dqkv, x.ln1, w(kAttnW), BT, C, 3 * C, kConv1D, a.operand16,
                    dw_mode);
  k.layernorm_backward(a.dres, dw(kLn1W), dw(kLn1B), a.dln, a.res[l], w(kLn1W), x.ln1_mean, x.ln1_rstd, BT, C);
}

// wte's gradient (tied: the head's part is already in it) and wpe's.
template <typename F>
void GPT2<F>::embed_backward(Acc* g, const int32_t* inputs, int B, int T) {
  this->k_.embedding_backward(g + offset(0, kWte), g + offset(0, kWpe), this->acts_->dres, inputs, this->positions(), B,
                              T, config_.n_embd);
}

template <typename P>
Architecture<P> gpt2_architecture() {
  return architecture_of<P, GPT2, Gpt2Acts, &ModelConfig::gpt2>();
}

#define ZDP_GPT2_ARCHITECTURE(P) template Architecture<P> gpt2_architecture<P>();
ZDP_FOR_EACH_MODEL_TYPE(ZDP_GPT2_ARCHITECTURE)

}  // namespace zerodp::model
