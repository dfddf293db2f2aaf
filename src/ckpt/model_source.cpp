#include "ckpt/model_source.h"

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

}  // namespace zerodp::ckpt
