#include "zero/model_states.h"

#include <algorithm>

#include "core/error.h"
#include "optim/optimizer.h"

namespace zerodp::zero {

ModelStates::ModelStates(const model::ParamLayout& l, const ShardLayout& s, const EngineConfig& cfg)
    : layout_(l),
      shards_(s),
      dev_(cfg.dev()),
      stage_(cfg.zero.stage),
      param_dtype_(cfg.precision.dtype),
      grad_dtype_(cfg.precision.grad_store_dtype()),
      mixed_(param_dtype_ != DType::kF32),
      offload_(cfg.zero.offload_optimizer != Offload::kNone),
      has_master_(cfg.precision.fp32_masters() || offload_),
      num_states_(static_cast<int>(optim::state_floats_per_param(cfg.optimizer))),
      state_dtype_(cfg.precision.state_dtype()),
      optim_nvme_(cfg.zero.offload_optimizer == Offload::kNvme),
      param_nvme_(cfg.zero.offload_param == Offload::kNvme),
      sub_group_(offload_sub_group(static_cast<uint64_t>(cfg.zero.sub_group_size), optim_nvme_)) {
  const int U = l.num_units();
  const int r = rank();
  size_t acc = 0;
  for (int u = 0; u < U; ++u) {
    shard_off_.push_back(acc);
    acc += shards_.unit(u).shard;
  }
  const size_t full = shards_.total_padded(), shard = shards_.total_shard();
  // With parameter offload the shards in host memory are numbered apart, in param_host_: every sharded
  // unit's (cpu), or those that fit in what is left of max_in_cpu elements, in unit order (nvme).
  const bool offload_param = cfg.zero.offload_param != Offload::kNone;
  size_t param_elems = 0, host_elems = 0, nvme_units = 0;
  size_t in_cpu_left = static_cast<size_t>(cfg.zero.param_max_in_cpu);
  for (int u = 0; u < U; ++u) {
    const bool whole =
        stage_ <= 2 || shards_.unit(u).numel < static_cast<size_t>(cfg.zero.stage3_param_persistence_threshold);
    const size_t n = shards_.unit(u).shard;
    const bool in_host = offload_param && !whole && (!param_nvme_ || n <= in_cpu_left);
    if (in_host && param_nvme_) in_cpu_left -= n;
    param_whole_.push_back(whole);
    param_in_host_.push_back(in_host);
    const bool in_file = param_nvme_ && !whole && !in_host;  // numbered by param_swap_
    nvme_units += in_file;
    size_t& elems = in_host ? host_elems : param_elems;
    param_off_.push_back(in_file ? 0 : elems);
    if (!in_file) elems += whole ? shards_.unit(u).padded : n;
  }
  param_store_ = cfg.dev().allocate(param_elems * dtype_size(param_dtype_), MemCategory::kParam);
  cfg.dev().fill_zero(param_store_.data(), param_store_.size());
  if (host_elems > 0) {
    param_host_ = cfg.dev().allocate_host(host_elems * dtype_size(param_dtype_), MemCategory::kParam);
    cfg.dev().host().fill_zero(param_host_.data(), param_host_.size());
  }
  // What offload moves lives in host memory: same bytes, same categories, the other tier.
  auto allocate = [&](size_t bytes, MemCategory c) {
    return offload_ ? cfg.dev().allocate_host(bytes, c) : cfg.dev().allocate(bytes, c);
  };
  device::Device& where = offload_ ? cfg.dev().host() : cfg.dev();  // zeroes them where they are
  if (has_master_ && !optim_nvme_) {
    master_ = allocate((stage_ == 0 ? full : shard) * sizeof(float), MemCategory::kMaster);
    where.fill_zero(master_.data(), master_.size());
  }
  grad_store_ = cfg.dev().allocate((stage_ <= 1 ? full : shard) * dtype_size(grad_dtype_), MemCategory::kGrad);
  cfg.dev().fill_zero(grad_store_.data(), grad_store_.size());
  const size_t state_elems = stage_ == 0 ? full : shard;
  // Optimizer state: AdamW's m and v, or SGD's momentum buffer (none without momentum); fp32 or bf16.
  ZDP_CHECK(state_dtype_ == DType::kF32 || !offload_, "bf16 optimizer states with the optimizer offloaded");
  if (num_states_ >= 1 && !optim_nvme_) {
    opt_m_ = allocate(state_elems * dtype_size(state_dtype_), MemCategory::kOptim);
    where.fill_zero(opt_m_.data(), opt_m_.size());
  }
  if (num_states_ >= 2 && !optim_nvme_) {
    opt_v_ = allocate(state_elems * dtype_size(state_dtype_), MemCategory::kOptim);
    where.fill_zero(opt_v_.data(), opt_v_.size());
  }
  // fp32 whatever the gradient's dtype: 16-bit gradients are widened on their way down.
  if (offload_)
    grad_staging_ = cfg.dev().allocate_host(grad_staging_buffers() * std::min(sub_group_, shard) * sizeof(float),
                                            MemCategory::kGrad);
  if (optim_nvme_) {
    ZDP_CHECK(!cfg.nvme_run_dir.empty(), "NVMe optimizer offload without the run's directory");
    swap_ = std::make_unique<OptimizerSwap>(cfg.nvme_run_dir, r, shard, num_states_, sub_group_,
                                            static_cast<int>(cfg.zero.optimizer_buffer_count), cfg.dev());
  }
  if (nvme_units > 0) {
    ZDP_CHECK(!cfg.nvme_run_dir.empty() && offload_, "NVMe parameter offload without the run's directory or "
              "the optimizer offloaded");
    std::vector<size_t> bytes;
    for (int u = 0; u < U; ++u) bytes.push_back(param_on_nvme(u) ? shards_.unit(u).shard * dtype_size(param_dtype_) : 0);
    param_swap_ = std::make_unique<ParamSwap>(cfg.nvme_run_dir, r, bytes, static_cast<int>(cfg.zero.param_buffer_count),
                                              cfg.dev());
  }
}

ModelStates::Footprint ModelStates::footprint() const {
  return {param_store_.size(), param_host_.size(), grad_store_.size(), master_.size(),
          opt_m_.size(),       opt_v_.size(),      grad_staging_.size()};
}

void ModelStates::park(std::vector<Buffer>& keep) {
  for (Buffer* b : {&param_store_, &param_host_, &master_, &grad_store_, &opt_m_, &opt_v_, &grad_staging_})
    keep.push_back(std::move(*b));
}

StatesInHost::StatesInHost(ModelStates& st, int u) : states_(st) {
  if (!states_.swap_) return;
  const StatesWindow window = states_window(states_.shard_off_[u], states_.unit(u).shard);
  states_.swap_->bring_in(window.first, window.bytes, states_.master_, states_.opt_m_, states_.opt_v_);
  states_.window_first_ = window.first / sizeof(float);
}

StatesInHost::~StatesInHost() {
  if (!states_.swap_) return;
  states_.swap_->put_back(states_.window_first_ * sizeof(float), states_.master_, states_.opt_m_, states_.opt_v_, false);
  states_.window_first_ = 0;
}

void StatesInHost::write_back() {
  if (states_.swap_) states_.swap_->put_back(states_.window_first_ * sizeof(float), states_.master_, states_.opt_m_, states_.opt_v_, true);
}

}  // namespace zerodp::zero
