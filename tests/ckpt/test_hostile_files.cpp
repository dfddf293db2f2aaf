// Hostile inputs to every reader of outside bytes in ckpt/ (docs/limits.md): safetensors headers,
// GPT-2 weights with their __metadata__ and config.json, checkpoint manifests, pointer files and
// rank files. Each attack must end in a UsageError that names the file, describes the offending
// value in one short line (never a dump of it), comes at once, and allocates next to nothing: each
// is run in a forked child whose address space is capped and whose peak memory is measured.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_tools.h"
#include "ckpt/crc32c.h"
#include "ckpt/gpt2_weights.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/fs.h"

namespace zerodp::ckpt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---- running one attack in isolation ------------------------------------------------------------

struct Outcome {
  int code = -1;          // 2: UsageError, 1: another exception, 0: accepted, else killed by a signal
  std::string message;    // the exception's message
  double seconds = 0;
  long growth_kb = 0;     // the child's peak RSS during the attack above its RSS before it
};

// A field of /proc/self/status in kB ("VmRSS", "VmHWM"), or -1.
long status_kb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with(field + ":")) return std::stol(line.substr(field.size() + 1));
  return -1;
}

long vm_bytes() {
  std::ifstream statm("/proc/self/statm");
  long size = 0;
  statm >> size;
  return size * ::sysconf(_SC_PAGESIZE);
}

// Runs `attack` in a forked child under an address-space cap of the parent's size plus 1 GiB (so
// that a regression fails here instead of eating the machine), and reports how it ended. The child
// resets its peak RSS (clear_refs 5) just before the attack, so the growth measured is the attack's.
Outcome isolated(const std::function<void()>& attack) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const rlim_t cap = static_cast<rlim_t>(vm_bytes()) + (rlim_t{1} << 30);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const struct rlimit lim = {cap, cap};
    ::setrlimit(RLIMIT_AS, &lim);
    std::ofstream("/proc/self/clear_refs") << "5";
    const long before = status_kb("VmRSS");
    int code = 0;
    std::string what;
    try {
      attack();
    } catch (const UsageError& e) {
      code = 2;
      what = e.what();
    } catch (const std::exception& e) {
      code = 1;
      what = e.what();
    }
    const std::string report = fmt::format("{:>12}", status_kb("VmHWM") - before) + what.substr(0, 60000);
    if (::write(fds[1], report.data(), report.size()) < 0) code = 3;
    ::_exit(code);
  }
  ::close(fds[1]);
  Outcome out;
  std::string report;
  char buf[4096];
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(got));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (report.size() >= 12) {
    out.growth_kb = std::stol(report.substr(0, 12));
    out.message = report.substr(12);
  }
  return out;
}

// The attack must be refused as a UsageError holding every needle (the file's name among them), on
// one line of under 300 characters, in under a second, with under 64 MiB of memory.
void expect_refused(const std::string& what, const std::function<void()>& attack,
                    const std::vector<std::string>& needles) {
  SCOPED_TRACE(what);
  const Outcome o = isolated(attack);
  EXPECT_EQ(o.code, 2) << o.message;
  for (const std::string& n : needles) EXPECT_NE(o.message.find(n), std::string::npos) << "no '" << n << "' in: " << o.message;
  EXPECT_LT(o.message.size(), 300u) << o.message;
  EXPECT_EQ(o.message.find('\n'), std::string::npos) << o.message;
  EXPECT_LT(o.seconds, 1.0) << o.message;
  EXPECT_LT(o.growth_kb, 64 * 1024) << o.message;
  if (std::getenv("ZERODP_HOSTILE_VERBOSE")) std::printf("  %-40s %6.3f s %7ld KB  %s\n", what.c_str(), o.seconds, o.growth_kb, o.message.c_str());
}

// ---- files ---------------------------------------------------------------------------------------

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A file at `path` of `size` bytes starting with `head`, the rest a hole.
void write_sparse(const std::string& path, const std::string& head, uint64_t size) {
  write_text(path, head);
  fs::resize_file(path, size);
}

model::GPT2Config tiny_model() { return {2, 2, 8, 16, 8}; }

class HostileFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_hostile_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string path(const std::string& name) const { return root_ + "/" + name; }

  // A valid model file of tiny_model() (zeros) at `name`.
  std::string model_file(const std::string& name, const model::GPT2Config& c = tiny_model()) {
    const model::ParamLayout layout(c);
    std::vector<float> zeros(layout.unit_numel(1) > layout.unit_numel(0) ? layout.unit_numel(1) : layout.unit_numel(0));
    const std::string p = path(name);
    save_gpt2(p, c, layout, [&](int) { return zeros.data(); });
    return p;
  }

  // Rewrites a safetensors file's header (as JSON, or as text after `edit_text`), keeping its data.
  static void edit_header(const std::string& file, const std::function<void(json&)>& edit,
                          const std::function<void(std::string&)>& edit_text = nullptr) {
    const std::string blob = read_file(file);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(blob[static_cast<size_t>(i)]);
    json header = json::parse(blob.substr(8, n));
    if (edit) edit(header);
    std::string text = header.dump();
    if (edit_text) edit_text(text);
    write_text(file, le64(text.size()) + text + blob.substr(8 + n));
  }

  // A one-rank checkpoint of tiny_model() in SAVE_DIR `save`; returns its directory.
  std::string checkpoint(const std::string& save, int W = 2) {
    const std::string save_dir = path(save);
    const model::ParamLayout layout(tiny_model());
    Manifest m;
    m.created_by = "test";
    m.step = 1;
    m.optimizer_steps = 1;
    m.model = tiny_model();
    m.world_size = W;
    m.optimizer = "AdamW";
    m.states = optimizer_state_names("AdamW", false);
    m.data = {"tokens.bin", 2, 4, 1, int64_t{W} * 8, int64_t{W} * 8};
    m.training = {{"lr", 0.001}};
    prepare_save(save_dir, m.step);
    std::vector<std::vector<float>> storage;
    std::vector<std::vector<RankPiece>> pieces(static_cast<size_t>(W));
    for (int u = 0; u < layout.num_units(); ++u) {
      const size_t n = layout.unit_numel(u), s = ((n + W - 1) / W + 15) / 16 * 16;
      m.units.push_back({n, s * static_cast<size_t>(W), s});
      for (int r = 0; r < W; ++r) {
        const size_t b = std::min(n, s * r), e = std::min(n, s * (r + 1));
        if (b < e) pieces[static_cast<size_t>(r)].push_back({{u, b, e}, nullptr, {}});
      }
    }
    storage.reserve(1000);
    for (int r = 0; r < W; ++r) {
      for (RankPiece& p : pieces[static_cast<size_t>(r)]) {
        const size_t n = p.range.end - p.range.begin;
        storage.emplace_back(n, 1.0f);
        p.weights = storage.back().data();
        for (int k = 0; k < 2; ++k) {
          storage.emplace_back(n, 0.0f);
          p.states.push_back(storage.back().data());
        }
      }
      m.ranks.push_back(write_rank_file(partial_dir(save_dir, m.step), r, W, m.step, m.states,
                                        pieces[static_cast<size_t>(r)]));
    }
    return commit_checkpoint(save_dir, m, 0);
  }

  // Replaces dir's manifest with `text` and a matching manifest.crc32c (only the schema can object).
  static void write_manifest(const std::string& dir, const std::string& text) {
    write_text(dir + "/manifest.json", text);
    write_text(dir + "/manifest.crc32c", crc_hex(crc32c(text.data(), text.size())) + "  manifest.json\n");
  }
  static void edit_manifest(const std::string& dir, const std::function<void(json&)>& edit) {
    json j = json::parse(read_file(dir + "/manifest.json"));
    edit(j);
    write_manifest(dir, j.dump(2));
  }

  std::string root_;
};

// ---- safetensors headers -------------------------------------------------------------------------

SafetensorsReader parse_text(const std::string& header, size_t data_bytes, const std::string& label) {
  static std::string keep;  // the reader points into the bytes
  keep = le64(header.size()) + header + std::string(data_bytes, '\0');
  return SafetensorsReader::parse(reinterpret_cast<const uint8_t*>(keep.data()), keep.size(), label);
}

TEST_F(HostileFilesTest, SafetensorsNestingIsRefusedWhileParsing) {
  const std::string deep = nested(100000);
  expect_refused("100k-deep shape", [&] {
    parse_text(R"({"t":{"dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,0]}})", 0, "deep.safetensors");
  }, {"'deep.safetensors'", "nested deeper than 3 levels"});
  expect_refused("100k-deep __metadata__", [&] {
    parse_text(R"({"__metadata__":{"n_layer":)" + deep + "}}", 0, "meta.safetensors");
  }, {"'meta.safetensors'", "nested deeper than 3 levels"});
  expect_refused("100k-deep objects", [&] {
    std::string objs;
    for (int i = 0; i < 100000; ++i) objs += "{\"a\":";
    objs += "1" + std::string(100000, '}');
    parse_text(objs, 0, "objs.safetensors");
  }, {"'objs.safetensors'", "nested deeper than 3 levels"});
  // Depth 3 itself is what the format needs, and is fine.
  EXPECT_NO_THROW(parse_text(R"({"__metadata__":{"k":"v"},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4,
                             "ok.safetensors"));
}

TEST_F(HostileFilesTest, SafetensorsValuesAreDescribedNotDumped) {
  const std::string long_name(10000, 'n'), long_text(10000, 'x');
  expect_refused("a 10 KB tensor name", [&] {
    parse_text("{\"" + long_name + R"(":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8, "name.safetensors");
  }, {"'name.safetensors'", "(10000 bytes)", "I64"});
  expect_refused("a 10 KB dtype", [&] {
    parse_text(R"({"t":{"dtype":")" + long_text + R"(","shape":[1],"data_offsets":[0,8]}})", 8, "dtype.safetensors");
  }, {"'dtype.safetensors'", "'t'", "(10000 bytes)"});
  expect_refused("a 10 KB metadata key with a number", [&] {
    parse_text(R"({"__metadata__":{")" + long_name + R"(":1}})", 0, "key.safetensors");
  }, {"'key.safetensors'", "__metadata__", "(10000 bytes)"});
  expect_refused("a shape of 5000 numbers", [&] {
    std::string dims = "[1";
    for (int i = 0; i < 5000; ++i) dims += ",1";
    parse_text(R"({"t":{"dtype":"F32","shape":)" + dims + R"(],"data_offsets":[0,4]}})", 4, "rank.safetensors");
  }, {"'rank.safetensors'", "'t'", "5001 dimensions"});
  expect_refused("a non-integer among many dimensions", [&] {
    parse_text(R"({"t":{"dtype":"F32","shape":[1,1,"x"],"data_offsets":[0,4]}})", 4, "dim.safetensors");
  }, {"'dim.safetensors'", "[1, 1, \"x\"]", "\"x\""});
  expect_refused("a 10 KB duplicate key", [&] {
    const std::string e = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
    parse_text("{\"" + long_name + "\":" + e + ",\"" + long_name + "\":" + e + "}", 4, "dup.safetensors");
  }, {"'dup.safetensors'", "twice", "(10000 bytes)"});
}

TEST_F(HostileFilesTest, SafetensorsHeaderSizeIsBoundedBeforeReading) {
  // A header claiming 100 MB + 1 in a (sparse) file that long: refused from the length alone.
  const std::string f = path("bigheader.safetensors");
  write_sparse(f, le64(100000001) + "{", 100000001 + 8);
  expect_refused("a header over 100 MB", [&] { SafetensorsReader::open(f); }, {f, "over the 100000000 bytes allowed"});
}

// ---- GPT-2 weights -------------------------------------------------------------------------------

TEST_F(HostileFilesTest, HugeHyperParametersAreRefusedBeforeAnythingIsSized) {
  for (const char* key : {"n_layer", "n_embd", "vocab_size", "n_ctx", "n_head"}) {
    const std::string f = model_file(std::string("big_") + key + ".safetensors");
    edit_header(f, [&](json& h) { h["__metadata__"][key] = "2000000000"; });
    expect_refused(key, [&] { GPT2Weights::open(f); }, {f, key, "2000000000", "over the limit"});
  }
  const std::string f = model_file("int64.safetensors");
  edit_header(f, [&](json& h) { h["__metadata__"]["n_layer"] = "99999999999999999999999"; });
  expect_refused("n_layer beyond int64", [&] { GPT2Weights::open(f); }, {f, "n_layer", "not an integer"});
  edit_header(f, [&](json& h) { h["__metadata__"]["n_layer"] = "9223372036854775807"; });
  expect_refused("n_layer at int64's max", [&] { GPT2Weights::open(f); }, {f, "n_layer", "over the limit"});
  edit_header(f, [&](json& h) { h["__metadata__"]["n_layer"] = "-3"; });
  expect_refused("negative n_layer", [&] { GPT2Weights::open(f); }, {f, "n_layer must be positive"});
  edit_header(f, [&](json& h) { h["__metadata__"]["n_layer"] = std::string(5000, '7'); });
  expect_refused("5000 digits", [&] { GPT2Weights::open(f); }, {f, "n_layer", "(5000 bytes)"});
}

TEST_F(HostileFilesTest, AValidButAbsentModelIsRefusedFromTheFileNotByBuildingIt) {
  // 2^16 layers is within the limits, but the file holds two: the first missing tensor is named
  // without laying out the 786,436 tensors of the claimed model.
  const std::string f = model_file("deep.safetensors");
  edit_header(f, [](json& h) { h["__metadata__"]["n_layer"] = "65536"; });
  expect_refused("n_layer 65536 in a 2-layer file", [&] { GPT2Weights::open(f); },
                 {f, "missing tensor 'h.2.ln_1.weight'", "L65536"});
  // Wide models: every tensor's shape is wrong, which the check of the first one says.
  const std::string w = model_file("wide.safetensors");
  edit_header(w, [](json& h) {
    h["__metadata__"]["n_embd"] = "131072";
    h["__metadata__"]["n_head"] = "2";
  });
  expect_refused("n_embd 2^17 in a C=8 file", [&] { GPT2Weights::open(w); }, {w, "expected [16, 131072]"});
}

TEST_F(HostileFilesTest, BlockIndicesBeyondTheModelAreRefusedByName) {
  const std::string f = model_file("block.safetensors");
  edit_header(f, [](json& h) { h["h.2000000000.ln_1.weight"] = h["h.0.ln_1.weight"]; h.erase("h.0.ln_1.weight"); });
  expect_refused("h.2000000000 with n_layer 2", [&] { GPT2Weights::open(f); },
                 {f, "unknown tensor 'h.2000000000.ln_1.weight'", "block 2000000000 is beyond n_layer 2"});
  // Without hyper-parameters the block numbers count the layers: over the limit, by name.
  const std::string g = model_file("block_shapes.safetensors");
  edit_header(g, [](json& h) {
    h.erase("__metadata__");
    h["h.2000000000.ln_1.weight"] = h["h.0.ln_1.weight"];
    h.erase("h.0.ln_1.weight");
  });
  expect_refused("h.2000000000 counted from shapes", [&] { GPT2Weights::open(g, 2); },
                 {g, "'h.2000000000.ln_1.weight'", "beyond the limit of 65536 layers"});
  // A block number no int64 holds is no block name at all: an unknown tensor.
  const std::string k = model_file("block_long.safetensors");
  edit_header(k, [](json& h) { h["h.99999999999999999999999.ln_1.weight"] = h["h.0.ln_1.weight"]; h.erase("h.0.ln_1.weight"); });
  expect_refused("h.<23 digits>", [&] { GPT2Weights::open(k); }, {k, "unknown tensor 'h.99999999999999999999999.ln_1.weight'"});
}

TEST_F(HostileFilesTest, MoreTensorsThanAnyValidModelHasAreRefused) {
  const std::string f = model_file("many.safetensors");
  edit_header(f, [](json& h) {
    // Ignored buffers under both spellings: 38 tensors, more than a 2-layer model's 28 + 2·2 + 1.
    for (const char* p : {"", "transformer."})
      for (int b = 0; b < 2; ++b)
        for (const char* buf : {"attn.bias", "attn.masked_bias"})
          h[std::string(p) + "h." + std::to_string(b) + "." + buf] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}};
    h["lm_head.weight"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}};
    h["transformer.lm_head.weight"] = {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {0, 0}}};
  });
  expect_refused("10 extra buffers", [&] { GPT2Weights::open(f); }, {f, "holds 38 tensors", "more than a GPT-2"});
}

TEST_F(HostileFilesTest, ConfigJsonBesideTheModelIsBounded) {
  fs::create_directories(path("cfg"));
  const std::string f = model_file("cfg/model.safetensors");
  edit_header(f, [](json& h) { h.erase("__metadata__"); });
  const std::string cfg = path("cfg/config.json");
  write_text(cfg, R"({"n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 16, "n_ctx": )" + nested(100000) + "}");
  expect_refused("100k-deep config.json", [&] { GPT2Weights::open(f); }, {f, cfg, "nested deeper than 32 levels"});
  write_sparse(cfg, "{", uint64_t{4} << 30);
  expect_refused("a 4 GiB config.json", [&] { GPT2Weights::open(f); }, {f, cfg, "over the 1048576 allowed"});
  write_text(cfg, R"({"n_layer": 18446744073709551615, "n_head": 2, "n_embd": 8, "vocab_size": 16, "n_ctx": 8})");
  expect_refused("n_layer 2^64-1", [&] { GPT2Weights::open(f); }, {f, cfg, "n_layer", "not an integer"});
  write_text(cfg, R"({"n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 16, "n_ctx": 1e300})");
  expect_refused("n_ctx 1e300", [&] { GPT2Weights::open(f); }, {f, cfg, "n_ctx", "not an integer"});
  write_text(cfg, R"({"n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 2000000000, "n_ctx": 8})");
  expect_refused("vocab_size 2e9", [&] { GPT2Weights::open(f); }, {f, cfg, "vocab_size is 2000000000, over the limit"});
  write_text(cfg, R"({"n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 16, "n_ctx": 8})");
  EXPECT_NO_THROW(GPT2Weights::open(f));
}

// ---- checkpoints ---------------------------------------------------------------------------------

TEST_F(HostileFilesTest, ManifestNestingAndSizesAreBounded) {
  const std::string dir = checkpoint("deep");
  const std::string manifest = dir + "/manifest.json";
  std::string text = read_file(manifest);
  const size_t at = text.find("\"training\": {");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 13, "\"deep\": " + nested(100000) + ",");
  write_manifest(dir, text);
  expect_refused("100k-deep manifest", [&] { Checkpoint::open(dir); }, {manifest, "nested deeper than 32 levels"});
  write_sparse(manifest, "{", uint64_t{1} << 30);
  expect_refused("a 1 GiB manifest", [&] { Checkpoint::open(dir); }, {manifest, "over the 268435456 allowed"});
  write_sparse(path("deep/latest"), "step-1", uint64_t{1} << 30);
  expect_refused("a 1 GiB latest", [&] { Checkpoint::open(path("deep")); }, {path("deep/latest"), "over the 4096"});
}

TEST_F(HostileFilesTest, ManifestNumbersAreBoundedAndTheirProductsChecked) {
  const std::string dir = checkpoint("nums", 4);
  const std::string manifest = dir + "/manifest.json";
  const std::string original = read_file(manifest);
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    std::vector<std::string> needles;
  };
  const uint64_t near63 = (uint64_t{1} << 63) - 1;
  const std::vector<Case> cases = {
      {"n_layer 2e9", [](json& j) { j["model"]["n_layer"] = 2000000000; }, {"model.n_layer", "at most 65536"}},
      {"n_embd 2e9", [](json& j) { j["model"]["n_embd"] = 2000000000; }, {"model.n_embd"}},
      {"vocab 2e9", [](json& j) { j["model"]["vocab_size"] = 2000000000; }, {"model.vocab_size"}},
      {"n_ctx 2e9", [](json& j) { j["model"]["n_ctx"] = 2000000000; }, {"model.n_ctx"}},
      {"n_layer 65536 with 3 units", [](json& j) { j["model"]["n_layer"] = 65536; }, {"'units'", "holds 3 units"}},
      {"params over 2^40", [](json& j) { j["model"]["n_layer"] = 65536; j["model"]["n_embd"] = 262144; },
       {"'model'", "over the limit of 2^40"}},
      {"numel 2^63-1", [&](json& j) { j["units"][0]["numel"] = near63; }, {"units[0].numel", "9223372036854775807"}},
      {"shard over int64", [&](json& j) { j["units"][0]["shard"] = (uint64_t{1} << 63) + 64; },
       {"units[0].shard", "at most 9223372036854775807"}},
      {"padded = shard·W wrapping around 2^64", [&](json& j) {
         j["units"][0]["shard"] = (uint64_t{1} << 62) + 64;  // ·4 = 2^64 + 256: 256 once wrapped
         j["units"][0]["padded"] = 256;                       // >= numel 208, so only the product objects
       }, {"units[0]", "padded 256 must be world_size·shard"}},
      {"range end 2^63-1", [&](json& j) { j["files"][0]["ranges"][0]["end"] = near63; }, {"files[0].ranges[0]"}},
      {"range end 2^64-1", [&](json& j) { j["files"][0]["ranges"][0]["end"] = UINT64_MAX; },
       {"files[0].ranges[0].end", "at most 9223372036854775807"}},
      {"bytes 2^63-1", [&](json& j) { j["files"][0]["bytes"] = near63; }, {"rank-00000.safetensors", "truncated"}},
      {"tokens_per_step overflowing", [&](json& j) {
         j["data"]["micro_batch"] = 1 << 24;
         j["data"]["accum"] = 1 << 24;
         j["world_size"] = 1 << 20;
       }, {}},
      {"next_token = step·tokens over 2^63", [&](json& j) {
         j["step"] = kInt64Max / 4;
         j["optimizer_steps"] = 0;
       }, {"data.next_token", "over 2^63"}},
      {"seq beyond n_ctx", [](json& j) { j["data"]["seq"] = 9; }, {"data.seq", "at most 8"}},
      {"data.ranks not a multiple of world_size", [](json& j) { j["data"]["ranks"] = 6; },
       {"data.ranks", "6 is not a multiple of world_size 4"}},
      {"data.ranks beyond the world limit", [](json& j) { j["data"]["ranks"] = int64_t{1} << 40; }, {"data.ranks"}},
      {"data.ranks that do not make tokens_per_step", [](json& j) { j["data"]["ranks"] = 8; },
       {"data.tokens_per_step", "is not ranks·accum·micro_batch·seq"}},
      {"good_steps 2^40", [](json& j) { j["loss_scale"]["good_steps"] = int64_t{1} << 40; },
       {"loss_scale.good_steps", "2147483647"}},
      {"a 10 KB created_by", [](json& j) { j["created_by"] = std::string(10000, 'c'); },
       {"created_by", "at most 4096 bytes", "(10000 bytes)"}},
      {"a 10 KB training setting", [](json& j) { j["training"]["optimizer"] = std::string(10000, 'o'); },
       {"'training'", "'optimizer'", "(10000 bytes)"}},
      {"a 10 KB optimizer type", [](json& j) { j["optimizer"]["type"] = std::string(3000, 'o'); },
       {"optimizer.type", "(3000 bytes)"}},
      {"states as a deep array", [](json& j) { j["optimizer"]["states"] = json::array({json::array({json::array()})}); },
       {"optimizer.states", "an array of 1 element"}},
      {"a 10 KB file name", [](json& j) { j["files"][0]["file"] = std::string(4000, 'f'); },
       {"files[0].file", "(4000 bytes)"}},
  };
  for (const Case& c : cases) {
    write_manifest(dir, original);
    edit_manifest(dir, c.edit);
    std::vector<std::string> needles = c.needles;
    needles.push_back(c.what == "bytes 2^63-1" ? dir : manifest);
    expect_refused(c.what, [&] { Checkpoint::open(dir); }, needles);
  }
}

TEST_F(HostileFilesTest, RankFileHeadersAreBoundedToo) {
  const std::string dir = checkpoint("rankfile");
  const std::string rank0 = dir + "/rank-00000.safetensors";
  edit_header(rank0, nullptr, [](std::string& text) {
    text.insert(1, "\"__deep__\": " + nested(100000) + ",");
  });
  // The manifest vouches for the new file's size and checksum, so the header itself is what is refused.
  const std::string blob = read_file(rank0);
  edit_manifest(dir, [&](json& j) {
    j["files"][0]["bytes"] = blob.size();
    j["files"][0]["crc32c"] = crc_hex(crc32c(blob.data(), blob.size()));
  });
  expect_refused("100k-deep rank file header", [&] { Checkpoint::open(dir); }, {rank0, "nested deeper than 3 levels"});
}

TEST_F(HostileFilesTest, DescriptionsOfAValidCheckpointStayShort) {
  const std::string dir = checkpoint("describe");
  edit_manifest(dir, [](json& j) {
    j["training"]["optimizer"] = std::string(1000, 'o');  // within the 1024 bytes a setting may take
    j["data"]["path"] = std::string(4000, 'p');
  });
  const Checkpoint ck = Checkpoint::open(dir);
  const std::string text = describe_checkpoint(ck);
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    EXPECT_LT(end - start, 400u) << text.substr(start, end - start);
}

}  // namespace
}  // namespace zerodp::ckpt
