#include "zero/state_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/memory.h"
#include "device/host_access.h"

namespace zerodp::zero {

void load_states(ModelStates& st, const StateSource& source, bool with_states) {
  device::Device& dev = st.dev();
  // The elements of unit u this rank reads: all of them at stage 0, its own range otherwise.
  auto reads = [&st](int u) {
    const UnitShard& s = st.unit(u);
    return st.stage() == 0 ? std::pair<size_t, size_t>{0, s.numel} : std::pair<size_t, size_t>{s.own_begin, s.own_end};
  };
  // The chunk is no larger than the largest range a rank reads, sized alike on every rank (a shard, though
  // the last rank's ranges end short), as the planner sizes it.
  size_t largest = 0;
  for (int u = 0; u < st.num_units(); ++u)
    largest = std::max(largest, st.stage() == 0 ? st.unit(u).numel : std::min(st.unit(u).shard, st.unit(u).numel));
  const size_t chunk_bytes = std::min(kWorkChunk, largest) * sizeof(float);
  // The source writes into host memory (vals); on a GPU each chunk is copied up into dvals, which
  // the conversion into the parameters reads. On the CPU, vals is both.
  Buffer tmp = device::allocate_host_visible(dev, chunk_bytes, MemCategory::kAct);
  Buffer tmp_device = dev.host_addressable() ? Buffer() : dev.allocate(chunk_bytes, MemCategory::kAct);
  float* vals = tmp.as<float>();
  float* dvals = dev.host_addressable() ? vals : tmp_device.as<float>();
  for (int u = 0; u < st.num_units(); ++u) {
    const auto [keep_b, keep_e] = reads(u);
    const auto [b, e] = st.update_range(u);
    StatesInHost in_host(st, u);  // NVMe offload: the unit's masters and states, written back below
    char* nvme_shard = st.param_on_nvme(u) && keep_b < keep_e ? st.param_swap()->stage(u) : nullptr;
    for (size_t c = keep_b; c < keep_e; c += kWorkChunk) {
      const size_t n = std::min(kWorkChunk, keep_e - c);
      source(-1, u, c, n, vals);
      if (nvme_shard) {
        convert(vals, DType::kF32, nvme_shard + (c - keep_b) * dtype_size(st.param_dtype()), st.param_dtype(), n);  // host memory
      } else {
        device::copy_from_host(dev, dvals, vals, n * sizeof(float));  // (nothing on the CPU: the same bytes)
        dev.convert(dvals, DType::kF32, st.param_at(u, c), st.param_dtype(), n);
      }
      // The masters from where this chunk's values are: dvals was not filled for a shard on NVMe (whose
      // masters are host memory: NVMe parameters need the optimizer offloaded).
      const float* from = nvme_shard ? vals : dvals;
      const size_t mb = std::max(b, c), me = std::min(e, c + n);
      if (st.has_master() && mb < me) dev.copy(st.weights_at(u, mb), from + (mb - c), (me - mb) * sizeof(float));
    }
    if (with_states && b < e) {
      const bool fp32 = st.state_dtype() == DType::kF32;
      for (int k = 0; k < st.num_states(); ++k) {
        if (dev.host_addressable() && fp32) {
          source(k, u, b, e - b, st.state_at(k, u, b));
          continue;
        }
        for (size_t c = b; c < e; c += kWorkChunk) {
          const size_t n = std::min(kWorkChunk, e - c);
          source(k, u, c, n, vals);
          if (fp32) {
            device::copy_from_host(dev, st.state_at(k, u, c), vals, n * sizeof(float));
            continue;
          }
          // bf16 states: rounded to nearest, so that the fp32 values a save widened come back exactly.
          device::copy_from_host(dev, dvals, vals, n * sizeof(float));  // (nothing on the CPU)
          dev.convert(dvals, DType::kF32, st.state_bytes(k, u, c), st.state_dtype(), n);
        }
      }
    }
    in_host.write_back();
    if (nvme_shard) st.param_swap()->commit(u);
  }
  // The last conversions read dvals: they finish before it is freed (a no-op on the CPU).
  dev.synchronize();
  if (st.param_swap()) st.param_swap()->flush();
}

void consolidate_weights(ModelStates& st, comm::Communicator& comm, bool root,
                         const std::function<void(int unit, const float* data)>& sink) {
  device::Device& dev = st.dev();
  // Full weights are already on every rank for fp32 stages 0-2 (the parameters, equal to the host
  // masters of an offloaded run), for 16-bit stage 0 (the masters) and for the bf16 parameters that are
  // the weights themselves (bf16_master_weights) of stages 0-2: widened to fp32 for the sink.
  comm::UntrackedTraffic untracked(comm);
  for (int u = 0; u < st.num_units(); ++u) {
    const UnitShard& s = st.unit(u);
    if ((!st.mixed() || !st.has_master()) && st.param_whole(u)) {
      if (root)
        sink(u, device::HostRead::widened(dev, st.param_at(u, 0), st.param_dtype(), s.numel, MemCategory::kGathered)
                    .as<float>());
      continue;
    }
    if (st.mixed() && st.has_master() && st.stage() == 0) {
      if (root) sink(u, device::HostRead(dev, st.weights_at(u, 0), s.numel * sizeof(float), MemCategory::kGathered)
                            .as<float>());
      continue;
    }
    // Gathered in host memory (a GPU communicator sends host buffers through MPI).
    Buffer full = device::allocate_host_visible(dev, s.padded * sizeof(float), MemCategory::kGathered);
    Buffer mine = device::allocate_host_visible(dev, s.shard * sizeof(float), MemCategory::kComm);
    std::memset(mine.data(), 0, mine.size());
    if (s.own_begin < s.own_end) {
      StatesInHost in_host(st, u);  // NVMe offload: the unit's masters, read from the file
      device::copy_widened_to_host(dev, mine.as<float>(), st.weights_bytes(u, s.own_begin), st.weights_dtype(),
                                   s.own_end - s.own_begin);
    }
    comm.all_gather(mine.data(), full.data(), s.shard, DType::kF32);
    if (root) sink(u, full.as<float>());
  }
}

bool all_weights_finite(ModelStates& st, comm::Communicator& comm) {
  // A sum of squares in double is finite exactly when every element is (a float's square is below
  // 2^256, far from double's range), and the device computes it where the weights are.
  float bad = 0.0f;
  for (int u = 0; u < st.num_units() && bad == 0.0f; ++u) {
    const auto [b, e] = st.update_range(u);
    if (b >= e) continue;
    StatesInHost in_host(st, u);  // NVMe offload: the unit's masters, read from the file
    device::Device& where = st.offload() ? st.dev().host() : st.dev();  // the masters' memory: host with offload
    if (!std::isfinite(where.sum_squares(st.weights_bytes(u, b), st.weights_dtype(), e - b))) bad = 1.0f;
  }
  comm::UntrackedTraffic untracked(comm);
  comm.all_reduce(&bad, 1, DType::kF32, comm::ReduceOp::kMax);
  return bad == 0.0f;
}

}  // namespace zerodp::zero
