// `zerodp init`: writes a freshly initialised model (docs/reference/model.md#init,
// docs/reference/command-line.md#commands), one unit at a time so memory stays near the largest unit:
// a GPT-2 as one safetensors file (or a Hugging Face directory when --out ends in '/' or is a
// directory), a Llama-family model as a Hugging Face directory (docs/reference/model.md#the-llama-family-the-function).
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/model_options.h"
#include "ckpt/hf_model.h"
#include "ckpt/model_output.h"
#include "core/error.h"
#include "core/memory.h"
#include "model/gpt2_config.h"
#include "model/init.h"
#include "model/layout.h"

namespace zerodp::cli {

namespace {

struct InitOptions {
  std::string out;
  std::string arch = "gpt2";
  int layers = 2;
  int heads = 4;
  int embd = 64;
  int vocab = 256;
  int ctx = 128;
  uint64_t seed = 1337;
  LlamaOptions llama;
  std::string dtype = "fp32";
  bool overwrite_output_dir = false;
};

// Elements of the model's largest unit, from the config alone (no layout of a huge model is built
// just to refuse it): the embedding unit, a block, or the head's own unit.
uint64_t largest_unit_numel(const model::ModelConfig& c) {
  uint64_t largest = 0;
  const int units = model::ParamLayout::units_of(c);
  for (int unit : {0, 1, units - 1}) {
    uint64_t n = 0;
    for (int i = 0; i < model::ParamLayout::unit_tensor_count(c, unit); ++i)
      n += model::ParamLayout::tensor_info(c, unit, i).numel;
    largest = std::max(largest, n);
  }
  return largest;
}

// Free bytes of the file system that will hold `path` (0 when it cannot be told).
uint64_t free_bytes_beside(std::string path) {
  while (path.size() > 1 && path.ends_with('/')) path.pop_back();  // "runs/model/" is beside "runs/model"
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

// A valid config (within docs/limits.md) may still be too large for this machine: init holds one
// unit at a time in fp32 and writes every parameter in `dtype`. Refuse before allocating or writing.
void check_fits(const model::ModelConfig& c, DType dtype, const std::string& out) {
  const uint64_t unit_bytes = largest_unit_numel(c) * sizeof(float);
  const uint64_t memory = physical_memory_bytes();
  ZDP_REQUIRE(memory == 0 || unit_bytes <= memory,
              "{}: its largest unit alone is {} of fp32, more than this machine's {} of memory", model::model_name(c),
              format_bytes(unit_bytes), format_bytes(memory));
  const uint64_t file_bytes = static_cast<uint64_t>(c.param_count()) * dtype_size(dtype);
  const uint64_t disk = free_bytes_beside(out);
  ZDP_REQUIRE(disk == 0 || file_bytes <= disk, "'{}': {} is {} of {}, more than the {} free there", out,
              model::model_name(c),
              format_bytes(file_bytes), dtype_name(dtype), format_bytes(disk));
}

int run_init(const InitOptions& o) {
  ZDP_REQUIRE(o.layers > 0, "--layers must be positive, got {}", o.layers);
  ZDP_REQUIRE(o.heads > 0, "--heads must be positive, got {}", o.heads);
  ZDP_REQUIRE(o.embd > 0, "--embd must be positive, got {}", o.embd);
  ZDP_REQUIRE(o.vocab > 0, "--vocab must be positive, got {}", o.vocab);
  ZDP_REQUIRE(o.ctx > 0, "--ctx must be positive, got {}", o.ctx);
  const model::Arch arch = model::parse_arch(o.arch, "--arch");
  const bool llama = arch == model::Arch::kLlama;
  ZDP_REQUIRE(llama || !any_llama_option(o.llama),
              "--kv-heads, --head-dim, --intermediate, --rope-theta, --tie, --qwen2 and --attention-bias are for "
              "--arch llama");
  model::ModelConfig config;
  if (llama) {
    config = llama_config(o.layers, o.heads, o.embd, o.vocab, o.ctx, o.llama);
  } else {
    ZDP_REQUIRE(o.embd % o.heads == 0, "--embd {} is not divisible by --heads {}", o.embd, o.heads);
    config = model::GPT2Config{o.layers, o.heads, o.embd, o.vocab, o.ctx};
    config.validate();  // within docs/limits.md
  }
  const DType dtype = parse_dtype(o.dtype);
  const ckpt::ModelForm form = ckpt::output_form(config, o.out, false);
  ZDP_REQUIRE(form == ckpt::ModelForm::kModelDir || dtype == DType::kF32,
              "--dtype {}: a GPT-2 file is F32; a model directory (--out ending in '/') takes --dtype", o.dtype);
  const ckpt::ModelOutput out{o.out, "--out", o.overwrite_output_dir, {}};
  ckpt::check_model_output(out, form);
  check_fits(config, dtype, o.out);
  const model::ParamLayout layout(config);

  Buffer unit_buffer;  // one unit at a time, replaced on each call
  const auto unit_data = [&](int unit) {
    const size_t n = layout.unit_numel(unit);
    unit_buffer.release();  // the previous unit is written: free it before taking the next
    unit_buffer = Buffer(n * sizeof(float), MemCategory::kParam);
    model::init_unit_range(config, layout, unit, 0, n, o.seed, unit_buffer.as<float>());
    return static_cast<const float*>(unit_buffer.as<float>());
  };
  ckpt::save_model(out, form, layout, dtype, ckpt::kDefaultShardBytes, unit_data);
  fmt::print("wrote {}: {}{} ({} parameters, seed {})\n", o.out, llama ? "" : "GPT-2 ", config.summary(),
             layout.total_numel(), o.seed);
  return 0;
}

void register_init(CLI::App& app, Action& action) {
  static InitOptions opts;
  auto* cmd = app.add_subcommand(
      "init", "Write a freshly initialised model (GPT-2: safetensors or a Hugging Face directory; Llama: a directory)");
  cmd->add_option("--out", opts.out,
                  "Output: a GPT-2 safetensors file (replaced atomically), or a model directory (a Llama's; a "
                  "GPT-2's when the path ends in '/' or is a directory: its config.json and weights replaced, "
                  "other files kept)")
      ->required();
  cmd->add_flag("--overwrite-output-dir", opts.overwrite_output_dir,
                "Write a model directory into a directory that holds files but no model (its files are kept)");
  cmd->add_option("--arch", opts.arch, "gpt2 or llama")->capture_default_str();
  cmd->add_option("--layers", opts.layers, "Number of transformer blocks L")->capture_default_str();
  cmd->add_option("--heads", opts.heads, "Attention heads H (must divide --embd)")->capture_default_str();
  cmd->add_option("--embd", opts.embd, "Embedding width C")->capture_default_str();
  cmd->add_option("--vocab", opts.vocab, "Vocabulary size V (256 for `zerodp tokenize`'s bytes)")
      ->capture_default_str();
  cmd->add_option("--ctx", opts.ctx, "Context length N (rows of wpe)")->capture_default_str();
  cmd->add_option("--seed", opts.seed, "Random seed: the same seed gives the same bits")
      ->capture_default_str();
  add_llama_options(cmd, opts.llama);
  cmd->add_option("--dtype", opts.dtype, "A model directory's tensors' dtype, fp32, bf16 or fp16")
      ->capture_default_str();
  cmd->footer(
      "Defaults make a small model: L=2 H=4 C=64 V=256 N=128, seed 1337.\n"
      "GPT-2: weights ~ N(0, 0.02), c_proj weights ~ N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1.\n"
      "Llama: weights ~ N(0, 0.02) (initializer_range), biases 0, RMSNorm weights 1.");
  cmd->callback([&action] { action = [] { return run_init(opts); }; });
}

const CommandRegistration init_registration(20, register_init);

}  // namespace

}  // namespace zerodp::cli
