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
// Elements are of an ElementType: a tensor dtype, or kByte for payloads moved as bytes (text, 64-bit
// counters, checksums), which are never reduced. The `*_bytes` calls are the same collectives over kByte.
// Sums are deterministic and the same for every collective: element i of the result is
// x_0[i] + x_1[i] + ... + x_{W-1}[i], the ranks' values widened to fp32 and added in rank order,
// rounded once to the dtype. So an all-reduce of a bucket and reduce-scatters of its parts give the
// same bits, which is what makes ZeRO stages agree bitwise. kAvg divides that fp32 sum by size()
// before the rounding. Every collective records its bytes in the traffic ledger (comm/traffic.h).
//
// The split between this class and its backends: the public collectives are one front half,
// the same for every backend (communicator.cpp). It checks the arguments (a RuntimeFailure that names
// the collective, the group and the rule broken, before any rank enters it), works out the in-place
// form, sends host buffers of a device backend to its host group, and records the traffic of what
// it issued. A backend implements only the transport: start() and start_barrier(), handed a checked
// Collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/host_layout.h"
#include "comm/traffic.h"
#include "core/dtype.h"

namespace zerodp::comm {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax };
const char* reduce_op_name(ReduceOp op);

// What a collective moves: elements of a tensor dtype, or bytes. Converts from DType, so a call
// written with a dtype reads as before.
class ElementType {
 public:
  constexpr ElementType(DType dtype) : code_(static_cast<uint8_t>(dtype)) {}  // NOLINT: implicit on purpose
  static constexpr ElementType byte() { return ElementType(kByteCode, 0); }

  constexpr bool is_byte() const { return code_ == kByteCode; }
  // The tensor dtype; meaningless for kByte (the front half never hands a reduction of bytes on).
  constexpr DType dtype() const { return is_byte() ? DType::kF32 : static_cast<DType>(code_); }
  constexpr size_t size() const { return is_byte() ? 1 : dtype_size(dtype()); }
  // "fp32", "bf16", "fp16" or "byte".
  const char* name() const;
  friend constexpr bool operator==(ElementType a, ElementType b) { return a.code_ == b.code_; }

 private:
  static constexpr uint8_t kByteCode = 0xFF;
  constexpr ElementType(uint8_t code, int /*tag*/) : code_(code) {}
  uint8_t code_;
};
inline constexpr ElementType kByte = ElementType::byte();

// One collective as the front half hands it to a backend: its arguments checked, its in-place form
// worked out. Buffers belong to the caller, who keeps them alive until the work completes.
struct Collective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  const void* send = nullptr;  // reduce_scatter, all_gather: the input; null for the others
  void* recv = nullptr;        // the result (broadcast, all_reduce: the one buffer)
  size_t count = 0;            // elements, as in the semantics above
  ElementType type = DType::kF32;
  ReduceOp op = ReduceOp::kSum;  // all_reduce, reduce_scatter
  int root = 0;                  // broadcast
  bool in_place = false;         // all_reduce always; reduce_scatter and all_gather in their in-place form (set by the front half)
  bool quantize_across_hosts = false;  // reduce_scatter_quantized_async (ZeRO++ qgZ)

  bool is_reduction() const { return kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter; }
  size_t chunk_bytes() const { return count * type.size(); }
};

// "all_reduce(count=16, dtype=bf16, op=avg, in place) in a group of 4 ranks (rank 1)": how errors
// name a collective, on every backend.
std::string describe(const Collective& c, int group_size, int rank);

// A handle to an operation in flight (c10d's Work). wait() blocks until it is done and rethrows
// any error it met; it may be called more than once.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// A collective with nothing to do: done at once.
class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

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

  // ---- the collectives (the front half) ----
  WorkPtr barrier_async() { return start_barrier(); }
  WorkPtr broadcast_async(void* buf, size_t count, ElementType type, int root);
  WorkPtr all_reduce_async(void* buf, size_t count, ElementType type, ReduceOp op);
  WorkPtr reduce_scatter_async(const void* send, void* recv, size_t count, ElementType type, ReduceOp op);
  WorkPtr all_gather_async(const void* send, void* recv, size_t count, ElementType type);
  // ZeRO++'s qgZ: a reduce-scatter (sum or average) whose values crossing hosts travel as int8 blocks
  // with fp32 scales (core/quantize.h). Where it runs in two levels (learn_hosts), the fp32 partial sums
  // passed from host to host and the finished chunks sent back to their owners are quantized, each hop
  // within half a step of 1/127 of its block's largest magnitude; within a host, and wherever it runs
  // flat, it is reduce_scatter_async, exact. The traffic ledger's inter-host bytes count the quantized bytes.
  WorkPtr reduce_scatter_quantized_async(const void* send, void* recv, size_t count, ElementType type, ReduceOp op);
  WorkPtr broadcast_bytes_async(void* buf, size_t bytes, int root) { return broadcast_async(buf, bytes, kByte, root); }
  WorkPtr all_gather_bytes_async(const void* send, void* recv, size_t bytes) {
    return all_gather_async(send, recv, bytes, kByte);
  }

  void barrier() { barrier_async()->wait(); }
  void broadcast(void* buf, size_t count, ElementType type, int root) { broadcast_async(buf, count, type, root)->wait(); }
  void all_reduce(void* buf, size_t count, ElementType type, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(buf, count, type, op)->wait();
  }
  void reduce_scatter(const void* send, void* recv, size_t count, ElementType type, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(send, recv, count, type, op)->wait();
  }
  void all_gather(const void* send, void* recv, size_t count, ElementType type) {
    all_gather_async(send, recv, count, type)->wait();
  }
  void broadcast_bytes(void* buf, size_t bytes, int root) { broadcast(buf, bytes, kByte, root); }
  void all_gather_bytes(const void* send, void* recv, size_t bytes) { all_gather(send, recv, bytes, kByte); }

  // The ledger this communicator records its traffic in (by default the process's).
  TrafficLedger& traffic() { return *traffic_; }
  void set_traffic_ledger(TrafficLedger* ledger) { traffic_ = ledger; }
  // Whether this rank's successor in the ring over this group is in another shard group (hybrid
  // sharding: set by the engine); its collectives' bytes then count as inter-group traffic too.
  void set_successor_in_other_group(bool crosses) { successor_in_other_group_ = crosses; }
  bool successor_in_other_group() const { return successor_in_other_group_; }
  // Learns which host each rank runs on (collective: every member calls it) and, when `two_level`
  // and the layout allows (comm/host_layout.h), runs reduce-scatters and all-gathers in two levels
  // from then on: the same results, bit for bit, with fewer messages across hosts. A backend that
  // cannot tell hosts apart leaves the group on one host. Returns the layout learned.
  virtual const HostLayout& learn_hosts(bool two_level) {
    (void)two_level;
    return hosts_;
  }
  const HostLayout& host_layout() const { return hosts_; }
  // The collective watchdog (--comm-timeout, comm/watchdog.h): a wait on a collective issued from now
  // on gives up after `seconds` (0: waits forever) with a RuntimeFailure naming it and the ranks that
  // had not arrived. Splits made afterwards inherit it.
  virtual void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }

 protected:
  // ---- the transport (the back half) ----
  // Starts `c`, already checked (rank and size as this communicator's), and returns its Work. Runs on
  // the issuing thread; may throw (the communicator shut down or failed), and then nothing is recorded.
  virtual WorkPtr start(const Collective& c) = 0;
  virtual WorkPtr start_barrier() = 0;
  // A device backend's host group: collectives whose buffers are all host memory run there, so that
  // code written for the CPU keeps working. Null: this backend takes host buffers itself.
  virtual Communicator* host_group() { return nullptr; }
  // Whether `p` (not null) is device memory; asked only where host_group() is not null.
  virtual bool is_device_memory(const void* /*p*/) const { return false; }
  // Hands `c` to another communicator's transport (a device backend's host group), unchecked and
  // unrecorded: the front half of this one did both.
  static WorkPtr start_on(Communicator& other, const Collective& c) { return other.start(c); }

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
  HostLayout hosts_;  // set by learn_hosts
  double timeout_s_ = 0;

 private:
  // The front half: check, route, start, record.
  WorkPtr issue(Collective c);
  bool in_place_form(const Collective& c) const;
  void check(const Collective& c) const;
  // True when every buffer of `c` is host memory and a host group takes it; throws on a mix.
  bool goes_to_host_group(const Collective& c);
};

// Collectives issued while one is alive go to a scratch ledger: checks, metrics and checkpoint I/O
// are not training traffic (the ledger counts the training's collectives).
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
