// `zerodp estimate`: memory per rank by category, traffic per step and the largest micro-batch that
// fits a GPU, for each ZeRO stage, before renting the cluster (plan/estimator.h; docs/planner.md).
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/commands.h"
#include "apps/model_options.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "device/select.h"
#include "optim/optimizer.h"
#include "plan/activations.h"
#include "plan/estimator.h"
#include "plan/presets.h"
#include "train/train_config.h"

namespace zerodp::cli {
namespace {

struct EstimateOptions {
  std::string params, preset;
  int layers = 0, embd = 0, heads = 0, vocab = 0, ctx = 0, seq = 0;
  // --arch llama: the Llama family's dimensions, as `zerodp init --arch llama` takes them.
  std::string arch = "gpt2";
  LlamaOptions llama;
  int gpus = 1;
  std::string stage = "all";
  std::string dtype = "bf16";
  bool fp32_grad_accum = false;
  bool bf16_optimizer_states = false;
  bool bf16_master_weights = false;
  std::string reduce_dtype;
  int64_t micro_batch = 1, accum = 1;
  std::string device = "cpu";
  // The ZeRO settings the planner models, by flag (zero::zero_setting_rows(), the rows marked
  // `planner`): the text given, empty when not given.
  std::map<std::string, std::string, std::less<>> zero_settings;
  int shard_group = 0;
  int ranks_per_host = 0;
  std::string collectives = "auto";
  std::string gpu_memory = "80GB";
  std::string bandwidth;
  std::string units = "gb";
  bool json = false;
  bool async_save = false;  // --async-save (or --config's checkpoint.writer.decoupled)
  // --config: a DeepSpeed JSON, read as `zerodp train --config` reads it; the flags below that were
  // given on the command line (`given`) override it, as they do for train.
  std::string config;
  std::set<std::string, std::less<>> given;
  bool was_given(std::string_view flag) const { return given.count(flag) > 0; }
};
// The flags a --config file also sets (the ZeRO settings' own flags are given when their text is set).
const char* const kConfigFlags[] = {"--gpus", "--stage", "--dtype", "--fp32-grad-accum", "--bf16-optimizer-states",
                                    "--bf16-master-weights", "--reduce-dtype",
                                    "--micro-batch", "--accum", "--shard-group-size"};
EstimateOptions g_opt;

// "7.5B", "1.56e9", "350M", "124000000": a parameter count (K/M/B/T are powers of 10 here).
uint64_t parse_count(const std::string& text) {
  std::string num = text;
  double scale = 1;
  if (!num.empty()) {
    switch (num.back()) {
      case 'K': case 'k': scale = 1e3; break;
      case 'M': case 'm': scale = 1e6; break;
      case 'B': case 'b': case 'G': case 'g': scale = 1e9; break;
      case 'T': case 't': scale = 1e12; break;
      default: break;
    }
    if (scale != 1) num.pop_back();
  }
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(num, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZDP_REQUIRE(used == num.size() && used > 0 && v * scale >= 1 && v * scale < 1e18,
              "--params: expected a parameter count like 7.5B, 1.56e9 or 124000000, got '{}'", text);
  return static_cast<uint64_t>(std::llround(v * scale));
}

// What a Llama preset plans for without --seq.
constexpr int kLlamaDefaultSeq = 4096;

// What `zerodp train --config FILE` would run, as far as the planner models it: the precision, the
// batch (train_batch_size = B·G·W, DeepSpeed's derivations: --gpus, when not given, from the three), the
// ZeRO settings and the optimizer's states; flags given on the command line win over the file. Fills
// `in` (world, micro_batch, accum, precision, zero, optimizer_states) and returns the file's config.
train::TrainConfig config_file(const EstimateOptions& o, plan::PlanInput& in) {
  train::TrainConfig cfg;
  for (const std::string& w : train::load_ds_config(cfg, o.config)) log::warn("{}", w);
  if (o.was_given("--micro-batch")) {
    cfg.micro_batch = o.micro_batch;
    cfg.micro_batch_set = true;
  }
  if (o.was_given("--accum")) {
    cfg.accum = o.accum;
    cfg.accum_set = true;
  }
  int world = o.gpus;
  if (!o.was_given("--gpus") && cfg.train_batch_size && cfg.micro_batch_set && cfg.accum_set) {
    const int64_t per_rank = cfg.micro_batch * cfg.accum, tbs = *cfg.train_batch_size;
    ZDP_REQUIRE(tbs % per_rank == 0 && tbs / per_rank <= (int64_t{1} << 24),
                "{}: train_batch_size {} is not micro-batch {} x accum {} x a world size; give --gpus", o.config,
                tbs, cfg.micro_batch, cfg.accum);
    world = static_cast<int>(tbs / per_rank);
  }
  cfg.resolve_batch(world);
  if (cfg.train_batch_size)
    ZDP_REQUIRE(*cfg.train_batch_size == cfg.micro_batch * cfg.accum * world,
                "{}: train_batch_size {} != micro-batch {} x accum {} x --gpus {} = {}", o.config,
                *cfg.train_batch_size, cfg.micro_batch, cfg.accum, world, cfg.micro_batch * cfg.accum * world);
  in.world = world;
  in.micro_batch = cfg.micro_batch;
  in.accum = cfg.accum;
  in.precision = cfg.precision;
  in.zero = cfg.zero;
  in.optimizer_states = static_cast<int>(optim::state_floats_per_param(cfg.optimizer));
  in.muon = cfg.optimizer.kind == optim::OptimizerKind::kMuon;
  return cfg;
}

// The planner's input from the flags and, with --config, the file (returned in *file).
plan::PlanInput plan_input(const EstimateOptions& o, std::optional<train::TrainConfig>* file) {
  plan::PlanInput in;
  const bool dims = o.layers || o.embd || o.heads || o.vocab || o.ctx;
  ZDP_REQUIRE(o.params.empty() || (o.preset.empty() && !dims),
              "--params gives a bare parameter count: do not combine it with --preset or GPT-2 dimensions");
  if (!o.params.empty()) {
    in.params = parse_count(o.params);
  } else if (model::parse_arch(o.arch, "--arch") == model::Arch::kLlama) {
    ZDP_REQUIRE(o.preset.empty(), "--arch llama gives the dimensions: do not combine it with --preset");
    ZDP_REQUIRE(o.layers > 0 && o.heads > 0 && o.embd > 0 && o.vocab > 0 && o.ctx > 0,
                "--arch llama needs --layers, --heads, --embd, --vocab and --ctx");
    in.model = llama_config(o.layers, o.heads, o.embd, o.vocab, o.ctx, o.llama);
  } else if (!o.preset.empty() && plan::model_preset(o.preset).is_llama()) {
    ZDP_REQUIRE(!dims, "--preset {}: the GPT-2 dimensions (--layers, --embd, ...) do not apply to a Llama preset",
                o.preset);
    in.model = plan::model_preset(o.preset);
    // Llama 3's context is 128K tokens: a sequence of that length is not what one plans for by default.
    if (o.seq == 0) in.seq = std::min(in.model->n_ctx(), kLlamaDefaultSeq);
  } else if (!o.preset.empty() || dims) {
    model::GPT2Config g = o.preset.empty() ? model::GPT2Config{0, 0, 0, 50257, 0} : plan::gpt2_preset(o.preset);
    if (o.layers) g.n_layer = o.layers;
    if (o.heads) g.n_head = o.heads;
    if (o.embd) g.n_embd = o.embd;
    if (o.vocab) g.vocab_size = o.vocab;
    if (o.ctx) g.n_ctx = o.ctx;
    if (g.n_ctx == 0) g.n_ctx = o.seq > 0 ? o.seq : 1024;
    ZDP_REQUIRE(g.n_layer > 0 && g.n_head > 0 && g.n_embd > 0,
                "GPT-2 dimensions need --layers, --embd and --heads (or a --preset)");
    g.validate();
    in.model = g;
  }
  in.world = o.gpus;
  in.micro_batch = o.micro_batch;
  in.accum = o.accum;
  std::optional<train::TrainConfig>& cfg = *file;
  if (!o.config.empty()) cfg = config_file(o, in);
  if (!cfg || o.was_given("--dtype")) in.precision.dtype = parse_dtype(o.dtype);
  if (!cfg || o.was_given("--fp32-grad-accum")) in.precision.fp32_grad_accum = o.fp32_grad_accum;
  if (!cfg || o.was_given("--bf16-optimizer-states")) in.precision.bf16_optimizer_states = o.bf16_optimizer_states;
  if (!cfg || o.was_given("--bf16-master-weights")) in.precision.bf16_master_weights = o.bf16_master_weights;
  if (!o.reduce_dtype.empty()) {
    const DType r = parse_dtype(o.reduce_dtype);
    ZDP_REQUIRE(r == DType::kF32 || r == in.precision.dtype, "--reduce-dtype: fp32 or the compute dtype, got {}",
                o.reduce_dtype);
    in.precision.reduce_dtype = r;
  }
  if (o.seq > 0 || !in.model || in.model->is_gpt2()) in.seq = o.seq;
  const device::DeviceSpec device = device::parse_device_spec(o.device);
  in.gpu = device.kind == device::DeviceSpec::Kind::kCuda;
  ZDP_REQUIRE(!in.gpu || in.precision.dtype != DType::kF32, "--device {}: the GPU computes in bf16 or fp16 (--dtype)",
              o.device);
  for (const auto& [flag, text] : o.zero_settings)
    if (!text.empty()) zero::set_zero_setting(in.zero, *zero::find_zero_setting_by_flag(flag), text);
  if (!cfg || o.was_given("--shard-group-size")) in.zero.shard_group_size = o.shard_group;
  if (in.zero.shard_group_size == zero::ZeroSettings::kShardGroupNode) {
    ZDP_REQUIRE(o.ranks_per_host > 0, "{}: shard groups of one node need --ranks-per-host (the ranks on a node)",
                o.config);
    in.zero.shard_group_size = o.ranks_per_host;
  }
  in.ranks_per_host = o.ranks_per_host;
  ZDP_REQUIRE(o.collectives == "auto" || o.collectives == "flat" || o.collectives == "host-aware",
              "--collectives must be auto, flat or host-aware, got '{}'", o.collectives);
  in.two_level = o.collectives != "flat";
  in.async_save = o.async_save || (cfg && cfg->async_save);
  return in;
}

std::vector<int> stages_of(const std::string& s) {
  if (s == "all") return {0, 1, 2, 3};
  ZDP_REQUIRE(s.size() == 1 && s[0] >= '0' && s[0] <= '3', "--stage: 0, 1, 2, 3 or all, got '{}'", s);
  return {s[0] - '0'};
}

std::string size_text(uint64_t bytes, bool gib) {
  const double v = static_cast<double>(bytes) / (gib ? 1073741824.0 : 1e9);
  return fmt::format("{:.2f}", v);
}

// The ZeRO settings the planner models, as `zerodp train` spells them: the same flags, help and parsing.
void add_zero_setting_options(CLI::App* cmd, EstimateOptions& o) {
  const zero::ZeroSettings defaults;
  for (const zero::ZeroSettingRow& row : zero::zero_setting_rows()) {
    if (!row.planner || row.flag.empty()) continue;
    std::string& slot = o.zero_settings[std::string(row.flag)];
    if (zero::is_switch(row)) {
      // "--x" stores "true", "--no-x" (or "--x=false") "false": zerodp train's spelling.
      const std::string names = fmt::format("{},!--no-{}", row.flag, row.flag.substr(2));
      cmd->add_flag_function(names, [&slot](int64_t n) { slot = n > 0 ? "true" : "false"; },
                             fmt::format("{} [default: {}]", row.help, zero::zero_setting_text(defaults, row)))
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      cmd->add_option(std::string(row.flag), slot, std::string(row.help))
          ->type_name(std::string(row.value_name))
          ->default_str(zero::zero_setting_text(defaults, row));
    }
  }
}

int run_estimate(const EstimateOptions& o) {
  std::optional<train::TrainConfig> file;
  plan::PlanInput in = plan_input(o, &file);
  // --stage, else the stage a --config file sets, else all four.
  const std::vector<int> stages =
      !o.was_given("--stage") && file && file->zero_stage_set ? std::vector<int>{file->zero.stage} : stages_of(o.stage);
  if (stages.size() == 1) {
    in.zero.stage = stages[0];
    in.validate();  // an explicitly asked stage must support the offload asked for
  }
  ZDP_REQUIRE(o.units == "gb" || o.units == "gib", "--units: gb or gib, got '{}'", o.units);
  const uint64_t gpu = parse_bytes(o.gpu_memory, "--gpu-memory");
  // Bytes a second each rank sends; 0: not given (no time column).
  const uint64_t bandwidth = o.bandwidth.empty() ? 0 : parse_bytes(o.bandwidth, "--bandwidth");
  const std::vector<plan::StageEstimate> est = plan::estimate_stages(in, stages, gpu);

  if (o.json) {
    std::printf("%s\n", plan::to_json(est).dump().c_str());
    return 0;
  }
  const bool gib = o.units == "gib";
  const DType dtype = in.precision.dtype;
  const char* unit = gib ? "GiB" : "GB";
  const plan::ParamCounts counts = plan::param_counts(in);
  if (in.model) {
    fmt::print("{}{}: {} parameters; Ψ = {} with the padding of {} rank{}\n", in.model->is_gpt2() ? "GPT-2 " : "",
               in.model->summary(), counts.numel,
               counts.padded, in.world, in.world == 1 ? "" : "s");
  } else {
    fmt::print("{} parameters (a bare count: no padding, no activations)\n", counts.numel);
  }
  fmt::print("{} rank{}, {}{}{}, micro-batch {} x {} tokens, {} micro-step{} a step{}{}{}\n", in.world,
             in.world == 1 ? "" : "s", dtype_name(dtype), dtype != DType::kF32 ? " with fp32 masters" : "",
             in.precision.accumulates_in_fp32() ? ", fp32 gradient accumulation" : "", in.micro_batch, in.seq_len(),
             in.accum, in.accum == 1 ? "" : "s", in.zero.activation_checkpointing ? ", activation checkpointing" : "",
             in.zero.loss_chunk > 0 ? fmt::format(", the loss in chunks of {} tokens", in.zero.loss_chunk) : "",
             in.zero.mlp_chunk > 0 ? fmt::format(", the MLPs in chunks of {} tokens", in.zero.mlp_chunk) : "");
  std::vector<std::string> zeropp;
  if (in.zero.zero_quantized_weights) zeropp.push_back("qwZ (int8 weight gathers, stage 3)");
  if (in.zero.zero_hpz_partition_size > 1)
    zeropp.push_back(fmt::format("hpZ over {} ranks (stage 3)", in.zero.zero_hpz_partition_size));
  if (in.zero.zero_quantized_gradients) zeropp.push_back("qgZ (int8 gradients across hosts, stages 2-3)");
  if (!zeropp.empty()) fmt::print("ZeRO++: {}\n", fmt::join(zeropp, ", "));
  fmt::print("\nBytes per rank ({} = {}), {} ({} {} state{} a parameter):\n", unit, gib ? "2^30" : "10^9",
             file ? optim::optimizer_name(file->optimizer.kind) : "AdamW", in.optimizer_states,
             dtype_name(in.precision.state_dtype()), in.optimizer_states == 1 ? "" : "s");
  fmt::print("{:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>14}{} | {:>8}\n", "stage", "param", "grad",
             "master", "optim", "act", "working", "total", "traffic/step", bandwidth > 0 ? "      time" : "",
             fmt::format("max B ({} {})", size_text(gpu, gib), unit));
  bool offloaded = false;
  const double bytes_per_s = static_cast<double>(bandwidth);
  for (const plan::StageEstimate& e : est) {
    const plan::MemoryEstimate& m = e.memory;
    const std::string time =
        bytes_per_s > 0 ? fmt::format(" {:>8.3f} s", static_cast<double>(e.traffic_bytes) / bytes_per_s) : "";
    fmt::print("{:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>11} {}{} | {:>8}\n", e.stage,
               size_text(m.param, gib), size_text(m.grad, gib), size_text(m.master, gib), size_text(m.optim, gib),
               size_text(m.act, gib), size_text(m.transient, gib), size_text(m.total, gib),
               size_text(e.traffic_bytes, gib), unit, time,
               e.max_micro_batch ? std::to_string(*e.max_micro_batch) : "-");
    offloaded = offloaded || m.host || m.nvme;
  }
  if (in.ranks_per_host > 0 && in.ranks_per_host < in.world) {
    fmt::print("\nAcross hosts ({} hosts x {} ranks, {} collectives), all ranks together per step:\n",
               in.world / in.ranks_per_host, in.ranks_per_host, in.two_level ? "two-level" : "flat");
    for (const plan::StageEstimate& e : est)
      fmt::print("  stage {}: {}\n", e.stage,
                 e.traffic_inter_host_bytes ? fmt::format("{} {}", size_text(*e.traffic_inter_host_bytes, gib), unit)
                                            : std::string(in.muon ? "not modelled (Muon's exchanges)"
                                                                  : "not modelled (shard groups other than the hosts)"));
  }
  if (offloaded) {
    fmt::print("\nOffloaded per rank (optimizer: as zerodp train --offload-optimizer holds it, master + optim in host "
               "memory (cpu) or files (nvme: the host holds buffer_count sub-groups of them), and one sub-group of "
               "gradient staging; parameters: as zerodp train --offload-param cpu holds them, stage 3's shards; "
               "--async-save: the host copy of a checkpoint being written, in master and optim):\n");
    for (const plan::StageEstimate& e : est)
      fmt::print("  stage {}: host {} {}, nvme {} {}\n", e.stage, size_text(e.memory.host, gib), unit,
                 size_text(e.memory.nvme, gib), unit);
  }
  const char* act_kind = dtype == DType::kF32 ? "fp32" : in.gpu ? "16-bit compute, GPU layout" : "16-bit compute";
  fmt::print("\nact: activations ({}), token buffers, load chunk; working: peak of gathered + comm;\n"
             "total: the peak of all categories together. traffic: bytes each rank sends (ring accounting).\n",
             act_kind);
  if (in.model) {
    const int64_t T = in.seq_len();
    const model::ActivationBytes a = plan::activation_bytes(*in.model, in.micro_batch, T, false, dtype, in.gpu);
    fmt::print("Activations of one block: {} {} in zerodp ({}); {} {} by Korthikanti et al. 2022 (16-bit)\n",
               size_text(a.per_block, gib), unit, act_kind,
               size_text(static_cast<uint64_t>(plan::korthikanti_layer_bytes(T, in.micro_batch, in.model->n_embd(),
                                                                             in.model->n_head())),
                         gib),
               unit);
  }
  return 0;
}

void register_estimate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("estimate",
                                 "Estimate memory per rank, traffic per step and the largest micro-batch, per ZeRO stage");
  EstimateOptions& o = g_opt;
  cmd->add_option("--params", o.params, "Model size as a bare parameter count (7.5B, 1.56e9): model states only");
  cmd->add_option("--preset", o.preset, fmt::format("A known model: {}", fmt::join(plan::model_preset_names(), ", ")));
  cmd->add_option("--layers", o.layers, "GPT-2 layers L");
  cmd->add_option("--embd", o.embd, "GPT-2 width C");
  cmd->add_option("--heads", o.heads, "GPT-2 attention heads H");
  cmd->add_option("--vocab", o.vocab, "GPT-2 vocabulary V (default 50257)");
  cmd->add_option("--ctx", o.ctx, "GPT-2 context N, the rows of wpe (default: the preset's, or --seq, or 1024)");
  cmd->add_option("--arch", o.arch, "gpt2 or llama (with --layers, --heads, --embd, --vocab, --ctx and these:)")
      ->capture_default_str();
  add_llama_options(cmd, o.llama);
  cmd->add_option("--seq", o.seq, "Tokens per sequence T (default: the context N; for a Llama preset at most 4096)");
  cmd->add_option("--gpus", o.gpus, "World size W (ranks, one GPU each)")->capture_default_str();
  cmd->add_option("--stage", o.stage, "ZeRO stage 0, 1, 2, 3 or all")->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "Compute dtype fp32, bf16 or fp16 (16-bit: fp32 masters)")->capture_default_str();
  cmd->add_flag("--fp32-grad-accum,!--no-fp32-grad-accum", o.fp32_grad_accum,
                "Persistent gradients in fp32 under bf16/fp16 (default: off here; on with --config, as zerodp "
                "train has it)");
  cmd->add_flag("--bf16-optimizer-states,!--no-bf16-optimizer-states", o.bf16_optimizer_states,
                "The optimizer's states in bf16 (2 bytes a state; bf16.bf16_optimizer_states)");
  cmd->add_flag("--bf16-master-weights,!--no-bf16-master-weights", o.bf16_master_weights,
                "--dtype bf16 without fp32 master weights (bf16.bf16_master_weights_and_grads)");
  cmd->add_option("--reduce-dtype", o.reduce_dtype, "Dtype gradients are reduced in (default: as zerodp train)");
  cmd->add_option("--micro-batch", o.micro_batch, "Sequences per rank per micro-step B")->capture_default_str();
  cmd->add_option("--accum", o.accum, "Micro-steps per optimizer step G")->capture_default_str();
  cmd->add_option("--device", o.device,
                  "cpu, or cuda: the GPU's activation layout (flash attention: no T×T probabilities kept), cuBLASLt's "
                  "workspace")
      ->capture_default_str();
  add_zero_setting_options(cmd, o);
  cmd->add_option("--shard-group-size", o.shard_group,
                  "Hybrid sharding: stages 1-3 shard within groups of N ranks and replicate across groups "
                  "(0: all ranks)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--ranks-per-host", o.ranks_per_host,
                  "Ranks on each host (consecutive): prints the bytes that cross between hosts (0: one host)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--collectives", o.collectives,
                  "auto, flat or host-aware: as zerodp train runs reduce-scatters and all-gathers across hosts")
      ->capture_default_str();
  cmd->add_option("--gpu-memory", o.gpu_memory, "Memory of one GPU, e.g. 80GB, 40GiB")->capture_default_str();
  cmd->add_option("--bandwidth", o.bandwidth, "Bytes per second each rank sends, e.g. 25GB: prints seconds");
  cmd->add_option("--units", o.units, "Text sizes in gb (10^9) or gib (2^30)")->capture_default_str();
  cmd->add_flag("--async-save", o.async_save,
                "As zerodp train --async-save: the host copy of the rank's checkpoint state (fp32 weights and "
                "optimizer states of its owned ranges) in the host tier");
  cmd->add_flag("--json", o.json, "Print JSON: {\"stages\":[{\"stage\",\"bytes_per_rank\",...}]}");
  cmd->add_option("--config", o.config,
                  "A DeepSpeed JSON, read as zerodp train --config reads it: its precision, batch "
                  "(train_batch_size gives --gpus), ZeRO settings (its stage alone) and optimizer; flags given "
                  "here override it");
  cmd->callback([cmd, &action] {
    for (const char* flag : kConfigFlags)
      if (cmd->count(flag) > 0) g_opt.given.insert(flag);
    action = [] { return run_estimate(g_opt); };
  });
}
const CommandRegistration estimate_registration(70, register_estimate);

}  // namespace
}  // namespace zerodp::cli
