#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::train {

nlohmann::json step_json(const StepRecord& r) {
  nlohmann::json j = {{"event", "step"}, {"step", r.step},   {"loss", r.loss}, {"grad_norm", r.grad_norm},
                      {"lr", r.lr},      {"tokens", r.tokens}, {"ms", r.ms}};
  j["skipped"] = r.skipped;
  j["skipped_steps"] = r.skipped_steps;
  j["loss_scale"] = r.loss_scale;
  j["comm_wait_ms"] = r.comm_wait_ms;
  return j;
}

nlohmann::json memory_json(const RankLedgers& l) {
  nlohmann::json peak = nlohmann::json::object(), live = nlohmann::json::object();
  for (MemCategory c : kAllMemCategories) {
    peak[mem_category_name(c)] = l.memory.peak_of(c);
    live[mem_category_name(c)] = l.memory.live_of(c);
  }
  peak["total"] = l.memory.peak_total;
  live["total"] = l.memory.live_total;
  return {{"event", "memory"}, {"rank", l.rank}, {"peak_bytes", peak}, {"live_bytes", live}};
}

nlohmann::json traffic_json(const RankLedgers& l) {
  nlohmann::json sent = nlohmann::json::object();
  for (size_t k = 0; k < comm::kNumCollectiveKinds; ++k)
    sent[comm::collective_name(static_cast<comm::CollectiveKind>(k))] = l.bytes_sent[k];
  return {{"event", "traffic"}, {"rank", l.rank}, {"bytes_sent", sent}};
}

std::vector<RankLedgers> gather_ledgers(comm::Communicator& comm) {
  // Flatten to 64-bit words: memory live/peak per category and totals, then bytes per collective.
  constexpr size_t kWords = 2 * kNumMemCategories + 2 + comm::kNumCollectiveKinds;
  std::array<uint64_t, kWords> mine{};
  const MemorySnapshot m = MemoryLedger::global().snapshot();
  size_t k = 0;
  for (size_t i = 0; i < kNumMemCategories; ++i) mine[k++] = m.live[i];
  for (size_t i = 0; i < kNumMemCategories; ++i) mine[k++] = m.peak[i];
  mine[k++] = m.live_total;
  mine[k++] = m.peak_total;
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i)
    mine[k++] = comm.traffic().bytes_sent(static_cast<comm::CollectiveKind>(i));

  const int W = comm.size();
  std::vector<uint64_t> all(kWords * static_cast<size_t>(W));
  {
    comm::UntrackedTraffic untracked(comm);
    // All-gather moves bytes without arithmetic: 64-bit words travel as pairs of 32-bit ones.
    comm.all_gather(mine.data(), all.data(), 2 * kWords, DType::kF32);
  }

  std::vector<RankLedgers> out(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    const uint64_t* w = all.data() + static_cast<size_t>(r) * kWords;
    RankLedgers& l = out[static_cast<size_t>(r)];
    l.rank = r;
    size_t j = 0;
    for (size_t i = 0; i < kNumMemCategories; ++i) l.memory.live[i] = w[j++];
    for (size_t i = 0; i < kNumMemCategories; ++i) l.memory.peak[i] = w[j++];
    l.memory.live_total = w[j++];
    l.memory.peak_total = w[j++];
    for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) l.bytes_sent[i] = w[j++];
  }
  return out;
}

MetricsWriter::MetricsWriter(std::string path, bool active) : path_(std::move(path)) {
  if (!active || path_.empty()) return;
  partial_ = path_ + ".partial";
  file_ = std::fopen(partial_.c_str(), "w");
  if (file_ == nullptr)
    throw UsageError(fmt::format("cannot write metrics file '{}': {}", partial_, std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) std::fclose(file_);  // not committed: <path> keeps what it had
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (file_ == nullptr) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw RuntimeFailure(fmt::format("writing metrics file '{}': {}", partial_, std::strerror(errno)));
}

void MetricsWriter::commit() {
  if (file_ == nullptr) return;
  const bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok || std::rename(partial_.c_str(), path_.c_str()) != 0)
    throw RuntimeFailure(fmt::format("finishing metrics file '{}': {}", path_, std::strerror(errno)));
}

}  // namespace zerodp::train
