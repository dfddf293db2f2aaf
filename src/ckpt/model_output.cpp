#include "ckpt/model_output.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ckpt/gpt2_weights.h"
#include "ckpt/hf_model.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/output_path.h"

namespace zerodp::ckpt {

namespace fs = std::filesystem;

namespace {

// "runs/out/" names the directory "runs/out": its parent, staging and old names are beside that.
fs::path without_trailing_slash(const std::string& dir) { return fs::path(without_trailing_slashes(dir)); }

constexpr std::string_view kInnerStaging = ".zerodp-partial-";

// Removes, in `dir`, the staging directories named `prefix<pid>` of processes no longer alive on this
// host (a run killed while writing): they hold a partial model nobody will finish.
void remove_dead_stagings(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code e;
    fs::remove_all(it->path(), e);
  }
}

// Renames staging/name over dir/name.
void publish_file(const fs::path& staging, const fs::path& dir, const std::string& name) {
  std::error_code ec;
  fs::rename(staging / name, dir / name, ec);
  if (ec) throw RuntimeFailure(fmt::format("'{}': cannot put {} in place: {}", dir.string(), name, ec.message()));
}

// The earlier model's files in `dir` that the new one (the files `written`) leaves behind and that
// would be read in its place or are named by zerodp's own index; `foreign` gets the shards of an index
// zerodp did not write, which stay.
std::vector<std::string> stale_model_files(const fs::path& dir, const std::vector<std::string>& written,
                                           std::vector<std::string>& foreign) {
  const std::set<std::string> now(written.begin(), written.end());
  const bool sharded = now.count(kHfIndexFile) > 0;
  std::vector<std::string> stale;
  std::error_code ec;
  if (fs::is_regular_file(dir / kHfIndexFile, ec)) {
    HfIndexFiles old;
    try {
      old = read_hf_index_files(dir.string());
    } catch (const UsageError&) {
      // Not an index zerodp can read: it names nothing to remove (it is replaced or removed below).
    }
    for (const std::string& f : old.files) {
      if (now.count(f) > 0 || !fs::is_regular_file(dir / f, ec)) continue;
      (old.written_by_zerodp ? stale : foreign).push_back(f);
    }
    if (!sharded) stale.push_back(kHfIndexFile);
  }
  if (sharded && fs::is_regular_file(dir / kHfSingleFile, ec)) stale.push_back(kHfSingleFile);
  return stale;
}

// Copies the companion files of out.companions_from that the target lacks into `staging`; returns
// their names.
std::vector<std::string> copy_companions(const ModelOutput& out, const fs::path& target, const fs::path& staging) {
  std::vector<std::string> copied;
  if (out.companions_from.empty()) return copied;
  std::error_code ec;
  const fs::path from = without_trailing_slash(out.companions_from);
  if (fs::equivalent(from, target, ec)) return copied;  // --init D --out D: they are there already
  for (const std::string& name : companion_files()) {
    if (!fs::is_regular_file(from / name, ec) || fs::exists(target / name, ec)) continue;
    fs::copy_file(from / name, staging / name, ec);
    if (ec)
      throw RuntimeFailure(fmt::format("copying '{}' into '{}': {}", (from / name).string(), out.path, ec.message()));
    sync_path((staging / name).string());
    copied.push_back(name);
  }
  return copied;
}

void save_hf_model(const ModelOutput& out, const model::ParamLayout& layout, DType dtype, uint64_t shard_bytes,
                   const std::function<const float*(int unit)>& unit_data) {
  const fs::path target = without_trailing_slash(out.path);
  std::error_code ec;
  const bool existed = fs::is_directory(target, ec);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string beside_prefix = target.filename().string() + ".partial-";
  remove_dead_stagings(existed ? target : parent, existed ? std::string(kInnerStaging) : beside_prefix);
  const fs::path staging = existed ? target / fmt::format("{}{}", kInnerStaging, ::getpid())
                                   : fs::path(fmt::format("{}{}", target.string() + ".partial-", ::getpid()));
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

  std::vector<std::string> written = write_hf_files(staging.string(), layout, dtype, shard_bytes, unit_data);
  const std::vector<std::string> companions = copy_companions(out, target, staging);
  if (!companions.empty())
    log::info("{}: with {} from {}", out.path, fmt::join(companions, ", "), out.companions_from);

  if (!existed) {
    fs::rename(staging, target, ec);
    if (ec) throw RuntimeFailure(fmt::format("'{}': cannot publish the new directory: {}", out.path, ec.message()));
    cleanup.keep = true;
    sync_path(parent.string());
    return;
  }
  std::vector<std::string> foreign;
  const std::vector<std::string> stale = stale_model_files(target, written, foreign);
  // The weights first, then the index, config.json last: until config.json lands, the directory reads
  // as the model it was written for at every moment but within these renames.
  std::stable_partition(written.begin(), written.end(),
                        [](const std::string& f) { return f != kHfIndexFile && f != kHfConfigFile; });
  for (const std::string& f : companions) publish_file(staging, target, f);
  for (const std::string& f : written) publish_file(staging, target, f);
  sync_path(target.string());
  for (const std::string& f : stale) fs::remove(target / f, ec);
  if (!stale.empty()) sync_path(target.string());
  if (!foreign.empty())
    log::warn("{}: kept {} weight file(s) of the earlier model that zerodp did not write ({}{}); the new model does "
              "not use them",
              out.path, foreign.size(), foreign.front(), foreign.size() > 1 ? ", ..." : "");
}

}  // namespace

ModelForm output_form(const model::ModelConfig& config, const std::string& path, bool from_model_dir) {
  if (config.is_llama()) return ModelForm::kModelDir;
  std::error_code ec;
  if (path.ends_with('/') || fs::is_directory(path, ec)) return ModelForm::kModelDir;
  return from_model_dir && !path.ends_with(".safetensors") ? ModelForm::kModelDir : ModelForm::kGpt2File;
}

const std::vector<std::string>& companion_files() {
  static const std::vector<std::string> names = {
      "tokenizer.json",        "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
      "vocab.json",            "merges.txt",            "tokenizer.model",         "chat_template.jinja",
      "chat_template.json",    "generation_config.json",
  };
  return names;
}

bool holds_model(const std::string& dir) {
  const fs::path config = without_trailing_slash(dir) / kHfConfigFile;
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return false;
  try {
    const nlohmann::json j = parse_json(read_small_file(config.string(), HfDirLimits::kMaxConfigBytes), "config.json");
    return j.is_object() && (j.contains("model_type") || j.contains("architectures"));
  } catch (const UsageError&) {
    return false;  // not JSON, or too large: not a model's config
  }
}

void check_model_output(const ModelOutput& out, ModelForm form) {
  if (form == ModelForm::kGpt2File) return check_output_path(out.path, OutputKind::kFile, out.flag);
  check_output_path(out.path, OutputKind::kDirectory, out.flag);
  std::error_code ec;
  const fs::path dir = without_trailing_slash(out.path);
  if (!fs::is_directory(dir, ec) || fs::is_empty(dir, ec) || holds_model(out.path) || out.overwrite_output_dir)
    return;
  throw UsageError(fmt::format(
      "{} '{}': holds files but no model ({}): zerodp would write config.json and the weights beside them; give "
      "an empty or new directory, or --overwrite-output-dir to write there all the same (other files are kept)",
      out.flag, out.path,
      fs::exists(dir / kHfConfigFile, ec) ? "its config.json has no \"model_type\" or \"architectures\""
                                          : "no config.json"));
}

void save_model(const ModelOutput& out, ModelForm form, const model::ParamLayout& layout, DType dtype,
                uint64_t shard_bytes, const std::function<const float*(int unit)>& unit_data) {
  check_model_output(out, form);
  if (form == ModelForm::kModelDir) {
    save_hf_model(out, layout, dtype, shard_bytes, unit_data);
  } else {
    ZDP_CHECK(layout.config().is_gpt2(), "a {} written as one GPT-2 file", layout.config().summary());
    save_gpt2(out.path, layout.config().gpt2(), layout, unit_data);
  }
}

}  // namespace zerodp::ckpt
