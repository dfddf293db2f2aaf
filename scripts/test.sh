#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests, multi-rank tests through mpirun
# with timeouts, the layering check). Exit status: ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup/setup.sh --tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source scripts/test/keep_ompi_session.sh
# Twice the cores and one more: a test of two ranks holds its cores only part of its time (Python's start,
# mpirun's launch, files), and a test labelled waits (tests/cli/CMakeLists.txt) mostly sleeps. Measured
# on 2 cores (2026-11-30, the same build, tests' durations known): 5 slots 539 s, 3 slots 780 s, with
# 76% and 50% of the two cores busy.
ctest --test-dir build --output-on-failure --timeout 600 -j "$((2 * $(nproc) + 1))"
