// The CPU device's transfer queue: the stand-in for a GPU's copy stream. Work submitted to it runs
// in submission order on one worker thread of its own, beside the caller's compute, so that moving
// data between the device and host tiers (offloading's gradients down, parameters up) overlaps the
// compute as a GPU's copy stream does. record() is an event after everything submitted so far.
//
// With ZERODP_TRANSFER_THREAD=0 (or inline = true) the work runs on the calling thread at submit()
// and every event is already complete: the same results, no overlap (for machines with no core to
// spare for it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "device/device.h"

namespace zerodp::device {

class TransferQueue {
 public:
  explicit TransferQueue(bool inline_work);
  ~TransferQueue();  // finishes everything submitted, then stops the worker
  TransferQueue(const TransferQueue&) = delete;
  TransferQueue& operator=(const TransferQueue&) = delete;

  // Whether ZERODP_TRANSFER_THREAD asks for inline work ("0"); anything else, or unset, is threaded.
  static bool inline_from_environment();

  void submit(std::function<void()> work);
  std::unique_ptr<Event> record();
  void drain();  // waits until everything submitted has run
  bool is_inline() const { return inline_; }

 private:
  friend class TransferEvent;
  void run();
  bool reached(uint64_t ticket) const;  // whether the first `ticket` submissions have run
  void wait_for(uint64_t ticket);

  const bool inline_;
  mutable std::mutex mu_;
  std::condition_variable work_ready_, work_done_;
  std::deque<std::function<void()>> pending_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // started at the first submit()
};

}  // namespace zerodp::device
