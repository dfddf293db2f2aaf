#include "train/ds_keys.h"

#include <string_view>

#include "core/strings.h"

namespace zerodp::train {

using json = nlohmann::json;

namespace {

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

const UnsupportedDsKey kUnsupportedKeys[] = {
    {"zero_optimization.mics_hierarchical_params_gather", asks_for, "MiCS is not implemented yet"},
    {"zero_optimization.zero_quantized_nontrainable_weights", asks_for, "quantized weights (ZeRO++) are not implemented"},
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
    {"checkpoint", "DeepSpeed's checkpoint I/O settings (zerodp reads checkpoint.writer.decoupled alone: --async-save); see docs/checkpoints.md"},
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

}  // namespace

const UnsupportedDsKey* find_unsupported_ds_key(const std::string& path) {
  for (const UnsupportedDsKey& k : kUnsupportedKeys)
    if (path == k.path) return &k;
  return nullptr;
}

const char* ds_tuning_hint(const std::string& path) {
  for (const TuningKey& k : kTuningKeys) {
    const std::string_view p = k.path;
    if (path == p || (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '.'))
      return k.hint;
  }
  return nullptr;
}

}  // namespace zerodp::train
