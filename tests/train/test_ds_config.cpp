// The DeepSpeed JSON reader of the training configuration (train/ds_config.cpp): every documented key,
// "auto", the optimizer and scheduler sections, precision, unknown and unimplemented keys, and the
// errors that name the key path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

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

// ---- DeepSpeed JSON ----------------------------------------------------------------------------

TEST(DsConfig, ReadsEveryDocumentedKey) {
  TrainConfig c;
  const auto warnings = apply_ds_config(c, R"({
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 8,
    "gradient_accumulation_steps": 2,
    "gradient_clipping": 1.0,
    "steps_per_print": 5,
    "optimizer": {"type": "AdamW", "params": {"lr": 6e-4, "betas": [0.9, 0.95], "eps": 1e-6,
                                               "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 100, "total_num_steps": 1000,
                  "warmup_type": "linear", "warmup_min_ratio": 0.05, "cos_min_ratio": 0.1}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e7, "allgather_bucket_size": 20000000,
                          "overlap_comm": true, "contiguous_gradients": false,
                          "stage3_prefetch_bucket_size": 1000000, "stage3_max_live_parameters": 3e6,
                          "stage3_param_persistence_threshold": 0, "reshard_after_forward": false},
    "bf16": {"enabled": true},
    "fp16": {"enabled": false, "loss_scale": 128, "initial_scale_power": 12, "loss_scale_window": 500,
             "hysteresis": 3, "min_loss_scale": 0.5},
    "communication_data_type": "fp32",
    "data_types": {"grad_accum_dtype": "bf16"}
  })", "ds.json");
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(c.train_batch_size, 64);
  EXPECT_EQ(c.micro_batch, 8);
  EXPECT_TRUE(c.micro_batch_set);
  EXPECT_EQ(c.accum, 2);
  EXPECT_TRUE(c.accum_set);
  EXPECT_EQ(c.clip, 1.0);
  EXPECT_EQ(c.log_every, 5);
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_EQ(c.lr, 6e-4);
  EXPECT_EQ(c.optimizer.beta1, 0.9);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.optimizer.eps, 1e-6);
  EXPECT_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_EQ(c.lr_schedule.kind, LrScheduleKind::kWarmupCosineLR);
  EXPECT_EQ(c.lr_schedule.warmup_num_steps, 100);
  EXPECT_EQ(c.lr_schedule.total_num_steps, 1000);
  EXPECT_EQ(c.lr_schedule.warmup_type, WarmupType::kLinear);
  EXPECT_EQ(c.lr_schedule.warmup_min_ratio, 0.05);
  EXPECT_EQ(c.lr_schedule.cos_min_ratio, 0.1);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.zero.reduce_bucket_size, 50'000'000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 20'000'000);
  EXPECT_TRUE(c.zero.overlap_comm);
  EXPECT_FALSE(c.zero.contiguous_gradients);
  EXPECT_EQ(c.zero.stage3_prefetch_bucket_size, 1'000'000);
  EXPECT_EQ(c.zero.stage3_max_live_parameters, 3'000'000);
  EXPECT_EQ(c.zero.stage3_param_persistence_threshold, 0);
  EXPECT_FALSE(c.zero.reshard_after_forward);
  EXPECT_EQ(c.precision.dtype, DType::kBF16);
  EXPECT_EQ(c.precision.loss_scale.static_scale, 128);
  EXPECT_EQ(c.precision.loss_scale.initial_scale_power, 12);
  EXPECT_EQ(c.precision.loss_scale.window, 500);
  EXPECT_EQ(c.precision.loss_scale.hysteresis, 3);
  EXPECT_EQ(c.precision.loss_scale.min_scale, 0.5);
  EXPECT_EQ(c.precision.grad_reduce_dtype(), DType::kF32);
  EXPECT_FALSE(c.precision.fp32_grad_accum);
}

TEST(DsConfig, AutoKeepsZerodpsSetting) {
  TrainConfig c;
  c.lr = 0.02;
  c.micro_batch = 3;
  c.zero.stage = 2;
  const auto warnings = apply_ds_config(c, R"({
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "train_batch_size": "auto", "gradient_clipping": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                               "weight_decay": "auto"}},
    "zero_optimization": {"stage": "auto", "reduce_bucket_size": "auto"},
    "bf16": {"enabled": "auto"}
  })", "ds.json");
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.lr, 0.02);
  EXPECT_EQ(c.optimizer.weight_decay, TrainConfig{}.optimizer.weight_decay);
  EXPECT_EQ(c.micro_batch, 3);
  EXPECT_FALSE(c.micro_batch_set);
  EXPECT_FALSE(c.train_batch_size.has_value());
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.precision.dtype, DType::kF32);
  EXPECT_EQ(c.zero.reduce_bucket_size, TrainConfig{}.zero.reduce_bucket_size);
}

TEST(DsConfig, OptimizerSectionTakesDeepSpeedDefaults) {
  TrainConfig c;
  c.optimizer.weight_decay = 0.3;
  apply_ds_config(c, R"({"optimizer": {"type": "adam", "params": {"lr": 1e-4}}})", "ds.json");
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::kAdamW);  // DeepSpeed's Adam decays decoupled by default
  EXPECT_EQ(c.lr, 1e-4);
  EXPECT_EQ(c.optimizer.weight_decay, 0.0);  // FusedAdam's default, not what was there before
  EXPECT_EQ(c.optimizer.beta2, 0.999);
}

TEST(DsConfig, SGD) {
  TrainConfig c;
  const auto warnings = apply_ds_config(
      c, R"({"optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "dampening": 0.1,
             "nesterov": false, "weight_decay": 1e-4, "betas": [0.9, 0.99]}}})",
      "ds.json");
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::kSGD);
  EXPECT_EQ(c.lr, 0.1);
  EXPECT_EQ(c.optimizer.momentum, 0.9);
  EXPECT_EQ(c.optimizer.dampening, 0.1);
  EXPECT_EQ(c.optimizer.weight_decay, 1e-4);
  ASSERT_EQ(warnings.size(), 1u);  // betas mean nothing to SGD
  EXPECT_TRUE(has_warning_about(warnings, "optimizer.params.betas")) << warnings[0];
  EXPECT_EQ(c.optimizer_spec().momentum, 0.9);
  EXPECT_EQ(state_floats_per_param(c.optimizer_spec()), 1u);
}

TEST(DsConfig, Muon) {
  TrainConfig c;
  apply_ds_config(c, R"({"optimizer": {"type": "Muon", "params": {"lr": 0.5}}})", "ds.json");
  EXPECT_EQ(c.optimizer.kind, OptimizerKind::kMuon);
  EXPECT_EQ(c.lr, 0.5);
  EXPECT_EQ(c.optimizer.momentum, 0.95);  // docs/reference/optimizer.md#muon's defaults
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_EQ(c.adam_lr, 0.0);  // the lr
  EXPECT_EQ(state_floats_per_param(c.optimizer_spec()), 2u);
  TrainConfig d;
  const auto warnings = apply_ds_config(
      d, R"({"optimizer": {"type": "muon", "params": {"muon_lr": 0.02, "adam_lr": 3e-4, "momentum": 0.9,
             "nesterov": false, "betas": [0.8, 0.95], "weight_decay": 0.1, "ns_steps": 5}}})",
      "ds.json");
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  EXPECT_EQ(d.lr, 0.02);
  EXPECT_EQ(d.adam_lr, 3e-4);
  EXPECT_EQ(d.optimizer.momentum, 0.9);
  EXPECT_FALSE(d.optimizer.nesterov);
  EXPECT_EQ(d.optimizer.beta1, 0.8);
  EXPECT_EQ(d.optimizer.weight_decay, 0.1);
  TrainConfig e;
  EXPECT_THROW(apply_ds_config(e, R"({"optimizer": {"type": "Muon", "params": {"ns_steps": 6}}})", "ds.json"),
               UsageError);
}

TEST(DsConfig, SchedulerSectionsAndTheirDefaults) {
  TrainConfig c;
  apply_ds_config(c, R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-4}}})", "a.json");
  EXPECT_EQ(c.lr_schedule.kind, LrScheduleKind::kWarmupLR);
  EXPECT_EQ(c.lr_schedule.warmup_num_steps, 1000);  // DeepSpeed's default
  EXPECT_EQ(c.lr_schedule.warmup_type, WarmupType::kLog);
  EXPECT_EQ(c.lr_schedule.warmup_max_lr, 3e-4);

  TrainConfig d;
  apply_ds_config(d, R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10,
                  "total_num_steps": 110, "warmup_min_lr": 0.0, "warmup_type": "linear"}}})", "b.json");
  d.lr = 1.0;
  EXPECT_DOUBLE_EQ(d.make_lr_schedule().lr_at(60), 0.5);

  TrainConfig e;
  EXPECT_TRUE(contains(usage_error([&] {
                         apply_ds_config(e, R"({"scheduler": {"type": "OneCycle", "params": {}}})", "c.json");
                       }),
                       "c.json: scheduler.type must be WarmupLR, WarmupDecayLR, WarmupCosineLR or WSD, got \"OneCycle\""));
  EXPECT_TRUE(contains(usage_error([&] {
                         apply_ds_config(e, R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "exp"}}})",
                                         "c.json");
                       }),
                       "scheduler.params.warmup_type"));
}

TEST(DsConfig, WrongTypesNameTheKeyPath) {
  struct Bad {
    const char* json;
    const char* message;
  };
  const Bad cases[] = {
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": 0.9}}})",
       "ds_config.json: optimizer.params.betas must be an array of 2 numbers, got 0.9"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, "x"]}}})",
       "ds_config.json: optimizer.params.betas must be an array of 2 numbers, got [0.9, \"x\"]"},
      {R"({"optimizer": {"type": "Lamb"}})",
       "ds_config.json: optimizer.type must be AdamW, Adam, SGD or Muon, got \"Lamb\""},
      {R"({"optimizer": {"params": {"lr": 1}}})", "ds_config.json: optimizer.type is required"},
      {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})",
       "ds_config.json: optimizer.params.adam_w_mode false"},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": -1}}})",
       "ds_config.json: optimizer.params.lr must be a number >= 0, got -1"},
      {R"({"train_micro_batch_size_per_gpu": "8"})",
       "ds_config.json: train_micro_batch_size_per_gpu must be an integer >= 1, got \"8\""},
      {R"({"gradient_accumulation_steps": 0})",
       "ds_config.json: gradient_accumulation_steps must be an integer >= 1, got 0"},
      {R"({"zero_optimization": {"stage": 4}})",
       "ds_config.json: zero_optimization.stage must be an integer in 0..3, got 4"},
      {R"({"zero_optimization": {"reduce_bucket_size": 1.5}})",
       "ds_config.json: zero_optimization.reduce_bucket_size must be an integer >= 1, got 1.5"},
      {R"({"zero_optimization": {"overlap_comm": "yes"}})",
       "ds_config.json: zero_optimization.overlap_comm must be true or false, got \"yes\""},
      {R"({"zero_optimization": true})", "ds_config.json: zero_optimization must be an object, got true"},
      {R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})",
       "ds_config.json: bf16.enabled and fp16.enabled are both true"},
      {R"({"communication_data_type": "fp8"})",
       "ds_config.json: communication_data_type must be \"fp32\", \"bf16\" or \"fp16\", got \"fp8\""},
      {R"({"fp16": {"min_loss_scale": 0}})", "ds_config.json: fp16.min_loss_scale must be a number > 0, got 0"},
      {R"([1, 2])", "ds_config.json: the top level must be an object"},
      {R"({"train_batch_size": 8,)", "ds_config.json: not valid JSON"},
  };
  for (const Bad& b : cases) {
    TrainConfig c;
    const std::string msg = usage_error([&] { apply_ds_config(c, b.json, "ds_config.json"); });
    EXPECT_TRUE(contains(msg, b.message)) << "for " << b.json << "\n  got: " << msg;
  }
}

TEST(DsConfig, PrecisionSections) {
  TrainConfig c;
  apply_ds_config(c, R"({"fp16": {"enabled": true, "loss_scale": 0}})", "x.json");
  EXPECT_EQ(c.precision.dtype, DType::kF16);
  EXPECT_EQ(c.precision.loss_scale.static_scale, 0.0);
  TrainConfig d;
  d.precision.dtype = DType::kBF16;
  apply_ds_config(d, R"({"bf16": {"enabled": false}})", "x.json");
  EXPECT_EQ(d.precision.dtype, DType::kF32);  // the file speaks about precision and enables nothing
  TrainConfig e;
  e.precision.dtype = DType::kBF16;
  apply_ds_config(e, R"({"gradient_clipping": 0.5})", "x.json");
  EXPECT_EQ(e.precision.dtype, DType::kBF16);  // silent about precision: unchanged
  TrainConfig f;
  apply_ds_config(f, R"({"bfloat16": {"enabled": true}})", "x.json");
  EXPECT_EQ(f.precision.dtype, DType::kBF16);
}

TEST(DsConfig, UnknownKeysAreWarningsNotErrors) {
  TrainConfig c;
  const auto warnings = apply_ds_config(c, R"({
    "wall_clock_breakdown": false,
    "zero_optimization": {"stage": 2, "round_robin_gradients": true, "offload_optimizer": {"device": "none"}},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "momentum": 0.9}},
    "scheduler": {"type": "WarmupLR", "params": {"last_batch_iteration": -1}},
    "fp16": {"auto_cast": false},
    "some_future_key": 1
  })", "ds.json");
  // Tuning keys and unknown keys warn; unimplemented features that are not asked for pass silently.
  EXPECT_EQ(warnings.size(), 5u);
  for (const char* key : {"wall_clock_breakdown", "zero_optimization.round_robin_gradients", "optimizer.params.momentum",
                          "scheduler.params.last_batch_iteration", "some_future_key"})
    EXPECT_TRUE(has_warning_about(warnings, key)) << key;
  EXPECT_FALSE(has_warning_about(warnings, "offload_optimizer"));
  EXPECT_FALSE(has_warning_about(warnings, "auto_cast"));
  EXPECT_EQ(c.zero.stage, 2);  // the known keys still count
  for (const std::string& w : warnings) EXPECT_EQ(w.rfind("ds.json: ", 0), 0u) << w;
}

// Keys that change what a run does and that zerodp does not implement are refused, naming the key,
// when their value asks for the feature: a user must never believe they have it.
TEST(DsConfig, UnimplementedFeaturesThatAreAskedForAreRefused) {
  struct Case {
    const char* json;
    const char* key;
  };
  const Case cases[] = {
      {R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})",
       "zero_optimization.offload_optimizer.ratio"},
      {R"({"zero_optimization": {"mics_hierarchical_params_gather": true}})",
       "zero_optimization.mics_hierarchical_params_gather"},
      {R"({"zero_optimization": {"zeropp_loco_param": {"err_beta": 0.8}}})", "zero_optimization.zeropp_loco_param"},
      {R"({"fp16": {"enabled": true, "auto_cast": true}})", "fp16.auto_cast"},
      {R"({"gradient_predivide_factor": 2.0})", "gradient_predivide_factor"},
      {R"({"prescale_gradients": true})", "prescale_gradients"},
      {R"({"elasticity": {"enabled": true, "max_train_batch_size": 64}})", "elasticity"},
      {R"({"curriculum_learning": {"enabled": true}})", "curriculum_learning"},
      {R"({"activation_checkpointing": {"partition_activations": true}})",
       "activation_checkpointing.partition_activations"},
  };
  for (const Case& k : cases) {
    TrainConfig c;
    const std::string msg = usage_error([&] { apply_ds_config(c, k.json, "ds.json"); });
    EXPECT_TRUE(contains(msg, std::string("ds.json: ") + k.key)) << k.json << "\n  got: " << msg;
    EXPECT_TRUE(contains(msg, "not")) << msg;  // "not implemented", "not supported"
  }
  // The same keys asking for nothing are accepted.
  for (const char* ok : {R"({"zero_optimization": {"offload_optimizer": {"device": "none"}}})",
                         R"({"zero_optimization": {"zero_hpz_partition_size": 1, "mics_shard_size": -1}})",
                         R"({"gradient_predivide_factor": 1.0, "prescale_gradients": false})",
                         R"({"elasticity": {"enabled": false}, "fp16": {"auto_cast": false}})"}) {
    TrainConfig c;
    EXPECT_NO_THROW(apply_ds_config(c, ok, "ds.json")) << ok;
  }
}

// Hybrid sharding: --shard-group-size N|node and DeepSpeed's mics_shard_size (MiCS) map to the same
// setting; the flag wins; N must divide W and needs a sharded stage; hpZ (another meaning: a secondary
// copy of stage 3's parameters) is its own setting, refused together with hybrid sharding.
TEST(DsConfig, HybridShardingFromTheFlagAndMicsShardSize) {
  TrainConfig c = runnable();
  apply_ds_config(c, R"({"zero_optimization": {"stage": 2, "mics_shard_size": 2}})", "ds.json");
  EXPECT_EQ(c.zero.shard_group_size, 2);
  EXPECT_NO_THROW(c.validate(4));
  EXPECT_TRUE(contains(usage_error([&] { c.validate(3); }), "--shard-group-size"));  // 2 does not divide 3
  apply_flag(c, "--shard-group-size", "node");
  EXPECT_EQ(c.zero.shard_group_size, zero::ZeroSettings::kShardGroupNode);
  EXPECT_EQ(c.to_json()["zero"]["shard_group_size"], "node");
  apply_flag(c, "--shard-group-size", "4");
  EXPECT_EQ(c.zero.shard_group_size, 4);
  for (const char* bad : {"0", "-2", "two", ""})
    EXPECT_TRUE(contains(usage_error([&] { apply_flag(c, "--shard-group-size", bad); }), "--shard-group-size")) << bad;
  c.zero.stage = 0;
  {
    const std::string msg = usage_error([&] { c.validate(4); });
    EXPECT_TRUE(contains(msg, "stage 0")) << msg;
  }
  TrainConfig off = runnable();
  apply_ds_config(off, R"({"zero_optimization": {"mics_shard_size": -1}})", "ds.json");
  EXPECT_EQ(off.zero.shard_group_size, 0);
  apply_ds_config(off, R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2}})", "ds.json");
  EXPECT_EQ(off.zero.zero_hpz_partition_size, 2);
  EXPECT_EQ(off.zero.shard_group_size, 0);
  EXPECT_NO_THROW(off.validate(4));
  EXPECT_TRUE(contains(usage_error([&] { off.validate(3); }), "--hpz-partition-size"));  // 2 does not divide 3
  off.zero.shard_group_size = 2;
  EXPECT_TRUE(contains(usage_error([&] { off.validate(4); }), "--shard-group-size"));
}

// ZeRO++'s qwZ and hpZ by DeepSpeed's keys and the flags: stage 3 only, not with parameter offload.
TEST(DsConfig, ZeroPlusPlusWeightsAndSecondaryPartition) {
  TrainConfig c = runnable();
  apply_ds_config(c, R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true, "zero_hpz_partition_size": 2}})",
                  "ds.json");
  EXPECT_TRUE(c.zero.zero_quantized_weights);
  EXPECT_EQ(c.zero.zero_hpz_partition_size, 2);
  EXPECT_NO_THROW(c.validate(4));
  EXPECT_EQ(c.to_json()["zero"]["zero_quantized_weights"], true);
  EXPECT_EQ(c.to_json()["zero"]["zero_hpz_partition_size"], 2);
  c.zero.stage = 2;
  EXPECT_TRUE(contains(usage_error([&] { c.validate(4); }), "stage 3"));
  TrainConfig flags = runnable();
  apply_flag(flags, "--zero-stage", "3");
  apply_flag(flags, "--zero-quantized-weights", "true");
  apply_flag(flags, "--offload-param", "cpu");
  EXPECT_TRUE(contains(usage_error([&] { flags.validate(4); }), "--offload-param"));
  flags.zero.offload_param = zero::Offload::kNone;
  apply_flag(flags, "--hpz-partition-size", "0");
  EXPECT_TRUE(contains(usage_error([&] { flags.validate(4); }), "--hpz-partition-size"));
  // qgZ: where gradients are reduce-scattered every micro-step (stages 2 and 3).
  TrainConfig g = runnable();
  apply_ds_config(g, R"({"zero_optimization": {"stage": 2, "zero_quantized_gradients": true}})", "ds.json");
  EXPECT_TRUE(g.zero.zero_quantized_gradients);
  EXPECT_NO_THROW(g.validate(4));
  g.zero.stage = 1;
  EXPECT_TRUE(contains(usage_error([&] { g.validate(4); }), "--zero-quantized-gradients"));
}

TEST(DsConfig, DeepOrHugeDocumentsAreRefusedShortly) {
  TrainConfig c;
  const std::string deep = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const std::string msg = usage_error([&] { apply_ds_config(c, deep, "ds.json"); });
  EXPECT_TRUE(contains(msg, "ds.json: JSON nested deeper than")) << msg.substr(0, 200);
  EXPECT_LT(msg.size(), 120u);
  const std::string big = "{\"x\": \"" + std::string(2 << 20, 'x') + "\"}";
  EXPECT_TRUE(contains(usage_error([&] { apply_ds_config(c, big, "ds.json"); }), "over the"));
  // A long value is described, not echoed.
  const std::string long_value = "{\"zero_optimization\": {\"stage\": \"" + std::string(5000, 's') + "\"}}";
  const std::string m2 = usage_error([&] { apply_ds_config(c, long_value, "ds.json"); });
  EXPECT_LT(m2.size(), 200u) << m2.size();
  EXPECT_TRUE(contains(m2, "(5000 bytes)")) << m2;
}

TEST(DsConfig, LoadNamesAMissingFile) {
  TrainConfig c;
  const std::string msg = usage_error([&] { load_ds_config(c, "/nonexistent/ds.json"); });
  EXPECT_TRUE(contains(msg, "/nonexistent/ds.json")) << msg;
}


}  // namespace
}  // namespace zerodp::train
