#include "device/transfer_queue.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace zerodp::device {

class TransferEvent final : public Event {
 public:
  TransferEvent(TransferQueue& q, uint64_t ticket) : q_(q), ticket_(ticket) {}
  bool done() const override { return q_.reached(ticket_); }
  void wait() override { q_.wait_for(ticket_); }

 private:
  TransferQueue& q_;
  const uint64_t ticket_;
};

TransferQueue::TransferQueue(bool inline_work) : inline_(inline_work) {}

TransferQueue::~TransferQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  if (worker_.joinable()) worker_.join();
}

bool TransferQueue::inline_from_environment() {
  const char* v = std::getenv("ZERODP_TRANSFER_THREAD");
  return v != nullptr && std::strcmp(v, "0") == 0;
}

void TransferQueue::submit(std::function<void()> work) {
  if (inline_) {
    work();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    pending_.push_back(std::move(work));
    ++submitted_;
  }
  work_ready_.notify_one();
}

void TransferQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stopping, and nothing left
    std::function<void()> work = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    work();
    lock.lock();
    ++completed_;
    work_done_.notify_all();
  }
}

bool TransferQueue::reached(uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ >= ticket;
}

void TransferQueue::wait_for(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  work_done_.wait(lock, [&] { return completed_ >= ticket; });
}

std::unique_ptr<Event> TransferQueue::record() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_unique<TransferEvent>(*this, submitted_);
}

void TransferQueue::drain() {
  if (inline_) return;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = submitted_;
  }
  wait_for(ticket);
}

}  // namespace zerodp::device
