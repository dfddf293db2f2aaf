#!/usr/bin/env bash
# Runs chat_template_reference.py in the transformers venv (scripts/setup/transformers_venv.sh makes it
# once, jinja2 included). No venv (no python3-venv, no network to PyPI): the test fails and says so.
#   chat_template_reference.sh CHAT_TEMPLATE_RENDER
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! py="$(bash "$here/../../scripts/setup/transformers_venv.sh" | tail -1)" || [ ! -x "$py" ]; then
  echo "FAIL: the transformers venv could not be made (scripts/setup/transformers_venv.sh): this test needs it" >&2
  exit 1
fi
exec "$py" "$here/chat_template_reference.py" "$@"
