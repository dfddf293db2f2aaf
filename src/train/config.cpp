#include "train/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strings.h"
#include "device/select.h"

namespace zerodp::train {

using json = nlohmann::json;
using optim::LrScheduleKind;
using optim::LrScheduleParams;
using optim::OptimizerKind;
using optim::WarmupType;

namespace {

constexpr size_t kMaxDsConfigBytes = size_t{1} << 20;

// ---- text --------------------------------------------------------------------------------------


std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

// An integer, also written with an exponent when its value is whole ("5e8").
std::optional<int64_t> to_int(std::string_view s) {
  s = trim(s);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
  if (!digits.empty() && ec == std::errc() && end == digits.data() + digits.size()) return x;
  const std::optional<double> d = to_double(s);
  if (d && std::floor(*d) == *d && std::abs(*d) < 9.2e18) return static_cast<int64_t>(*d);
  return std::nullopt;
}

std::optional<bool> to_bool(std::string_view s) {
  const std::string v = to_lower(trim(s));
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  return std::nullopt;
}

// ---- flag values -------------------------------------------------------------------------------

int64_t flag_int(std::string_view flag, std::string_view v) {
  const std::optional<int64_t> x = to_int(v);
  ZDP_REQUIRE(x.has_value(), "{}: expected an integer, got '{}'", flag, v);
  return *x;
}

int flag_small_int(std::string_view flag, std::string_view v) {
  const int64_t x = flag_int(flag, v);
  ZDP_REQUIRE(x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
              "{}: {} is out of range", flag, x);
  return static_cast<int>(x);
}

uint64_t flag_uint(std::string_view flag, std::string_view v) {
  const std::string_view t = trim(v);
  uint64_t x = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  ZDP_REQUIRE(!t.empty() && ec == std::errc() && end == t.data() + t.size(),
              "{}: expected a non-negative integer, got '{}'", flag, v);
  return x;
}

double flag_number(std::string_view flag, std::string_view v) {
  const std::optional<double> x = to_double(v);
  ZDP_REQUIRE(x.has_value(), "{}: expected a number, got '{}'", flag, v);
  return *x;
}

bool flag_bool(std::string_view flag, std::string_view v) {
  const std::optional<bool> x = to_bool(v);
  ZDP_REQUIRE(x.has_value(), "{}: expected true or false, got '{}'", flag, v);
  return *x;
}

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
  void (*set)(TrainConfig&, std::string_view flag, std::string_view value);
  std::string (*get)(const TrainConfig&);
};

#define ZDP_SET [](TrainConfig & c, std::string_view f, std::string_view v)
#define ZDP_GET [](const TrainConfig& c) -> std::string

// The flags, in the order they are applied. --lr comes before --min-lr (the cosine floor is a
// ratio of it), --lr-schedule before the schedule's parameters.
const std::vector<FlagEntry>& flag_table() {
  static const std::vector<FlagEntry> table = {
      {{"--config", "PATH", "DeepSpeed-style JSON configuration; flags given here win over it", false},
       ZDP_SET { c.config_path = std::string(v); }, ZDP_GET { return c.config_path; }},
      {{"--init", "PATH", "Initial weights (safetensors, e.g. from `zerodp init`); required", false},
       ZDP_SET { c.init_path = std::string(v); }, ZDP_GET { return c.init_path; }},
      {{"--data", "PATH",
        "Training tokens: a token file (raw uint16, or llm.c layout with uint16 or uint32 tokens), a directory (its "
        "*.bin files) or a glob, the files read in sorted name order as one stream; required",
        false},
       ZDP_SET { c.data_path = std::string(v); }, ZDP_GET { return c.data_path; }},
      {{"--steps", "K", "Optimizer steps to run", false},
       ZDP_SET { c.steps = flag_int(f, v); }, ZDP_GET { return std::to_string(c.steps); }},
      {{"--micro-batch", "B", "Sequences per rank per micro-step (train_micro_batch_size_per_gpu)", false},
       ZDP_SET {
         c.micro_batch = flag_int(f, v);
         c.micro_batch_set = true;
       },
       ZDP_GET { return std::to_string(c.micro_batch); }},
      {{"--seq", "T", "Tokens per sequence (at most the model's context)", false},
       ZDP_SET { c.seq = flag_int(f, v); }, ZDP_GET { return std::to_string(c.seq); }},
      {{"--accum", "G", "Micro-steps accumulated per optimizer step (gradient_accumulation_steps)", false},
       ZDP_SET {
         c.accum = flag_int(f, v);
         c.accum_set = true;
       },
       ZDP_GET { return std::to_string(c.accum); }},
      {{"--train-batch-size", "N",
        "Global batch in sequences; must equal B x G x ranks (derives G or B when only one is given)", false},
       ZDP_SET { c.train_batch_size = flag_int(f, v); },
       ZDP_GET { return c.train_batch_size ? std::to_string(*c.train_batch_size) : ""; }},
      {{"--optimizer", "NAME", "AdamW or SGD", false},
       ZDP_SET { c.optimizer = with_context(f, [&] { return optim::parse_optimizer(v); }); },
       ZDP_GET { return optim::optimizer_name(c.optimizer); }},
      {{"--lr", "X", "Learning rate (the peak when a schedule is used)", false},
       ZDP_SET {
         c.lr = flag_number(f, v);
         c.lr_schedule.warmup_max_lr.reset();  // the schedule's peak follows the flag
       },
       ZDP_GET { return show(c.lr); }},
      {{"--beta1", "X", "AdamW beta1", false}, ZDP_SET { c.beta1 = flag_number(f, v); },
       ZDP_GET { return show(c.beta1); }},
      {{"--beta2", "X", "AdamW beta2", false}, ZDP_SET { c.beta2 = flag_number(f, v); },
       ZDP_GET { return show(c.beta2); }},
      {{"--eps", "X", "AdamW epsilon", false}, ZDP_SET { c.eps = flag_number(f, v); },
       ZDP_GET { return show(c.eps); }},
      {{"--weight-decay", "X",
        "Weight decay, on tensors of 2 or more dimensions only (decoupled for AdamW, L2 for SGD)", false},
       ZDP_SET { c.weight_decay = flag_number(f, v); }, ZDP_GET { return show(c.weight_decay); }},
      {{"--momentum", "X", "SGD momentum", false}, ZDP_SET { c.momentum = flag_number(f, v); },
       ZDP_GET { return show(c.momentum); }},
      {{"--dampening", "X", "SGD dampening", false}, ZDP_SET { c.dampening = flag_number(f, v); },
       ZDP_GET { return show(c.dampening); }},
      {{"--nesterov", "", "SGD: Nesterov momentum", true}, ZDP_SET { c.nesterov = flag_bool(f, v); },
       ZDP_GET { return show(c.nesterov); }},
      {{"--clip", "X", "Clip the global gradient norm to X (0: no clipping)", false},
       ZDP_SET { c.clip = flag_number(f, v); }, ZDP_GET { return show(c.clip); }},
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
         c.lr_schedule.warmup_num_steps = flag_int(f, v);
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
       ZDP_SET { set_min_lr(c, flag_number(f, v)); }, ZDP_GET { return ""; }},
      {{"--total-steps", "N", "Steps over which the schedule decays (0: --steps); wsd: its length T", false},
       ZDP_SET { c.lr_schedule.total_num_steps = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.lr_schedule.total_num_steps); }},
      {{"--decay-steps", "N",
        "wsd: the decay tail's length D, the last D of the schedule's steps (steps T-D .. T-1; the last is at "
        "--min-lr); 0 (the default): no decay. Warmup + D must fit in T",
        false},
       ZDP_SET {
         c.lr_schedule.decay_num_steps = flag_int(f, v);
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
      {{"--zero-stage", "S",
        "ZeRO stage: 0 (replicated), 1 (optimizer state), 2 (+gradients), 3 (+parameters)", false},
       ZDP_SET { c.zero_stage = flag_small_int(f, v); }, ZDP_GET { return std::to_string(c.zero_stage); }},
      {{"--device", "DEV", "Device to compute on: cpu, cuda (the local rank's GPU) or cuda:N; on a GPU with --dtype bf16 or fp16", false},
       ZDP_SET { c.device = device::device_spec_name(device::parse_device_spec(v, f)); },
       ZDP_GET { return c.device; }},
      {{"--dtype", "TYPE", "Compute dtype: fp32, bf16 or fp16 (fp32 master weights when 16-bit)", false},
       ZDP_SET { c.dtype = with_context(f, [&] { return parse_dtype(v); }); },
       ZDP_GET { return dtype_name(c.dtype); }},
      {{"--reduce-dtype", "TYPE",
        "Dtype gradients are reduced in, the same at every stage: the compute dtype (default) or fp32; sums "
        "add in fp32 in rank order and round once, so stages agree bitwise",
        false},
       ZDP_SET { c.reduce_dtype = with_context(f, [&] { return parse_dtype(v); }); },
       ZDP_GET { return c.reduce_dtype ? dtype_name(*c.reduce_dtype) : ""; }},
      {{"--fp32-grad-accum", "", "Accumulate micro-step gradients in fp32 under bf16/fp16", true},
       ZDP_SET { c.fp32_grad_accum = flag_bool(f, v); }, ZDP_GET { return show(c.fp32_grad_accum); }},
      {{"--loss-scale", "X", "fp16: static loss scale (0: dynamic)", false},
       ZDP_SET { c.loss_scale = flag_number(f, v); }, ZDP_GET { return show(c.loss_scale); }},
      {{"--initial-scale-power", "N", "fp16: dynamic loss scaling starts at 2^N", false},
       ZDP_SET { c.initial_scale_power = flag_small_int(f, v); },
       ZDP_GET { return std::to_string(c.initial_scale_power); }},
      {{"--loss-scale-window", "N", "fp16: steps without overflow before the scale doubles", false},
       ZDP_SET { c.loss_scale_window = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.loss_scale_window); }},
      {{"--hysteresis", "N", "fp16: overflows tolerated before the scale halves", false},
       ZDP_SET { c.hysteresis = flag_small_int(f, v); }, ZDP_GET { return std::to_string(c.hysteresis); }},
      {{"--consecutive-hysteresis", "", "fp16: restore the hysteresis after every step without overflow", true},
       ZDP_SET { c.consecutive_hysteresis = flag_bool(f, v); },
       ZDP_GET { return show(c.consecutive_hysteresis); }},
      {{"--min-loss-scale", "X", "fp16: the dynamic scale never goes below this", false},
       ZDP_SET { c.min_loss_scale = flag_number(f, v); }, ZDP_GET { return show(c.min_loss_scale); }},
      {{"--max-overflows-at-min-scale", "N",
        "fp16: overflowing steps in a row at the minimum loss scale before the run stops with exit 1 (0: never)",
        false},
       ZDP_SET { c.max_overflows_at_min_scale = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.max_overflows_at_min_scale); }},
      {{"--skip-nonfinite", "",
        "bf16/fp32: skip a step whose loss or gradient is NaN/Inf (weights and optimizer state untouched) "
        "instead of stopping with exit 1",
        true},
       ZDP_SET { c.skip_nonfinite = flag_bool(f, v); }, ZDP_GET { return show(c.skip_nonfinite); }},
      {{"--reduce-bucket-size", "N", "Elements per gradient reduction bucket", false},
       ZDP_SET { c.reduce_bucket_size = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.reduce_bucket_size); }},
      {{"--allgather-bucket-size", "N", "Elements per parameter all-gather bucket", false},
       ZDP_SET { c.allgather_bucket_size = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.allgather_bucket_size); }},
      {{"--overlap-comm", "", "Overlap gradient reduction with the backward pass", true},
       ZDP_SET { c.overlap_comm = flag_bool(f, v); }, ZDP_GET { return show(c.overlap_comm); }},
      {{"--contiguous-gradients", "", "Accepted for DeepSpeed compatibility: zerodp always keeps gradients in flat contiguous unit buffers", true},
       ZDP_SET { c.contiguous_gradients = flag_bool(f, v); },
       ZDP_GET { return show(c.contiguous_gradients); }},
      {{"--prefetch-bucket-size", "N",
        "Stage 3: elements of parameters fetched ahead (stage3_prefetch_bucket_size)", false},
       ZDP_SET { c.stage3_prefetch_bucket_size = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.stage3_prefetch_bucket_size); }},
      {{"--max-live-parameters", "N",
        "Stage 3: most gathered parameter elements alive at once (stage3_max_live_parameters)", false},
       ZDP_SET { c.stage3_max_live_parameters = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.stage3_max_live_parameters); }},
      {{"--param-persistence-threshold", "N",
        "Stage 3: units (blocks, embeddings) of fewer elements stay whole on every rank, never gathered (stage3_param_persistence_threshold; default 0: all sharded)", false},
       ZDP_SET { c.stage3_param_persistence_threshold = flag_int(f, v); },
       ZDP_GET { return std::to_string(c.stage3_param_persistence_threshold); }},
      {{"--reshard-after-forward", "",
        "Stage 3: free gathered parameters after each unit's forward (gather again for backward)", true},
       ZDP_SET { c.reshard_after_forward = flag_bool(f, v); },
       ZDP_GET { return show(c.reshard_after_forward); }},
      {{"--shard-group-size", "N|node|all",
        "Hybrid sharding (stages 1-3): shard within groups of N consecutive ranks (node: the ranks of each "
        "host) and replicate across groups (mics_shard_size; default all: one group of all ranks, full sharding)",
        false},
       ZDP_SET {
         const std::string s = to_lower(trim(v));
         if (s == "node" || s == "all") {
           c.shard_group_size = s == "node" ? TrainConfig::kShardGroupNode : 0;
           return;
         }
         c.shard_group_size = flag_int(f, v);
         ZDP_REQUIRE(c.shard_group_size >= 1, "{}: expected a positive number of ranks, 'node' or 'all', got '{}'", f,
                     v);
       },
       ZDP_GET {
         return c.shard_group_size == TrainConfig::kShardGroupNode ? std::string("node")
                : c.shard_group_size == 0                          ? std::string("all")
                                                                   : std::to_string(c.shard_group_size);
       }},
      {{"--activation-checkpointing", "",
        "Keep only each block's input and recompute its activations during backward (less act memory)", true},
       ZDP_SET { c.activation_checkpointing = flag_bool(f, v); },
       ZDP_GET { return show(c.activation_checkpointing); }},
      {{"--offload-optimizer", "none|cpu|nvme",
        "ZeRO-Offload (stages 1-3): fp32 master weights and optimizer states in host memory, the update run "
        "there (nvme: in files under --nvme-path, read and written around each sub-group's update); same "
        "results, less device memory",
        false},
       ZDP_SET { c.offload_optimizer = plan::parse_offload(v, f); },
       ZDP_GET { return plan::offload_name(c.offload_optimizer); }},
      {{"--sub-group-size", "N",
        "With --offload-optimizer: shard elements updated per host round trip, the size of the host gradient "
        "staging buffer (zero_optimization.sub_group_size)",
        false},
       ZDP_SET { c.sub_group_size = flag_int(f, v); }, ZDP_GET { return std::to_string(c.sub_group_size); }},
      {{"--offload-param", "none|cpu|nvme",
        "ZeRO-Infinity's parameter offload (stage 3): the parameter shards in host memory (nvme: in files under "
        "--nvme-path, with --offload-optimizer too), copied up for each gather; same results, less device memory",
        false},
       ZDP_SET { c.offload_param = plan::parse_offload(v, f); },
       ZDP_GET { return plan::offload_name(c.offload_param); }},
      {{"--nvme-path", "DIR",
        "With an nvme offload: the directory (on a fast local disk) where each run makes its own directory of "
        "offload files, removed when the run ends (zero_optimization.offload_*.nvme_path)",
        false},
       ZDP_SET { c.nvme_path = std::string(v); }, ZDP_GET { return c.nvme_path; }},
      {{"--memory-budget", "BYTES",
        "Cap on what each rank holds, e.g. 8GB (10^9), 512MiB (2^20), 4G (2^30); over it: exit 3", false},
       ZDP_SET { c.memory_budget = parse_bytes(v, f); },
       ZDP_GET { return c.memory_budget ? std::to_string(*c.memory_budget) : ""; }},
      {{"--metrics", "PATH", "Write per-step metrics (JSON Lines) here, from rank 0", false},
       ZDP_SET { c.metrics_path = std::string(v); }, ZDP_GET { return c.metrics_path; }},
      {{"--log-csv", "PATH",
        "Also write one CSV row per optimizer step here, from rank 0: step, tokens (trained so far), loss, "
        "grad_norm, lr, ms, val_loss, val_tokens (the last two on the steps an eval ran)",
        false},
       ZDP_SET { c.log_csv_path = std::string(v); }, ZDP_GET { return c.log_csv_path; }},
      {{"--out", "PATH", "Write the trained weights (F32 safetensors, atomically) here", false},
       ZDP_SET { c.out_path = std::string(v); }, ZDP_GET { return c.out_path; }},
      {{"--save-dir", "DIR", "Write sharded checkpoints to DIR/step-<n>/ (atomically; DIR/latest names the newest)",
        false},
       ZDP_SET { c.save_dir = std::string(v); }, ZDP_GET { return c.save_dir; }},
      {{"--save-every", "N", "With --save-dir: a checkpoint every N steps, and at the end (0: at the end only)",
        false},
       ZDP_SET { c.save_every = flag_int(f, v); }, ZDP_GET { return std::to_string(c.save_every); }},
      {{"--keep", "K", "With --save-dir: keep only the newest K checkpoints (0: all)", false},
       ZDP_SET { c.keep = flag_int(f, v); }, ZDP_GET { return std::to_string(c.keep); }},
      {{"--resume", "PATH",
        "Continue from a checkpoint (DIR/step-<n>, or a --save-dir meaning its latest); --init is then optional",
        false},
       ZDP_SET { c.resume_path = std::string(v); }, ZDP_GET { return c.resume_path; }},
      {{"--seed", "S", "Seed of the data order with --shuffle on", false},
       ZDP_SET {
         c.seed = flag_uint(f, v);
         c.seed_set = true;
       },
       ZDP_GET { return std::to_string(c.seed); }},
      {{"--shuffle", "on|off",
        "off: the contract's order (sequence q at token q*T); on: each epoch a permutation of the sequence "
        "windows drawn from --seed, the same at every world size and stage",
        false},
       ZDP_SET {
         c.shuffle = flag_bool(f, v);
         c.shuffle_set = true;
       },
       ZDP_GET { return c.shuffle ? "on" : "off"; }},
      {{"--log-every", "N", "Print progress every N steps (0: never)", false},
       ZDP_SET { c.log_every = flag_int(f, v); }, ZDP_GET { return std::to_string(c.log_every); }},
      {{"--val-data", "PATH",
        "Validation tokens (a file, directory or glob, as --data): the mean loss over the first --eval-tokens of "
        "them, every --eval-every steps and after the last step, the same at every world size, stage and batch split",
        false},
       ZDP_SET { c.val_data_path = std::string(v); }, ZDP_GET { return c.val_data_path; }},
      {{"--eval-every", "N", "With --val-data: evaluate after every N steps, and after the last (0: after the last only)",
        false},
       ZDP_SET { c.eval_every = flag_int(f, v); }, ZDP_GET { return std::to_string(c.eval_every); }},
      {{"--eval-tokens", "E",
        "With --val-data: evaluate floor(E/T) windows of --seq T tokens from its start (0: the first 1048576 tokens, "
        "or all its windows when it holds fewer)",
        false},
       ZDP_SET { c.eval_tokens = flag_int(f, v); }, ZDP_GET { return std::to_string(c.eval_tokens); }},
      {{"--comm-timeout", "SECONDS",
        "A collective not done after this long ends the job (exit 1) naming it, the step and the ranks that had not "
        "arrived, instead of hanging (0: wait forever)",
        false},
       ZDP_SET { c.comm_timeout = flag_number(f, v); }, ZDP_GET { return show(c.comm_timeout); }},
      {{"--inject-overflow-step", "S",
        "Testing aid: make a gradient Inf at optimizer step S (-1: never)", false},
       ZDP_SET { c.inject_overflow_step = flag_small_int(f, v); },
       ZDP_GET { return std::to_string(c.inject_overflow_step); }},
      {{"--inject-overflow-rank", "R",
        "Testing aid: the rank whose gradient --inject-overflow-step makes Inf", false},
       ZDP_SET { c.inject_overflow_rank = flag_small_int(f, v); },
       ZDP_GET { return std::to_string(c.inject_overflow_rank); }},
      {{"--inject-overflow-unit", "U",
        "Testing aid: the unit (0: embeddings, 1+i: block i) whose gradient --inject-overflow-step makes Inf",
        false},
       ZDP_SET { c.inject_overflow_unit = flag_small_int(f, v); },
       ZDP_GET { return std::to_string(c.inject_overflow_unit); }},
  };
  return table;
}

#undef ZDP_SET
#undef ZDP_GET

const FlagEntry& flag_entry(std::string_view flag) {
  for (const FlagEntry& e : flag_table())
    if (e.flag.name == flag) return e;
  throw UsageError(fmt::format("unknown flag '{}' for `zerodp train`", flag));
}

// ---- JSON --------------------------------------------------------------------------------------

bool is_auto(const json& v) { return v.is_string() && v.get_ref<const std::string&>() == "auto"; }

// Reads typed values out of the DeepSpeed JSON; every failure names the file and the key path.
class DsReader {
 public:
  DsReader(std::string_view source, std::vector<std::string>* warnings)
      : source_(source), warnings_(warnings) {}

  [[noreturn]] void fail(const std::string& path, std::string_view expected, const json& got) const {
    throw UsageError(fmt::format("{}: {} must be {}, got {}", source_, path, expected, describe_json(got)));
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw UsageError(fmt::format("{}: {}", source_, message));
  }
  // A key zerodp does not read. One that would change what the run does, when `v` asks for it, is
  // refused (so that nobody trains believing they have it); a tuning key of DeepSpeed's own is
  // ignored with a warning saying why; anything else is ignored with a warning. Keys come from the
  // file and may be anything: they are echoed through describe_text.
  void unknown(const std::string& path, const json& v) const {
    if (check_unsupported(path, v)) return;
    if (const char* hint = tuning_hint(path)) {
      warnings_->push_back(fmt::format("{}: ignoring '{}': {}", source_, path, hint));
      return;
    }
    warnings_->push_back(fmt::format("{}: ignoring unknown key '{}'", source_, describe_text(path, 80)));
  }
  // A key zerodp reads and has nothing to do with here: accepted, with a warning saying why.
  void ignored(const std::string& path, std::string_view why) const {
    warnings_->push_back(fmt::format("{}: ignoring '{}': {}", source_, path, why));
  }
  // Refuses `path` when its value asks for something zerodp does not do; true when the key is one
  // of those (asked for or not).
  bool check_unsupported(const std::string& path, const json& v) const;
  static const char* tuning_hint(const std::string& path);

  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "a number", v);
    return v.get<double>();
  }
  double non_negative(const json& v, const std::string& path) const {
    const double x = number(v, path);
    if (!(x >= 0)) fail(path, "a number >= 0", v);
    return x;
  }
  int64_t integer(const json& v, const std::string& path, int64_t min = 0) const {
    const std::string what = fmt::format("an integer >= {}", min);
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}) fail(path, what, v);
      const int64_t x = v.get<int64_t>();
      if (x < min) fail(path, what, v);
      return x;
    }
    if (v.is_number_float()) {  // 5e8 and the like
      const double d = v.get<double>();
      if (std::floor(d) == d && d >= static_cast<double>(min) && d < 9.2e18) return static_cast<int64_t>(d);
    }
    fail(path, what, v);
  }
  bool boolean(const json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, "true or false", v);
    return v.get<bool>();
  }
  const std::string& string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "a string", v);
    return v.get_ref<const std::string&>();
  }
  const json& object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "an object", v);
    return v;
  }
  DType dtype(const json& v, const std::string& path) const {
    const std::string& s = string(v, path);
    try {
      return parse_dtype(s);
    } catch (const UsageError&) {
      fail(path, "\"fp32\", \"bf16\" or \"fp16\"", v);
    }
  }

 private:
  std::string source_;
  std::vector<std::string>* warnings_;
};

// ---- DeepSpeed keys zerodp does not implement ----------------------------------------------------
//
// Two kinds. Keys that change what a run computes or where its state lives are refused when their
// value asks for the feature (an offload to "none", a disabled section, a factor of 1 ask for
// nothing and pass). Keys that only tune how DeepSpeed itself runs (buffer sizes, logging,
// profilers) are ignored with a warning saying so. Anything else unknown is also ignored with a
// warning (a newer DeepSpeed key, or a typo).

// Whether a value asks for a feature: true, a number other than 0, an object that is "enabled"
// (or, for offload sections, has a device other than "none"), a non-empty string other than "none".
bool asks_for(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) {
    const std::string t = to_lower(v.get_ref<const std::string&>());
    return !t.empty() && t != "none" && t != "auto" && t != "false";
  }
  if (v.is_object()) {
    if (const auto it = v.find("device"); it != v.end()) return asks_for(*it);
    if (const auto it = v.find("enabled"); it != v.end()) return asks_for(*it);
    return !v.empty();
  }
  return false;
}

struct UnsupportedKey {
  const char* path;
  bool (*asks)(const json&);
  const char* what;
};

const UnsupportedKey kUnsupportedKeys[] = {
    {"zero_optimization.zero_hpz_partition_size", [](const json& v) { return v.is_number() && v.get<double>() > 1; },
     "ZeRO++ hpZ (a secondary copy of stage 3's parameters within groups, the optimizer still sharded over all "
     "ranks) is not implemented: for hybrid sharding of every state within groups use mics_shard_size or "
     "--shard-group-size"},
    {"zero_optimization.mics_hierarchical_params_gather", asks_for, "MiCS is not implemented yet"},
    {"zero_optimization.zero_quantized_weights", asks_for, "quantized weight communication (ZeRO++) changes the numbers; not implemented"},
    {"zero_optimization.zero_quantized_nontrainable_weights", asks_for, "quantized weights (ZeRO++) are not implemented"},
    {"zero_optimization.zero_quantized_gradients", asks_for, "quantized gradient communication (ZeRO++) changes the numbers; not implemented"},
    {"zero_optimization.zeropp_loco_param", asks_for, "ZeRO++ LoCo is not implemented"},
    {"zero_optimization.load_from_fp32_weights", [](const json& v) { return v.is_boolean() && !v.get<bool>(); },
     "false (resume masters from 16-bit weights) is not supported: zerodp checkpoints always resume from fp32"},
    {"fp16.auto_cast", asks_for, "auto_cast (casting module inputs) is not implemented: zerodp's compute dtype is --dtype"},
    {"fp16.fp16_master_weights_and_grads", asks_for, "fp16 master weights are not supported: masters are fp32"},
    {"bf16.immediate_grad_update", asks_for, "immediate_grad_update is not implemented"},
    {"amp", asks_for, "NVIDIA apex AMP is not supported: use --dtype bf16 or fp16"},
    {"prescale_gradients", asks_for, "gradient prescaling changes the numbers; not implemented"},
    {"gradient_predivide_factor", [](const json& v) { return v.is_number() && v.get<double>() != 1.0; },
     "gradient pre-division changes the numbers; not implemented"},
    {"sparse_gradients", asks_for, "sparse gradients are not implemented"},
    {"elasticity", asks_for, "elastic training (batch sizes chosen by DeepSpeed) is not implemented"},
    {"autotuning", asks_for, "autotuning is not implemented"},
    {"compression_training", asks_for, "compression training changes the model; not implemented"},
    {"quantize_training", asks_for, "quantization-aware training is not implemented"},
    {"data_efficiency", asks_for, "data efficiency (curriculum, data routing) changes the data; not implemented"},
    {"curriculum_learning", asks_for, "curriculum learning changes the data; not implemented"},
    {"progressive_layer_drop", asks_for, "progressive layer drop changes the model; not implemented"},
    {"pipeline", asks_for, "pipeline parallelism is not implemented"},
    {"tensor_parallel", [](const json& v) {
       const auto it = v.is_object() ? v.find("autotp_size") : v.end();
       return it != v.end() && it->is_number() && it->get<double>() > 1;
     },
     "tensor parallelism is not implemented"},
    {"activation_checkpointing.partition_activations", asks_for,
     "partitioned activations are not implemented (--activation-checkpointing keeps block inputs whole)"},
    {"activation_checkpointing.cpu_checkpointing", asks_for, "activation offload is not implemented"},
};

// Keys that only tune DeepSpeed's own implementation (buffers, logging, profilers): nothing for
// zerodp to do, and nothing the run's results depend on.
struct TuningKey {
  const char* path;
  const char* hint;
};
const TuningKey kTuningKeys[] = {
    {"zero_optimization.cpu_offload_use_pin_memory", "pinned memory speeds GPU copies; the CPU device has none"},
    {"zero_optimization.round_robin_gradients", "a DeepSpeed scheduling choice; results do not depend on it"},
    {"zero_optimization.reduce_scatter", "zerodp chooses its collectives; results do not depend on it"},
    {"zero_optimization.elastic_checkpoint", "zerodp checkpoints always reshard to any world size"},
    {"zero_optimization.stage3_max_reuse_distance", "a DeepSpeed cache setting"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "--out always writes consolidated fp32 weights"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", "--out always writes consolidated fp32 weights"},
    {"zero_optimization.ignore_unused_parameters", "GPT-2 uses every parameter"},
    {"zero_optimization.legacy_stage1", "a DeepSpeed implementation choice"},
    {"zero_optimization.memory_efficient_linear", "a DeepSpeed implementation choice"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", "a DeepSpeed implementation choice"},
    {"zero_optimization.log_trace_cache_warnings", "a DeepSpeed logging setting"},
    {"zero_optimization.use_all_reduce_for_fetch_params", "a DeepSpeed implementation choice"},
    {"activation_checkpointing.contiguous_memory_optimization", "a DeepSpeed memory layout setting"},
    {"activation_checkpointing.number_checkpoints", "zerodp checkpoints every block with --activation-checkpointing"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", "a DeepSpeed synchronisation setting"},
    {"activation_checkpointing.profile", "a DeepSpeed profiling setting"},
    {"wall_clock_breakdown", "zerodp's metrics always carry ms and comm_wait_ms"},
    {"memory_breakdown", "zerodp's metrics always carry the memory ledger"},
    {"flops_profiler", "a DeepSpeed profiler"},
    {"tensorboard", "a DeepSpeed monitor; use --metrics"},
    {"wandb", "a DeepSpeed monitor; use --metrics"},
    {"csv_monitor", "a DeepSpeed monitor; use --metrics"},
    {"comet", "a DeepSpeed monitor; use --metrics"},
    {"comms_logger", "a DeepSpeed logging setting; the traffic ledger is in the metrics"},
    {"dump_state", "a DeepSpeed debugging setting"},
    {"timers", "a DeepSpeed timing setting"},
    {"aio", "DeepSpeed's NVMe I/O settings; zerodp's io_uring queue and 4 KiB direct I/O are its own"},
    {"checkpoint", "DeepSpeed's checkpoint I/O settings; see docs/checkpoints.md"},
    {"zero_allow_untested_optimizer", "zerodp's optimizers are its own"},
    {"zero_force_ds_cpu_optimizer", "zerodp's optimizers are its own"},
    {"disable_allgather", "a DeepSpeed implementation choice"},
    {"seq_parallel_communication_data_type", "zerodp has no sequence parallelism"},
    {"eigenvalue", "a DeepSpeed measurement"},
    {"nebula", "a DeepSpeed checkpoint service"},
    {"optimizer.params.foreach", "an implementation choice of torch's optimizers"},
    {"optimizer.params.fused", "an implementation choice of torch's optimizers"},
    {"optimizer.params.capturable", "an implementation choice of torch's optimizers"},
};

const UnsupportedKey* find_unsupported(const std::string& path) {
  for (const UnsupportedKey& k : kUnsupportedKeys)
    if (path == k.path) return &k;
  return nullptr;
}

const char* DsReader::tuning_hint(const std::string& path) {
  for (const TuningKey& k : kTuningKeys) {
    const std::string_view p = k.path;
    if (path == p || (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '.'))
      return k.hint;
  }
  return nullptr;
}

bool DsReader::check_unsupported(const std::string& path, const json& v) const {
  const UnsupportedKey* k = find_unsupported(path);
  if (k == nullptr) return false;
  if (k->asks(v)) fail(fmt::format("{} is {}: {}", path, describe_json(v), k->what));
  return true;
}

void read_optimizer(const DsReader& r, const json& sec, TrainConfig& cfg) {
  r.object(sec, "optimizer");
  const auto type_it = sec.find("type");
  if (type_it == sec.end()) r.fail("optimizer.type is required (AdamW, Adam or SGD)");
  const TrainConfig before = cfg;
  if (!is_auto(*type_it)) {
    const std::string type = to_lower(r.string(*type_it, "optimizer.type"));
    if (type == "adamw") {
      cfg.optimizer = OptimizerKind::kAdamW;
    } else if (type == "adam") {  // DeepSpeed's Adam is AdamW unless adam_w_mode is false
      cfg.optimizer = OptimizerKind::kAdamW;
    } else if (type == "sgd") {
      cfg.optimizer = OptimizerKind::kSGD;
    } else {
      r.fail("optimizer.type", "AdamW, Adam or SGD", *type_it);
    }
    // Parameters the section leaves out take the defaults of DeepSpeed's optimizers (FusedAdam's
    // for Adam/AdamW, torch.optim.SGD's for SGD): weight decay 0 in both.
    cfg.lr = 1e-3;
    cfg.beta1 = 0.9;
    cfg.beta2 = 0.999;
    cfg.eps = 1e-8;
    cfg.weight_decay = 0.0;
    cfg.momentum = 0.0;
    cfg.dampening = 0.0;
    cfg.nesterov = false;
  }
  const bool sgd = cfg.optimizer == OptimizerKind::kSGD;
  for (const auto& [key, v] : sec.items()) {
    if (key == "type") continue;
    if (key != "params") {
      r.unknown("optimizer." + key, v);
      continue;
    }
    for (const auto& [name, pv] : r.object(v, "optimizer.params").items()) {
      const std::string path = "optimizer.params." + name;
      const bool a = is_auto(pv);
      if (name == "lr") {
        cfg.lr = a ? before.lr : r.non_negative(pv, path);
      } else if (name == "weight_decay") {
        cfg.weight_decay = a ? before.weight_decay : r.non_negative(pv, path);
      } else if (!sgd && name == "betas") {
        if (a) {
          cfg.beta1 = before.beta1;
          cfg.beta2 = before.beta2;
          continue;
        }
        if (!pv.is_array() || pv.size() != 2 || !pv[0].is_number() || !pv[1].is_number())
          r.fail(path, "an array of 2 numbers", pv);
        cfg.beta1 = pv[0].get<double>();
        cfg.beta2 = pv[1].get<double>();
      } else if (!sgd && name == "eps") {
        cfg.eps = a ? before.eps : r.non_negative(pv, path);
      } else if (!sgd && name == "adam_w_mode") {
        if (!a && !r.boolean(pv, path))
          r.fail(path + " false (Adam with L2 weight decay) is not supported: zerodp's AdamW decays "
                        "decoupled; use \"type\": \"AdamW\"");
      } else if (!sgd && name == "bias_correction") {
        if (!a && !r.boolean(pv, path)) r.fail(path + " false is not supported (AdamW always corrects)");
      } else if (!sgd && name == "amsgrad") {
        if (!a && r.boolean(pv, path)) r.fail(path + " true is not supported");
      } else if (!sgd && name == "torch_adam") {
        if (!a) r.boolean(pv, path);  // an implementation choice of DeepSpeed's; same math
      } else if (sgd && name == "momentum") {
        cfg.momentum = a ? before.momentum : r.non_negative(pv, path);
      } else if (sgd && name == "dampening") {
        cfg.dampening = a ? before.dampening : r.number(pv, path);
      } else if (sgd && name == "nesterov") {
        cfg.nesterov = a ? before.nesterov : r.boolean(pv, path);
      } else {
        r.unknown(path, pv);
      }
    }
  }
}

void read_scheduler(const DsReader& r, const json& sec, TrainConfig& cfg) {
  r.object(sec, "scheduler");
  const auto type_it = sec.find("type");
  if (type_it == sec.end())
    r.fail("scheduler.type is required (WarmupLR, WarmupDecayLR, WarmupCosineLR or zerodp's WSD)");
  const LrScheduleParams before = cfg.lr_schedule;
  if (!is_auto(*type_it)) {
    const std::string& type = r.string(*type_it, "scheduler.type");
    const std::string t = to_lower(type);
    LrScheduleParams p;  // DeepSpeed's defaults for its schedulers
    p.warmup_num_steps = 1000;
    p.warmup_type = WarmupType::kLog;
    p.cos_min_ratio = 1e-4;
    if (t == "warmuplr")
      p.kind = LrScheduleKind::kWarmupLR;
    else if (t == "warmupdecaylr")
      p.kind = LrScheduleKind::kWarmupDecayLR;
    else if (t == "warmupcosinelr")
      p.kind = LrScheduleKind::kWarmupCosineLR;
    else if (t == "wsd")
      p.kind = LrScheduleKind::kWSD;  // zerodp's: DeepSpeed has no warmup-stable-decay scheduler
    else
      r.fail("scheduler.type", "WarmupLR, WarmupDecayLR, WarmupCosineLR or WSD", *type_it);
    cfg.lr_schedule = p;
  }
  const LrScheduleKind kind = cfg.lr_schedule.kind;
  const bool cosine = kind == LrScheduleKind::kWarmupCosineLR;
  const bool wsd = kind == LrScheduleKind::kWSD;
  const bool decays = kind == LrScheduleKind::kWarmupDecayLR || cosine || wsd;
  LrScheduleParams& p = cfg.lr_schedule;
  for (const auto& [key, v] : sec.items()) {
    if (key == "type") continue;
    if (key != "params") {
      r.unknown("scheduler." + key, v);
      continue;
    }
    for (const auto& [name, pv] : r.object(v, "scheduler.params").items()) {
      const std::string path = "scheduler.params." + name;
      const bool a = is_auto(pv);
      if (name == "warmup_num_steps") {
        p.warmup_num_steps = a ? before.warmup_num_steps : r.integer(pv, path, 0);
      } else if (name == "warmup_type") {
        if (a) {
          p.warmup_type = before.warmup_type;
          continue;
        }
        const std::string w = to_lower(r.string(pv, path));
        if (w == "log")
          p.warmup_type = WarmupType::kLog;
        else if (w == "linear")
          p.warmup_type = WarmupType::kLinear;
        else
          r.fail(path, "\"log\" or \"linear\"", pv);
      } else if (decays && name == "total_num_steps") {
        p.total_num_steps = a ? before.total_num_steps : r.integer(pv, path, 1);
      } else if (!cosine && name == "warmup_min_lr") {
        p.warmup_min_lr = a ? before.warmup_min_lr : r.non_negative(pv, path);
      } else if (!cosine && name == "warmup_max_lr") {
        if (a)
          p.warmup_max_lr = before.warmup_max_lr;
        else
          p.warmup_max_lr = r.non_negative(pv, path);
      } else if (cosine && name == "warmup_min_ratio") {
        p.warmup_min_ratio = a ? before.warmup_min_ratio : r.non_negative(pv, path);
      } else if (cosine && name == "cos_min_ratio") {
        p.cos_min_ratio = a ? before.cos_min_ratio : r.non_negative(pv, path);
      } else if (wsd && name == "decay_num_steps") {
        p.decay_num_steps = a ? before.decay_num_steps : r.integer(pv, path, 0);
      } else if (wsd && name == "decay_type") {
        if (a) {
          p.decay_type = before.decay_type;
          continue;
        }
        const std::string d = r.string(pv, path);
        try {
          p.decay_type = optim::parse_decay_type(d);
        } catch (const UsageError&) {
          r.fail(path, "\"linear\", \"cosine\" or \"1-sqrt\"", pv);
        }
      } else {
        r.unknown(path, pv);
      }
    }
  }
}

// zero_optimization.offload_optimizer: where the optimizer lives (cpu, or nvme under nvme_path with
// buffer_count I/O slots); the knobs of DeepSpeed's pinned-memory and NVMe pipelines are accepted and
// ignored; a partial offload (ratio < 1) is refused.
// The keys both offload sections share: "device" (read into `where`) and "pin_memory". Returns false
// for any other key.
// nvme_path of either offload section: zerodp has one --nvme-path, so two sections must agree.
void read_nvme_path(const DsReader& r, const json& v, const std::string& path, TrainConfig& cfg) {
  const std::string p = r.string(v, path);
  if (!cfg.nvme_path.empty() && cfg.nvme_path != p)
    r.fail(path + " differs from the other offload section's nvme_path: zerodp puts every NVMe offload file in "
           "one directory (--nvme-path)");
  cfg.nvme_path = p;
}

bool read_offload_common(const DsReader& r, const std::string& key, const json& v, const std::string& path,
                         plan::Offload& where) {
  if (key == "device") {
    const std::string d = to_lower(r.string(v, path));
    if (d != "none" && d != "cpu" && d != "nvme") r.fail(path, "\"cpu\", \"nvme\" or \"none\"", v);
    where = plan::parse_offload(d, path);
    return true;
  }
  if (key == "pin_memory") {
    r.boolean(v, path);
    r.ignored(path, "pinned memory speeds copies to and from a GPU; the CPU device's host memory is plain RAM");
    return true;
  }
  return false;
}

void read_offload_optimizer(const DsReader& r, const json& sec, TrainConfig& cfg) {
  const std::string base = "zero_optimization.offload_optimizer";
  for (const auto& [key, v] : r.object(sec, base).items()) {
    const std::string path = base + "." + key;
    if (is_auto(v) || read_offload_common(r, key, v, path, cfg.offload_optimizer)) continue;
    if (key == "buffer_count") {
      cfg.optimizer_buffer_count = r.integer(v, path, 1);
    } else if (key == "nvme_path") {
      read_nvme_path(r, v, path, cfg);
    } else if (key == "pipeline_read" || key == "pipeline_write") {
      r.boolean(v, path);
      r.ignored(path, "zerodp always overlaps the NVMe reads and writes with the update (buffer_count slots)");
    } else if (key == "fast_init") {
      r.ignored(path, "a DeepSpeed initialisation setting");
    } else if (key == "ratio") {
      if (r.number(v, path) != 1.0) r.fail(path + " other than 1 (a partial offload) is not implemented");
    } else {
      r.unknown(path, v);
    }
  }
}

// zero_optimization.offload_param: where stage 3's parameter shards live; with nvme, how many host
// buffers the gathers read through (buffer_count) and how many shard elements stay in host memory
// (max_in_cpu). DeepSpeed's buffer_size and pin_memory are accepted and ignored.
void read_offload_param(const DsReader& r, const json& sec, TrainConfig& cfg) {
  const std::string base = "zero_optimization.offload_param";
  for (const auto& [key, v] : r.object(sec, base).items()) {
    const std::string path = base + "." + key;
    if (is_auto(v) || read_offload_common(r, key, v, path, cfg.offload_param)) continue;
    if (key == "buffer_count") {
      cfg.param_buffer_count = r.integer(v, path, 1);
    } else if (key == "buffer_size") {
      r.integer(v, path, 0);
      r.ignored(path, "the size of DeepSpeed's NVMe buffers; zerodp sizes each buffer to the largest shard");
    } else if (key == "max_in_cpu") {
      cfg.param_max_in_cpu = r.integer(v, path, 0);
    } else if (key == "nvme_path") {
      read_nvme_path(r, v, path, cfg);
    } else {
      r.unknown(path, v);
    }
  }
}

void read_zero(const DsReader& r, const json& sec, TrainConfig& cfg) {
  r.object(sec, "zero_optimization");
  for (const auto& [key, v] : sec.items()) {
    const std::string path = "zero_optimization." + key;
    const bool a = is_auto(v);
    if (key == "stage") {
      if (a) continue;
      const int64_t s = r.integer(v, path, 0);
      if (s > 3) r.fail(path, "0, 1, 2 or 3", v);
      cfg.zero_stage = static_cast<int>(s);
    } else if (key == "reduce_bucket_size") {
      if (!a) cfg.reduce_bucket_size = r.integer(v, path, 1);
    } else if (key == "allgather_bucket_size") {
      if (!a) cfg.allgather_bucket_size = r.integer(v, path, 1);
    } else if (key == "overlap_comm") {
      if (!a) cfg.overlap_comm = r.boolean(v, path);
    } else if (key == "contiguous_gradients") {
      if (!a) cfg.contiguous_gradients = r.boolean(v, path);
    } else if (key == "stage3_prefetch_bucket_size") {
      if (!a) cfg.stage3_prefetch_bucket_size = r.integer(v, path, 1);
    } else if (key == "stage3_max_live_parameters") {
      if (!a) cfg.stage3_max_live_parameters = r.integer(v, path, 1);
    } else if (key == "stage3_param_persistence_threshold") {
      if (!a) cfg.stage3_param_persistence_threshold = r.integer(v, path, 0);
    } else if (key == "reshard_after_forward") {  // zerodp's own key (FSDP's notion)
      if (!a) cfg.reshard_after_forward = r.boolean(v, path);
    } else if (key == "offload_optimizer") {
      if (!a) read_offload_optimizer(r, v, cfg);
    } else if (key == "cpu_offload") {  // DeepSpeed's older spelling of offload_optimizer.device "cpu"
      if (!a) cfg.offload_optimizer = r.boolean(v, path) ? plan::Offload::kCpu : plan::Offload::kNone;
    } else if (key == "offload_param") {
      if (!a) read_offload_param(r, v, cfg);
    } else if (key == "cpu_offload_params") {  // DeepSpeed's older spelling of offload_param.device "cpu"
      if (!a) cfg.offload_param = r.boolean(v, path) ? plan::Offload::kCpu : plan::Offload::kNone;
    } else if (key == "sub_group_size") {
      if (!a) cfg.sub_group_size = r.integer(v, path, 1);
    } else if (key == "mics_shard_size") {  // MiCS: every state sharded within groups of this size
      if (!a) {
        const int64_t n = r.integer(v, path, -1);
        cfg.shard_group_size = n > 0 ? n : 0;  // DeepSpeed's -1 (and 0): off
      }
    } else {
      r.unknown(path, v);
    }
  }
}

// Returns the section's "enabled" (nullopt when absent or "auto").
std::optional<bool> read_precision(const DsReader& r, const json& sec, const std::string& name,
                                   TrainConfig& cfg) {
  r.object(sec, name);
  std::optional<bool> enabled;
  const bool fp16 = name == "fp16";
  for (const auto& [key, v] : sec.items()) {
    const std::string path = name + "." + key;
    const bool a = is_auto(v);
    if (key == "enabled") {
      if (!a) enabled = r.boolean(v, path);
    } else if (fp16 && key == "loss_scale") {
      if (!a) cfg.loss_scale = r.non_negative(v, path);
    } else if (fp16 && key == "initial_scale_power") {
      if (!a) {
        const int64_t p = r.integer(v, path, 0);
        if (p > 63) r.fail(path, "an integer in 0..63", v);
        cfg.initial_scale_power = static_cast<int>(p);
      }
    } else if (fp16 && key == "loss_scale_window") {
      if (!a) cfg.loss_scale_window = r.integer(v, path, 1);
    } else if (fp16 && key == "hysteresis") {
      if (!a) {
        const int64_t h = r.integer(v, path, 1);
        if (h > 1'000'000) r.fail(path, "an integer in 1..1000000", v);
        cfg.hysteresis = static_cast<int>(h);
      }
    } else if (fp16 && key == "consecutive_hysteresis") {
      if (!a) cfg.consecutive_hysteresis = r.boolean(v, path);
    } else if (fp16 && key == "min_loss_scale") {
      if (!a) {
        const double m = r.number(v, path);
        if (!(m > 0)) r.fail(path, "a number > 0", v);
        cfg.min_loss_scale = m;
      }
    } else {
      r.unknown(path, v);
    }
  }
  return enabled;
}

}  // namespace

// ---- DeepSpeed JSON --------------------------------------------------------------------------------

std::vector<std::string> apply_ds_config(TrainConfig& cfg, std::string_view json_text,
                                         std::string_view source) {
  std::vector<std::string> warnings;
  const DsReader r(source, &warnings);
  // DeepSpeed configs nest a few levels; anything deeper or larger than this is not one.
  JsonLimits limits;
  limits.max_depth = 16;
  limits.max_bytes = kMaxDsConfigBytes;
  const json root = parse_json(json_text, source, limits);
  if (!root.is_object()) r.fail(fmt::format("the top level must be an object, got {}", describe_json(root)));

  std::optional<bool> bf16, fp16;
  for (const auto& [key, v] : root.items()) {
    const bool a = is_auto(v);
    if (key == "train_micro_batch_size_per_gpu") {
      if (a) continue;
      cfg.micro_batch = r.integer(v, key, 1);
      cfg.micro_batch_set = true;
    } else if (key == "gradient_accumulation_steps") {
      if (a) continue;
      cfg.accum = r.integer(v, key, 1);
      cfg.accum_set = true;
    } else if (key == "train_batch_size") {
      if (!a) cfg.train_batch_size = r.integer(v, key, 1);
    } else if (key == "gradient_clipping") {
      if (!a) cfg.clip = r.non_negative(v, key);
    } else if (key == "steps_per_print") {
      if (!a) cfg.log_every = r.integer(v, key, 0);
    } else if (key == "optimizer") {
      read_optimizer(r, v, cfg);
    } else if (key == "scheduler") {
      read_scheduler(r, v, cfg);
    } else if (key == "zero_optimization") {
      read_zero(r, v, cfg);
    } else if (key == "bf16" || key == "bfloat16") {
      bf16 = read_precision(r, v, key, cfg);
    } else if (key == "fp16") {
      fp16 = read_precision(r, v, key, cfg);
    } else if (key == "communication_data_type") {
      if (!a) cfg.reduce_dtype = r.dtype(v, key);
    } else if (key == "activation_checkpointing") {
      // DeepSpeed's section configures its checkpointing API; zerodp's own is --activation-checkpointing.
      for (const auto& [name, sv] : r.object(v, key).items()) r.unknown(key + "." + name, sv);
    } else if (key == "data_types") {
      for (const auto& [name, dv] : r.object(v, key).items()) {
        if (name == "grad_accum_dtype") {
          if (!is_auto(dv)) cfg.fp32_grad_accum = r.dtype(dv, "data_types.grad_accum_dtype") == DType::kF32;
        } else {
          r.unknown("data_types." + name, dv);
        }
      }
    } else {
      r.unknown(key, v);
    }
  }
  if (bf16.value_or(false) && fp16.value_or(false))
    r.fail("bf16.enabled and fp16.enabled are both true; enable at most one");
  if (bf16.value_or(false)) {
    cfg.dtype = DType::kBF16;
  } else if (fp16.value_or(false)) {
    cfg.dtype = DType::kF16;
  } else if (bf16.has_value() || fp16.has_value()) {
    cfg.dtype = DType::kF32;  // the file speaks about precision and enables neither
  }
  return warnings;
}

std::vector<std::string> load_ds_config(TrainConfig& cfg, const std::string& path) {
  // A regular file of bounded size (a FIFO or /dev/zero is refused before anything is read).
  const std::string text = read_small_file(path, kMaxDsConfigBytes);
  std::vector<std::string> warnings = apply_ds_config(cfg, text, path);
  cfg.config_path = path;
  return warnings;
}

// ---- flags ---------------------------------------------------------------------------------------

std::span<const TrainFlag> train_flags() {
  static const std::vector<TrainFlag> flags = [] {
    std::vector<TrainFlag> out;
    for (const FlagEntry& e : flag_table()) out.push_back(e.flag);
    return out;
  }();
  return flags;
}

std::string flag_value(const TrainConfig& cfg, std::string_view flag) { return flag_entry(flag).get(cfg); }

void apply_flag(TrainConfig& cfg, std::string_view flag, std::string_view value) {
  flag_entry(flag).set(cfg, flag, value);
}

ResolvedConfig resolve_config(std::span<const std::pair<std::string, std::string>> given) {
  for (const auto& [flag, value] : given) flag_entry(flag);  // unknown names fail first
  ResolvedConfig out;
  for (const auto& [flag, value] : given)
    if (flag == "--config") out.warnings = load_ds_config(out.config, value);
  for (const FlagEntry& e : flag_table()) {
    if (e.flag.name == "--config") continue;
    for (const auto& [flag, value] : given)
      if (flag == e.flag.name) e.set(out.config, flag, value);
  }
  return out;
}

uint64_t parse_bytes(std::string_view text, std::string_view what) {
  const std::string_view t = trim(text);
  size_t split = t.size();
  while (split > 0 && std::isalpha(static_cast<unsigned char>(t[split - 1]))) --split;
  const std::optional<double> number = to_double(t.substr(0, split));
  const std::string unit = to_lower(t.substr(split));
  struct Unit {
    const char* name;
    long double bytes;
  };
  static const Unit units[] = {
      {"", 1},          {"b", 1},
      {"kb", 1e3L},     {"mb", 1e6L},      {"gb", 1e9L},      {"tb", 1e12L},
      {"kib", 0x1p10L}, {"mib", 0x1p20L},  {"gib", 0x1p30L},  {"tib", 0x1p40L},
      {"k", 0x1p10L},   {"m", 0x1p20L},    {"g", 0x1p30L},    {"t", 0x1p40L},
  };
  const Unit* u = nullptr;
  for (const Unit& candidate : units)
    if (unit == candidate.name) u = &candidate;
  ZDP_REQUIRE(number.has_value() && u != nullptr,
              "{}: expected a byte count like 8GB, 512MiB, 4G or 1000000, got '{}'", what, text);
  const long double bytes = std::floor(static_cast<long double>(*number) * u->bytes);
  ZDP_REQUIRE(bytes >= 1 && bytes < 0x1p64L, "{}: {} is not a byte count between 1 and 2^64", what, text);
  return static_cast<uint64_t>(bytes);
}

// ---- TrainConfig -----------------------------------------------------------------------------------

void TrainConfig::finalize(int world_size) {
  ZDP_REQUIRE(world_size >= 1, "the world size must be >= 1, got {}", world_size);
  if (train_batch_size && *train_batch_size > 0) {
    const int64_t tbs = *train_batch_size, w = world_size;
    auto derive = [&](int64_t known, const std::string& known_desc, const char* derived_name) {
      // known·w may not fit (a huge value from the JSON): then it cannot divide tbs either.
      const CheckedSize per_step = CheckedSize(known) * w;
      ZDP_REQUIRE(known > 0 && per_step.ok() && tbs % per_step.value() == 0,
                  "train_batch_size {} is not divisible by {} x world size {}: cannot derive {}", tbs,
                  known_desc, w, derived_name);
      return tbs / per_step.value();
    };
    if (micro_batch_set && !accum_set) {
      accum = derive(micro_batch, fmt::format("micro_batch {}", micro_batch),
                     "--accum (gradient_accumulation_steps)");
    } else if (!micro_batch_set && accum_set) {
      micro_batch = derive(accum, fmt::format("accum {}", accum),
                           "--micro-batch (train_micro_batch_size_per_gpu)");
    } else if (!micro_batch_set && !accum_set) {
      accum = 1;
      micro_batch = derive(1, "accum 1", "--micro-batch (train_micro_batch_size_per_gpu)");
    }
  }
  validate(world_size);
}

void TrainConfig::validate(int world_size) const {
  ZDP_REQUIRE(world_size >= 1, "the world size must be >= 1, got {}", world_size);
  ZDP_REQUIRE(!init_path.empty() || !resume_path.empty(),
              "--init is required: the initial weights (see `zerodp init`), unless --resume continues a checkpoint");
  ZDP_REQUIRE(save_every >= 0, "--save-every must be >= 0, got {}", save_every);
  ZDP_REQUIRE(keep >= 0 && keep <= 1'000'000, "--keep must be in [0, 1000000], got {}", keep);
  ZDP_REQUIRE(!save_dir.empty() || (save_every == 0 && keep == 0),
              "--save-every and --keep need --save-dir (where the checkpoints go)");
  ZDP_REQUIRE(!data_path.empty(), "--data is required: the token file (see `zerodp tokenize`)");
  ZDP_REQUIRE(steps > 0 && steps <= kMaxSteps, "--steps must be in [1, 2^40], got {}", steps);
  ZDP_REQUIRE(micro_batch > 0 && micro_batch <= kMaxMicroBatch,
              "--micro-batch (train_micro_batch_size_per_gpu) must be in [1, {}], got {}", kMaxMicroBatch,
              micro_batch);
  ZDP_REQUIRE(seq > 0 && seq <= kMaxSeq, "--seq must be in [1, {}], got {}", kMaxSeq, seq);
  ZDP_REQUIRE(micro_batch * seq <= kMaxTokensPerMicroBatch,
              "--micro-batch {} x --seq {} = {} tokens per micro-batch, over the {} allowed", micro_batch, seq,
              micro_batch * seq, kMaxTokensPerMicroBatch);
  ZDP_REQUIRE(accum > 0 && accum <= kMaxAccum, "--accum (gradient_accumulation_steps) must be in [1, {}], got {}",
              kMaxAccum, accum);
  ZDP_REQUIRE(world_size <= (1 << 20), "at most 2^20 ranks, got {}", world_size);
  // The loader indexes sequences by step·G·W·B (data/loader.h): it must fit in 64 bits.
  const CheckedSize sequences = CheckedSize(steps) * accum * world_size * micro_batch;
  ZDP_REQUIRE(sequences.within(int64_t{1} << 62),
              "--steps {} x --accum {} x {} ranks x --micro-batch {} sequences is over 2^62", steps, accum,
              world_size, micro_batch);
  if (train_batch_size) {
    const int64_t product = micro_batch * accum * world_size;  // < 2^60 by the bounds above
    ZDP_REQUIRE(*train_batch_size == product,
                "train_batch_size {} != micro_batch {} x accum {} x world size {} = {}",
                *train_batch_size, micro_batch, accum, world_size, product);
  }
  auto finite_at_least_0 = [](double x) { return std::isfinite(x) && x >= 0; };
  ZDP_REQUIRE(finite_at_least_0(lr), "--lr (optimizer.params.lr) must be a finite number >= 0, got {}", lr);
  ZDP_REQUIRE(beta1 >= 0 && beta1 < 1, "--beta1 (optimizer.params.betas[0]) must be in [0, 1), got {}", beta1);
  ZDP_REQUIRE(beta2 >= 0 && beta2 < 1, "--beta2 (optimizer.params.betas[1]) must be in [0, 1), got {}", beta2);
  ZDP_REQUIRE(finite_at_least_0(eps), "--eps (optimizer.params.eps) must be a finite number >= 0, got {}", eps);
  ZDP_REQUIRE(finite_at_least_0(weight_decay),
              "--weight-decay (optimizer.params.weight_decay) must be a finite number >= 0, got {}",
              weight_decay);
  ZDP_REQUIRE(finite_at_least_0(momentum), "--momentum (optimizer.params.momentum) must be >= 0, got {}",
              momentum);
  ZDP_REQUIRE(std::isfinite(dampening), "--dampening (optimizer.params.dampening) must be finite, got {}",
              dampening);
  if (optimizer == OptimizerKind::kSGD && nesterov)
    ZDP_REQUIRE(momentum > 0 && dampening == 0,
                "--nesterov needs --momentum > 0 and --dampening 0, got momentum {} and dampening {}",
                momentum, dampening);
  ZDP_REQUIRE(finite_at_least_0(clip), "--clip (gradient_clipping) must be a finite number >= 0, got {}", clip);
  ZDP_REQUIRE(zero_stage >= 0 && zero_stage <= 3,
              "--zero-stage (zero_optimization.stage) must be 0, 1, 2 or 3, got {}", zero_stage);
  ZDP_REQUIRE(grad_reduce_dtype() == dtype || grad_reduce_dtype() == DType::kF32,
              "--reduce-dtype (communication_data_type) must be the compute dtype ({}) or fp32, got {}",
              dtype_name(dtype), dtype_name(grad_reduce_dtype()));
  ZDP_REQUIRE(finite_at_least_0(loss_scale), "--loss-scale (fp16.loss_scale) must be >= 0, got {}", loss_scale);
  ZDP_REQUIRE(initial_scale_power >= 0 && initial_scale_power <= 63,
              "--initial-scale-power (fp16.initial_scale_power) must be in 0..63, got {}",
              initial_scale_power);
  ZDP_REQUIRE(loss_scale_window >= 1 && loss_scale_window <= std::numeric_limits<int>::max(),
              "--loss-scale-window (fp16.loss_scale_window) must be in [1, 2^31 - 1], got {}", loss_scale_window);
  ZDP_REQUIRE(max_overflows_at_min_scale >= 0 && max_overflows_at_min_scale <= std::numeric_limits<int>::max(),
              "--max-overflows-at-min-scale must be in [0, 2^31 - 1], got {}", max_overflows_at_min_scale);
  ZDP_REQUIRE(hysteresis >= 1, "--hysteresis (fp16.hysteresis) must be >= 1, got {}", hysteresis);
  ZDP_REQUIRE(std::isfinite(min_loss_scale) && min_loss_scale > 0,
              "--min-loss-scale (fp16.min_loss_scale) must be > 0, got {}", min_loss_scale);
  ZDP_REQUIRE(reduce_bucket_size > 0,
              "--reduce-bucket-size (zero_optimization.reduce_bucket_size) must be > 0, got {}",
              reduce_bucket_size);
  ZDP_REQUIRE(allgather_bucket_size > 0,
              "--allgather-bucket-size (zero_optimization.allgather_bucket_size) must be > 0, got {}",
              allgather_bucket_size);
  ZDP_REQUIRE(stage3_prefetch_bucket_size > 0,
              "--prefetch-bucket-size (zero_optimization.stage3_prefetch_bucket_size) must be > 0, got {}",
              stage3_prefetch_bucket_size);
  ZDP_REQUIRE(stage3_max_live_parameters > 0,
              "--max-live-parameters (zero_optimization.stage3_max_live_parameters) must be > 0, got {}",
              stage3_max_live_parameters);
  ZDP_REQUIRE(stage3_param_persistence_threshold >= 0,
              "--param-persistence-threshold (zero_optimization.stage3_param_persistence_threshold) "
              "must be >= 0, got {}",
              stage3_param_persistence_threshold);
  ZDP_REQUIRE(offload_optimizer != plan::Offload::kNvme || !nvme_path.empty(),
              "--offload-optimizer (zero_optimization.offload_optimizer.device) nvme needs --nvme-path DIR "
              "(zero_optimization.offload_optimizer.nvme_path): where the offload files go");
  ZDP_REQUIRE(optimizer_buffer_count >= 1 && optimizer_buffer_count <= 64,
              "zero_optimization.offload_optimizer.buffer_count must be in 1..64, got {}", optimizer_buffer_count);
  ZDP_REQUIRE(shard_group_size == 0 || zero_stage >= 1,
              "--shard-group-size (zero_optimization.mics_shard_size) needs ZeRO stage 1, 2 or 3: stage 0 shards "
              "nothing (--zero-stage {} asked)",
              zero_stage);
  ZDP_REQUIRE(shard_group_size <= 0 || world_size % shard_group_size == 0,
              "--shard-group-size (zero_optimization.mics_shard_size) {} does not divide the {} rank{}: hybrid "
              "sharding needs whole groups",
              shard_group_size, world_size, world_size == 1 ? "" : "s");
  ZDP_REQUIRE(param_buffer_count >= 1 && param_buffer_count <= 64,
              "zero_optimization.offload_param.buffer_count must be in 1..64, got {}", param_buffer_count);
  ZDP_REQUIRE(param_max_in_cpu >= 0, "zero_optimization.offload_param.max_in_cpu must be >= 0, got {}",
              param_max_in_cpu);
  ZDP_REQUIRE(offload_optimizer == plan::Offload::kNone || zero_stage >= 1,
              "--offload-optimizer (zero_optimization.offload_optimizer.device) {} needs ZeRO stage 1, 2 or 3: the "
              "optimizer is only offloaded where it is sharded (--zero-stage {} asked)",
              plan::offload_name(offload_optimizer), zero_stage);
  ZDP_REQUIRE(offload_param != plan::Offload::kNvme || offload_optimizer != plan::Offload::kNone,
              "--offload-param (zero_optimization.offload_param.device) nvme needs --offload-optimizer cpu or nvme "
              "too: the offloaded update writes the parameter shards from host memory");
  ZDP_REQUIRE(offload_param != plan::Offload::kNvme || !nvme_path.empty(),
              "--offload-param (zero_optimization.offload_param.device) nvme needs --nvme-path DIR "
              "(zero_optimization.offload_param.nvme_path): where the offload files go");
  ZDP_REQUIRE(offload_param == plan::Offload::kNone || zero_stage == 3,
              "--offload-param (zero_optimization.offload_param.device) {} needs ZeRO stage 3: only stage 3 shards "
              "the parameters (--zero-stage {} asked)",
              plan::offload_name(offload_param), zero_stage);
  ZDP_REQUIRE(sub_group_size >= 1, "--sub-group-size (zero_optimization.sub_group_size) must be >= 1, got {}",
              sub_group_size);
  ZDP_REQUIRE(!memory_budget || *memory_budget > 0, "--memory-budget must be > 0");
  ZDP_REQUIRE(comm_timeout >= 0 && comm_timeout <= 86400 * 7,
              "--comm-timeout must be in [0, 604800] seconds (0: no watchdog), got {}", comm_timeout);
  ZDP_REQUIRE(log_every >= 0, "--log-every (steps_per_print) must be >= 0, got {}", log_every);
  ZDP_REQUIRE(eval_every >= 0 && eval_every <= kMaxSteps, "--eval-every must be in [0, 2^40], got {}", eval_every);
  ZDP_REQUIRE(eval_tokens >= 0 && eval_tokens <= (int64_t{1} << 50), "--eval-tokens must be in [0, 2^50], got {}",
              eval_tokens);
  ZDP_REQUIRE(!val_data_path.empty() || (eval_every == 0 && eval_tokens == 0),
              "--eval-every and --eval-tokens need --val-data (the validation tokens)");
  ZDP_REQUIRE(log_csv_path.empty() || (log_csv_path != metrics_path && log_csv_path != out_path),
              "--log-csv '{}' names the same file as --metrics or --out: give it a path of its own", log_csv_path);
  ZDP_REQUIRE(inject_overflow_step >= -1, "--inject-overflow-step must be >= -1, got {}", inject_overflow_step);
  ZDP_REQUIRE(inject_overflow_rank >= 0 && inject_overflow_rank < world_size,
              "--inject-overflow-rank must be a rank in 0..{}, got {}", world_size - 1, inject_overflow_rank);
  ZDP_REQUIRE(inject_overflow_unit >= 0, "--inject-overflow-unit must be >= 0, got {}", inject_overflow_unit);
  make_lr_schedule();  // its own checks
}

optim::OptimizerSpec TrainConfig::optimizer_spec() const {
  optim::OptimizerSpec s;
  s.kind = optimizer;
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.eps = eps;
  s.weight_decay = weight_decay;
  s.momentum = momentum;
  s.dampening = dampening;
  s.nesterov = nesterov;
  return s;
}

optim::LrSchedule TrainConfig::make_lr_schedule() const { return optim::LrSchedule(lr_schedule, lr, steps); }

json TrainConfig::to_json() const {
  auto opt_int = [](const std::optional<int64_t>& x) { return x ? json(*x) : json(nullptr); };
  json optimizer_json;
  if (optimizer == OptimizerKind::kAdamW) {
    optimizer_json = {{"type", optim::optimizer_name(optimizer)},
                      {"lr", lr},
                      {"betas", {beta1, beta2}},
                      {"eps", eps},
                      {"weight_decay", weight_decay}};
  } else {
    optimizer_json = {{"type", optim::optimizer_name(optimizer)},
                      {"lr", lr},
                      {"momentum", momentum},
                      {"dampening", dampening},
                      {"nesterov", nesterov},
                      {"weight_decay", weight_decay}};
  }
  const LrScheduleParams& p = lr_schedule;
  json schedule = {{"type", optim::lr_schedule_name(p.kind)}};
  if (p.kind != LrScheduleKind::kConstant) {
    schedule["warmup_num_steps"] = p.warmup_num_steps;
    schedule["warmup_type"] = optim::warmup_type_name(p.warmup_type);
    schedule["total_num_steps"] = p.total_num_steps > 0 ? p.total_num_steps : steps;
    if (p.kind == LrScheduleKind::kWarmupCosineLR) {
      schedule["warmup_min_ratio"] = p.warmup_min_ratio;
      schedule["cos_min_ratio"] = p.cos_min_ratio;
    } else {
      schedule["warmup_min_lr"] = p.warmup_min_lr;
      schedule["warmup_max_lr"] = p.warmup_max_lr.value_or(lr);
    }
    if (p.kind == LrScheduleKind::kWSD) {
      schedule["decay_num_steps"] = p.decay_num_steps;
      schedule["decay_type"] = optim::decay_type_name(p.decay_type);
    }
  }
  return json{
      {"init", init_path},
      {"data", data_path},
      {"metrics", metrics_path},
      {"log_csv", log_csv_path},
      {"out", out_path},
      {"config", config_path},
      {"save_dir", save_dir},
      {"save_every", save_every},
      {"keep", keep},
      {"resume", resume_path},
      {"steps", steps},
      {"micro_batch", micro_batch},
      {"seq", seq},
      {"accum", accum},
      {"train_batch_size", opt_int(train_batch_size)},
      {"optimizer", optimizer_json},
      {"clip", clip},
      {"lr_schedule", schedule},
      {"dtype", dtype_name(dtype)},
      {"reduce_dtype", dtype_name(grad_reduce_dtype())},
      {"fp32_grad_accum", fp32_grad_accum},
      {"activation_checkpointing", activation_checkpointing},
      {"fp16",
       {{"loss_scale", loss_scale},
        {"initial_scale_power", initial_scale_power},
        {"loss_scale_window", loss_scale_window},
        {"hysteresis", hysteresis},
        {"consecutive_hysteresis", consecutive_hysteresis},
        {"min_loss_scale", min_loss_scale},
        {"max_overflows_at_min_scale", max_overflows_at_min_scale}}},
      {"skip_nonfinite", skip_nonfinite},
      {"zero",
       {{"stage", zero_stage},
        {"reduce_bucket_size", reduce_bucket_size},
        {"allgather_bucket_size", allgather_bucket_size},
        {"overlap_comm", overlap_comm},
        {"contiguous_gradients", contiguous_gradients},
        {"stage3_prefetch_bucket_size", stage3_prefetch_bucket_size},
        {"stage3_max_live_parameters", stage3_max_live_parameters},
        {"stage3_param_persistence_threshold", stage3_param_persistence_threshold},
        {"reshard_after_forward", reshard_after_forward},
        {"shard_group_size", shard_group_size == kShardGroupNode ? json("node") : json(shard_group_size)},
        {"comm_timeout", comm_timeout},
        {"offload_optimizer", plan::offload_name(offload_optimizer)},
        {"sub_group_size", sub_group_size},
        {"offload_optimizer_buffer_count", optimizer_buffer_count},
        {"offload_param", plan::offload_name(offload_param)},
        {"offload_param_buffer_count", param_buffer_count},
        {"offload_param_max_in_cpu", param_max_in_cpu},
        {"nvme_path", nvme_path}}},
      {"memory_budget", memory_budget ? json(*memory_budget) : json(nullptr)},
      {"device", device},
      {"seed", seed},
      {"shuffle", shuffle},
      {"log_every", log_every},
      {"eval", {{"val_data", val_data_path}, {"eval_every", eval_every}, {"eval_tokens", eval_tokens}}},
      {"inject_overflow", {{"step", inject_overflow_step}, {"rank", inject_overflow_rank}, {"unit", inject_overflow_unit}}},
  };
}

}  // namespace zerodp::train
