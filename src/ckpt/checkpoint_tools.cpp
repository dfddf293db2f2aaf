#include "ckpt/checkpoint_tools.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "ckpt/hf_model.h"
#include "ckpt/model_output.h"
#include "ckpt/safetensors.h"
#include "core/json.h"
#include "core/memory.h"

namespace zerodp::ckpt {

void consolidate_checkpoint(const Checkpoint& ckpt, const std::string& out_path) {
  const model::ParamLayout& layout = ckpt.layout();
  std::vector<TensorSpec> specs;
  size_t largest = 0;
  for (const model::ParamInfo& p : layout.params()) {
    specs.push_back({p.name, DType::kF32, p.shape});
    largest = std::max(largest, p.numel);
  }
  Metadata meta;
  if (layout.config().is_gpt2()) {
    const nlohmann::json meta_json = layout.config().gpt2().to_metadata();
    for (const auto& [k, v] : meta_json.items()) meta[k] = v.get<std::string>();
  }
  SafetensorsWriter writer(out_path, std::move(specs), std::move(meta));
  Buffer tensor(largest * sizeof(float), MemCategory::kGathered);
  for (const model::ParamInfo& p : layout.params()) {
    ckpt.read(-1, p.unit, p.offset, p.numel, tensor.as<float>());
    writer.write_tensor(p.name, tensor.data());
  }
  writer.commit();
}

void consolidate_checkpoint_hf(const Checkpoint& ckpt, const ModelOutput& out, DType dtype, uint64_t shard_bytes) {
  const model::ParamLayout& layout = ckpt.layout();
  Buffer unit_buffer;
  save_model(out, ModelForm::kModelDir, layout, dtype, shard_bytes, [&](int unit) {
    unit_buffer.release();  // the previous unit is written
    unit_buffer = Buffer(layout.unit_numel(unit) * sizeof(float), MemCategory::kGathered);
    ckpt.read(-1, unit, 0, layout.unit_numel(unit), unit_buffer.as<float>());
    return static_cast<const float*>(unit_buffer.as<float>());
  });
}

namespace {


// A setting of the manifest's free-form `training` section, on one line of bounded length.
std::string setting_text(const nlohmann::json& v) { return describe_text(v.dump(), 160); }

std::string ranges_text(const RankFile& f) {
  if (f.ranges.empty()) return "nothing";
  std::string out;
  for (const UnitRange& r : f.ranges) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}[{}, {})", r.unit, r.begin, r.end);
  }
  return out;
}

}  // namespace

std::string describe_checkpoint(const Checkpoint& ckpt) {
  const Manifest& m = ckpt.manifest();
  const model::ParamLayout& layout = ckpt.layout();
  std::string out;
  auto line = [&out](std::string_view key, const std::string& value) {
    out += fmt::format("  {:<12} {}\n", key, value);
  };
  out += fmt::format("checkpoint {}\n", ckpt.dir());
  line("format", fmt::format("{} version {}, written by {}", kCheckpointFormat, m.format_version,
                             describe_text(m.created_by, 120)));
  line("step", fmt::format("{} optimizer steps run ({} updates applied); training continues at step {}", m.step,
                           m.optimizer_steps, m.step));
  line("model", fmt::format("{}: {} parameters in {} units", model::model_name(m.model), layout.total_numel(),
                            layout.num_units()));
  line("sharding", fmt::format("{} rank{}, ZeRO stage {}, compute dtype {} (the files hold fp32{})", m.world_size,
                               m.world_size == 1 ? "" : "s", m.zero_stage, dtype_name(m.dtype),
                               m.dtype == DType::kF32 ? "" : " masters"));
  std::string states = m.states.empty() ? "none" : "";
  for (const std::string& s : m.states) states += (states.empty() ? "" : ", ") + s;
  std::string optimizer = fmt::format("{}, per-element states: {}", m.optimizer, states);
  if (m.training.contains("optimizer")) optimizer += fmt::format("; settings {}", setting_text(m.training["optimizer"]));
  line("optimizer", optimizer);
  if (m.training.contains("lr_schedule")) line("lr schedule", setting_text(m.training["lr_schedule"]));
  if (m.training.contains("clip")) line("clip", setting_text(m.training["clip"]));
  line("loss scale", fmt::format("{} (good steps {}, hysteresis left {}, overflows {})", m.loss_scale.scale,
                                 m.loss_scale.good_steps, m.loss_scale.hysteresis_left, m.loss_scale.overflows));
  line("data", fmt::format("{}: T={}, B={} x G={} x W={} sequences = {} tokens a step; the next step reads from "
                           "token {} (modulo the file's length)",
                           describe_text(m.data.path, 200), m.data.seq, m.data.micro_batch, m.data.accum, m.world_size,
                           m.data.tokens_per_step, m.data.next_token));
  out += "  units\n";
  for (int u = 0; u < layout.num_units(); ++u) {
    const UnitShape& s = m.units[static_cast<size_t>(u)];
    out += fmt::format("    unit {:<3} {:<16} {:>12} elements, padded to {} = {} x {}\n", u, layout.unit_contents(u),
                       s.numel, s.padded, m.world_size, s.shard);
  }
  out += "  files\n";
  uint64_t total = 0;
  for (const RankFile& f : m.ranks) {
    total += f.bytes;
    out += fmt::format("    rank {:<3} {}  {:>10}  crc32c {}  units {}\n", f.rank, f.file, format_bytes(f.bytes),
                       crc_hex(f.crc32c), ranges_text(f));
  }
  line("total", fmt::format("{} in {} files", format_bytes(total), m.ranks.size()));
  return out;
}

}  // namespace zerodp::ckpt
