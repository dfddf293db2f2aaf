// The metrics file of docs/reference/metrics.md (JSON Lines, written by rank 0): one "step" object per optimizer
// step, then one "memory" and one "traffic" object per rank. The memory object's peak_bytes and
// live_bytes are the device tier; host_bytes and nvme_bytes (docs/reference/metrics.md#tiers) the other tiers' peaks.
// The file is written as <path>.partial while the run goes on and renamed over <path> at the end, so
// a run that fails leaves an earlier metrics file intact.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/communicator.h"
#include "core/memory.h"

namespace zerodp::train {

struct StepRecord {
  int64_t step = 0;
  double loss = 0, grad_norm = 0, lr = 0;
  int64_t tokens = 0;  // W·G·B·T
  double ms = 0;
  // Extensions (docs/reference/metrics.md allows more keys):
  bool skipped = false;       // the step changed nothing (docs/reference/command-line.md#faults: "skipped": true)
  int64_t skipped_steps = 0;  // skipped steps of the run so far, this one included
  double loss_scale = 1;
  double comm_wait_ms = 0;
};

// One rank's end-of-run ledgers, as gathered to rank 0.
struct RankLedgers {
  int rank = 0;
  MemorySnapshot memory;  // every tier
  std::array<uint64_t, comm::kNumCollectiveKinds> bytes_sent{};
  std::array<uint64_t, comm::kNumCollectiveKinds> bytes_sent_inter_group{};  // of those, across shard groups
  std::array<uint64_t, comm::kNumCollectiveKinds> bytes_sent_inter_host{};   // sent to other hosts (comm/host_layout.h)
};

nlohmann::json step_json(const StepRecord& r);
// {"event":"eval","step":s,"val_loss":x,"tokens":n} (docs/reference/metrics.md#eval): the validation loss after s
// optimizer steps (the eval that follows 0-based step s − 1), over n = K·T tokens.
nlohmann::json eval_json(int64_t steps_done, double val_loss, uint64_t tokens);
// {"event":"memory","rank":r,"peak_bytes":{...},"live_bytes":{...},"host_bytes":{...},"nvme_bytes":{...}}:
// peak and live bytes of the device tier, and the peak bytes of the host and nvme tiers, each keyed by
// category and "total".
nlohmann::json memory_json(const RankLedgers& l);
nlohmann::json traffic_json(const RankLedgers& l);

// The 64-bit words one rank's ledgers travel as in gather_ledgers: for each tier (device, host, nvme)
// live bytes per category, peak bytes per category, live total, peak total; then bytes sent per
// collective.
constexpr size_t kLedgerWords = kNumMemTiers * (2 * kNumMemCategories + 2) + 3 * comm::kNumCollectiveKinds;
std::array<uint64_t, kLedgerWords> ledger_words(const RankLedgers& l);
RankLedgers ledgers_from_words(int rank, const uint64_t* words);

// Collects every rank's memory and traffic ledgers on every rank (collective). The gathering's own
// traffic is not recorded in the training ledger.
std::vector<RankLedgers> gather_ledgers(comm::Communicator& comm);

// A text file written a line at a time as <path>.partial and renamed over <path> by commit(), so a
// failed run leaves an earlier <path> intact and what it wrote in <path>.partial. An empty path or
// active false: a file that writes nothing. `what` names it in errors ("metrics file").
class PartialLineFile {
 public:
  PartialLineFile(std::string path, bool active, std::string what);
  ~PartialLineFile();
  PartialLineFile(const PartialLineFile&) = delete;
  PartialLineFile& operator=(const PartialLineFile&) = delete;

  bool active() const { return file_ != nullptr; }
  void write_line(std::string_view line);  // and flushed
  // Flushes, fsyncs and renames <path>.partial to <path>.
  void commit();

 private:
  std::string path_, partial_, what_;
  std::FILE* file_ = nullptr;
};

class MetricsWriter {
 public:
  // An empty path or a rank other than 0 makes a writer that writes nothing.
  MetricsWriter(std::string path, bool active) : file_(std::move(path), active, "metrics file") {}

  void write(const nlohmann::json& record) {
    if (file_.active()) file_.write_line(record.dump());
  }
  // Flushes, fsyncs and renames <path>.partial to <path>.
  void commit() { file_.commit(); }

 private:
  PartialLineFile file_;
};

// The --log-csv file (rank 0): a header, then one row per optimizer step,
//     step,tokens,loss,grad_norm,lr,ms,val_loss,val_tokens
// with tokens the tokens trained up to and including the step (the trainer passes (s + 1)·W·G·B·T,
// so a resumed run counts from step 0 too), and val_loss and val_tokens (the tokens evaluated) filled
// on the row of the step an evaluation ran after, empty on the others. Numbers are written in their
// shortest exact form ("0.001", "1e-05"), ms with 3 decimals. Like MetricsWriter: written as
// <path>.partial and renamed over <path> by commit(), so a failed run leaves an earlier file intact
// (and its rows, the last step's included, in <path>.partial).
//
// A step's row is held back until the next record_step() (or commit()), so that the trainer can call,
// for the 0-based step s,
//     csv.record_step(rec, (s + 1) * tokens_per_step);   // after the step
//     csv.record_eval(s, val_loss, eval_tokens);          // after the eval that follows it, if one ran
// in that order, and the eval lands on step s's row. (record_eval takes the 0-based step, the CSV's
// step column; eval_json's "step" is the steps done, s + 1.)
class CsvLog {
 public:
  // An empty path or a rank other than 0 makes a log that writes nothing.
  CsvLog(std::string path, bool active);
  ~CsvLog();

  static constexpr const char* kHeader = "step,tokens,loss,grad_norm,lr,ms,val_loss,val_tokens";

  void record_step(const StepRecord& r, int64_t tokens_trained);
  // The validation loss over `tokens` tokens measured after the 0-based step `step`. On that step's row
  // when it is the latest recorded one (a second eval there replaces the first); otherwise on a row of
  // its own with only step, val_loss and val_tokens (an eval before this run's first step: -1 before
  // any training, or the step before a resumed run's first).
  void record_eval(int64_t step, double val_loss, int64_t tokens);
  // Writes the held row, flushes, fsyncs and renames <path>.partial to <path>.
  void commit();

 private:
  struct Row {
    int64_t step = 0;
    std::optional<StepRecord> train;
    int64_t tokens_trained = 0;
    std::optional<double> val_loss;
    int64_t val_tokens = 0;
  };
  void flush_held();

  PartialLineFile file_;
  std::optional<Row> held_;
};

}  // namespace zerodp::train
