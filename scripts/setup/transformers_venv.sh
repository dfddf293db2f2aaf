#!/usr/bin/env bash
# Makes (once) the Python virtual environment of the Hugging Face `transformers` reference for the
# Llama-family models and GPT-2's model directories (tests/reference/llama_ref.py, compare_gpt2_hf.py).
# Idempotent: when the venv already imports what the reference needs it returns at once. Prints the
# venv's python on stdout's last line.
#   ZERODP_TRANSFORMERS_VENV   where (default ~/.cache/zerodp/venv-transformers)
# Needs Debian's python3-venv, python3-torch and python3-numpy, and network access to PyPI the first
# time. The venv sees the system site-packages so that it reuses Debian's torch (no 800 MB wheel to
# download, and the same torch as the other reference tests); only transformers, safetensors and jinja2
# (with their small dependencies) come from PyPI.
set -euo pipefail
VENV="${ZERODP_TRANSFORMERS_VENV:-$HOME/.cache/zerodp/venv-transformers}"
PY="$VENV/bin/python"
# transformers 4.50 and later import torch.distributed.tensor (torch >= 2.5) when the Llama and Qwen2
# modules load, which Debian's torch 1.13 lacks; 4.46 is the oldest tested here (llama3 rope
# scaling, head_dim and Qwen2 are all older than that).
TRANSFORMERS_PIN="transformers>=4.46,<4.50"
SAFETENSORS_PIN="safetensors>=0.4.3,<1"
# apply_chat_template renders with jinja2 (tests/data/chat_template_reference.py), which transformers
# does not install itself.
JINJA2_PIN="jinja2==3.1.6"
# What the reference imports: importing the model classes (not just the package) is what fails with
# a transformers too new for the installed torch.
PROBE="import torch, numpy, safetensors.torch, transformers"
PROBE="$PROBE; from transformers import LlamaForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel"
BASE_PROBE="$PROBE"
PROBE="$PROBE; import jinja2"

if [ -x "$PY" ] && "$PY" -c "$PROBE" 2>/dev/null; then
  echo "$PY"
  exit 0
fi
# A venv made before jinja2 was needed: add it rather than make the venv again.
if [ -x "$PY" ] && "$PY" -c "$BASE_PROBE" 2>/dev/null && "$PY" -m pip install --quiet "$JINJA2_PIN" >&2 &&
   "$PY" -c "$PROBE" 2>/dev/null; then
  echo "$PY"
  exit 0
fi
if ! /usr/bin/python3 -c "import venv, ensurepip" 2>/dev/null; then
  echo "transformers_venv.sh: /usr/bin/python3 cannot make a venv: install Debian's python3-venv" >&2
  exit 1
fi
if ! TORCH_VERSION=$(/usr/bin/python3 -c "import numpy, torch; print(torch.__version__)" 2>/dev/null); then
  echo "transformers_venv.sh: /usr/bin/python3 cannot import torch and numpy: install Debian's python3-torch" \
       "and python3-numpy (scripts/setup/setup.sh does)" >&2
  exit 1
fi
# Only a venv (or nothing) may be replaced: never delete a directory this script did not make.
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
  echo "transformers_venv.sh: $VENV exists and is not a Python venv; remove it or set ZERODP_TRANSFORMERS_VENV" >&2
  exit 1
fi
mkdir -p "$(dirname "$VENV")"
rm -rf "$VENV"
/usr/bin/python3 -m venv --system-site-packages "$VENV" >&2
if ! "$PY" -m pip install --quiet "$TRANSFORMERS_PIN" "$SAFETENSORS_PIN" "$JINJA2_PIN" >&2; then
  echo "transformers_venv.sh: pip could not install $TRANSFORMERS_PIN, $SAFETENSORS_PIN and $JINJA2_PIN into $VENV" \
       "(no network to PyPI?)" >&2
  rm -rf "$VENV"
  exit 1
fi
if ! "$PY" -c "$PROBE" >&2; then
  echo "transformers_venv.sh: the venv at $VENV cannot import the Llama, Qwen2 and GPT-2 models of transformers" \
       "with torch $TORCH_VERSION (see the error above)" >&2
  rm -rf "$VENV"
  exit 1
fi
echo "$PY"
