# Sourced (bash) before running a sanitized build's tests (scripts/test_sanitized.sh does): the run-time
# options of ASan, LeakSanitizer and UBSan, and the suppression files next to this one. Every process
# the tests start inherits them, ranks under mpirun included (mpirun's local ranks get its environment).
#
# A sanitizer finding, a leak at exit included, exits with 86, a code zerodp never uses, so a test
# that expects an exit code of 1 (a failing rank) or 2 (bad input) cannot mistake a finding for the
# expected failure. fast_unwind_on_malloc=0: whole
# allocation stacks through OpenMPI's libraries (built without frame pointers), which the leak
# suppressions need (lsan.supp); it costs some speed on every allocation.
zerodp_sanitizers_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:exitcode=86:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2:suppressions=$zerodp_sanitizers_dir/asan.supp${ZERODP_ASAN_EXTRA:+:$ZERODP_ASAN_EXTRA}"
export LSAN_OPTIONS="suppressions=$zerodp_sanitizers_dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:suppressions=$zerodp_sanitizers_dir/ubsan.supp"
unset zerodp_sanitizers_dir
