#include "ckpt/hf_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"

namespace zerodp::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = "config.json";
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

// Tensors some checkpoints carry that are not parameters: RoPE's inverse frequencies, kept as a
// buffer by older transformers.
bool is_ignored_buffer(std::string_view name) { return name.ends_with(".rotary_emb.inv_freq"); }

// A shard's name from an index: a plain file name in the directory, nothing that reaches outside it.
bool plain_file_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name.find('/') == std::string_view::npos &&
         name.find('\\') == std::string_view::npos && name != "." && name != ".." &&
         name.find('\0') == std::string_view::npos;
}

model::ModelConfig read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / kConfigFile).string();
  const std::string label = fmt::format("'{}'", path);
  const nlohmann::json j = parse_json(read_small_file(path, HfDirLimits::kMaxConfigBytes), label);
  ZDP_REQUIRE(j.is_object(), "{}: not a JSON object but {}", label, describe_json(j));
  const std::string type = j.contains("model_type") && j.at("model_type").is_string()
                               ? j.at("model_type").get<std::string>()
                               : std::string();
  ZDP_REQUIRE(type == "llama" || type == "qwen2",
              "{}: model_type is {}: zerodp reads 'llama' and 'qwen2' model directories (a GPT-2 is one "
              "safetensors file)",
              label, j.contains("model_type") ? describe_json(j.at("model_type")) : std::string("missing"));
  return model::LlamaConfig::from_hf_json(j, label);
}

// The shard files and, for each, the names the index says it holds.
std::map<std::string, std::set<std::string>> read_index(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexFile).string();
  const std::string label = fmt::format("'{}'", path);
  JsonLimits limits;
  limits.max_bytes = HfDirLimits::kMaxIndexBytes;
  limits.refuse_duplicate_keys = true;
  const nlohmann::json j = parse_json(read_small_file(path, HfDirLimits::kMaxIndexBytes), label, limits);
  ZDP_REQUIRE(j.is_object() && j.contains("weight_map") && j.at("weight_map").is_object(),
              "{}: no 'weight_map' object", label);
  std::map<std::string, std::set<std::string>> files;
  for (const auto& [name, file] : j.at("weight_map").items()) {
    ZDP_REQUIRE(file.is_string() && plain_file_name(file.get<std::string>()),
                "{}: tensor '{}' is mapped to {}, not a file name in the directory", label, describe_text(name),
                describe_json(file));
    files[file.get<std::string>()].insert(name);
    ZDP_REQUIRE(files.size() <= HfDirLimits::kMaxShards, "{}: names more than {} files", label,
                HfDirLimits::kMaxShards);
  }
  ZDP_REQUIRE(!files.empty(), "{}: the weight map is empty", label);
  return files;
}

}  // namespace

const char* torch_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
    default: return "float32";
  }
}

bool HfModelDir::is_model_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / kConfigFile, ec);
}

HfModelDir HfModelDir::open(const std::string& dir) {
  ZDP_REQUIRE(is_model_dir(dir), "'{}': not a model directory (no config.json in it)", dir);
  HfModelDir m;
  m.dir_ = dir;
  m.config_ = read_config(dir);
  const model::ParamLayout layout(m.config_);  // sized by a validated config, within LlamaLimits

  const bool sharded = file_exists((fs::path(dir) / kIndexFile).string());
  std::map<std::string, std::set<std::string>> listed;
  if (sharded) {
    listed = read_index(dir);
  } else {
    ZDP_REQUIRE(file_exists((fs::path(dir) / kSingleFile).string()), "'{}': neither {} nor {} is there", dir,
                kSingleFile, kIndexFile);
    listed[kSingleFile] = {};
  }
  m.files_.reserve(listed.size());
  const size_t max_tensors = layout.params().size() + 1 + static_cast<size_t>(m.config_.n_layer());
  for (const auto& [file, names] : listed) {
    m.files_.push_back(SafetensorsReader::open((fs::path(dir) / file).string()));
    const SafetensorsReader& r = m.files_.back();
    ZDP_REQUIRE(r.tensors().size() <= max_tensors, "'{}': holds {} tensors, more than a {} has", r.path(),
                r.tensors().size(), m.config_.summary());
    for (const TensorEntry& t : r.tensors()) {
      if (is_ignored_buffer(t.name)) continue;
      ZDP_REQUIRE(!sharded || names.count(t.name) > 0, "'{}': tensor '{}' is not the index's for this file",
                  r.path(), describe_text(t.name));
      const model::ParamInfo* p = layout.find(t.name);
      if (p == nullptr && t.name == "lm_head.weight" && !m.config_.untied_head()) continue;  // tied: ignored
      ZDP_REQUIRE(p != nullptr, "'{}': unknown tensor '{}' (shape {}) for a {}", r.path(), describe_text(t.name),
                  shape_str(t.shape), m.config_.summary());
      ZDP_REQUIRE(t.shape == p->shape, "'{}': tensor '{}' has shape {}, expected {} for a {}", r.path(), t.name,
                  shape_str(t.shape), shape_str(p->shape), m.config_.summary());
      ZDP_REQUIRE(m.by_name_.emplace(t.name, &t).second, "'{}': tensor '{}' appears in two files", dir, t.name);
    }
  }
  for (const model::ParamInfo& p : layout.params())
    ZDP_REQUIRE(m.by_name_.count(p.name) > 0, "'{}': missing tensor '{}' (expected shape {}) for a {}", dir, p.name,
                shape_str(p.shape), m.config_.summary());
  m.dtype_ = m.by_name_.at("model.embed_tokens.weight")->dtype;
  return m;
}

void HfModelDir::read_unit_range(const model::ParamLayout& layout, int unit, size_t begin, size_t count,
                                 float* dst) const {
  ZDP_CHECK(layout.config() == config_, "layout of {} used with the model of {}", layout.config().summary(),
            config_.summary());
  const size_t unit_numel = layout.unit_numel(unit);
  ZDP_CHECK(begin <= unit_numel && count <= unit_numel - begin, "elements [{}, {}) are outside unit {} ({})", begin,
            begin + count, unit, unit_numel);
  const size_t end = begin + count;
  for (const model::ParamInfo* p : layout.unit_params(unit)) {
    const size_t lo = std::max(begin, p->offset), hi = std::min(end, p->offset + p->numel);
    if (lo >= hi) continue;
    SafetensorsReader::read_f32(*by_name_.at(p->name), lo - p->offset, hi - lo, dst + (lo - begin));
  }
}

std::vector<std::string> hf_shard_files(const model::ParamLayout& layout, DType dtype, uint64_t shard_bytes) {
  ZDP_REQUIRE(shard_bytes > 0, "the shard size must be positive");
  std::vector<size_t> shard_of;
  size_t shards = 0;
  uint64_t in_shard = 0;
  for (const model::ParamInfo& p : layout.params()) {
    const uint64_t bytes = static_cast<uint64_t>(p.numel) * dtype_size(dtype);
    if (shards == 0 || (in_shard > 0 && in_shard + bytes > shard_bytes)) {
      ++shards;
      in_shard = 0;
    }
    in_shard += bytes;
    shard_of.push_back(shards);
  }
  std::vector<std::string> names;
  for (size_t s : shard_of)
    names.push_back(shards == 1 ? kSingleFile : fmt::format("model-{:05d}-of-{:05d}.safetensors", s, shards));
  return names;
}

void check_hf_output(const std::string& dir, std::string_view flag) {
  std::error_code ec;
  const fs::path path(dir);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  ZDP_REQUIRE(fs::is_directory(parent, ec), "{} '{}': the directory {} does not exist", flag, dir, parent.string());
  if (!fs::exists(path, ec)) return;
  ZDP_REQUIRE(fs::is_directory(path, ec), "{} '{}': exists and is not a directory", flag, dir);
  ZDP_REQUIRE(fs::is_empty(path, ec) || HfModelDir::is_model_dir(dir),
              "{} '{}': exists and is neither empty nor a model directory (no config.json): not replaced", flag, dir);
}

void save_hf_model(const std::string& dir, const model::ParamLayout& layout, DType dtype, uint64_t shard_bytes,
                   const std::function<const float*(int unit)>& unit_data) {
  check_hf_output(dir, "--out");
  ZDP_REQUIRE(layout.config().is_llama(), "a Hugging Face directory of GPT-2 is not written yet");
  const std::vector<std::string> files = hf_shard_files(layout, dtype, shard_bytes);
  const fs::path target(dir);
  const fs::path staging = target.string() + fmt::format(".partial-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) throw RuntimeFailure(fmt::format("'{}': cannot create it: {}", staging.string(), ec.message()));
  struct RemoveStaging {
    fs::path p;
    bool keep = false;
    ~RemoveStaging() {
      std::error_code e;
      if (!keep) fs::remove_all(p, e);
    }
  } cleanup{staging};

  // The shards' specs, in layout order; the tied lm_head is not a tensor of the layout at all.
  const std::vector<model::ParamInfo>& params = layout.params();
  std::vector<std::unique_ptr<SafetensorsWriter>> writers;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < params.size();) {
    const std::string& file = files[i];
    std::vector<TensorSpec> specs;
    for (; i < params.size() && files[i] == file; ++i) {
      specs.push_back({params[i].name, dtype, params[i].shape});
      weight_map[params[i].name] = file;
      total += static_cast<uint64_t>(params[i].numel) * dtype_size(dtype);
    }
    writers.push_back(std::make_unique<SafetensorsWriter>((staging / file).string(), std::move(specs),
                                                          Metadata{{"format", "pt"}}));
  }
  size_t writer = 0, in_writer = 0;
  for (int u = 0; u < layout.num_units(); ++u) {
    const float* data = unit_data(u);
    for (const model::ParamInfo* p : layout.unit_params(u)) {
      const size_t index = static_cast<size_t>(p - params.data());
      if (index > 0 && files[index] != files[index - 1]) {
        writers[writer]->commit();
        ++writer;
        in_writer = 0;
      }
      writers[writer]->write_tensor_f32(p->name, data + p->offset);
      ++in_writer;
    }
  }
  writers[writer]->commit();
  if (writers.size() > 1) {
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic((staging / kIndexFile).string(), index.dump(2) + "\n");
  }
  write_file_atomic((staging / kConfigFile).string(),
                    layout.config().llama().to_hf_json(torch_dtype_name(dtype)).dump(2) + "\n");

  // Publish: an earlier directory is moved aside, the new one renamed in, the old one removed.
  const fs::path old = target.string() + fmt::format(".old-{}", ::getpid());
  const bool existed = fs::exists(target, ec);
  if (existed) {
    fs::rename(target, old, ec);
    if (ec) throw RuntimeFailure(fmt::format("'{}': cannot move the earlier directory aside: {}", dir, ec.message()));
  }
  fs::rename(staging, target, ec);
  if (ec) {
    std::error_code back;
    if (existed) fs::rename(old, target, back);
    throw RuntimeFailure(fmt::format("'{}': cannot publish the new directory: {}", dir, ec.message()));
  }
  cleanup.keep = true;
  if (existed) fs::remove_all(old, ec);
}

}  // namespace zerodp::ckpt
