// Where a run's initial weights come from (--init): a GPT-2 safetensors file (ckpt/gpt2_weights.h)
// or a Hugging Face model directory of GPT-2 or the Llama family (ckpt/hf_model.h), told apart by
// what the path is. Either is validated in full when opened and read by unit ranges, so each rank
// loads its shard alone. And which of those forms a model is written in (--out).
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

// The two forms a model is written in.
enum class ModelForm {
  kGpt2File,  // GPT-2's one F32 safetensors file (docs/reference/files.md#safetensors)
  kModelDir,  // a Hugging Face model directory (hf_model.h)
};

// What `--out PATH` writes for a model of `config`: a Llama-family model is always a directory; a GPT-2
// its one file, as always, unless PATH asks for a directory: it ends in '/', it is a directory already,
// or the run started from a model directory (`from_model_dir`) and PATH does not end in ".safetensors".
// (Each of these failed before GPT-2 had a directory form: no path that wrote a file writes a directory.)
ModelForm output_form(const model::ModelConfig& config, const std::string& path, bool from_model_dir);

// Writes `layout`'s model to `path` in `form`: save_gpt2 (F32 whatever `dtype` is) or save_hf_model
// (in `dtype`, shards of at most `shard_bytes`). unit_data as those take it.
void save_model(const std::string& path, ModelForm form, const model::ParamLayout& layout, DType dtype,
                uint64_t shard_bytes, const std::function<const float*(int unit)>& unit_data);

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
