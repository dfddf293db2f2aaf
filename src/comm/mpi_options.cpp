#include "comm/mpi_options.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::comm {

const char* progress_mode_name(ProgressMode m) { return m == ProgressMode::kPoll ? "poll" : "block"; }

ProgressMode parse_progress_mode(std::string_view name) {
  if (name == "poll") return ProgressMode::kPoll;
  if (name == "block" || name == "blocking") return ProgressMode::kBlocking;
  throw UsageError(fmt::format("unknown progress mode '{}' (expected poll or block)", name));
}

namespace {

long env_long(const char* var, long fallback, long lo, long hi) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  ZDP_REQUIRE(*end == '\0' && x >= lo && x <= hi, "environment variable {}='{}': expected an integer in [{}, {}]",
              var, v, lo, hi);
  return x;
}

}  // namespace

MpiOptions MpiOptions::from_env() {
  MpiOptions o;
  if (const char* p = std::getenv("ZERODP_COMM_PROGRESS"); p != nullptr && *p != '\0') {
    try {
      o.progress = parse_progress_mode(p);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("environment variable ZERODP_COMM_PROGRESS: {}", e.what()));
    }
  }
  o.max_in_flight = static_cast<int>(env_long("ZERODP_COMM_MAX_IN_FLIGHT", o.max_in_flight, 1, 1024));
  o.max_poll_sleep_us = static_cast<int>(env_long("ZERODP_COMM_POLL_SLEEP_US", o.max_poll_sleep_us, 0, 100000));
  o.error_grace_s = static_cast<double>(env_long("ZERODP_COMM_ERROR_GRACE_S", 10, 1, 3600));
  o.worker_nice = static_cast<int>(env_long("ZERODP_COMM_NICE", o.worker_nice, -20, 19));
  o.max_count = static_cast<size_t>(env_long("ZERODP_COMM_MAX_COUNT", static_cast<long>(o.max_count), 1,
                                             static_cast<long>(o.max_count)));
  o.ranks_per_host_for_testing = static_cast<int>(env_long("ZERODP_TEST_RANKS_PER_HOST", 0, 0, 1 << 20));
  return o;
}

}  // namespace zerodp::comm
