#!/usr/bin/env bash
# Tokenizer throughput (bench.py): zerodp tokenize against tiktoken and Hugging Face tokenizers on one
# core and on all cores, the same text and Llama-3-style vocabulary of 1,500; then a bar plot.
#   bench/tokenize/run.sh [MB]          (from the repository root; default 50 MB of Shakespeare)
# Writes bench/tokenize/results/results.json, tokenize.png and shapes.json (shapes.py). Needs build/zerodp and the venv of
# scripts/setup/tokenizer_venv.sh (made here if missing), and Debian's python3-matplotlib for the plot.
set -euo pipefail
cd "$(dirname "$0")/../.."
py="$(bash scripts/setup/tokenizer_venv.sh | tail -1)"
out=bench/tokenize/results
PYTHONPATH="$PWD/tests/pylib${PYTHONPATH:+:$PYTHONPATH}" "$py" bench/tokenize/bench.py build/zerodp "$out" "${1:-50}"
/usr/bin/python3 bench/tokenize/plot.py "$out/results.json" "$out/tokenize.png"
# The shapes that normalize (Qwen 2.5, Llama 2, Mistral) against the byte-level path, as ratios.
PYTHONPATH="$PWD/tests/pylib${PYTHONPATH:+:$PYTHONPATH}" "$py" bench/tokenize/shapes.py build/zerodp "$out" "${1:-50}"
echo "wrote $out/results.json, $out/tokenize.png and $out/shapes.json"
