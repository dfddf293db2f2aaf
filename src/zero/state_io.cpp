#include "zero/state_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/memory.h"

namespace zerodp::zero {

void load_states(ModelStates& st, const StateSource& source, bool with_states) {
  // The elements of unit u this rank reads: all of them at stage 0, its own range otherwise.
  auto reads = [&st](int u) {
    const UnitShard& s = st.unit(u);
    return st.stage == 0 ? std::pair<size_t, size_t>{0, s.numel} : std::pair<size_t, size_t>{s.own_begin, s.own_end};
  };
  size_t largest = 0;
  for (int u = 0; u < st.num_units(); ++u) largest = std::max(largest, reads(u).second - reads(u).first);
  Buffer tmp(std::min(kWorkChunk, largest) * sizeof(float), MemCategory::kAct);
  float* vals = tmp.as<float>();
  for (int u = 0; u < st.num_units(); ++u) {
    const auto [keep_b, keep_e] = reads(u);
    const auto [b, e] = st.update_range(u);
    StatesInHost in_host(st, u);  // NVMe offload: the unit's masters and states, written back below
    char* nvme_shard = st.param_on_nvme(u) && keep_b < keep_e ? st.param_swap->stage(u) : nullptr;
    for (size_t c = keep_b; c < keep_e; c += kWorkChunk) {
      const size_t n = std::min(kWorkChunk, keep_e - c);
      source(-1, u, c, n, vals);
      convert(vals, DType::kF32, nvme_shard ? nvme_shard + (c - keep_b) * dtype_size(st.pdt) : st.param_at(u, c),
              st.pdt, n);
      const size_t mb = std::max(b, c), me = std::min(e, c + n);
      if (st.has_master && mb < me) std::memcpy(st.weights_at(u, mb), vals + (mb - c), (me - mb) * sizeof(float));
    }
    if (with_states && b < e)
      for (int k = 0; k < st.num_states; ++k) source(k, u, b, e - b, st.state_at(k, u, b));
    in_host.write_back();
    if (nvme_shard) st.param_swap->commit(u);
  }
  if (st.param_swap) st.param_swap->flush();
}

void consolidate_weights(ModelStates& st, comm::Communicator& comm, bool root,
                         const std::function<void(int unit, const float* data)>& sink) {
  // Full fp32 weights are already on every rank for fp32 stages 0-2 (the parameters, equal to the
  // host masters of an offloaded run) and for 16-bit stage 0 (the masters).
  comm::UntrackedTraffic untracked(comm);
  for (int u = 0; u < st.num_units(); ++u) {
    const UnitShard& s = st.unit(u);
    if (!st.mixed && st.param_whole[u]) {
      if (root) sink(u, reinterpret_cast<const float*>(st.param_at(u, 0)));
      continue;
    }
    if (st.mixed && st.stage == 0) {
      if (root) sink(u, st.weights_at(u, 0));
      continue;
    }
    Buffer full(s.padded * sizeof(float), MemCategory::kGathered);
    Buffer mine(s.shard * sizeof(float), MemCategory::kComm);
    mine.zero();
    if (s.own_begin < s.own_end) {
      StatesInHost in_host(st, u);  // NVMe offload: the unit's masters, read from the file
      std::memcpy(mine.data(), st.weights_at(u, s.own_begin), (s.own_end - s.own_begin) * sizeof(float));
    }
    comm.all_gather(mine.data(), full.data(), s.shard, DType::kF32);
    if (root) sink(u, full.as<float>());
  }
}

bool all_weights_finite(ModelStates& st, comm::Communicator& comm) {
  float bad = 0.0f;
  for (int u = 0; u < st.num_units() && bad == 0.0f; ++u) {
    const auto [b, e] = st.update_range(u);
    StatesInHost in_host(st, u);  // NVMe offload: the unit's masters, read from the file
    const float* w = b < e ? st.weights_at(u, b) : nullptr;
    for (size_t i = 0; i < e - b; ++i)
      if (!std::isfinite(w[i])) {
        bad = 1.0f;
        break;
      }
  }
  comm::UntrackedTraffic untracked(comm);
  comm.all_reduce(&bad, 1, DType::kF32, comm::ReduceOp::kMax);
  return bad == 0.0f;
}

}  // namespace zerodp::zero
