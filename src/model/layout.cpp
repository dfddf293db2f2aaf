#include "model/layout.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::model {

namespace {

// The names of docs/reference/model.md#tensors, in unit order, without the "h.{i}." of block tensors.
constexpr std::array<std::string_view, kNumEmbedParams> kEmbedNames = {"wte.weight", "wpe.weight", "ln_f.weight",
                                                                        "ln_f.bias"};
constexpr std::array<std::string_view, kNumBlockParams> kBlockNames = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

template <size_t K>
int index_in(const std::array<std::string_view, K>& names, std::string_view name) {
  for (size_t i = 0; i < K; ++i)
    if (names[i] == name) return static_cast<int>(i);
  return -1;
}

// "h.12.attn.bias" -> 12 and "attn.bias"; -1 when the name has no block index written the way the
// layout writes it (decimal, no sign, no leading zero, at most 9 digits so that it fits an int).
int64_t parse_block(std::string_view name, std::string_view* rest) {
  if (!name.starts_with("h.")) return -1;
  const size_t dot = name.find('.', 2);
  if (dot == std::string_view::npos || dot == 2 || dot > 2 + 9) return -1;
  const std::string_view digits = name.substr(2, dot - 2);
  if (digits.size() > 1 && digits[0] == '0') return -1;
  int64_t block = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    block = block * 10 + (c - '0');
  }
  *rest = name.substr(dot + 1);
  return block;
}

Shape embed_shape(const GPT2Config& c, int index) {
  const int64_t C = c.n_embd;
  switch (index) {
    case kWte: return {c.vocab_size, C};
    case kWpe: return {c.n_ctx, C};
    default: return {C};  // ln_f
  }
}

Shape block_shape(const GPT2Config& c, int index) {
  const int64_t C = c.n_embd;
  switch (index) {
    case kAttnW: return {C, 3 * C};
    case kAttnB: return {3 * C};
    case kAttnProjW: return {C, C};
    case kFcW: return {C, 4 * C};
    case kFcB: return {4 * C};
    case kFcProjW: return {4 * C, C};
    default: return {C};  // LayerNorms, c_proj biases
  }
}

}  // namespace

ParamInfo ParamLayout::tensor_info(const GPT2Config& c, int unit, int index) {
  ZDP_CHECK(unit >= 0 && unit <= c.n_layer, "unit {} of a GPT-2 of {} layers", unit, c.n_layer);
  const bool embed = unit == kEmbeddingUnit;
  ZDP_CHECK(index >= 0 && index < unit_tensor_count(unit), "tensor {} of unit {}", index, unit);
  ParamInfo p;
  const size_t i = static_cast<size_t>(index);
  p.name = embed ? std::string(kEmbedNames[i]) : fmt::format("h.{}.{}", unit - 1, kBlockNames[i]);
  p.shape = embed ? embed_shape(c, index) : block_shape(c, index);
  p.unit = unit;
  p.numel = static_cast<size_t>(shape_numel(p.shape));
  p.decay = p.shape.size() >= 2;
  return p;
}

ParamLayout::ParamLayout(const GPT2Config& c) : config_(c) {
  c.validate();  // within GPT2Limits: every size below fits, with room
  params_.reserve(static_cast<size_t>(c.num_tensors()));
  for (int unit = 0; unit <= c.n_layer; ++unit) {
    unit_first_.push_back(params_.size());
    size_t offset = 0;
    for (int index = 0; index < unit_tensor_count(unit); ++index) {
      ParamInfo p = tensor_info(c, unit, index);
      p.offset = offset;
      offset += p.numel;
      params_.push_back(std::move(p));
    }
    unit_numel_.push_back(offset);
    total_numel_ += offset;
  }
  schedule_ = gpt2_schedule(c.n_layer);
}

UnitSchedule gpt2_schedule(int n_layer) {
  const int L = n_layer;
  std::vector<UnitUse> uses;
  uses.reserve(2 * static_cast<size_t>(L) + 4);
  uses.push_back({ParamLayout::kEmbeddingUnit, Pass::kForward, true, "embed"});
  for (int l = 0; l < L; ++l) uses.push_back({ParamLayout::block_unit(l), Pass::kForward, true, "block"});
  uses.push_back({ParamLayout::kEmbeddingUnit, Pass::kForward, true, "head"});
  uses.push_back({ParamLayout::kEmbeddingUnit, Pass::kBackward, true, "head"});
  for (int l = L - 1; l >= 0; --l) uses.push_back({ParamLayout::block_unit(l), Pass::kBackward, true, "block"});
  uses.push_back({ParamLayout::kEmbeddingUnit, Pass::kBackward, false, "embed"});
  return UnitSchedule(std::move(uses), L + 1);
}

std::vector<const ParamInfo*> ParamLayout::unit_params(int unit) const {
  const size_t first = unit_first_.at(static_cast<size_t>(unit));
  const size_t last = unit + 1 < num_units() ? unit_first_[static_cast<size_t>(unit) + 1] : params_.size();
  std::vector<const ParamInfo*> out;
  for (size_t i = first; i < last; ++i) out.push_back(&params_[i]);
  return out;
}

const ParamInfo* ParamLayout::find(std::string_view name) const {
  int unit = kEmbeddingUnit, index = index_in(kEmbedNames, name);
  if (index < 0) {
    std::string_view rest;
    const int64_t block = parse_block(name, &rest);
    if (block < 0 || block >= config_.n_layer) return nullptr;
    unit = block_unit(static_cast<int>(block));
    index = index_in(kBlockNames, rest);
    if (index < 0) return nullptr;
  }
  const ParamInfo& p = param(unit, index);
  return p.name == name ? &p : nullptr;
}

const ParamInfo& ParamLayout::param(int unit, int index) const {
  return params_.at(unit_first_.at(static_cast<size_t>(unit)) + static_cast<size_t>(index));
}

}  // namespace zerodp::model
