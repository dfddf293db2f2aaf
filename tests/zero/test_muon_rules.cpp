// Muon's rules under ZeRO (zero/muon_step.h): which tensors are matrices, who runs each iteration, and
// the working memory and exchanged elements the planner reads.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "model/layout.h"
#include "optim/muon.h"
#include "zero/muon_step.h"
#include "zero/sharding.h"

namespace zerodp::zero {
namespace muon_rules_test {

// GPT-2 L2 H4 C64 V256 N64: a block's matrices are c_attn [64, 192], attn.c_proj [64, 64], c_fc [64, 256]
// and mlp.c_proj [256, 64].
model::ParamLayout gpt2() { return model::ParamLayout(model::GPT2Config{2, 4, 64, 256, 64}); }

TEST(MuonRules, MatricesAreTheBlocksTwoDimensionalTensors) {
  const model::ParamLayout layout = gpt2();
  std::set<std::string> matrices;
  for (const model::ParamInfo& p : layout.params())
    if (p.matrix) matrices.insert(p.name);
  EXPECT_EQ(matrices, (std::set<std::string>{"h.0.attn.c_attn.weight", "h.0.attn.c_proj.weight", "h.0.mlp.c_fc.weight",
                                             "h.0.mlp.c_proj.weight", "h.1.attn.c_attn.weight", "h.1.attn.c_proj.weight",
                                             "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.weight"}));
  EXPECT_FALSE(unit_has_matrix(layout, 0));  // wte, wpe, ln_f
  EXPECT_TRUE(unit_has_matrix(layout, 1));
}

TEST(MuonRules, OwnersBalanceTheIterationsFlops) {
  const model::ParamLayout layout = gpt2();
  const std::vector<const model::ParamInfo*> tensors = layout.unit_params(1);
  // One rank runs them all.
  for (int o : matrices_owner(layout, 1, 1)) EXPECT_TRUE(o == -1 || o == 0);
  // Four ranks: c_fc and mlp.c_proj (the costliest, equal) to ranks 0 and 1, c_attn to 2, attn.c_proj to 3.
  const std::vector<int> owner = matrices_owner(layout, 1, 4);
  ASSERT_EQ(owner.size(), tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string& name = tensors[k]->name;
    const int want = name == "h.0.mlp.c_fc.weight"      ? 0
                     : name == "h.0.mlp.c_proj.weight"  ? 1
                     : name == "h.0.attn.c_attn.weight" ? 2
                     : name == "h.0.attn.c_proj.weight" ? 3
                                                        : -1;
    EXPECT_EQ(owner[k], want) << name;
  }
  // Two ranks: greedy by decreasing cost leaves the loads within one matrix (the largest) of each other.
  double load[2] = {0, 0};
  const std::vector<int> two = matrices_owner(layout, 1, 2);
  for (size_t k = 0; k < tensors.size(); ++k)
    if (two[k] >= 0) load[two[k]] += optim::newton_schulz_flops(tensors[k]->shape[0], tensors[k]->shape[1]);
  EXPECT_LE(std::abs(load[0] - load[1]), optim::newton_schulz_flops(64, 256));
  EXPECT_GT(load[0], 0);
  EXPECT_GT(load[1], 0);
}

TEST(MuonRules, WorkAndExchangesFollowTheLargestUnit) {
  const model::ParamLayout layout = gpt2();
  const size_t block = layout.unit_numel(1);
  for (int ranks : {1, 3}) {
    const size_t padded = static_cast<size_t>(ranks) * shard_elements(block, static_cast<size_t>(ranks));
    const MuonWork w = muon_work(layout, ranks);
    EXPECT_EQ(w.unit, padded);
    EXPECT_EQ(w.matrix, size_t{64} * 256);
    EXPECT_EQ(w.product, size_t{64} * 64);
    EXPECT_EQ(w.bytes(), 4 * (padded + 64 * 256 + 2 * 64 * 64));
    EXPECT_EQ(muon_exchanged_elements(layout, ranks), 2 * padded);  // the two blocks, not unit 0
  }
}

}  // namespace muon_rules_test
}  // namespace zerodp::zero
