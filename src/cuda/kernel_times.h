// GPU time by kernel-table entry: the host side of $ZERODP_GPU_PROFILE (device/cuda_device.cpp).
//
// Why zerodp times itself: on the lent GPU machines Nsight Systems makes no report and Nsight Compute
// replays every kernel (one GPT-2 124M step took 92 s under it, against 43 ms), so neither gives a
// step's breakdown within a lease. The CUDA device instead records a pair of events around each entry
// of its kernel tables (linear_forward, attention_backward, ...) and each device operation (convert,
// adamw_update, sum_squares, ...) on the compute stream, and hands the elapsed times here; report()
// ranks the entries by total time and says how much of the GPU's span no entry covered (idle, or work
// on other streams: collectives, transfers).
//
// Host logic only, so that the CPU test suite covers it (tests/cuda/).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zerodp::cuda {

class KernelTimes {
 public:
  struct Row {
    std::string name;
    uint64_t calls = 0;
    double total_ms = 0;
  };

  void add(std::string_view name, double ms) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) it = by_name_.emplace(std::string(name), Row{std::string(name), 0, 0.0}).first;
    ++it->second.calls;
    it->second.total_ms += ms;
    total_ms_ += ms;
    ++calls_;
  }

  // Largest total first; equal totals by name, so that the order does not depend on the map's.
  std::vector<Row> rows() const {
    std::vector<Row> r;
    r.reserve(by_name_.size());
    for (const auto& [name, row] : by_name_) r.push_back(row);
    std::stable_sort(r.begin(), r.end(), [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
    return r;
  }
  double total_ms() const { return total_ms_; }
  uint64_t calls() const { return calls_; }
  bool empty() const { return calls_ == 0; }

  // The table; span_ms: from the first timed entry's start to the last one's end on the GPU (0: not
  // known, no coverage line).
  std::string report(double span_ms) const {
    std::string s = fmt::format("GPU time by entry ($ZERODP_GPU_PROFILE): {} calls, {:.3f} ms timed\n", calls_,
                                total_ms_);
    s += fmt::format("  {:<34} {:>8} {:>11} {:>10} {:>7}\n", "entry", "calls", "total ms", "us/call", "share");
    for (const Row& r : rows()) {
      const double share = total_ms_ > 0 ? 100.0 * r.total_ms / total_ms_ : 0.0;
      s += fmt::format("  {:<34} {:>8} {:>11.3f} {:>10.1f} {:>6.1f}%\n", r.name, r.calls, r.total_ms,
                       1000.0 * r.total_ms / static_cast<double>(r.calls), share);
    }
    if (span_ms > 0) {
      const double covered = std::min(100.0, 100.0 * total_ms_ / span_ms);
      s += fmt::format(
          "  the entries cover {:.3f} of the {:.3f} ms from the first one's start to the last one's end "
          "({:.1f}%); the rest the compute stream was idle (host work, waits) or ran untimed work\n",
          std::min(total_ms_, span_ms), span_ms, covered);
    }
    return s;
  }

 private:
  std::map<std::string, Row, std::less<>> by_name_;
  double total_ms_ = 0;
  uint64_t calls_ = 0;
};

}  // namespace zerodp::cuda
