#include "zero/param_gatherer.h"

#include <deque>
#include <utility>

#include "core/error.h"
#include "core/quantize.h"

namespace zerodp::zero {

ParamGatherer::ParamGatherer(ModelStates& states, comm::Communicator& comm, const EngineConfig& config,
                             CommClock& clock)
    : states_(states), comm_(comm), cfg_(config), clock_(clock), schedule_(states.layout().schedule()) {
  const int U = states_.num_units();
  gathered_.resize(U);
  staging_.resize(U);
  state_.assign(U, State::kSharded);
  read_slot_.assign(U, -1);
  work_.resize(U);
  started_for_.assign(U, 0);
  quantized_shard_.resize(U);
  quantized_all_.resize(U);
  secondary_.resize(U);
  if (states_.stage() == 3 && cfg_.zero.zero_hpz_partition_size > 1) {
    hpz_ = static_cast<int>(cfg_.zero.zero_hpz_partition_size);
    ZDP_CHECK(comm_.size() % hpz_ == 0, "hpZ partition size {} does not divide the {} ranks", hpz_, comm_.size());
    secondary_group_ = comm_.split(comm_.rank() / hpz_, comm_.rank());  // collective
  }
  plan_ = GatherPlan(schedule_, cfg_.zero.reshard_after_forward, hpz_ > 1);
}

GatherPlan::Source ParamGatherer::source_of(int u) const {
  // Forward-only passes keep no slices (no backward follows): every gather is over all ranks.
  if (forward_only_) return GatherPlan::Source::kFull;
  return plan_.source(started_for_[u]);
}

void ParamGatherer::start(int u, size_t read) {
  const UnitShard& s = states_.unit(u);
  gathered_[u] = cfg_.dev().allocate(s.padded * dtype_size(states_.param_dtype()), MemCategory::kGathered);
  started_for_[u] = read;
  if (GatherPlan::from_slices(source_of(u))) {
    // hpZ: within the group, from the slices the unit's first gather left.
    ZDP_CHECK(secondary_[u].data() != nullptr, "unit {}: a gather from secondary slices that were not kept", u);
    work_[u] = secondary_group_->all_gather_async(secondary_[u].data(), gathered_[u].data(),
                                                  s.padded / static_cast<size_t>(hpz_), states_.param_dtype());
    state_[u] = State::kInFlight;
    live_ += s.padded;
    return;
  }
  if (states_.param_on_nvme(u)) {
    // The read starts now; launch_reads() copies the shard up and gathers (same staging as cpu).
    staging_[u] = cfg_.dev().allocate(s.shard * dtype_size(states_.param_dtype()), MemCategory::kComm);
    read_slot_[u] = states_.param_swap()->read_async(u);
    reading_.push_back(u);
    state_[u] = State::kReading;
    live_ += s.padded;
    return;
  }
  const void* own = states_.param_shard(u);
  if (states_.param_on_host(u)) {
    // The shard comes up from host memory into a device buffer that the collective sends from (on a
    // GPU: an H2D copy; on the CPU device: a memcpy).
    const size_t bytes = s.shard * dtype_size(states_.param_dtype());
    staging_[u] = cfg_.dev().allocate(bytes, MemCategory::kComm);
    cfg_.dev().copy(staging_[u].data(), own, bytes);
    own = staging_[u].data();
  }
  if (cfg_.zero.zero_quantized_weights) {
    // qwZ: every rank's shard as int8 blocks; finish_gather() dequantizes them all into the unit.
    const size_t q = quantized_int8_bytes(s.shard);
    quantized_shard_[u] = cfg_.dev().allocate(q, MemCategory::kComm);
    quantized_all_[u] = cfg_.dev().allocate(q * static_cast<size_t>(comm_.size()), MemCategory::kComm);
    cfg_.dev().quantize_int8(own, states_.param_dtype(), s.shard, quantized_shard_[u].data());
    work_[u] = comm_.all_gather_bytes_async(quantized_shard_[u].data(), quantized_all_[u].data(), q);
  } else {
    work_[u] = comm_.all_gather_async(own, gathered_[u].data(), s.shard, states_.param_dtype());
  }
  state_[u] = State::kInFlight;
  live_ += s.padded;
}

void ParamGatherer::drop_quantized(int u) {
  quantized_shard_[u].release();
  quantized_all_[u].release();
}

void ParamGatherer::finish_gather(int u) {
  const UnitShard& s = states_.unit(u);
  const size_t es = dtype_size(states_.param_dtype());
  if (quantized_all_[u].data() != nullptr) {
    const size_t q = quantized_int8_bytes(s.shard);
    for (int j = 0; j < comm_.size(); ++j)
      cfg_.dev().dequantize_int8(quantized_all_[u].as<char>() + static_cast<size_t>(j) * q, s.shard,
                                 gathered_[u].as<char>() + static_cast<size_t>(j) * s.shard * es, states_.param_dtype());
    drop_quantized(u);
  }
  const GatherPlan::Source source = source_of(u);
  if (GatherPlan::from_slices(source) && !GatherPlan::slice_after(source)) secondary_[u].release();
  if (source != GatherPlan::Source::kFullKeep) return;
  // hpZ: keep this rank's slice for the unit's later gathers.
  const size_t slice = s.padded / static_cast<size_t>(hpz_);
  secondary_[u] = cfg_.dev().allocate(slice * es, MemCategory::kGathered);
  cfg_.dev().copy(secondary_[u].data(), gathered_[u].as<char>() + static_cast<size_t>(secondary_group_->rank()) * slice * es,
                  slice * es);
}

void ParamGatherer::launch_reads() {
  while (!reading_.empty()) {
    const int u = reading_.front();
    reading_.pop_front();
    const UnitShard& s = states_.unit(u);
    const size_t bytes = s.shard * dtype_size(states_.param_dtype());
    // Up from the host read buffer into the device buffer the collective sends from; the buffer is
    // read into again only after that copy has run (on a GPU it is queued behind the compute).
    cfg_.dev().copy(staging_[u].data(), states_.param_swap()->wait_read(read_slot_[u]), bytes);
    states_.param_swap()->release_read(read_slot_[u], cfg_.dev().record());
    read_slot_[u] = -1;
    work_[u] = comm_.all_gather_async(staging_[u].data(), gathered_[u].data(), s.shard, states_.param_dtype());
    state_[u] = State::kInFlight;
  }
}

void ParamGatherer::ensure(int u) {
  if (states_.param_whole(u)) return;  // kept whole on every rank (stage3_param_persistence_threshold)
  if (state_[u] == State::kSharded) start(u, cursor_);
  if (state_[u] == State::kReading) launch_reads();
  if (state_[u] == State::kInFlight) {
    clock_.wait(work_[u]);
    work_[u].reset();
    staging_[u].release();
    finish_gather(u);
    state_[u] = State::kReady;
  }
}

bool ParamGatherer::release(int u) {
  if (state_[u] == State::kSharded || states_.param_whole(u)) return false;
  if (state_[u] == State::kReading) launch_reads();  // in order: the collectives stay in every rank's order
  if (state_[u] == State::kInFlight) {
    clock_.wait(work_[u]);
    drop_quantized(u);
    // A gather from the slices dropped unfinished (a failed step): the slice goes if it was the last.
    const GatherPlan::Source source = source_of(u);
    if (GatherPlan::from_slices(source) && !GatherPlan::slice_after(source)) secondary_[u].release();
  }
  work_[u].reset();
  staging_[u].release();
  gathered_[u].release();
  state_[u] = State::kSharded;
  live_ -= states_.unit(u).padded;
  return true;
}

void ParamGatherer::prefetch() {
  if (!prefetches(cfg_.zero)) return;
  const std::vector<int>& reads = schedule_.param_reads();
  const size_t end = forward_only_ ? static_cast<size_t>(schedule_.forward_param_reads()) : reads.size();
  prefetch_after(
      cursor_, end, reads, live_, static_cast<uint64_t>(cfg_.zero.stage3_max_live_parameters),
      static_cast<uint64_t>(cfg_.zero.stage3_prefetch_bucket_size),
      [&](int v) { return state_[v] == State::kSharded && !states_.param_whole(v); },
      [&](int v) { return uint64_t{states_.unit(v).padded}; },
      // NVMe: a read needs one of offload_param.buffer_count host buffers.
      [&](int v) { return !states_.param_on_nvme(v) || states_.param_swap()->read_buffer_free(); },
      [&](int v, size_t k) { start(v, k); });
}

void ParamGatherer::use(int k) {
  if (states_.stage() != 3) return;
  const int read = schedule_.param_read_index(k);
  ZDP_CHECK(read >= 0, "use {} ({} of unit {}) reads no parameters", k, schedule_[k].part, schedule_[k].unit);
  cursor_ = static_cast<size_t>(read);
  launch_reads();
  const int u = schedule_[k].unit;
  ensure(u);
  prefetch();
}

const void* ParamGatherer::params(int u) {
  return states_.param_whole(u) ? states_.param_at(u, 0) : gathered_[u].data();
}

void ParamGatherer::gather_after_update() {
  std::deque<std::pair<comm::WorkPtr, size_t>> inflight;
  size_t live = 0;
  for (int u = 0; u < states_.num_units(); ++u) {
    if (!states_.param_whole(u)) continue;  // stage 3 gathers sharded units when it uses them
    const UnitShard& s = states_.unit(u);
    char* unit = states_.param_at(u, 0);
    char* own = states_.param_shard(u);
    inflight.emplace_back(comm_.all_gather_async(own, unit, s.shard, states_.param_dtype()), s.padded);
    live += s.padded;
    while (live > static_cast<size_t>(cfg_.zero.allgather_bucket_size) && inflight.size() > 1) {
      clock_.wait(inflight.front().first);
      live -= inflight.front().second;
      inflight.pop_front();
    }
    if (!cfg_.zero.overlap_comm) {
      clock_.wait(inflight.back().first);
      live -= inflight.back().second;
      inflight.pop_back();
    }
  }
  for (auto& [w, n] : inflight) clock_.wait(w);
}

bool ParamGatherer::in_flight() const {
  for (const auto& w : work_)
    if (w && !w->is_completed()) return true;
  return false;
}

void ParamGatherer::park(std::vector<Buffer>& keep) {
  for (auto& b : gathered_) keep.push_back(std::move(b));
  for (auto& b : staging_) keep.push_back(std::move(b));
}

}  // namespace zerodp::zero
