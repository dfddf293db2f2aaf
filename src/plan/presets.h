// GPT-2's published sizes by name (Radford et al. 2019, as Hugging Face ships them), for
// `zerodp estimate --preset`: small 124M, medium 355M, large 774M, xl 1.56B parameters.
#pragma once

#include <string_view>
#include <vector>

#include "model/config.h"

namespace zerodp::plan {

// "gpt2" (L12 H12 C768), "gpt2-medium" (L24 H16 C1024), "gpt2-large" (L36 H20 C1280),
// "gpt2-xl" (L48 H25 C1600); all V = 50257, N = 1024. UsageError naming the preset and the known
// names otherwise.
model::GPT2Config gpt2_preset(std::string_view name);
std::vector<std::string_view> gpt2_preset_names();

}  // namespace zerodp::plan
