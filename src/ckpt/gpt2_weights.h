// GPT-2 weights in safetensors (docs/reference/files.md#safetensors): reading a model file, whether written by zerodp or
// exported from Hugging Face, and writing one.
//
// Reading accepts a `transformer.` prefix on any name, ignores the attention-mask buffers
// `h.{i}.attn.bias` / `h.{i}.attn.masked_bias` and the tied `lm_head.weight`, and takes the
// hyper-parameters from the first source that has them:
//   1. the file's __metadata__ (string values n_layer, n_head, n_embd, vocab_size, n_ctx);
//   2. a config.json in the same directory (the same keys, numbers or strings; n_positions is
//      accepted for n_ctx);
//   3. the shapes (L from the h.{i} blocks, V and C from wte, N from wpe) with H from `heads`.
// Every tensor is checked (present, known, right shape) when the file is opened, before anything is
// copied out, so nothing is ever trained on a half-valid file.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "ckpt/safetensors.h"
#include "model/gpt2_config.h"
#include "model/layout.h"

namespace zerodp::ckpt {

// Hugging Face's GPT2LMHeadModel names every tensor "transformer." + the name above.
inline constexpr std::string_view kGpt2HfPrefix = "transformer.";
// A tensor's name without the "transformer." prefix, if it has one.
std::string gpt2_canonical_name(std::string_view name);
// Whether a (canonical) name is one that GPT-2 files may carry and zerodp ignores: the attention-mask
// buffers h.{i}.attn.bias and h.{i}.attn.masked_bias, and lm_head.weight (tied to wte).
bool gpt2_ignored_name(std::string_view name);

class GPT2Weights {
 public:
  // UsageError naming the file (and the tensor, expected and found shape) on any problem.
  // `heads` is needed only when neither __metadata__ nor config.json gives n_head; when given and
  // one of them does, the two must agree.
  static GPT2Weights open(const std::string& path, std::optional<int> heads = std::nullopt);

  const model::GPT2Config& config() const { return config_; }
  const std::string& path() const { return reader_.path(); }
  // Where the hyper-parameters came from: "__metadata__", the config.json path, or "shapes".
  const std::string& config_source() const { return config_source_; }
  const SafetensorsReader& file() const { return reader_; }

  // dst[k] = element (begin + k) of `unit`'s flat buffer in `layout` (which must be the layout of
  // config()), as fp32, for k < count. The range may cross tensor boundaries: a rank can load
  // exactly its shard.
  void read_unit_range(const model::ParamLayout& layout, int unit, size_t begin, size_t count,
                       float* dst) const;

 private:
  GPT2Weights() = default;

  SafetensorsReader reader_;
  model::GPT2Config config_;
  std::string config_source_;
  std::unordered_map<std::string, size_t> by_name_;  // docs/reference/model.md#gpt2 name -> index in reader_.tensors()
};

// Writes every tensor of docs/reference/model.md#gpt2 in F32 under its exact name, with the config as __metadata__,
// atomically. unit_data(u) is called for u = 0, 1, ... in order and returns unit u's flat buffer
// (layout order, layout.unit_numel(u) floats), which need stay valid only until the next call: a
// caller may materialise one unit at a time.
void save_gpt2(const std::string& path, const model::GPT2Config& config, const model::ParamLayout& layout,
               const std::function<const float*(int unit)>& unit_data);

}  // namespace zerodp::ckpt
