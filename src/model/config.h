// GPT-2's hyper-parameters (contract §1).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace zerodp::model {

struct GPT2Config {
  int n_layer = 0;     // L
  int n_head = 0;      // H
  int n_embd = 0;      // C
  int vocab_size = 0;  // V
  int n_ctx = 0;       // N, the longest sequence (rows of wpe)

  // UsageError naming the field when a size is not positive or C is not divisible by H.
  void validate() const;
  int head_size() const { return n_embd / n_head; }
  // The safetensors __metadata__ (string values, contract §2): n_layer, n_head, n_embd, vocab_size, n_ctx.
  nlohmann::json to_metadata() const;
  // "L2 H4 C64 V256 N128"
  std::string summary() const;
  bool operator==(const GPT2Config&) const = default;
};

}  // namespace zerodp::model
