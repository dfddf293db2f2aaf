// Included once at the end of a dispatched kernel source's first pass (kernels/dispatch.h says why):
// includes ZDP_KERNEL_SOURCE again, as the x86-64-v4 copy and then as the public functions.
// No include guard: each kernel source includes it once.
#if !defined(ZDP_KERNEL_SOURCE) || defined(ZDP_KERNEL_PASS)
#error "kernels/dispatch_passes.h: define ZDP_KERNEL_SOURCE, and include this from a kernel source's first pass"
#endif

#if ZDP_KERNELS_DISPATCHED
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define ZDP_KERNEL_PASS 4
#define ZDP_KERNEL_TO_V4(name, ...)
namespace zerodp::kernels::v4 {
#include ZDP_KERNEL_SOURCE
}  // namespace zerodp::kernels::v4
#undef ZDP_KERNEL_TO_V4
#undef ZDP_KERNEL_PASS
#pragma GCC pop_options
#define ZDP_KERNEL_TO_V4(name, ...) \
  if (::zerodp::kernels::runs_x86_64_v4()) return v4::name(__VA_ARGS__)
#else
#define ZDP_KERNEL_TO_V4(name, ...)
#endif

#define ZDP_KERNEL_PASS 3
namespace zerodp::kernels {
#include ZDP_KERNEL_SOURCE
}  // namespace zerodp::kernels
#undef ZDP_KERNEL_PASS
#undef ZDP_KERNEL_TO_V4
