// Logging with spdlog: every line carries the rank ("[rank 2] ..."); info and below are printed by
// rank 0 only unless all ranks are asked for (--log-all-ranks or ZERODP_LOG_ALL_RANKS=1). Warnings
// and errors are printed by every rank.
#pragma once

#include <spdlog/spdlog.h>

namespace zerodp::log {

// Call once the rank is known (before MPI is up, rank 0 of 1 is assumed).
void init(int rank, int world_size, bool all_ranks = false);
void set_verbose(bool debug);
int rank();

// spdlog's levels, on the logger init() set up.
template <typename... Args>
void info(spdlog::format_string_t<Args...> f, Args&&... args) { spdlog::info(f, std::forward<Args>(args)...); }
template <typename... Args>
void debug(spdlog::format_string_t<Args...> f, Args&&... args) { spdlog::debug(f, std::forward<Args>(args)...); }
template <typename... Args>
void warn(spdlog::format_string_t<Args...> f, Args&&... args) { spdlog::warn(f, std::forward<Args>(args)...); }
template <typename... Args>
void error(spdlog::format_string_t<Args...> f, Args&&... args) { spdlog::error(f, std::forward<Args>(args)...); }

}  // namespace zerodp::log
