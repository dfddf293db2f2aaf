#include "model/layout.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::model {

ParamLayout::ParamLayout(const GPT2Config& c) : config_(c) {
  c.validate();
  const int64_t C = c.n_embd, V = c.vocab_size, N = c.n_ctx;
  auto add_unit = [this](int unit, const std::vector<std::pair<std::string, Shape>>& tensors) {
    unit_first_.push_back(params_.size());
    size_t offset = 0;
    for (const auto& [name, shape] : tensors) {
      ParamInfo p;
      p.name = name;
      p.shape = shape;
      p.unit = unit;
      p.offset = offset;
      p.numel = static_cast<size_t>(shape_numel(shape));
      p.decay = shape.size() >= 2;
      offset += p.numel;
      params_.push_back(std::move(p));
    }
    unit_numel_.push_back(offset);
    total_numel_ += offset;
  };
  add_unit(kEmbeddingUnit,
           {{"wte.weight", {V, C}}, {"wpe.weight", {N, C}}, {"ln_f.weight", {C}}, {"ln_f.bias", {C}}});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string h = fmt::format("h.{}.", i);
    add_unit(block_unit(i), {{h + "ln_1.weight", {C}},
                             {h + "ln_1.bias", {C}},
                             {h + "attn.c_attn.weight", {C, 3 * C}},
                             {h + "attn.c_attn.bias", {3 * C}},
                             {h + "attn.c_proj.weight", {C, C}},
                             {h + "attn.c_proj.bias", {C}},
                             {h + "ln_2.weight", {C}},
                             {h + "ln_2.bias", {C}},
                             {h + "mlp.c_fc.weight", {C, 4 * C}},
                             {h + "mlp.c_fc.bias", {4 * C}},
                             {h + "mlp.c_proj.weight", {4 * C, C}},
                             {h + "mlp.c_proj.bias", {C}}});
  }
}

std::vector<const ParamInfo*> ParamLayout::unit_params(int unit) const {
  const size_t first = unit_first_.at(static_cast<size_t>(unit));
  const size_t last = unit + 1 < num_units() ? unit_first_[static_cast<size_t>(unit) + 1] : params_.size();
  std::vector<const ParamInfo*> out;
  for (size_t i = first; i < last; ++i) out.push_back(&params_[i]);
  return out;
}

const ParamInfo* ParamLayout::find(std::string_view name) const {
  for (const auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const ParamInfo& ParamLayout::param(int unit, int index) const {
  return params_.at(unit_first_.at(static_cast<size_t>(unit)) + static_cast<size_t>(index));
}

}  // namespace zerodp::model
