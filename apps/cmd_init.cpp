// `zerodp init`: writes a freshly initialised GPT-2 (docs/reference/model.md#init, docs/reference/command-line.md#commands) as safetensors, one unit at a
// time so memory stays near the largest unit.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "apps/commands.h"
#include "ckpt/gpt2_weights.h"
#include "core/error.h"
#include "core/memory.h"
#include "model/config.h"
#include "model/init.h"
#include "model/layout.h"

namespace zerodp::cli {

namespace {

struct InitOptions {
  std::string out;
  int layers = 2;
  int heads = 4;
  int embd = 64;
  int vocab = 256;
  int ctx = 128;
  uint64_t seed = 1337;
};

// Free bytes of the file system that will hold `path` (0 when it cannot be told).
uint64_t free_bytes_beside(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct statvfs st;
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

// A valid config (within docs/limits.md) may still be too large for this machine: init holds one
// unit at a time in memory and writes every parameter in fp32. Refuse before allocating or writing.
void check_fits(const model::GPT2Config& c, const std::string& out) {
  const uint64_t C = static_cast<uint64_t>(c.n_embd);
  const uint64_t embedding = (static_cast<uint64_t>(c.vocab_size) + static_cast<uint64_t>(c.n_ctx) + 2) * C;
  const uint64_t block = 12 * C * C + 13 * C;
  const uint64_t unit_bytes = std::max(embedding, block) * sizeof(float);
  const uint64_t memory = physical_memory_bytes();
  ZDP_REQUIRE(memory == 0 || unit_bytes <= memory,
              "GPT-2 {}: its largest unit alone is {} of fp32, more than this machine's {} of memory",
              c.summary(), format_bytes(unit_bytes), format_bytes(memory));
  const uint64_t file_bytes = static_cast<uint64_t>(c.param_count()) * sizeof(float);
  const uint64_t disk = free_bytes_beside(out);
  ZDP_REQUIRE(disk == 0 || file_bytes <= disk, "'{}': GPT-2 {} is {} of fp32, more than the {} free there", out,
              c.summary(), format_bytes(file_bytes), format_bytes(disk));
}

int run_init(const InitOptions& o) {
  ZDP_REQUIRE(o.layers > 0, "--layers must be positive, got {}", o.layers);
  ZDP_REQUIRE(o.heads > 0, "--heads must be positive, got {}", o.heads);
  ZDP_REQUIRE(o.embd > 0, "--embd must be positive, got {}", o.embd);
  ZDP_REQUIRE(o.vocab > 0, "--vocab must be positive, got {}", o.vocab);
  ZDP_REQUIRE(o.ctx > 0, "--ctx must be positive, got {}", o.ctx);
  ZDP_REQUIRE(o.embd % o.heads == 0, "--embd {} is not divisible by --heads {}", o.embd, o.heads);
  model::GPT2Config config;
  config.n_layer = o.layers;
  config.n_head = o.heads;
  config.n_embd = o.embd;
  config.vocab_size = o.vocab;
  config.n_ctx = o.ctx;
  config.validate();  // within docs/limits.md
  check_fits(config, o.out);
  const model::ParamLayout layout(config);

  Buffer unit_buffer;  // one unit at a time, replaced on each call
  ckpt::save_gpt2(o.out, config, layout, [&](int unit) {
    const size_t n = layout.unit_numel(unit);
    unit_buffer.release();  // the previous unit is written: free it before taking the next
    unit_buffer = Buffer(n * sizeof(float), MemCategory::kParam);
    model::init_unit_range(config, layout, unit, 0, n, o.seed, unit_buffer.as<float>());
    return static_cast<const float*>(unit_buffer.as<float>());
  });
  fmt::print("wrote {}: GPT-2 {} ({} parameters, seed {})\n", o.out, config.summary(), layout.total_numel(),
             o.seed);
  return 0;
}

void register_init(CLI::App& app, Action& action) {
  static InitOptions opts;
  auto* cmd = app.add_subcommand("init", "Write a freshly initialised GPT-2 (safetensors, F32)");
  cmd->add_option("--out", opts.out, "Output safetensors file (written atomically)")->required();
  cmd->add_option("--layers", opts.layers, "Number of transformer blocks L")->capture_default_str();
  cmd->add_option("--heads", opts.heads, "Attention heads H (must divide --embd)")->capture_default_str();
  cmd->add_option("--embd", opts.embd, "Embedding width C")->capture_default_str();
  cmd->add_option("--vocab", opts.vocab, "Vocabulary size V (256 for `zerodp tokenize`'s bytes)")
      ->capture_default_str();
  cmd->add_option("--ctx", opts.ctx, "Context length N (rows of wpe)")->capture_default_str();
  cmd->add_option("--seed", opts.seed, "Random seed: the same seed gives the same bits")
      ->capture_default_str();
  cmd->footer(
      "Defaults make a small model: L=2 H=4 C=64 V=256 N=128, seed 1337.\n"
      "Weights ~ N(0, 0.02), c_proj weights ~ N(0, 0.02/sqrt(2L)), biases 0, LayerNorm weights 1.");
  cmd->callback([&action] { action = [] { return run_init(opts); }; });
}

const CommandRegistration init_registration(20, register_init);

}  // namespace

}  // namespace zerodp::cli
