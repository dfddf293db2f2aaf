// The warmup-stable-decay schedule as `zerodp train` takes it (--lr-schedule wsd, --decay-steps,
// --decay-type, --min-lr; scheduler type "WSD" in --config) and the --log-csv file (train/metrics.h
// CsvLog): its rows, the eval columns, and its atomic write.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/train_config.h"
#include "train/usage_error.h"
#include "train/metrics.h"

namespace zerodp::train {
namespace {

using optim::DecayType;
using optim::LrScheduleKind;
using Flags = std::vector<std::pair<std::string, std::string>>;

using testing::contains;
using testing::usage_error;

// A fresh directory under the temporary directory, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("zerodp_test_wsd_csv_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TrainConfig runnable(TrainConfig c) {
  c.init_path = c.data_path = "x";
  return c;
}

// ---- the schedule's flags ----------------------------------------------------------------------

TEST(WsdFlags, BuildTheSchedule) {
  const ResolvedConfig r = resolve_config(Flags{{"--lr-schedule", "wsd"}, {"--lr", "1e-3"}, {"--steps", "100"},
                                                {"--warmup-steps", "10"}, {"--decay-steps", "20"},
                                                {"--decay-type", "cosine"}, {"--min-lr", "1e-5"}});
  const TrainConfig c = runnable(r.config);
  EXPECT_EQ(c.lr_schedule.kind, LrScheduleKind::kWSD);
  EXPECT_EQ(c.lr_schedule.decay_num_steps, 20);
  EXPECT_EQ(c.lr_schedule.decay_type, DecayType::kCosine);
  EXPECT_EQ(c.lr_schedule.warmup_min_lr, 1e-5);
  EXPECT_NO_THROW(c.validate(1));
  const optim::LrSchedule s = c.make_lr_schedule();
  EXPECT_EQ(s.lr_at(0), 1e-5);      // warmup from --min-lr
  EXPECT_EQ(s.lr_at(10), 1e-3);     // stable at --lr
  EXPECT_EQ(s.lr_at(79), 1e-3);
  EXPECT_LT(s.lr_at(80), 1e-3);     // the last 20 of --steps 100 decay
  EXPECT_EQ(s.lr_at(99), 1e-5);     // to --min-lr
  EXPECT_EQ(c.to_json()["lr_schedule"]["type"], "WSD");
  EXPECT_EQ(c.to_json()["lr_schedule"]["decay_num_steps"], 20);
  EXPECT_EQ(c.to_json()["lr_schedule"]["decay_type"], "cosine");
  EXPECT_EQ(flag_value(c, "--decay-type"), "cosine");
}

TEST(WsdFlags, ErrorsNameTheFlag) {
  // --decay-steps and --decay-type belong to wsd.
  EXPECT_TRUE(contains(usage_error([] { resolve_config(Flags{{"--decay-steps", "5"}}); }),
                       "--decay-steps needs --lr-schedule wsd"));
  EXPECT_TRUE(contains(usage_error([] { resolve_config(Flags{{"--lr-schedule", "cosine"}, {"--decay-type", "linear"}}); }),
                       "--decay-type needs --lr-schedule wsd"));
  EXPECT_TRUE(contains(usage_error([] { resolve_config(Flags{{"--lr-schedule", "wsd"}, {"--decay-type", "exp"}}); }),
                       "--decay-type"));
  EXPECT_TRUE(contains(usage_error([] { resolve_config(Flags{{"--lr-schedule", "wsd"}, {"--decay-steps", "x"}}); }),
                       "--decay-steps"));
  // Negative, and more than the run holds (checked by validate(), with the final --steps).
  TrainConfig neg = runnable(resolve_config(Flags{{"--lr-schedule", "wsd"}, {"--decay-steps", "-1"}}).config);
  EXPECT_TRUE(contains(usage_error([&] { neg.validate(1); }), "--decay-steps (decay_num_steps) must be >= 0"));
  TrainConfig big = runnable(resolve_config(Flags{{"--lr-schedule", "wsd"}, {"--steps", "50"}, {"--warmup-steps", "10"},
                                                  {"--decay-steps", "41"}}).config);
  const std::string m = usage_error([&] { big.validate(1); });
  EXPECT_TRUE(contains(m, "--warmup-steps 10 + --decay-steps 41 do not fit in the 50 total steps")) << m;
  // --total-steps is the length when given.
  big.lr_schedule.total_num_steps = 51;
  EXPECT_NO_THROW(big.validate(1));
}

TEST(WsdFlags, DeepSpeedStyleScheduler) {
  TrainConfig c;
  const auto warnings = apply_ds_config(c, R"({"scheduler": {"type": "WSD", "params": {
      "warmup_num_steps": 10, "warmup_type": "linear", "warmup_min_lr": 0.1, "warmup_max_lr": 1.1,
      "total_num_steps": 100, "decay_num_steps": 20, "decay_type": "1-sqrt"}}})",
                                        "ds.json");
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.lr_schedule.kind, LrScheduleKind::kWSD);
  EXPECT_EQ(c.lr_schedule.decay_type, DecayType::kOneMinusSqrt);
  EXPECT_DOUBLE_EQ(c.make_lr_schedule().lr_at(84), 0.6);  // q = 1/4: 0.1 + 1.0·(1 − 1/2)
  EXPECT_EQ(c.make_lr_schedule().lr_at(99), 0.1);
  TrainConfig d;
  EXPECT_TRUE(contains(usage_error([&] {
                         apply_ds_config(d, R"({"scheduler": {"type": "WSD", "params": {"decay_type": "exp"}}})",
                                         "ds.json");
                       }),
                       "scheduler.params.decay_type"));
  // decay_num_steps means nothing to the other schedulers: a warning, as for any key zerodp does not read.
  TrainConfig e;
  const auto w = apply_ds_config(e, R"({"scheduler": {"type": "WarmupLR", "params": {"decay_num_steps": 5}}})",
                                 "ds.json");
  EXPECT_EQ(w.size(), 1u);
}

// ---- --log-csv ---------------------------------------------------------------------------------

StepRecord step(int64_t s, double loss) {
  StepRecord r;
  r.step = s;
  r.loss = loss;
  r.grad_norm = 0.5;
  r.lr = 1e-3;
  r.tokens = 256;
  r.ms = 12.25;
  return r;
}

TEST(CsvLog, OneRowPerStepWithTheEvalOnItsStep) {
  const TempDir dir;
  const std::string path = dir.file("log.csv");
  {
    CsvLog csv(path, true);
    csv.record_step(step(0, 5.5), 256);
    csv.record_step(step(1, 5.25), 512);
    csv.record_eval(1, 5.0, 4096);  // after step 1: on its row
    csv.record_step(step(2, 5.0), 768);
    csv.record_eval(2, 4.0, 4096);
    csv.record_eval(2, 4.75, 4096);  // the same eval again: replaces it
    csv.commit();
  }
  EXPECT_EQ(read_text(path), std::string(CsvLog::kHeader) +
                                 "\n"
                                 "0,256,5.5,0.5,0.001,12.250,,\n"
                                 "1,512,5.25,0.5,0.001,12.250,5,4096\n"
                                 "2,768,5,0.5,0.001,12.250,4.75,4096\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(CsvLog, AnEvalWithoutItsStepGetsARowOfItsOwn) {
  const TempDir dir;
  const std::string path = dir.file("log.csv");
  CsvLog csv(path, true);
  csv.record_eval(9, 6.5, 1024);  // e.g. before the first step of a run resumed at step 10
  csv.record_step(step(10, 5.5), 11 * 256);
  csv.record_eval(-1, 7.5, 1024);  // out of order, and before any training: a row of its own all the same
  csv.commit();
  EXPECT_EQ(read_text(path), std::string(CsvLog::kHeader) +
                                 "\n"
                                 "9,,,,,,6.5,1024\n"
                                 "10,2816,5.5,0.5,0.001,12.250,,\n"
                                 "-1,,,,,,7.5,1024\n");
}

TEST(CsvLog, AFailedRunLeavesTheEarlierFile) {
  const TempDir dir;
  const std::string path = dir.file("log.csv");
  std::ofstream(path) << "earlier\n";
  {
    CsvLog csv(path, true);
    csv.record_step(step(0, 5.5), 256);
    // no commit(): the run failed
  }
  EXPECT_EQ(read_text(path), "earlier\n");
  EXPECT_EQ(read_text(path + ".partial"), std::string(CsvLog::kHeader) + "\n0,256,5.5,0.5,0.001,12.250,,\n");
}

TEST(CsvLog, InactiveWritesNothing) {
  const TempDir dir;
  const std::string path = dir.file("log.csv");
  CsvLog csv(path, false);  // not rank 0
  csv.record_step(step(0, 5.5), 256);
  csv.record_eval(0, 5.0, 10);
  csv.commit();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  CsvLog none("", true);
  none.commit();
}

TEST(CsvLog, UnwritablePathIsAUsageErrorAndTheFlagIsChecked) {
  EXPECT_TRUE(contains(usage_error([] { CsvLog("/nonexistent-dir/x/log.csv", true); }), "--log-csv"));
  TrainConfig c = runnable(resolve_config(Flags{{"--metrics", "m.jsonl"}, {"--log-csv", "m.jsonl"}}).config);
  EXPECT_TRUE(contains(usage_error([&] { c.validate(1); }), "--log-csv 'm.jsonl' names the same file"));
  c.log_csv_path = "m.csv";
  EXPECT_NO_THROW(c.validate(1));
  EXPECT_EQ(c.to_json()["log_csv"], "m.csv");
}

}  // namespace
}  // namespace zerodp::train
