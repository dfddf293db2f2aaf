# Sourced (bash) before running a sanitized build's tests (scripts/test_sanitized.sh does): the run-time
# options of ASan, LeakSanitizer and UBSan, and the suppression files next to this one. Every process
# the tests start inherits them, ranks under mpirun included (mpirun's local ranks get its environment).
#
# A sanitizer finding, a leak at exit included, exits with 86, a code zerodp never uses, so a test
# that expects an exit code of 1 (a failing rank) or 2 (bad input) cannot mistake a finding for the
# expected failure. fast_unwind_on_malloc=0: whole
# allocation stacks through OpenMPI's libraries (built without frame pointers), which the leak
# suppressions need (lsan.supp); it costs some speed on every allocation.
# intercept_tls_get_addr=0: GCC 12's sanitizers remember the dynamic-TLS ranges they saw through
# __tls_get_addr after the module that owned them is unloaded (OpenMPI dlcloses its MCA components in
# MPI_Finalize), and LeakSanitizer's tracer then faults reading a stale range at exit ("Tracer caught
# signal 11"; with LSAN_OPTIONS=verbosity=1 the thread's "DTLS" range is garbage). Seen at 4 ranks with
# --config (hybrid_usage, 2026-11-25), deterministic there. Without the interception LSan leaves dynamic
# TLS out of its roots: only dlopened modules have any, and zerodp is linked, not dlopened, so none of
# its roots is lost.
zerodp_sanitizers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:intercept_tls_get_addr=0:exitcode=86:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2:suppressions=$zerodp_sanitizers_dir/asan.supp${ZERODP_ASAN_EXTRA:+:$ZERODP_ASAN_EXTRA}"
export LSAN_OPTIONS="suppressions=$zerodp_sanitizers_dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:suppressions=$zerodp_sanitizers_dir/ubsan.supp"
unset zerodp_sanitizers_dir
