// The kernels' own reductions give bitwise the same results for any number of threads (each output
// element is summed by one thread, in a fixed order), and every kernel, BLAS included, gives bitwise
// the same results run to run.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/kernels.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

constexpr int kB = 3, kT = 130, kC = 72, kNH = 3, kV = 37, kN = kB * kT;

// Every gradient the thread-partitioned reductions produce, in float.
struct Reductions {
  std::vector<float> dwte, dwpe, dln_in, dln_w, dln_b, dbias, dqkv;

  bool operator==(const Reductions&) const = default;

  static Reductions compute() {
    const auto tok = testing::random_tokens(kN, kV, 1);
    const auto dout = as<float>(random_normal(kN * kC, 2));
    const auto inp = as<float>(random_normal(kN * kC, 3)), w = as<float>(random_normal(kC, 4)),
               b = as<float>(random_normal(kC, 5)), qkv = as<float>(random_normal(kN * 3 * kC, 6));
    Reductions r;
    r.dwte.assign(kV * kC, 0.0f);
    r.dwpe.assign(kT * kC, 0.0f);
    encoder_backward(r.dwte.data(), r.dwpe.data(), dout.data(), tok.data(), nullptr, kB, kT, kC);

    std::vector<float> out(kN * kC), mean(kN), rstd(kN);
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), kN, kC);
    r.dln_in.assign(kN * kC, 0.0f);
    r.dln_w.assign(kC, 0.0f);
    r.dln_b.assign(kC, 0.0f);
    layernorm_backward(r.dln_in.data(), r.dln_w.data(), r.dln_b.data(), dout.data(), inp.data(), w.data(),
                       mean.data(), rstd.data(), kN, kC);

    std::vector<float> weight(kC * kC, 0.5f), dweight(kC * kC, 0.0f);
    r.dbias.assign(kC, 0.0f);
    matmul_backward(static_cast<float*>(nullptr), dweight.data(), r.dbias.data(), dout.data(), inp.data(),
                    weight.data(), kN, kC, kC);

    std::vector<float> att(static_cast<size_t>(kB) * kNH * kT * kT),
        scratch(attention_scratch_elems(kB, kT, kNH));
    attention_forward(out.data(), att.data(), qkv.data(), kB, kT, kC, kNH);
    r.dqkv.assign(kN * 3 * kC, 0.0f);
    attention_backward(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), kB, kT, kC,
                       kNH);
    return r;
  }
};

TEST(Determinism, ReductionsDoNotDependOnTheThreadCount) {
  Reductions one, three;
  {
    testing::ScopedThreadCount t(1);
    one = Reductions::compute();
  }
  {
    testing::ScopedThreadCount t(3);  // more threads than cores is fine here: only the partition matters
    three = Reductions::compute();
  }
  EXPECT_EQ(one.dwte, three.dwte);
  EXPECT_EQ(one.dwpe, three.dwpe);
  EXPECT_EQ(one.dln_in, three.dln_in);
  EXPECT_EQ(one.dln_w, three.dln_w);
  EXPECT_EQ(one.dln_b, three.dln_b);
  EXPECT_EQ(one.dbias, three.dbias);
  EXPECT_EQ(one.dqkv, three.dqkv);
}

TEST(Determinism, EveryKernelRepeatsBitwise) {
  const auto inp = as<float>(random_normal(kN * kC, 7)), w = as<float>(random_normal(kC * 4 * kC, 8)),
             bias = as<float>(random_normal(4 * kC, 9)), dout = as<float>(random_normal(kN * 4 * kC, 10));
  const auto tgt = testing::random_tokens(kN, kV, 11);
  const auto wte = as<float>(random_normal(kV * kC, 12));
  auto run = [&] {
    std::vector<float> out(kN * 4 * kC), dinp(kN * kC, 0.0f), dw(kC * 4 * kC, 0.0f), db(4 * kC, 0.0f);
    matmul_forward(out.data(), inp.data(), w.data(), bias.data(), kN, kC, 4 * kC);
    matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), kN, kC, 4 * kC);
    std::vector<float> g(kN * 4 * kC), dg(kN * 4 * kC, 0.0f);
    gelu_forward(g.data(), out.data(), g.size());
    gelu_backward(dg.data(), out.data(), dout.data(), g.size());
    std::vector<float> logits(kN * kV), losses(kN), dh(kN * kC, 0.0f), dwte(kV * kC, 0.0f);
    matmul_nt_forward(logits.data(), inp.data(), wte.data(), kN, kC, kV);
    softmax_crossentropy_forward(losses.data(), logits.data(), logits.data(), tgt.data(), kN, kV);
    softmax_crossentropy_backward(logits.data(), logits.data(), tgt.data(), 1.0f / kN, kN, kV);
    matmul_nt_backward(dh.data(), dwte.data(), logits.data(), inp.data(), wte.data(), kN, kC, kV);
    return std::vector<std::vector<float>>{out, dinp, dw, db, g, dg, losses, dh, dwte};
  };
  const auto first = run();
  const auto second = run();
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], second[i]) << "output " << i;
  const Reductions a = Reductions::compute(), b = Reductions::compute();
  EXPECT_TRUE(a == b);
}

}  // namespace
}  // namespace zerodp::kernels
