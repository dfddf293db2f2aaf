// The gradient reductions' memory rules, one place for the engine (GradReducer, which allocates by
// them) and the planner (plan/estimator.cpp, which replays them): what buffers one reduction holds
// while it is in flight, and how many reductions stay in flight.
//
// Each reduction runs in the reduction dtype rdt (PrecisionSettings::grad_reduce_dtype); the stored
// gradient has dtype gdt (PrecisionSettings::grad_store_dtype). Its buffers are category comm, except
// that at stages 2-3 an fp32 reduction sends the micro-step's fp32 unit gradient itself (moved in,
// category gathered). The communicator's own staging comes on top (comm/reduction_staging.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

#include "core/dtype.h"
#include "zero/settings.h"

namespace zerodp::zero {

// The buffers one reduction holds from its launch until it is retired, in bytes.
struct ReductionBuffers {
  uint64_t send = 0;  // what is sent when it is not the stored gradient: a conversion, or the fp32 unit gradient
  uint64_t recv = 0;  // what is received into when the sum does not land where it is kept
  // Live while the send buffer is filled, when that is more than send + recv: the micro-step's fp32
  // unit gradient beside its conversion (released before the receive buffer is allocated).
  uint64_t converting = 0;
  uint64_t held() const { return send + recv; }
};

// Stage 0: a bucket's all-reduce of `count` elements of the stored gradient, in place when it is kept
// in the reduction dtype, else through one conversion buffer.
inline ReductionBuffers bucket_all_reduce_buffers(uint64_t count, DType gdt, DType rdt) {
  ReductionBuffers b;
  if (rdt != gdt) b.send = count * dtype_size(rdt);
  return b;
}

// Stage 1: a unit's reduce-scatter of its P (padded) elements into the rank's S of them, in place in
// the stored gradient when it is kept in the reduction dtype, else through a conversion of the unit
// and a receive buffer of the shard.
inline ReductionBuffers stored_unit_reduce_scatter_buffers(uint64_t P, uint64_t S, DType gdt, DType rdt) {
  ReductionBuffers b;
  if (rdt != gdt) {
    b.send = P * dtype_size(rdt);
    b.recv = S * dtype_size(rdt);
  }
  return b;
}

// Stages 2-3: a micro-step's fp32 unit gradient (P elements) reduce-scattered into the rank's
// gradient shard (S). Sent as it is in fp32, else converted (the fp32 gradient released after). The
// first micro-step's sum is received straight into the shard (written, not added: nothing zeroes it)
// when the shard is kept in the reduction dtype; every other sum goes through a receive buffer.
inline ReductionBuffers micro_step_reduce_scatter_buffers(uint64_t P, uint64_t S, bool first_micro_step, DType gdt,
                                                          DType rdt) {
  ReductionBuffers b;
  b.send = P * dtype_size(rdt);
  if (rdt != DType::kF32) b.converting = P * dtype_size(DType::kF32) + b.send;
  if (!(first_micro_step && rdt == gdt)) b.recv = S * dtype_size(rdt);
  return b;
}

// How many reductions stay in flight while the backward goes on: with overlap_comm,
// max_reductions_in_flight (each holds unit-sized buffers, so the count is bounded); without it,
// none (each is waited for as soon as it is launched).
inline size_t reductions_kept_in_flight(const ZeroSettings& zero) {
  return zero.overlap_comm ? static_cast<size_t>(zero.max_reductions_in_flight) : 0;
}

// The reductions in flight, oldest first: push() launches one more and retires the oldest while
// more than `limit` are left. The engine keeps its pending collectives in it, the planner their
// bytes.
template <class T>
class InFlightWindow {
 public:
  explicit InFlightWindow(size_t limit) : limit_(limit) {}

  // Adds `item`, then calls retire(oldest) on each one taken out beyond the limit.
  template <class Retire>
  void push(T item, Retire&& retire) {
    items_.push_back(std::move(item));
    while (items_.size() > limit_) retire_oldest(retire);
  }
  // Retires every one, oldest first.
  template <class Retire>
  void drain(Retire&& retire) {
    while (!items_.empty()) retire_oldest(retire);
  }

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }

 private:
  // Taken out before it is retired: a retirement that throws leaves the rest as they were.
  template <class Retire>
  void retire_oldest(Retire& retire) {
    T oldest = std::move(items_.front());
    items_.pop_front();
    retire(oldest);
  }

  size_t limit_;
  std::deque<T> items_;
};

}  // namespace zerodp::zero
