#!/usr/bin/env bash
# Makes (once) the Python virtual environment the tokenizer reference tests and benchmark use: the
# Hugging Face `tokenizers` library and OpenAI's `tiktoken`, from PyPI. Idempotent: when the venv
# already imports both it returns at once. Prints the venv's python on stdout's last line.
#   ZERODP_VENV   where (default ~/.cache/zerodp/venv-tokenizers)
# Needs Debian's python3-venv (for /usr/bin/python3 -m venv) and network access to PyPI the first time.
set -euo pipefail
VENV="${ZERODP_VENV:-$HOME/.cache/zerodp/venv-tokenizers}"
PY="$VENV/bin/python"
if [ -x "$PY" ] && "$PY" -c "import tokenizers, tiktoken" 2>/dev/null; then
  echo "$PY"
  exit 0
fi
if ! /usr/bin/python3 -c "import venv, ensurepip" 2>/dev/null; then
  echo "tokenizer_venv.sh: /usr/bin/python3 cannot make a venv: install Debian's python3-venv" >&2
  exit 1
fi
mkdir -p "$(dirname "$VENV")"
rm -rf "$VENV"
/usr/bin/python3 -m venv "$VENV" >&2
if ! "$PY" -m pip install --quiet "tokenizers>=0.19" "tiktoken>=0.6" >&2; then
  echo "tokenizer_venv.sh: pip could not install tokenizers and tiktoken into $VENV (no network?)" >&2
  rm -rf "$VENV"
  exit 1
fi
"$PY" -c "import tokenizers, tiktoken" >&2
echo "$PY"
