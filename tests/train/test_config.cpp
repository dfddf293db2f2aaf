// The training configuration: flag parsing, precedence (flags over JSON over defaults), world-size
// checks, to_json, offload settings, and the CLI11 wiring of apps/train_options (the DeepSpeed JSON
// reader: test_ds_config.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/train_options.h"
#include "core/error.h"
#include "tests/train/config_test_util.h"
#include "train/train_config.h"
#include "train/usage_error.h"

namespace zerodp::train {
namespace {

using optim::LrScheduleKind;
using optim::OptimizerKind;
using optim::WarmupType;

using testing::contains;
using testing::usage_error;
using namespace config_test;

// ---- flags ---------------------------------------------------------------------------------------

TEST(Flags, ParseErrorsNameTheFlag) {
  TrainConfig c;
  EXPECT_EQ(usage_error([&] { apply_flag(c, "--steps", "abc"); }), "--steps: expected an integer, got 'abc'");
  EXPECT_EQ(usage_error([&] { apply_flag(c, "--lr", "fast"); }), "--lr: expected a number, got 'fast'");
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--dtype", "fp8"); }), "--dtype: "));
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--optimizer", "lamb"); }), "--optimizer: "));
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--overlap-comm", "maybe"); }), "--overlap-comm: "));
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--memory-budget", "lots"); }), "--memory-budget: "));
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--no-such-flag", "1"); }), "unknown flag"));
}

TEST(Flags, ValuesLand) {
  TrainConfig c;
  apply_flag(c, "--reduce-bucket-size", "5e8");
  EXPECT_EQ(c.zero.reduce_bucket_size, 500'000'000);
  apply_flag(c, "--overlap-comm", "true");
  EXPECT_TRUE(c.zero.overlap_comm);
  apply_flag(c, "--contiguous-gradients", "0");
  EXPECT_FALSE(c.zero.contiguous_gradients);
  apply_flag(c, "--seed", "18446744073709551615");
  EXPECT_EQ(c.seed, UINT64_MAX);
  apply_flag(c, "--dtype", "bf16");
  apply_flag(c, "--reduce-dtype", "fp32");
  EXPECT_EQ(c.precision.dtype, DType::kBF16);
  EXPECT_EQ(c.precision.grad_reduce_dtype(), DType::kF32);
  EXPECT_EQ(flag_value(c, "--dtype"), "bf16");
  EXPECT_EQ(flag_value(c, "--lr"), "0.001");
  EXPECT_EQ(flag_value(c, "--nesterov"), "false");
  EXPECT_EQ(flag_value(c, "--overlap-comm"), "true");
  EXPECT_EQ(flag_value(c, "--memory-budget"), "");
  apply_flag(c, "--memory-budget", "1KiB");
  EXPECT_EQ(flag_value(c, "--memory-budget"), "1024");
}

TEST(Flags, NonFiniteShuffleAndLossScalerFlags) {
  TrainConfig c;
  EXPECT_FALSE(c.skip_nonfinite);
  EXPECT_FALSE(c.shuffle);
  EXPECT_EQ(flag_value(c, "--shuffle"), "off");
  apply_flag(c, "--skip-nonfinite", "true");
  apply_flag(c, "--shuffle", "on");
  apply_flag(c, "--consecutive-hysteresis", "true");
  apply_flag(c, "--max-overflows-at-min-scale", "3");
  EXPECT_TRUE(c.skip_nonfinite);
  EXPECT_TRUE(c.shuffle && c.shuffle_set);
  EXPECT_FALSE(c.seed_set);
  EXPECT_TRUE(c.precision.loss_scale.consecutive_hysteresis);
  EXPECT_EQ(c.precision.loss_scale.max_overflows_at_min_scale, 3);
  apply_flag(c, "--seed", "7");
  EXPECT_TRUE(c.seed_set);
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--shuffle", "maybe"); }), "--shuffle"));
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j["shuffle"], true);
  EXPECT_EQ(j["skip_nonfinite"], true);
  EXPECT_EQ(j["fp16"]["consecutive_hysteresis"], true);
  TrainConfig d;
  apply_ds_config(d, R"({"fp16": {"enabled": true, "consecutive_hysteresis": true}})", "ds.json");
  EXPECT_TRUE(d.precision.loss_scale.consecutive_hysteresis);
}

TEST(Flags, EveryFlagHasHelpAndAParsableDefault) {
  const TrainConfig defaults;
  for (const TrainFlag& f : train_flags()) {
    EXPECT_EQ(f.name.substr(0, 2), "--");
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(f.is_switch, f.value_name.empty()) << f.name;
    const std::string shown = flag_value(defaults, f.name);
    if (shown.empty()) continue;
    TrainConfig c;
    apply_flag(c, f.name, shown);  // what help shows as the default parses back to the default
    EXPECT_EQ(c.to_json(), defaults.to_json()) << f.name << " " << shown;
  }
}

// ---- precedence ----------------------------------------------------------------------------------

TEST(Resolve, FlagsWinOverTheJsonWhichWinsOverDefaults) {
  const TempFile file(R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.005, "weight_decay": 0.2}},
                         "zero_optimization": {"stage": 3, "overlap_comm": true},
                         "train_micro_batch_size_per_gpu": 16, "mystery": 1})");
  const std::vector<std::pair<std::string, std::string>> given = {
      {"--zero-stage", "1"}, {"--config", file.path()}, {"--micro-batch", "2"}, {"--init", "m"}};
  const ResolvedConfig r = resolve_config(given);
  EXPECT_EQ(r.config.zero.stage, 1);          // flag over JSON
  EXPECT_EQ(r.config.micro_batch, 2);         // flag over JSON
  EXPECT_EQ(r.config.lr, 0.005);              // JSON over default
  EXPECT_EQ(r.config.optimizer.weight_decay, 0.2);      // JSON over default
  EXPECT_TRUE(r.config.zero.overlap_comm);         // JSON over default
  EXPECT_EQ(r.config.seq, TrainConfig{}.seq);  // default
  EXPECT_EQ(r.config.init_path, "m");
  EXPECT_EQ(r.config.config_path, file.path());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_TRUE(has_warning_about(r.warnings, "mystery"));
}

TEST(Resolve, LrFlagSetsTheSchedulePeakAndMinLrFollowsTheSchedule) {
  const TempFile warmup(R"({"scheduler": {"type": "WarmupLR",
                           "params": {"warmup_max_lr": 3e-4, "warmup_num_steps": 10}}})");
  ResolvedConfig r = resolve_config(std::vector<std::pair<std::string, std::string>>{
      {"--config", warmup.path()}, {"--min-lr", "1e-5"}, {"--lr", "1e-3"}});
  EXPECT_FALSE(r.config.lr_schedule.warmup_max_lr.has_value());  // the peak is --lr now
  EXPECT_EQ(r.config.lr_schedule.warmup_min_lr, 1e-5);
  EXPECT_DOUBLE_EQ(r.config.make_lr_schedule().lr_at(100), 1e-3);

  // Cosine: --min-lr becomes cos_min_ratio against the final --lr, whatever the order given.
  r = resolve_config(std::vector<std::pair<std::string, std::string>>{
      {"--min-lr", "1e-4"}, {"--lr-schedule", "cosine"}, {"--lr", "2e-3"}, {"--warmup-steps", "5"}});
  EXPECT_EQ(r.config.lr_schedule.kind, LrScheduleKind::kWarmupCosineLR);
  EXPECT_DOUBLE_EQ(r.config.lr_schedule.cos_min_ratio, 0.05);
  EXPECT_EQ(r.config.lr_schedule.warmup_num_steps, 5);
  EXPECT_EQ(r.config.lr_schedule.warmup_type, WarmupType::kLinear);  // the command line's default

  EXPECT_TRUE(contains(usage_error([] {
                         resolve_config(std::vector<std::pair<std::string, std::string>>{{"--min-lr", "1e-4"}});
                       }),
                       "--min-lr needs a schedule"));
  EXPECT_TRUE(contains(usage_error([] {
                         resolve_config(std::vector<std::pair<std::string, std::string>>{{"--warmup-steps", "10"}});
                       }),
                       "--warmup-steps needs a schedule"));
  // --lr-schedule constant overrides a --config scheduler, warmup included.
  r = resolve_config(std::vector<std::pair<std::string, std::string>>{{"--config", warmup.path()},
                                                                      {"--lr-schedule", "constant"}});
  EXPECT_EQ(r.config.lr_schedule.kind, LrScheduleKind::kConstant);
  TrainConfig c = r.config;
  c.init_path = c.data_path = "x";
  EXPECT_NO_THROW(c.validate(1));
  EXPECT_DOUBLE_EQ(c.make_lr_schedule().lr_at(0), c.lr);
}

// ---- world-size checks ---------------------------------------------------------------------------

TEST(Validate, DefaultsWithFilesAreRunnable) {
  for (int w : {1, 2, 3, 8}) EXPECT_NO_THROW(runnable().validate(w)) << w;
}

TEST(Validate, ErrorsSayWhat) {
  struct Bad {
    void (*edit)(TrainConfig&);
    const char* message;
  };
  const Bad cases[] = {
      {[](TrainConfig& c) { c.init_path.clear(); }, "--init is required"},
      {[](TrainConfig& c) { c.data_path.clear(); }, "--data is required"},
      {[](TrainConfig& c) { c.steps = 0; }, "--steps must be in [1, 2^40], got 0"},
      {[](TrainConfig& c) { c.micro_batch = -1; }, "--micro-batch (train_micro_batch_size_per_gpu) must be in [1, 1048576]"},
      {[](TrainConfig& c) { c.seq = 0; }, "--seq must be in [1, 16777216]"},
      {[](TrainConfig& c) { c.accum = 0; }, "--accum (gradient_accumulation_steps) must be in [1, 1048576]"},
      {[](TrainConfig& c) { c.zero.stage = 4; }, "--zero-stage (zero_optimization.stage) must be 0, 1, 2 or 3, got 4"},
      {[](TrainConfig& c) { c.optimizer.beta1 = 1.0; }, "--beta1 (optimizer.params.betas[0]) must be in [0, 1)"},
      {[](TrainConfig& c) { c.optimizer.beta2 = -0.1; }, "--beta2"},
      {[](TrainConfig& c) { c.lr = std::nan(""); }, "--lr (optimizer.params.lr) must be a finite number"},
      {[](TrainConfig& c) { c.clip = -1; }, "--clip (gradient_clipping)"},
      {[](TrainConfig& c) { c.optimizer.weight_decay = -0.1; }, "--weight-decay"},
      {[](TrainConfig& c) {
         c.precision.dtype = DType::kF16;
         c.precision.reduce_dtype = DType::kBF16;
       },
       "--reduce-dtype (communication_data_type) must be the compute dtype (fp16) or fp32, got bf16"},
      {[](TrainConfig& c) {
         c.optimizer.kind = OptimizerKind::kSGD;
         c.optimizer.momentum = 0.9;
         c.optimizer.dampening = 0.1;
         c.optimizer.nesterov = true;
       },
       "--nesterov needs --momentum > 0 and --dampening 0"},
      {[](TrainConfig& c) { c.zero.reduce_bucket_size = 0; }, "--reduce-bucket-size"},
      {[](TrainConfig& c) { c.precision.loss_scale.hysteresis = 0; }, "--hysteresis (fp16.hysteresis)"},
      {[](TrainConfig& c) {
         c.lr_schedule.kind = LrScheduleKind::kWarmupCosineLR;
         c.lr_schedule.cos_min_ratio = -1;
       },
       "cos_min_ratio"},
      {[](TrainConfig& c) { c.train_batch_size = 64; },
       "train_batch_size 64 != micro_batch 4 x accum 1 x world size 2 = 8"},
      // Sizes are bounded before anything is narrowed or multiplied: no silent wrap-around.
      {[](TrainConfig& c) { c.micro_batch = int64_t{1} << 33; }, "--micro-batch (train_micro_batch_size_per_gpu) must be in [1, 1048576], got 8589934592"},
      {[](TrainConfig& c) { c.accum = int64_t{1} << 32; }, "--accum (gradient_accumulation_steps) must be in [1, 1048576], got 4294967296"},
      {[](TrainConfig& c) {
         c.micro_batch = 1 << 20;
         c.seq = 1 << 12;
       },
       "--micro-batch 1048576 x --seq 4096 = 4294967296 tokens per micro-batch, over the 2147483647 allowed"},
      {[](TrainConfig& c) { c.steps = int64_t{1} << 41; }, "--steps must be in [1, 2^40]"},
      {[](TrainConfig& c) { c.keep = int64_t{1} << 40; }, "--keep must be in [0, 1000000]"},
      {[](TrainConfig& c) { c.precision.loss_scale.window = int64_t{1} << 31; }, "--loss-scale-window (fp16.loss_scale_window) must be in [1, 2^31 - 1]"},
      {[](TrainConfig& c) { c.precision.loss_scale.max_overflows_at_min_scale = -1; }, "--max-overflows-at-min-scale must be in [0, 2^31 - 1]"},
  };
  for (const Bad& b : cases) {
    TrainConfig c = runnable();
    b.edit(c);
    const std::string msg = usage_error([&] { c.validate(2); });
    EXPECT_TRUE(contains(msg, b.message)) << "expected: " << b.message << "\n  got: " << msg;
  }
}

// A value from the JSON so large that its product with the world size wraps cannot divide the
// global batch: a UsageError, not signed overflow (found by fuzz_ds_config under UBSan).
TEST(Finalize, HugeKnownFactorIsRefusedWithoutOverflow) {
  TrainConfig c = runnable();
  apply_ds_config(c, R"({"gradient_accumulation_steps": 9223372036854775807, "train_batch_size": 8})", "ds.json");
  EXPECT_TRUE(contains(usage_error([&] { c.finalize(3); }), "train_batch_size 8 is not divisible by accum"));
}

TEST(Validate, TrainBatchSizeMatchingTheProductPasses) {
  TrainConfig c = runnable();
  c.micro_batch = 4;
  c.accum = 2;
  c.train_batch_size = 32;
  EXPECT_NO_THROW(c.validate(4));
  EXPECT_FALSE(usage_error([&] { c.validate(2); }).empty());
}

TEST(Finalize, DerivesWhatTrainBatchSizeImplies) {
  TrainConfig c = runnable();
  c.train_batch_size = 32;
  c.micro_batch = 4;
  c.micro_batch_set = true;
  c.finalize(2);
  EXPECT_EQ(c.accum, 4);

  TrainConfig d = runnable();
  d.train_batch_size = 24;
  d.accum = 3;
  d.accum_set = true;
  d.finalize(4);
  EXPECT_EQ(d.micro_batch, 2);

  TrainConfig e = runnable();
  e.train_batch_size = 12;
  e.finalize(3);
  EXPECT_EQ(e.micro_batch, 4);
  EXPECT_EQ(e.accum, 1);

  TrainConfig f = runnable();
  f.train_batch_size = 30;
  f.micro_batch = 4;
  f.micro_batch_set = true;
  EXPECT_TRUE(contains(usage_error([&] { f.finalize(2); }),
                       "train_batch_size 30 is not divisible by micro_batch 4 x world size 2"));

  TrainConfig g = runnable();  // both given: checked, not derived
  g.train_batch_size = 16;
  g.micro_batch_set = g.accum_set = true;
  EXPECT_FALSE(usage_error([&] { g.finalize(2); }).empty());
}

TEST(Config, ToJsonAndHelpers) {
  TrainConfig c = runnable();
  c.zero.stage = 2;
  c.memory_budget = 1024;
  c.lr_schedule.kind = LrScheduleKind::kWarmupCosineLR;
  c.lr_schedule.cos_min_ratio = 0.1;
  const nlohmann::json j = c.to_json();
  EXPECT_EQ(j["zero"]["stage"], 2);
  EXPECT_EQ(j["optimizer"]["type"], "AdamW");
  EXPECT_EQ(j["optimizer"]["betas"], nlohmann::json({0.9, 0.999}));
  EXPECT_EQ(j["memory_budget"], 1024);
  EXPECT_EQ(j["lr_schedule"]["type"], "WarmupCosineLR");
  EXPECT_EQ(j["lr_schedule"]["total_num_steps"], c.steps);
  EXPECT_EQ(j["dtype"], "fp32");
  EXPECT_EQ(j["init"], "model.safetensors");
  EXPECT_TRUE(TrainConfig{}.to_json()["memory_budget"].is_null());
  EXPECT_TRUE(TrainConfig{}.to_json()["train_batch_size"].is_null());
  EXPECT_EQ(c.tokens_per_step(4), 4 * c.accum * c.micro_batch * c.seq);
  EXPECT_EQ(c.optimizer_spec().weight_decay, c.optimizer.weight_decay);
}

// ---- the CLI11 wiring (apps/train_options) -------------------------------------------------------

struct Cli {
  CLI::App app{"test"};
  CLI::App* train = nullptr;
  cli::TrainOptions opts;
  Cli() {
    train = app.add_subcommand("train", "train");
    cli::add_train_options(train, opts);
  }
  TrainConfig parse(const std::string& line) {
    app.parse(line, false);
    return cli::resolve(opts, train);
  }
};

TEST(TrainOptions, EveryContractFlagExists) {
  Cli cli;
  for (const char* name : {"--init", "--data", "--steps", "--micro-batch", "--seq", "--accum", "--lr",
                           "--beta1", "--beta2", "--eps", "--weight-decay", "--clip", "--zero-stage",
                           "--dtype", "--metrics", "--out", "--config", "--memory-budget", "--seed",
                           "--lr-schedule", "--warmup-steps", "--min-lr", "--reduce-bucket-size"})
    EXPECT_NO_THROW(cli.train->get_option(name)) << name;
  const std::string help = cli.train->help();
  EXPECT_TRUE(contains(help, "--weight-decay")) << help;
  EXPECT_TRUE(contains(help, "25000000")) << "defaults are shown";
}

// Fault injection is for the tests (tests/tools/zerodp_testing.cpp): `zerodp train` has no such flag.
TEST(TrainOptions, FaultInjectionIsNotAFlagOfTrain) {
  Cli cli;
  for (const TrainFlag& f : train_flags()) EXPECT_NE(f.name.substr(0, 9), "--inject-") << f.name;
  EXPECT_THROW(cli.parse("train --init m --data d --inject-overflow-step 3"), CLI::ParseError);
}

TEST(TrainOptions, TheContractsCommandLine) {
  Cli cli;
  const TrainConfig c = cli.parse(
      "train --init m.safetensors --data tok.bin --steps 5 --micro-batch 2 --seq 32 --accum 3 --lr 0.01 "
      "--beta1 0.8 --beta2 0.95 --eps 1e-6 --weight-decay 0.05 --clip 1.0 --zero-stage 2 --dtype bf16 "
      "--metrics m.jsonl --out final.safetensors --memory-budget 512MiB");
  EXPECT_EQ(c.init_path, "m.safetensors");
  EXPECT_EQ(c.data_path, "tok.bin");
  EXPECT_EQ(c.steps, 5);
  EXPECT_EQ(c.micro_batch, 2);
  EXPECT_EQ(c.seq, 32);
  EXPECT_EQ(c.accum, 3);
  EXPECT_EQ(c.lr, 0.01);
  EXPECT_EQ(c.optimizer.beta1, 0.8);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.optimizer.eps, 1e-6);
  EXPECT_EQ(c.optimizer.weight_decay, 0.05);
  EXPECT_EQ(c.clip, 1.0);
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.precision.dtype, DType::kBF16);
  EXPECT_EQ(c.metrics_path, "m.jsonl");
  EXPECT_EQ(c.out_path, "final.safetensors");
  EXPECT_EQ(c.memory_budget, 512ull << 20);
  EXPECT_NO_THROW(TrainConfig(c).finalize(4));
}

TEST(TrainOptions, SwitchesAndTheirNegations) {
  Cli a;
  TrainConfig c = a.parse("train --overlap-comm --no-contiguous-gradients --no-reshard-after-forward");
  EXPECT_TRUE(c.zero.overlap_comm);
  EXPECT_FALSE(c.zero.contiguous_gradients);
  EXPECT_FALSE(c.zero.reshard_after_forward);
  Cli b;
  c = b.parse("train --fp32-grad-accum=false");
  EXPECT_FALSE(c.precision.fp32_grad_accum);
  EXPECT_EQ(c.zero.overlap_comm, TrainConfig{}.zero.overlap_comm);  // not given: the default
}

TEST(TrainOptions, CommandLineOverConfigFile) {
  const TempFile file(R"({"zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW",
                         "params": {"lr": 0.005}}, "gradient_accumulation_steps": 4})");
  Cli cli;
  const TrainConfig c = cli.parse("train --config " + file.path() + " --zero-stage 1 --accum 2");
  EXPECT_EQ(c.zero.stage, 1);
  EXPECT_EQ(c.accum, 2);
  EXPECT_EQ(c.lr, 0.005);
  EXPECT_EQ(c.config_path, file.path());
}

// ---- optimizer offload ---------------------------------------------------------------------------

TEST(Offload, DsConfigKeysAreHonoured) {
  TrainConfig c;
  const auto warnings = apply_ds_config(c, R"({"zero_optimization": {"stage": 2, "sub_group_size": 1e6,
      "offload_optimizer": {"device": "cpu", "pin_memory": true, "buffer_count": 3, "ratio": 1}}})", "ds.json");
  EXPECT_EQ(c.zero.offload_optimizer, zero::Offload::kCpu);
  EXPECT_EQ(c.zero.sub_group_size, 1'000'000);
  EXPECT_EQ(c.zero.optimizer_buffer_count, 3);  // the NVMe slots
  // pin_memory is accepted, with a note that it changes nothing here.
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(has_warning_about(warnings, "zero_optimization.offload_optimizer.pin_memory"));
  // nvme with its path; pipeline_read/write noted; the two sections' paths must agree.
  TrainConfig nv;
  const auto notes = apply_ds_config(nv, R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme",
      "nvme_path": "/local_nvme", "pipeline_read": true, "pipeline_write": false}}})", "ds.json");
  EXPECT_EQ(nv.zero.offload_optimizer, zero::Offload::kNvme);
  EXPECT_EQ(nv.zero.nvme_path, "/local_nvme");
  EXPECT_TRUE(has_warning_about(notes, "zero_optimization.offload_optimizer.pipeline_read"));
  EXPECT_EQ(nv.to_json()["zero"]["nvme_path"], "/local_nvme");
  EXPECT_TRUE(contains(usage_error([&] {
    apply_ds_config(nv, R"({"zero_optimization": {"offload_param": {"nvme_path": "/other"}}})", "ds.json");
  }), "zero_optimization.offload_param.nvme_path"));
  EXPECT_EQ(c.to_json()["zero"]["offload_optimizer"], "cpu");
  EXPECT_EQ(c.to_json()["zero"]["sub_group_size"], 1'000'000);
  // DeepSpeed's older spelling, and "none".
  TrainConfig old;
  apply_ds_config(old, R"({"zero_optimization": {"cpu_offload": true}})", "ds.json");
  EXPECT_EQ(old.zero.offload_optimizer, zero::Offload::kCpu);
  apply_ds_config(c, R"({"zero_optimization": {"offload_optimizer": {"device": "none"}}})", "ds.json");
  EXPECT_EQ(c.zero.offload_optimizer, zero::Offload::kNone);
  // Wrong values name the key.
  EXPECT_TRUE(contains(usage_error([&] {
    apply_ds_config(c, R"({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}})", "ds.json");
  }), "zero_optimization.offload_optimizer.device"));
  EXPECT_TRUE(contains(usage_error([&] {
    apply_ds_config(c, R"({"zero_optimization": {"sub_group_size": 0}})", "ds.json");
  }), "zero_optimization.sub_group_size"));
}

TEST(Offload, FlagsWinOverTheConfig) {
  const TempFile file(R"({"zero_optimization": {"stage": 3, "sub_group_size": 100,
                         "offload_optimizer": {"device": "cpu"}}})");
  ResolvedConfig r = resolve_config(std::vector<std::pair<std::string, std::string>>{{"--config", file.path()}});
  EXPECT_EQ(r.config.zero.offload_optimizer, zero::Offload::kCpu);
  EXPECT_EQ(r.config.zero.sub_group_size, 100);
  r = resolve_config(std::vector<std::pair<std::string, std::string>>{
      {"--config", file.path()}, {"--offload-optimizer", "none"}, {"--sub-group-size", "5"}});
  EXPECT_EQ(r.config.zero.offload_optimizer, zero::Offload::kNone);
  EXPECT_EQ(r.config.zero.sub_group_size, 5);
  Cli cli;
  const TrainConfig c = cli.parse("train --offload-optimizer cpu --sub-group-size 1e4 --zero-stage 1");
  EXPECT_EQ(c.zero.offload_optimizer, zero::Offload::kCpu);
  EXPECT_EQ(c.zero.sub_group_size, 10'000);
  EXPECT_EQ(TrainConfig{}.zero.offload_optimizer, zero::Offload::kNone);  // the default
}

TEST(Offload, ValidationRefusesStageZeroNvmeWithoutPathAndEmptySubGroups) {
  TrainConfig c = runnable();
  c.zero.offload_optimizer = zero::Offload::kCpu;
  c.zero.stage = 0;
  std::string msg = usage_error([&] { c.validate(2); });
  EXPECT_TRUE(contains(msg, "--offload-optimizer") && contains(msg, "stage 1, 2 or 3")) << msg;
  for (int stage : {1, 2, 3}) {
    c.zero.stage = stage;
    EXPECT_NO_THROW(c.validate(2)) << stage;
  }
  c.zero.offload_optimizer = zero::Offload::kNvme;
  msg = usage_error([&] { c.validate(2); });
  EXPECT_TRUE(contains(msg, "nvme needs --nvme-path")) << msg;
  c.zero.nvme_path = "/tmp";
  EXPECT_NO_THROW(c.validate(2));
  for (int64_t bad : {0, 65}) {
    c.zero.optimizer_buffer_count = bad;
    EXPECT_TRUE(contains(usage_error([&] { c.validate(2); }), "buffer_count")) << bad;
  }
  c.zero.optimizer_buffer_count = 4;
  c.zero.offload_optimizer = zero::Offload::kCpu;
  c.zero.sub_group_size = 0;
  EXPECT_TRUE(contains(usage_error([&] { c.validate(2); }), "--sub-group-size"));
  TrainConfig f;
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(f, "--offload-optimizer", "disk"); }), "--offload-optimizer"));
}

// ---- parameter offload ---------------------------------------------------------------------------

TEST(ParamOffload, DsConfigKeysAreHonoured) {
  TrainConfig c = runnable();
  const auto warnings = apply_ds_config(c, R"({"zero_optimization": {"stage": 3,
      "offload_param": {"device": "cpu", "pin_memory": true, "buffer_count": 5, "buffer_size": 1e8,
                        "max_in_cpu": 1e9}}})", "ds.json");
  EXPECT_EQ(c.zero.offload_param, zero::Offload::kCpu);
  EXPECT_EQ(c.zero.offload_optimizer, zero::Offload::kNone);
  // buffer_count and max_in_cpu are read (they shape nvme offload); pin_memory and buffer_size are
  // accepted, with a note that they change nothing here.
  EXPECT_EQ(c.zero.param_buffer_count, 5);
  EXPECT_EQ(c.zero.param_max_in_cpu, 1'000'000'000);
  EXPECT_EQ(warnings.size(), 2u);
  for (const char* k : {"pin_memory", "buffer_size"})
    EXPECT_TRUE(has_warning_about(warnings, std::string("zero_optimization.offload_param.") + k)) << k;
  EXPECT_EQ(c.to_json()["zero"]["offload_param_max_in_cpu"], 1'000'000'000);
  TrainConfig counts = runnable();
  EXPECT_TRUE(contains(usage_error([&] {
    apply_ds_config(counts, R"({"zero_optimization": {"offload_param": {"buffer_count": 65}}})", "ds.json");
  }), "zero_optimization.offload_param.buffer_count must be an integer in 1..64, got 65"));
  counts.zero.param_buffer_count = 65;  // set past the reader: validate() refuses it too
  EXPECT_TRUE(contains(usage_error([&] { counts.validate(2); }), "offload_param.buffer_count"));
  EXPECT_TRUE(contains(usage_error([&] {
    apply_ds_config(counts, R"({"zero_optimization": {"offload_param": {"max_in_cpu": -1}}})", "ds.json");
  }), "zero_optimization.offload_param.max_in_cpu"));
  EXPECT_EQ(c.to_json()["zero"]["offload_param"], "cpu");
  EXPECT_NO_THROW(c.validate(2));
  // DeepSpeed's older spelling, "none", and nvme (read, then refused by validate()).
  TrainConfig old;
  apply_ds_config(old, R"({"zero_optimization": {"stage": 3, "cpu_offload_params": true}})", "ds.json");
  EXPECT_EQ(old.zero.offload_param, zero::Offload::kCpu);
  apply_ds_config(c, R"({"zero_optimization": {"offload_param": {"device": "none"}}})", "ds.json");
  EXPECT_EQ(c.zero.offload_param, zero::Offload::kNone);
  apply_ds_config(c, R"({"zero_optimization": {"offload_param": {"device": "nvme", "nvme_path": "/x"}}})", "ds.json");
  EXPECT_EQ(c.zero.offload_param, zero::Offload::kNvme);
  EXPECT_EQ(c.zero.nvme_path, "/x");
  EXPECT_TRUE(contains(usage_error([&] { c.validate(2); }), "--offload-optimizer"));  // nvme needs it too
  apply_ds_config(c, R"({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})", "ds.json");
  EXPECT_NO_THROW(c.validate(2));
  // Wrong values name the key.
  EXPECT_TRUE(contains(usage_error([&] {
    apply_ds_config(c, R"({"zero_optimization": {"offload_param": {"device": "gpu"}}})", "ds.json");
  }), "zero_optimization.offload_param.device"));
}

TEST(ParamOffload, FlagsWinOverTheConfig) {
  const TempFile file(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})");
  ResolvedConfig r = resolve_config(std::vector<std::pair<std::string, std::string>>{{"--config", file.path()}});
  EXPECT_EQ(r.config.zero.offload_param, zero::Offload::kCpu);
  r = resolve_config(std::vector<std::pair<std::string, std::string>>{{"--config", file.path()},
                                                                       {"--offload-param", "none"}});
  EXPECT_EQ(r.config.zero.offload_param, zero::Offload::kNone);
  Cli cli;
  const TrainConfig c = cli.parse("train --offload-param cpu --offload-optimizer cpu --zero-stage 3");
  EXPECT_EQ(c.zero.offload_param, zero::Offload::kCpu);
  EXPECT_EQ(c.zero.offload_optimizer, zero::Offload::kCpu);
  EXPECT_EQ(TrainConfig{}.zero.offload_param, zero::Offload::kNone);  // the default
}

TEST(ParamOffload, ValidationRefusesStagesZeroToTwoAndNvmeWithoutOptimizerOrPath) {
  TrainConfig c = runnable();
  c.zero.offload_param = zero::Offload::kCpu;
  for (int stage : {0, 1, 2}) {
    c.zero.stage = stage;
    const std::string msg = usage_error([&] { c.validate(2); });
    EXPECT_TRUE(contains(msg, "--offload-param") && contains(msg, "stage 3")) << msg;
  }
  c.zero.stage = 3;
  EXPECT_NO_THROW(c.validate(2));
  c.zero.offload_param = zero::Offload::kNvme;
  std::string msg = usage_error([&] { c.validate(2); });
  EXPECT_TRUE(contains(msg, "--offload-param") && contains(msg, "--offload-optimizer")) << msg;
  c.zero.offload_optimizer = zero::Offload::kCpu;
  msg = usage_error([&] { c.validate(2); });
  EXPECT_TRUE(contains(msg, "--offload-param") && contains(msg, "--nvme-path")) << msg;
  c.zero.nvme_path = "/tmp";
  EXPECT_NO_THROW(c.validate(2));
  TrainConfig f;
  EXPECT_TRUE(contains(usage_error([&] { apply_flag(f, "--offload-param", "disk"); }), "--offload-param"));
}

TEST(TrainOptions, BadValuesAreUsageErrors) {
  Cli cli;
  EXPECT_EQ(usage_error([&] { cli.parse("train --steps many"); }), "--steps: expected an integer, got 'many'");
}

}  // namespace
}  // namespace zerodp::train
