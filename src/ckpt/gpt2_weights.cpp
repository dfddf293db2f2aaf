#include "ckpt/gpt2_weights.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace zerodp::ckpt {

namespace {

using model::GPT2Config;
using model::ParamInfo;
using model::ParamLayout;

constexpr std::string_view kPrefix = "transformer.";
constexpr std::array<std::string_view, 5> kConfigKeys = {"n_layer", "n_head", "n_embd", "vocab_size",
                                                         "n_ctx"};

int* config_field(GPT2Config& c, std::string_view key) {
  if (key == "n_layer") return &c.n_layer;
  if (key == "n_head") return &c.n_head;
  if (key == "n_embd") return &c.n_embd;
  if (key == "vocab_size") return &c.vocab_size;
  return &c.n_ctx;
}

bool parse_int(std::string_view s, int* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && !s.empty();
}

// "h.12.attn.bias" -> block 12, rest "attn.bias". False when the name is not a block tensor's.
bool split_block_name(std::string_view name, int* block, std::string_view* rest) {
  if (name.substr(0, 2) != "h.") return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string_view::npos || dot == 2) return false;
  if (!parse_int(name.substr(2, dot - 2), block) || *block < 0) return false;
  *rest = name.substr(dot + 1);
  return true;
}

// Buffers of Hugging Face checkpoints that are not parameters (the causal mask) or are tied.
bool is_ignored(std::string_view name) {
  if (name == "lm_head.weight") return true;
  int block;
  std::string_view rest;
  return split_block_name(name, &block, &rest) && (rest == "attn.bias" || rest == "attn.masked_bias");
}

std::string canonical_name(std::string_view name) {
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  return std::string(name);
}

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
  for (std::string_view key : kConfigKeys) {
    const auto it = meta.find(std::string(key));
    ZDP_REQUIRE(it != meta.end(), "'{}': __metadata__ has some model hyper-parameters but not '{}'", r.path(),
                key);
    ZDP_REQUIRE(parse_int(it->second, config_field(*c, key)),
                "'{}': __metadata__ value of '{}' is '{}', not an integer", r.path(), key, it->second);
  }
  return true;
}

// The hyper-parameters in a config.json, if the file exists and has any of the keys.
bool config_from_json(const std::string& json_path, GPT2Config* c) {
  if (!file_exists(json_path)) return false;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(json_path));
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(fmt::format("'{}': not valid JSON ({})", json_path, e.what()));
  }
  if (!j.is_object()) throw UsageError(fmt::format("'{}': not a JSON object", json_path));
  if (!j.contains("n_ctx") && j.contains("n_positions")) j["n_ctx"] = j["n_positions"];  // newer HF configs
  const bool any = std::any_of(kConfigKeys.begin(), kConfigKeys.end(),
                               [&](std::string_view k) { return j.contains(std::string(k)); });
  if (!any) return false;
  for (std::string_view key : kConfigKeys) {
    const auto it = j.find(std::string(key));
    ZDP_REQUIRE(it != j.end(), "'{}': has some model hyper-parameters but not '{}'", json_path, key);
    bool ok = false;
    if (it->is_number_integer()) {
      const int64_t v = it->get<int64_t>();
      ok = v >= INT32_MIN && v <= INT32_MAX;
      if (ok) *config_field(*c, key) = static_cast<int>(v);
    } else if (it->is_string()) {
      ok = parse_int(it->get_ref<const std::string&>(), config_field(*c, key));
    }
    ZDP_REQUIRE(ok, "'{}': value of '{}' is {}, not an integer", json_path, key, it->dump());
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
  ZDP_REQUIRE(wte->shape.size() == 2, "'{}': tensor '{}' has shape {}, expected [V, C]", r.path(), wte->name,
              shape_str(wte->shape));
  ZDP_REQUIRE(wpe->shape.size() == 2, "'{}': tensor '{}' has shape {}, expected [N, C]", r.path(), wpe->name,
              shape_str(wpe->shape));
  int layers = 0;
  for (const TensorEntry& t : r.tensors()) {
    const std::string name = canonical_name(t.name);
    int block;
    std::string_view rest;
    if (!is_ignored(name) && split_block_name(name, &block, &rest)) layers = std::max(layers, block + 1);
  }
  auto to_int = [&](int64_t v, const char* what) {
    ZDP_REQUIRE(v > 0 && v <= INT32_MAX, "'{}': {} of {} is out of range", r.path(), what, v);
    return static_cast<int>(v);
  };
  c->n_layer = layers;
  c->vocab_size = to_int(wte->shape[0], "vocab size");
  c->n_embd = to_int(wte->shape[1], "embedding width");
  c->n_ctx = to_int(wpe->shape[0], "context length");
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

  // Every tensor of the file must be a known one with the right shape, and every expected one present.
  const ParamLayout layout(c);
  for (size_t i = 0; i < r.tensors().size(); ++i) {
    const TensorEntry& t = r.tensors()[i];
    const std::string name = canonical_name(t.name);
    if (is_ignored(name)) continue;
    const ParamInfo* p = layout.find(name);
    ZDP_REQUIRE(p != nullptr, "'{}': unknown tensor '{}' (shape {}) for a GPT-2 of {}", path, t.name,
                shape_str(t.shape), c.summary());
    ZDP_REQUIRE(t.shape == p->shape, "'{}': tensor '{}' has shape {}, expected {} for a GPT-2 of {}", path,
                t.name, shape_str(t.shape), shape_str(p->shape), c.summary());
    ZDP_REQUIRE(w.by_name_.emplace(name, i).second, "'{}': tensor '{}' appears twice (with and without '{}')",
                path, name, kPrefix);
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
