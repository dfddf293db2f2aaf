// The end-of-run records of docs/reference/metrics.md and the memory table: the memory event's device tier
// (peak_bytes, live_bytes) and the host and nvme tiers' peaks (host_bytes, nvme_bytes), the flat
// words the ledgers travel as between ranks, and the tier columns of the table.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/memory.h"
#include "train/metrics.h"
#include "train/report.h"

namespace zerodp::train {
namespace {

// Every word different, so that a word read into the wrong place shows.
RankLedgers distinct_ledgers(int rank) {
  RankLedgers l;
  l.rank = rank;
  uint64_t next = 1000 * static_cast<uint64_t>(rank + 1);
  for (MemTier t : kAllMemTiers) {
    MemoryUsage& u = l.memory.tier(t);
    for (size_t i = 0; i < kNumMemCategories; ++i) u.live[i] = ++next;
    for (size_t i = 0; i < kNumMemCategories; ++i) u.peak[i] = ++next;
    u.live_total = ++next;
    u.peak_total = ++next;
  }
  for (uint64_t& b : l.bytes_sent) b = ++next;
  for (uint64_t& b : l.bytes_sent_inter_group) b = ++next;
  for (uint64_t& b : l.bytes_sent_inter_host) b = ++next;
  return l;
}

std::set<std::string> keys_of(const nlohmann::json& j) {
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  return keys;
}

std::set<std::string> category_keys() {
  std::set<std::string> keys = {"total"};
  for (MemCategory c : kAllMemCategories) keys.insert(mem_category_name(c));
  return keys;
}

TEST(MemoryEvent, HasEveryTierWithEveryCategory) {
  const RankLedgers l = distinct_ledgers(2);
  const nlohmann::json j = memory_json(l);
  EXPECT_EQ(j.at("event"), "memory");
  EXPECT_EQ(j.at("rank"), 2);
  EXPECT_EQ(keys_of(j), (std::set<std::string>{"event", "rank", "peak_bytes", "live_bytes", "host_bytes",
                                               "nvme_bytes"}));
  for (const char* field : {"peak_bytes", "live_bytes", "host_bytes", "nvme_bytes"})
    EXPECT_EQ(keys_of(j.at(field)), category_keys()) << field;
  const MemorySnapshot& m = l.memory;
  for (MemCategory c : kAllMemCategories) {
    const char* k = mem_category_name(c);
    // peak_bytes and live_bytes: the device tier, as before tiers; host_bytes, nvme_bytes: those tiers' peaks.
    EXPECT_EQ(j["peak_bytes"][k].get<uint64_t>(), m.peak_of(c)) << k;
    EXPECT_EQ(j["live_bytes"][k].get<uint64_t>(), m.live_of(c)) << k;
    EXPECT_EQ(j["host_bytes"][k].get<uint64_t>(), m.host.peak_of(c)) << k;
    EXPECT_EQ(j["nvme_bytes"][k].get<uint64_t>(), m.nvme.peak_of(c)) << k;
  }
  EXPECT_EQ(j["peak_bytes"]["total"].get<uint64_t>(), m.peak_total);
  EXPECT_EQ(j["live_bytes"]["total"].get<uint64_t>(), m.live_total);
  EXPECT_EQ(j["host_bytes"]["total"].get<uint64_t>(), m.host.peak_total);
  EXPECT_EQ(j["nvme_bytes"]["total"].get<uint64_t>(), m.nvme.peak_total);
}

TEST(MemoryEvent, HostAndNvmeAreZerosWithoutOffload) {
  MemoryLedger ledger;
  ledger.on_alloc(MemCategory::kParam, 4096);
  ledger.on_alloc(MemCategory::kAct, 512);
  RankLedgers l;
  l.memory = ledger.snapshot();
  const nlohmann::json j = memory_json(l);
  EXPECT_EQ(j["peak_bytes"]["total"].get<uint64_t>(), 4608u);
  for (const char* field : {"host_bytes", "nvme_bytes"}) {
    ASSERT_EQ(keys_of(j.at(field)), category_keys()) << field;
    for (const auto& [k, v] : j.at(field).items()) EXPECT_EQ(v.get<uint64_t>(), 0u) << field << "." << k;
  }
}

TEST(MemoryEvent, LedgerWordsRoundTripEveryTier) {
  const RankLedgers a = distinct_ledgers(3);
  const std::array<uint64_t, kLedgerWords> w = ledger_words(a);
  const RankLedgers b = ledgers_from_words(3, w.data());
  EXPECT_EQ(b.rank, 3);
  for (MemTier t : kAllMemTiers) {
    const MemoryUsage &x = a.memory.tier(t), &y = b.memory.tier(t);
    EXPECT_EQ(x.live, y.live) << mem_tier_name(t);
    EXPECT_EQ(x.peak, y.peak) << mem_tier_name(t);
    EXPECT_EQ(x.live_total, y.live_total) << mem_tier_name(t);
    EXPECT_EQ(x.peak_total, y.peak_total) << mem_tier_name(t);
  }
  EXPECT_EQ(a.bytes_sent, b.bytes_sent);
  EXPECT_EQ(a.bytes_sent_inter_group, b.bytes_sent_inter_group);
  EXPECT_EQ(a.bytes_sent_inter_host, b.bytes_sent_inter_host);
  // Every word is used: the distinct values all arrive, none twice.
  EXPECT_EQ(std::set<uint64_t>(w.begin(), w.end()).size(), kLedgerWords);
}

// The rows of `table` whose second field is `name` ("total", "states", a category).
std::vector<std::string> rows_named(const std::string& table, const std::string& name) {
  std::vector<std::string> rows;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string rank, second;
    if (fields >> rank >> second && second == name) rows.push_back(line);
  }
  return rows;
}

TEST(MemoryReport, TierColumnsOnlyWhenATierWasUsed) {
  std::array<uint64_t, kNumMemCategories> stage0{};
  stage0[static_cast<size_t>(MemCategory::kOptim)] = 8192;
  std::vector<RankLedgers> ledgers(2);
  for (int r = 0; r < 2; ++r) {
    MemorySnapshot& m = ledgers[static_cast<size_t>(r)].memory;
    ledgers[static_cast<size_t>(r)].rank = r;
    m.live[static_cast<size_t>(MemCategory::kOptim)] = m.peak[static_cast<size_t>(MemCategory::kOptim)] = 4096;
    m.live_total = m.peak_total = 4096;
  }
  const std::string device_only = format_memory_report(ledgers, stage0, 1);
  EXPECT_EQ(device_only.find("host"), std::string::npos) << device_only;
  EXPECT_EQ(device_only.find("nvme"), std::string::npos) << device_only;
  for (const std::string& row : rows_named(device_only, "states")) EXPECT_NE(row.find("0.50x"), std::string::npos);

  // Rank 1 keeps 3 MiB of master weights in host memory: a host column on every rank's rows, none for nvme.
  MemoryUsage& host = ledgers[1].memory.host;
  host.peak[static_cast<size_t>(MemCategory::kMaster)] = host.peak_total = uint64_t{3} << 20;
  const std::string with_host = format_memory_report(ledgers, stage0, 1);
  EXPECT_NE(with_host.find("host peak"), std::string::npos) << with_host;
  EXPECT_EQ(with_host.find("nvme"), std::string::npos) << with_host;
  const std::vector<std::string> master = rows_named(with_host, "master");
  ASSERT_EQ(master.size(), 1u) << with_host;  // rank 1's only: rank 0 held no master bytes anywhere
  EXPECT_NE(master[0].find("3.0 MiB"), std::string::npos) << master[0];
  const std::vector<std::string> totals = rows_named(with_host, "total");
  ASSERT_EQ(totals.size(), 2u);
  EXPECT_NE(totals[0].find("0 B"), std::string::npos) << totals[0];  // rank 0's host total
  EXPECT_NE(totals[1].find("3.0 MiB"), std::string::npos) << totals[1];
  // The ratio to stage 0 stays the last column.
  const std::vector<std::string> states = rows_named(with_host, "states");
  ASSERT_EQ(states.size(), 2u);
  for (const std::string& row : states) EXPECT_EQ(row.substr(row.find_last_not_of(' ') - 4, 5), "0.50x") << row;
  // Every row of the table has the same columns: the header and the category rows line up.
  const std::vector<std::string> optim = rows_named(with_host, "optim");
  ASSERT_EQ(optim.size(), 2u);
  EXPECT_EQ(optim[0].size(), optim[1].size());

  // An nvme tier used as well: both columns, nvme after host.
  ledgers[0].memory.nvme.peak[static_cast<size_t>(MemCategory::kOptim)] = ledgers[0].memory.nvme.peak_total = 1;
  const std::string both = format_memory_report(ledgers, stage0, 1);
  ASSERT_NE(both.find("host peak"), std::string::npos);
  ASSERT_NE(both.find("nvme peak"), std::string::npos);
  EXPECT_LT(both.find("host peak"), both.find("nvme peak"));
}

}  // namespace
}  // namespace zerodp::train
