#include "kernels/dispatch.h"

#include "core/cpu.h"

namespace zerodp::kernels {

const char* kernels_isa() {
#if ZDP_KERNELS_DISPATCHED
  return runs_x86_64_v4() ? "x86-64-v4" : "x86-64-v3";
#else
  return "build target";
#endif
}

}  // namespace zerodp::kernels
