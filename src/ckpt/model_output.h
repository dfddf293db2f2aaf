// Writing a model where the user said (`train --out`, `init --out`, `ckpt consolidate --out/--hf`)
// without losing anything that was there.
//
// GPT-2's one file is replaced atomically (AtomicFile). A model directory is treated as
// `save_pretrained` treats it: zerodp replaces only the model's own files (config.json, the
// safetensors weights, their index) and keeps every other file (a tokenizer, generation_config.json,
// a README, the user's notes). The new files are written complete into a staging directory first, so
// a failed write (a full disk, a kill) leaves the earlier model as it was; then:
//   - a directory that did not exist is the staging directory, renamed in whole;
//   - into an existing one, each file is renamed over its namesake (the weights first, the index,
//     config.json last), then the earlier model's files the new one no longer has are removed: the
//     shards named by an index zerodp wrote (its metadata says "writer": "zerodp"), model.safetensors
//     when the new model is sharded (transformers would load it instead of the shards), the index when
//     it is not. Shards of an index zerodp did not write stay where they are, and the run says so.
// Only a crash within the renames (milliseconds) can leave a mix of the two models.
//
// A directory that holds files but no model (no config.json, or one without "model_type" or
// "architectures": a project's own config) is refused before any work, unless the user says
// --overwrite-output-dir (Hugging Face's name): then the model is written beside its files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/dtype.h"
#include "model/layout.h"
#include "model/model_config.h"

namespace zerodp::ckpt {

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

// Where a model goes, and what the user allowed there.
struct ModelOutput {
  std::string path;
  std::string flag = "--out";         // the flag that named `path`, for messages
  bool overwrite_output_dir = false;  // write a model directory beside files that are not a model's
  // A model directory (the run's --init) whose tokenizer and generation files are copied into the output
  // when it has none of that name, so that the output loads with AutoTokenizer too. Empty: none.
  std::string companions_from = {};
};

// The files of a model directory that are not its weights but travel with it: the tokenizer's, the
// chat template's and generation_config.json.
const std::vector<std::string>& companion_files();

// Whether `dir` holds a model: a config.json that is a JSON object with "model_type" or "architectures".
bool holds_model(const std::string& dir);

// Before any work: UsageError naming out.flag when `out.path` cannot be written in `form` (the checks of
// core/output_path.h, and the refusal of a directory that holds files but no model).
void check_model_output(const ModelOutput& out, ModelForm form);

// Writes `layout`'s model to out.path in `form`: GPT-2's file (F32 whatever `dtype` is) or a model
// directory in `dtype`, shards of at most `shard_bytes`. unit_data(u) is called for u = 0, 1, ... and
// returns unit u's flat fp32 buffer, valid until the next call. Checks the output first.
void save_model(const ModelOutput& out, ModelForm form, const model::ParamLayout& layout, DType dtype,
                uint64_t shard_bytes, const std::function<const float*(int unit)>& unit_data);

}  // namespace zerodp::ckpt
