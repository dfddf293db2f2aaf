#include "train/metrics.h"

#include <cerrno>
#include <cstring>
#include <exception>
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

nlohmann::json eval_json(int64_t steps_done, double val_loss, uint64_t tokens) {
  return {{"event", "eval"}, {"step", steps_done}, {"val_loss", val_loss}, {"tokens", tokens}};
}

namespace {

// {"param":n,...,"act":n,"total":n}: one number per category of a tier, and the tier's total.
nlohmann::json by_category(const std::array<uint64_t, kNumMemCategories>& bytes, uint64_t total) {
  nlohmann::json j = nlohmann::json::object();
  for (MemCategory c : kAllMemCategories) j[mem_category_name(c)] = bytes[static_cast<size_t>(c)];
  j["total"] = total;
  return j;
}

}  // namespace

nlohmann::json memory_json(const RankLedgers& l) {
  const MemorySnapshot& m = l.memory;
  // Peaks for the host and nvme tiers: what offloading needed there at most, as peak_bytes says for
  // the device. Without offload both are all zeros.
  return {{"event", "memory"},
          {"rank", l.rank},
          {"peak_bytes", by_category(m.peak, m.peak_total)},
          {"live_bytes", by_category(m.live, m.live_total)},
          {"host_bytes", by_category(m.host.peak, m.host.peak_total)},
          {"nvme_bytes", by_category(m.nvme.peak, m.nvme.peak_total)}};
}

nlohmann::json traffic_json(const RankLedgers& l) {
  nlohmann::json sent = nlohmann::json::object(), inter = nlohmann::json::object(), hosts = nlohmann::json::object();
  for (size_t k = 0; k < comm::kNumCollectiveKinds; ++k) {
    const char* name = comm::collective_name(static_cast<comm::CollectiveKind>(k));
    sent[name] = l.bytes_sent[k];
    inter[name] = l.bytes_sent_inter_group[k];
    hosts[name] = l.bytes_sent_inter_host[k];
  }
  return {{"event", "traffic"},
          {"rank", l.rank},
          {"bytes_sent", sent},
          {"bytes_sent_inter_group", inter},
          {"bytes_sent_inter_host", hosts}};
}

std::array<uint64_t, kLedgerWords> ledger_words(const RankLedgers& l) {
  std::array<uint64_t, kLedgerWords> w{};
  size_t k = 0;
  for (MemTier t : kAllMemTiers) {
    const MemoryUsage& u = l.memory.tier(t);
    for (size_t i = 0; i < kNumMemCategories; ++i) w[k++] = u.live[i];
    for (size_t i = 0; i < kNumMemCategories; ++i) w[k++] = u.peak[i];
    w[k++] = u.live_total;
    w[k++] = u.peak_total;
  }
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) w[k++] = l.bytes_sent[i];
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) w[k++] = l.bytes_sent_inter_group[i];
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) w[k++] = l.bytes_sent_inter_host[i];
  return w;
}

RankLedgers ledgers_from_words(int rank, const uint64_t* w) {
  RankLedgers l;
  l.rank = rank;
  size_t k = 0;
  for (MemTier t : kAllMemTiers) {
    MemoryUsage& u = l.memory.tier(t);
    for (size_t i = 0; i < kNumMemCategories; ++i) u.live[i] = w[k++];
    for (size_t i = 0; i < kNumMemCategories; ++i) u.peak[i] = w[k++];
    u.live_total = w[k++];
    u.peak_total = w[k++];
  }
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) l.bytes_sent[i] = w[k++];
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) l.bytes_sent_inter_group[i] = w[k++];
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) l.bytes_sent_inter_host[i] = w[k++];
  return l;
}

std::vector<RankLedgers> gather_ledgers(comm::Communicator& comm) {
  RankLedgers self;
  self.memory = MemoryLedger::global().snapshot();
  for (size_t i = 0; i < comm::kNumCollectiveKinds; ++i) {
    self.bytes_sent[i] = comm.traffic().bytes_sent(static_cast<comm::CollectiveKind>(i));
    self.bytes_sent_inter_group[i] = comm.traffic().bytes_sent_inter_group(static_cast<comm::CollectiveKind>(i));
    self.bytes_sent_inter_host[i] = comm.traffic().bytes_sent_inter_host(static_cast<comm::CollectiveKind>(i));
  }
  const std::array<uint64_t, kLedgerWords> mine = ledger_words(self);

  const int W = comm.size();
  std::vector<uint64_t> all(kLedgerWords * static_cast<size_t>(W));
  {
    comm::UntrackedTraffic untracked(comm);
    comm.all_gather_bytes(mine.data(), all.data(), kLedgerWords * sizeof(uint64_t));
  }

  std::vector<RankLedgers> out;
  out.reserve(static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) out.push_back(ledgers_from_words(r, all.data() + static_cast<size_t>(r) * kLedgerWords));
  return out;
}

PartialLineFile::PartialLineFile(std::string path, bool active, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
  if (!active || path_.empty()) return;
  partial_ = path_ + ".partial";
  file_ = std::fopen(partial_.c_str(), "w");
  if (file_ == nullptr) throw UsageError(fmt::format("cannot write {} '{}': {}", what_, partial_, std::strerror(errno)));
}

PartialLineFile::~PartialLineFile() {
  if (file_ != nullptr) std::fclose(file_);  // not committed: <path> keeps what it had
}

void PartialLineFile::write_line(std::string_view line) {
  const std::string text = std::string(line) + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    throw RuntimeFailure(fmt::format("writing {} '{}': {}", what_, partial_, std::strerror(errno)));
}

void PartialLineFile::commit() {
  if (file_ == nullptr) return;
  const bool ok = std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
  std::fclose(file_);
  file_ = nullptr;
  if (!ok || std::rename(partial_.c_str(), path_.c_str()) != 0)
    throw RuntimeFailure(fmt::format("finishing {} '{}': {}", what_, path_, std::strerror(errno)));
}

CsvLog::CsvLog(std::string path, bool active) : file_(std::move(path), active, "--log-csv file") {
  if (file_.active()) file_.write_line(kHeader);
}

CsvLog::~CsvLog() {
  if (!file_.active()) return;
  // Not committed (the run failed): <path> keeps what it had; <path>.partial gets the held row too,
  // the failed step's, as the metrics file has it.
  try {
    flush_held();
  } catch (const std::exception&) {  // a destructor does not throw; the run's own error is the one to see
  }
}

void CsvLog::flush_held() {
  if (!held_) return;
  const Row& r = *held_;
  std::string line = std::to_string(r.step);
  if (r.train)
    line += fmt::format(",{},{},{},{},{:.3f}", r.tokens_trained, r.train->loss, r.train->grad_norm, r.train->lr,
                        r.train->ms);
  else
    line += ",,,,,";
  if (r.val_loss)
    line += fmt::format(",{},{}", *r.val_loss, r.val_tokens);
  else
    line += ",,";
  held_.reset();
  file_.write_line(line);
}

void CsvLog::record_step(const StepRecord& r, int64_t tokens_trained) {
  if (!file_.active()) return;
  flush_held();
  held_ = Row{r.step, r, tokens_trained, std::nullopt, 0};
}

void CsvLog::record_eval(int64_t step, double val_loss, int64_t tokens) {
  if (!file_.active()) return;
  if (!held_ || held_->step != step) {
    flush_held();
    held_ = Row{step, std::nullopt, 0, std::nullopt, 0};
  }
  held_->val_loss = val_loss;
  held_->val_tokens = tokens;
}

void CsvLog::commit() {
  if (!file_.active()) return;
  flush_held();
  file_.commit();
}

}  // namespace zerodp::train
