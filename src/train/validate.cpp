// finalize() and validate(): the checks of a resolved TrainConfig once the world size is known.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/error.h"
#include "train/train_config.h"

namespace zerodp::train {

using optim::OptimizerKind;

void TrainConfig::finalize(int world_size) {
  resolve_batch(world_size);
  validate(world_size);
}

void TrainConfig::resolve_batch(int world_size) {
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
}

// The checks, by section of the settings. Each rule is checked here and nowhere else; its message
// names the flag and the DeepSpeed key that set it.
void TrainConfig::validate(int world_size) const {
  ZDP_REQUIRE(world_size >= 1, "the world size must be >= 1, got {}", world_size);
  validate_files_and_batch(world_size);
  validate_optimizer();
  validate_precision();
  validate_zero(world_size);
  validate_run(world_size);
  make_lr_schedule();  // its own checks
}

void TrainConfig::validate_files_and_batch(int world_size) const {
  ZDP_REQUIRE(!init_path.empty() || !resume_path.empty(),
              "--init is required: the initial weights (see `zerodp init`), unless --resume continues a checkpoint");
  ZDP_REQUIRE(save_every >= 0, "--save-every must be >= 0, got {}", save_every);
  ZDP_REQUIRE(keep >= 0 && keep <= 1'000'000, "--keep must be in [0, 1000000], got {}", keep);
  ZDP_REQUIRE(!save_dir.empty() || (save_every == 0 && keep == 0),
              "--save-every and --keep need --save-dir (where the checkpoints go)");
  ZDP_REQUIRE(!async_save || !save_dir.empty(),
              "--async-save (or the --config key checkpoint.writer.decoupled) needs --save-dir: it writes the "
              "checkpoints of --save-dir in the background");
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
}

void TrainConfig::validate_optimizer() const {
  auto finite_at_least_0 = [](double x) { return std::isfinite(x) && x >= 0; };
  const optim::OptimizerSpec& o = optimizer;
  ZDP_REQUIRE(finite_at_least_0(lr), "--lr (optimizer.params.lr) must be a finite number >= 0, got {}", lr);
  ZDP_REQUIRE(o.beta1 >= 0 && o.beta1 < 1, "--beta1 (optimizer.params.betas[0]) must be in [0, 1), got {}", o.beta1);
  ZDP_REQUIRE(o.beta2 >= 0 && o.beta2 < 1, "--beta2 (optimizer.params.betas[1]) must be in [0, 1), got {}", o.beta2);
  ZDP_REQUIRE(finite_at_least_0(o.eps), "--eps (optimizer.params.eps) must be a finite number >= 0, got {}", o.eps);
  ZDP_REQUIRE(finite_at_least_0(o.weight_decay),
              "--weight-decay (optimizer.params.weight_decay) must be a finite number >= 0, got {}",
              o.weight_decay);
  ZDP_REQUIRE(finite_at_least_0(o.momentum), "--momentum (optimizer.params.momentum) must be >= 0, got {}",
              o.momentum);
  ZDP_REQUIRE(std::isfinite(o.dampening), "--dampening (optimizer.params.dampening) must be finite, got {}",
              o.dampening);
  if (o.kind == OptimizerKind::kSGD && o.nesterov)
    ZDP_REQUIRE(o.momentum > 0 && o.dampening == 0,
                "--nesterov needs --momentum > 0 and --dampening 0, got momentum {} and dampening {}",
                o.momentum, o.dampening);
  ZDP_REQUIRE(finite_at_least_0(adam_lr), "--adam-lr (optimizer.params.adam_lr) must be a finite number >= 0, got {}",
              adam_lr);
  if (o.kind == OptimizerKind::kMuon) {
    ZDP_REQUIRE(o.momentum < 1, "--momentum (optimizer.params.momentum) must be in [0, 1) for Muon, got {}",
                o.momentum);
    ZDP_REQUIRE(o.dampening == 0, "--dampening (optimizer.params.dampening) is SGD's; Muon has none, got {}",
                o.dampening);
    ZDP_REQUIRE(adam_lr == 0 || lr > 0, "--adam-lr {} needs --lr > 0 (a schedule moves it in proportion to --lr)",
                adam_lr);
    ZDP_REQUIRE(zero.offload_optimizer == zero::Offload::kNone,
                "--optimizer Muon with --offload-optimizer (zero_optimization.offload_optimizer.device) {} is not "
                "supported: Muon orthogonalises each weight matrix whole on the device",
                zero::offload_name(zero.offload_optimizer));
  } else {
    ZDP_REQUIRE(adam_lr == 0, "--adam-lr (optimizer.params.adam_lr) is Muon's; --optimizer is {}",
                optim::optimizer_name(o.kind));
  }
  ZDP_REQUIRE(finite_at_least_0(clip), "--clip (gradient_clipping) must be a finite number >= 0, got {}", clip);
  ZDP_REQUIRE(!precision.bf16_master_weights || precision.dtype == DType::kBF16,
              "--bf16-master-weights (bf16.bf16_master_weights_and_grads) needs --dtype bf16, got --dtype {}",
              dtype_name(precision.dtype));
  ZDP_REQUIRE(!precision.bf16_master_weights || zero.offload_optimizer == zero::Offload::kNone,
              "--bf16-master-weights (bf16.bf16_master_weights_and_grads) with --offload-optimizer "
              "(zero_optimization.offload_optimizer.device) {} is not supported: the offloaded update keeps fp32 "
              "masters", zero::offload_name(zero.offload_optimizer));
  ZDP_REQUIRE(!precision.bf16_optimizer_states || zero.offload_optimizer == zero::Offload::kNone,
              "--bf16-optimizer-states (bf16.bf16_optimizer_states) with --offload-optimizer "
              "(zero_optimization.offload_optimizer.device) {} is not supported: the offloaded update keeps fp32 states",
              zero::offload_name(zero.offload_optimizer));
}

void TrainConfig::validate_precision() const {
  auto finite_at_least_0 = [](double x) { return std::isfinite(x) && x >= 0; };
  const DType dtype = precision.dtype, reduce = precision.grad_reduce_dtype();
  ZDP_REQUIRE(reduce == dtype || reduce == DType::kF32,
              "--reduce-dtype (communication_data_type) must be the compute dtype ({}) or fp32, got {}",
              dtype_name(dtype), dtype_name(reduce));
  const zero::LossScaleConfig& s = precision.loss_scale;
  ZDP_REQUIRE(finite_at_least_0(s.static_scale), "--loss-scale (fp16.loss_scale) must be >= 0, got {}", s.static_scale);
  ZDP_REQUIRE(s.initial_scale_power >= 0 && s.initial_scale_power <= 63,
              "--initial-scale-power (fp16.initial_scale_power) must be in 0..63, got {}", s.initial_scale_power);
  ZDP_REQUIRE(s.window >= 1 && s.window <= std::numeric_limits<int>::max(),
              "--loss-scale-window (fp16.loss_scale_window) must be in [1, 2^31 - 1], got {}", s.window);
  ZDP_REQUIRE(s.max_overflows_at_min_scale >= 0 && s.max_overflows_at_min_scale <= std::numeric_limits<int>::max(),
              "--max-overflows-at-min-scale must be in [0, 2^31 - 1], got {}", s.max_overflows_at_min_scale);
  ZDP_REQUIRE(s.hysteresis >= 1, "--hysteresis (fp16.hysteresis) must be >= 1, got {}", s.hysteresis);
  ZDP_REQUIRE(std::isfinite(s.min_scale) && s.min_scale > 0,
              "--min-loss-scale (fp16.min_loss_scale) must be > 0, got {}", s.min_scale);
}

// The modes' rules and every setting's range are zero::check_zero_modes()'s (the planner and the
// engine check the same); what is the command line's alone is here.
void TrainConfig::validate_zero(int world_size) const {
  zero::ZeroSettings resolved = zero;
  if (resolved.shard_group_size == zero::ZeroSettings::kShardGroupNode) resolved.shard_group_size = 0;  // not known yet
  zero::check_zero_modes(resolved, world_size);
  ZDP_REQUIRE(zero.offload_optimizer != zero::Offload::kNvme || !zero.nvme_path.empty(),
              "--offload-optimizer (zero_optimization.offload_optimizer.device) nvme needs --nvme-path DIR "
              "(zero_optimization.offload_optimizer.nvme_path): where the offload files go");
  ZDP_REQUIRE(zero.offload_param != zero::Offload::kNvme || !zero.nvme_path.empty(),
              "--offload-param (zero_optimization.offload_param.device) nvme needs --nvme-path DIR "
              "(zero_optimization.offload_param.nvme_path): where the offload files go");
  // The engine ignores a shard group at stage 0; the command line says so rather than ignore a flag.
  ZDP_REQUIRE(zero.shard_group_size == 0 || zero.stage >= 1,
              "--shard-group-size (zero_optimization.mics_shard_size) needs ZeRO stage 1, 2 or 3: stage 0 shards "
              "nothing (--zero-stage {} asked)",
              zero.stage);
}

void TrainConfig::validate_run(int world_size) const {
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
}

}  // namespace zerodp::train
