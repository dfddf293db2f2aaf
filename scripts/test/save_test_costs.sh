#!/usr/bin/env bash
# Saves the test durations of a full ctest run as tests/ctest_costs.txt, in CTest's cost-data format
# ("name runs seconds" a line, longest first). scripts/test.sh and scripts/test_sanitized.sh hand that
# file to a build's first ctest run (a fresh clone has none): only with the durations does ctest start
# the longest tests first, which on 2 cores lets the tests labelled waits run beside the computing
# ones instead of after them (measured: the normal tests of a fresh clone took 950 s of wall time for
# 1193 s of tests without the file; a build that had the durations, 703 s for 1062 s).
# Usage: scripts/test/save_test_costs.sh LOG     (LOG: ctest's console output of a full run, as
#        scripts/test.sh prints it)
set -euo pipefail
cd "$(dirname "$0")/../.."
log=${1:?usage: save_test_costs.sh CTEST_LOG}
# "  12/827 Test #736: slurm_srun ......   Passed   29.59 sec": every test's last duration.
awk '/ Test +#[0-9]+: / && / sec$/ { name = $4; t[name] = $(NF - 1) }
     END { for (n in t) printf "%s 1 %.2f\n", n, t[n] }' "$log" | sort -k3 -g -r > tests/ctest_costs.txt
[ -s tests/ctest_costs.txt ] || { echo "save_test_costs.sh: no test durations in $log" >&2; exit 1; }
echo "tests/ctest_costs.txt: $(wc -l < tests/ctest_costs.txt) tests, $(awk '{s += $3} END {printf "%.0f", s}' tests/ctest_costs.txt) s in all"
