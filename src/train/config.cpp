#include "train/config.h"

#include "optim/lr_schedule.h"

namespace zerodp::train {

using json = nlohmann::json;
using optim::LrScheduleKind;
using optim::LrScheduleParams;
using optim::OptimizerKind;

optim::LrSchedule TrainConfig::make_lr_schedule() const { return optim::LrSchedule(lr_schedule, lr, steps); }

json TrainConfig::to_json() const {
  auto opt_int = [](const std::optional<int64_t>& x) { return x ? json(*x) : json(nullptr); };
  json optimizer_json;
  if (optimizer.kind == OptimizerKind::kAdamW) {
    optimizer_json = {{"type", optim::optimizer_name(optimizer.kind)},
                      {"lr", lr},
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
  return json{
      {"init", init_path},
      {"data", data_path},
      {"metrics", metrics_path},
      {"log_csv", log_csv_path},
      {"out", out_path},
      {"config", config_path},
      {"save_dir", save_dir},
      {"save_every", save_every},
      {"keep", keep},
      {"resume", resume_path},
      {"steps", steps},
      {"micro_batch", micro_batch},
      {"seq", seq},
      {"accum", accum},
      {"train_batch_size", opt_int(train_batch_size)},
      {"optimizer", optimizer_json},
      {"clip", clip},
      {"lr_schedule", schedule},
      {"dtype", dtype_name(dtype)},
      {"reduce_dtype", dtype_name(grad_reduce_dtype())},
      {"fp32_grad_accum", fp32_grad_accum},
      {"activation_checkpointing", activation_checkpointing},
      {"fp16",
       {{"loss_scale", loss_scale},
        {"initial_scale_power", initial_scale_power},
        {"loss_scale_window", loss_scale_window},
        {"hysteresis", hysteresis},
        {"consecutive_hysteresis", consecutive_hysteresis},
        {"min_loss_scale", min_loss_scale},
        {"max_overflows_at_min_scale", max_overflows_at_min_scale}}},
      {"skip_nonfinite", skip_nonfinite},
      {"zero",
       {{"stage", zero_stage},
        {"reduce_bucket_size", reduce_bucket_size},
        {"allgather_bucket_size", allgather_bucket_size},
        {"overlap_comm", overlap_comm},
        {"contiguous_gradients", contiguous_gradients},
        {"stage3_prefetch_bucket_size", stage3_prefetch_bucket_size},
        {"stage3_max_live_parameters", stage3_max_live_parameters},
        {"stage3_param_persistence_threshold", stage3_param_persistence_threshold},
        {"reshard_after_forward", reshard_after_forward},
        {"shard_group_size", shard_group_size == kShardGroupNode ? json("node") : json(shard_group_size)},
        {"comm_timeout", comm_timeout},
        {"offload_optimizer", zero::offload_name(offload_optimizer)},
        {"sub_group_size", sub_group_size},
        {"offload_optimizer_buffer_count", optimizer_buffer_count},
        {"offload_param", zero::offload_name(offload_param)},
        {"offload_param_buffer_count", param_buffer_count},
        {"offload_param_max_in_cpu", param_max_in_cpu},
        {"nvme_path", nvme_path}}},
      {"memory_budget", memory_budget ? json(*memory_budget) : json(nullptr)},
      {"device", device},
      {"seed", seed},
      {"shuffle", shuffle},
      {"log_every", log_every},
      {"eval", {{"val_data", val_data_path}, {"eval_every", eval_every}, {"eval_tokens", eval_tokens}}},
      {"inject_overflow", {{"step", inject_overflow_step}, {"rank", inject_overflow_rank}, {"unit", inject_overflow_unit}}},
  };
}

}  // namespace zerodp::train