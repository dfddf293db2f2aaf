#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_leak_scope.h"
#include "comm/mpi_worker.h"
#include "core/error.h"

namespace zerodp::comm {

// ---- the registry of live communicators (for finalize and the watchdog) -----------------------

namespace {

// Never destroyed: communicators held in other static objects (the world) may unregister during
// static destruction, after a function-local static would be gone.
std::mutex& registry_mutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::vector<MpiCommunicator*>& registry() {
  static auto* live = new std::vector<MpiCommunicator*>;
  return *live;
}

// A split's id: from its parent's, the parent's count of splits so far and its color (so every
// member derives the same, and different splits differ).
uint64_t child_id(uint64_t parent, uint64_t split_number, int64_t color) {
  uint64_t h = parent * 0x9E3779B97F4A7C15ull + split_number + 1;
  h ^= static_cast<uint64_t>(color + 2) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return h == 1 ? 2 : h;  // 1 is the world's
}

// The color a split by host derives its id from: every member's alike, and no split's color.
constexpr int kByHostColor = -3;

}  // namespace

void shutdown_all_mpi_communicators() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (MpiCommunicator* c : registry()) c->shutdown(/*free_comm=*/false);
}

std::optional<uint64_t> collectives_issued_on(uint64_t comm_id) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (MpiCommunicator* c : registry())
    if (c->id() == comm_id) return c->collectives_issued();
  return std::nullopt;
}

// ---- MpiCommunicator --------------------------------------------------------------------------

MpiCommunicator::MpiCommunicator(MPI_Comm comm, const MpiOptions& options) : options_(options) {
  ZDP_CHECK(comm != MPI_COMM_NULL, "MpiCommunicator needs a communicator, got MPI_COMM_NULL");
  {
    const MpiLeakScope openmpi_keeps_this;
    check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
    create_mpi_user_ops();
  }
  worker_ = std::make_unique<MpiWorker>(comm, rank_, size_, options_);
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

MpiCommunicator::~MpiCommunicator() {
  shutdown(/*free_comm=*/true);
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& live = registry();
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
  }
  if (worker_->detached) {
    // Its thread still runs (blocked in a collective while the job is being ended): keep what it uses.
    static auto* parked = new std::vector<MpiWorker*>;
    parked->push_back(worker_.release());
  }
}

uint64_t MpiCommunicator::id() const { return worker_->id.load(); }
uint64_t MpiCommunicator::collectives_issued() const { return worker_->issued.load(); }
MPI_Comm MpiCommunicator::handle() const { return worker_->comm(); }
void MpiCommunicator::shutdown(bool free_comm) { worker_->shutdown(free_comm); }
void MpiCommunicator::inject_mpi_error_for_testing() { worker_->inject_error(); }

void MpiCommunicator::set_timeout(double seconds) {
  Communicator::set_timeout(seconds);
  worker_->timeout_s = seconds;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_with(const std::function<int(MPI_Comm, MPI_Comm*)>& split,
                                                             int color, const std::string& what,
                                                             const MpiOptions& options) {
  MPI_Comm out = MPI_COMM_NULL;
  auto op = std::make_unique<PendingOp>();
  op->kind = PendingOp::Kind::kTask;
  const MPI_Comm parent = worker_->comm();
  op->task = [&, parent] {
    check_mpi(split(parent, &out), fmt::format("{} of a group of {} ranks (rank {})", what, size_, rank_));
  };
  worker_->enqueue(std::move(op))->wait();
  const uint64_t number = splits_++;
  if (out == MPI_COMM_NULL) return nullptr;
  auto sub = std::make_unique<MpiCommunicator>(out, options);
  sub->set_traffic_ledger(traffic_);
  sub->worker_->id = child_id(id(), number, color);
  sub->set_timeout(timeout());
  if (learned_hosts_) sub->learn_hosts(asked_two_level_);
  return sub;
}

const HostLayout& MpiCommunicator::learn_hosts(bool two_level) {
  HostLayout layout;
  TwoLevelGroups groups;
  const int testing_per_host = options_.ranks_per_host_for_testing;
  auto op = std::make_unique<PendingOp>();
  op->kind = PendingOp::Kind::kTask;
  const MPI_Comm comm = worker_->comm();
  op->task = [&, comm] {
    const std::string where = fmt::format("learning the hosts of a group of {} ranks (rank {})", size_, rank_);
    MPI_Comm local = MPI_COMM_NULL;
    int world_rank = 0;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), where);
    check_mpi(testing_per_host > 0 ? MPI_Comm_split(comm, world_rank / testing_per_host, rank_, &local)
                                   : MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
              where);
    int local_rank = 0, leader = rank_;  // a host is named by its lowest rank
    check_mpi(MPI_Comm_rank(local, &local_rank), where);
    check_mpi(MPI_Bcast(&leader, 1, MPI_INT, 0, local), where);
    std::vector<int> leaders(static_cast<size_t>(size_));
    check_mpi(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm), where);
    layout = HostLayout::from_hosts(leaders);
    if (two_level && layout.hosts > 1 && layout.ranks_per_host > 1) {
      MPI_Comm across = MPI_COMM_NULL;
      check_mpi(MPI_Comm_split(comm, local_rank, rank_, &across), where);
      for (MPI_Comm c : {local, across}) check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), where);
      const int L = layout.ranks_per_host;
      groups = {local, across, layout.hosts, L, rank_ / L, rank_ % L};
      layout.two_level = true;
    } else {
      MPI_Comm_free(&local);
    }
    worker_->set_two_level(layout, groups);
  };
  worker_->enqueue(std::move(op))->wait();
  hosts_ = std::move(layout);
  learned_hosts_ = true;
  asked_two_level_ = two_level;
  return hosts_;
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) { return split_mpi(color, key, options_); }

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_mpi(int color, int key, const MpiOptions& options) {
  const auto split = [color, key](MPI_Comm parent, MPI_Comm* out) {
    return MPI_Comm_split(parent, color < 0 ? MPI_UNDEFINED : color, key, out);
  };
  return split_with(split, color, fmt::format("split(color={}, key={})", color, key), options);
}

std::unique_ptr<Communicator> MpiCommunicator::split_by_host() {
  const int r = rank_;
  const auto split = [r](MPI_Comm parent, MPI_Comm* out) {
    return MPI_Comm_split_type(parent, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, out);
  };
  return split_with(split, kByHostColor, "split by host", options_);
}

// ---- the transport ----------------------------------------------------------------------------

WorkPtr MpiCommunicator::start(const Collective& c) {
  // Sums run in pieces (ordered reductions), broadcasts and all-gathers in pieces of max_count; a
  // max goes to MPI in one call, whose count is an int.
  if (c.is_reduction() && c.op == ReduceOp::kMax && c.count > static_cast<size_t>(INT_MAX))
    throw RuntimeFailure(fmt::format("{}: the MPI backend takes at most {} elements per max-reduction",
                                     describe(c, size_, rank_), INT_MAX));
  auto op = std::make_unique<PendingOp>();
  op->collective = c;
  return worker_->enqueue(std::move(op));
}

WorkPtr MpiCommunicator::start_barrier() {
  auto op = std::make_unique<PendingOp>();
  op->kind = PendingOp::Kind::kBarrier;
  return worker_->enqueue(std::move(op));
}

}  // namespace zerodp::comm
