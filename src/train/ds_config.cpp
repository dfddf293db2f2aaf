// The DeepSpeed-style JSON reader (`--config`): each section's keys onto the TrainConfig, with
// DeepSpeed's meanings and defaults; errors name the file and the key path.
#include <cmath>
#include <optional>
#include <variant>

#include <fmt/format.h>

#include "core/error.h"
#include "core/overloaded.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/strings.h"
#include "train/train_config.h"
#include "train/ds_keys.h"

namespace zerodp::train {

using json = nlohmann::json;
using optim::LrScheduleKind;
using optim::LrScheduleParams;
using optim::OptimizerKind;
using optim::WarmupType;

namespace {

constexpr size_t kMaxDsConfigBytes = size_t{1} << 20;

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
    if (const char* hint = ds_tuning_hint(path)) {
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


bool DsReader::check_unsupported(const std::string& path, const json& v) const {
  const UnsupportedDsKey* k = find_unsupported_ds_key(path);
  if (k == nullptr) return false;
  if (k->asks(v)) fail(fmt::format("{} is {}: {}", path, describe_json(v), k->what));
  return true;
}

// Walks a DeepSpeed {"type": ..., "params": {...}} section (`section`: "optimizer" or "scheduler"):
// read_param(name, value, key path) for each parameter; any key but those two is unknown.
template <typename ReadParam>
void for_each_param(const DsReader& r, const json& sec, const std::string& section, ReadParam&& read_param) {
  for (const auto& [key, v] : sec.items()) {
    if (key == "type") continue;
    if (key != "params") {
      r.unknown(section + "." + key, v);
      continue;
    }
    for (const auto& [name, pv] : r.object(v, section + ".params").items())
      read_param(name, pv, section + ".params." + name);
  }
}

void read_optimizer(const DsReader& r, const json& sec, TrainConfig& cfg) {
  r.object(sec, "optimizer");
  const auto type_it = sec.find("type");
  if (type_it == sec.end()) r.fail("optimizer.type is required (AdamW, Adam, SGD or Muon)");
  const TrainConfig before = cfg;
  if (!is_auto(*type_it)) {
    const std::string type = to_lower(r.string(*type_it, "optimizer.type"));
    if (type == "adamw") {
      cfg.optimizer.kind = OptimizerKind::kAdamW;
    } else if (type == "adam") {  // DeepSpeed's Adam is AdamW unless adam_w_mode is false
      cfg.optimizer.kind = OptimizerKind::kAdamW;
    } else if (type == "sgd") {
      cfg.optimizer.kind = OptimizerKind::kSGD;
    } else if (type == "muon") {
      cfg.optimizer.kind = OptimizerKind::kMuon;
    } else {
      r.fail("optimizer.type", "AdamW, Adam, SGD or Muon", *type_it);
    }
    // Parameters the section leaves out take the defaults of DeepSpeed's optimizers (FusedAdam's
    // for Adam/AdamW, torch.optim.SGD's for SGD): weight decay 0 in both.
    cfg.lr = 1e-3;
    cfg.optimizer.beta1 = 0.9;
    cfg.optimizer.beta2 = 0.999;
    cfg.optimizer.eps = 1e-8;
    cfg.optimizer.weight_decay = 0.0;
    cfg.optimizer.momentum = 0.0;
    cfg.optimizer.dampening = 0.0;
    cfg.optimizer.nesterov = false;
    cfg.adam_lr = 0.0;
    if (cfg.optimizer.kind == OptimizerKind::kMuon) {  // docs/reference/optimizer.md#muon
      cfg.optimizer.momentum = 0.95;
      cfg.optimizer.nesterov = true;
    }
  }
  const bool sgd = cfg.optimizer.kind == OptimizerKind::kSGD;
  const bool muon = cfg.optimizer.kind == OptimizerKind::kMuon;
  for_each_param(r, sec, "optimizer", [&](const std::string& name, const json& pv, const std::string& path) {
    const bool a = is_auto(pv);
    if (name == "lr" || (muon && name == "muon_lr")) {  // DeepSpeed's Muon: muon_lr, adam_lr
      cfg.lr = a ? before.lr : r.non_negative(pv, path);
    } else if (muon && name == "adam_lr") {
      cfg.adam_lr = a ? before.adam_lr : r.non_negative(pv, path);
    } else if (muon && name == "ns_steps") {
      if (!a && r.number(pv, path) != optim::kNewtonSchulzSteps)
        r.fail(path + " must be 5 (zerodp runs the published five Newton-Schulz steps)");
    } else if (name == "weight_decay") {
      cfg.optimizer.weight_decay = a ? before.optimizer.weight_decay : r.non_negative(pv, path);
    } else if (!sgd && name == "betas") {
      if (a) {
        cfg.optimizer.beta1 = before.optimizer.beta1;
        cfg.optimizer.beta2 = before.optimizer.beta2;
        return;
      }
      if (!pv.is_array() || pv.size() != 2 || !pv[0].is_number() || !pv[1].is_number())
        r.fail(path, "an array of 2 numbers", pv);
      cfg.optimizer.beta1 = pv[0].get<double>();
      cfg.optimizer.beta2 = pv[1].get<double>();
    } else if (!sgd && name == "eps") {
      cfg.optimizer.eps = a ? before.optimizer.eps : r.non_negative(pv, path);
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
    } else if ((sgd || muon) && name == "momentum") {
      cfg.optimizer.momentum = a ? before.optimizer.momentum : r.non_negative(pv, path);
    } else if (sgd && name == "dampening") {
      cfg.optimizer.dampening = a ? before.optimizer.dampening : r.number(pv, path);
    } else if ((sgd || muon) && name == "nesterov") {
      cfg.optimizer.nesterov = a ? before.optimizer.nesterov : r.boolean(pv, path);
    } else {
      r.unknown(path, pv);
    }
  });
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
  for_each_param(r, sec, "scheduler", [&](const std::string& name, const json& pv, const std::string& path) {
    const bool a = is_auto(pv);
    if (name == "warmup_num_steps") {
      p.warmup_num_steps = a ? before.warmup_num_steps : r.integer(pv, path, 0);
    } else if (name == "warmup_type") {
      if (a) {
        p.warmup_type = before.warmup_type;
        return;
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
        return;
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
  });
}

// nvme_path of either offload section: zerodp has one --nvme-path, so two sections must agree.
void read_nvme_path(const DsReader& r, const json& v, const std::string& path, TrainConfig& cfg) {
  const std::string p = r.string(v, path);
  if (!cfg.zero.nvme_path.empty() && cfg.zero.nvme_path != p)
    r.fail(path + " differs from the other offload section's nvme_path: zerodp puts every NVMe offload file in "
           "one directory (--nvme-path)");
  cfg.zero.nvme_path = p;
}

// zero_optimization.<key> for a row of the ZeRO settings table (zero/settings.h): its type, its range.
void read_zero_setting(const DsReader& r, const zero::ZeroSettingRow& row, const json& v, const std::string& path,
                       zero::ZeroSettings& z) {
  auto count = [&] {
    const int64_t x = r.integer(v, path, row.min);
    if (x > row.max) r.fail(path, fmt::format("an integer in {}..{}", row.min, row.max), v);
    return x;
  };
  std::visit(Overloaded{[&](int zero::ZeroSettings::*f) { z.*f = static_cast<int>(count()); },
                        [&](int64_t zero::ZeroSettings::*f) { z.*f = count(); },
                        [&](bool zero::ZeroSettings::*f) { z.*f = r.boolean(v, path); },
                        [&](zero::Offload zero::ZeroSettings::*f) {
                          try {
                            z.*f = zero::parse_offload(to_lower(r.string(v, path)), path);
                          } catch (const UsageError&) {
                            r.fail(path, "\"cpu\", \"nvme\" or \"none\"", v);
                          }
                        }},
             row.field);
}

// A key of zero_optimization, or of one of its offload sections (`key` then "offload_param.max_in_cpu"),
// that the table has: read into cfg. False for any other key.
bool read_table_key(const DsReader& r, const std::string& key, const json& v, TrainConfig& cfg) {
  const zero::ZeroSettingRow* row = zero::find_zero_setting_by_key(key);
  if (!row) return false;
  if (!is_auto(v)) read_zero_setting(r, *row, v, "zero_optimization." + key, cfg.zero);
  return true;
}

// The key both offload sections accept and ignore.
bool ignore_pin_memory(const DsReader& r, const std::string& key, const json& v, const std::string& path) {
  if (key != "pin_memory") return false;
  r.boolean(v, path);
  r.ignored(path, "pinned memory speeds copies to and from a GPU; the CPU device's host memory is plain RAM");
  return true;
}

// Walks zero_optimization.<section> (offload_optimizer or offload_param). The keys both sections read
// alike are read here: an "auto" value (left as it is), the settings table's keys (device,
// buffer_count, ...), pin_memory and nvme_path. read_own(key, value, key path) reads the rest and
// returns false for a key it does not know, which is then unknown.
template <typename ReadOwn>
void read_offload_section(const DsReader& r, const json& sec, const std::string& section, TrainConfig& cfg,
                          ReadOwn&& read_own) {
  const std::string base = "zero_optimization." + section;
  for (const auto& [key, v] : r.object(sec, base).items()) {
    const std::string path = base + "." + key;
    if (is_auto(v) || read_table_key(r, section + "." + key, v, cfg) || ignore_pin_memory(r, key, v, path))
      continue;
    if (key == "nvme_path")
      read_nvme_path(r, v, path, cfg);
    else if (!read_own(key, v, path))
      r.unknown(path, v);
  }
}

// zero_optimization.offload_optimizer: where the optimizer lives (cpu, or nvme under nvme_path with
// buffer_count I/O slots); the knobs of DeepSpeed's pinned-memory and NVMe pipelines are accepted and
// ignored; a partial offload (ratio < 1) is refused.
void read_offload_optimizer(const DsReader& r, const json& sec, TrainConfig& cfg) {
  read_offload_section(r, sec, "offload_optimizer", cfg, [&](const std::string& key, const json& v, const std::string& path) {
    if (key == "pipeline_read" || key == "pipeline_write") {
      r.boolean(v, path);
      r.ignored(path, "zerodp always overlaps the NVMe reads and writes with the update (buffer_count slots)");
    } else if (key == "fast_init") {
      r.ignored(path, "a DeepSpeed initialisation setting");
    } else if (key == "ratio") {
      if (r.number(v, path) != 1.0) r.fail(path + " other than 1 (a partial offload) is not implemented");
    } else {
      return false;
    }
    return true;
  });
}

// zero_optimization.offload_param: where stage 3's parameter shards live; with nvme, how many host
// buffers the gathers read through (buffer_count) and how many shard elements stay in host memory
// (max_in_cpu). DeepSpeed's buffer_size and pin_memory are accepted and ignored.
void read_offload_param(const DsReader& r, const json& sec, TrainConfig& cfg) {
  read_offload_section(r, sec, "offload_param", cfg, [&](const std::string& key, const json& v, const std::string& path) {
    if (key != "buffer_size") return false;
    r.integer(v, path, 0);
    r.ignored(path, "the size of DeepSpeed's NVMe buffers; zerodp sizes each buffer to the largest shard");
    return true;
  });
}

void read_zero(const DsReader& r, const json& sec, TrainConfig& cfg) {
  r.object(sec, "zero_optimization");
  for (const auto& [key, v] : sec.items()) {
    const std::string path = "zero_optimization." + key;
    const bool a = is_auto(v);
    if (read_table_key(r, key, v, cfg)) {
      if (key == "stage" && !a) cfg.zero_stage_set = true;
      continue;
    }
    if (key == "offload_optimizer") {
      if (!a) read_offload_optimizer(r, v, cfg);
    } else if (key == "cpu_offload") {  // DeepSpeed's older spelling of offload_optimizer.device "cpu"
      if (!a) cfg.zero.offload_optimizer = r.boolean(v, path) ? zero::Offload::kCpu : zero::Offload::kNone;
    } else if (key == "offload_param") {
      if (!a) read_offload_param(r, v, cfg);
    } else if (key == "cpu_offload_params") {  // DeepSpeed's older spelling of offload_param.device "cpu"
      if (!a) cfg.zero.offload_param = r.boolean(v, path) ? zero::Offload::kCpu : zero::Offload::kNone;
    } else if (key == "mics_shard_size") {  // MiCS: every state sharded within groups of this size
      if (!a) {
        const int64_t n = r.integer(v, path, -1);
        cfg.zero.shard_group_size = n > 0 ? n : 0;  // DeepSpeed's -1 (and 0): off
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
    } else if (!fp16 && key == "bf16_optimizer_states") {
      if (!a) cfg.precision.bf16_optimizer_states = r.boolean(v, path);
    } else if (!fp16 && key == "bf16_master_weights_and_grads") {
      // Master weights and gradients in bf16: no fp32 masters, no fp32 accumulation of the gradients.
      if (!a && r.boolean(v, path)) {
        cfg.precision.bf16_master_weights = true;
        cfg.precision.fp32_grad_accum = false;
      }
    } else if (fp16 && key == "loss_scale") {
      if (!a) cfg.precision.loss_scale.static_scale = r.non_negative(v, path);
    } else if (fp16 && key == "initial_scale_power") {
      if (!a) {
        const int64_t p = r.integer(v, path, 0);
        if (p > 63) r.fail(path, "an integer in 0..63", v);
        cfg.precision.loss_scale.initial_scale_power = static_cast<int>(p);
      }
    } else if (fp16 && key == "loss_scale_window") {
      if (!a) cfg.precision.loss_scale.window = r.integer(v, path, 1);
    } else if (fp16 && key == "hysteresis") {
      if (!a) {
        const int64_t h = r.integer(v, path, 1);
        if (h > 1'000'000) r.fail(path, "an integer in 1..1000000", v);
        cfg.precision.loss_scale.hysteresis = static_cast<int>(h);
      }
    } else if (fp16 && key == "consecutive_hysteresis") {
      if (!a) cfg.precision.loss_scale.consecutive_hysteresis = r.boolean(v, path);
    } else if (fp16 && key == "min_loss_scale") {
      if (!a) {
        const double m = r.number(v, path);
        if (!(m > 0)) r.fail(path, "a number > 0", v);
        cfg.precision.loss_scale.min_scale = m;
      }
    } else {
      r.unknown(path, v);
    }
  }
  return enabled;
}

// The checkpoint section: writer.decoupled is DeepSpeed's decoupled (asynchronous) checkpoint writer,
// zerodp's --async-save; the rest tunes DeepSpeed's own checkpoint I/O (ignored, saying so).
void read_checkpoint(const DsReader& r, const json& sec, TrainConfig& cfg) {
  for (const auto& [key, v] : r.object(sec, "checkpoint").items()) {
    if (key != "writer") {
      r.unknown("checkpoint." + key, v);
      continue;
    }
    for (const auto& [name, wv] : r.object(v, "checkpoint.writer").items()) {
      const std::string path = "checkpoint.writer." + name;
      if (name == "decoupled") cfg.async_save = r.boolean(wv, path);
      else r.unknown(path, wv);
    }
  }
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
      if (!a) cfg.precision.reduce_dtype = r.dtype(v, key);
    } else if (key == "checkpoint") {
      read_checkpoint(r, v, cfg);
    } else if (key == "activation_checkpointing") {
      // DeepSpeed's section configures its checkpointing API; zerodp's own is --activation-checkpointing.
      for (const auto& [name, sv] : r.object(v, key).items()) r.unknown(key + "." + name, sv);
    } else if (key == "data_types") {
      for (const auto& [name, dv] : r.object(v, key).items()) {
        if (name == "grad_accum_dtype") {
          if (!is_auto(dv)) cfg.precision.fp32_grad_accum = r.dtype(dv, "data_types.grad_accum_dtype") == DType::kF32;
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
    cfg.precision.dtype = DType::kBF16;
  } else if (fp16.value_or(false)) {
    cfg.precision.dtype = DType::kF16;
  } else if (bf16.has_value() || fp16.has_value()) {
    cfg.precision.dtype = DType::kF32;  // the file speaks about precision and enables neither
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

}  // namespace zerodp::train
