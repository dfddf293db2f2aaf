#include "plan/presets.h"

#include <array>
#include <optional>

#include "core/error.h"

#include <fmt/ranges.h>

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

// The Llama family's config.json values (Hugging Face's copies of each model's), in LlamaConfig's
// own field order: family, layers, heads, key/value heads, width, head dimension, MLP width,
// vocabulary, context, RoPE theta and scaling, RMSNorm epsilon, tied embeddings, attention bias, and
// Mistral's sliding window.
struct LlamaPreset {
  std::string_view name;
  model::LlamaConfig config;
};
constexpr auto kLlama = model::LlamaFamily::kLlama;
constexpr auto kQwen2 = model::LlamaFamily::kQwen2;
constexpr auto kQwen3 = model::LlamaFamily::kQwen3;
constexpr auto kMistral = model::LlamaFamily::kMistral;
// Llama 3.x's rope_scaling: low 1, high 4, original 8192, with the model's factor.
constexpr model::Llama3RopeScaling kRopeScaled8{8.0, 1.0, 4.0, 8192};
constexpr model::Llama3RopeScaling kRopeScaled32{32.0, 1.0, 4.0, 8192};
constexpr std::array<LlamaPreset, 11> kLlamaPresets = {{
    {"llama-3.2-1b", {kLlama, 16, 32, 8, 2048, 64, 8192, 128256, 131072, 500000.0, kRopeScaled32, 1e-5, true, false}},
    {"llama-3.2-3b", {kLlama, 28, 24, 8, 3072, 128, 8192, 128256, 131072, 500000.0, kRopeScaled32, 1e-5, true, false}},
    {"llama-3.1-8b", {kLlama, 32, 32, 8, 4096, 128, 14336, 128256, 131072, 500000.0, kRopeScaled8, 1e-5, false, false}},
    {"llama-3.1-70b", {kLlama, 80, 64, 8, 8192, 128, 28672, 128256, 131072, 500000.0, kRopeScaled8, 1e-5, false, false}},
    {"qwen-2.5-0.5b", {kQwen2, 24, 14, 2, 896, 64, 4864, 151936, 32768, 1000000.0, std::nullopt, 1e-6, true, false}},
    {"qwen-2.5-7b", {kQwen2, 28, 28, 4, 3584, 128, 18944, 152064, 131072, 1000000.0, std::nullopt, 1e-6, false, false}},
    {"qwen-3-0.6b", {kQwen3, 28, 16, 8, 1024, 128, 3072, 151936, 40960, 1000000.0, std::nullopt, 1e-6, true, false}},
    {"qwen-3-1.7b", {kQwen3, 28, 16, 8, 2048, 128, 6144, 151936, 40960, 1000000.0, std::nullopt, 1e-6, true, false}},
    {"qwen-3-8b", {kQwen3, 36, 32, 8, 4096, 128, 12288, 151936, 40960, 1000000.0, std::nullopt, 1e-6, false, false}},
    // Mistral 7B v0.1: attention within the last 4096 positions (v0.2 and later have no window).
    {"mistral-7b", {kMistral, 32, 32, 8, 4096, 128, 14336, 32000, 32768, 10000.0, std::nullopt, 1e-5, false, false, 4096}},
    {"smollm-135m", {kLlama, 30, 9, 3, 576, 64, 1536, 49152, 2048, 10000.0, std::nullopt, 1e-5, true, false}},
}};
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

model::ModelConfig model_preset(std::string_view name) {
  for (const LlamaPreset& p : kLlamaPresets)
    if (p.name == name) return p.config;
  for (const Preset& p : kPresets)
    if (p.name == name) return gpt2_preset(name);
  throw UsageError(fmt::format("--preset: unknown model '{}' (known: {})", name, fmt::join(model_preset_names(), ", ")));
}

std::vector<std::string_view> model_preset_names() {
  std::vector<std::string_view> names = gpt2_preset_names();
  for (const LlamaPreset& p : kLlamaPresets) names.push_back(p.name);
  return names;
}

}  // namespace zerodp::plan
