// The GPU's fused classifier against the unfused path it replaces (cuda/kernels_crossentropy.cu,
// device/cuda_model_kernels.h's classifier_loss_*): no probabilities kept, dlogits made again from the
// logits and each row's max and 1/Σ and rounded once into the 16-bit GEMM operand. Its losses and its
// 16-bit dlogits must be the unfused path's bit for bit (softmax forward over fp32 probabilities, its
// backward, then the rounding), and so must the gradients of a whole classifier backward through a
// device with either value of $ZERODP_GPU_CLASSIFIER.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/targets.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "device/cuda_device.h"
#include "device_twin.h"

namespace zerodp::device {
namespace {

using test_support::Twin;

std::vector<float> randn(size_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}
std::vector<int32_t> targets_for(int N, int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(N);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
  if (N > 3) t[3] = kIgnoreTarget;  // a row that predicts nothing: a zero gradient row either way
  if (N > 5) t[5] = V - 1;          // the last column
  return t;
}
template <class E>
Twin<E> twin_of(CudaDevice& d, const std::vector<E>& host) {
  Twin<E> t(d, host.size());
  t.host = host;
  t.upload(d);
  return t;
}
template <class E>
void expect_same_bytes(const std::vector<E>& got, const std::vector<E>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(E)) != 0 && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": elements whose bits differ, the first at " << first;
}

// Unfused and fused over the same logits, into operands of rows ld apart filled with the same garbage
// (the padding must stay as it was): the same losses and operands, bit for bit.
template <class P>
void expect_fused_is_unfused(int N, int V, float spread, uint32_t seed) {
  CudaDevice gpu(0);
  const cudaStream_t s = nullptr;  // the legacy stream: every call below in order, each Twin copy synchronous
  const auto ld = static_cast<int64_t>(operand16_row(static_cast<size_t>(V)));
  auto logits = twin_of(gpu, randn(size_t(N) * V, spread, seed));
  auto targets = twin_of(gpu, targets_for(N, V, seed + 1));
  Twin<float> probs(gpu, size_t(N) * V), losses_u(gpu, N), losses_f(gpu, N), stats(gpu, 2 * size_t(N));
  const std::vector<P> garbage(size_t(N) * ld, P{0x7FC1});
  auto op_u = twin_of(gpu, garbage), op_f = twin_of(gpu, garbage);
  const float dloss = 1.0f / (3.0f * N);  // not a power of two: the product rounds

  cuda::softmax_crossentropy_forward(losses_u.d(), probs.d(), logits.d(), targets.d(), N, V, s);
  cuda::softmax_crossentropy_backward(probs.d(), probs.d(), targets.d(), dloss, N, V, s);
  cuda::convert_rows(probs.d(), V, op_u.d(), dtype_of<P>, ld, N, V, s);

  cuda::softmax_crossentropy_forward(losses_f.d(), nullptr, logits.d(), targets.d(), N, V, s, stats.d());
  cuda::crossentropy_backward_rounded(op_f.d(), ld, logits.d(), stats.d(), targets.d(), dloss, N, V, s);
  ZDP_CUDA_CHECK(cudaDeviceSynchronize());

  expect_same_bytes(losses_f.download(gpu), losses_u.download(gpu), "losses");
  expect_same_bytes(op_f.download(gpu), op_u.download(gpu), "16-bit dlogits (and the padding left alone)");
  const auto l = losses_f.download(gpu);
  EXPECT_EQ(l[3], 0.0f) << "kIgnoreTarget: no loss";
  for (int i = 0; i < N; ++i) {
    if (i == 3) continue;
    ASSERT_TRUE(std::isfinite(l[i]) && l[i] > 0.0f) << "row " << i << ": " << l[i];
  }
}

template <class P>
class FusedClassifier : public ::testing::Test {};
using SixteenBit = ::testing::Types<bf16, fp16>;
TYPED_TEST_SUITE(FusedClassifier, SixteenBit);

// GPT-2's own odd vocabulary: rows 50 264 elements apart.
TYPED_TEST(FusedClassifier, DlogitsAreTheUnfusedPathsBitForBit) {
  expect_fused_is_unfused<TypeParam>(24, 50257, 2.0f, 70);
  expect_fused_is_unfused<TypeParam>(8, 4099, 30.0f, 71);  // spread rows: most probabilities underflow
}

// More rows than one launch's grid.y holds (65 535): the later slice's rows and statistics.
TYPED_TEST(FusedClassifier, RowsPastOneGridSlice) { expect_fused_is_unfused<TypeParam>(70000, 9, 1.0f, 72); }

// A device made with the switch set. The environment is read when the device is made.
std::unique_ptr<CudaDevice> device_with(const char* classifier) {
  if (classifier != nullptr) ::setenv("ZERODP_GPU_CLASSIFIER", classifier, 1);
  std::unique_ptr<CudaDevice> d;
  try {
    d = std::make_unique<CudaDevice>(0);
  } catch (...) {
    ::unsetenv("ZERODP_GPU_CLASSIFIER");
    throw;
  }
  ::unsetenv("ZERODP_GPU_CLASSIFIER");
  return d;
}

struct HeadGrads {
  std::vector<float> losses, dinp, dweight;
};

// The classifier's loss and backward through `gpu`'s bf16 table: an untied head [V, C], N rows.
HeadGrads head_backward(CudaDevice& gpu, int N, int C, int V) {
  auto to_bf16 = [](const std::vector<float>& f) {
    std::vector<bf16> b(f.size());
    convert(f.data(), DType::kF32, b.data(), DType::kBF16, f.size());
    return b;
  };
  auto x = twin_of(gpu, to_bf16(randn(size_t(N) * C, 1.0f, 80)));
  auto w = twin_of(gpu, to_bf16(randn(size_t(V) * C, 0.05f, 81)));
  auto targets = twin_of(gpu, targets_for(N, V, 82));
  Twin<float> logits(gpu, size_t(N) * V), stats(gpu, 2 * size_t(N)), losses(gpu, N), dinp(gpu, size_t(N) * C);
  auto dweight = twin_of(gpu, randn(size_t(V) * C, 1.0f, 83));  // written over (kWrite)
  Twin<bf16> op16(gpu, size_t(N) * operand16_row(V));
  const ModelKernels<bf16>& k = gpu.kernels<bf16>();
  k.linear_forward_acc(logits.d(), x.d(), w.d(), nullptr, N, C, V, kernels::WeightLayout::kOutIn, nullptr);
  k.classifier_loss_forward(losses.d(), logits.d(), stats.d(), targets.d(), N, V);
  k.classifier_loss_backward(dinp.d(), dweight.d(), logits.d(), stats.d(), targets.d(), 1.0f / N, x.d(), w.d(), N, C, V,
                             kernels::WeightLayout::kOutIn, op16.d(), kernels::WeightGrad::kWrite);
  return {losses.download(gpu), dinp.download(gpu), dweight.download(gpu)};
}

TEST(FusedClassifierSwitch, BothWaysGiveTheSameGradients) {
  auto fused = device_with(nullptr), unfused = device_with("unfused");
  const HeadGrads f = head_backward(*fused, 256, 64, 1001), u = head_backward(*unfused, 256, 64, 1001);
  expect_same_bytes(f.losses, u.losses, "losses");
  expect_same_bytes(f.dinp, u.dinp, "the classifier's input gradient");
  expect_same_bytes(f.dweight, u.dweight, "the classifier's weight gradient");
}

TEST(FusedClassifierSwitch, RefusesAnUnknownValue) {
  EXPECT_THROW(device_with("fast"), UsageError);
  EXPECT_NE(device_with("fused"), nullptr);
}

}  // namespace
}  // namespace zerodp::device
