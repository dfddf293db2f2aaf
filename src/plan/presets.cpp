#include "plan/presets.h"

#include <array>

#include "core/error.h"

namespace zerodp::plan {

namespace {
struct Preset {
  std::string_view name;
  int n_layer, n_head, n_embd;
};
constexpr std::array<Preset, 4> kPresets = {{
    {"gpt2", 12, 12, 768},
    {"gpt2-medium", 24, 16, 1024},
    {"gpt2-large", 36, 20, 1280},
    {"gpt2-xl", 48, 25, 1600},
}};
constexpr int kVocab = 50257, kContext = 1024;
}  // namespace

model::GPT2Config gpt2_preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (p.name == name) return {p.n_layer, p.n_head, p.n_embd, kVocab, kContext};
  }
  throw UsageError(fmt::format("--preset: unknown model '{}' (known: gpt2, gpt2-medium, gpt2-large, gpt2-xl)", name));
}

std::vector<std::string_view> gpt2_preset_names() {
  std::vector<std::string_view> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

}  // namespace zerodp::plan
