// The classifier in chunks of tokens (ActivationSettings::loss_chunk) and the MLPs in chunks of tokens
// (mlp_chunk, with and without checkpointing): the per-token losses and every gradient equal the whole
// micro-batch's within rounding, for GPT-2 (tied head), a Llama with an untied head and one with a tied
// head, in double, float and bf16, at chunks of 1 token, a size that does not divide B·T, B·T − 1 and
// B·T or more (the whole-batch path, bit for bit); sampling's logits are unchanged; the activations
// shrink by the logits, or the hidden layers, no longer held, as the planner counts them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/targets.h"
#include "device/device.h"
#include "model/layout.h"
#include "model/model.h"
#include "model_fixtures.h"

using namespace zerodp;
using namespace zerodp::model;

namespace loss_chunk_test {

constexpr int kB = 2, kT = 12, kBT = kB * kT;

ModelConfig gpt2() { return ModelConfig(GPT2Config{2, 2, 8, 37, kT}); }  // L H C V N

ModelConfig llama(bool tied) { return test_support::tiny_llama(41, kT, 0, tied); }

struct Batch {
  std::vector<int32_t> inputs, targets;
};

Batch batch(int V) {
  std::mt19937 rng(17);
  Batch b{std::vector<int32_t>(kBT), std::vector<int32_t>(kBT)};
  for (int i = 0; i < kBT; ++i) {
    b.inputs[i] = static_cast<int32_t>(rng() % V);
    b.targets[i] = i % 7 == 3 ? kIgnoreTarget : static_cast<int32_t>(rng() % V);  // a few tokens without a target
  }
  return b;
}

template <typename F>
struct Result {
  double loss = 0;
  std::vector<GradOf<F>> losses;
  std::vector<std::vector<GradOf<F>>> grads;
};

template <typename F>
Result<F> run(const ModelConfig& config, ActivationSettings settings) {
  const ParamLayout layout(config);
  test_support::RandomWeights<F> w(layout);
  auto access = w.access();
  const Batch b = batch(config.vocab_size());
  auto net = make_model<F>(layout, kB, kT, settings);
  Result<F> r;
  r.loss = net->forward(b.inputs.data(), b.targets.data(), nullptr, access);
  r.losses = net->host_losses();
  net->backward(GradOf<F>(1.0 / kBT), access);
  r.grads = w.grads;
  return r;
}

// Whether a and b agree within `tolerance`, relative to 1 + |b|; the worst difference in `worst`.
template <typename A, typename B>
bool close(const A& a, const B& b, double tolerance, double* worst) {
  const double d = std::fabs(static_cast<double>(a) - static_cast<double>(b)) / (1 + std::fabs(static_cast<double>(b)));
  *worst = std::max(*worst, d);
  return d <= tolerance;
}

// What is chunked: the loss, the MLPs, or the MLPs of checkpointed blocks.
enum class Chunked { kLoss, kMlp, kMlpCheckpointed };

ActivationSettings settings_of(Chunked what, int64_t chunk) {
  switch (what) {
    case Chunked::kLoss: return {false, chunk};
    case Chunked::kMlp: return {false, 0, chunk};
    case Chunked::kMlpCheckpointed: return {true, 0, chunk};
  }
  return {};
}

template <typename F>
void expect_chunks_agree(const ModelConfig& config, double tolerance, Chunked what = Chunked::kLoss) {
  const Result<F> whole = run<F>(config, settings_of(what, 0));
  for (const int64_t chunk : {int64_t{1}, int64_t{5}, int64_t{kBT - 1}, int64_t{kBT}, int64_t{3 * kBT}}) {
    SCOPED_TRACE(::testing::Message() << config.summary() << ", chunks of " << chunk << " tokens ("
                                      << static_cast<int>(what) << ")");
    const Result<F> part = run<F>(config, settings_of(what, chunk));
    double worst = 0;
    EXPECT_TRUE(close(part.loss, whole.loss, tolerance, &worst));
    for (int i = 0; i < kBT; ++i) EXPECT_TRUE(close(part.losses[i], whole.losses[i], tolerance, &worst)) << "token " << i;
    for (size_t u = 0; u < whole.grads.size(); ++u)
      for (size_t i = 0; i < whole.grads[u].size(); ++i) close(part.grads[u][i], whole.grads[u][i], tolerance, &worst);
    EXPECT_LE(worst, tolerance) << "the worst relative difference, losses and gradients";
    if (chunk >= kBT) {  // one chunk: the whole-batch path itself
      EXPECT_EQ(part.losses, whole.losses);
      EXPECT_EQ(part.grads, whole.grads);
    }
  }
}

TEST(LossChunk, Gpt2ChunksGiveTheWholeBatchsLossesAndGradients) {
  expect_chunks_agree<double>(gpt2(), 1e-13);
  expect_chunks_agree<float>(gpt2(), 2e-6);
  expect_chunks_agree<bf16>(gpt2(), 2e-2);
}

TEST(LossChunk, LlamaChunksGiveTheWholeBatchsLossesAndGradients) {
  for (const bool tied : {false, true}) {
    expect_chunks_agree<double>(llama(tied), 1e-13);
    expect_chunks_agree<float>(llama(tied), 2e-6);
    expect_chunks_agree<bf16>(llama(tied), 2e-2);
  }
}

TEST(MlpChunk, Gpt2ChunksGiveTheWholeBatchsLossesAndGradients) {
  for (const Chunked what : {Chunked::kMlp, Chunked::kMlpCheckpointed}) {
    expect_chunks_agree<double>(gpt2(), 1e-13, what);
    expect_chunks_agree<float>(gpt2(), 2e-6, what);
    expect_chunks_agree<bf16>(gpt2(), 2e-2, what);
  }
}

TEST(MlpChunk, LlamaChunksGiveTheWholeBatchsLossesAndGradients) {
  for (const Chunked what : {Chunked::kMlp, Chunked::kMlpCheckpointed}) {
    expect_chunks_agree<double>(llama(false), 1e-13, what);
    expect_chunks_agree<float>(llama(true), 2e-6, what);
    expect_chunks_agree<bf16>(llama(false), 2e-2, what);
  }
}

TEST(LossChunk, SamplingLogitsAreUnchanged) {
  const ModelConfig config = llama(false);
  const ParamLayout layout(config);
  test_support::RandomWeights<float> w(layout);
  auto access = w.access();
  const Batch b = batch(config.vocab_size());
  std::vector<float> whole(config.vocab_size()), part(config.vocab_size());
  make_model<float>(layout, 1, kT)->next_token_logits(b.inputs.data(), 7, access, whole.data());
  make_model<float>(layout, 1, kT, ActivationSettings(false, 2))->next_token_logits(b.inputs.data(), 7, access,
                                                                                     part.data());
  EXPECT_EQ(part, whole);
  // the MLPs in chunks of 3 tokens: the sampled context's 7 rows run in 3 chunks
  make_model<float>(layout, 1, kT, ActivationSettings(false, 0, 3))
      ->next_token_logits(b.inputs.data(), 7, access, part.data());
  for (size_t i = 0; i < part.size(); ++i) EXPECT_NEAR(part[i], whole[i], 1e-5 * (1 + std::fabs(whole[i])));
}

// The head's activations lose the logits and their rows' statistics (and, computing in 16 bits, their
// 16-bit copy) of the rows no longer held at once; nothing else changes.
TEST(LossChunk, ActivationsHoldOnlyOneChunksLogits) {
  for (const ModelConfig& config : {gpt2(), llama(false)}) {
    const size_t V = static_cast<size_t>(config.vocab_size());
    const size_t rows_gone = kBT - 4;
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const auto& sizes = device::attention_sizes(false, dtype);
      const ActivationBytes whole = model_activation_parts(config, kB, kT, ActivationSettings(false, 0), dtype, sizes);
      const ActivationBytes part = model_activation_parts(config, kB, kT, ActivationSettings(false, 4), dtype, sizes);
      EXPECT_EQ(part.blocks, whole.blocks);
      EXPECT_EQ(part.tokens, whole.tokens);
      // fp32 logits and two fp32 statistics a row; 16-bit runs start every array on 64 bytes, which moves
      // the padding around them
      const double slack = dtype == DType::kF32 ? 0 : 3 * 64;
      EXPECT_NEAR(static_cast<double>(whole.head - part.head), static_cast<double>(rows_gone * (V + 2) * sizeof(float)),
                  slack)
          << config.summary();
      if (dtype == DType::kF32) {
        EXPECT_EQ(part.backward, whole.backward) << config.summary();
      } else {  // the 16-bit operand: B·T rows of V columns before, now the widest of the other operands
        EXPECT_LT(part.backward, whole.backward) << config.summary();
      }
    }
  }
}

// The blocks' MLP hidden layers are held for one chunk of rows, once for every block: without
// checkpointing each block's saved set loses them, with it the one shared set does; the backward's
// hidden-layer gradient shrinks to the chunk's rows. Counted in bytes of the arrays themselves.
TEST(MlpChunk, ActivationsHoldOneChunksHiddenLayer) {
  for (const ModelConfig& config : {gpt2(), llama(false)}) {
    const bool is_gpt2 = config.is_gpt2();
    const size_t L = static_cast<size_t>(config.n_layer());
    // Hidden-layer P values a row keeps (GPT-2: fch, fch_gelu; Llama: gate|up, act) and Acc values of its
    // gradient (GPT-2: dfch_gelu; Llama: dgate_up, dact).
    const size_t I = is_gpt2 ? 4 * static_cast<size_t>(config.n_embd()) : config.llama().intermediate_size;
    const size_t kept = is_gpt2 ? 2 * I : 3 * I, grads = is_gpt2 ? I : 3 * I;
    const size_t rows = 4;
    const auto& sizes = device::attention_sizes(false, DType::kF32);
    for (const bool checkpointing : {false, true}) {
      SCOPED_TRACE(::testing::Message() << config.summary() << (checkpointing ? ", checkpointing" : ""));
      const ActivationBytes whole =
          model_activation_parts(config, kB, kT, ActivationSettings(checkpointing, 0, 0), DType::kF32, sizes);
      const ActivationBytes part =
          model_activation_parts(config, kB, kT, ActivationSettings(checkpointing, 0, rows), DType::kF32, sizes);
      const size_t sets = checkpointing ? 1 : L;
      EXPECT_EQ(whole.blocks - part.blocks, sets * kBT * kept * sizeof(float));
      const auto bytes = [](size_t n) { return static_cast<int64_t>(n * sizeof(float)); };
      EXPECT_EQ(static_cast<int64_t>(part.backward) - static_cast<int64_t>(whole.backward),
                bytes(rows * kept) - bytes((kBT - rows) * grads));
      EXPECT_EQ(part.head, whole.head);
      EXPECT_EQ(part.tokens, whole.tokens);
    }
  }
}

}  // namespace loss_chunk_test
