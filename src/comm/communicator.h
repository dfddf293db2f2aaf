// The Communicator: one process group's collectives, in the style of PyTorch c10d. Every
// collective has an asynchronous form that returns a Work handle to wait on; several may be in
// flight at once and they progress while the caller computes. The blocking forms are the async
// form followed by wait().
//
// Semantics (all ranks of the group must issue the same collectives in the same order):
//  - all_reduce: in place over `count` elements.
//  - reduce_scatter: `send` holds size()*count elements, chunk i for rank i; rank r receives the
//    reduction of everyone's chunk r into `recv` (count elements). In place when
//    recv == send + rank()*count (NCCL's convention); the rest of `send` is then unspecified
//    afterwards (the MPI backend uses it). Out of place, `send` is left as it was.
//  - all_gather: every rank contributes `count` elements from `send`; `recv` receives size()*count,
//    rank i's at offset i*count. In place when send == recv + rank()*count.
//  - broadcast: in place, from `root`.
// Sums are deterministic and the same for every collective: element i of the result is
// x_0[i] + x_1[i] + ... + x_{W-1}[i], the ranks' values widened to fp32 and added in rank order,
// rounded once to the dtype. So an all-reduce of a bucket and reduce-scatters of its parts give the
// same bits, which is what makes ZeRO stages agree bitwise. kAvg divides that fp32 sum by size()
// before the rounding. Every collective records its bytes in the traffic ledger (contract §9).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/traffic.h"
#include "core/dtype.h"

namespace zerodp::comm {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax };
const char* reduce_op_name(ReduceOp op);

// A handle to an operation in flight (c10d's Work). wait() blocks until it is done and rethrows
// any error it met; it may be called more than once.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi", "nccl", ...
  virtual std::string backend() const = 0;

  // Splits into sub-communicators: ranks with the same color form one, ordered by key (then rank).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // The ranks of this group that share this rank's host (can share memory), ordered by rank; collective.
  virtual std::unique_ptr<Communicator> split_by_host() = 0;

  virtual WorkPtr barrier_async() = 0;
  virtual WorkPtr broadcast_async(void* buf, size_t count, DType dtype, int root) = 0;
  virtual WorkPtr all_reduce_async(void* buf, size_t count, DType dtype, ReduceOp op) = 0;
  virtual WorkPtr reduce_scatter_async(const void* send, void* recv, size_t count, DType dtype,
                                       ReduceOp op) = 0;
  virtual WorkPtr all_gather_async(const void* send, void* recv, size_t count, DType dtype) = 0;
  // Byte payloads (text, 64-bit counters, checksums): the same collectives over `bytes` bytes, moved
  // as bytes (no arithmetic, no dtype).
  virtual WorkPtr broadcast_bytes_async(void* buf, size_t bytes, int root) = 0;
  virtual WorkPtr all_gather_bytes_async(const void* send, void* recv, size_t bytes) = 0;

  void barrier() { barrier_async()->wait(); }
  void broadcast(void* buf, size_t count, DType dtype, int root) {
    broadcast_async(buf, count, dtype, root)->wait();
  }
  void all_reduce(void* buf, size_t count, DType dtype, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(buf, count, dtype, op)->wait();
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DType dtype,
                      ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(send, recv, count, dtype, op)->wait();
  }
  void all_gather(const void* send, void* recv, size_t count, DType dtype) {
    all_gather_async(send, recv, count, dtype)->wait();
  }
  void broadcast_bytes(void* buf, size_t bytes, int root) { broadcast_bytes_async(buf, bytes, root)->wait(); }
  void all_gather_bytes(const void* send, void* recv, size_t bytes) {
    all_gather_bytes_async(send, recv, bytes)->wait();
  }

  // The ledger this communicator records its traffic in (by default the process's).
  TrafficLedger& traffic() { return *traffic_; }
  void set_traffic_ledger(TrafficLedger* ledger) { traffic_ = ledger; }
  // Whether this rank's successor in the ring over this group is in another shard group (hybrid
  // sharding: set by the engine); its collectives' bytes then count as inter-group traffic too.
  void set_successor_in_other_group(bool crosses) { successor_in_other_group_ = crosses; }
  bool successor_in_other_group() const { return successor_in_other_group_; }
  // The collective watchdog (--comm-timeout, comm/watchdog.h): a wait on a collective issued from now
  // on gives up after `seconds` (0: waits forever) with a RuntimeFailure naming it and the ranks that
  // had not arrived. Splits made afterwards inherit it.
  virtual void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }

 protected:
  // What a split's child inherits from its parent: the traffic ledger and the timeout (for the GPU
  // backends, whose children wrap a split of their private MPI group). Null stays null.
  std::unique_ptr<Communicator> inherit(std::unique_ptr<Communicator> child) const {
    if (child != nullptr) {
      child->set_traffic_ledger(traffic_);
      child->set_timeout(timeout_s_);
    }
    return child;
  }

  TrafficLedger* traffic_ = &TrafficLedger::global();
  bool successor_in_other_group_ = false;
  double timeout_s_ = 0;
};

// Collectives issued while one is alive go to a scratch ledger: checks, metrics and checkpoint I/O
// are not training traffic (contract §9 counts the training's collectives).
class UntrackedTraffic {
 public:
  explicit UntrackedTraffic(Communicator& comm) : comm_(comm), training_(&comm.traffic()) {
    comm_.set_traffic_ledger(&scratch_);
  }
  ~UntrackedTraffic() { comm_.set_traffic_ledger(training_); }
  UntrackedTraffic(const UntrackedTraffic&) = delete;
  UntrackedTraffic& operator=(const UntrackedTraffic&) = delete;

 private:
  Communicator& comm_;
  TrafficLedger scratch_;
  TrafficLedger* training_;
};

}  // namespace zerodp::comm
