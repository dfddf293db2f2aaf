#!/usr/bin/env bash
# Runs one case of reference_test.py in the tokenizers venv (scripts/setup/tokenizer_venv.sh makes it once).
# No venv (no python3-venv, no network to PyPI): the test fails and says so; it never passes silently.
#   run.sh ZERODP CASE
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! py="$(bash "$here/../../scripts/setup/tokenizer_venv.sh" | tail -1)" || [ ! -x "$py" ]; then
  echo "FAIL: the tokenizers/tiktoken venv could not be made (scripts/setup/tokenizer_venv.sh): this test needs it" >&2
  exit 1
fi
# reference_test.py imports zdptest (tests/pylib), which the venv does not have installed.
PYTHONPATH="$(cd "$here/../pylib" && pwd)${PYTHONPATH:+:$PYTHONPATH}" exec "$py" "$here/reference_test.py" "$@"
