// What OpenMPI allocates and keeps for the life of the process (its start, its components' caches, its
// progress and collective state) is not a leak of zerodp's. Under LeakSanitizer the threads and calls
// that run OpenMPI's code mark their allocations so (__lsan_disable: ignored while the scope lives, on
// this thread), which lets the sanitized tests use the fast unwinder: OpenMPI is built without frame
// pointers, so with it the stacks of those allocations stop at OpenMPI's first frame, often in a
// component MPI_Finalize has already unloaded, and no suppression could name them. zerodp's own
// allocations on other threads keep their whole stacks and their leak reports.
#pragma once

#include "core/sanitizers.h"

#ifdef ZERODP_LSAN
#include <sanitizer/lsan_interface.h>
#endif

namespace zerodp::comm {

class MpiLeakScope {
 public:
#ifdef ZERODP_LSAN
  MpiLeakScope() { __lsan_disable(); }
  ~MpiLeakScope() { __lsan_enable(); }
#else
  MpiLeakScope() {}  // user-provided: a scope variable is used, not an unused one
  ~MpiLeakScope() {}
#endif
  MpiLeakScope(const MpiLeakScope&) = delete;
  MpiLeakScope& operator=(const MpiLeakScope&) = delete;
};

}  // namespace zerodp::comm
