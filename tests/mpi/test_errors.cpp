// Errors: one met by the worker (an MPI error) surfaces in wait() with its context and poisons the
// communicator; bad arguments are refused when issued, before any rank enters the collective.
#include <gtest/gtest.h>

#include "core/error.h"
#include "mpi_test_util.h"

namespace zerodp::comm::testing {
namespace {

std::string error_of(const WorkPtr& work) {
  try {
    work->wait();
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  return "";
}

class Errors : public ::testing::TestWithParam<ProgressMode> {};

TEST_P(Errors, MpiErrorInTheWorkerSurfacesInWait) {
  auto c = fresh_comm(GetParam());
  std::vector<uint16_t> buf(16, 0);
  c->inject_mpi_error_for_testing();  // every rank: the collective fails locally, no data moves
  auto work = c->all_reduce_async(buf.data(), buf.size(), DType::kBF16, ReduceOp::kAvg);
  const std::string what = error_of(work);
  EXPECT_NE(what.find("all_reduce(count=16, dtype=bf16, op=avg"), std::string::npos) << what;
  EXPECT_NE(what.find("MPI error"), std::string::npos) << what;
  EXPECT_NE(what.find("MPI_ERR_"), std::string::npos) << what;  // MPI_Error_string's text
  EXPECT_NE(what.find(fmt::format("group of {} ranks (rank {})", c->size(), c->rank())), std::string::npos)
      << what;
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(error_of(work), what) << "a second wait() rethrows the same error";

  // The communicator is unusable from now on; later collectives fail at once, naming the first error.
  auto later = c->all_gather_async(buf.data(), buf.data(), 0, DType::kF16);
  const std::string later_what = error_of(later);
  EXPECT_NE(later_what.find("failed earlier"), std::string::npos) << later_what;
  EXPECT_NE(later_what.find("MPI error"), std::string::npos) << later_what;
}

TEST_P(Errors, InjectedErrorReachesReduceScatterAndAllGatherToo) {
  std::vector<float> send(64, 1.f), recv(64);
  auto c1 = fresh_comm(GetParam());
  c1->inject_mpi_error_for_testing();
  const std::string rs = error_of(c1->reduce_scatter_async(send.data(), recv.data(), 64 / c1->size(), DType::kF32, ReduceOp::kSum));
  EXPECT_NE(rs.find("reduce_scatter(count="), std::string::npos) << rs;
  auto c2 = fresh_comm(GetParam());
  c2->inject_mpi_error_for_testing();
  const std::string ag = error_of(c2->all_gather_async(send.data(), recv.data(), 64 / c2->size(), DType::kF32));
  EXPECT_NE(ag.find("all_gather(count="), std::string::npos) << ag;
}

TEST_P(Errors, BadArgumentsAreRefusedWhenIssued) {
  auto c = fresh_comm(GetParam());
  const int w = c->size(), r = c->rank();
  std::vector<float> buf(8 * w, 0.f);
  EXPECT_THROW(c->broadcast_async(buf.data(), 4, DType::kF32, w), RuntimeFailure);
  EXPECT_THROW(c->broadcast_async(buf.data(), 4, DType::kF32, -1), RuntimeFailure);
  EXPECT_THROW(c->all_reduce_async(nullptr, 4, DType::kF32, ReduceOp::kSum), RuntimeFailure);
  EXPECT_THROW(c->broadcast_bytes_async(nullptr, 4, 0), RuntimeFailure);
  EXPECT_THROW(c->all_reduce_async(buf.data(), 4, kByte, ReduceOp::kMax), RuntimeFailure);  // bytes are not reduced
  // recv overlapping send without being the in-place position.
  if (w > 1) {
    float* wrong = buf.data() + ((r + 1) % w) * 4 + 1;
    EXPECT_THROW(c->reduce_scatter_async(buf.data(), wrong, 4, DType::kF32, ReduceOp::kSum), RuntimeFailure);
    EXPECT_THROW(c->all_gather_async(wrong, buf.data(), 4, DType::kF32), RuntimeFailure);
  }
  // Nothing was issued: the communicator still works.
  float x = 1.f;
  c->all_reduce(&x, 1, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(x, static_cast<float>(w));
}

TEST_P(Errors, CollectivesAfterShutdownThrow) {
  auto c = fresh_comm(GetParam());
  c->shutdown(/*free_comm=*/true);
  float x = 1.f;
  EXPECT_THROW(c->all_reduce_async(&x, 1, DType::kF32, ReduceOp::kSum), RuntimeFailure);
}

INSTANTIATE_TEST_SUITE_P(Modes, Errors, ::testing::Values(ProgressMode::kPoll, ProgressMode::kBlocking), mode_name);

}  // namespace
}  // namespace zerodp::comm::testing
