// The tensor-core attention's GPU side of the warp machine (see cuda/attention_tc_warp.h): the
// instructions themselves (ldmatrix, mma.sync, the quad shuffles) and the global -> shared tile copies
// (cp.async). Included by cuda/attention_tc.cu and by its GPU test (tests/cuda_gpu/test_attention_tc.cu),
// which checks these very instructions against the layouts of cuda/attention_tc_tiling.h. CUDA only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/attention_tc_tiling.h"
#include "cuda/attention_tc_warp.h"
#include "cuda/hd.h"

namespace zerodp::cuda::attn_tc {

// ---- the GPU's warp machine (see attention_tc_warp.h) ------------------------------------------------
// Members are __host__ __device__ so that the shared warp code type-checks in both compilation passes;
// only the device pass emits them (the kernels are their only callers).
struct DeviceWarp {
  int lane;

  template <class T>
  struct Lanes {
    T v;
    ZDP_HD ZDP_TC_INLINE T& operator[](int) { return v; }
    ZDP_HD ZDP_TC_INLINE const T& operator[](int) const { return v; }
  };

  template <class Fn>
  ZDP_HD ZDP_TC_INLINE void each(Fn&& f) const {
    f(lane);
  }

  template <bool kTrans, class Dst, class Off>
  ZDP_HD ZDP_TC_INLINE void ldsm_x4(Dst&& dst, const uint16_t* base, Off&& off) const {
#ifdef __CUDA_ARCH__
    uint32_t* d = dst(lane);
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(base + off(lane)));
    if constexpr (kTrans)
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                   : "r"(addr));
    else
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                   : "r"(addr));
#endif
  }

  template <Fmt16 F, class D, class A, class B>
  ZDP_HD ZDP_TC_INLINE void mma(D&& dacc, A&& aacc, B&& bacc) const {
#ifdef __CUDA_ARCH__
    float* d = dacc(lane);
    const uint32_t* a = aacc(lane);
    const uint32_t* b = bacc(lane);
    if constexpr (F == Fmt16::kBf16)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }

  template <class X>
  ZDP_HD ZDP_TC_INLINE void quad_max(X&& x) const {
#ifdef __CUDA_ARCH__
    float* v = x(lane);
    *v = fmaxf(*v, __shfl_xor_sync(0xffffffffu, *v, 1));
    *v = fmaxf(*v, __shfl_xor_sync(0xffffffffu, *v, 2));
#endif
  }

  template <class X>
  ZDP_HD ZDP_TC_INLINE void quad_sum(X&& x) const {
#ifdef __CUDA_ARCH__
    float* v = x(lane);
    *v = *v + __shfl_xor_sync(0xffffffffu, *v, 1);
    *v = *v + __shfl_xor_sync(0xffffffffu, *v, 2);
#endif
  }
};

// ---- global -> shared copies (cp.async, sm_80) -------------------------------------------------------
// 16 bytes, or 16 zero bytes when !valid (src is then not read; it must still be a valid address).
__device__ ZDP_TC_INLINE void cp_async16(void* smem, const void* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ ZDP_TC_INLINE void cp_async4(void* smem, const void* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ ZDP_TC_INLINE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ ZDP_TC_INLINE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Rows row0..row0+rows−1 (head columns 0..HS−1) of a global [T, stride] view into a shared tile (row
// stride tc_ld(HS)); rows ≥ T are zero (masked, or never stored: the zeros keep NaNs out of the sums).
template <int HS>
__device__ ZDP_TC_INLINE void load_rows_async(uint16_t* tile, const uint16_t* src, ptrdiff_t stride, int row0, int rows,
                                              int T) {
  for (int id = static_cast<int>(threadIdx.x); id < rows * (HS / 8); id += kTcThreads) {
    const int r = tile_chunk_row(id, HS), col = tile_chunk_col(id, HS), t = row0 + r;
    const bool ok = t < T;
    cp_async16(tile + r * tc_ld(HS) + col, src + (ok ? static_cast<ptrdiff_t>(t) * stride : 0) + col, ok);
  }
}
// Entries row0..row0+rows−1 of a per-row fp32 statistic (L or D); zero for rows ≥ T.
__device__ ZDP_TC_INLINE void load_stats_async(float* dst, const float* src, int row0, int rows, int T) {
  for (int id = static_cast<int>(threadIdx.x); id < rows; id += kTcThreads) {
    const int t = row0 + id;
    const bool ok = t < T;
    cp_async4(dst + id, src + (ok ? t : 0), ok);
  }
}

}  // namespace zerodp::cuda::attn_tc
