// What every architecture's model does around its layers, written once: the model seam (model.h) for a
// decoder-only transformer whose units are the embeddings (unit 0), one unit a block, and the head
// (the final norm and the LM head: unit 0 when tied, the last unit when not). It owns the micro-batch's
// shape and token ids, the device and its kernel table, the activation arrays (Acts, laid out by
// Acts::carve), the losses, and the order of the work:
//   forward:  embed → blocks 0..L-1 → head: final norm → classifier (logits) → cross-entropy
//   backward: cross-entropy → classifier → final norm → blocks L-1..0 (each recomputed first with
//             checkpointing) → embed
//   sampling: embed → blocks → head, for the last position only
// The classifier and its loss run over the B·T rows in chunks of ActivationSettings::logit_rows: with
// fewer rows than B·T, the forward keeps only the losses, and the backward computes each chunk's logits
// again before turning them into their gradient. An architecture runs each block's MLP in chunks of
// ActivationSettings::mlp_rows the same way (for_each_mlp_chunk): with fewer rows than B·T its hidden
// layer exists for one chunk at a time, and the backward computes each chunk's again.
// An architecture (gpt2.cpp, llama.cpp) supplies the steps inside each unit, over its own Acts, which hold
// at least `res` (the residual stream entering each block, and leaving the last), `lnf` (the final norm's
// output), `logits` (one chunk's) and `logit_stats`, `losses`, `dln` and `dres` (the residual stream's
// gradient); and where its classifier's weight lies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "model/batch.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/units.h"

namespace zerodp::model {

// The arrays every architecture's activations have (its Acts derive from this and add their own), in
// one allocation laid out by the architecture's carve; Set is one block's saved arrays.
template <typename F, typename Set>
struct TransformerActs {
  using P = F;
  using Acc = GradOf<F>;
  static constexpr bool k16 = kIs16<F>;
  Buffer storage;         // all of the arrays
  std::vector<Acc*> res;  // the residual stream: res[0] = embeddings, res[l+1] = output of block l
  std::vector<Set> layers;
  P* lnf = nullptr;       // the final norm's output [BT,C]
  // One chunk's logits [logit_rows, V], then what the loss's forward keeps of them for its backward,
  // with logit_stats [2·logit_rows] (device::ModelKernels::classifier_loss_forward).
  Acc* logits = nullptr;
  Acc* logit_stats = nullptr;
  Acc* losses = nullptr;  // [BT]
  // Backward working memory, reused by every block: the residual stream's gradient, a norm's input
  // gradient, the attention output's and qkv's.
  Acc *dres = nullptr, *dln = nullptr, *datty = nullptr, *dqkv = nullptr;
  // 16-bit compute's working memory: fp32 GEMM results before rounding and 16-bit GEMM operands (rows
  // padded to device::operand16_row); and the attention's, as large as the device's kernels ask.
  float* gemm_out = nullptr;
  P* operand16 = nullptr;
  char* att_scratch = nullptr;
};

// Where the classifier's weight [V, C] lies in the head unit (its parameters and gradients alike).
struct ClassifierWeight {
  size_t offset = 0;
  kernels::WeightLayout layout{};
};

// The steps of Transformer as an architecture's class declares them (with its F and Acc).
#define ZDP_TRANSFORMER_STEPS                                                                         \
  void embed_forward(const F* p, const int32_t* inputs, int B, int T) override;                       \
  void block_forward(int l, const F* p, int B, int T, bool write_output) override;                    \
  void head_norm_forward(const Acc* from, int rows, const F* p) override;                             \
  void head_norm_backward(const F* p, Acc* g, int rows) override;                                     \
  ClassifierWeight classifier() const override;                                                       \
  void block_backward(int l, const F* p, Acc* g, int B, int T, kernels::WeightGrad dw_mode) override; \
  void embed_backward(Acc* g, const int32_t* inputs, int B, int T) override;

template <typename F, typename Acts>
class Transformer : public Model<F> {
 public:
  using Acc = GradOf<F>;
  ~Transformer() override = default;
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ParamLayout& layout() const { return layout_; }
  int max_batch() const override { return B_; }
  int max_seq() const override { return T_; }
  double forward(const int32_t* inputs, const int32_t* targets, const int32_t* positions,
                 UnitAccess<F>& units) override;
  const Acc* losses() const override { return acts_->losses; }
  const std::vector<Acc>& host_losses() const override { return host_losses_; }
  void backward(Acc dloss, UnitAccess<F>& units) override;
  void next_token_logits(const int32_t* inputs, int t, UnitAccess<F>& units, Acc* logits) override;

 protected:
  // Activations for micro-batches of up to B sequences of T tokens (at most the model's context), laid
  // out by acts.carve(carver, B, T, config, settings, kernels) over one allocation of `dev`'s.
  template <class Config>
  Transformer(const ParamLayout& layout, const Config& config, int B, int T, ActivationSettings settings,
              device::Device& dev)
      : layout_(layout), B_(B), T_(T), checkpointing_(settings.checkpointing),
        logit_rows_(static_cast<int>(settings.logit_rows(static_cast<int64_t>(B) * T))),
        mlp_rows_(static_cast<int>(settings.mlp_rows(static_cast<int64_t>(B) * T))), dev_(dev),
        k_(dev.kernels<F>()) {
    ZDP_REQUIRE(B > 0 && T > 0, "micro-batch ({}) and sequence length ({}) must be positive", B, T);
    ZDP_REQUIRE(T <= config.n_ctx, "sequence length {} exceeds the model's context of {} positions", T,
                config.n_ctx);
    acts_ = std::make_unique<Acts>();
    acts_->storage = carve_activations(dev_, *acts_, B, T, config, settings, k_);
    tokens_ = std::make_unique<TokenBatch>(dev_, B, T);
  }

  // The steps inside the units, on the B·T rows of the micro-batch (or of a sampling context):
  // res[0] = the embeddings of `inputs` (embedding unit's parameters p).
  virtual void embed_forward(const F* p, const int32_t* inputs, int B, int T) = 0;
  // Block l from res[l]; writes res[l+1] unless recomputing its activations for its backward.
  virtual void block_forward(int l, const F* p, int B, int T, bool write_output) = 0;
  // The final norm of `rows` rows of the residual stream from `from` into lnf (head unit's parameters p).
  virtual void head_norm_forward(const Acc* from, int rows, const F* p) = 0;
  // From dln = ∂loss/∂lnf of `rows` rows, added into dres (zeroed by the caller) = ∂loss/∂res[L], into the
  // head unit's gradients g.
  virtual void head_norm_backward(const F* p, Acc* g, int rows) = 0;
  // The classifier's weight: logits = lnf · Wᵀ (the transformer computes it, in chunks of rows).
  virtual ClassifierWeight classifier() const = 0;
  // From dres = ∂loss/∂res[l+1] to ∂loss/∂res[l] in dres, into block l's gradients g: its GEMMs add
  // their weights' gradients or, dw_mode kWrite, write them (the first chunk of a chunked MLP; the rest
  // add), and every weight they write is a `matrix` tensor (ParamInfo), every other tensor is added into.
  virtual void block_backward(int l, const F* p, Acc* g, int B, int T, kernels::WeightGrad dw_mode) = 0;
  // The embeddings' gradients (embedding unit's g) from dres = ∂loss/∂res[0].
  virtual void embed_backward(Acc* g, const int32_t* inputs, int B, int T) = 0;
  // (An architecture's class declares them all with ZDP_TRANSFORMER_STEPS, defined in its .cpp.)

  // The last forward's positions in the device's memory (packed sequences), or null.
  const int32_t* positions() const { return tokens_->positions(); }
  // `shape` for the last forward's rows: with their examples' positions when packed.
  kernels::AttentionShape packed(kernels::AttentionShape shape) const {
    shape.positions = positions();
    return shape;
  }
  // The arrays block l computes into: its own, or with checkpointing the one set every block shares.
  auto& block_acts(int l) { return acts_->layers[checkpointing_ ? 0 : static_cast<size_t>(l)]; }
  // Whether the MLPs run in chunks of rows, their hidden layers held for one chunk (shared by every block)
  // and computed again by the backward; a block's recompute for its backward then skips its MLP.
  bool mlp_chunked() const { return mlp_rows_ < B_ * T_; }
  // f(r0, n) for the chunks [r0, r0 + n) of a block's `rows` rows, in order: one chunk when not chunked.
  template <class Fn>
  void for_each_mlp_chunk(int rows, Fn&& f) const {
    for (int r0 = 0; r0 < rows; r0 += mlp_rows_) f(r0, std::min(mlp_rows_, rows - r0));
  }
  int n_layer() const { return layout_.config().n_layer(); }
  void zero(Acc* p, size_t count) { dev_.fill_zero(p, count * sizeof(Acc)); }
  // A backward use begins on `unit`'s gradient g: if its buffer is fresh (UnitAccess::grads_fresh), zeroes
  // every tensor of the unit that `written(ParamInfo)` says the use's GEMMs do not write, and returns the
  // mode those GEMMs run in.
  template <class Written>
  kernels::WeightGrad prepare_grads(UnitAccess<F>& units, int unit, Acc* g, Written&& written);

  const ParamLayout& layout_;
  const int B_, T_;
  const bool checkpointing_;
  const int logit_rows_;  // rows of logits computed at once (ActivationSettings::logit_rows)
  const int mlp_rows_;    // rows through a block's MLP at once (ActivationSettings::mlp_rows)
  device::Device& dev_;
  const device::ModelKernels<F>& k_;
  std::unique_ptr<Acts> acts_;

 private:
  void forward_trunk(const int32_t* inputs, int B, int T, UnitAccess<F>& units);
  // logits = those of rows r0 .. r0 + rows − 1 (lnf's), turned into what the loss's backward needs;
  // losses[r0 ..].
  void classifier_forward(int r0, int rows, const F* p);

  std::unique_ptr<TokenBatch> tokens_;  // the last micro-batch's (or context's) token ids
  std::vector<Acc> host_losses_;        // the last forward's per-token losses, read back to sum them
  int last_B_ = 0, last_T_ = 0;         // the last forward's shape; 0 once its backward has run
};

template <typename F, typename Acts>
void Transformer<F, Acts>::forward_trunk(const int32_t* inputs, int B, int T, UnitAccess<F>& units) {
  const ScheduleUses uses{n_layer()};
  units.begin(uses.embed_forward());
  embed_forward(units.params(ParamLayout::kEmbeddingUnit), inputs, B, T);
  units.end(uses.embed_forward());
  for (int l = 0; l < n_layer(); ++l) {
    units.begin(uses.block_forward(l));
    block_forward(l, units.params(ParamLayout::block_unit(l)), B, T, true);
    units.end(uses.block_forward(l));
  }
}

template <typename F, typename Acts>
void Transformer<F, Acts>::classifier_forward(int r0, int rows, const F* p) {
  const int C = layout_.config().n_embd(), V = layout_.config().vocab_size();
  const ClassifierWeight w = classifier();
  Acts& a = *acts_;
  k_.linear_forward_acc(a.logits, a.lnf + static_cast<size_t>(r0) * C, p + w.offset, nullptr, rows, C, V, w.layout,
                        nullptr);
  k_.classifier_loss_forward(a.losses + r0, a.logits, a.logit_stats, tokens_->targets() + r0, rows, V);
}

template <typename F, typename Acts>
double Transformer<F, Acts>::forward(const int32_t* inputs, const int32_t* targets, const int32_t* positions,
                                     UnitAccess<F>& units) {
  const ScheduleUses uses{n_layer()};
  const int B = B_, T = T_, V = layout_.config().vocab_size(), BT = B * T;
  Acts& a = *acts_;
  tokens_->load(inputs, targets, positions, B, T, V);
  forward_trunk(tokens_->inputs(), B, T, units);
  units.begin(uses.head_forward());
  const F* head = units.params(layout_.head_unit());
  head_norm_forward(a.res[n_layer()], BT, head);
  for (int r0 = 0; r0 < BT; r0 += logit_rows_) classifier_forward(r0, std::min(logit_rows_, BT - r0), head);
  units.end(uses.head_forward());
  last_B_ = B;
  last_T_ = T;
  return mean_loss(dev_, a.losses, BT, host_losses_);
}

template <typename F, typename Acts>
template <class Written>
kernels::WeightGrad Transformer<F, Acts>::prepare_grads(UnitAccess<F>& units, int unit, Acc* g, Written&& written) {
  if (!units.grads_fresh(unit)) return kernels::WeightGrad::kAdd;
  size_t from = 0;  // the start of the run of tensors to zero (a unit's tensors lie back to back)
  for (const ParamInfo* t : layout_.unit_params(unit)) {
    if (!written(*t)) continue;
    zero(g + from, t->offset - from);
    from = t->offset + t->numel;
  }
  zero(g + from, layout_.unit_numel(unit) - from);
  return kernels::WeightGrad::kWrite;
}

template <typename F, typename Acts>
void Transformer<F, Acts>::backward(Acc dloss, UnitAccess<F>& units) {
  ZDP_CHECK(last_B_ > 0, "backward without a forward");
  const ScheduleUses uses{n_layer()};
  const int B = last_B_, T = last_T_, BT = B * T, C = layout_.config().n_embd(), V = layout_.config().vocab_size();
  Acts& a = *acts_;
  const int head = layout_.head_unit();
  units.begin(uses.head_backward());
  const F* p = units.params(head);
  Acc* g = units.grads(head);
  const ClassifierWeight w = classifier();
  // The head's first backward use of the unit: a fresh buffer is written by the classifier's GEMM.
  kernels::WeightGrad dw_mode = prepare_grads(units, head, g, [&](const ParamInfo& t) { return t.offset == w.offset; });
  // In chunks, the forward kept only the last chunk's logits: each chunk's are computed again.
  const bool chunked = logit_rows_ < BT;
  for (int r0 = 0; r0 < BT; r0 += logit_rows_) {
    const int rows = std::min(logit_rows_, BT - r0);
    const size_t row0 = static_cast<size_t>(r0) * C;
    if (chunked) classifier_forward(r0, rows, p);
    k_.classifier_loss_backward(a.dln + row0, g + w.offset, a.logits, a.logit_stats, tokens_->targets() + r0, dloss,
                                a.lnf + row0, p + w.offset, rows, C, V, w.layout, a.operand16, dw_mode);
    dw_mode = kernels::WeightGrad::kAdd;  // the later chunks add theirs
  }
  zero(a.dres, static_cast<size_t>(BT) * C);  // the norm's backward accumulates into it
  head_norm_backward(p, g, BT);
  units.end(uses.head_backward());
  last_B_ = 0;  // the logits' buffer now holds nothing of the forward: no second backward
  for (int l = n_layer() - 1; l >= 0; --l) {
    const int u = ParamLayout::block_unit(l);
    units.begin(uses.block_backward(l));
    if (checkpointing_) block_forward(l, units.params(u), B, T, false);  // what the backward reads
    Acc* gb = units.grads(u);
    const kernels::WeightGrad block_mode = prepare_grads(units, u, gb, [](const ParamInfo& t) { return t.matrix; });
    block_backward(l, units.params(u), gb, B, T, block_mode);
    units.end(uses.block_backward(l));
  }
  // The embeddings read no parameters: only the token ids and the gradient buffer, which they add into
  // (fresh only when the head is untied: then this is the unit's first backward use).
  units.begin(uses.embed_backward());
  Acc* ge = units.grads(ParamLayout::kEmbeddingUnit);
  prepare_grads(units, ParamLayout::kEmbeddingUnit, ge, [](const ParamInfo&) { return false; });
  embed_backward(ge, tokens_->inputs(), B, T);
  units.end(uses.embed_backward());
}

template <typename F, typename Acts>
void Transformer<F, Acts>::next_token_logits(const int32_t* inputs, int t, UnitAccess<F>& units, Acc* logits) {
  const ScheduleUses uses{n_layer()};
  const int C = layout_.config().n_embd();
  tokens_->load_context(inputs, t, T_, layout_.config().vocab_size());
  forward_trunk(tokens_->inputs(), 1, t, units);
  units.begin(uses.head_forward());
  const F* p = units.params(layout_.head_unit());
  const ClassifierWeight w = classifier();
  head_norm_forward(acts_->res[n_layer()] + static_cast<size_t>(t - 1) * C, 1, p);
  k_.linear_forward_acc(logits, acts_->lnf, p + w.offset, nullptr, 1, C, layout_.config().vocab_size(), w.layout,
                        nullptr);
  units.end(uses.head_forward());
  last_B_ = 0;
}

}  // namespace zerodp::model
