#include "model/config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::model {

void GPT2Config::validate() const {
  ZDP_REQUIRE(n_layer > 0, "n_layer must be positive, got {}", n_layer);
  ZDP_REQUIRE(n_head > 0, "n_head must be positive, got {}", n_head);
  ZDP_REQUIRE(n_embd > 0, "n_embd must be positive, got {}", n_embd);
  ZDP_REQUIRE(vocab_size > 0, "vocab_size must be positive, got {}", vocab_size);
  ZDP_REQUIRE(n_ctx > 0, "n_ctx must be positive, got {}", n_ctx);
  ZDP_REQUIRE(n_embd % n_head == 0, "n_embd ({}) must be divisible by n_head ({})", n_embd, n_head);
}

nlohmann::json GPT2Config::to_metadata() const {
  return {{"n_layer", std::to_string(n_layer)},
          {"n_head", std::to_string(n_head)},
          {"n_embd", std::to_string(n_embd)},
          {"vocab_size", std::to_string(vocab_size)},
          {"n_ctx", std::to_string(n_ctx)}};
}

std::string GPT2Config::summary() const {
  return fmt::format("L{} H{} C{} V{} N{}", n_layer, n_head, n_embd, vocab_size, n_ctx);
}

}  // namespace zerodp::model
