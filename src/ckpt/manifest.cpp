#include "ckpt/manifest.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/checked.h"
#include "core/error.h"
#include "core/json.h"

namespace zerodp::ckpt {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Limits on what a manifest may hold (docs/limits.md), beyond those of the model (model/gpt2_config.h):
// strings are names and paths (PATH_MAX is 4096); `training` is informative and its settings are
// echoed in messages, so each stays short; the data position's factors are those of a run, whose
// product W·G·B·T (tokens a step) and step·W·G·B·T (tokens read) must fit an int64.
constexpr size_t kMaxManifestString = 4096;
constexpr size_t kMaxTrainingValueBytes = 1024;
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;
constexpr int64_t kMaxBatchFactor = int64_t{1} << 24;  // micro_batch, accum

// Typed access to the manifest's keys; every failure names the manifest and the key's path.
class Schema {
 public:
  explicit Schema(const std::string& label) : label_(label) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw UsageError(fmt::format("'{}': bad checkpoint manifest: key '{}': {}", label_, path, what));
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw UsageError(fmt::format("'{}': bad checkpoint manifest: {}", label_, what));
  }

  const json& field(const json& obj, const std::string& path, const std::string& key) const {
    const std::string full = path.empty() ? key : path + "." + key;
    if (!obj.is_object()) fail(path.empty() ? "(top level)" : path, "must be an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(full, "missing");
    return *it;
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  int64_t integer(const json& obj, const std::string& path, const std::string& key, int64_t lo,
                  int64_t hi = std::numeric_limits<int64_t>::max()) const {
    const json& v = field(obj, path, key);
    const std::string full = join(path, key);
    if (!v.is_number_integer()) fail(full, fmt::format("must be an integer, got {}", describe_json(v)));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      fail(full, fmt::format("must be at most {}, got {}", hi, describe_json(v)));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) fail(full, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
    return x;
  }
  size_t size(const json& obj, const std::string& path, const std::string& key) const {
    return static_cast<size_t>(integer(obj, path, key, 0));
  }
  double number(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      fail(join(path, key), fmt::format("must be a finite number, got {}", describe_json(v)));
    return v.get<double>();
  }
  std::string string(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_string()) fail(join(path, key), fmt::format("must be a string, got {}", describe_json(v)));
    if (v.get_ref<const std::string&>().size() > kMaxManifestString)
      fail(join(path, key), fmt::format("must be at most {} bytes, got {}", kMaxManifestString, describe_json(v)));
    return v.get<std::string>();
  }
  const json& array(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(join(path, key), fmt::format("must be an array, got {}", describe_json(v)));
    return v;
  }
  const json& object(const json& obj, const std::string& path, const std::string& key) const {
    const json& v = field(obj, path, key);
    if (!v.is_object()) fail(join(path, key), fmt::format("must be an object, got {}", describe_json(v)));
    return v;
  }

  const std::string& label() const { return label_; }

 private:
  const std::string& label_;
};

// The pieces of one tensor: the parts of the ranks' unit ranges that fall inside it, in element order.
struct TensorPiece {
  int rank;
  size_t begin, end;     // elements of the tensor
  size_t file_offset;    // element of the rank file's unit.<u>.* arrays where the piece starts
};
// Every unit's ranges, sorted by where they begin (ranges of one unit never overlap, so they are then
// sorted by where they end too): each tensor finds its pieces by binary search, so that listing them
// all costs time in the number of pieces, not tensors times ranges.
struct RangeOf {
  size_t begin, end;
  int rank;
};
std::vector<std::vector<RangeOf>> ranges_by_unit(const std::vector<RankFile>& ranks, int num_units) {
  std::vector<std::vector<RangeOf>> out(static_cast<size_t>(num_units));
  for (const RankFile& f : ranks)
    for (const UnitRange& r : f.ranges) out.at(static_cast<size_t>(r.unit)).push_back({r.begin, r.end, f.rank});
  for (auto& v : out)
    std::sort(v.begin(), v.end(), [](const RangeOf& a, const RangeOf& b) { return a.begin < b.begin; });
  return out;
}
std::vector<TensorPiece> tensor_pieces(const model::ParamInfo& p, const std::vector<RangeOf>& unit_ranges) {
  std::vector<TensorPiece> out;
  const size_t t_begin = p.offset, t_end = p.offset + p.numel;
  auto it = std::partition_point(unit_ranges.begin(), unit_ranges.end(),
                                 [&](const RangeOf& r) { return r.end <= t_begin; });
  for (; it != unit_ranges.end() && it->begin < t_end; ++it) {
    const size_t b = std::max(it->begin, t_begin), e = std::min(it->end, t_end);
    if (b < e) out.push_back({it->rank, b - t_begin, e - t_begin, b - it->begin});
  }
  return out;
}

ordered_json tensor_json(const model::ParamInfo& p) {
  return ordered_json{{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}};
}

}  // namespace

std::vector<std::string> optimizer_state_names(const std::string& optimizer, bool sgd_momentum) {
  // Muon keeps AdamW's layout (optim/optimizer.h): its matrices' momentum in exp_avg, their exp_avg_sq zero.
  if (optimizer == "AdamW" || optimizer == "Muon") return {"exp_avg", "exp_avg_sq"};
  if (optimizer == "SGD") return sgd_momentum ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  throw UsageError(fmt::format("unknown optimizer '{}' (expected AdamW, SGD or Muon)", optimizer));
}

std::string rank_file_name(int rank) { return fmt::format("rank-{:05d}.safetensors", rank); }
std::string rank_tensor_name(int unit, std::string_view what) { return fmt::format("unit.{}.{}", unit, what); }
std::string checkpoint_dir_name(int64_t step) { return fmt::format("step-{}", step); }

std::string crc_hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

bool is_crc_hex(const std::string& text) {
  return text.size() == 8 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

uint32_t parse_crc_hex(const std::string& text, const std::string& label) {
  ZDP_REQUIRE(is_crc_hex(text), "'{}': a CRC-32C must be 8 hexadecimal digits, got '{}'", label, describe_text(text));
  return static_cast<uint32_t>(std::stoul(text, nullptr, 16));
}

ordered_json manifest_to_json(const Manifest& m) {
  const model::ParamLayout layout(m.model);
  ordered_json units = ordered_json::array();
  for (int u = 0; u < layout.num_units(); ++u) {
    const UnitShape& s = m.units.at(static_cast<size_t>(u));
    ordered_json tensors = ordered_json::array();
    for (const model::ParamInfo* p : layout.unit_params(u)) tensors.push_back(tensor_json(*p));
    units.push_back({{"unit", u}, {"numel", s.numel}, {"padded", s.padded}, {"shard", s.shard}, {"tensors", tensors}});
  }
  ordered_json files = ordered_json::array();
  for (const RankFile& f : m.ranks) {
    ordered_json ranges = ordered_json::array();
    for (const UnitRange& r : f.ranges) ranges.push_back({{"unit", r.unit}, {"begin", r.begin}, {"end", r.end}});
    files.push_back({{"rank", f.rank},
                     {"file", f.file},
                     {"bytes", f.bytes},
                     {"crc32c", crc_hex(f.crc32c)},
                     {"ranges", ranges}});
  }
  ordered_json tensors = ordered_json::array();
  const std::vector<std::vector<RangeOf>> by_unit = ranges_by_unit(m.ranks, layout.num_units());
  for (const model::ParamInfo& p : layout.params()) {
    ordered_json pieces = ordered_json::array();
    for (const TensorPiece& t : tensor_pieces(p, by_unit[static_cast<size_t>(p.unit)]))
      pieces.push_back({{"rank", t.rank},
                        {"begin", t.begin},
                        {"end", t.end},
                        {"file_tensor", rank_tensor_name(p.unit, "weights")},
                        {"file_offset", t.file_offset}});
    tensors.push_back({{"name", p.name}, {"unit", p.unit}, {"shape", p.shape}, {"pieces", pieces}});
  }
  ordered_json model_json;
  if (m.model.is_gpt2()) {
    const model::GPT2Config& c = m.model.gpt2();
    model_json = {{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd}, {"vocab_size", c.vocab_size},
                  {"n_ctx", c.n_ctx}};
  } else {
    model_json = ordered_json(m.model.to_json());
  }
  ordered_json data{{"path", m.data.path},
                    {"micro_batch", m.data.micro_batch},
                    {"seq", m.data.seq},
                    {"accum", m.data.accum}};
  if (m.data.ranks != 0 && m.data.ranks != m.world_size) data["ranks"] = m.data.ranks;  // hybrid sharding
  data["tokens_per_step"] = m.data.tokens_per_step;
  data["next_token"] = m.data.next_token;
  return ordered_json{
      {"format", kCheckpointFormat},
      {"format_version", m.format_version},
      {"created_by", m.created_by},
      {"step", m.step},
      {"optimizer_steps", m.optimizer_steps},
      {"model", model_json},
      {"world_size", m.world_size},
      {"zero_stage", m.zero_stage},
      {"dtype", dtype_name(m.dtype)},
      {"file_dtype", "F32"},
      {"optimizer", {{"type", m.optimizer}, {"states", m.states}}},
      {"loss_scale",
       {{"scale", m.loss_scale.scale},
        {"good_steps", m.loss_scale.good_steps},
        {"hysteresis_left", m.loss_scale.hysteresis_left},
        {"overflows", m.loss_scale.overflows}}},
      {"data", data},
      {"training", ordered_json(m.training)},
      {"units", units},
      {"files", files},
      {"tensors", tensors},
  };
}

namespace {

// GPT-2's five sizes, or a Llama's config.json fields under "arch": "llama" (model::ModelConfig).
void read_model(const Schema& s, const json& j, Manifest& m) {
  const json& mj = s.object(j, "", "model");
  if (mj.contains("arch")) {
    try {
      m.model = model::ModelConfig::from_json(mj, "model");
    } catch (const UsageError& e) {
      s.fail("model", e.what());
    }
    return;
  }
  auto hyper = [&](const char* key) {
    return static_cast<int>(s.integer(mj, "model", key, 1, model::hyper_parameter_limit(key)));
  };
  model::GPT2Config c;
  c.n_layer = hyper("n_layer");
  c.n_head = hyper("n_head");
  c.n_embd = hyper("n_embd");
  c.vocab_size = hyper("vocab_size");
  c.n_ctx = hyper("n_ctx");
  if (c.n_embd % c.n_head != 0)
    s.fail("model", fmt::format("n_embd {} is not divisible by n_head {}", c.n_embd, c.n_head));
  try {
    c.validate();  // the totals (parameters, activations) within their limits too
  } catch (const UsageError& e) {
    s.fail("model", e.what());
  }
  m.model = c;
}

// The run's shape and state: world size, stage, dtypes, the optimizer and its states, the loss scaler.
void read_run(const Schema& s, const json& j, Manifest& m) {
  m.world_size = static_cast<int>(s.integer(j, "", "world_size", 1, kMaxWorldSize));
  m.zero_stage = static_cast<int>(s.integer(j, "", "zero_stage", 0, 3));
  const std::string dtype = s.string(j, "", "dtype");
  try {
    m.dtype = parse_dtype(dtype);
  } catch (const UsageError&) {
    s.fail("dtype", fmt::format("must be fp32, bf16 or fp16, got \"{}\"", describe_text(dtype)));
  }
  if (s.string(j, "", "file_dtype") != "F32") s.fail("file_dtype", "must be \"F32\"");

  const json& oj = s.object(j, "", "optimizer");
  m.optimizer = s.string(oj, "optimizer", "type");
  if (m.optimizer != "AdamW" && m.optimizer != "SGD" && m.optimizer != "Muon")
    s.fail("optimizer.type",
           fmt::format("must be \"AdamW\", \"SGD\" or \"Muon\", got \"{}\"", describe_text(m.optimizer)));
  const json& states = s.array(oj, "optimizer", "states");
  const auto keeps = [&](bool momentum) { return json(optimizer_state_names(m.optimizer, momentum)) == states; };
  if (!keeps(false) && !keeps(true))
    s.fail("optimizer.states", fmt::format("{} does not keep the states {} (it keeps {})", m.optimizer,
                                           describe_json(states), json(optimizer_state_names(m.optimizer, true)).dump()));
  for (const json& st : states) m.states.push_back(st.get<std::string>());

  const json& lj = s.object(j, "", "loss_scale");
  m.loss_scale.scale = s.number(lj, "loss_scale", "scale");
  if (!(m.loss_scale.scale > 0)) s.fail("loss_scale.scale", fmt::format("must be positive, got {}", m.loss_scale.scale));
  // The loss scaler counts these in int.
  m.loss_scale.good_steps = s.integer(lj, "loss_scale", "good_steps", 0, std::numeric_limits<int>::max());
  m.loss_scale.hysteresis_left = s.integer(lj, "loss_scale", "hysteresis_left", 0, std::numeric_limits<int>::max());
  m.loss_scale.overflows = s.integer(lj, "loss_scale", "overflows", 0);
}

// Where the data stood, and the training settings (kept short: they are echoed in messages).
void read_data(const Schema& s, const json& j, Manifest& m) {
  const json& dj = s.object(j, "", "data");
  m.data.path = s.string(dj, "data", "path");
  m.data.micro_batch = s.integer(dj, "data", "micro_batch", 1, kMaxBatchFactor);
  m.data.seq = s.integer(dj, "data", "seq", 1, m.model.n_ctx());  // a run trains on T <= N
  m.data.accum = s.integer(dj, "data", "accum", 1, kMaxBatchFactor);
  m.data.tokens_per_step = s.integer(dj, "data", "tokens_per_step", 1);
  m.data.next_token = s.integer(dj, "data", "next_token", 0);
  // A hybrid-sharded run saves one file per rank of its shard group: its data-parallel ranks are then
  // a multiple of world_size.
  m.data.ranks = dj.contains("ranks") ? s.integer(dj, "data", "ranks", 1, kMaxWorldSize) : m.world_size;
  if (m.data.ranks % m.world_size != 0)
    s.fail("data.ranks", fmt::format("{} is not a multiple of world_size {}", m.data.ranks, m.world_size));
  const std::optional<int64_t> tokens_per_step =
      checked_product<int64_t>({m.data.ranks, m.data.accum, m.data.micro_batch, m.data.seq});
  if (!tokens_per_step || m.data.tokens_per_step != *tokens_per_step)
    s.fail("data.tokens_per_step", fmt::format("{} is not {}·accum·micro_batch·seq = {}·{}·{}·{}",
                                               m.data.tokens_per_step, dj.contains("ranks") ? "ranks" : "world_size",
                                               m.data.ranks, m.data.accum, m.data.micro_batch, m.data.seq));
  const std::optional<int64_t> next_token = checked_mul<int64_t>(m.step, m.data.tokens_per_step);
  if (!next_token || m.data.next_token != *next_token)
    s.fail("data.next_token",
           fmt::format("{} is not step·tokens_per_step = {}·{}{}", m.data.next_token, m.step, m.data.tokens_per_step,
                       next_token ? fmt::format(" = {}", *next_token) : std::string(" (over 2^63)")));
  m.training = s.object(j, "", "training");
  for (const auto& [key, value] : m.training.items()) {
    // Settings are echoed in messages (a resumed run says which changed): each must stay short.
    if (key.size() > 64 || value.dump().size() > kMaxTrainingValueBytes)
      s.fail("training", fmt::format("setting '{}' is {}, over the {} bytes allowed", describe_text(key),
                                     describe_json(value), kMaxTrainingValueBytes));
  }
}

// Each unit's element counts and tensors (their count already checked against the model's).
void read_units(const Schema& s, const json& j, const model::ParamLayout& layout, Manifest& m) {
  const json& uj = s.array(j, "", "units");
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::string path = fmt::format("units[{}]", u);
    const json& e = uj[static_cast<size_t>(u)];
    if (s.integer(e, path, "unit", 0) != u) s.fail(path + ".unit", fmt::format("must be {}", u));
    UnitShape us{s.size(e, path, "numel"), s.size(e, path, "padded"), s.size(e, path, "shard")};
    if (us.numel != layout.unit_numel(u))
      s.fail(path + ".numel", fmt::format("is {}, unit {} of {} has {} elements", us.numel, u, m.model.summary(),
                                          layout.unit_numel(u)));
    const std::optional<size_t> padded = checked_mul<size_t>(us.shard, static_cast<size_t>(m.world_size));
    if (us.padded < us.numel || !padded || us.padded != *padded)
      s.fail(path, fmt::format("padded {} must be world_size·shard = {}·{} and at least numel {}", us.padded,
                               m.world_size, us.shard, us.numel));
    const json& tj = s.array(e, path, "tensors");
    ordered_json expected = ordered_json::array();
    for (const model::ParamInfo* p : layout.unit_params(u)) expected.push_back(tensor_json(*p));
    if (json(expected) != tj)
      s.fail(path + ".tensors", "do not match the model's layout (docs/reference/model.md: names, shapes, offsets, in order)");
    m.units.push_back(us);
  }
}

void read_files(const Schema& s, const json& j, const model::ParamLayout& layout, const std::string& label,
                Manifest& m) {
  // One file per rank; their ranges tile every unit exactly once.
  const json& fj = s.array(j, "", "files");
  if (fj.size() != static_cast<size_t>(m.world_size))
    s.fail("files", fmt::format("lists {} files for world_size {}", fj.size(), m.world_size));
  std::vector<std::vector<std::pair<size_t, size_t>>> cover(static_cast<size_t>(layout.num_units()));
  for (int r = 0; r < m.world_size; ++r) {
    const std::string path = fmt::format("files[{}]", r);
    const json& e = fj[static_cast<size_t>(r)];
    RankFile f;
    f.rank = static_cast<int>(s.integer(e, path, "rank", 0, m.world_size - 1));
    if (f.rank != r) s.fail(path + ".rank", fmt::format("must be {} (files are listed in rank order)", r));
    f.file = s.string(e, path, "file");
    if (f.file != rank_file_name(r))
      s.fail(path + ".file", fmt::format("must be \"{}\", got \"{}\"", rank_file_name(r), describe_text(f.file)));
    f.bytes = static_cast<uint64_t>(s.integer(e, path, "bytes", 8));
    const std::string crc = s.string(e, path, "crc32c");
    if (!is_crc_hex(crc))
      s.fail(path + ".crc32c", fmt::format("must be 8 hexadecimal digits, got \"{}\"", describe_text(crc)));
    f.crc32c = parse_crc_hex(crc, label);
    const json& rj = s.array(e, path, "ranges");
    int last_unit = -1;
    for (size_t k = 0; k < rj.size(); ++k) {
      const std::string rp = fmt::format("{}.ranges[{}]", path, k);
      UnitRange ur;
      ur.unit = static_cast<int>(s.integer(rj[k], rp, "unit", 0, layout.num_units() - 1));
      ur.begin = s.size(rj[k], rp, "begin");
      ur.end = s.size(rj[k], rp, "end");
      if (ur.unit <= last_unit) s.fail(rp + ".unit", "ranges must be in increasing unit order, one per unit");
      if (ur.begin >= ur.end || ur.end > layout.unit_numel(ur.unit))
        s.fail(rp, fmt::format("[{}, {}) is not a non-empty range of unit {} ({} elements)", ur.begin, ur.end,
                               ur.unit, layout.unit_numel(ur.unit)));
      last_unit = ur.unit;
      cover[static_cast<size_t>(ur.unit)].emplace_back(ur.begin, ur.end);
      f.ranges.push_back(ur);
    }
    m.ranks.push_back(std::move(f));
  }
  for (int u = 0; u < layout.num_units(); ++u) {
    auto& c = cover[static_cast<size_t>(u)];
    std::sort(c.begin(), c.end());
    size_t at = 0;
    for (const auto& [b, e] : c) {
      if (b != at)
        s.fail("files", fmt::format("the ranges of unit {} {} at element {} (they must cover it exactly once)", u,
                                    b < at ? "overlap" : "leave a gap", std::min(b, at)));
      at = e;
    }
    if (at != layout.unit_numel(u))
      s.fail("files", fmt::format("the ranges of unit {} end at element {}, the unit has {}", u, at,
                                  layout.unit_numel(u)));
  }
}

}  // namespace

Manifest manifest_from_json(const json& j, const std::string& label) {
  const Schema s(label);
  if (!j.is_object()) s.fail("the top level must be a JSON object");
  Manifest m;
  const std::string format = s.string(j, "", "format");
  if (format != kCheckpointFormat)
    s.fail("format", fmt::format("must be \"{}\", got \"{}\"", kCheckpointFormat, describe_text(format)));
  m.format_version = static_cast<int>(s.integer(j, "", "format_version", 0, std::numeric_limits<int>::max()));
  if (m.format_version != kCheckpointFormatVersion)
    s.fail("format_version", fmt::format("version {} is not supported (this zerodp reads version {})",
                                         m.format_version, kCheckpointFormatVersion));
  m.created_by = s.string(j, "", "created_by");
  m.step = s.integer(j, "", "step", 0);
  m.optimizer_steps = s.integer(j, "", "optimizer_steps", 0, m.step);

  read_model(s, j, m);
  read_run(s, j, m);
  read_data(s, j, m);
  // Units: exactly the model's, each padded to world_size equal shards. Their count is checked
  // before the layout is built, so that the layout is never larger than the manifest's own list.
  const json& uj = s.array(j, "", "units");
  const int units = model::ParamLayout::units_of(m.model);
  if (uj.size() != static_cast<size_t>(units))
    s.fail("units", fmt::format("holds {} units, the model {} has {}", uj.size(), m.model.summary(), units));
  const model::ParamLayout layout(m.model);
  read_units(s, j, layout, m);
  read_files(s, j, layout, label, m);
  // The per-tensor map is derived; it must say what the ranges say.
  const json& tj = s.array(j, "", "tensors");
  const ordered_json expected = manifest_to_json(m)["tensors"];
  if (json(expected) != tj)
    s.fail("tensors", "does not match the files' ranges and the model's layout");
  return m;
}

Manifest parse_manifest(std::string_view text, const std::string& label) {
  JsonLimits limits;
  limits.max_depth = kMaxManifestDepth;
  limits.max_bytes = kMaxManifestBytes;
  return manifest_from_json(parse_json(text, fmt::format("'{}'", label), limits), label);
}

}  // namespace zerodp::ckpt
