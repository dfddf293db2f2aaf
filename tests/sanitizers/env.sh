# Sourced (bash) before running a sanitized build's tests (scripts/test_sanitized.sh does): the run-time
# options of ASan, LeakSanitizer and UBSan, and the suppression files next to this one. Every process
# the tests start inherits them, ranks under mpirun included (mpirun's local ranks get its environment).
#
# A sanitizer finding, a leak at exit included, exits with 86, a code zerodp never uses, so a test
# that expects an exit code of 1 (a failing rank) or 2 (bad input) cannot mistake a finding for the
# expected failure.
# Leaks and the fast unwinder (fast_unwind_on_malloc=1, the default; 13× faster than the slow one on
# the malloc-heavy tokenizer tests): OpenMPI is built without frame pointers, so the stacks of its own
# allocations stop at its first frame. Those made on zerodp's threads while they run OpenMPI's code
# (MPI_Init, MPI_Finalize, the communication and status threads) are marked ignored by zerodp itself
# (comm/mpi_leak_scope.h); those of OpenMPI's own threads keep the module of their first frame, which
# lsan.supp names, as long as the module is still mapped at exit: keep_loaded.c, preloaded into every
# process of the tests, makes dlclose do nothing. The first argument, when given, is where to build it
# (the sanitized build's directory); without one nothing is preloaded and OpenMPI's leaks may be reported.
# intercept_tls_get_addr=0: GCC 12's sanitizers remember the dynamic-TLS ranges they saw through
# __tls_get_addr after the module that owned them is unloaded (OpenMPI dlcloses its MCA components in
# MPI_Finalize), and LeakSanitizer's tracer then faults reading a stale range at exit ("Tracer caught
# signal 11"; with LSAN_OPTIONS=verbosity=1 the thread's "DTLS" range is garbage). Seen at 4 ranks with
# --config (hybrid_usage, 2026-11-25), deterministic there. Without the interception LSan leaves dynamic
# TLS out of its roots: only dlopened modules have any, and zerodp is linked, not dlopened, so none of
# its roots is lost.
zerodp_sanitizers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n ${1:-} ]]; then
  # Built without sanitizers: it is preloaded into mpirun, bash and python too.
  cc -shared -fPIC -O1 -o "$1/libzerodp_keep_loaded.so" "$zerodp_sanitizers_dir/keep_loaded.c"
  export LD_PRELOAD="$(realpath "$1")/libzerodp_keep_loaded.so${LD_PRELOAD:+:$LD_PRELOAD}"
fi
# verify_asan_link_order=0: the preloaded library comes before libasan in the load order.
export ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0:intercept_tls_get_addr=0:exitcode=86:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2:suppressions=$zerodp_sanitizers_dir/asan.supp${ZERODP_ASAN_EXTRA:+:$ZERODP_ASAN_EXTRA}"
export LSAN_OPTIONS="suppressions=$zerodp_sanitizers_dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:suppressions=$zerodp_sanitizers_dir/ubsan.supp"
unset zerodp_sanitizers_dir
