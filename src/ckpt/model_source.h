// Where a run's initial weights come from (--init): a GPT-2 safetensors file (ckpt/gpt2_weights.h)
// or a Hugging Face model directory of GPT-2 or the Llama family (ckpt/hf_model.h), told apart by
// what the path is. Either is validated in full when opened and read by unit ranges, so each rank
// loads its shard alone. (How a model is written: ckpt/model_output.h.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "ckpt/gpt2_weights.h"
#include "ckpt/hf_model.h"
#include "core/memory.h"
#include "model/layout.h"
#include "model/model_config.h"
#include "model/units.h"

namespace zerodp::ckpt {

class ModelSource {
 public:
  // A directory with a config.json: a model directory; anything else: a GPT-2 file.
  static ModelSource open(const std::string& path);

  const model::ModelConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  // The dtype of the token embedding's tensor (a directory's --out-dtype default).
  DType dtype() const;
  // Whether the weights come from a model directory (rather than a GPT-2 file).
  bool is_model_dir() const { return std::holds_alternative<HfModelDir>(source_); }
  void read_unit_range(const model::ParamLayout& layout, int unit, size_t begin, size_t count, float* dst) const;

 private:
  explicit ModelSource(GPT2Weights w);
  explicit ModelSource(HfModelDir d);
  model::ModelConfig config_;
  std::string path_;
  std::variant<GPT2Weights, HfModelDir> source_;
};

// Every unit of a model's weights in fp32 in this process's memory (under `param`): what inference
// in one process (sampling, evaluation) runs on.
class ResidentWeights {
 public:
  explicit ResidentWeights(const std::string& path);
  const ModelSource& source() const { return source_; }
  const model::ParamLayout& layout() const { return layout_; }
  const model::ModelConfig& config() const { return layout_.config(); }
  // The units as a model reads them (no gradients).
  model::ResidentUnits<float> access() const;

 private:
  ModelSource source_;
  model::ParamLayout layout_;
  std::vector<Buffer> units_;
  std::vector<const float*> params_;
};

}  // namespace zerodp::ckpt
