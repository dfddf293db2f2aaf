#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz: safetensors, tokens, manifest, ds_config, tokenizer, regex,
# added_trie) with Clang's libFuzzer,
# ASan and UBSan in build-fuzz/, then runs each for SECONDS (default 60) from its seed corpus and
# prints its corpus size, executions per second and total executions. Exit status: 0 when no target
# found anything; otherwise 1, with the report and the saved input (build-fuzz/fuzz/<target>/artifacts/).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (SECONDS 0: only build)
# Environment: FUZZ_JOBS=N runs N targets at a time (default 1); FUZZ_BUILD_DIR (default build-fuzz;
# .ci/run gives build-asan, whose Clang build of scripts/test_sanitized.sh has the targets already).
# The working corpora under build-fuzz/fuzz/<target>/corpus grow from run to run; the seed corpus of
# the repository (tests/fuzz/corpus/) is never written. docs/fuzzing.md: how to minimise a finding
# and add its reproducer to the seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
all=(safetensors tokens manifest ds_config tokenizer regex added_trie)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (targets: ${all[*]})" >&2; exit 2; }
done
build=${FUZZ_BUILD_DIR:-build-fuzz}
jobs=${FUZZ_JOBS:-1}

# Clang 14 and its libFuzzer come from Debian's clang-14 and libclang-rt-14-dev (scripts/setup/setup.sh).
CXX_FUZZ=$(command -v clang++-14 || command -v clang++ || true)
CC_FUZZ=$(command -v clang-14 || command -v clang || true)
if [ -z "$CXX_FUZZ" ] || [ -z "$CC_FUZZ" ]; then
  echo "fuzz.sh: FAIL: clang++ is not installed (scripts/setup/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  # Only the library and the fuzz targets: no tests, benchmarks or CUDA. -O1 keeps the code close to
  # the source for the reports and builds faster; -g1 gives the stacks their lines. (Clang says when it
  # cannot vectorize an `omp simd` loop, which at -O1 is every one: not worth reading here.)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
        -DCMAKE_CXX_FLAGS="-Wno-pass-failed" \
        -DCMAKE_C_FLAGS_RELEASE="-O1 -g1" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_C_COMPILER="$CC_FUZZ" \
        -DZERODP_FUZZ=ON -DZERODP_SANITIZE=address,undefined -DZERODP_BUILD_TESTS=OFF \
        -DZERODP_BUILD_BENCH=OFF -DZERODP_CUDA=OFF >/dev/null
fi
cmake --build "$build" -j "${BUILD_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

[ "$seconds" -gt 0 ] || exit 0

status=0
run_one() {
  local t=$1 dict=""
  [ -f "tests/fuzz/dict/$t.dict" ] && dict="tests/fuzz/dict/$t.dict"
  bash tests/fuzz/run_fuzzer.sh "$build/tests/fuzz/fuzz_$t" "$seconds" "$build/fuzz/$t" "tests/fuzz/corpus/$t" $dict
}
if [ "$jobs" -le 1 ]; then
  for t in "${targets[@]}"; do run_one "$t" || status=1; done
else
  for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
    (rc=0; run_one "$t" > "$build/fuzz-$t.out" 2>&1 || rc=$?; echo "$rc" > "$build/fuzz-$t.rc") &
  done
  wait
  for t in "${targets[@]}"; do
    cat "$build/fuzz-$t.out"
    [ "$(cat "$build/fuzz-$t.rc")" = 0 ] || status=1
  done
fi
exit $status
