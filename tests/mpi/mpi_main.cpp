// The main of the multi-rank tests: starts MPI through the runtime, runs the tests on every rank
// (all ranks run the same tests in the same order, so their collectives match), and fails the run
// if any rank failed. Rank 0 prints the usual report; the others print only their failures.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/runtime.h"
#include "core/dtype.h"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = zerodp::comm::world();
  const int rank = world->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();
  // Every rank learns whether any rank failed (max of the flags); all exit with the same status.
  float failed = rc != 0 ? 1.f : 0.f;
  world->all_reduce(&failed, 1, zerodp::DType::kF32, zerodp::comm::ReduceOp::kMax);
  if (rank == 0 && failed != 0.f) std::fprintf(stderr, "multi-rank tests FAILED on at least one rank\n");
  world.reset();
  zerodp::comm::finalize();
  return failed != 0.f ? 1 : 0;
}
