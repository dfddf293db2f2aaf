#include "ckpt/hf_model.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/gpt2_weights.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"

namespace zerodp::ckpt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigFile = kHfConfigFile;
constexpr const char* kSingleFile = kHfSingleFile;
constexpr const char* kIndexFile = kHfIndexFile;
constexpr const char* kIndexWriter = "zerodp";

// The name a model directory gives a layout's tensor: transformers' GPT2LMHeadModel prefixes every
// GPT-2 name with "transformer."; the Llama family's layout names are transformers' own.
std::string hf_tensor_name(const model::ModelConfig& c, const std::string& layout_name) {
  return c.is_gpt2() ? std::string(kGpt2HfPrefix) + layout_name : layout_name;
}

// The layout's name of a file's tensor, or "" for one that is no parameter and is ignored: GPT-2's
// attention-mask buffers and its lm_head (always tied), with or without the prefix; RoPE's inverse
// frequencies, a buffer older transformers kept, and a tied Llama's lm_head.
std::string layout_name_of(const model::ModelConfig& c, std::string_view file_name) {
  if (c.is_gpt2()) {
    std::string name = gpt2_canonical_name(file_name);
    return gpt2_ignored_name(name) ? std::string() : name;
  }
  if (file_name.ends_with(".rotary_emb.inv_freq")) return {};
  if (file_name == "lm_head.weight" && !c.untied_head()) return {};
  return std::string(file_name);
}

// The layout's tensor count, from the config alone (every block has the same tensors).
size_t param_tensor_count(const model::ModelConfig& c) {
  using model::ParamLayout;
  const int units = ParamLayout::units_of(c), L = c.n_layer();
  const auto count = [&](int unit) { return static_cast<size_t>(ParamLayout::unit_tensor_count(c, unit)); };
  size_t n = count(ParamLayout::kEmbeddingUnit) + static_cast<size_t>(L) * count(ParamLayout::block_unit(0));
  if (units > L + 1) n += count(units - 1);  // an untied head's unit
  return n;
}

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
  return model::ModelConfig::from_hf_json(j, label);
}

std::string index_label(const std::string& dir) { return fmt::format("'{}'", (fs::path(dir) / kIndexFile).string()); }

// The index, parsed within its limits: an object with a "weight_map" object.
nlohmann::json read_index_json(const std::string& dir) {
  const std::string label = index_label(dir);
  JsonLimits limits;
  limits.max_bytes = HfDirLimits::kMaxIndexBytes;
  limits.refuse_duplicate_keys = true;
  nlohmann::json j = parse_json(
      read_small_file((fs::path(dir) / kIndexFile).string(), HfDirLimits::kMaxIndexBytes), label, limits);
  ZDP_REQUIRE(j.is_object() && j.contains("weight_map") && j.at("weight_map").is_object(),
              "{}: no 'weight_map' object", label);
  return j;
}

// The shard files of an index and, for each, the names it says the file holds.
std::map<std::string, std::set<std::string>> index_files(const nlohmann::json& index, const std::string& dir) {
  const std::string label = index_label(dir);
  std::map<std::string, std::set<std::string>> files;
  for (const auto& [name, file] : index.at("weight_map").items()) {
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
  const model::ModelConfig& c = m.config_;
  const std::string model = model::model_name(c);

  const bool sharded = file_exists((fs::path(dir) / kIndexFile).string());
  std::map<std::string, std::set<std::string>> listed;
  if (sharded) {
    listed = index_files(read_index_json(dir), dir);
  } else {
    ZDP_REQUIRE(file_exists((fs::path(dir) / kSingleFile).string()), "'{}': neither {} nor {} is there", dir,
                kSingleFile, kIndexFile);
    listed[kSingleFile] = {};
  }
  // The files' tensors by the layout's names, before anything is sized by the config: a config.json
  // claiming 2^16 layers beside a handful of tensors is refused here, not after building the layout
  // of that many. Besides its parameters a file may hold a mask buffer or two a block (GPT-2), an
  // inv_freq a block (Llama) and lm_head.
  const size_t expected = param_tensor_count(c);
  const size_t max_in_file = expected + 2 * static_cast<size_t>(c.n_layer()) + 1;
  struct Found {
    const TensorEntry* tensor;
    const SafetensorsReader* file;
  };
  std::unordered_map<std::string, Found> found;
  m.files_.reserve(listed.size());  // no reallocation: `found` points into the readers
  for (const auto& [file, names] : listed) {
    m.files_.push_back(SafetensorsReader::open((fs::path(dir) / file).string()));
    const SafetensorsReader& r = m.files_.back();
    ZDP_REQUIRE(r.tensors().size() <= max_in_file, "'{}': holds {} tensors, more than a {} has", r.path(),
                r.tensors().size(), model);
    for (const TensorEntry& t : r.tensors()) {
      const std::string name = layout_name_of(c, t.name);
      if (name.empty()) continue;
      ZDP_REQUIRE(!sharded || names.count(t.name) > 0, "'{}': tensor '{}' is not the index's for this file",
                  r.path(), describe_text(t.name));
      const auto [it, added] = found.emplace(name, Found{&t, &r});
      ZDP_REQUIRE(added, "'{}': tensor '{}' appears twice, as '{}' in '{}' and as '{}' in '{}'", dir,
                  describe_text(name), describe_text(it->second.tensor->name), it->second.file->path(),
                  describe_text(t.name), r.path());
    }
  }
  if (found.size() < expected) {
    // Some parameter is missing: one of the first found.size() + 1 expected names is.
    for (int unit = 0; unit < model::ParamLayout::units_of(c); ++unit) {
      for (int i = 0; i < model::ParamLayout::unit_tensor_count(c, unit); ++i) {
        const model::ParamInfo p = model::ParamLayout::tensor_info(c, unit, i);
        ZDP_REQUIRE(found.count(p.name) > 0, "'{}': missing tensor '{}' (expected shape {}) for a {}", dir,
                    hf_tensor_name(c, p.name), shape_str(p.shape), model);
      }
    }
  }
  const model::ParamLayout layout(c);  // no more tensors than the files hold
  for (const SafetensorsReader& r : m.files_) {
    for (const TensorEntry& t : r.tensors()) {
      const std::string name = layout_name_of(c, t.name);
      if (name.empty()) continue;
      const model::ParamInfo* p = layout.find(name);
      ZDP_REQUIRE(p != nullptr, "'{}': unknown tensor '{}' (shape {}) for a {}", r.path(), describe_text(t.name),
                  shape_str(t.shape), model);
      ZDP_REQUIRE(t.shape == p->shape, "'{}': tensor '{}' has shape {}, expected {} for a {}", r.path(),
                  describe_text(t.name), shape_str(t.shape), shape_str(p->shape), model);
    }
  }
  for (const model::ParamInfo& p : layout.params()) {
    const auto it = found.find(p.name);
    ZDP_REQUIRE(it != found.end(), "'{}': missing tensor '{}' (expected shape {}) for a {}", dir,
                hf_tensor_name(c, p.name), shape_str(p.shape), model);
    m.by_name_.emplace(p.name, it->second.tensor);
  }
  m.dtype_ = m.by_name_.at(layout.param(model::ParamLayout::kEmbeddingUnit, 0).name)->dtype;
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

std::vector<std::string> write_hf_files(const std::string& dir, const model::ParamLayout& layout, DType dtype,
                                        uint64_t shard_bytes,
                                        const std::function<const float*(int unit)>& unit_data) {
  const std::vector<std::string> files = hf_shard_files(layout, dtype, shard_bytes);
  const fs::path out_dir(dir);
  // The shards' specs, in layout order, under transformers' names; a tied lm_head is not a tensor of
  // the layout at all.
  const model::ModelConfig& c = layout.config();
  const std::vector<model::ParamInfo>& params = layout.params();
  std::vector<std::unique_ptr<SafetensorsWriter>> writers;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < params.size();) {
    const std::string& file = files[i];
    std::vector<TensorSpec> specs;
    for (; i < params.size() && files[i] == file; ++i) {
      const std::string name = hf_tensor_name(c, params[i].name);
      specs.push_back({name, dtype, params[i].shape});
      weight_map[name] = file;
      total += static_cast<uint64_t>(params[i].numel) * dtype_size(dtype);
    }
    writers.push_back(std::make_unique<SafetensorsWriter>((out_dir / file).string(), std::move(specs),
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
      writers[writer]->write_tensor_f32(hf_tensor_name(c, p->name), data + p->offset);
      ++in_writer;
    }
  }
  writers[writer]->commit();
  std::vector<std::string> written(files.begin(), files.end());
  written.erase(std::unique(written.begin(), written.end()), written.end());
  if (writers.size() > 1) {
    // "writer" marks the index as zerodp's: a later save into the directory may then remove the shards
    // it names (transformers reads only "weight_map" and "total_size").
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", total}, {"writer", kIndexWriter}}},
                                          {"weight_map", weight_map}};
    write_file_atomic((out_dir / kIndexFile).string(), index.dump(2) + "\n");
    written.push_back(kIndexFile);
  }
  write_file_atomic((out_dir / kConfigFile).string(), c.to_hf_json(torch_dtype_name(dtype)).dump(2) + "\n");
  written.push_back(kConfigFile);
  return written;
}

HfIndexFiles read_hf_index_files(const std::string& dir) {
  HfIndexFiles out;
  const nlohmann::json j = read_index_json(dir);
  for (const auto& [file, names] : index_files(j, dir)) out.files.insert(file);
  const auto meta = j.find("metadata");
  out.written_by_zerodp = meta != j.end() && meta->is_object() && meta->contains("writer") &&
                          meta->at("writer") == kIndexWriter;
  return out;
}

}  // namespace zerodp::ckpt
