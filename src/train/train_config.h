// The training configuration: everything `zerodp train` needs (docs/reference/command-line.md#train), where it comes from,
// and how it is checked.
//
// Sources, later ones winning: the defaults below; a DeepSpeed-style JSON file (--config); the
// flags actually given on the command line. resolve_config() does exactly that, from the list of
// (flag, text) pairs the command line held, so it is testable without a command-line parser;
// apps/train_options.cpp wires it to CLI11. Checks that need the world size come last, in
// finalize()/validate(), once MPI is up.
//
// Units: batch sizes in sequences, bucket sizes and thresholds in elements (as DeepSpeed counts
// them), the memory budget in bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/parse.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "zero/settings.h"

namespace zerodp::train {

struct TrainConfig {
  // ---- files
  std::string init_path;     // --init: the initial weights (a GPT-2 safetensors file or a model directory)
  std::string data_path;     // --data: the token file, a directory of *.bin shards or a glob (data/dataset.h)
  std::string metrics_path;  // --metrics: JSON Lines written by rank 0; empty: none
  std::string log_csv_path;  // --log-csv: one CSV row per step (train/metrics.h CsvLog), rank 0; empty: none
  std::string out_path;      // --out: the trained weights (GPT-2: F32 safetensors; Llama: a model directory)
  bool overwrite_output_dir = false;  // --overwrite-output-dir: --out into a directory of files but no model
  std::optional<DType> out_dtype;  // --out-dtype: a model directory's tensors; unset: the --init directory's
  uint64_t out_shard_size = 5'000'000'000;  // --out-shard-size: a model directory's largest shard
  std::string config_path;   // --config: the DeepSpeed-style JSON that was read; empty: none
  // ---- checkpoints (docs/checkpoints.md)
  std::string save_dir;      // --save-dir: checkpoints go to <save_dir>/step-<n>/; empty: none
  int64_t save_every = 0;    // --save-every: a checkpoint every N steps (and at the end); 0: at the end only
  int64_t keep = 0;          // --keep: the newest K checkpoints are kept; 0: all
  // --async-save (DeepSpeed's checkpoint.writer.decoupled): each checkpoint copied to host memory at the
  // step boundary and written in the background while training goes on (train/async_save.h)
  bool async_save = false;
  std::string resume_path;   // --resume: a checkpoint (or a save directory: its latest) to continue

  // ---- batch (docs/reference/data-order.md#ranks): W ranks × micro_batch sequences × accum micro-steps per step
  int64_t steps = 10;
  int64_t micro_batch = 4;  // B, sequences per rank per micro-step
  int64_t seq = 64;         // T, tokens per sequence
  int64_t accum = 1;        // G, micro-steps per optimizer step
  std::optional<int64_t> train_batch_size;  // when given, must equal B·G·W (DeepSpeed's meaning)

  // ---- optimizer (docs/reference/model.md#loss, docs/reference/optimizer.md#adamw)
  // --optimizer, --beta1, --beta2, --eps, --weight-decay (on tensors with >= 2 dimensions only),
  // --momentum, --dampening, --nesterov: the optimizer section, as the engine takes it.
  optim::OptimizerSpec optimizer;
  double lr = 1e-3;
  // --adam-lr (optimizer.params.adam_lr): Muon's AdamW tensors' lr (the peak under a schedule, which
  // moves it in proportion to --lr); 0: --lr.
  double adam_lr = 0.0;
  double clip = 0.0;           // global gradient-norm clip; 0: off
  // The collective watchdog (comm/watchdog.h): a collective not done after this many seconds ends
  // the job (exit 1) naming it and the ranks that had not arrived; 0: wait forever.
  double comm_timeout = 300.0;
  // How reduce-scatters and all-gathers cross hosts (comm/host_layout.h): "host-aware" in two levels,
  // within each host and then one exchange per pair of hosts, "flat" over all ranks at once, "auto"
  // host-aware wherever the layout allows (the same bits either way).
  std::string collectives = "auto";
  optim::LrScheduleParams lr_schedule;  // constant unless asked

  // ---- device (--device): cpu, cuda or cuda:N (device/select.h)
  std::string device = "cpu";

  // ---- precision (DeepSpeed's bf16 and fp16 sections, communication_data_type,
  // data_types.grad_accum_dtype): the compute dtype, the dtype gradients are reduced in (the compute
  // dtype or fp32), fp32 accumulation of micro-step gradients under bf16/fp16 (on by default here),
  // and fp16's loss scaling (loss_scale 0: dynamic; max_overflows_at_min_scale: overflowing steps in a
  // row at the minimum scale before the run stops with exit 1).
  zero::PrecisionSettings precision = default_precision();

  // ---- non-finite numbers (docs/reference/command-line.md#faults): a NaN or Inf loss or gradient never reaches the weights.
  // fp16 skips such a step and lowers the loss scale; bf16 and fp32 stop with exit 1, unless this
  // asks to skip the step (parameters and optimizer state untouched, the skip in the metrics).
  bool skip_nonfinite = false;

  // ---- ZeRO (DeepSpeed's zero_optimization section; zero/settings.h): the stage, buckets, prefetch
  // limits, hybrid sharding (shard_group_size may be ZeroSettings::kShardGroupNode until the ranks'
  // hosts are known), activation checkpointing, offload.
  zero::ZeroSettings zero;

  // ---- run
  std::optional<uint64_t> memory_budget;  // bytes per rank, all categories of docs/reference/metrics.md#memory together
  // Data order (data/loader.h): in order (docs/reference/data-order.md#ranks, the default) or, with shuffle, each epoch a
  // permutation of the sequence windows drawn from `seed`. On --resume both default to the
  // checkpoint's (so the order goes on); given flags must agree with it.
  uint64_t seed = 1337;
  bool shuffle = false;
  bool seed_set = false, shuffle_set = false;
  // Instruction data (data/instruction_data.h): several examples a sequence, each attending only to
  // itself, instead of one padded example a sequence. On --resume it must be the checkpoint's.
  bool packing = false;
  int64_t log_every = 1;  // print a progress line every this many steps; 0: never
  // ---- validation (docs/reference/data-order.md#validation, train/evaluate.h): the mean token cross-entropy over the first
  // ⌊eval_tokens/T⌋ windows of T tokens of val_data (a file, directory or glob, as --data), after
  // every eval_every steps and after the last step; 0: after the last step only. eval_tokens 0: the
  // first 2^20 tokens, or the whole stream's windows when it holds fewer.
  std::string val_data_path;  // --val-data; empty: no validation
  int64_t eval_every = 0;     // --eval-every
  int64_t eval_tokens = 0;    // --eval-tokens

  // Whether micro_batch / accum were set by a flag or the JSON rather than defaulted: finalize()
  // derives the one that was not from train_batch_size, as DeepSpeed does.
  bool micro_batch_set = false;
  bool accum_set = false;
  // Whether the JSON's zero_optimization.stage (or --zero-stage) set the stage: `zerodp estimate
  // --config` plans that stage alone where it did.
  bool zero_stage_set = false;

  // Derives what train_batch_size implies (accum from B and W, or B from G and W, or B = tbs / W),
  // fills nothing else. UsageError when train_batch_size does not divide.
  void resolve_batch(int world_size);
  // resolve_batch(), then validate().
  void finalize(int world_size);
  // Upper bounds on the sizes of a run (documented in docs/limits.md): every product of them the
  // engine and the loader form fits in 64 bits, and a value narrowed to int is exact.
  static constexpr int64_t kMaxMicroBatch = int64_t{1} << 20;
  static constexpr int64_t kMaxAccum = int64_t{1} << 20;
  static constexpr int64_t kMaxSeq = int64_t{1} << 24;
  static constexpr int64_t kMaxTokensPerMicroBatch = (int64_t{1} << 31) - 1;  // B·T: int32 positions
  static constexpr int64_t kMaxSteps = int64_t{1} << 40;

  // UsageError (exit 2), naming the flag and the JSON key, for anything out of range: missing
  // --init (unless --resume) or --data, --save-every/--keep without --save-dir, non-positive sizes,
  // stage outside 0..3, train_batch_size != B·G·W, betas outside [0, 1), a reduce dtype other than
  // the compute dtype or fp32, a bad schedule, ...
  void validate(int world_size) const;

  // Every setting, for manifests and the metrics file.
  nlohmann::json to_json() const;

  const optim::OptimizerSpec& optimizer_spec() const { return optimizer; }
  // The lr schedule over this run (its length defaults to `steps`). UsageError when invalid.
  optim::LrSchedule make_lr_schedule() const;
  // Tokens of one optimizer step over all ranks: W·G·B·T.
  int64_t tokens_per_step(int world_size) const { return world_size * accum * micro_batch * seq; }

 private:
  static zero::PrecisionSettings default_precision() {
    zero::PrecisionSettings p;
    p.fp32_grad_accum = true;
    return p;
  }
  void validate_files_and_batch(int world_size) const;
  void validate_optimizer() const;
  void validate_precision() const;
  void validate_zero(int world_size) const;
  void validate_run(int world_size) const;
};

// ---- DeepSpeed-style JSON ----------------------------------------------------------------------
//
// Keys read: train_micro_batch_size_per_gpu, gradient_accumulation_steps, gradient_clipping,
// train_batch_size, steps_per_print, optimizer.{type, params.{lr, betas, eps, weight_decay,
// adam_w_mode, bias_correction, amsgrad, torch_adam, momentum, dampening, nesterov}},
// scheduler.{type, params.{warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type,
// total_num_steps, warmup_min_ratio, cos_min_ratio, decay_num_steps and decay_type (type "WSD",
// zerodp's warmup-stable-decay: DeepSpeed has none)}}, zero_optimization.{stage,
// reduce_bucket_size, allgather_bucket_size, overlap_comm, contiguous_gradients,
// stage3_prefetch_bucket_size, stage3_max_live_parameters, stage3_param_persistence_threshold,
// reshard_after_forward (zerodp's), offload_optimizer.{device ("cpu", "nvme" or "none"), nvme_path,
// buffer_count (pin_memory, pipeline_read, pipeline_write accepted and ignored)}, sub_group_size,
// cpu_offload (the old spelling of device cpu)}, offload_param.{device ("cpu", "nvme" or "none"),
// nvme_path (one path for both sections; pin_memory, buffer_count, buffer_size,
// max_in_cpu accepted and ignored)}, cpu_offload_params (the old spelling of offload_param.device cpu),
// bf16.enabled (or bfloat16.enabled), fp16.{enabled,
// loss_scale, initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis,
// min_loss_scale}, communication_data_type, data_types.grad_accum_dtype.
// Keys that would change what a run does and that zerodp does not implement (a partial offload,
// hybrid sharding, quantized communication, fp16 auto_cast, gradient pre-division,
// elasticity, ... when they ask for it) are refused (UsageError naming the key); keys that only tune
// DeepSpeed's own implementation, and unknown keys, are returned as warnings.
// Optimizer types: AdamW, Adam (AdamW unless params.adam_w_mode is false, which is refused), SGD,
// case-insensitive. An optimizer or scheduler section means what it means to DeepSpeed: the params
// it leaves out take DeepSpeed's defaults (optimizer: lr 1e-3, betas [0.9, 0.999], eps 1e-8,
// weight_decay 0, momentum 0; scheduler: warmup_num_steps 1000, warmup_type log, warmup_min_lr 0,
// warmup_min_ratio 0, cos_min_ratio 1e-4), except that an absent warmup_max_lr means the
// optimizer's lr and an absent total_num_steps the run's steps. A value "auto" (anywhere) leaves
// zerodp's setting: the flag's value when one is given, else zerodp's default.

// Applies the JSON text onto `cfg`. `source` names it in messages ("ds_config.json: ...").
// Wrong types or values: UsageError naming the key path. Keys zerodp does not know are returned as
// warnings, one line each, for the caller to log.
std::vector<std::string> apply_ds_config(TrainConfig& cfg, std::string_view json_text,
                                         std::string_view source);
// Reads the file (UsageError when it cannot) and applies it; sets cfg.config_path.
std::vector<std::string> load_ds_config(TrainConfig& cfg, const std::string& path);

// ---- command-line flags ------------------------------------------------------------------------

struct TrainFlag {
  std::string_view name;        // "--lr"
  std::string_view value_name;  // "X", "N", "PATH"...; empty for switches
  std::string_view help;
  bool is_switch;               // given alone means true; the parser adds --no-<name> for false
};

// Every flag of `zerodp train`, in the order resolve_config() applies them.
std::span<const TrainFlag> train_flags();
// The setting a flag controls, spelled as the flag would take it ("" when unset): for help texts.
std::string flag_value(const TrainConfig& cfg, std::string_view flag);
// Sets what `flag` controls from its text. UsageError naming the flag when the text does not parse.
// Switches take "true"/"false" (also 1/0, yes/no, on/off).
void apply_flag(TrainConfig& cfg, std::string_view flag, std::string_view value);

struct ResolvedConfig {
  TrainConfig config;
  std::vector<std::string> warnings;  // from the JSON, to be logged once
};
// The configuration the command line asks for: the defaults, then --config's JSON when given, then
// every given flag in train_flags() order (so --lr is known when --min-lr is applied). `given`: the
// flags that were on the command line with their text.
ResolvedConfig resolve_config(std::span<const std::pair<std::string, std::string>> given);


}  // namespace zerodp::train
