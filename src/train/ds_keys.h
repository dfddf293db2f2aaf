// The DeepSpeed keys zerodp reads nothing from, as data: those it refuses when their value asks for a
// feature zerodp does not implement, and those that only tune DeepSpeed's own implementation.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace zerodp::train {

// A key that changes what a run computes or where its state lives: refused when `asks(value)`.
struct UnsupportedDsKey {
  const char* path;
  bool (*asks)(const nlohmann::json& value);
  const char* what;  // why it is refused
};
// The entry for this key path ("zero_optimization.zero_quantized_weights"); null when none.
const UnsupportedDsKey* find_unsupported_ds_key(const std::string& path);

// Why a key (or a key under it) only tunes DeepSpeed itself; null when it is not one of those.
const char* ds_tuning_hint(const std::string& path);

}  // namespace zerodp::train
