// `zerodp train`'s flags: the table of every flag (its help, how it sets its setting and how it shows
// it) and resolve_config(), which applies the defaults, --config's JSON and the given flags in order.
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/parse.h"
#include "core/strings.h"
#include "device/select.h"
#include "train/train_config.h"

namespace zerodp::train {

using optim::LrScheduleKind;
using optim::LrScheduleParams;
using optim::OptimizerSpec;
using zero::LossScaleConfig;
using zero::PrecisionSettings;
using zero::ZeroSettings;

namespace {

// Re-raises a parser's UsageError with the flag or key in front.
template <typename Fn>
auto with_context(std::string_view where, Fn&& fn) {
  try {
    return fn();
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", where, e.what()));
  }
}

std::string show(double x) { return fmt::format("{}", x); }
std::string show(bool x) { return x ? "true" : "false"; }

// --min-lr: the floor of the schedule in force. WarmupLR/WarmupDecayLR/WSD start and end at
// warmup_min_lr; WarmupCosineLR ends at cos_min_ratio·lr.
void set_min_lr(TrainConfig& c, double min_lr) {
  switch (c.lr_schedule.kind) {
    case LrScheduleKind::kConstant:
      throw UsageError(
          "--min-lr needs a schedule: --lr-schedule warmup, warmup-decay, cosine or wsd (or a scheduler "
          "in --config)");
    case LrScheduleKind::kWarmupLR:
    case LrScheduleKind::kWarmupDecayLR:
    case LrScheduleKind::kWSD:
      c.lr_schedule.warmup_min_lr = min_lr;
      return;
    case LrScheduleKind::kWarmupCosineLR:
      ZDP_REQUIRE(c.lr > 0, "--min-lr with the cosine schedule needs --lr > 0, got {}", c.lr);
      c.lr_schedule.cos_min_ratio = min_lr / c.lr;
      return;
  }
}

struct FlagEntry {
  TrainFlag flag;
  void (*set)(TrainConfig&, std::string_view flag, std::string_view value) = nullptr;
  std::string (*get)(const TrainConfig&) = nullptr;
  // A ZeRO setting: set and shown through its row of zero::zero_setting_rows() instead.
  const zero::ZeroSettingRow* zero_row = nullptr;

  void apply(TrainConfig& c, std::string_view f, std::string_view v) const {
    if (zero_row) zero::set_zero_setting(c.zero, *zero_row, v);
    else set(c, f, v);
  }
  std::string value(const TrainConfig& c) const { return zero_row ? zero::zero_setting_text(c.zero, *zero_row) : get(c); }
};

// Where the flags of zero::zero_setting_rows() go in the table, in their own order.
const FlagEntry kZeroSettingRows{{"", "", "", false}};

// The table with kZeroSettingRows expanded.
std::vector<FlagEntry> with_zero_rows(std::initializer_list<FlagEntry> entries) {
  std::vector<FlagEntry> out;
  for (const FlagEntry& e : entries) {
    if (!e.flag.name.empty()) {
      out.push_back(e);
      continue;
    }
    for (const zero::ZeroSettingRow& row : zero::zero_setting_rows())
      if (!row.flag.empty()) out.push_back({{row.flag, row.value_name, row.help, zero::is_switch(row)}, nullptr, nullptr, &row});
  }
  return out;
}

// A flag that sets one field of TrainConfig, reached through the member pointers `path`
// (&TrainConfig::optimizer, &OptimizerSpec::beta1), and shows it back. How its text is read
// follows the field's type: a string as given (a path, a name), an int or int64_t count, a double,
// a bool switch.
template <auto... path>
FlagEntry field_flag(TrainFlag flag) {
  using Field = std::remove_cvref_t<decltype((std::declval<TrainConfig&>() .* ... .* path))>;
  auto set = [](TrainConfig& c, std::string_view f, std::string_view v) {
    Field& field = (c .* ... .* path);
    if constexpr (std::is_same_v<Field, std::string>)
      field = std::string(v);
    else if constexpr (std::is_same_v<Field, int>)
      field = parse_int32(v, f);
    else if constexpr (std::is_same_v<Field, int64_t>)
      field = parse_int(v, f);
    else if constexpr (std::is_same_v<Field, double>)
      field = parse_number(v, f);
    else if constexpr (std::is_same_v<Field, bool>)
      field = parse_bool(v, f);
    else
      static_assert(sizeof(Field) == 0, "field_flag: a field of a type without a parser here");
  };
  auto get = [](const TrainConfig& c) -> std::string {
    const Field& field = (c .* ... .* path);
    if constexpr (std::is_same_v<Field, std::string>)
      return field;
    else if constexpr (std::is_integral_v<Field> && !std::is_same_v<Field, bool>)
      return std::to_string(field);
    else
      return show(field);
  };
  return {flag, set, get};
}

#define ZDP_SET [](TrainConfig & c, std::string_view f, std::string_view v)
#define ZDP_GET [](const TrainConfig& c) -> std::string

// The flags, in the order they are applied. --lr comes before --min-lr (the cosine floor is a
// ratio of it), --lr-schedule before the schedule's parameters.
const std::vector<FlagEntry>& flag_table() {
  static const std::vector<FlagEntry> table = with_zero_rows({
      field_flag<&TrainConfig::config_path>(
          {"--config", "PATH", "DeepSpeed-style JSON configuration; flags given here win over it", false}),
      field_flag<&TrainConfig::init_path>(
          {"--init", "PATH",
           "Initial weights: a GPT-2 safetensors file (e.g. from `zerodp init`) or a Hugging Face model directory "
           "(GPT-2 or Llama family); required",
           false}),
      field_flag<&TrainConfig::data_path>(
          {"--data", "PATH",
           "Training tokens: a token file (raw uint16, or llm.c layout with uint16 or uint32 tokens), a directory (its "
           "*.bin files) or a glob, the files read in sorted name order as one stream; required",
           false}),
      field_flag<&TrainConfig::steps>({"--steps", "K", "Optimizer steps to run", false}),
      {{"--micro-batch", "B", "Sequences per rank per micro-step (train_micro_batch_size_per_gpu)", false},
       ZDP_SET {
         c.micro_batch = parse_int(v, f);
         c.micro_batch_set = true;
       },
       ZDP_GET { return std::to_string(c.micro_batch); }},
      field_flag<&TrainConfig::seq>({"--seq", "T", "Tokens per sequence (at most the model's context)", false}),
      {{"--accum", "G", "Micro-steps accumulated per optimizer step (gradient_accumulation_steps)", false},
       ZDP_SET {
         c.accum = parse_int(v, f);
         c.accum_set = true;
       },
       ZDP_GET { return std::to_string(c.accum); }},
      {{"--train-batch-size", "N",
        "Global batch in sequences; must equal B x G x ranks (derives G or B when only one is given)", false},
       ZDP_SET { c.train_batch_size = parse_int(v, f); },
       ZDP_GET { return c.train_batch_size ? std::to_string(*c.train_batch_size) : ""; }},
      {{"--optimizer", "NAME",
        "AdamW, SGD or Muon (the blocks' weight matrices; AdamW for the rest; momentum 0.95, Nesterov, "
        "weight decay 0 unless given)",
        false},
       ZDP_SET {
         const optim::OptimizerKind kind = with_context(f, [&] { return optim::parse_optimizer(v); });
         if (kind == optim::OptimizerKind::kMuon && c.optimizer.kind != kind) {
           // Muon's defaults (docs/reference/optimizer.md#muon); the flags after this one may change them.
           c.optimizer.momentum = 0.95;
           c.optimizer.nesterov = true;
           c.optimizer.weight_decay = 0.0;
         }
         c.optimizer.kind = kind;
       },
       ZDP_GET { return optim::optimizer_name(c.optimizer.kind); }},
      {{"--lr", "X", "Learning rate (the peak when a schedule is used)", false},
       ZDP_SET {
         c.lr = parse_number(v, f);
         c.lr_schedule.warmup_max_lr.reset();  // the schedule's peak follows the flag
       },
       ZDP_GET { return show(c.lr); }},
      field_flag<&TrainConfig::adam_lr>(
          {"--adam-lr", "X", "Muon: the learning rate of the tensors AdamW updates (0: --lr)", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::beta1>({"--beta1", "X", "AdamW beta1", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::beta2>({"--beta2", "X", "AdamW beta2", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::eps>({"--eps", "X", "AdamW epsilon", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::weight_decay>(
          {"--weight-decay", "X",
           "Weight decay, on tensors of 2 or more dimensions only (decoupled for AdamW, L2 for SGD)", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::momentum>({"--momentum", "X", "SGD momentum; Muon's", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::dampening>({"--dampening", "X", "SGD dampening", false}),
      field_flag<&TrainConfig::optimizer, &OptimizerSpec::nesterov>({"--nesterov", "", "SGD: Nesterov momentum (Muon's is on by default)", true}),
      field_flag<&TrainConfig::clip>({"--clip", "X", "Clip the global gradient norm to X (0: no clipping)", false}),
      {{"--lr-schedule", "NAME",
        "constant, warmup (WarmupLR), warmup-decay (WarmupDecayLR), cosine (WarmupCosineLR) or wsd "
        "(warmup-stable-decay: warmup, then --lr until the last --decay-steps steps, then a decay to --min-lr)",
        false},
       ZDP_SET {
         const LrScheduleKind kind = with_context(f, [&] { return optim::parse_lr_schedule(v); });
         if (kind == LrScheduleKind::kConstant)
           c.lr_schedule = LrScheduleParams{};  // drops a --config scheduler's warmup too
         else
           c.lr_schedule.kind = kind;
       },
       ZDP_GET { return optim::lr_schedule_name(c.lr_schedule.kind); }},
      {{"--warmup-steps", "N",
        "Warmup steps of the schedule (0: none; otherwise at least 2, as DeepSpeed)", false},
       ZDP_SET {
         c.lr_schedule.warmup_num_steps = parse_int(v, f);
         ZDP_REQUIRE(c.lr_schedule.kind != LrScheduleKind::kConstant || c.lr_schedule.warmup_num_steps == 0,
                     "--warmup-steps needs a schedule: --lr-schedule warmup, warmup-decay, cosine or wsd (or "
                     "a scheduler in --config)");
       },
       ZDP_GET { return std::to_string(c.lr_schedule.warmup_num_steps); }},
      {{"--warmup-type", "TYPE", "Warmup curve: linear or log", false},
       ZDP_SET { c.lr_schedule.warmup_type = with_context(f, [&] { return optim::parse_warmup_type(v); }); },
       ZDP_GET { return optim::warmup_type_name(c.lr_schedule.warmup_type); }},
      {{"--min-lr", "X",
        "Floor of the schedule: where warmup starts and decay ends (cosine: where decay ends; wsd: both)",
        false},
       ZDP_SET { set_min_lr(c, parse_number(v, f)); }, ZDP_GET { return ""; }},
      field_flag<&TrainConfig::lr_schedule, &LrScheduleParams::total_num_steps>(
          {"--total-steps", "N", "Steps over which the schedule decays (0: --steps); wsd: its length T", false}),
      {{"--decay-steps", "N",
        "wsd: the decay tail's length D, the last D of the schedule's steps (steps T-D .. T-1; the last is at "
        "--min-lr); 0 (the default): no decay. Warmup + D must fit in T",
        false},
       ZDP_SET {
         c.lr_schedule.decay_num_steps = parse_int(v, f);
         ZDP_REQUIRE(c.lr_schedule.kind == LrScheduleKind::kWSD,
                     "--decay-steps needs --lr-schedule wsd (the {} schedule has no decay tail of its own length)",
                     optim::lr_schedule_name(c.lr_schedule.kind));
       },
       ZDP_GET {  // shown for wsd only: the other schedules take no --decay-steps
         return c.lr_schedule.kind == LrScheduleKind::kWSD ? std::to_string(c.lr_schedule.decay_num_steps) : "";
       }},
      {{"--decay-type", "TYPE", "wsd: the decay tail's shape: linear (the default), cosine or 1-sqrt", false},
       ZDP_SET {
         c.lr_schedule.decay_type = with_context(f, [&] { return optim::parse_decay_type(v); });
         ZDP_REQUIRE(c.lr_schedule.kind == LrScheduleKind::kWSD,
                     "--decay-type needs --lr-schedule wsd (the {} schedule's decay has a fixed shape)",
                     optim::lr_schedule_name(c.lr_schedule.kind));
       },
       ZDP_GET {
         return c.lr_schedule.kind == LrScheduleKind::kWSD ? optim::decay_type_name(c.lr_schedule.decay_type) : "";
       }},
      {{"--device", "DEV", "Device to compute on: cpu, cuda (the local rank's GPU) or cuda:N; on a GPU with --dtype bf16 or fp16", false},
       ZDP_SET { c.device = device::device_spec_name(device::parse_device_spec(v, f)); },
       ZDP_GET { return c.device; }},
      {{"--dtype", "TYPE", "Compute dtype: fp32, bf16 or fp16 (fp32 master weights when 16-bit)", false},
       ZDP_SET { c.precision.dtype = with_context(f, [&] { return parse_dtype(v); }); },
       ZDP_GET { return dtype_name(c.precision.dtype); }},
      {{"--reduce-dtype", "TYPE",
        "Dtype gradients are reduced in, the same at every stage: the compute dtype (default) or fp32; sums "
        "add in fp32 in rank order and round once, so stages agree bitwise",
        false},
       ZDP_SET { c.precision.reduce_dtype = with_context(f, [&] { return parse_dtype(v); }); },
       ZDP_GET { return c.precision.reduce_dtype ? dtype_name(*c.precision.reduce_dtype) : ""; }},
      field_flag<&TrainConfig::precision, &PrecisionSettings::fp32_grad_accum>(
          {"--fp32-grad-accum", "", "Accumulate micro-step gradients in fp32 under bf16/fp16", true}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::bf16_optimizer_states>(
          {"--bf16-optimizer-states", "",
           "Keep the optimizer's states (AdamW's m and v, the momentum) in bf16, rounded stochastically from --seed",
           true}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::bf16_master_weights>(
          {"--bf16-master-weights", "",
           "--dtype bf16 without fp32 master weights: the bf16 parameters updated, rounded stochastically from --seed",
           true}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::static_scale>(
          {"--loss-scale", "X", "fp16: static loss scale (0: dynamic)", false}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::initial_scale_power>(
          {"--initial-scale-power", "N", "fp16: dynamic loss scaling starts at 2^N", false}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::window>(
          {"--loss-scale-window", "N", "fp16: steps without overflow before the scale doubles", false}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::hysteresis>(
          {"--hysteresis", "N", "fp16: overflows tolerated before the scale halves", false}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::consecutive_hysteresis>(
          {"--consecutive-hysteresis", "", "fp16: restore the hysteresis after every step without overflow", true}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::min_scale>(
          {"--min-loss-scale", "X", "fp16: the dynamic scale never goes below this", false}),
      field_flag<&TrainConfig::precision, &PrecisionSettings::loss_scale, &LossScaleConfig::max_overflows_at_min_scale>(
          {"--max-overflows-at-min-scale", "N",
           "fp16: overflowing steps in a row at the minimum loss scale before the run stops with exit 1 (0: never)",
           false}),
      field_flag<&TrainConfig::skip_nonfinite>(
          {"--skip-nonfinite", "",
           "bf16/fp32: skip a step whose loss or gradient is NaN/Inf (weights and optimizer state untouched) "
           "instead of stopping with exit 1",
           true}),
      kZeroSettingRows,
      {{"--shard-group-size", "N|node|all",
        "Hybrid sharding (stages 1-3): shard within groups of N consecutive ranks (node: the ranks of each "
        "host) and replicate across groups (mics_shard_size; default all: one group of all ranks, full sharding)",
        false},
       ZDP_SET {
         const std::string s = to_lower(trim(v));
         if (s == "node" || s == "all") {
           c.zero.shard_group_size = s == "node" ? zero::ZeroSettings::kShardGroupNode : 0;
           return;
         }
         const int64_t n = parse_int(v, f);
         ZDP_REQUIRE(n >= 1, "{}: expected a positive number of ranks, 'node' or 'all', got '{}'", f, v);
         c.zero.shard_group_size = n;
       },
       ZDP_GET {
         return c.zero.shard_group_size == zero::ZeroSettings::kShardGroupNode ? std::string("node")
                : c.zero.shard_group_size == 0                          ? std::string("all")
                                                                   : std::to_string(c.zero.shard_group_size);
       }},
      field_flag<&TrainConfig::zero, &ZeroSettings::nvme_path>(
          {"--nvme-path", "DIR",
           "With an nvme offload: the directory (on a fast local disk) where each run makes its own directory of "
           "offload files, removed when the run ends (zero_optimization.offload_*.nvme_path)",
           false}),
      {{"--memory-budget", "BYTES",
        "Cap on what each rank holds, e.g. 8GB (10^9), 512MiB (2^20), 4G (2^30); over it: exit 3", false},
       ZDP_SET { c.memory_budget = parse_bytes(v, f); },
       ZDP_GET { return c.memory_budget ? std::to_string(*c.memory_budget) : ""; }},
      field_flag<&TrainConfig::metrics_path>(
          {"--metrics", "PATH", "Write per-step metrics (JSON Lines) here, from rank 0", false}),
      field_flag<&TrainConfig::log_csv_path>(
          {"--log-csv", "PATH",
           "Also write one CSV row per optimizer step here, from rank 0: step, tokens (trained so far), loss, "
           "grad_norm, lr, ms, val_loss, val_tokens (the last two on the steps an eval ran)",
           false}),
      field_flag<&TrainConfig::out_path>(
          {"--out", "PATH",
           "Write the trained weights here: a Llama as a Hugging Face model directory; GPT-2 as one F32 safetensors "
           "file (replaced atomically), or as a model directory when PATH ends in '/', is a directory, or --init was "
           "one (and PATH does not end in .safetensors). A model directory keeps every file that is not the model's "
           "own and gets the --init directory's tokenizer and generation files it lacks",
           false}),
      field_flag<&TrainConfig::overwrite_output_dir>(
          {"--overwrite-output-dir", "",
           "Write the --out model directory into a directory that holds files but no model (its files are kept)",
           true}),
      {{"--out-dtype", "DTYPE",
        "A model directory's tensors in --out: fp32, bf16 or fp16 (default: the --init directory's, else fp32)",
        false},
       ZDP_SET { c.out_dtype = with_context(f, [&] { return parse_dtype(v); }); }, ZDP_GET { return c.out_dtype ? dtype_name(*c.out_dtype) : ""; }},
      {{"--out-shard-size", "BYTES",
        "A model directory's largest safetensors shard in --out, e.g. 5GB (the default) or 500MiB", false},
       ZDP_SET { c.out_shard_size = parse_bytes(v, f); }, ZDP_GET { return std::to_string(c.out_shard_size); }},
      field_flag<&TrainConfig::save_dir>(
          {"--save-dir", "DIR", "Write sharded checkpoints to DIR/step-<n>/ (atomically; DIR/latest names the newest)",
           false}),
      field_flag<&TrainConfig::save_every>(
          {"--save-every", "N", "With --save-dir: a checkpoint every N steps, and at the end (0: at the end only)",
           false}),
      field_flag<&TrainConfig::keep>(
          {"--keep", "K", "With --save-dir: keep only the newest K checkpoints (0: all)", false}),
      field_flag<&TrainConfig::async_save>(
          {"--async-save", "",
           "With --save-dir: copy each checkpoint to host memory at the step boundary and write it in the background "
           "while training goes on (committed atomically at a later step boundary; DeepSpeed's "
           "checkpoint.writer.decoupled)",
           true}),
      field_flag<&TrainConfig::resume_path>(
          {"--resume", "PATH",
           "Continue from a checkpoint (DIR/step-<n>, or a --save-dir meaning its latest); --init is then optional",
           false}),
      {{"--seed", "S", "Seed of the data order with --shuffle on", false},
       ZDP_SET {
         c.seed = parse_uint(v, f);
         c.seed_set = true;
       },
       ZDP_GET { return std::to_string(c.seed); }},
      {{"--shuffle", "on|off",
        "off: the documented order (sequence q at token q*T); on: each epoch a permutation of the sequence "
        "windows drawn from --seed, the same at every world size and stage",
        false},
       ZDP_SET {
         c.shuffle = parse_bool(v, f);
         c.shuffle_set = true;
       },
       ZDP_GET { return c.shuffle ? "on" : "off"; }},
      field_flag<&TrainConfig::packing>(
          {"--packing", "",
           "Instruction data: pack consecutive examples into each sequence, each attending only to itself with "
           "positions from 0 (the same loss and gradients as each alone), instead of one padded example a sequence",
           true}),
      field_flag<&TrainConfig::log_every>({"--log-every", "N", "Print progress every N steps (0: never)", false}),
      field_flag<&TrainConfig::val_data_path>(
          {"--val-data", "PATH",
           "Validation tokens (a file, directory or glob, as --data): the mean loss over the first --eval-tokens of "
           "them, every --eval-every steps and after the last step, the same at every world size, stage and batch "
           "split; instruction data (its labels file beside it): the mean loss over its examples' targets",
           false}),
      field_flag<&TrainConfig::eval_every>(
          {"--eval-every", "N",
           "With --val-data: evaluate after every N steps, and after the last (0: after the last only)", false}),
      field_flag<&TrainConfig::eval_tokens>(
          {"--eval-tokens", "E",
           "With --val-data: evaluate floor(E/T) windows of --seq T tokens from its start (0: the first 1048576 "
           "tokens, or all its windows when it holds fewer)",
           false}),
      field_flag<&TrainConfig::comm_timeout>(
          {"--comm-timeout", "SECONDS",
           "A collective not done after this long ends the job (exit 1) naming it, the step and the ranks that had not "
           "arrived, instead of hanging (0: wait forever)",
           false}),
      {{"--collectives", "auto|flat|host-aware",
        "How reduce-scatters and all-gathers cross hosts: host-aware in two levels (within each host over shared "
        "memory, then one exchange per pair of hosts), flat over all ranks at once; the same bits either way. auto: "
        "host-aware where every host runs the same number of consecutive ranks",
        false},
       ZDP_SET {
         ZDP_REQUIRE(v == "auto" || v == "flat" || v == "host-aware", "{} must be auto, flat or host-aware, got '{}'", f,
                     v);
         c.collectives = std::string(v);
       },
       ZDP_GET { return c.collectives; }},
  });
  return table;
}

#undef ZDP_SET
#undef ZDP_GET

const FlagEntry& flag_entry(std::string_view flag) {
  for (const FlagEntry& e : flag_table())
    if (e.flag.name == flag) return e;
  throw UsageError(fmt::format("unknown flag '{}' for `zerodp train`", flag));
}

}  // namespace

std::span<const TrainFlag> train_flags() {
  static const std::vector<TrainFlag> flags = [] {
    std::vector<TrainFlag> out;
    for (const FlagEntry& e : flag_table()) out.push_back(e.flag);
    return out;
  }();
  return flags;
}

std::string flag_value(const TrainConfig& cfg, std::string_view flag) { return flag_entry(flag).value(cfg); }

void apply_flag(TrainConfig& cfg, std::string_view flag, std::string_view value) {
  flag_entry(flag).apply(cfg, flag, value);
}

ResolvedConfig resolve_config(std::span<const std::pair<std::string, std::string>> given) {
  for (const auto& [flag, value] : given) flag_entry(flag);  // unknown names fail first
  ResolvedConfig out;
  for (const auto& [flag, value] : given)
    if (flag == "--config") out.warnings = load_ds_config(out.config, value);
  for (const FlagEntry& e : flag_table()) {
    if (e.flag.name == "--config") continue;
    for (const auto& [flag, value] : given)
      if (flag == e.flag.name) e.apply(out.config, flag, value);
  }
  return out;
}

}  // namespace zerodp::train
