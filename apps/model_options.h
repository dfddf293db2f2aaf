// The Llama family's dimensions as `zerodp init` and `zerodp estimate` take them (--arch llama): the
// same flags, help and defaults for both.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "model/llama_config.h"

namespace zerodp::cli {

struct LlamaOptions {
  int kv_heads = 0;      // 0: --heads
  int head_dim = 0;      // 0: --embd / --heads
  int intermediate = 0;  // 0: LlamaConfig::default_intermediate_size
  double rope_theta = 10000.0;
  bool tie = false;
  bool qwen2 = false;
  bool attention_bias = false;
};

// --kv-heads, --head-dim, --intermediate, --rope-theta, --tie, --qwen2, --attention-bias.
void add_llama_options(CLI::App* cmd, LlamaOptions& o);
// Whether any of them was given a value other than its default.
bool any_llama_option(const LlamaOptions& o);

// The same options as `zerodp init` flags ("--kv-heads 2 --tie ..."), for a command line that makes
// the model (the sweep's).
std::string llama_flags(const LlamaOptions& o);

// The validated config of L layers, H heads, width C, vocabulary V and context N with `o`'s rest.
model::LlamaConfig llama_config(int layers, int heads, int embd, int vocab, int ctx, const LlamaOptions& o);

}  // namespace zerodp::cli
