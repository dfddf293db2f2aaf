// libFuzzer target: a DeepSpeed JSON configuration, through what `zerodp train --config` does with
// one: apply_ds_config onto the defaults, then (with the files set that validate() requires) the
// world-size checks of finalize() for 1 and 3 ranks, and what the trainer derives from the result
// (optimizer spec, lr schedule, tokens per step, the settings' JSON for manifests and metrics).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const int world_size : {1, 3}) {
    zerodp::fuzz::only_zerodp_errors("ds_config", [&] {
      zerodp::train::TrainConfig cfg;
      cfg.init_path = "init.safetensors";
      cfg.data_path = "tokens.bin";
      const auto warnings = zerodp::train::apply_ds_config(cfg, text, "fuzz/ds_config.json");
      for (const auto& w : warnings) (void)w.size();
      cfg.finalize(world_size);
      (void)cfg.optimizer_spec();
      (void)cfg.make_lr_schedule();
      (void)cfg.tokens_per_step(world_size);
      (void)cfg.to_json().dump();
    });
  }
  return 0;
}
