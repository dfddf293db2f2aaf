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

ModelForm output_form(const model::ModelConfig& config, const std::string& path, bool from_model_dir) {
  if (config.is_llama()) return ModelForm::kModelDir;
  std::error_code ec;
  if (path.ends_with('/') || std::filesystem::is_directory(path, ec)) return ModelForm::kModelDir;
  return from_model_dir && !path.ends_with(".safetensors") ? ModelForm::kModelDir : ModelForm::kGpt2File;
}

void save_model(const std::string& path, ModelForm form, const model::ParamLayout& layout, DType dtype,
                uint64_t shard_bytes, const std::function<const float*(int unit)>& unit_data) {
  if (form == ModelForm::kModelDir) {
    save_hf_model(path, layout, dtype, shard_bytes, unit_data);
  } else {
    ZDP_CHECK(layout.config().is_gpt2(), "a {} written as one GPT-2 file", layout.config().summary());
    save_gpt2(path, layout.config().gpt2(), layout, unit_data);
  }
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
