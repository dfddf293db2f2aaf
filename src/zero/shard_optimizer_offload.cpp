// The optimizer step with ZeRO-Offload: the rank's shard, seen as DeepSpeed flattens its partition
// (the units' shards end to end, the index of the shard-sized buffers), is walked in sub-groups of
// sub_group_size elements. For each sub-group: its gradient comes down from the device's gradient
// storage into a host staging buffer (widened to fp32 on the way when stored in 16 bits), the
// update runs on the host's fp32 weights and states, and the updated weights go back up into the
// device's parameters (rounded to the compute dtype, or copied in fp32 runs). The host's work runs on
// dev.host() (on a GPU, the CPU's kernels on page-locked memory). The moves down and up
// run on the device's transfer queue, overlapping the updates of the neighbouring sub-groups. The update is the same
// element-wise arithmetic on the same values as without offload, so the results are the same bits.
// With the optimizer on NVMe the sub-group's weights and states are in a slot of OptimizerSwap,
// read ahead of the update and written back after it (zero/optimizer_swap.h, docs/design.md).
#include <algorithm>
#include <chrono>
#include <vector>

#include "optim/optimizer.h"
#include "zero/shard_optimizer.h"
#include "zero/sharding.h"

namespace zerodp::zero {

namespace {

// Calls piece(u, b, e) for each unit u whose owned range [b, e) (unit elements, non-empty) meets the
// shard positions [first, last), clipped to them, in unit order.
template <class Fn>
void for_each_piece(const ModelStates& st, size_t first, size_t last, Fn&& piece) {
  for (int u = 0; u < st.num_units(); ++u) {
    const UnitShard& s = st.unit(u);
    const size_t at = st.shard_offset(u);  // where the unit's owned range starts in the shard
    const size_t lo = std::max(first, at), hi = std::min(last, at + (s.own_end - s.own_begin));
    if (lo < hi) piece(u, s.own_begin + (lo - at), s.own_begin + (hi - at));
  }
}

}  // namespace

void ShardOptimizer::update_offloaded(double lr, float grad_scale, int64_t t) {
  const bool adamw = cfg_.optimizer.kind == optim::OptimizerKind::kAdamW;
  const optim::AdamWParams adam = optim::adamw_params(cfg_.optimizer, lr);
  const optim::SGDParams sgd = optim::sgd_params(cfg_.optimizer, lr);
  device::Device& dev = cfg_.dev();
  device::Device& host = dev.host();  // the update and the conversions between host buffers run there
  const size_t total = states_.shards().total_shard();
  const size_t groups = (total + states_.sub_group() - 1) / states_.sub_group();
  // Sub-group g's gradient is staged in buffer g % K (K = 2 with two sub-groups or more): g+1's comes
  // down on the transfer queue while g updates, and g's weights go up there while g+1 updates.
  const size_t K = states_.grad_staging_buffers();
  std::vector<std::unique_ptr<device::Event>> down(K);
  // NVMe: sub-group g's states are in slot g % B. Reads run up to B-1 sub-groups ahead; a slot is
  // read into only once its previous sub-group's write and the transfer up of its weights are done.
  OptimizerSwap* swap = states_.optimizer_swap();
  const int B = swap ? swap->slots() : 1;
  std::vector<std::unique_ptr<device::Event>> up(B);
  const auto started = std::chrono::steady_clock::now();
  const uint64_t moved_before = swap ? swap->file().stats().bytes_read + swap->file().stats().bytes_written : 0;
  std::vector<bool> requested(swap ? groups : 0, false);
  auto request = [&](size_t g) {
    const int s = static_cast<int>(g % B);
    swap->wait(s);  // the write of the slot's previous sub-group
    if (up[s]) up[s]->wait();
    swap->read_async(g, s);
    requested[g] = true;
  };
  // Sub-group g: shard elements [first(g), last(g)).
  auto first_of = [&](size_t g) { return g * states_.sub_group(); };
  auto last_of = [&](size_t g) { return std::min(total, (g + 1) * states_.sub_group()); };
  // Where unit u's element i of sub-group g lands in its staging buffer.
  auto staged = [&](size_t g, int u, size_t i) {
    return states_.grad_staging(g % K) + (states_.shard_index(u, i) - g * states_.sub_group());
  };
  // Down: sub-group g's gradient into its staging buffer, in fp32, on the transfer queue.
  auto bring_down = [&](size_t g) {
    for_each_piece(states_, first_of(g), last_of(g), [&](int u, size_t b, size_t e) {
      dev.transfer(states_.grad_at(u, b), states_.grad_dtype(), staged(g, u, b), DType::kF32, e - b);
    });
    down[g % K] = dev.record_transfer();
  };
  if (swap)
    for (size_t g = 0; g + 1 < static_cast<size_t>(B) && g < groups; ++g) request(g);
  if (groups > 0) bring_down(0);
  for (size_t g = 0; g < groups; ++g) {
    const size_t first = first_of(g), last = last_of(g);
    const int slot = static_cast<int>(g % B);
    // The staging buffer of g+1 was last read by g-1's update, which has returned.
    if (g + 1 < groups) bring_down(g + 1);
    // Where its weights and states are: the host copies of the whole shard, or the sub-group's slot.
    auto weights = [&](int u, size_t i) {
      return swap ? swap->master(slot) + (states_.shard_index(u, i) - first) : states_.weights_at(u, i);
    };
    auto state = [&](int k, int u, size_t i) {
      return swap ? swap->state(slot, k) + (states_.shard_index(u, i) - first) : states_.state_at(k, u, i);
    };
    if (swap) {
      if (!requested[g]) request(g);
      swap->wait(slot);
    }
    down[g % K]->wait();
    // The update, on the host, tensor by tensor (weight decay depends on the tensor).
    for_each_piece(states_, first, last, [&](int u, size_t b, size_t e) {
      for (const Segment& seg : unit_segments(states_.layout(), u, b, e)) {
        const size_t c = seg.begin, n = seg.count;
        float* m = states_.num_states() >= 1 ? state(0, u, c) : nullptr;
        float* grad = staged(g, u, c);
        if (adamw)
          host.adamw_update(weights(u, c), grad, m, state(1, u, c), n, adam, t, seg.decay, grad_scale);
        else
          host.sgd_update(weights(u, c), grad, m, n, sgd, t, seg.decay, grad_scale);
      }
    });
    // Up: the updated weights into the parameters, in the compute dtype: into the device's parameters
    // on the transfer queue; into host memory (parameter offload) here, and a shard on NVMe through its
    // host write buffer, written out once its last piece is in.
    for_each_piece(states_, first, last, [&](int u, size_t b, size_t e) {
      if (!states_.param_on_nvme(u)) {
        if (states_.param_on_host(u))
          host.convert(weights(u, b), DType::kF32, states_.param_at(u, b), states_.param_dtype(), e - b);
        else
          dev.transfer(weights(u, b), DType::kF32, states_.param_at(u, b), states_.param_dtype(), e - b);
        return;
      }
      const UnitShard& s = states_.unit(u);
      ParamSwap& file = *states_.param_swap();
      char* shard = file.staging(u) ? file.stage_pointer() : file.stage(u);
      host.convert(weights(u, b), DType::kF32, shard + (b - s.own_begin) * dtype_size(states_.param_dtype()), states_.param_dtype(), e - b);
      if (e == s.own_end) file.commit(u);
    });
    up[slot] = dev.record_transfer();
    if (swap) {
      swap->write_async(g, slot);
      if (B >= 2 && g + B - 1 < groups) request(g + B - 1);
    }
  }
  dev.record_transfer()->wait();  // every parameter up before anyone reads them
  if (states_.param_swap()) states_.param_swap()->flush();  // every shard written before the next gather reads it
  if (swap) {
    for (int s = 0; s < B; ++s) swap->wait(s);
    offload_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    offload_io_bytes_ += swap->file().stats().bytes_read + swap->file().stats().bytes_written - moved_before;
  }
}

}  // namespace zerodp::zero
