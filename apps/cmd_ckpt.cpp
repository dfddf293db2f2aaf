// `zerodp ckpt`: sharded checkpoints without MPI (docs/checkpoints.md).
//   zerodp ckpt consolidate CKPT --out F.safetensors   the full fp32 model, tensor by tensor
//   zerodp ckpt consolidate CKPT --hf DIR              a Hugging Face model directory, unit by unit
//   zerodp ckpt inspect CKPT                           the manifest in human terms, every checksum verified
// CKPT is a checkpoint directory (SAVE_DIR/step-<n>) or a save directory (meaning its latest).
#include <string>

#include <fmt/format.h>

#include "apps/commands.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_tools.h"
#include "core/error.h"
#include "core/parse.h"

namespace zerodp::cli {

namespace {

struct CkptOptions {
  std::string path;
  std::string out;
  std::string hf;
  std::string dtype = "fp32";
  std::string shard_size = "5GB";
  bool overwrite_output_dir = false;
};

int run_consolidate(const CkptOptions& o) {
  ZDP_REQUIRE(o.out.empty() != o.hf.empty(), "give one of --out (a safetensors file) and --hf (a model directory)");
  // The output before the checkpoint: verifying every file of a large one takes minutes.
  const ckpt::ModelOutput out{o.hf.empty() ? o.out : o.hf, o.hf.empty() ? "--out" : "--hf", o.overwrite_output_dir, {}};
  const ckpt::ModelForm form = o.hf.empty() ? ckpt::ModelForm::kGpt2File : ckpt::ModelForm::kModelDir;
  ZDP_REQUIRE(!o.overwrite_output_dir || !o.hf.empty(), "--overwrite-output-dir is for --hf (a model directory)");
  const DType dtype = parse_dtype(o.dtype);
  const uint64_t shard_bytes = parse_bytes(o.shard_size, "--shard-size");
  ckpt::check_model_output(out, form);
  const ckpt::Checkpoint ck = ckpt::Checkpoint::open(o.path);  // every file verified first
  const model::ModelConfig& mc = ck.manifest().model;
  if (!o.hf.empty()) {
    ckpt::consolidate_checkpoint_hf(ck, out, dtype, shard_bytes);
    fmt::print("wrote {}: {} ({} parameters, {}) from {} (step {})\n", o.hf, model::model_name(mc),
               ck.layout().total_numel(), dtype_name(dtype), ck.dir(), ck.manifest().step);
    return 0;
  }
  ZDP_REQUIRE(mc.is_gpt2(), "--out: a {} is written as a model directory: give --hf DIR", model::model_name(mc));
  ckpt::consolidate_checkpoint(ck, o.out);
  fmt::print("wrote {}: {} ({} parameters, fp32) from {} (step {})\n", o.out, model::model_name(mc),
             ck.layout().total_numel(), ck.dir(), ck.manifest().step);
  return 0;
}

int run_inspect(const CkptOptions& o) {
  // Everything but the checksums first, so that the description is printed even when a file is
  // corrupt; then each file's checksum, one line each.
  const ckpt::Checkpoint ck = ckpt::Checkpoint::open(o.path, [](int) { return false; });
  fmt::print("{}", ckpt::describe_checkpoint(ck));
  fmt::print("  checksums\n");
  int bad = 0;
  std::string first_error;
  for (int r = 0; r < ck.manifest().world_size; ++r) {
    const std::string error = ck.verify_file(r);
    fmt::print("    {}  {}\n", ck.manifest().ranks[static_cast<size_t>(r)].file, error.empty() ? "ok" : "CORRUPT");
    if (!error.empty() && bad++ == 0) first_error = error;
  }
  std::fflush(stdout);
  if (bad > 0)
    throw UsageError(fmt::format("{} of {} files of checkpoint '{}' failed verification; first: {}", bad,
                                 ck.manifest().world_size, ck.dir(), first_error));
  fmt::print("all {} files verified (manifest and CRC-32C of every file)\n", ck.manifest().world_size);
  return 0;
}

void register_ckpt(CLI::App& app, Action& action) {
  static CkptOptions consolidate_opts, inspect_opts;
  auto* cmd = app.add_subcommand("ckpt", "Consolidate or inspect a sharded checkpoint (no MPI needed)");
  cmd->require_subcommand(1);

  auto* consolidate = cmd->add_subcommand(
      "consolidate",
      "Write a checkpoint's full model: GPT-2 as one fp32 safetensors file (--out) or a Hugging Face directory "
      "(--hf), a Llama as a Hugging Face directory (--hf)");
  consolidate->add_option("CKPT", consolidate_opts.path, "Checkpoint directory, or a save directory (its latest)")
      ->required();
  consolidate->add_option("--out", consolidate_opts.out, "GPT-2: the output safetensors file (written atomically)");
  consolidate->add_option("--hf", consolidate_opts.hf,
                          "The output Hugging Face model directory: its config.json, weights and index replaced, other files kept");
  consolidate->add_option("--dtype", consolidate_opts.dtype, "--hf: the tensors' dtype, fp32, bf16 or fp16")
      ->capture_default_str();
  consolidate->add_option("--shard-size", consolidate_opts.shard_size, "--hf: the largest shard, e.g. 5GB or 500MiB")
      ->capture_default_str();
  consolidate->add_flag("--overwrite-output-dir", consolidate_opts.overwrite_output_dir,
                        "--hf: write into a directory that holds files but no model (its files are kept)");
  consolidate->callback([&action] { action = [] { return run_consolidate(consolidate_opts); }; });

  auto* inspect = cmd->add_subcommand("inspect", "Describe a checkpoint and verify the checksum of every file");
  inspect->add_option("CKPT", inspect_opts.path, "Checkpoint directory, or a save directory (its latest)")
      ->required();
  inspect->callback([&action] { action = [] { return run_inspect(inspect_opts); }; });
}

const CommandRegistration ckpt_registration(60, register_ckpt);

}  // namespace

}  // namespace zerodp::cli
