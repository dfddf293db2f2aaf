// The traffic every collective records in its communicator's ledger (comm/traffic.h).
#include <gtest/gtest.h>

#include "mpi_test_util.h"

namespace zerodp::comm::testing {
namespace {

TEST(TrafficMpi, EveryCollectiveRecordsItsRingBytes) {
  const uint64_t global_before = TrafficLedger::global().total_bytes_sent();
  TrafficLedger ledger;
  auto c = fresh_comm(ProgressMode::kPoll, &ledger);
  const uint64_t w = static_cast<uint64_t>(c->size());
  const size_t n = 1001, count = 333;
  std::vector<uint16_t> a(n, 0);
  std::vector<float> send(count * w, 1.f), recv(count * w);

  c->all_reduce(a.data(), n, DType::kBF16, ReduceOp::kSum);           // n = 1001·2 bytes
  c->all_reduce(a.data(), 0, DType::kBF16, ReduceOp::kSum);           // zero bytes, one call
  c->reduce_scatter(send.data(), recv.data(), count, DType::kF32);    // full buffer 333·W·4 bytes
  c->all_gather(send.data(), recv.data(), count, DType::kF32);        // full buffer 333·W·4 bytes
  c->broadcast(a.data(), n, DType::kF16, 0);                          // n = 1001·2 bytes
  c->barrier();

  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllReduce), 2 * (w - 1) * 2002 / w);
  EXPECT_EQ(ledger.calls(CollectiveKind::kAllReduce), 2u);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kReduceScatter), (w - 1) * (count * w * 4) / w);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kAllGather), (w - 1) * count * 4);
  EXPECT_EQ(ledger.bytes_sent(CollectiveKind::kBroadcast), 2002u);
  EXPECT_EQ(ledger.total_bytes_sent(),
            2 * (w - 1) * 2002 / w + 2 * ((w - 1) * count * 4) + 2002);
  // Recorded in this communicator's ledger only.
  EXPECT_EQ(TrafficLedger::global().total_bytes_sent(), global_before);
}

TEST(TrafficMpi, TheWorldRecordsInTheGlobalLedger) {
  TrafficLedger& global = TrafficLedger::global();
  const uint64_t before = global.bytes_sent(CollectiveKind::kAllReduce);
  const uint64_t calls_before = global.calls(CollectiveKind::kAllReduce);
  Communicator& w = world_mpi();
  std::vector<float> x(4096, 1.f);
  w.all_reduce(x.data(), x.size(), DType::kF32);
  const uint64_t ws = static_cast<uint64_t>(w.size());
  EXPECT_EQ(global.bytes_sent(CollectiveKind::kAllReduce) - before, 2 * (ws - 1) * 16384 / ws);
  EXPECT_EQ(global.calls(CollectiveKind::kAllReduce) - calls_before, 1u);
}

}  // namespace
}  // namespace zerodp::comm::testing
