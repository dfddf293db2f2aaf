#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ckpt/hf_model.h"
#include "ckpt/model_output.h"
#include "ckpt/model_source.h"
#include "comm/runtime.h"
#include "comm/watchdog.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/finite.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/output_path.h"
#include "data/dataset.h"
#include "data/instruction_data.h"
#include "data/loader.h"
#include "device/select.h"
#include "plan/estimator.h"
#include "train/async_save.h"
#include "train/checkpointing.h"
#include "train/evaluate.h"
#include "train/metrics.h"
#include "train/report.h"
#include "train/run_device.h"

namespace zerodp::train {

zero::EngineConfig engine_config(const TrainConfig& cfg) {
  ZDP_CHECK(cfg.zero.shard_group_size >= 0, "--shard-group-size node not resolved to a rank count");
  zero::EngineConfig e;
  e.zero = cfg.zero;
  e.precision = cfg.precision;
  e.optimizer = cfg.optimizer;
  if (cfg.adam_lr > 0 && cfg.lr > 0) e.optimizer.adam_lr_ratio = cfg.adam_lr / cfg.lr;
  e.micro_batch = static_cast<int>(cfg.micro_batch);
  e.seed = cfg.seed;
  e.seq = static_cast<int>(cfg.seq);
  return e;
}

std::string unit_label(const model::ParamLayout& layout, int unit) {
  if (unit == model::ParamLayout::kEmbeddingUnit || unit == layout.head_unit())
    return fmt::format("unit {} ({})", unit, layout.unit_contents(unit));
  return fmt::format("unit {} (block {})", unit, unit - 1);
}

std::string element_label(const model::ParamLayout& layout, int unit, size_t element) {
  for (const model::ParamInfo* p : layout.unit_params(unit))
    if (element >= p->offset && element < p->offset + p->numel) return fmt::format("'{}'[{}]", p->name, element - p->offset);
  return fmt::format("{} element {}", unit_label(layout, unit), element);
}

namespace {

// What a step that was not finite says, naming the units whose gradient held NaN or Inf.
std::string nonfinite_what(const model::ParamLayout& layout, const zero::StepResult& r) {
  std::vector<std::string> parts;
  if (!std::isfinite(r.loss)) parts.push_back(fmt::format("the loss is {}", r.loss));
  if (!r.nonfinite_units.empty()) {
    std::string units;
    for (size_t i = 0; i < r.nonfinite_units.size() && i < 4; ++i)
      units += (i ? ", " : "") + unit_label(layout, r.nonfinite_units[i]);
    if (r.nonfinite_units.size() > 4) units += fmt::format(" and {} more", r.nonfinite_units.size() - 4);
    parts.push_back(fmt::format("the gradient holds NaN or Inf (first in {}{})", units,
                                r.nonfinite_units.size() > 1 ? fmt::format("; {} units in all", r.nonfinite_units.size())
                                                             : ""));
  }
  // Every unit's sum of squares was finite, but their total did not fit the fp32 all-reduce.
  if (parts.empty()) parts.push_back("the gradient norm overflows fp32 (it is over about 1.8e19)");
  return fmt::format("{}", fmt::join(parts, "; "));
}

// A run this machine cannot hold is refused now, with the numbers, rather than by an allocation
// halfway through (or by the kernel's OOM killer): the model states and activations one rank keeps
// (the planner's exact parts; its transient buffers come on top). Ranks sharing the machine each
// need theirs, so this is the least a run asks of it.
// On a GPU (gpu_memory > 0) the states and activations are the GPU's, what offload moves the host's.
void check_fits_in_memory(const TrainConfig& cfg, const model::ModelConfig& mc, int W, const std::string& source,
                          uint64_t gpu_memory) {
  ZDP_REQUIRE(mc.checked_activation_bound(cfg.micro_batch, cfg.seq).within(int64_t{1} << 62),
              "--micro-batch {} of {} ({}) would need more than 2^62 bytes of activations", cfg.micro_batch,
              model::model_name(mc), source);
  const plan::PlanInput in{.model = mc, .world = W, .zero = cfg.zero, .precision = cfg.precision,
                           .muon = cfg.optimizer.kind == optim::OptimizerKind::kMuon,
                           .micro_batch = cfg.micro_batch, .seq = cfg.seq, .accum = cfg.accum, .gpu = gpu_memory > 0,
                           .async_save = cfg.async_save && !cfg.save_dir.empty()};
  const plan::MemoryEstimate e = plan::estimate_memory(in);
  // What offload moves to the host is this machine's memory all the same.
  if (gpu_memory > 0) {
    const uint64_t on_gpu = e.param + e.grad + e.master + e.optim + e.act;
    ZDP_REQUIRE(on_gpu <= gpu_memory,
                "{} ({}) at ZeRO stage {} on {} rank{} needs {} of GPU memory a rank ({} of activations for "
                "--micro-batch {} --seq {}), more than the GPU's {}: use a higher --zero-stage, more ranks, a smaller "
                "--micro-batch or --activation-checkpointing (`zerodp estimate` plans it)",
                model::model_name(mc), source, cfg.zero.stage, W, W == 1 ? "" : "s", format_bytes(on_gpu), format_bytes(e.act),
                cfg.micro_batch, cfg.seq, format_bytes(gpu_memory));
    const uint64_t have = physical_memory_bytes();
    ZDP_REQUIRE(have == 0 || e.host <= have,
                "{} ({}) at ZeRO stage {} on {} rank{} offloads {} a rank to page-locked host memory, more than "
                "this machine's {}: use more ranks, --offload-optimizer nvme or a higher --zero-stage",
                model::model_name(mc), source, cfg.zero.stage, W, W == 1 ? "" : "s", format_bytes(e.host), format_bytes(have));
    return;
  }
  const uint64_t states = e.param + e.grad + e.master + e.optim + e.host;
  const uint64_t have = physical_memory_bytes();
  ZDP_REQUIRE(have == 0 || states + e.act <= have,
              "{} ({}) at ZeRO stage {} on {} rank{} needs {} a rank ({} of model states, {} of activations "
              "for --micro-batch {} --seq {}), more than this machine's {}: use a higher --zero-stage, more ranks, a "
              "smaller --micro-batch or --activation-checkpointing (`zerodp estimate` plans it)",
              model::model_name(mc), source, cfg.zero.stage, W, W == 1 ? "" : "s", format_bytes(states + e.act),
              format_bytes(states), format_bytes(e.act), cfg.micro_batch, cfg.seq, format_bytes(have));
}

// Refuses to write weights that are not finite (collective): nothing non-finite reaches a file.
void require_finite_weights(zero::Engine& engine, int64_t step, const std::string& what) {
  if (!engine.weights_finite())
    throw RuntimeFailure(fmt::format("after step {}: the weights hold NaN or Inf; not writing {}", step, what));
}

void log_validation_plan(const TrainConfig& cfg, const ValidationSet& val) {
  log::info("validation: {}, {}", val.describe(),
            cfg.eval_every > 0 ? fmt::format("every {} steps and after the last", cfg.eval_every)
                               : std::string("after the last step"));
}

// --shard-group-size node: the ranks of a host, as learn_hosts() found them (every rank has the same
// layout): all the ranks when they share one host, else the same number on every host placed
// consecutively (rank r the (r mod n)-th of its host), so that the groups of n consecutive ranks are
// the hosts; anything else is refused.
void resolve_node_shard_group(TrainConfig& cfg, const comm::HostLayout& hosts, int world_size, int rank) {
  if (cfg.zero.shard_group_size != zero::ZeroSettings::kShardGroupNode) return;
  if (!hosts.spans_hosts()) {
    cfg.zero.shard_group_size = world_size;
  } else {
    std::vector<int> per_host(static_cast<size_t>(hosts.hosts), 0);
    for (int h : hosts.host_of) ++per_host[static_cast<size_t>(h)];
    const auto [fewest, most] = std::minmax_element(per_host.begin(), per_host.end());
    ZDP_REQUIRE(hosts.ranks_per_host > 0,
                "--shard-group-size node needs the same number of ranks on every host, consecutive in rank order "
                "(e.g. mpirun --map-by slot); this job has between {} and {} ranks a host{}: give "
                "--shard-group-size N instead",
                *fewest, *most, *fewest == *most ? ", not placed consecutively" : "");
    cfg.zero.shard_group_size = hosts.ranks_per_host;
  }
  if (rank == 0)
    log::info("--shard-group-size node: {} rank{} a host", cfg.zero.shard_group_size,
              cfg.zero.shard_group_size == 1 ? "" : "s");
}

// The engine's weights: the checkpoint's (then closed) with --resume, else --init's; returns the step
// the run starts at.
int64_t load_weights(zero::Engine& engine, std::optional<ckpt::Checkpoint>& resume,
                     const std::optional<ckpt::ModelSource>& weights, const model::ParamLayout& layout,
                     const std::string& init_path) {
  if (resume) {
    const int64_t start_step = restore_checkpoint(engine, *resume);
    log::info("resuming from {} at step {} (saved by {} rank{} at ZeRO stage {})", resume->dir(), start_step,
              resume->manifest().data.ranks, resume->manifest().data.ranks == 1 ? "" : "s",
              resume->manifest().zero_stage);
    resume.reset();  // unmaps its files
    return start_step;
  }
  engine.load([&](int unit, size_t begin, size_t count, float* dst) {
    weights->read_unit_range(layout, unit, begin, count, dst);
    // A NaN or Inf in the file would reach every later weight: refused like any malformed input.
    if (const size_t i = first_nonfinite(dst, count); i < count)
      throw UsageError(fmt::format("'{}': tensor {} is {}: initial weights must be finite", init_path,
                                   element_label(layout, unit, begin + i), dst[i]));
  });
  return 0;
}

// The step's record for the metrics and the CSV.
StepRecord step_record(int64_t s, const zero::StepResult& r, double lr, int64_t tokens_per_step, double ms,
                       int64_t skipped_steps) {
  StepRecord rec;
  rec.step = s;
  rec.loss = r.loss;
  rec.grad_norm = r.grad_norm;
  rec.lr = lr;
  rec.tokens = tokens_per_step;
  rec.ms = ms;
  rec.skipped = r.skipped;
  rec.skipped_steps = skipped_steps;
  rec.loss_scale = r.loss_scale;
  rec.comm_wait_ms = r.comm_wait_ms;
  return rec;
}

// The non-finite policy (docs/reference/command-line.md#faults) for step s, whose loss or gradient
// was not finite: nothing reached the weights; fp16 goes on unless the loss scale is stuck at its
// minimum, bf16 and fp32 stop unless --skip-nonfinite. Every rank takes the same decision; the barrier
// lets rank 0 finish its metrics record of the step before any rank's exit makes the launcher end the
// job.
void apply_nonfinite_policy(zero::Engine& engine, const TrainConfig& cfg, const model::ParamLayout& layout,
                            const zero::StepResult& r, int64_t s, int64_t skipped_steps) {
  const auto stop = [&](const std::string& why) {
    engine.comm().barrier();
    throw RuntimeFailure(why);
  };
  if (cfg.precision.dtype == DType::kF16) {
    if (engine.loss_scaler().stuck())
      stop(fmt::format(
          "step {}: the fp16 gradients overflowed in {} steps in a row with the loss scale already at its "
          "minimum ({}): stopping (--min-loss-scale, --max-overflows-at-min-scale; bf16 has fp32's range)",
          s, engine.loss_scaler().overflows_at_min_scale(), cfg.precision.loss_scale.min_scale));
  } else if (!cfg.skip_nonfinite) {
    stop(fmt::format(
        "step {}: {}; stopping before it reaches the weights (nothing was updated; --skip-nonfinite skips such "
        "steps instead)",
        s, nonfinite_what(layout, r)));
  } else if (engine.comm().rank() == 0) {
    log::warn("step {}: {}; step skipped (--skip-nonfinite), {} skipped so far", s, nonfinite_what(layout, r),
              skipped_steps);
  }
}

// The progress line of step s (every --log-every steps and the last), or the validation loss alone.
void log_progress(const TrainConfig& cfg, zero::Engine& engine, int64_t s, const zero::StepResult& r, double lr,
                  double ms, int64_t tokens_per_step, std::optional<double> val_loss, uint64_t val_tokens) {
  const bool progress = cfg.log_every > 0 && (s % cfg.log_every == 0 || s + 1 == cfg.steps);
  if (progress) {
    const bool loss_scaling = cfg.precision.dtype == DType::kF16;
    log::info("step {:>{}}/{} | loss {:.4f} | grad norm {:.4f} | lr {:.3e} | {:.0f} tok/s | {:.1f} ms{}{}", s + 1,
              fmt::formatted_size("{}", cfg.steps), cfg.steps, r.loss, r.grad_norm, lr,
              tokens_per_step / (ms / 1000.0), ms,
              r.skipped && loss_scaling
                  ? fmt::format(" | overflow: step skipped, loss scale now {}", engine.loss_scaler().scale())
                  : (r.skipped ? " | not finite: step skipped" : ""),
              val_loss ? fmt::format(" | val loss {:.4f}", *val_loss) : std::string());
  } else if (val_loss) {
    log::info("step {:>{}}/{} | val loss {:.4f} ({} tokens)", s + 1, fmt::formatted_size("{}", cfg.steps), cfg.steps,
              *val_loss, val_tokens);
  }
}

// What --out writes: its form (ckpt::output_form) and, for a model directory, the tensors' dtype.
struct OutSpec {
  ckpt::ModelOutput target;
  ckpt::ModelForm form = ckpt::ModelForm::kGpt2File;
  DType dtype = DType::kF32;
};

// After the last step: the ledgers (before --out, so that writing it does not show in them), then the
// consolidated weights, then the NVMe offload's traffic.
void finish_run(zero::Engine& engine, const TrainConfig& cfg, const OutSpec& out, const model::ParamLayout& layout,
                comm::Communicator& world, MetricsWriter& metrics) {
  const std::vector<RankLedgers> ledgers = gather_ledgers(world);
  for (const RankLedgers& l : ledgers) metrics.write(memory_json(l));
  for (const RankLedgers& l : ledgers) metrics.write(traffic_json(l));
  if (world.rank() == 0) print_memory_report(ledgers, engine);

  if (!cfg.out_path.empty()) {
    require_finite_weights(engine, cfg.steps - 1, cfg.out_path);
    std::vector<Buffer> units(static_cast<size_t>(layout.num_units()));
    engine.consolidate([&](int unit, const float* data) {
      units[static_cast<size_t>(unit)] = Buffer(layout.unit_numel(unit) * sizeof(float), MemCategory::kGathered);
      std::memcpy(units[static_cast<size_t>(unit)].data(), data, layout.unit_numel(unit) * sizeof(float));
    });
    if (world.rank() == 0) {
      const auto unit_data = [&](int unit) -> const float* {
        // Each unit is written once: freed as the next is asked for.
        if (unit > 0) units[static_cast<size_t>(unit) - 1].release();
        return units[static_cast<size_t>(unit)].as<float>();
      };
      ckpt::save_model(out.target, out.form, layout, out.dtype, cfg.out_shard_size, unit_data);
      log::info("wrote {}", cfg.out_path);
    }
  }
  if (cfg.zero.offload_optimizer == zero::Offload::kNvme) {
    const zero::Engine::NvmeTraffic t = engine.nvme_traffic();
    log::info("nvme offload (rank 0): {} read, {} written; the updates moved {} in {:.3f} s ({:.1f} MB/s)",
              format_bytes(t.bytes_read), format_bytes(t.bytes_written), format_bytes(t.update_bytes),
              t.update_seconds, t.update_seconds > 0 ? t.update_bytes / t.update_seconds / 1e6 : 0.0);
  }
}

// What depends on the architecture, checked before anything is allocated. --out: GPT-2's one file is
// F32 (docs/reference/files.md#safetensors), so --out-dtype applies to model directories only, whose
// dtype is otherwise the --init directory's. Rank 0 writes --out: it alone proves it writable.
OutSpec check_model_outputs(const TrainConfig& cfg, const model::ModelConfig& mc, const ckpt::ModelSource* init,
                            int rank) {
  const bool from_model_dir = init != nullptr && init->is_model_dir();
  OutSpec out;
  out.target = {cfg.out_path, "--out", cfg.overwrite_output_dir, from_model_dir ? cfg.init_path : std::string()};
  out.form = ckpt::output_form(mc, cfg.out_path, from_model_dir);
  ZDP_REQUIRE(!cfg.overwrite_output_dir || out.form == ckpt::ModelForm::kModelDir,
              "--overwrite-output-dir is for an --out model directory; --out '{}' is GPT-2's one file",
              cfg.out_path);
  if (out.form == ckpt::ModelForm::kGpt2File) {
    ZDP_REQUIRE(!cfg.out_dtype,
                "--out-dtype: --out '{}' is GPT-2's one F32 safetensors file; a model directory (a path ending in "
                "'/') is written in --out-dtype",
                cfg.out_path);
  } else {
    out.dtype = cfg.out_dtype.value_or(init != nullptr ? init->dtype() : DType::kF32);
  }
  if (rank == 0 && !cfg.out_path.empty()) ckpt::check_model_output(out.target, out.form);
  return out;
}

// Every other path the run writes, proven writable before any input is read (core/output_path.h):
// rank 0 writes the metrics and the CSV log, every rank its checkpoint shards and its NVMe files.
void check_run_outputs(const TrainConfig& cfg, int rank) {
  if (rank == 0) {
    check_output_path(cfg.metrics_path, OutputKind::kFile, "--metrics");
    check_output_path(cfg.log_csv_path, OutputKind::kFile, "--log-csv");
  }
  check_output_path(cfg.save_dir, OutputKind::kDirectoryTree, "--save-dir");
  if (cfg.zero.offload_optimizer == zero::Offload::kNvme || cfg.zero.offload_param == zero::Offload::kNvme)
    check_output_path(cfg.zero.nvme_path, OutputKind::kExistingDirectory, "--nvme-path");
}

// A test's gradient fault (TrainHooks), once it is known to name a step, a rank and a unit of this run.
void set_gradient_fault(zero::Engine& engine, const zero::GradientFault& f) {
  const int W = engine.comm().size(), U = engine.layout().num_units();
  ZDP_REQUIRE(f.step >= -1 && f.rank >= 0 && f.rank < W && f.unit >= 0 && f.unit < U,
              "the gradient fault's step {} must be >= -1, its rank {} in 0..{}, its unit {} in 0..{}", f.step, f.rank,
              W - 1, f.unit, U - 1);
  engine.set_gradient_fault(f);
}

}  // namespace

TrainResult run_training(TrainConfig cfg, const TrainHooks& hooks) {
  using Clock = std::chrono::steady_clock;
  std::shared_ptr<comm::Communicator> world = comm::world();
  const int W = world->size(), rank = world->rank();
  cfg.finalize(W);
  const device::DeviceSpec device_spec = device::parse_device_spec(cfg.device);
  device::require_trainable(device_spec);
  check_device_support(cfg, device_spec);
  world->set_timeout(cfg.comm_timeout);
  // Which hosts the ranks run on: the ledger's bytes across hosts, and two-level collectives (splits
  // made from the world learn theirs too).
  const comm::HostLayout& hosts = world->learn_hosts(cfg.collectives != "flat");
  if (rank == 0 && hosts.spans_hosts())
    log::info("{} hosts{}: {}", hosts.hosts,
              hosts.ranks_per_host > 0 ? fmt::format(", {} ranks each", hosts.ranks_per_host) : std::string(),
              hosts.two_level ? "reduce-scatters and all-gathers in two levels (--collectives host-aware)"
                              : "collectives over all ranks at once");
  if (rank == 0 && cfg.collectives == "host-aware" && hosts.spans_hosts() && !hosts.two_level)
    log::warn("--collectives host-aware: the hosts do not each run the same number of consecutive ranks (place them "
              "with mpirun --map-by slot); running the collectives over all ranks at once");
  comm::set_activity_context("starting: reading inputs, loading");
  resolve_node_shard_group(cfg, hosts, W, rank);
  check_run_outputs(cfg, rank);

  // Inputs are checked before anything is allocated: a bad file fails fast with exit code 2. With
  // --resume the model is the checkpoint's (validated in full first); --init, if given, must match.
  std::optional<ckpt::Checkpoint> resume;
  if (!cfg.resume_path.empty()) {
    const int N = cfg.zero.shard_group_size > 0 ? static_cast<int>(cfg.zero.shard_group_size) : W;
    resume.emplace(open_checkpoint(*world, cfg.resume_path, ShardToRead{cfg.zero.stage, N, rank % N}));
  }
  std::optional<ckpt::ModelSource> weights;
  if (!cfg.init_path.empty()) weights.emplace(ckpt::ModelSource::open(cfg.init_path));
  const model::ModelConfig mc = resume ? resume->manifest().model : weights->config();
  const OutSpec out = check_model_outputs(cfg, mc, weights ? &*weights : nullptr, rank);
  if (resume) {
    inherit_data_order(*resume, cfg);
    for (const std::string& w : check_resume(*resume, cfg, W, weights ? &weights->config() : nullptr))
      if (rank == 0) log::warn("--resume: {}", w);
  }
  ZDP_REQUIRE(cfg.seq <= mc.n_ctx(), "--seq {} exceeds the model's context n_ctx = {} ({})", cfg.seq, mc.n_ctx(),
              resume ? resume->dir() : cfg.init_path);
  // The rank's device and the communicator the engine uses (on a GPU: NCCL or host staging).
  const RunDevice run_device = open_run_device(device_spec, world);
  check_fits_in_memory(cfg, mc, W, resume ? resume->dir() : cfg.init_path, run_device.memory_bytes);
  if (!cfg.save_dir.empty() && rank == 0) ckpt::make_save_dir(cfg.save_dir);
  const data::TrainData train_data = data::open_train_data(
      cfg.data_path, mc.vocab_size(), W, rank, static_cast<int>(cfg.micro_batch), static_cast<int>(cfg.seq),
      static_cast<int>(cfg.accum), {cfg.shuffle, cfg.seed}, cfg.packing);
  const data::TrainBatches& batches = *train_data.batches;
  // Packed sequences: each micro-step's positions (none otherwise: every row one sequence).
  auto positions_of = [&](int64_t s) -> zero::PositionSource {
    if (!batches.packed()) return {};
    return [&batches, s](int g, int32_t* positions) { batches.positions(static_cast<uint64_t>(s), g, positions); };
  };
  // Validation (docs/reference/data-order.md#validation): its stream and windows are checked here, before anything is allocated.
  std::optional<ValidationSet> val;
  if (!cfg.val_data_path.empty())
    val.emplace(cfg.val_data_path, mc.vocab_size(), cfg.eval_tokens, cfg.seq, "--eval-tokens");
  const uint64_t val_tokens = val ? val->tokens() : 0;
  const optim::LrSchedule schedule = cfg.make_lr_schedule();
  const model::ParamLayout layout(mc);

  MemoryLedger::global().set_budget(cfg.memory_budget);
  MetricsWriter metrics(cfg.metrics_path, rank == 0);
  CsvLog csv_log(cfg.log_csv_path, rank == 0);  // --log-csv; an eval's loss goes in by csv_log.record_eval()
  zero::EngineConfig engine_cfg = engine_config(cfg);
  engine_cfg.device = run_device.device();
  zero::Engine engine(layout, run_device.comm, engine_cfg);
  if (hooks.gradient_fault) set_gradient_fault(engine, *hooks.gradient_fault);
  const int64_t start_step = load_weights(engine, resume, weights, layout, cfg.init_path);
  const bool saving = !cfg.save_dir.empty();
  CheckpointSaver saver(engine, save_context(cfg, W), cfg.async_save);
  int64_t last_saved = -1;

  const int64_t tokens_per_step = cfg.tokens_per_step(W);
  log::info("training {} ({} parameters) on {} rank{} ({}): ZeRO stage {}, {}, B={} T={} G={} ({} tokens/step), "
            "{} steps",
            model::model_name(mc), layout.total_numel(), W, W == 1 ? "" : "s", run_device.description, cfg.zero.stage,
            dtype_name(cfg.precision.dtype),
            cfg.micro_batch, cfg.seq, cfg.accum, tokens_per_step, cfg.steps);
  if (rank == 0 && !run_device.warning.empty()) log::warn("{}", run_device.warning);
  if (train_data.instructions) log::info("data: {}", batches.describe());

  TrainResult result;
  double total_ms = 0;
  int64_t skipped_steps = 0;
  if (val) log_validation_plan(cfg, *val);
  for (int64_t s = start_step; s < cfg.steps; ++s) {
    // The schedule counts applied optimizer steps: a skipped step does not advance it (DeepSpeed's).
    const double lr = schedule.lr_at(engine.optimizer_steps());
    comm::set_activity_context(fmt::format("step {}", s));
    const auto t0 = Clock::now();
    const zero::StepResult r = engine.step(
        static_cast<int>(cfg.accum),
        [&](int g, int32_t* inputs, int32_t* targets) { batches.load(static_cast<uint64_t>(s), g, inputs, targets); },
        lr, cfg.clip, batches.targets(static_cast<uint64_t>(s)), positions_of(s));
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    total_ms += ms;
    result.losses.push_back(r.loss);
    skipped_steps += r.skipped ? 1 : 0;
    const StepRecord rec = step_record(s, r, lr, tokens_per_step, ms, skipped_steps);
    metrics.write(step_json(rec));
    csv_log.record_step(rec, (s + 1) * tokens_per_step);
    if (r.nonfinite) apply_nonfinite_policy(engine, cfg, layout, r, s, skipped_steps);
    saver.poll();  // --async-save: commits the save in flight once every rank has written its file
    // Validation after s + 1 steps: every --eval-every steps and after the last. Forward passes only,
    // outside the step's time and traffic; training goes on bitwise as without it.
    std::optional<double> val_loss;
    if (val && ((cfg.eval_every > 0 && (s + 1) % cfg.eval_every == 0) || s + 1 == cfg.steps)) {
      comm::set_activity_context(fmt::format("evaluating after step {}", s));
      val_loss = val->loss(engine, *world);
      metrics.write(eval_json(s + 1, *val_loss, val_tokens));
      csv_log.record_eval(s, *val_loss, static_cast<int64_t>(val_tokens));
    }
    log_progress(cfg, engine, s, r, lr, ms, tokens_per_step, val_loss, val_tokens);
    if (saving && cfg.save_every > 0 && (s + 1) % cfg.save_every == 0) {
      comm::set_activity_context(fmt::format("saving the checkpoint of step {}", s + 1));
      saver.save(s + 1);  // the writer refuses a NaN or Inf (ckpt::RankFileOptions::finite)
      last_saved = s + 1;
    }
  }
  comm::set_activity_context("finishing: checkpoint, ledgers, --out");
  if (saving && last_saved != cfg.steps) {
    saver.save(cfg.steps);
  }
  saver.finish();  // the ledgers and --out come after the last checkpoint is committed
  result.tokens_per_second = total_ms > 0 ? tokens_per_step * (cfg.steps - start_step) / (total_ms / 1000.0) : 0;

  finish_run(engine, cfg, out, layout, *world, metrics);
  world->barrier();
  metrics.commit();
  csv_log.commit();
  log::info("done: {} steps{}, final loss {:.4f}, {:.0f} tokens/s", cfg.steps,
            skipped_steps > 0 ? fmt::format(" ({} skipped)", skipped_steps) : "",
            result.losses.empty() ? 0.0 : result.losses.back(), result.tokens_per_second);
  return result;
}

}  // namespace zerodp::train
