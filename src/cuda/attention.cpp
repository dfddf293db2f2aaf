// The CUDA attention's shape check (cuda/attention.h): in a .cpp because the error messages use fmt,
// which nvcc cannot compile; attention.cu calls it before every launch.
#include "cuda/attention.h"

#include <cstdint>

#include "core/error.h"
#include "cuda/attention_tiling.h"

namespace zerodp::cuda {

void check_attention_shape(const char* what, DType dtype, int B, int T, int C, int NH) {
  ZDP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "{}: the CUDA attention computes in bf16 or fp16, not {}",
            what, dtype_name(dtype));
  ZDP_CHECK(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0,
            "{}: bad shape B={} T={} C={} NH={} (C must be a multiple of NH)", what, B, T, C, NH);
  const int hs = C / NH;
  ZDP_CHECK(attn::supported_head_size(hs),
            "{}: head size {} (C={} / NH={}) is not supported by the CUDA attention (32, 64 or 128)", what, hs, C,
            NH);
  ZDP_CHECK(attn::grid_fits(B, T, NH, hs), "{}: B={} T={} NH={} exceeds the CUDA attention's grid (B·NH < 2^31, T ≤ {})",
            what, B, T, NH, attn::kMaxGridY * attn::min_int(attn::block_rows(hs), attn::block_cols(hs)));
  ZDP_CHECK(static_cast<int64_t>(B) * T * 3 * C < (int64_t{1} << 62), "{}: B={} T={} C={} is too large", what, B,
            T, C);
}

size_t attention_backward_scratch_bytes(int B, int T, int NH) {
  return static_cast<size_t>(B) * NH * T * sizeof(float);
}

}  // namespace zerodp::cuda
