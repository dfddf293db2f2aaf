#include "comm/mpi_transfer.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "comm/reduce_kernels.h"
#include "core/error.h"

namespace zerodp::comm {

void check_mpi(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  int error_class = rc;
  MPI_Error_class(rc, &error_class);
  throw RuntimeFailure(fmt::format("{}: MPI error (code {}, class {}): {}", what, rc, error_class,
                                   len > 0 ? std::string_view(text, static_cast<size_t>(len))
                                           : std::string_view("unknown error")));
}

namespace {

// MPI has no bf16 or fp16: both travel as MPI_UINT16_T, reduced by user-defined operators that
// widen to fp32, combine and round once (reduce_kernels.h). All of them commute.
template <DType T, bool kMax>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  if constexpr (kMax) {
    max_into(in, inout, static_cast<size_t>(*len), T);
  } else {
    sum_into(in, inout, static_cast<size_t>(*len), T);
  }
}

struct UserOps {
  MPI_Op bf16_sum, bf16_max, fp16_sum, fp16_max;
};

const UserOps& user_ops() {
  static const UserOps ops = [] {
    UserOps o{};
    check_mpi(MPI_Op_create(&reduce_16bit<DType::kBF16, false>, 1, &o.bf16_sum), "MPI_Op_create(bf16 sum)");
    check_mpi(MPI_Op_create(&reduce_16bit<DType::kBF16, true>, 1, &o.bf16_max), "MPI_Op_create(bf16 max)");
    check_mpi(MPI_Op_create(&reduce_16bit<DType::kF16, false>, 1, &o.fp16_sum), "MPI_Op_create(fp16 sum)");
    check_mpi(MPI_Op_create(&reduce_16bit<DType::kF16, true>, 1, &o.fp16_max), "MPI_Op_create(fp16 max)");
    return o;
  }();
  return ops;
}

}  // namespace

void create_mpi_user_ops() { (void)user_ops(); }

MPI_Datatype mpi_type(ElementType t) {
  if (t.is_byte()) return MPI_BYTE;
  return t.dtype() == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T;
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  const bool max = op == ReduceOp::kMax;
  switch (t) {
    case DType::kF32: return max ? MPI_MAX : MPI_SUM;
    case DType::kBF16: return max ? user_ops().bf16_max : user_ops().bf16_sum;
    case DType::kF16: return max ? user_ops().fp16_max : user_ops().fp16_sum;
  }
  return MPI_OP_NULL;
}

// A collective in flight often needs only the peer's next step, hence the yields first; the sleeps
// keep a long transfer from taking a core from the caller's compute.
void back_off(int idle_rounds, int max_sleep_us) {
  constexpr int kYieldRounds = 32;
  if (idle_rounds < kYieldRounds || max_sleep_us == 0) {
    sched_yield();
    return;
  }
  const int shift = std::min(idle_rounds - kYieldRounds, 16);
  const long us = std::min<long>(max_sleep_us, 1L << shift);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

int complete_requests(const MpiGroup& g, std::vector<MPI_Request>& reqs) {
  if (reqs.empty()) return MPI_SUCCESS;
  const int n = static_cast<int>(reqs.size());
  if (g.blocking()) return MPI_Waitall(n, reqs.data(), MPI_STATUSES_IGNORE);
  for (int idle = 0;; ++idle) {
    int done = 0;
    const int rc = MPI_Testall(n, reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    back_off(idle, g.options.max_poll_sleep_us);
  }
}

char* in_place_base(const Collective& c, int rank) {
  return static_cast<char*>(c.recv) - static_cast<size_t>(rank) * c.chunk_bytes();
}

bool needs_pieces(const MpiGroup& g, const Collective& c) {
  return (c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kAllGather) && c.count > g.options.max_count;
}

int broadcast_in_pieces(const MpiGroup& g, char* buf, size_t count, size_t es, MPI_Datatype type, int root) {
  for (size_t k = 0; k < count; k += g.options.max_count) {
    const int n = static_cast<int>(std::min(g.options.max_count, count - k));
    if (const int rc = MPI_Bcast(buf + k * es, n, type, root, g.comm); rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int run_in_pieces(const MpiGroup& g, const Collective& c, MPI_Datatype type) {
  const size_t es = c.type.size();
  char* recv = static_cast<char*>(c.recv);
  if (c.kind == CollectiveKind::kBroadcast) return broadcast_in_pieces(g, recv, c.count, es, type, c.root);
  const size_t chunk = c.chunk_bytes();
  if (!c.in_place) std::memcpy(recv + static_cast<size_t>(g.rank) * chunk, c.send, chunk);
  for (int j = 0; j < g.size; ++j)
    if (const int rc = broadcast_in_pieces(g, recv + static_cast<size_t>(j) * chunk, c.count, es, type, j);
        rc != MPI_SUCCESS)
      return rc;
  return MPI_SUCCESS;
}

}  // namespace zerodp::comm
