#include "ckpt/model_source.h"

#include <filesystem>

#include "core/error.h"
#include "core/overloaded.h"

namespace zerodp::ckpt {

ModelSource::ModelSource(GPT2Weights w) : config_(w.config()), path_(w.path()), source_(std::move(w)) {}

ModelSource::ModelSource(HfModelDir d) : config_(d.config()), path_(d.path()), source_(std::move(d)) {}

ModelSource ModelSource::open(const std::string& path) {
  if (HfModelDir::is_model_dir(path)) return ModelSource(HfModelDir::open(path));
  return ModelSource(GPT2Weights::open(path));
}

DType ModelSource::dtype() const {
  return std::visit(Overloaded{[](const GPT2Weights&) { return DType::kF32; },
                               [](const HfModelDir& d) { return d.dtype(); }},
                    source_);
}

void ModelSource::read_unit_range(const model::ParamLayout& layout, int unit, size_t begin, size_t count,
                                  float* dst) const {
  std::visit([&](const auto& s) { s.read_unit_range(layout, unit, begin, count, dst); }, source_);
}

ResidentWeights::ResidentWeights(const std::string& path) : source_(ModelSource::open(path)), layout_(source_.config()) {
  for (int u = 0; u < layout_.num_units(); ++u) {
    units_.emplace_back(layout_.unit_numel(u) * sizeof(float), MemCategory::kParam);
    source_.read_unit_range(layout_, u, 0, layout_.unit_numel(u), units_.back().as<float>());
    params_.push_back(units_.back().as<float>());
  }
}

model::ResidentUnits<float> ResidentWeights::access() const {
  return model::ResidentUnits<float>(params_, std::vector<float*>(params_.size(), nullptr));
}

}  // namespace zerodp::ckpt
