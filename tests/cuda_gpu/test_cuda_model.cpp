// The whole GPT-2 model, forward and backward in bf16, on the CUDA device against the CPU device: the
// same weights and tokens give the same loss and gradients within bf16's bounds, and the GPU gives the
// same bits every time (no atomics anywhere).
//   loss: relative 5e-3 (a few bf16 roundings, 2^-8 each, may land on neighbouring values; the loss
//   is an average over B·T tokens, so they mostly cancel);
//   gradients: normwise 2^-5 per unit (dout and the GEMM operands are rounded to bf16 on both sides,
//   the attention's probabilities only on the CPU's).
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "device/cpu_device.h"
#include "device/cuda_device.h"
#include "model/model.h"
#include "model/layout.h"

namespace zerodp {
namespace {

using model::ActivationSettings;
using model::GPT2Config;
using model::ParamLayout;
using model::ResidentUnits;

constexpr int kB = 2, kT = 64;
GPT2Config config() { return GPT2Config{2, 2, 128, 320, 64}; }  // L H C V N: head size 64

std::vector<float> download(device::CudaDevice& dev, const Buffer& b) {
  std::vector<float> out(b.size() / sizeof(float));
  dev.copy(out.data(), b.data(), b.size());
  return out;
}

TEST(CudaModel, Bf16StepAgreesWithTheCpuAndRepeatsBitForBit) {
  const ParamLayout layout(config());
  device::CudaDevice gpu(0);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);

  // The same bf16 weights on both sides; fp32 gradients starting at zero.
  std::vector<std::vector<bf16>> params;
  std::vector<std::vector<float>> cpu_grads;
  std::vector<Buffer> gpu_params, gpu_grads;
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float> f(layout.unit_numel(u));
    for (float& x : f) x = nd(rng);
    for (const auto* p : layout.unit_params(u))
      if (p->name.find("ln_") != std::string::npos && p->name.find("weight") != std::string::npos)
        for (size_t i = 0; i < p->numel; ++i) f[p->offset + i] += 1.0f;
    params.emplace_back(f.size());
    convert(f.data(), DType::kF32, params.back().data(), DType::kBF16, f.size());
    cpu_grads.emplace_back(f.size(), 0.0f);
    gpu_params.push_back(gpu.allocate(f.size() * sizeof(bf16), MemCategory::kParam));
    gpu.copy(gpu_params.back().data(), params.back().data(), f.size() * sizeof(bf16));
    gpu_grads.push_back(gpu.allocate(f.size() * sizeof(float), MemCategory::kGrad));
    gpu.fill_zero(gpu_grads.back().data(), f.size() * sizeof(float));
  }
  std::vector<const bf16*> cp, gp;
  std::vector<float*> cg, gg;
  for (int u = 0; u < layout.num_units(); ++u) {
    cp.push_back(params[u].data());
    cg.push_back(cpu_grads[u].data());
    gp.push_back(gpu_params[u].as<bf16>());
    gg.push_back(gpu_grads[u].as<float>());
  }
  ResidentUnits<bf16> cpu_units(cp, cg), gpu_units(gp, gg);

  std::vector<int32_t> in(kB * kT), tg(kB * kT);
  for (int i = 0; i < kB * kT; ++i) in[i] = static_cast<int32_t>(rng() % 320), tg[i] = static_cast<int32_t>(rng() % 320);

  auto cpu_model = make_model<bf16>(layout, kB, kT);
  auto gpu_model = make_model<bf16>(layout, kB, kT, false, gpu);
  const float dloss = 1.0f / (kB * kT);
  const double cpu_loss = cpu_model->forward(in.data(), tg.data(), nullptr, cpu_units);
  cpu_model->backward(dloss, cpu_units);
  const double gpu_loss = gpu_model->forward(in.data(), tg.data(), nullptr, gpu_units);
  gpu_model->backward(dloss, gpu_units);
  EXPECT_NEAR(gpu_loss, cpu_loss, 5e-3 * std::fabs(cpu_loss));

  std::vector<std::vector<float>> first;
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::vector<float> g = download(gpu, gpu_grads[u]);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_TRUE(std::isfinite(g[i])) << "unit " << u << " [" << i << "]";
      diff += double(g[i] - cpu_grads[u][i]) * (g[i] - cpu_grads[u][i]);
      norm += double(cpu_grads[u][i]) * cpu_grads[u][i];
    }
    EXPECT_GT(norm, 0.0) << "unit " << u;
    EXPECT_LE(std::sqrt(diff), std::sqrt(norm) / 32) << "unit " << u << " gradient";
    first.push_back(g);
  }

  // Again from zero: the same bits.
  for (int u = 0; u < layout.num_units(); ++u) gpu.fill_zero(gpu_grads[u].data(), gpu_grads[u].size());
  EXPECT_EQ(gpu_model->forward(in.data(), tg.data(), nullptr, gpu_units), gpu_loss);
  gpu_model->backward(dloss, gpu_units);
  for (int u = 0; u < layout.num_units(); ++u) EXPECT_EQ(download(gpu, gpu_grads[u]), first[u]) << "unit " << u;

  // The classifier in chunks of 37 rows and the MLPs in chunks of 29 (not checkpointed): within rounding.
  for (int u = 0; u < layout.num_units(); ++u) gpu.fill_zero(gpu_grads[u].data(), gpu_grads[u].size());
  auto chunked = make_model<bf16>(layout, kB, kT, ActivationSettings(false, 37, 29), gpu);
  EXPECT_NEAR(chunked->forward(in.data(), tg.data(), nullptr, gpu_units), gpu_loss, 1e-3 * std::fabs(gpu_loss));
  chunked->backward(dloss, gpu_units);
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::vector<float> g = download(gpu, gpu_grads[u]);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      diff += double(g[i] - first[u][i]) * (g[i] - first[u][i]);
      norm += double(first[u][i]) * first[u][i];
    }
    EXPECT_LE(std::sqrt(diff), std::sqrt(norm) / 128) << "unit " << u << " gradient in chunks";
  }
}

}  // namespace
}  // namespace zerodp
