#include "ckpt/gpt2_weights.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"

namespace zerodp::ckpt {

namespace {

using model::GPT2Config;
using model::ParamInfo;
using model::ParamLayout;

constexpr std::array<std::string_view, 5> kConfigKeys = {"n_layer", "n_head", "n_embd", "vocab_size",
                                                         "n_ctx"};

// A config.json beside a model is a few kilobytes (Hugging Face's GPT-2 configs: under 1 KB).
constexpr size_t kMaxConfigJsonBytes = size_t{1} << 20;

int* config_field(GPT2Config& c, std::string_view key) {
  if (key == "n_layer") return &c.n_layer;
  if (key == "n_head") return &c.n_head;
  if (key == "n_embd") return &c.n_embd;
  if (key == "vocab_size") return &c.vocab_size;
  return &c.n_ctx;
}

bool parse_int64(std::string_view s, int64_t* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && !s.empty();
}

// Sets hyper-parameter `key` to `v`: a value over its limit (model/gpt2_config.h) is refused here, where
// it is still an int64, with the limit; one that is not positive is left to GPT2Config::validate().
void set_hyper_parameter(GPT2Config& c, std::string_view key, int64_t v, std::string_view where) {
  const int64_t limit = model::hyper_parameter_limit(key);
  ZDP_REQUIRE(v <= limit, "{}: {} is {}, over the limit of {} (docs/limits.md)", where, key, v, limit);
  ZDP_REQUIRE(v > 0, "{}: {} must be positive, got {}", where, key, v);
  *config_field(c, key) = static_cast<int>(v);
}

// "h.12.attn.bias" -> block 12, rest "attn.bias". False when the name is not a block tensor's
// (including a block number too long for int64: no model has that many blocks anyway).
bool split_block_name(std::string_view name, int64_t* block, std::string_view* rest) {
  if (name.substr(0, 2) != "h.") return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string_view::npos || dot == 2) return false;
  if (!parse_int64(name.substr(2, dot - 2), block) || *block < 0) return false;
  *rest = name.substr(dot + 1);
  return true;
}

}  // namespace

bool gpt2_ignored_name(std::string_view name) {
  if (name == "lm_head.weight") return true;
  int64_t block;
  std::string_view rest;
  return split_block_name(name, &block, &rest) && (rest == "attn.bias" || rest == "attn.masked_bias");
}

std::string gpt2_canonical_name(std::string_view name) {
  if (name.substr(0, kGpt2HfPrefix.size()) == kGpt2HfPrefix) name.remove_prefix(kGpt2HfPrefix.size());
  return std::string(name);
}

namespace {

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The hyper-parameters in `__metadata__`, if it has any of the keys (then it must have all).
bool config_from_metadata(const SafetensorsReader& r, GPT2Config* c) {
  const Metadata& meta = r.metadata();
  const bool any = std::any_of(kConfigKeys.begin(), kConfigKeys.end(),
                               [&](std::string_view k) { return meta.count(std::string(k)) > 0; });
  if (!any) return false;
  const std::string where = fmt::format("'{}': __metadata__", r.path());
  for (std::string_view key : kConfigKeys) {
    const auto it = meta.find(std::string(key));
    ZDP_REQUIRE(it != meta.end(), "'{}': __metadata__ has some model hyper-parameters but not '{}'", r.path(),
                key);
    int64_t v = 0;
    ZDP_REQUIRE(parse_int64(it->second, &v), "'{}': __metadata__ value of '{}' is '{}', not an integer", r.path(),
                key, describe_text(it->second));
    set_hyper_parameter(*c, key, v, where);
  }
  return true;
}

// The hyper-parameters in a config.json, if the file exists and has any of the keys.
bool config_from_json(const std::string& json_path, GPT2Config* c) {
  if (!file_exists(json_path)) return false;
  JsonLimits limits;
  limits.max_bytes = kMaxConfigJsonBytes;
  nlohmann::json j = parse_json(read_small_file(json_path, kMaxConfigJsonBytes), fmt::format("'{}'", json_path), limits);
  if (!j.is_object()) throw UsageError(fmt::format("'{}': not a JSON object", json_path));
  if (!j.contains("n_ctx") && j.contains("n_positions")) j["n_ctx"] = j["n_positions"];  // newer HF configs
  const bool any = std::any_of(kConfigKeys.begin(), kConfigKeys.end(),
                               [&](std::string_view k) { return j.contains(std::string(k)); });
  if (!any) return false;
  const std::string where = fmt::format("'{}'", json_path);
  for (std::string_view key : kConfigKeys) {
    const auto it = j.find(std::string(key));
    ZDP_REQUIRE(it != j.end(), "'{}': has some model hyper-parameters but not '{}'", json_path, key);
    int64_t v = 0;
    bool ok = false;
    if (it->is_number_unsigned()) {
      ok = it->get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
      v = ok ? it->get<int64_t>() : 0;
    } else if (it->is_number_integer()) {
      v = it->get<int64_t>();
      ok = true;
    } else if (it->is_string()) {
      ok = parse_int64(it->get_ref<const std::string&>(), &v);
    }
    ZDP_REQUIRE(ok, "'{}': value of '{}' is {}, not an integer in [1, {}]", json_path, key, describe_json(*it),
                model::hyper_parameter_limit(key));
    set_hyper_parameter(*c, key, v, where);
  }
  return true;
}

// The same, with errors that also name the model file the config.json was looked up for.
bool config_from_json_beside(const std::string& model_path, const std::string& json_path, GPT2Config* c) {
  try {
    return config_from_json(json_path, c);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("'{}': reading its hyper-parameters: {}", model_path, e.what()));
  }
}

// L, C, V, N from the tensors' shapes; H must come from the caller.
void config_from_shapes(const SafetensorsReader& r, GPT2Config* c) {
  const TensorEntry* wte = r.find("wte.weight");
  if (wte == nullptr) wte = r.find("transformer.wte.weight");
  const TensorEntry* wpe = r.find("wpe.weight");
  if (wpe == nullptr) wpe = r.find("transformer.wpe.weight");
  ZDP_REQUIRE(wte != nullptr,
              "'{}': no hyper-parameters (__metadata__ or config.json) and no tensor 'wte.weight' "
              "to infer them from",
              r.path());
  ZDP_REQUIRE(wpe != nullptr,
              "'{}': no hyper-parameters (__metadata__ or config.json) and no tensor 'wpe.weight' "
              "to infer them from",
              r.path());
  ZDP_REQUIRE(wte->shape.size() == 2, "'{}': tensor '{}' has shape {}, expected [V, C]", r.path(),
              describe_text(wte->name), shape_str(wte->shape));
  ZDP_REQUIRE(wpe->shape.size() == 2, "'{}': tensor '{}' has shape {}, expected [N, C]", r.path(),
              describe_text(wpe->name), shape_str(wpe->shape));
  int64_t layers = 0;
  for (const TensorEntry& t : r.tensors()) {
    const std::string name = gpt2_canonical_name(t.name);
    int64_t block;
    std::string_view rest;
    if (gpt2_ignored_name(name) || !split_block_name(name, &block, &rest)) continue;
    // A block number is a count of layers: refused here, by the tensor's name, when over the limit.
    ZDP_REQUIRE(block < model::GPT2Limits::kMaxLayers,
                "'{}': tensor '{}' is in block {}, beyond the limit of {} layers (docs/limits.md)", r.path(),
                describe_text(t.name), block, model::GPT2Limits::kMaxLayers);
    layers = std::max(layers, block + 1);
  }
  const std::string where = fmt::format("'{}': tensor shapes", r.path());
  ZDP_REQUIRE(layers > 0, "{}: no block tensors 'h.0.*' to count the layers from", where);
  set_hyper_parameter(*c, "n_layer", layers, where);
  set_hyper_parameter(*c, "vocab_size", wte->shape[0], where);
  set_hyper_parameter(*c, "n_embd", wte->shape[1], where);
  set_hyper_parameter(*c, "n_ctx", wpe->shape[0], where);
}

// Before anything is sized by the config: the file must be able to hold the model it claims.
// Every block tensor's index must be below n_layer, the file may not list more tensors than a model
// of that config can have (its 4 + 12·L parameters, 2·L mask buffers, lm_head), and not fewer than
// its parameters; the first missing one is named. Costs time and memory linear in the file's header,
// never in the claimed L, so a header claiming 2^16 layers with a handful of tensors is refused
// at once.
void check_tensor_counts(const SafetensorsReader& r, const GPT2Config& c, const std::string& config_source) {
  const std::string& path = r.path();
  for (const TensorEntry& t : r.tensors()) {
    int64_t block;
    std::string_view rest;
    if (split_block_name(gpt2_canonical_name(t.name), &block, &rest) && block >= c.n_layer)
      throw UsageError(fmt::format("'{}': unknown tensor '{}' (shape {}): block {} is beyond n_layer {} of a "
                                   "GPT-2 of {} (from {})",
                                   path, describe_text(t.name), shape_str(t.shape), block, c.n_layer, c.summary(),
                                   config_source));
  }
  const int64_t max_in_file = c.num_tensors() + 2 * int64_t{c.n_layer} + 1;
  ZDP_REQUIRE(static_cast<int64_t>(r.tensors().size()) <= max_in_file,
              "'{}': holds {} tensors, more than a GPT-2 of {} (from {}) can have ({}: 4 + 12·L parameters, "
              "2·L attention mask buffers, lm_head)",
              path, r.tensors().size(), c.summary(), config_source, max_in_file);
  std::unordered_set<std::string> present;
  for (const TensorEntry& t : r.tensors()) {
    const std::string name = gpt2_canonical_name(t.name);
    if (!gpt2_ignored_name(name)) present.insert(name);
  }
  if (static_cast<int64_t>(present.size()) >= c.num_tensors()) return;
  // Some parameter is missing; among the first present.size() + 1 expected names, one must be.
  for (int unit = 0; unit <= c.n_layer; ++unit) {
    for (int index = 0; index < ParamLayout::unit_tensor_count(c, unit); ++index) {
      const ParamInfo p = ParamLayout::tensor_info(c, unit, index);
      ZDP_REQUIRE(present.count(p.name) > 0, "'{}': missing tensor '{}' (expected shape {}) for a GPT-2 of {} (from {})",
                  path, p.name, shape_str(p.shape), c.summary(), config_source);
    }
  }
}

}  // namespace

GPT2Weights GPT2Weights::open(const std::string& path, std::optional<int> heads) {
  GPT2Weights w;
  w.reader_ = SafetensorsReader::open(path);
  const SafetensorsReader& r = w.reader_;
  GPT2Config& c = w.config_;

  const std::string json_path = dir_of(path) + "/config.json";
  if (config_from_metadata(r, &c)) {
    w.config_source_ = "__metadata__";
  } else if (config_from_json_beside(path, json_path, &c)) {
    w.config_source_ = json_path;
  } else {
    config_from_shapes(r, &c);
    ZDP_REQUIRE(heads.has_value(),
                "'{}': the number of heads is not in __metadata__ or a config.json beside "
                "the file; give it with --heads",
                path);
    c.n_head = *heads;
    w.config_source_ = "shapes";
  }
  ZDP_REQUIRE(!heads || *heads == c.n_head, "'{}': --heads {} disagrees with n_head {} from {}", path, *heads,
              c.n_head, w.config_source_);
  try {
    c.validate();
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("'{}': hyper-parameters from {}: {}", path, w.config_source_, e.what()));
  }
  check_tensor_counts(r, c, w.config_source_);

  // Every tensor of the file must be a known one with the right shape, and every expected one
  // present. The layout is as large as the file's tensor list (checked just above).
  const ParamLayout layout(c);
  for (size_t i = 0; i < r.tensors().size(); ++i) {
    const TensorEntry& t = r.tensors()[i];
    const std::string name = gpt2_canonical_name(t.name);
    if (gpt2_ignored_name(name)) continue;
    const ParamInfo* p = layout.find(name);
    ZDP_REQUIRE(p != nullptr, "'{}': unknown tensor '{}' (shape {}) for a GPT-2 of {}", path, describe_text(t.name),
                shape_str(t.shape), c.summary());
    ZDP_REQUIRE(t.shape == p->shape, "'{}': tensor '{}' has shape {}, expected {} for a GPT-2 of {}", path,
                describe_text(t.name), shape_str(t.shape), shape_str(p->shape), c.summary());
    ZDP_REQUIRE(w.by_name_.emplace(name, i).second, "'{}': tensor '{}' appears twice (with and without '{}')",
                path, describe_text(name), kGpt2HfPrefix);
  }
  for (const ParamInfo& p : layout.params())
    ZDP_REQUIRE(w.by_name_.count(p.name) > 0,
                "'{}': missing tensor '{}' (expected shape {}) for a GPT-2 of {}", path, p.name,
                shape_str(p.shape), c.summary());
  return w;
}

void GPT2Weights::read_unit_range(const ParamLayout& layout, int unit, size_t begin, size_t count,
                                  float* dst) const {
  ZDP_CHECK(layout.config() == config_, "layout of {} used with weights of {}", layout.config().summary(),
            config_.summary());
  ZDP_CHECK(unit >= 0 && unit < layout.num_units(), "unit {} of {}", unit, layout.num_units());
  const size_t unit_numel = layout.unit_numel(unit);
  ZDP_CHECK(begin <= unit_numel && count <= unit_numel - begin, "elements [{}, {}) are outside unit {} ({})",
            begin, begin + count, unit, unit_numel);
  const size_t end = begin + count;
  for (const ParamInfo* p : layout.unit_params(unit)) {
    const size_t lo = std::max(begin, p->offset), hi = std::min(end, p->offset + p->numel);
    if (lo >= hi) continue;
    const TensorEntry& t = reader_.tensors()[by_name_.at(p->name)];
    SafetensorsReader::read_f32(t, lo - p->offset, hi - lo, dst + (lo - begin));
  }
}

void save_gpt2(const std::string& path, const GPT2Config& config, const ParamLayout& layout,
               const std::function<const float*(int unit)>& unit_data) {
  ZDP_CHECK(layout.config() == config, "layout of {} saved as {}", layout.config().summary(),
            config.summary());
  std::vector<TensorSpec> specs;
  for (const ParamInfo& p : layout.params()) specs.push_back({p.name, DType::kF32, p.shape});
  Metadata meta;
  const nlohmann::json meta_json = config.to_metadata();  // named: items() of a temporary would dangle
  for (const auto& [k, v] : meta_json.items()) meta[k] = v.get<std::string>();
  SafetensorsWriter writer(path, std::move(specs), std::move(meta));
  for (int u = 0; u < layout.num_units(); ++u) {
    const float* data = unit_data(u);
    ZDP_CHECK(data != nullptr || layout.unit_numel(u) == 0, "no data for unit {}", u);
    for (const ParamInfo* p : layout.unit_params(u)) writer.write_tensor(p->name, data + p->offset);
  }
  writer.commit();
}

}  // namespace zerodp::ckpt
