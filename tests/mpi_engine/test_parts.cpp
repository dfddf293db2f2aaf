// The engine's parts on their own, on the W ranks of this binary (mpirun -n W): where the states
// live (ModelStates), gradient reduction (GradReducer), parameter gathering (ParamGatherer), the
// optimizer step on shards (ShardOptimizer) and state I/O (state_io.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "comm/runtime.h"
#include "core/memory.h"
#include "model/layout.h"
#include "zero/grad_reducer.h"
#include "zero/model_states.h"
#include "zero/param_gatherer.h"
#include "zero/shard_optimizer.h"
#include "zero/state_io.h"

using namespace zerodp;
using namespace zerodp::zero;

namespace {

model::GPT2Config tiny() { return {2, 2, 24, 40, 16}; }  // units that do not divide evenly

EngineConfig config(int stage, DType dtype, std::optional<DType> reduce = std::nullopt) {
  EngineConfig c;
  c.zero.stage = stage;
  c.precision.dtype = dtype;
  c.precision.reduce_dtype = reduce;
  c.zero.reduce_bucket_size = 3000;  // several stage-0 buckets
  return c;
}

// A value of unit u's element i as rank j holds it: not exactly representable, different per rank.
float value(int j, int u, size_t i) { return 0.1f * static_cast<float>(j + 1) * std::sin(0.37f * i + u) + 0.01f * j; }

float round_to(float x, DType t) {
  uint32_t bits[1] = {};
  convert(&x, DType::kF32, bits, t, 1);
  float out;
  convert(bits, t, &out, DType::kF32, 1);
  return out;
}

// What the reduction gives for element (u, i): each rank's value stored in `stored`, travelling in
// `rdt`, added in fp32 in rank order, rounded once to rdt, then stored again.
float expected_sum(int W, int u, size_t i, DType stored, DType rdt) {
  float acc = 0;
  for (int j = 0; j < W; ++j) acc += round_to(round_to(value(j, u, i), stored), rdt);
  return round_to(round_to(acc, rdt), stored);
}

// Element p of dtype t, as fp32.
float read(const char* p, DType t) {
  float out;
  convert(p, t, &out, DType::kF32, 1);
  return out;
}

struct Fixture {
  std::shared_ptr<comm::Communicator> comm = comm::world();
  model::ParamLayout layout{tiny()};
  int W = comm->size(), r = comm->rank();
  ShardLayout sh{layout, W, r};
};

TEST(ModelStates, HoldsWhatEachStageKeeps) {
  Fixture f;
  const uint64_t psi = f.sh.total_padded(), shard = f.sh.total_shard();
  for (DType t : {DType::kF32, DType::kBF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const EngineConfig c = config(stage, t);
      ModelStates st(f.layout, f.sh, c);
      const uint64_t p = dtype_size(t);
      const ModelStates::Footprint bytes = st.footprint();
      EXPECT_EQ(bytes.param, (stage == 3 ? shard : psi) * p);
      EXPECT_EQ(bytes.grad, (stage <= 1 ? psi : shard) * p);
      EXPECT_EQ(bytes.master, t == DType::kF32 ? 0 : (stage == 0 ? psi : shard) * 4);
      EXPECT_EQ(bytes.optim_m, (stage == 0 ? psi : shard) * 4);
      EXPECT_EQ(bytes.optim_v, bytes.optim_m);
      // Every element a rank updates has its own place in each buffer.
      for (int u = 0; u < st.num_units(); ++u) {
        const auto [b, e] = st.update_range(u);
        if (b >= e) continue;
        EXPECT_LE((st.state_index(u, e - 1) + 1) * 4, bytes.optim_m);
        EXPECT_LE((st.grad_index(u, e - 1) + 1) * p, bytes.grad);
        EXPECT_LE((st.param_index(u, e - 1) + 1) * p, bytes.param);
      }
    }
  }
}

// Stages 0-1 reduce the stored gradients, stages 2-3 each micro-step's fp32 gradient; the rank's
// kept part equals the rank-ordered sum, in each pairing of stored and reduction dtypes.
TEST(GradReducer, SumsInRankOrderIntoWhatTheRankKeeps) {
  Fixture f;
  struct Case { DType dtype; std::optional<DType> reduce; };
  for (const Case& k : {Case{DType::kF32, std::nullopt}, Case{DType::kBF16, std::nullopt},
                        Case{DType::kBF16, DType::kF32}, Case{DType::kF16, std::nullopt}}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const EngineConfig c = config(stage, k.dtype, k.reduce);
      ModelStates st(f.layout, f.sh, c);
      CommClock clock;
      GradReducer reducer(st, *f.comm, nullptr, c, clock);
      const DType rdt = c.precision.reduce_dtype.value_or(c.precision.dtype);
      reducer.begin_micro_step(true, true);
      for (int u = st.num_units() - 1; u >= 0; --u) {  // the backward's order
        const UnitShard& s = st.unit(u);
        if (stage <= 1) {
          for (size_t i = 0; i < s.padded; ++i) {
            const float v = i < s.numel ? value(f.r, u, i) : 0.0f;
            convert(&v, DType::kF32, st.grad_at(u, i), st.grad_dtype(), 1);
          }
          reducer.unit_stored(u);
        } else {
          Buffer g(s.padded * sizeof(float), MemCategory::kGathered);
          for (size_t i = 0; i < s.padded; ++i) g.as<float>()[i] = i < s.numel ? value(f.r, u, i) : 0.0f;
          reducer.reduce_to_shard(u, std::move(g));
        }
      }
      reducer.complete_all();
      EXPECT_FALSE(reducer.in_flight());
      const DType stored = stage <= 1 ? st.grad_dtype() : DType::kF32;  // what was summed: the store, or the fp32 gradient
      for (int u = 0; u < st.num_units(); ++u) {
        const auto [b, e] = st.update_range(u);
        for (size_t i = b; i < e; ++i) {
          const float want = f.W == 1 ? round_to(value(0, u, i), st.grad_dtype()) : round_to(expected_sum(f.W, u, i, stored, rdt), st.grad_dtype());
          ASSERT_EQ(read(st.grad_at(u, i), st.grad_dtype()), want)
              << "stage " << stage << " " << dtype_name(k.dtype) << " reduce " << dtype_name(rdt) << " unit " << u << " element " << i;
        }
      }
    }
  }
}

// Stages 2-3 over two micro-steps: the first one's sum is written into the shard (received there
// directly when the dtypes agree), the second one's added to it, as two additions onto zeros would.
TEST(GradReducer, AccumulatesMicroStepsIntoTheShard) {
  Fixture f;
  struct Case { DType dtype; std::optional<DType> reduce; bool fp32_accum; };
  for (const Case& k : {Case{DType::kF32, std::nullopt, true}, Case{DType::kBF16, std::nullopt, true},
                        Case{DType::kBF16, DType::kF32, true}, Case{DType::kBF16, std::nullopt, false}}) {
    for (int stage = 2; stage <= 3; ++stage) {
      EngineConfig c = config(stage, k.dtype, k.reduce);
      c.precision.fp32_grad_accum = k.fp32_accum;
      ModelStates st(f.layout, f.sh, c);
      CommClock clock;
      GradReducer reducer(st, *f.comm, nullptr, c, clock);
      const DType rdt = c.precision.reduce_dtype.value_or(c.precision.dtype);
      for (int g = 0; g < 2; ++g) {
        reducer.begin_micro_step(g == 0, g == 1);
        for (int u = st.num_units() - 1; u >= 0; --u) {
          const UnitShard& s = st.unit(u);
          Buffer grad(s.padded * sizeof(float), MemCategory::kGathered);
          for (size_t i = 0; i < s.padded; ++i) grad.as<float>()[i] = i < s.numel ? value(f.r, u, i) : 0.0f;
          reducer.reduce_to_shard(u, std::move(grad));
        }
      }
      reducer.complete_all();
      for (int u = 0; u < st.num_units(); ++u) {
        const auto [b, e] = st.update_range(u);
        for (size_t i = b; i < e; ++i) {
          const float once = f.W == 1 ? value(0, u, i) : expected_sum(f.W, u, i, DType::kF32, rdt);
          const float want = round_to(round_to(once, st.grad_dtype()) + once, st.grad_dtype());
          ASSERT_EQ(read(st.grad_at(u, i), st.grad_dtype()), want)
              << "stage " << stage << " " << dtype_name(k.dtype) << " reduce " << dtype_name(rdt)
              << " stored " << dtype_name(st.grad_dtype()) << " unit " << u << " element " << i;
        }
      }
    }
  }
}

TEST(ParamGatherer, Stage3GathersEachUnitWholeAndFreesIt) {
  Fixture f;
  for (DType t : {DType::kF32, DType::kBF16}) {
    const EngineConfig c = config(3, t);
    ModelStates st(f.layout, f.sh, c);
    CommClock clock;
    ParamGatherer gatherer(st, *f.comm, c, clock);
    for (int u = 0; u < st.num_units(); ++u) {  // the rank's shard of every unit
      const UnitShard& s = st.unit(u);
      for (size_t i = f.r * s.shard; i < (f.r + 1) * s.shard; ++i) {
        const float v = i < s.numel ? value(0, u, i) : 0.0f;
        convert(&v, DType::kF32, st.param_at(u, i), t, 1);
      }
    }
    const uint64_t gathered_before = MemoryLedger::global().live(MemCategory::kGathered);
    // The forward's uses 0..L are units 0..L (embed, then the blocks; model/layout.h gpt2_schedule).
    gatherer.use(0);
    for (int u = 1; u < st.num_units(); ++u) gatherer.use(u);
    for (int u = 0; u < st.num_units(); ++u) {
      const char* p = static_cast<const char*>(gatherer.params(u));
      if (u > 0 && u < st.num_units() - 1) gatherer.use(u + 1);  // no-op once ready
      for (size_t i = 0; i < st.unit(u).numel; ++i)
        ASSERT_EQ(read(p + i * dtype_size(t), t), round_to(value(0, u, i), t)) << "unit " << u << " element " << i;
    }
    for (int u = 0; u < st.num_units(); ++u) EXPECT_TRUE(gatherer.release(u));
    EXPECT_FALSE(gatherer.release(0)) << "already released";
    EXPECT_EQ(MemoryLedger::global().live(MemCategory::kGathered), gathered_before);
  }
}

TEST(ParamGatherer, AfterTheUpdateEveryRankHoldsEveryShard) {
  Fixture f;
  for (int stage : {1, 2}) {
    const EngineConfig c = config(stage, DType::kBF16);
    ModelStates st(f.layout, f.sh, c);
    CommClock clock;
    ParamGatherer gatherer(st, *f.comm, c, clock);
    for (int u = 0; u < st.num_units(); ++u) {
      const UnitShard& s = st.unit(u);
      for (size_t i = 0; i < s.padded; ++i) {
        const bool mine = i / s.shard == static_cast<size_t>(f.r);
        const float v = mine ? value(0, u, i) : -1.0f;  // others' shards: stale until gathered
        convert(&v, DType::kF32, st.param_at(u, i), st.param_dtype(), 1);
      }
    }
    gatherer.gather_after_update();
    for (int u = 0; u < st.num_units(); ++u)
      for (size_t i = 0; i < st.unit(u).padded; ++i)
        ASSERT_EQ(read(st.param_at(u, i), st.param_dtype()), round_to(value(0, u, i), st.param_dtype())) << "unit " << u;
  }
}

// The same full weights and gradient: the rank's range after a sharded AdamW step equals that range
// after the step of one rank holding everything, bit for bit; state I/O round-trips the weights.
TEST(ShardOptimizer, ShardStepEqualsTheWholeStepOnTheShard) {
  Fixture f;
  const StateSource weights = [](int state, int u, size_t b, size_t n, float* dst) {
    for (size_t i = 0; i < n; ++i) dst[i] = state < 0 ? value(3, u, b + i) : 0.0f;
  };
  ShardLayout whole_layout(f.layout, 1, 0);
  for (DType t : {DType::kF32, DType::kBF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const EngineConfig c = config(stage, t);
      ModelStates st(f.layout, f.sh, c), ref(f.layout, whole_layout, config(0, t));
      load_states(st, weights, true);
      load_states(ref, weights, true);
      for (ModelStates* m : {&st, &ref})
        for (int u = 0; u < m->num_units(); ++u) {
          const auto [b, e] = m->update_range(u);
          for (size_t i = b; i < e; ++i) {
            const float g = value(5, u, i);
            convert(&g, DType::kF32, m->grad_at(u, i), m->grad_dtype(), 1);
          }
        }
      ShardOptimizer opt(st, *f.comm, c), opt_ref(ref, *f.comm, config(0, t));
      for (int k = 0; k < 2; ++k) {
        opt.update(1e-2, 0.5f);
        opt_ref.update(1e-2, 0.5f);
      }
      EXPECT_EQ(opt.steps(), 2);
      for (int u = 0; u < st.num_units(); ++u) {
        const auto [b, e] = st.update_range(u);
        for (size_t i = b; i < e; ++i) {
          ASSERT_EQ(*st.weights_at(u, i), *ref.weights_at(u, i)) << "stage " << stage << " unit " << u << " element " << i;
          ASSERT_EQ(*st.state_at(1, u, i), *ref.state_at(1, u, i));
        }
      }
      // Re-assembled as the engine does after an update, then consolidated on rank 0: the whole
      // reference's weights.
      CommClock clock;
      if (stage >= 1 && f.W > 1) ParamGatherer(st, *f.comm, c, clock).gather_after_update();
      consolidate_weights(st, *f.comm, f.comm->rank() == 0, [&](int u, const float* data) {
        for (size_t i = 0; i < st.unit(u).numel; ++i) ASSERT_EQ(data[i], *ref.weights_at(u, i)) << "unit " << u;
      });
      EXPECT_TRUE(all_weights_finite(st, *f.comm));
      // A NaN in the last rank's range is seen by every rank.
      if (f.r == f.W - 1) {
        const auto [b, e] = st.update_range(1);
        if (b < e) *st.weights_at(1, b) = std::numeric_limits<float>::quiet_NaN();
      }
      EXPECT_FALSE(all_weights_finite(st, *f.comm)) << "stage " << stage;
    }
  }
}

}  // namespace
