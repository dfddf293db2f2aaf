#include "zero/grad_reducer.h"


namespace zerodp::zero {

GradReducer::GradReducer(ModelStates& states, comm::Communicator& comm, comm::Communicator* replicas,
                         const EngineConfig& config, CommClock& clock)
    : states_(states),
      comm_(comm),
      replicas_(replicas),
      cfg_(config),
      clock_(clock),
      rdt_(config.precision.grad_reduce_dtype()),
      pending_(reductions_kept_in_flight(config.zero)) {
  if (states_.stage() == 0) plan_buckets();
}

void GradReducer::plan_buckets() {
  const int U = states_.num_units();
  std::vector<uint64_t> elements(static_cast<size_t>(U));
  for (int u = 0; u < U; ++u) elements[static_cast<size_t>(u)] = states_.unit(u).padded;
  buckets_ = reduction_buckets(elements, static_cast<uint64_t>(cfg_.zero.reduce_bucket_size));
  unit_bucket_.assign(U, -1);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int v = buckets_[b].first; v <= buckets_[b].second; ++v) unit_bucket_[v] = static_cast<int>(b);
}

void GradReducer::begin_micro_step(bool first, bool last) {
  first_micro_ = first;
  last_micro_ = last;
  if (states_.stage() == 0) {
    bucket_left_.assign(buckets_.size(), 0);
    for (const auto& [lo, hi] : buckets_) bucket_left_[unit_bucket_[lo]] = hi - lo + 1;
  }
}

void GradReducer::unit_stored(int u) {
  if (!last_micro_ || states_.ranks() == 1) return;
  if (states_.stage() == 0) {
    const int b = unit_bucket_[u];
    if (--bucket_left_[b] == 0) launch_bucket(b);
  } else {
    launch_reduce_scatter_in_place(u);
  }
}

void GradReducer::launch_bucket(int b) {
  const auto [lo, hi] = buckets_[b];
  const DType gdt = states_.grad_dtype(), rdt = rdt_;
  const size_t count = states_.unit(hi).offset + states_.unit(hi).padded - states_.unit(lo).offset;
  char* data = states_.grad_at(lo, 0);  // the bucket's units are adjacent in the whole gradient
  const ReductionBuffers need = bucket_all_reduce_buffers(count, gdt, rdt);
  Pending p;
  if (need.send == 0) {
    p.work = comm_.all_reduce_async(data, count, gdt, comm::ReduceOp::kSum);
  } else {
    p.send = cfg_.dev().allocate(need.send, MemCategory::kComm);
    device::Device* dev = &cfg_.dev();
    dev->convert(data, gdt, p.send.data(), rdt, count);
    p.work = comm_.all_reduce_async(p.send.data(), count, rdt, comm::ReduceOp::kSum);
    void* tmp = p.send.data();
    p.on_done = [dev, tmp, data, count, rdt, gdt] { dev->convert(tmp, rdt, data, gdt, count); };
  }
  push(std::move(p));
}

// Stage 1: the rank's shard of the sum lands in its own range of the full gradient buffer.
void GradReducer::launch_reduce_scatter_in_place(int u) {
  const UnitShard& s = states_.unit(u);
  const DType gdt = states_.grad_dtype(), rdt = rdt_;
  char* data = states_.grad_at(u, 0);
  char* own = states_.grad_shard(u);
  const ReductionBuffers need = stored_unit_reduce_scatter_buffers(s.padded, s.shard, gdt, rdt);
  Pending p;
  if (need.send == 0) {
    p.work = comm_.reduce_scatter_async(data, own, s.shard, gdt, comm::ReduceOp::kSum);
  } else {
    p.send = cfg_.dev().allocate(need.send, MemCategory::kComm);
    p.recv = cfg_.dev().allocate(need.recv, MemCategory::kComm);
    device::Device* dev = &cfg_.dev();
    dev->convert(data, gdt, p.send.data(), rdt, s.padded);
    p.work = comm_.reduce_scatter_async(p.send.data(), p.recv.data(), s.shard, rdt, comm::ReduceOp::kSum);
    void* recv = p.recv.data();
    const size_t n = s.shard;
    p.on_done = [dev, recv, own, n, rdt, gdt] { dev->convert(recv, rdt, own, gdt, n); };
  }
  push(std::move(p));
}

void GradReducer::reduce_to_shard(int u, Buffer grad) {
  const UnitShard& s = states_.unit(u);
  const DType gdt = states_.grad_dtype(), rdt = rdt_;
  char* dst = states_.grad_shard(u);
  device::Device* dev = &cfg_.dev();
  // Nothing zeroes the shard before the first micro-step: that micro-step's sum is written (converted
  // when the dtypes differ) rather than added, the values of adding it into zeros (0 + x is x).
  const bool write = first_micro_;
  if (states_.ranks() == 1) {
    // Nothing to reduce: the micro-step's gradient goes into the store as at stages 0-1, without a
    // detour through the reduction dtype, so that one rank trains alike at every stage.
    if (write) {
      dev->convert(grad.data(), DType::kF32, dst, gdt, s.shard);
    } else {
      dev->add_into(dst, gdt, grad.data(), DType::kF32, s.shard);
    }
    return;
  }
  const ReductionBuffers need = micro_step_reduce_scatter_buffers(s.padded, s.shard, write, gdt, rdt);
  Pending p;
  if (rdt == DType::kF32) {
    p.send = std::move(grad);
  } else {
    p.send = dev->allocate(need.send, MemCategory::kComm);
    dev->convert(grad.data(), DType::kF32, p.send.data(), rdt, s.padded);
    grad.release();
  }
  const size_t n = s.shard;
  // ZeRO++ qgZ: what crosses hosts goes quantized (comm/communicator.h).
  const auto reduce_scatter = [&](const void* send, void* recv) {
    return cfg_.zero.zero_quantized_gradients
               ? comm_.reduce_scatter_quantized_async(send, recv, n, rdt, comm::ReduceOp::kSum)
               : comm_.reduce_scatter_async(send, recv, n, rdt, comm::ReduceOp::kSum);
  };
  if (need.recv == 0) {
    p.work = reduce_scatter(p.send.data(), dst);
  } else {
    p.recv = dev->allocate(need.recv, MemCategory::kComm);
    p.work = reduce_scatter(p.send.data(), p.recv.data());
    void* recv = p.recv.data();
    if (write) {
      p.on_done = [dev, recv, dst, n, rdt, gdt] { dev->convert(recv, rdt, dst, gdt, n); };
    } else {
      p.on_done = [dev, recv, dst, n, rdt, gdt] { dev->add_into(dst, gdt, recv, rdt, n); };
    }
  }
  push(std::move(p));
}

void GradReducer::push(Pending p) {
  pending_.push(std::move(p), [this](Pending& oldest) { complete(oldest); });
}

void GradReducer::complete(Pending& p) {
  clock_.wait(p.work);
  if (p.on_done) p.on_done();
}

void GradReducer::complete_all() {
  pending_.drain([this](Pending& oldest) { complete(oldest); });
  if (last_micro_) reduce_across_groups();
}

// Hybrid sharding: the rank's range of each unit (stage 1: in the whole gradient; 2-3: its shard)
// holds its group's sum; the same range in the other groups holds theirs. One all-reduce a unit
// over the replicas, in the reduction dtype.
void GradReducer::reduce_across_groups() {
  if (replicas_ == nullptr || replicas_->size() == 1 || states_.stage() == 0) return;
  const DType gdt = states_.grad_dtype(), rdt = rdt_;
  for (int u = 0; u < states_.num_units(); ++u) {
    const UnitShard& s = states_.unit(u);
    char* own = states_.grad_shard(u);
    if (rdt == gdt) {
      clock_.wait(replicas_->all_reduce_async(own, s.shard, gdt, comm::ReduceOp::kSum));
      continue;
    }
    device::Device& dev = cfg_.dev();
    Buffer tmp = dev.allocate(s.shard * dtype_size(rdt), MemCategory::kComm);
    dev.convert(own, gdt, tmp.data(), rdt, s.shard);
    clock_.wait(replicas_->all_reduce_async(tmp.data(), s.shard, rdt, comm::ReduceOp::kSum));
    dev.convert(tmp.data(), rdt, own, gdt, s.shard);
  }
}

void GradReducer::park(std::vector<Buffer>& keep) {
  for (auto& p : pending_) {
    keep.push_back(std::move(p.send));
    keep.push_back(std::move(p.recv));
  }
}

}  // namespace zerodp::zero
