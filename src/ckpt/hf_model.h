// Hugging Face model directories (docs/reference/files.md#model-directories): config.json beside
// model.safetensors, or beside
// shards listed in model.safetensors.index.json ("weight_map": tensor name → file name), tensors in
// F32, BF16 or F16 under transformers' names: a Llama-family model's (LlamaForCausalLM,
// Qwen2ForCausalLM: PyTorch's [out, in] shapes), or a GPT-2's (GPT2LMHeadModel: the names of
// docs/reference/model.md#gpt2 after "transformer.", Conv1D's [in, out] shapes, which are zerodp's
// own). What `--init DIR` reads and `--out DIR` / `ckpt consolidate --hf DIR` write, loadable by
// `from_pretrained` as it is.
//
// Reading maps every shard and validates every header, name and shape before anything is copied:
// then read_unit_range() touches only the bytes of the range asked for, so a rank that loads its
// ZeRO shard reads that part of the files and nothing else. Tensors transformers keeps in some files
// and zerodp ignores: RoPE's inv_freq buffers, GPT-2's attention masks (h.{i}.attn.bias,
// h.{i}.attn.masked_bias), and lm_head.weight of a tied model. GPT-2 names are read with or without
// the "transformer." prefix.
//
// Writing streams unit by unit into shards of at most `shard_bytes` (a tensor larger than that gets
// a shard of its own, as transformers does); ckpt/model_output.h publishes them into the directory.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ckpt/safetensors.h"
#include "core/dtype.h"
#include "model/layout.h"
#include "model/model_config.h"

namespace zerodp::ckpt {

// Limits on what a model directory may hold (docs/limits.md), checked before anything is sized by it.
struct HfDirLimits {
  static constexpr size_t kMaxConfigBytes = size_t{1} << 20;  // config.json (Llama 3's: 1 KB)
  static constexpr size_t kMaxIndexBytes = size_t{64} << 20;  // the index (Llama 3.1 405B's: 100 KB)
  static constexpr size_t kMaxShards = 100000;
};

// The files of a model directory that zerodp reads and writes; every other file there is the user's.
inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfSingleFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";

// transformers' default shard size for save_pretrained: 5 GB.
inline constexpr uint64_t kDefaultShardBytes = uint64_t{5} * 1000 * 1000 * 1000;

class HfModelDir {
 public:
  // Whether `path` is a directory holding a config.json (what --init tells apart from a file).
  static bool is_model_dir(const std::string& path);
  // UsageError naming the directory, the file and the tensor on any problem.
  static HfModelDir open(const std::string& dir);

  const model::ModelConfig& config() const { return config_; }
  const std::string& path() const { return dir_; }
  // The dtype of the token embedding's tensor (wte, embed_tokens): what --out-dtype defaults to.
  DType dtype() const { return dtype_; }
  // How many safetensors files hold the tensors.
  size_t num_files() const { return files_.size(); }

  // dst[k] = element (begin + k) of `unit`'s flat buffer in `layout` (config()'s), widened to fp32.
  void read_unit_range(const model::ParamLayout& layout, int unit, size_t begin, size_t count, float* dst) const;

 private:
  HfModelDir() = default;
  std::string dir_;
  model::ModelConfig config_;
  DType dtype_ = DType::kF32;
  std::vector<SafetensorsReader> files_;
  std::unordered_map<std::string, const TensorEntry*> by_name_;  // the layout's names → their tensors
};

// The file names save_hf_model gives a layout's tensors: "model.safetensors" for all when one shard
// holds them, else "model-0000i-of-0000n.safetensors", each shard at most `shard_bytes` (or one
// tensor); in layout order (a tied model's lm_head is not written: transformers ties it).
std::vector<std::string> hf_shard_files(const model::ParamLayout& layout, DType dtype, uint64_t shard_bytes);

// Writes config.json, the weights and (when sharded) the index into `dir`, an existing directory, for
// `layout`'s model in `dtype`, and returns the names of the files written. unit_data(u) is called for
// u = 0, 1, ... and returns unit u's flat fp32 buffer, valid until the next call. The index's metadata
// carries "writer": "zerodp" beside transformers' "total_size".
std::vector<std::string> write_hf_files(const std::string& dir, const model::ParamLayout& layout, DType dtype,
                                        uint64_t shard_bytes,
                                        const std::function<const float*(int unit)>& unit_data);

// The shard files a directory's index names, and whether zerodp wrote that index. UsageError naming the
// index when it is not one (the limits of reading apply).
struct HfIndexFiles {
  std::set<std::string> files;
  bool written_by_zerodp = false;
};
HfIndexFiles read_hf_index_files(const std::string& dir);

// "float32", "bfloat16", "float16": config.json's torch_dtype.
const char* torch_dtype_name(DType dtype);

}  // namespace zerodp::ckpt
