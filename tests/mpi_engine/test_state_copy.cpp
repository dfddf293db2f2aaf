// The host copy an asynchronous checkpoint takes (zero/state_copy.h) on the W ranks of this binary: it
// holds exactly the owned ranges Engine::visit_owned gives (the same floats, the same ranges), at every
// stage, in fp32 and bf16 (the masters), with the optimizer in place or offloaded; and the ledger's host
// tier holds it as state_copy_bytes says, the weights under master and the states under optim, until
// it is released. A second refresh after another step holds that step's state.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/runtime.h"
#include "core/memory.h"
#include "model/init.h"
#include "model/layout.h"
#include "tests/mpi_engine/small_engine.h"
#include "zero/engine.h"
#include "zero/state_copy.h"

using namespace zerodp;
using namespace zerodp::zero;

namespace {

TEST(StateCopy, HoldsTheOwnedRangesAndTheLedgerCountsThem) {
  const model::ParamLayout layout(engine_tests::padded_model());
  std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (bool offload : {false, true}) {
        if (offload && stage == 0) continue;  // the optimizer offload needs a sharded optimizer
        const std::string what = std::string(dtype_name(dt)) + " stage " + std::to_string(stage) +
                                 (offload ? " offload" : "");
        EngineConfig cfg = engine_tests::small_engine_config(stage, dt);
        cfg.zero.offload_optimizer = offload ? Offload::kCpu : Offload::kNone;
        Engine engine(layout, comm, cfg);
        engine.load([&](int u, size_t b, size_t n, float* dst) {
          model::init_unit_range(layout.config(), layout, u, b, n, 5, dst);
        });
        auto step_once = [&] {
          engine.step(
              1, [&](int, int32_t* in, int32_t* tg) {
                for (int i = 0; i < cfg.micro_batch * cfg.seq; ++i) in[i] = tg[i] = (i * 7 + comm->rank()) % 64;
              },
              1e-3, 0.0);
        };
        step_once();
        MemoryLedger& ledger = MemoryLedger::global();
        const uint64_t master0 = ledger.live(MemTier::kHost, MemCategory::kMaster);
        const uint64_t optim0 = ledger.live(MemTier::kHost, MemCategory::kOptim);
        StateCopy copy = StateCopy::allocate(engine);
        copy.refresh(engine);
        const StateCopyBytes want = state_copy_bytes(engine.shards().total_shard(), engine.num_optimizer_states());
        EXPECT_EQ(want.master, engine.shards().total_shard() * 4) << what;
        EXPECT_EQ(want.optim, engine.shards().total_shard() * 8) << what;  // AdamW's m and v
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kMaster) - master0, want.master) << what;
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kOptim) - optim0, want.optim) << what;

        auto expect_copy_is_engine_state = [&](const std::string& when) {
          size_t i = 0;
          engine.visit_owned([&](const Engine::OwnedRange& r) {
            if (r.begin == r.end) return;
            ASSERT_LT(i, copy.ranges().size()) << what << when;
            const Engine::OwnedRange& c = copy.ranges()[i++];
            ASSERT_EQ(c.unit, r.unit) << what << when;
            ASSERT_EQ(c.begin, r.begin) << what << when;
            ASSERT_EQ(c.end, r.end) << what << when;
            const size_t bytes = (r.end - r.begin) * sizeof(float);
            EXPECT_EQ(0, std::memcmp(c.weights, r.weights, bytes)) << what << when << " unit " << r.unit << " weights";
            ASSERT_EQ(c.states.size(), r.states.size()) << what << when;
            for (size_t k = 0; k < r.states.size(); ++k)
              EXPECT_EQ(0, std::memcmp(c.states[k], r.states[k], bytes)) << what << when << " unit " << r.unit << " state " << k;
          });
          EXPECT_EQ(i, copy.ranges().size()) << what << when;
        };
        expect_copy_is_engine_state(" after one step");
        step_once();
        copy.refresh(engine);
        expect_copy_is_engine_state(" after two steps");
        copy.release();
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kMaster), master0) << what;
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kOptim), optim0) << what;
      }
    }
  }
}

}  // namespace
