#include "zero/param_swap.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace zerodp::zero {

ParamSwap::ParamSwap(const std::string& dir, int rank, const std::vector<size_t>& shard_bytes, int read_buffers,
                     device::Device& dev)
    : bytes_(shard_bytes), dev_(dev) {
  ZDP_CHECK(read_buffers >= 1, "{} parameter read buffers", read_buffers);
  size_t largest = 0;
  uint64_t at = 0;
  for (size_t b : bytes_) {
    offset_.push_back(at);
    at += io::align_up_block(b);
    total_ += b;
    largest = std::max(largest, b);
  }
  file_ = std::make_unique<io::DirectFile>(dir, "rank" + std::to_string(rank) + "-param", at);
  MemoryLedger::global().on_alloc(MemTier::kNvme, MemCategory::kParam, total_);
  for (int k = 0; k < read_buffers; ++k) read_.push_back(dev_.allocate_host(largest, MemCategory::kParam));
  reading_.assign(read_.size(), 0);
  read_busy_.assign(read_.size(), false);
  read_drain_.resize(read_.size());
  for (Buffer& w : write_) w = dev_.allocate_host(largest, MemCategory::kParam);
}

ParamSwap::~ParamSwap() {
  for (auto& e : read_drain_)  // the device's copies out of the read buffers, before they are freed
    if (e) e->wait();
  file_.reset();  // waits for the writes in flight (from write_, still alive), closes
  MemoryLedger::global().on_free(MemTier::kNvme, MemCategory::kParam, total_);
}

int ParamSwap::read_async(int u) {
  ZDP_CHECK(bytes_[u] > 0, "unit {} has no offloaded shard", u);
  ZDP_CHECK(staged_unit_ < 0, "unit {} read while unit {} is being rewritten", u, staged_unit_);
  flush();  // a unit written a moment ago is read as written
  // A free buffer whose last copy out has run; else the one whose copy was queued first, after it has.
  int take = -1;
  for (size_t k = 0; k < read_.size() && take < 0; ++k)
    if (!read_busy_[k] && drained(k)) take = static_cast<int>(k);
  for (size_t k = 0; k < read_.size() && take < 0; ++k)
    if (!read_busy_[k]) take = static_cast<int>(k);
  if (take >= 0) {
    if (read_drain_[take]) read_drain_[take]->wait();
    read_drain_[take].reset();
    read_busy_[take] = true;
    reading_[take] = file_->read_async(read_[take].data(), bytes_[u], offset_[u]);
    return take;
  }
  ZDP_CHECK(false, "unit {}: all {} parameter read buffers are in use", u, read_.size());
  return -1;
}

bool ParamSwap::drained(size_t k) const { return !read_drain_[k] || read_drain_[k]->done(); }

bool ParamSwap::read_buffer_free() const {
  for (size_t k = 0; k < read_.size(); ++k)
    if (!read_busy_[k] && drained(k)) return true;
  return false;
}

const char* ParamSwap::wait_read(int slot) {
  file_->wait(reading_[slot]);
  reading_[slot] = 0;
  return read_[slot].as<char>();
}

void ParamSwap::release_read(int slot, std::unique_ptr<device::Event> copied_out) {
  wait_read(slot);
  read_drain_[slot] = std::move(copied_out);
  read_busy_[slot] = false;
}

char* ParamSwap::stage(int u) {
  ZDP_CHECK(bytes_[u] > 0 && staged_unit_ < 0, "unit {} staged while unit {} is", u, staged_unit_);
  const int b = next_;
  next_ = (next_ + 1) % kParamSwapWriteBuffers;
  file_->wait(pending_[b]);  // the buffer's previous unit is written
  pending_[b] = 0;
  staged_unit_ = u;
  staged_buf_ = b;
  // Every element the owner updates is written by the caller; the shard's padding stays zero.
  std::memset(write_[b].data(), 0, bytes_[u]);
  return write_[b].as<char>();
}

void ParamSwap::commit(int u) {
  ZDP_CHECK(staged_unit_ == u, "unit {} committed while unit {} is staged", u, staged_unit_);
  pending_[staged_buf_] = file_->write_async(write_[staged_buf_].data(), bytes_[u], offset_[u]);
  staged_unit_ = -1;
}

void ParamSwap::flush() {
  for (io::DirectFile::Ticket& t : pending_) {
    file_->wait(t);
    t = 0;
  }
}

}  // namespace zerodp::zero
