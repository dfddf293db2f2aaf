// Rotary position embeddings as transformers' Llama computes them (the "rotate_half" pairing: element
// i of a head turns with element i + D/2), with the frequencies and tables in fp32 as it does:
//   inv_freq[i] = 1 / theta^(2i/D)                      (i < D/2; the llama3 scaling may rescale them)
//   cos[t,i], sin[t,i] = cos, sin of t·inv_freq[i]
//   forward:  out[i] = x[i]·cos − x[i+D/2]·sin ;  out[i+D/2] = x[i+D/2]·cos + x[i]·sin
//   backward: the transposed rotation (by −t·inv_freq[i]) of the gradient.
#pragma once

#include <cstdint>
#include <vector>

namespace zerodp::kernels {

// The llama3 frequency scaling (rope_scaling / rope_parameters of a config.json with rope_type
// "llama3"): wavelengths longer than original_max_position / low_freq_factor are divided by `factor`,
// shorter than original_max_position / high_freq_factor kept, those between interpolated.
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position = 8192;
};

// inv_freq [D/2] for heads of D (even) values, computed in fp32 in transformers' order of operations;
// `scaling` null: none.
std::vector<float> rope_inv_freq(double theta, int head_dim, const Llama3RopeScaling* scaling);
// cos, sin [T, half]: of position t times inv_freq[i], the product and the functions in fp32.
void rope_tables(float* cos, float* sin, const float* inv_freq, int T, int half);

// Rotates `heads` heads of D values in each of N rows: row n is at position n % T, its first head
// starts at element n·stride. out may be inp (each pair is read before it is written). X is the
// stored type (float, double, or 16-bit: computed in float, rounded once).
template <class X>
void rope_forward(X* out, const X* inp, const float* cos, const float* sin, int N, int T, int heads, int D,
                  int64_t stride);
// The gradient of rope_forward: dinp = R(−θ)·dout, same layout; dinp may be dout.
template <class X>
void rope_backward(X* dinp, const X* dout, const float* cos, const float* sin, int N, int T, int heads, int D,
                   int64_t stride);

}  // namespace zerodp::kernels
