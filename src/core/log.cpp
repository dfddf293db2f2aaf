#include "core/log.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace zerodp::log {

namespace {
int g_rank = 0;
bool g_all_ranks = false;
bool g_debug = false;

void apply_level() {
  const bool printing = g_rank == 0 || g_all_ranks;
  spdlog::set_level(printing ? (g_debug ? spdlog::level::debug : spdlog::level::info)
                             : spdlog::level::warn);
}
}  // namespace

void init(int rank, int world_size, bool all_ranks) {
  g_rank = rank;
  const char* env = std::getenv("ZERODP_LOG_ALL_RANKS");
  g_all_ranks = all_ranks || (env != nullptr && std::strcmp(env, "0") != 0 && *env != '\0');
  // Logs go to stderr so that stdout stays clean for --json output and tables.
  spdlog::drop("zerodp");
  auto logger = spdlog::stderr_color_mt("zerodp");
  spdlog::set_default_logger(logger);
  if (world_size > 1)
    spdlog::set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}] [%^%l%$] %v", rank));
  else
    spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  apply_level();
}

void set_verbose(bool debug) {
  g_debug = debug;
  apply_level();
}

int rank() { return g_rank; }

}  // namespace zerodp::log
