#include "zero/model_states.h"

#include <algorithm>

#include "core/error.h"
#include "optim/optimizer.h"

namespace zerodp::zero {

ModelStates::ModelStates(const model::ParamLayout& l, const ShardLayout& s, const EngineConfig& cfg)
    : layout(l),
      sh(s),
      dev(cfg.dev()),
      W(s.world()),
      r(s.rank()),
      stage(cfg.zero.stage),
      pdt(cfg.precision.dtype),
      gdt(cfg.precision.fp32_grad_accum || pdt == DType::kF32 ? DType::kF32 : pdt),
      mixed(pdt != DType::kF32),
      offload(cfg.zero.offload_optimizer != Offload::kNone),
      has_master(mixed || offload),
      offload_param(cfg.zero.offload_param != Offload::kNone),
      num_states(static_cast<int>(optim::state_floats_per_param(cfg.optimizer))),
      optim_nvme(cfg.zero.offload_optimizer == Offload::kNvme),
      param_nvme(cfg.zero.offload_param == Offload::kNvme),
      sub_group(optim_nvme ? nvme_sub_group(static_cast<size_t>(cfg.zero.sub_group_size))
                           : static_cast<size_t>(cfg.zero.sub_group_size)) {
  const int U = l.num_units();
  size_t acc = 0;
  for (int u = 0; u < U; ++u) {
    shard_off.push_back(acc);
    acc += sh.unit(u).shard;
  }
  const size_t full = sh.total_padded(), shard = sh.total_shard();
  // With parameter offload the shards in host memory are numbered apart, in param_host: every sharded
  // unit's (cpu), or those that fit in what is left of max_in_cpu elements, in unit order (nvme).
  size_t param_elems = 0, host_elems = 0, nvme_units = 0;
  size_t in_cpu_left = static_cast<size_t>(cfg.zero.param_max_in_cpu);
  for (int u = 0; u < U; ++u) {
    const bool whole = stage <= 2 || sh.unit(u).numel < static_cast<size_t>(cfg.zero.stage3_param_persistence_threshold);
    const size_t n = sh.unit(u).shard;
    const bool in_host = offload_param && !whole && (!param_nvme || n <= in_cpu_left);
    if (in_host && param_nvme) in_cpu_left -= n;
    param_whole.push_back(whole);
    param_in_host.push_back(in_host);
    const bool in_file = param_nvme && !whole && !in_host;  // numbered by param_swap
    nvme_units += in_file;
    size_t& elems = in_host ? host_elems : param_elems;
    param_off.push_back(in_file ? 0 : elems);
    if (!in_file) elems += whole ? sh.unit(u).padded : n;
  }
  param_store = cfg.dev().allocate(param_elems * dtype_size(pdt), MemCategory::kParam);
  cfg.dev().fill_zero(param_store.data(), param_store.size());
  if (host_elems > 0) {
    param_host = cfg.dev().allocate_host(host_elems * dtype_size(pdt), MemCategory::kParam);
    cfg.dev().host().fill_zero(param_host.data(), param_host.size());
  }
  // What offload moves lives in host memory: same bytes, same categories, the other tier.
  auto allocate = [&](size_t bytes, MemCategory c) {
    return offload ? cfg.dev().allocate_host(bytes, c) : cfg.dev().allocate(bytes, c);
  };
  device::Device& where = offload ? cfg.dev().host() : cfg.dev();  // zeroes them where they are
  if (has_master && !optim_nvme) {
    master = allocate((stage == 0 ? full : shard) * sizeof(float), MemCategory::kMaster);
    where.fill_zero(master.data(), master.size());
  }
  grad_store = cfg.dev().allocate((stage <= 1 ? full : shard) * dtype_size(gdt), MemCategory::kGrad);
  cfg.dev().fill_zero(grad_store.data(), grad_store.size());
  const size_t state_elems = stage == 0 ? full : shard;
  // Optimizer state: AdamW's m and v, or SGD's momentum buffer (none without momentum).
  if (num_states >= 1 && !optim_nvme) {
    opt_m = allocate(state_elems * sizeof(float), MemCategory::kOptim);
    where.fill_zero(opt_m.data(), opt_m.size());
  }
  if (num_states >= 2 && !optim_nvme) {
    opt_v = allocate(state_elems * sizeof(float), MemCategory::kOptim);
    where.fill_zero(opt_v.data(), opt_v.size());
  }
  // fp32 whatever the gradient's dtype: 16-bit gradients are widened on their way down.
  if (offload)
    grad_staging = cfg.dev().allocate_host(grad_staging_buffers() * std::min(sub_group, shard) * sizeof(float),
                                           MemCategory::kGrad);
  if (optim_nvme) {
    ZDP_CHECK(!cfg.nvme_run_dir.empty(), "NVMe optimizer offload without the run's directory");
    swap = std::make_unique<OptimizerSwap>(cfg.nvme_run_dir, r, shard, num_states, sub_group,
                                           static_cast<int>(cfg.zero.optimizer_buffer_count), cfg.dev());
  }
  if (nvme_units > 0) {
    ZDP_CHECK(!cfg.nvme_run_dir.empty() && offload, "NVMe parameter offload without the run's directory or "
              "the optimizer offloaded");
    std::vector<size_t> bytes;
    for (int u = 0; u < U; ++u) bytes.push_back(param_on_nvme(u) ? sh.unit(u).shard * dtype_size(pdt) : 0);
    param_swap = std::make_unique<ParamSwap>(cfg.nvme_run_dir, r, bytes, static_cast<int>(cfg.zero.param_buffer_count), cfg.dev());
  }
}

// The unit's slot of the shard-sized states, [shard_off, shard_off + shard), widened to whole blocks.
StatesInHost::StatesInHost(ModelStates& st, int u) : st_(st) {
  if (!st_.swap) return;
  const uint64_t begin = st_.shard_off[u] * sizeof(float), end = begin + st_.unit(u).shard * sizeof(float);
  const uint64_t first = begin / io::kIoBlock * io::kIoBlock;
  st_.swap->bring_in(first, io::align_up_block(end) - first, st_.master, st_.opt_m, st_.opt_v);
  st_.window_first = first / sizeof(float);
}

StatesInHost::~StatesInHost() {
  if (!st_.swap) return;
  st_.swap->put_back(st_.window_first * sizeof(float), st_.master, st_.opt_m, st_.opt_v, false);
  st_.window_first = 0;
}

void StatesInHost::write_back() {
  if (st_.swap) st_.swap->put_back(st_.window_first * sizeof(float), st_.master, st_.opt_m, st_.opt_v, true);
}

}  // namespace zerodp::zero
