#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit tests, multi-rank tests through mpirun
# with timeouts, the layering check). Exit status: ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup/setup.sh --tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One slot more than the cores: a test labelled waits (tests/cli/CMakeLists.txt) takes one slot and
# runs beside the others.
ctest --test-dir build --output-on-failure --timeout 600 -j "$(($(nproc) + 1))"
