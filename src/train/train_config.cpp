#include "train/train_config.h"

#include <type_traits>
#include <variant>

#include "optim/lr_schedule.h"

namespace zerodp::train {

using json = nlohmann::json;
using optim::LrScheduleKind;
using optim::LrScheduleParams;
using optim::OptimizerKind;

optim::LrSchedule TrainConfig::make_lr_schedule() const { return optim::LrSchedule(lr_schedule, lr, steps); }

namespace {

// The zero_optimization settings of the table, each under its JSON name, with the values typed.
json zero_json(const zero::ZeroSettings& z) {
  json out = json::object();
  for (const zero::ZeroSettingRow& row : zero::zero_setting_rows()) {
    if (row.json_key.empty()) continue;
    std::visit(
        [&](auto field) {
          using T = std::remove_cvref_t<decltype(z.*field)>;
          if constexpr (std::is_same_v<T, zero::Offload>)
            out[std::string(row.json_key)] = zero::offload_name(z.*field);
          else
            out[std::string(row.json_key)] = z.*field;
        },
        row.field);
  }
  return out;
}

}  // namespace

json TrainConfig::to_json() const {
  auto opt_int = [](const std::optional<int64_t>& x) { return x ? json(*x) : json(nullptr); };
  json optimizer_json;
  if (optimizer.kind == OptimizerKind::kAdamW) {
    optimizer_json = {{"type", optim::optimizer_name(optimizer.kind)},
                      {"lr", lr},
                      {"betas", {optimizer.beta1, optimizer.beta2}},
                      {"eps", optimizer.eps},
                      {"weight_decay", optimizer.weight_decay}};
  } else if (optimizer.kind == OptimizerKind::kMuon) {
    optimizer_json = {{"type", optim::optimizer_name(optimizer.kind)},
                      {"lr", lr},
                      {"adam_lr", adam_lr > 0 ? adam_lr : lr},
                      {"momentum", optimizer.momentum},
                      {"nesterov", optimizer.nesterov},
                      {"betas", {optimizer.beta1, optimizer.beta2}},
                      {"eps", optimizer.eps},
                      {"weight_decay", optimizer.weight_decay}};
  } else {
    optimizer_json = {{"type", optim::optimizer_name(optimizer.kind)},
                      {"lr", lr},
                      {"momentum", optimizer.momentum},
                      {"dampening", optimizer.dampening},
                      {"nesterov", optimizer.nesterov},
                      {"weight_decay", optimizer.weight_decay}};
  }
  const LrScheduleParams& p = lr_schedule;
  json schedule = {{"type", optim::lr_schedule_name(p.kind)}};
  if (p.kind != LrScheduleKind::kConstant) {
    schedule["warmup_num_steps"] = p.warmup_num_steps;
    schedule["warmup_type"] = optim::warmup_type_name(p.warmup_type);
    schedule["total_num_steps"] = p.total_num_steps > 0 ? p.total_num_steps : steps;
    if (p.kind == LrScheduleKind::kWarmupCosineLR) {
      schedule["warmup_min_ratio"] = p.warmup_min_ratio;
      schedule["cos_min_ratio"] = p.cos_min_ratio;
    } else {
      schedule["warmup_min_lr"] = p.warmup_min_lr;
      schedule["warmup_max_lr"] = p.warmup_max_lr.value_or(lr);
    }
    if (p.kind == LrScheduleKind::kWSD) {
      schedule["decay_num_steps"] = p.decay_num_steps;
      schedule["decay_type"] = optim::decay_type_name(p.decay_type);
    }
  }
  const zero::LossScaleConfig& scaling = precision.loss_scale;
  json zero_settings = zero_json(zero);
  zero_settings["shard_group_size"] =
      zero.shard_group_size == zero::ZeroSettings::kShardGroupNode ? json("node") : json(zero.shard_group_size);
  zero_settings["nvme_path"] = zero.nvme_path;
  zero_settings["comm_timeout"] = comm_timeout;
  zero_settings["collectives"] = collectives;
  return json{
      {"init", init_path},
      {"data", data_path},
      {"metrics", metrics_path},
      {"log_csv", log_csv_path},
      {"out", out_path},
      {"out_dtype", out_dtype ? json(dtype_name(*out_dtype)) : json(nullptr)},
      {"out_shard_size", out_shard_size},
      {"config", config_path},
      {"save_dir", save_dir},
      {"save_every", save_every},
      {"keep", keep},
      {"async_save", async_save},
      {"resume", resume_path},
      {"steps", steps},
      {"micro_batch", micro_batch},
      {"seq", seq},
      {"accum", accum},
      {"train_batch_size", opt_int(train_batch_size)},
      {"optimizer", optimizer_json},
      {"clip", clip},
      {"lr_schedule", schedule},
      {"dtype", dtype_name(precision.dtype)},
      {"reduce_dtype", dtype_name(precision.grad_reduce_dtype())},
      {"fp32_grad_accum", precision.fp32_grad_accum},
      {"bf16_optimizer_states", precision.bf16_optimizer_states},
      {"bf16_master_weights", precision.bf16_master_weights},
      {"activation_checkpointing", zero.activation_checkpointing},
      {"fp16",
       {{"loss_scale", scaling.static_scale},
        {"initial_scale_power", scaling.initial_scale_power},
        {"loss_scale_window", scaling.window},
        {"hysteresis", scaling.hysteresis},
        {"consecutive_hysteresis", scaling.consecutive_hysteresis},
        {"min_loss_scale", scaling.min_scale},
        {"max_overflows_at_min_scale", scaling.max_overflows_at_min_scale}}},
      {"skip_nonfinite", skip_nonfinite},
      {"zero", zero_settings},
      {"memory_budget", memory_budget ? json(*memory_budget) : json(nullptr)},
      {"device", device},
      {"seed", seed},
      {"shuffle", shuffle},
      {"packing", packing},
      {"log_every", log_every},
      {"eval", {{"val_data", val_data_path}, {"eval_every", eval_every}, {"eval_tokens", eval_tokens}}},
  };
}

}  // namespace zerodp::train