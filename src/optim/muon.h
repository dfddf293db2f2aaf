// Muon (docs/reference/optimizer.md#muon): momentum orthogonalised by five Newton-Schulz iterations,
// for the hidden 2-D weight matrices; the other tensors take AdamW (optim/adamw.h). For a matrix W
// [rows, cols] with gradient g, at every step:
//     m ← μ·m + (1 − μ)·g
//     u ← (1 − μ)·g + μ·m      (Nesterov, the default)   or   u ← m
//     O ← NewtonSchulz5(u)     (X = u / (‖u‖_F + 1e-7), transposed when rows > cols; five times
//                               A = X·Xᵀ; X = a·X + (b·A + c·A·A)·X; transposed back)
//     W ← W·(1 − lr·wd) − lr·max(1, rows/cols)^0.5·O
// The elementwise parts are here, on any range of a matrix (a rank's shard of it holds the same
// bits as the whole); the iteration needs the whole matrix and GEMMs, so it is the engine's
// (zero/muon_step.h, through the device's GEMM). Scalars are rounded once from double to float, as
// AdamW's are; per element the arithmetic is float, each "x·a + y" one fma.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zerodp::optim {

// The quintic iteration's coefficients, as published (Keller Jordan, 2024).
constexpr double kNewtonSchulzA = 3.4445, kNewtonSchulzB = -4.7750, kNewtonSchulzC = 2.0315;
constexpr int kNewtonSchulzSteps = 5;
constexpr double kNewtonSchulzEps = 1e-7;  // added to ‖u‖_F before the division

struct MuonParams {
  double lr = 0.02;
  double momentum = 0.95;
  bool nesterov = true;
  double weight_decay = 0.0;
};

// The per-step scalars of one matrix, rounded once from double: what every implementation (this one,
// the GPU's in cuda/kernels_muon.cu) computes each element with.
struct MuonScalars {
  float mu, one_minus_mu;
  float decay_factor;  // 1 − lr·wd
  float neg_step;      // −lr·max(1, rows/cols)^0.5
  float grad_scale;
  bool nesterov;
};

// For a matrix of rows × cols (as stored). Throws RuntimeFailure for an empty shape or a momentum
// outside [0, 1).
MuonScalars muon_scalars(const MuonParams& hp, int64_t rows, int64_t cols, float grad_scale);

// n elements of a matrix: g' = g·grad_scale; m = fma(g', 1 − μ, m·μ); u = fma(m, μ, g'·(1 − μ))
// (Nesterov) or u = m. u may not alias m or g.
void muon_momentum(const float* g, float* m, float* u, size_t n, const MuonScalars& s);
// n elements of a matrix: w = fma(o, neg_step, w·decay_factor) (w·1 exactly when wd = 0).
void muon_apply(float* w, const float* o, size_t n, const MuonScalars& s);

// FLOPs of NewtonSchulz5 on a rows × cols matrix (the GEMMs': with r = min, c = max, each step
// 2r²c for X·Xᵀ, 2r³ for A·A, 2r²c for B·X): what balancing the matrices over the ranks weighs.
double newton_schulz_flops(int64_t rows, int64_t cols);

}  // namespace zerodp::optim
