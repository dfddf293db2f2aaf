// Rotary position embeddings' frequencies and tables, in fp32 in transformers' order of operations
// (its LlamaRotaryEmbedding and _compute_llama3_parameters), for the kernels' rotation
// (kernels/rope.h, through the device seam):
//   inv_freq[i] = 1 / theta^(2i/D)   (i < D/2; the llama3 scaling may rescale them)
//   cos[t,i], sin[t,i] = cos, sin of t·inv_freq[i]
#pragma once

#include <cstdint>
#include <vector>

namespace zerodp::model {

// The llama3 frequency scaling (rope_scaling / rope_parameters of a config.json with rope_type
// "llama3"): wavelengths longer than original_max_position / low_freq_factor are divided by `factor`,
// those shorter than original_max_position / high_freq_factor kept, those between interpolated.
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
  bool operator==(const Llama3RopeScaling&) const = default;
};

// inv_freq [D/2] for heads of D (even) values; `scaling` null: none.
std::vector<float> rope_inv_freq(double theta, int head_dim, const Llama3RopeScaling* scaling);
// cos, sin [T, half]: of position t times inv_freq[i], the product and the functions in fp32.
void rope_tables(float* cos, float* sin, const float* inv_freq, int T, int half);

}  // namespace zerodp::model
