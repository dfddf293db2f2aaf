// Published model sizes by name, for `zerodp estimate --preset`: GPT-2 (Radford et al. 2019, as
// Hugging Face ships them: small 124M, medium 355M, large 774M, xl 1.56B parameters) and the Llama
// family's configs as their config.json files give them (Llama 3.2 1B/3B, Llama 3.1 8B/70B, Qwen 2.5
// 0.5B/7B, SmolLM 135M).
#pragma once

#include <string_view>
#include <vector>

#include "model/gpt2_config.h"
#include "model/model_config.h"

namespace zerodp::plan {

// "gpt2" (L12 H12 C768), "gpt2-medium" (L24 H16 C1024), "gpt2-large" (L36 H20 C1280),
// "gpt2-xl" (L48 H25 C1600); all V = 50257, N = 1024. UsageError naming the preset and the known
// names otherwise.
model::GPT2Config gpt2_preset(std::string_view name);
std::vector<std::string_view> gpt2_preset_names();

// Any preset: GPT-2's above, or the Llama family's (presets.cpp: Llama 3.1 and 3.2, Qwen 2.5, Qwen 3,
// SmolLM), by name, as model_preset_names() lists them. UsageError naming the known names otherwise.
model::ModelConfig model_preset(std::string_view name);
std::vector<std::string_view> model_preset_names();

}  // namespace zerodp::plan
