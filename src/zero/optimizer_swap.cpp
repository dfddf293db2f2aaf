#include "zero/optimizer_swap.h"

#include <algorithm>

#include "core/error.h"

namespace zerodp::zero {

OptimizerSwap::OptimizerSwap(const std::string& dir, int rank, size_t shard, int num_states, size_t sub_group,
                             int buffer_count, device::Device& dev)
    : shard_(shard), num_states_(num_states), sub_(sub_group), dev_(dev) {
  ZDP_CHECK(sub_ % 1024 == 0 && sub_ > 0, "NVMe sub-group of {} elements: not whole 4 KiB blocks", sub_);
  ZDP_REQUIRE(buffer_count >= 1, "offload_optimizer.buffer_count must be at least 1, got {}", buffer_count);
  const uint64_t bytes = region(1 + num_states_);
  file_ = std::make_unique<io::DirectFile>(dir, "rank" + std::to_string(rank) + "-optim", bytes);
  MemoryLedger& ledger = MemoryLedger::global();
  ledger.on_alloc(MemTier::kNvme, MemCategory::kMaster, shard_ * sizeof(float));
  ledger.on_alloc(MemTier::kNvme, MemCategory::kOptim, shard_ * num_states_ * sizeof(float));
  const int slots = static_cast<int>(offload_nvme_slots(static_cast<uint64_t>(buffer_count), shard_, sub_));
  const size_t elems = std::min(sub_, shard_);
  for (int s = 0; s < slots; ++s) {
    slot_master_.push_back(dev_.allocate_host(elems * sizeof(float), MemCategory::kMaster));
    auto& states = slot_state_.emplace_back();
    for (int k = 0; k < num_states_; ++k) states.push_back(dev_.allocate_host(elems * sizeof(float), MemCategory::kOptim));
  }
  pending_.resize(slots);
}

OptimizerSwap::~OptimizerSwap() {
  file_.reset();  // waits for what is in flight (into the slots, still alive), closes
  MemoryLedger& ledger = MemoryLedger::global();
  ledger.on_free(MemTier::kNvme, MemCategory::kMaster, shard_ * sizeof(float));
  ledger.on_free(MemTier::kNvme, MemCategory::kOptim, shard_ * num_states_ * sizeof(float));
}

void OptimizerSwap::read_async(size_t g, int s) {
  const size_t n = count(g) * sizeof(float), at = g * sub_ * sizeof(float);
  pending_[s].push_back(file_->read_async(master(s), n, region(0) + at));
  for (int k = 0; k < num_states_; ++k) pending_[s].push_back(file_->read_async(state(s, k), n, region(1 + k) + at));
}

void OptimizerSwap::write_async(size_t g, int s) {
  const size_t n = count(g) * sizeof(float), at = g * sub_ * sizeof(float);
  pending_[s].push_back(file_->write_async(master(s), n, region(0) + at));
  for (int k = 0; k < num_states_; ++k) pending_[s].push_back(file_->write_async(state(s, k), n, region(1 + k) + at));
}

void OptimizerSwap::wait(int s) {
  for (io::DirectFile::Ticket t : pending_[s]) file_->wait(t);
  pending_[s].clear();
}

void OptimizerSwap::bring_in(uint64_t offset, uint64_t bytes, Buffer& master, Buffer& m, Buffer& v) {
  ZDP_CHECK(offset % io::kIoBlock == 0 && bytes % io::kIoBlock == 0 && offset + bytes <= region(1),
            "states window of {} bytes at {}: not whole blocks of the region", bytes, offset);
  Buffer* host[3] = {&master, &m, &v};
  std::vector<io::DirectFile::Ticket> t;
  for (int k = 0; k <= num_states_; ++k) {
    *host[k] = dev_.allocate_host(bytes, k == 0 ? MemCategory::kMaster : MemCategory::kOptim);
    t.push_back(file_->read_async(host[k]->data(), bytes, region(k) + offset));
  }
  for (auto x : t) file_->wait(x);
}

void OptimizerSwap::put_back(uint64_t offset, Buffer& master, Buffer& m, Buffer& v, bool write) {
  Buffer* host[3] = {&master, &m, &v};
  if (write) {
    std::vector<io::DirectFile::Ticket> t;
    for (int k = 0; k <= num_states_; ++k)
      t.push_back(file_->write_async(host[k]->data(), host[k]->size(), region(k) + offset));
    for (auto x : t) file_->wait(x);
  }
  for (Buffer* b : host) b->release();
}

}  // namespace zerodp::zero
