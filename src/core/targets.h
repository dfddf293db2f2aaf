// The target id of a position whose next token is not predicted (an instruction prompt's, a pad's):
// the cross-entropy kernels give it a loss of 0 and a zero gradient, and the loss is averaged over the
// other targets only (docs/reference/data-order.md#instruction-data). PyTorch's ignore_index is
// −100; zerodp's token files never hold a negative id, so −1 cannot be a token.
#pragma once

#include <cstdint>

namespace zerodp {

inline constexpr int32_t kIgnoreTarget = -1;

}  // namespace zerodp
