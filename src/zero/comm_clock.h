// Waiting for a collective, with the time this rank spent blocked on it added up (the metrics'
// comm_wait_ms): a handle already complete costs nothing.
#pragma once

#include <chrono>

#include "comm/communicator.h"

namespace zerodp::zero {

struct CommClock {
  double wait_ms = 0;

  void wait(const comm::WorkPtr& w) {
    if (!w) return;
    if (w->is_completed()) {
      w->wait();
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    w->wait();
    wait_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

}  // namespace zerodp::zero
