// Sharded checkpoints on disk, without MPI: synthetic "ranks" write their files, rank 0's commit
// publishes them, and the reader must give back every element of every state whatever world size
// wrote it. Also: `latest` and --keep, replacing a step, a writer killed half-way (a forked child),
// every kind of bad checkpoint refused with the file's name, the manifest's schema, consolidation
// (the bytes of save_gpt2, memory near one tensor) and the description.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_tools.h"
#include "ckpt/crc32c.h"
#include "ckpt/gpt2_weights.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/memory.h"

namespace zerodp::ckpt {
namespace {

namespace fs = std::filesystem;

model::GPT2Config tiny() { return {2, 2, 8, 16, 8}; }  // L2 H2 C8 V16 N8: units of 208 and 872

// Element i of unit u's state (-1 weights, 0.. optimizer states), distinct and exact in fp32;
// `salt` tells one save's values from another's.
float value(int state, int unit, size_t i, int salt = 0) {
  return static_cast<float>((state + 2) * 1000000 + unit * 10000 + static_cast<int>(i) + salt * 3000000);
}

// The W-way split of zero/sharding.h: shard = ceil(n / W) rounded up to 16, rank r owns
// [r·shard, (r+1)·shard) clipped to n.
size_t shard_of(size_t n, int W) {
  const size_t s = (n + static_cast<size_t>(W) - 1) / static_cast<size_t>(W);
  return (s + 15) / 16 * 16;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerodp_ckpt_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes a checkpoint of step `step` as W ranks would, with AdamW's two states.
  Manifest save(const std::string& save_dir, int W, int64_t step, int keep = 0, int salt = 0, int stage = 2,
                std::vector<std::string>* remove_later = nullptr) {
    const model::ParamLayout layout(tiny());
    Manifest m;
    m.created_by = "test";
    m.step = step;
    m.optimizer_steps = step;
    m.model = tiny();
    m.world_size = W;
    m.zero_stage = stage;
    m.dtype = DType::kBF16;
    m.optimizer = "AdamW";
    m.states = optimizer_state_names("AdamW", false);
    m.loss_scale = {1024.0, 3, 2, 1};
    m.data = {"tokens.bin", 2, 4, 3, int64_t{W} * 2 * 4 * 3, step * int64_t{W} * 2 * 4 * 3};
    m.training = {{"lr", 0.001}, {"optimizer", {{"type", "AdamW"}}}};
    for (int u = 0; u < layout.num_units(); ++u) {
      const size_t n = layout.unit_numel(u), s = shard_of(n, W);
      m.units.push_back({n, s * static_cast<size_t>(W), s});
    }
    prepare_save(save_dir, step);
    for (int r = 0; r < W; ++r) {
      std::vector<std::vector<float>> storage;
      std::vector<RankPiece> pieces;
      for (int u = 0; u < layout.num_units(); ++u) {
        const size_t n = layout.unit_numel(u), s = shard_of(n, W);
        const size_t b = std::min(n, s * static_cast<size_t>(r)), e = std::min(n, s * static_cast<size_t>(r + 1));
        if (b == e) continue;
        RankPiece p;
        p.range = {u, b, e};
        for (int st = -1; st < 2; ++st) {
          std::vector<float> v(e - b);
          for (size_t i = b; i < e; ++i) v[i - b] = value(st, u, i, salt);
          storage.push_back(std::move(v));
        }
        pieces.push_back(p);
      }
      for (size_t k = 0; k < pieces.size(); ++k) {
        pieces[k].weights = storage[3 * k].data();
        pieces[k].states = {storage[3 * k + 1].data(), storage[3 * k + 2].data()};
      }
      m.ranks.push_back(write_rank_file(partial_dir(save_dir, step), r, W, step, m.states, pieces));
    }
    commit_checkpoint(save_dir, m, keep, remove_later);
    return m;
  }

  static std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  static void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  }
  // Rewrites manifest.json (and its checksum, so that only the schema can catch the change).
  static void edit_manifest(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(read_file(dir + "/manifest.json"));
    edit(j);
    const std::string text = j.dump(2);
    write_text(dir + "/manifest.json", text);
    write_text(dir + "/manifest.crc32c", crc_hex(crc32c(text.data(), text.size())) + "  manifest.json\n");
  }
  // Expects open() to fail with a UsageError whose message holds every needle.
  static void expect_refused(const std::string& path, const std::vector<std::string>& needles) {
    try {
      Checkpoint::open(path);
      ADD_FAILURE() << "opened a bad checkpoint; wanted an error with '" << needles.at(0) << "'";
    } catch (const UsageError& e) {
      for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }

  std::string root_;
};

TEST_F(CheckpointTest, EveryWorldSizeReadsBackEveryElement) {
  const model::ParamLayout layout(tiny());
  std::mt19937 rng(3);
  for (int W : {1, 2, 3, 4, 7}) {
    const std::string dir = root_ + "/w" + std::to_string(W);
    const Manifest saved = save(dir, W, 5);
    const Checkpoint ck = Checkpoint::open(dir);  // the save directory: its latest
    EXPECT_EQ(ck.dir(), dir + "/step-5");
    const Manifest& m = ck.manifest();
    EXPECT_EQ(m.world_size, W);
    EXPECT_EQ(m.step, 5);
    EXPECT_EQ(m.model, tiny());
    EXPECT_EQ(m.dtype, DType::kBF16);
    EXPECT_EQ(m.loss_scale.scale, 1024.0);
    EXPECT_EQ(m.loss_scale.overflows, 1);
    EXPECT_EQ(m.data.next_token, saved.data.next_token);
    EXPECT_EQ(m.training["lr"], 0.001);
    ASSERT_EQ(m.ranks.size(), static_cast<size_t>(W));
    for (int r = 0; r < W; ++r) {
      EXPECT_EQ(m.ranks[static_cast<size_t>(r)].crc32c, saved.ranks[static_cast<size_t>(r)].crc32c);
      EXPECT_EQ(m.ranks[static_cast<size_t>(r)].bytes, fs::file_size(ck.file_path(r)));
      EXPECT_EQ(ck.verify_file(r), "");
    }
    for (int st = -1; st < 2; ++st)
      for (int u = 0; u < layout.num_units(); ++u) {
        const size_t n = layout.unit_numel(u);
        std::vector<float> got(n, -1.0f);
        ck.read(st, u, 0, n, got.data());
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], value(st, u, i)) << "W " << W << " state " << st << " unit " << u;
        // Ranges of any size anywhere: what a rank of another world size asks for.
        for (int k = 0; k < 20; ++k) {
          const size_t b = rng() % n, c = rng() % (n - b + 1);
          std::vector<float> part(c + 1, -7.0f);
          ck.read(st, u, b, c, part.data());
          for (size_t i = 0; i < c; ++i) ASSERT_EQ(part[i], value(st, u, b + i));
          EXPECT_EQ(part[c], -7.0f) << "wrote past the range";
        }
      }
    EXPECT_ANY_THROW(ck.read(-1, 0, layout.unit_numel(0) - 2, 3, nullptr));
    EXPECT_ANY_THROW(ck.read(2, 0, 0, 1, nullptr));
  }
}

// A file filter opens only some rank files (a resuming rank opens those that hold its shard): what
// they hold reads back, a missing file that is not opened goes unnoticed here, and reading what only
// a file left closed holds is an error.
TEST_F(CheckpointTest, AFileFilterOpensOnlyTheFilesAsked) {
  const model::ParamLayout layout(tiny());
  const int W = 3;
  save(root_, W, 2);
  fs::remove(root_ + "/step-2/" + rank_file_name(2));  // never opened below
  std::vector<int> asked;
  const Checkpoint ck = Checkpoint::open(root_, nullptr, [&](const Manifest& m, int f) {
    EXPECT_EQ(m.world_size, W);
    asked.push_back(f);
    return f == 0;
  });
  EXPECT_EQ(asked, (std::vector<int>{0, 1, 2}));
  for (int u = 0; u < layout.num_units(); ++u) {
    const size_t n = layout.unit_numel(u), s = shard_of(n, W);
    std::vector<float> got(s);
    ck.read(0, u, 0, std::min(n, s), got.data());  // rank 0's file
    for (size_t i = 0; i < std::min(n, s); ++i) ASSERT_EQ(got[i], value(0, u, i));
    if (n > s) {
      EXPECT_ANY_THROW(ck.read(0, u, s, 1, got.data())) << "unit " << u;  // rank 1's, not opened
      EXPECT_ANY_THROW(ck.read(-1, u, s - 1, 2, got.data())) << "unit " << u;  // across into it
    }
  }
  EXPECT_THROW(Checkpoint::open(root_), UsageError);  // without the filter the missing file is found
}

TEST_F(CheckpointTest, ManifestSaysWhichRankHoldsWhichTensor) {
  save(root_, 3, 2);
  const nlohmann::json j = nlohmann::json::parse(read_file(root_ + "/step-2/manifest.json"));
  EXPECT_EQ(j["format"], "zerodp-checkpoint");
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_EQ(j["zero_stage"], 2);
  EXPECT_EQ(j["optimizer"]["states"], nlohmann::json({"exp_avg", "exp_avg_sq"}));
  // Unit 1 (872 elements, shard 304): rank 0 [0, 304), rank 1 [304, 608), rank 2 [608, 872).
  EXPECT_EQ(j["units"][1]["padded"], 912);
  EXPECT_EQ(j["units"][1]["shard"], 304);
  EXPECT_EQ(j["units"][1]["tensors"][2]["name"], "h.0.attn.c_attn.weight");
  EXPECT_EQ(j["units"][1]["tensors"][2]["offset"], 16);
  EXPECT_EQ(j["files"][1]["file"], "rank-00001.safetensors");
  EXPECT_EQ(j["files"][1]["ranges"][1], nlohmann::json({{"unit", 1}, {"begin", 304}, {"end", 608}}));
  // h.0.attn.c_attn.weight is elements [16, 208) of unit 1: all on rank 0, from its element 16.
  // Unit 0 (208 elements, shard 80): wpe.weight is its elements [128, 192): rank 1 holds the first
  // 32 (from its element 48), rank 2 the rest.
  for (const auto& t : j["tensors"]) {
    if (t["name"] == "h.0.attn.c_attn.weight") {
      EXPECT_EQ(t["pieces"], nlohmann::json::parse(
                                 R"([{"rank":0,"begin":0,"end":192,"file_tensor":"unit.1.weights","file_offset":16}])"));
    }
    if (t["name"] == "wpe.weight") {
      EXPECT_EQ(t["pieces"], nlohmann::json::parse(
                                 R"([{"rank":1,"begin":0,"end":32,"file_tensor":"unit.0.weights","file_offset":48},
                                     {"rank":2,"begin":32,"end":64,"file_tensor":"unit.0.weights","file_offset":0}])"));
    }
  }
  // The rank files are plain safetensors.
  const SafetensorsReader st = SafetensorsReader::open(root_ + "/step-2/rank-00001.safetensors");
  EXPECT_EQ(st.metadata().at("rank"), "1");
  std::vector<float> v(2);
  st.read_f32("unit.1.exp_avg_sq", 10, 2, v.data());
  EXPECT_EQ(v[0], value(1, 1, 314));
  EXPECT_EQ(v[1], value(1, 1, 315));
}

TEST_F(CheckpointTest, LatestKeepAndReplace) {
  for (int64_t s = 1; s <= 5; ++s) save(root_, 2, s, /*keep=*/2);
  EXPECT_EQ(entries(root_), (std::vector<std::string>{"latest", "step-4", "step-5"}));
  EXPECT_EQ(read_file(root_ + "/latest"), "step-5\n");
  EXPECT_EQ(resolve_checkpoint(root_), root_ + "/step-5");
  EXPECT_EQ(resolve_checkpoint(root_ + "/step-4/"), root_ + "/step-4");

  // A resumed run saves step 4 again: it replaces the old one, becomes latest; step-5 (an earlier
  // run's, above it) is left alone and not counted.
  save(root_, 3, 4, /*keep=*/1, /*salt=*/1);
  EXPECT_EQ(entries(root_), (std::vector<std::string>{"latest", "step-4", "step-5"}));
  const Checkpoint ck = Checkpoint::open(root_);
  EXPECT_EQ(ck.dir(), root_ + "/step-4");
  EXPECT_EQ(ck.manifest().world_size, 3);
  float x = 0;
  ck.read(0, 1, 100, 1, &x);
  EXPECT_EQ(x, value(0, 1, 100, 1));
}

// The checkpoints --keep retires, handed to the caller to remove off its critical path: out of sight at
// once (renamed aside), `latest` and the kept ones intact; gone once removed. Left behind (a crash
// before the removal), the next commit removes them.
TEST_F(CheckpointTest, RetiredCheckpointsAreSetAsideForTheCaller) {
  using Names = std::vector<std::string>;
  save(root_, 2, 1);
  save(root_, 2, 2);
  Names retired;
  save(root_, 2, 3, /*keep=*/1, 0, 2, &retired);
  EXPECT_EQ(entries(root_), (Names{".deleting-step-1", ".deleting-step-2", "latest", "step-3"}));
  EXPECT_EQ(retired, (Names{root_ + "/.deleting-step-2", root_ + "/.deleting-step-1"}));
  EXPECT_EQ(Checkpoint::open(root_).dir(), root_ + "/step-3");
  remove_dirs(retired);
  EXPECT_EQ(entries(root_), (Names{"latest", "step-3"}));

  retired.clear();
  save(root_, 2, 4, /*keep=*/1, 0, 2, &retired);
  EXPECT_EQ(retired, (Names{root_ + "/.deleting-step-3"}));
  save(root_, 2, 5, /*keep=*/1);  // the crash's leftover swept
  EXPECT_EQ(entries(root_), (Names{"latest", "step-5"}));
  EXPECT_THROW(remove_dirs({root_ + "/step-5/manifest.json/x"}), RuntimeFailure);
}

TEST_F(CheckpointTest, WriterKilledHalfWayLeavesThePreviousCheckpoint) {
  save(root_, 2, 3);
  const Checkpoint before = Checkpoint::open(root_);
  const uint32_t crc_before = before.manifest().ranks[1].crc32c;

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child starts the save of step 6 and is killed writing rank 1's file.
    std::vector<float> w(872, 1.0f);
    prepare_save(root_, 6);
    RankPiece p{{1, 0, 872}, w.data(), {w.data(), w.data()}};
    write_rank_file(partial_dir(root_, 6), 0, 2, 6, {"exp_avg", "exp_avg_sq"}, {p});
    RankFileOptions kill;
    kill.kill_midway = true;
    write_rank_file(partial_dir(root_, 6), 1, 2, 6, {"exp_avg", "exp_avg_sq"}, {p}, kill);
    std::_Exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child was meant to be killed";
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  // No step-6, latest unchanged; what the save left is hidden in .partial-step-6 (rank 0's file
  // and rank 1's unfinished temporary).
  EXPECT_EQ(entries(root_), (std::vector<std::string>{".partial-step-6", "latest", "step-3"}));
  const std::vector<std::string> partial = entries(root_ + "/.partial-step-6");
  ASSERT_EQ(partial.size(), 2u);
  EXPECT_EQ(partial[0], "rank-00000.safetensors");
  EXPECT_TRUE(partial[1].starts_with("rank-00001.safetensors.tmp.")) << partial[1];
  EXPECT_GT(fs::file_size(root_ + "/.partial-step-6/" + partial[1]), 0u);
  const Checkpoint after = Checkpoint::open(root_);
  EXPECT_EQ(after.dir(), root_ + "/step-3");
  EXPECT_EQ(after.manifest().ranks[1].crc32c, crc_before);

  // The next good save removes the leftovers.
  save(root_, 2, 9);
  EXPECT_EQ(entries(root_), (std::vector<std::string>{"latest", "step-3", "step-9"}));
}

// With `finite`, a NaN or Inf in the weights or a state stops the write naming where it is, and no
// file (nor temporary) is left; without it the same bytes are written.
TEST_F(CheckpointTest, NonFiniteValuesAreRefusedLeavingNoFile) {
  const std::string dir = root_ + "/nonfinite";
  fs::create_directories(dir);
  const size_t n = 300000;  // more than a MiB a state: the bad element lies in a later chunk
  std::vector<float> w(n, 0.25f), m(n, 0.5f), v(n, 1.0f);
  const RankPiece piece{{1, 1000, 1000 + n}, w.data(), {m.data(), v.data()}};
  RankFileOptions check;
  check.finite = true;
  check.after_step = 41;
  EXPECT_NO_THROW(write_rank_file(dir, 0, 1, 42, {"exp_avg", "exp_avg_sq"}, {piece}, check));
  fs::remove_all(dir);
  fs::create_directories(dir);

  v[270000] = std::numeric_limits<float>::infinity();
  try {
    write_rank_file(dir, 0, 1, 42, {"exp_avg", "exp_avg_sq"}, {piece}, check);
    ADD_FAILURE() << "wrote an Inf";
  } catch (const RuntimeFailure& e) {
    const std::string what = e.what();
    for (const char* needle : {"after step 41", "inf at element 271000 of unit 1", "optimizer state 'exp_avg_sq'",
                               "range 1000..301000", "finite weights and states"})
      EXPECT_NE(what.find(needle), std::string::npos) << needle << " in: " << what;
  }
  EXPECT_TRUE(entries(dir).empty());

  w[5] = std::numeric_limits<float>::quiet_NaN();
  try {
    write_rank_file(dir, 0, 1, 42, {"exp_avg", "exp_avg_sq"}, {piece}, check);
    ADD_FAILURE() << "wrote a NaN";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("nan at element 1005 of unit 1 in the weights"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(entries(dir).empty());
  EXPECT_NO_THROW(write_rank_file(dir, 0, 1, 42, {"exp_avg", "exp_avg_sq"}, {piece}));  // not asked to check
  EXPECT_EQ(entries(dir), std::vector<std::string>{"rank-00000.safetensors"});
}

TEST_F(CheckpointTest, DamagedFilesAreRefusedNamingThem) {
  const std::string dir = root_ + "/step-1";
  const std::string rank1 = dir + "/rank-00001.safetensors";
  auto fresh = [&] {
    fs::remove_all(root_);
    fs::create_directories(root_);
    save(root_, 3, 1);
  };

  fresh();  // truncated
  fs::resize_file(rank1, fs::file_size(rank1) - 7);
  expect_refused(root_, {rank1, "truncated"});

  fresh();  // a bit flipped in the data, then in the header
  for (const size_t at : {fs::file_size(rank1) - 5, size_t{20}}) {
    std::string bytes = read_file(rank1);
    bytes[at] = static_cast<char>(bytes[at] ^ 0x04);
    write_text(rank1, bytes);
    expect_refused(dir, {rank1, "checksum mismatch"});
    bytes[at] = static_cast<char>(bytes[at] ^ 0x04);
    write_text(rank1, bytes);
    EXPECT_NO_THROW(Checkpoint::open(dir));
  }

  // Checksums can be left to others (each rank of a resume verifies some files): every other
  // check still runs, and verify_file() finds the damage.
  std::string bytes = read_file(rank1);
  bytes[bytes.size() - 1] ^= 1;
  write_text(rank1, bytes);
  const Checkpoint partly = Checkpoint::open(dir, [](int r) { return r != 1; });
  EXPECT_NE(partly.verify_file(1).find("checksum mismatch"), std::string::npos);
  EXPECT_EQ(partly.verify_file(0), "");

  fresh();  // missing
  fs::remove(rank1);
  expect_refused(dir, {rank1, "missing"});

  fresh();  // longer than the manifest says
  std::ofstream(rank1, std::ios::binary | std::ios::app) << "x";
  expect_refused(dir, {rank1, "too long"});

  fresh();  // a rank file of another checkpoint, with a manifest that says it is fine
  save(root_ + "/other", 3, 2);
  fs::copy_file(root_ + "/other/step-2/rank-00001.safetensors", rank1, fs::copy_options::overwrite_existing);
  edit_manifest(dir, [&](nlohmann::json& j) {
    j["files"][1]["bytes"] = fs::file_size(rank1);
    const std::string b = read_file(rank1);
    j["files"][1]["crc32c"] = crc_hex(crc32c(b.data(), b.size()));
  });
  expect_refused(dir, {rank1, "step"});

  fresh();  // the manifest: a flipped bit, a missing checksum, not JSON
  const std::string manifest = dir + "/manifest.json";
  std::string text = read_file(manifest);
  text[text.find("\"world_size\": 3")+14] = '4';
  write_text(manifest, text);
  expect_refused(dir, {manifest, "checksum mismatch"});
  fresh();
  fs::remove(dir + "/manifest.crc32c");
  expect_refused(dir, {dir + "/manifest.crc32c", "missing"});
  fresh();
  write_text(manifest, "{not json");
  write_text(dir + "/manifest.crc32c", crc_hex(crc32c("{not json", 9)) + "  manifest.json\n");
  expect_refused(dir, {manifest, "not valid JSON"});

  // Paths that are no checkpoint.
  expect_refused(root_ + "/nowhere", {root_ + "/nowhere", "no such"});
  fs::create_directories(root_ + "/empty");
  expect_refused(root_ + "/empty", {root_ + "/empty", "neither"});
  fresh();
  write_text(root_ + "/latest", "../../etc\n");
  expect_refused(root_, {root_ + "/latest", "step-6"});
  write_text(root_ + "/latest", "step-8\n");
  expect_refused(root_, {root_ + "/latest", "step-8"});
}

TEST_F(CheckpointTest, ManifestSchemaIsChecked) {
  const std::string dir = root_ + "/step-1";
  const std::string manifest = dir + "/manifest.json";
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"version", [](nlohmann::json& j) { j["format_version"] = 2; }, "format_version"},
      {"format", [](nlohmann::json& j) { j["format"] = "deepspeed"; }, "format"},
      {"missing key", [](nlohmann::json& j) { j.erase("step"); }, "'step': missing"},
      {"type", [](nlohmann::json& j) { j["world_size"] = "3"; }, "world_size"},
      {"stage", [](nlohmann::json& j) { j["zero_stage"] = 4; }, "zero_stage"},
      {"dtype", [](nlohmann::json& j) { j["dtype"] = "fp8"; }, "dtype"},
      {"optimizer", [](nlohmann::json& j) { j["optimizer"]["type"] = "Lion"; }, "optimizer.type"},
      {"states", [](nlohmann::json& j) { j["optimizer"]["states"] = {"exp_avg"}; }, "optimizer.states"},
      {"steps", [](nlohmann::json& j) { j["optimizer_steps"] = 9; }, "optimizer_steps"},
      {"model", [](nlohmann::json& j) { j["model"]["n_layer"] = 3; }, "units"},
      {"heads", [](nlohmann::json& j) { j["model"]["n_head"] = 3; }, "divisible"},
      {"world", [](nlohmann::json& j) { j["world_size"] = 2; }, "world_size"},
      {"padding", [](nlohmann::json& j) { j["units"][0]["shard"] = 16; }, "units[0]"},
      {"gap", [](nlohmann::json& j) { j["files"][1]["ranges"][0]["begin"] = 100; }, "gap"},
      {"overlap", [](nlohmann::json& j) { j["files"][1]["ranges"][0]["begin"] = 50; }, "overlap"},
      {"file name", [](nlohmann::json& j) { j["files"][1]["file"] = "../rank-00001.safetensors"; }, "files[1].file"},
      {"crc", [](nlohmann::json& j) { j["files"][0]["crc32c"] = "xyz"; }, "crc32c"},
      {"tensors", [](nlohmann::json& j) { j["tensors"][3]["pieces"][0]["rank"] = 1; }, "tensors"},
      {"data", [](nlohmann::json& j) { j["data"]["next_token"] = 1; }, "data.next_token"},
      {"tensor layout", [](nlohmann::json& j) { j["units"][1]["tensors"][0]["name"] = "x"; }, "units[1].tensors"},
  };
  for (const Case& c : cases) {
    fs::remove_all(root_);
    fs::create_directories(root_);
    save(root_, 3, 1);
    edit_manifest(dir, c.edit);
    SCOPED_TRACE(c.what);
    expect_refused(dir, {manifest, "bad checkpoint manifest", c.needle});
  }
}

TEST_F(CheckpointTest, ConsolidateWritesTheModelFileOneTensorAtATime) {
  save(root_, 3, 4);
  const Checkpoint ck = Checkpoint::open(root_);
  const model::ParamLayout layout(tiny());
  MemoryLedger::global().reset_peaks();
  const uint64_t live_before = MemoryLedger::global().live_total();
  consolidate_checkpoint(ck, root_ + "/model.safetensors");
  size_t largest = 0;
  for (const auto& p : layout.params()) largest = std::max(largest, p.numel);
  EXPECT_EQ(MemoryLedger::global().peak_total() - live_before, largest * sizeof(float));

  // The same bytes as save_gpt2 of the same weights (what `zerodp train --out` writes).
  std::vector<std::vector<float>> units(static_cast<size_t>(layout.num_units()));
  for (int u = 0; u < layout.num_units(); ++u)
    for (size_t i = 0; i < layout.unit_numel(u); ++i) units[static_cast<size_t>(u)].push_back(value(-1, u, i));
  save_gpt2(root_ + "/reference.safetensors", tiny(), layout,
            [&](int u) { return units[static_cast<size_t>(u)].data(); });
  EXPECT_EQ(read_file(root_ + "/model.safetensors"), read_file(root_ + "/reference.safetensors"));
  const GPT2Weights w = GPT2Weights::open(root_ + "/model.safetensors");
  EXPECT_EQ(w.config(), tiny());
}

TEST_F(CheckpointTest, DescriptionSaysWhatIsInside) {
  save(root_, 3, 4, 0, 0, /*stage=*/3);
  const std::string text = describe_checkpoint(Checkpoint::open(root_));
  for (const std::string& needle :
       {root_ + "/step-4", std::string("GPT-2 L2 H2 C8 V16 N8"), std::string("3 ranks, ZeRO stage 3"),
        std::string("compute dtype bf16"), std::string("exp_avg, exp_avg_sq"), std::string("training continues at step 4"),
        std::string("rank-00002.safetensors"), std::string("padded to 912 = 3 x 304"), std::string("1[608, 872)"),
        std::string("loss scale   1024")})
    EXPECT_NE(text.find(needle), std::string::npos) << "missing '" << needle << "' in\n" << text;
}

}  // namespace
}  // namespace zerodp::ckpt
