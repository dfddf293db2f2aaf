// The host copy an asynchronous checkpoint takes (zero/state_copy.h) on the W ranks of this binary: it
// holds exactly the owned ranges Engine::visit_owned gives (the same floats, the same ranges), at every
// stage, in fp32 and bf16 (the masters), with the optimizer in place or offloaded, each piece at an
// address that lines up with its offset in the rank file (whatever the header's length), a range's
// states one after the other; and the ledger's host tier holds it as state_copy_bytes says, the
// weights under master and the states under optim, until it is released. A second refresh after
// another step, for a file whose data starts elsewhere, holds that step's state.
#include <gtest/gtest.h>

#include <cstdint>
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
        copy.refresh(engine, 4096 + 8);
        const uint64_t units = static_cast<uint64_t>(engine.shards().num_units());
        const StateCopyBytes want =
            state_copy_bytes(engine.shards().total_shard(), units, engine.num_optimizer_states());
        EXPECT_EQ(want.master, engine.shards().total_shard() * 4 + units * 4096) << what;
        EXPECT_EQ(want.optim, engine.shards().total_shard() * 8 + units * 4096) << what;  // AdamW's m and v
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kMaster) - master0, want.master) << what;
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kOptim) - optim0, want.optim) << what;

        auto expect_copy_is_engine_state = [&](const std::string& when, uint64_t file) {
          size_t i = 0;
          engine.visit_owned([&](const Engine::OwnedRange& r) {
            if (r.begin == r.end) return;
            ASSERT_LT(i, copy.ranges().size()) << what << when;
            const Engine::OwnedRange& c = copy.ranges()[i++];
            ASSERT_EQ(c.unit, r.unit) << what << when;
            ASSERT_EQ(c.begin, r.begin) << what << when;
            ASSERT_EQ(c.end, r.end) << what << when;
            const size_t bytes = (r.end - r.begin) * sizeof(float);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(c.weights) % 4096, file % 4096) << what << when << " unit " << r.unit;
            file += bytes;
            for (size_t k = 0; k < c.states.size(); ++k) {
              EXPECT_EQ(reinterpret_cast<uintptr_t>(c.states[k]) % 4096, file % 4096)
                  << what << when << " unit " << r.unit;
              file += bytes;
            }
            EXPECT_EQ(0, std::memcmp(c.weights, r.weights, bytes)) << what << when << " unit " << r.unit << " weights";
            ASSERT_EQ(c.states.size(), r.states.size()) << what << when;
            for (size_t k = 0; k < r.states.size(); ++k)
              EXPECT_EQ(0, std::memcmp(c.states[k], r.states[k], bytes)) << what << when << " unit " << r.unit << " state " << k;
          });
          EXPECT_EQ(i, copy.ranges().size()) << what << when;
        };
        expect_copy_is_engine_state(" after one step", 4096 + 8);
        step_once();
        copy.refresh(engine, 1000);
        expect_copy_is_engine_state(" after two steps", 1000);
        copy.release();
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kMaster), master0) << what;
        EXPECT_EQ(ledger.live(MemTier::kHost, MemCategory::kOptim), optim0) << what;
      }
    }
  }
}

}  // namespace
