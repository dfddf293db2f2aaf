// The manifest of a sharded checkpoint (manifest.json, docs/checkpoints.md): what was trained (model,
// precision, optimizer and its settings), how it was cut (world size, stage, each unit's padding,
// which rank file holds which range of which unit and of which tensor), where training stands
// (step, optimizer steps, loss scaler, data position) and the size and CRC-32C of every rank file.
//
// manifest_from_json() checks all of it before anyone uses it: the schema (every key, its type and
// range), the model config, the units against the model's layout, the ranges (each unit tiled by
// the ranks exactly once) and the derived per-tensor map. Every problem is a UsageError (exit 2)
// that names the manifest and the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "model/gpt2_config.h"
#include "model/layout.h"

namespace zerodp::ckpt {

constexpr const char* kCheckpointFormat = "zerodp-checkpoint";
constexpr int kCheckpointFormatVersion = 1;

// Elements [begin, end) of one unit's flat buffer (model/layout.h), end > begin.
struct UnitRange {
  int unit = 0;
  size_t begin = 0, end = 0;
  bool operator==(const UnitRange&) const = default;
};

// How the saving run cut one unit (zero/sharding.h): numel real elements, padded to W·shard.
struct UnitShape {
  size_t numel = 0, padded = 0, shard = 0;
  bool operator==(const UnitShape&) const = default;
};

// One rank's file: its name inside the checkpoint directory, size, checksum, and the unit ranges it
// holds (in unit order; a unit of which the rank owns nothing is absent).
struct RankFile {
  int rank = 0;
  std::string file;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  std::vector<UnitRange> ranges;
};

// zero::LossScaler's state (fp16 runs; a scale of 1 that never changes otherwise).
struct LossScaleState {
  double scale = 1;
  int64_t good_steps = 0;
  int64_t hysteresis_left = 0;
  int64_t overflows = 0;
};

// Where the token stream stands (docs/reference/data-order.md#ranks): step s, micro-step g, rank r of the saving run read
// from ((s·G + g)·W + r)·B·T, so the next step starts at token step·tokens_per_step (modulo the
// file's length). Any run with the same T and the same W·G·B continues the same global batches.
struct DataPosition {
  std::string path;                 // the token file of the saving run
  int64_t micro_batch = 0;          // B
  int64_t seq = 0;                  // T
  int64_t accum = 0;                // G
  int64_t tokens_per_step = 0;      // W·G·B·T
  int64_t next_token = 0;           // step·tokens_per_step
  // W: the saving run's data-parallel ranks. With hybrid sharding it is a multiple of world_size (the
  // shard group's ranks, one file each); 0 when written: world_size (the key is then left out).
  int64_t ranks = 0;
};

struct Manifest {
  int format_version = kCheckpointFormatVersion;
  std::string created_by;           // "zerodp 0.1.0 (abc1234)"
  int64_t step = 0;                 // optimizer steps run: the index of the next step
  int64_t optimizer_steps = 0;      // updates applied (AdamW's t); fewer than step after fp16 skips
  model::ModelConfig model;
  int world_size = 1;
  int zero_stage = 0;
  DType dtype = DType::kF32;        // compute dtype; the checkpoint always holds fp32
  std::string optimizer;            // "AdamW" or "SGD"
  std::vector<std::string> states;  // per-element optimizer states, in the engine's order
  LossScaleState loss_scale;
  DataPosition data;
  nlohmann::json training = nlohmann::json::object();  // every setting of the run (informative)
  std::vector<UnitShape> units;     // one per unit of the model's layout
  std::vector<RankFile> ranks;      // one per rank, ranks[r].rank == r
};

// The per-element optimizer states an optimizer keeps: AdamW {"exp_avg", "exp_avg_sq"}, SGD
// {"momentum_buffer"} or {} (no momentum). UsageError for an unknown optimizer name.
std::vector<std::string> optimizer_state_names(const std::string& optimizer, bool sgd_momentum);

// Names inside a checkpoint directory.
std::string rank_file_name(int rank);                   // "rank-00003.safetensors"
std::string rank_tensor_name(int unit, std::string_view what);  // "unit.3.weights", "unit.3.exp_avg"
std::string checkpoint_dir_name(int64_t step);          // "step-6"

// The JSON of manifest.json, with the derived sections (each unit's tensors; each tensor's pieces)
// that let another tool read the files without knowing zerodp's layout.
nlohmann::ordered_json manifest_to_json(const Manifest& m);
// Parses and validates a manifest; `label` (the manifest's path) starts every error message.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& label);

// Limits on a manifest's text (docs/limits.md). The manifest grows with world size times units (a
// range and a tensor piece per rank and unit, about 250 bytes): 256 MiB holds a million of those,
// e.g. GPT-2 XL's 49 units on 20,000 ranks. Its JSON nests 6 levels (units[].tensors[].shape); 32
// leave room for the free-form `training` section and keep every recursive use of the value
// (copies, comparisons, dumps) far from the stack's end.
constexpr size_t kMaxManifestBytes = size_t{256} << 20;
constexpr size_t kMaxManifestDepth = 32;
// The text of manifest.json to a validated Manifest: parse_json within the limits above (a
// UsageError naming `label` for text too long, nested too deep or not JSON), then manifest_from_json.
// What Checkpoint::open does with the file's text; anything else reading manifests should use it too.
Manifest parse_manifest(std::string_view text, const std::string& label);

// "1a2b3c4d" and back (UsageError naming `label` when the text is not 8 hex digits).
std::string crc_hex(uint32_t crc);
bool is_crc_hex(const std::string& text);
uint32_t parse_crc_hex(const std::string& text, const std::string& label);

}  // namespace zerodp::ckpt
