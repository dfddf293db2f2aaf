#!/usr/bin/env bash
# GPT-2 124M trained on one NVIDIA GPU: zerodp against PyTorch (issue 15 point 5); with ARCH=llama, a
# Llama of the Llama 3.2 1B shape (issue 45 point 3).
#
# GPT-2 small (L12 H12 C768, vocabulary padded to 50304, context and T = 1024), bf16, B sequences a
# rank, the same initial weights (`zerodp init --seed 1337`) and batches (docs/reference/data-order.md#ranks) for every run:
#   zerodp-w1-sS   `zerodp train --device cuda --dtype bf16 --zero-stage S`, S = 0..3, one rank
#   zerodp-w2-sS   the same under `mpirun -n 2 --oversubscribe`: two ranks on the one GPU (zerodp
#                  stages their collectives through the host, as NCCL refuses two ranks on one
#                  device), 2·B sequences a step
#   torch-eager    bench/gpu/torch_gpt2_cuda.py (ARCH=llama: torch_llama_cuda.py): PyTorch bf16 autocast,
#                  flash attention, fused AdamW
#   torch-compile  the same under torch.compile
# Every run has RUN_TIMEOUT seconds; one that fails or times out is recorded and the next one runs.
# Then `PYTHONPATH=tests/pylib python3 bench/gpu/report.py "$OUT"` prints the table (not run from here,
# so that a caller decides where it goes).
#
# In OUT: data/ (init weights, tokens), env.txt (machine, versions, settings), status.txt (tag, exit
# status, seconds), commands.txt, and for each run TAG.log, TAG.jsonl (zerodp's --metrics) or TAG.json
# (the peer's result), TAG.smi (nvidia-smi memory.used samples in MiB while it ran).
#
# Environment (defaults in brackets; relative paths are from the repository root):
#   Z [build-gpu/zerodp]       the zerodp binary (built with CUDA); required
#   OUT [runs/gpu-check/train] where everything goes (its results of an earlier run are replaced)
#   B [8] STEPS [30] WARMUP [5]  micro-batch a rank, steps a run, first steps the report leaves out
#   STAGES ["0 1 2 3"] WORLDS ["1 2"] PEER_MODES ["eager compile"]  what to run (PEER_MODES="": none)
#   RUN_TIMEOUT [900]          seconds each run may take
#   GPU_INDEX [0]              the GPU every run uses (nvidia-smi's index; CUDA_VISIBLE_DEVICES is set
#                              to it, in PCI bus order, so both W = 2 ranks see only that one)
#   PEAK_TFLOPS                dense bf16 peak for MFU when the GPU is not in tests/pylib/zdptest/gpu_peak.py
#   VENV [runs/gpu-venv]       Python venv for the peer, made and filled from PyPI when it cannot yet
#                              import torch and numpy; TORCH_SPEC ["torch>=2.4"] is what pip installs,
#                              within PIP_TIMEOUT [1800] s; pip's own PIP_INDEX_URL picks another index,
#                              e.g. https://download.pytorch.org/whl/cu126 for a driver older than the
#                              CUDA that PyPI's default wheel is built for. If it fails, the peer's runs
#                              are recorded as not run and the rest goes on.
#   PY_TORCH                   a Python that already has torch (and numpy): used instead of the venv
#   CORPUS [data/tinyshakespeare.txt]  text tokenized (bytes) into the token file
#   LAYERS [12] HEADS [12] EMBD [768] VOCAB [50304] SEQ [1024] DEVICE [cuda]  the model and device; the
#                              defaults are the benchmark, other values are for checking this script
#                              on a CPU (bench/gpu/test_bench_gpu.py runs it with DEVICE=cpu)
#   ARCH [gpt2]                gpt2, or llama: a Llama made by `zerodp init --arch llama` (a model
#                              directory), whose defaults are the Llama 3.2 1B shape: LAYERS 16 HEADS 32
#                              KV_HEADS 8 EMBD 2048 INTERMEDIATE 8192 VOCAB 128256 SEQ 2048
#                              ROPE_THETA 500000 TIE 1 (lm_head tied to the embeddings), and B 4
#   COMMIT                     the commit recorded in env.txt (default: ZERODP_COMMIT, else git rev-parse --short HEAD)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

Z=${Z:-build-gpu/zerodp}
ARCH=${ARCH:-gpt2}
case "$ARCH" in
  gpt2) ;;
  llama)
    : "${LAYERS:=16}" "${HEADS:=32}" "${KV_HEADS:=8}" "${EMBD:=2048}" "${INTERMEDIATE:=8192}" "${VOCAB:=128256}"
    : "${SEQ:=2048}" "${ROPE_THETA:=500000}" "${TIE:=1}" "${B:=4}"
    ;;
  *)
    printf 'bench/gpu/run.sh: ARCH is %s: say gpt2 or llama\n' "${ARCH:0:32}" >&2
    exit 2
    ;;
esac
OUT=${OUT:-runs/gpu-check/train}
B=${B:-8}
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
STAGES=${STAGES:-0 1 2 3}
WORLDS=${WORLDS:-1 2}
PEER_MODES=${PEER_MODES-eager compile}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
GPU_INDEX=${GPU_INDEX:-0}
VENV=${VENV:-runs/gpu-venv}
TORCH_SPEC=${TORCH_SPEC:-torch>=2.4}
CORPUS=${CORPUS:-data/tinyshakespeare.txt}
LAYERS=${LAYERS:-12}
HEADS=${HEADS:-12}
EMBD=${EMBD:-768}
VOCAB=${VOCAB:-50304}
SEQ=${SEQ:-1024}
DEVICE=${DEVICE:-cuda}
# The optimizer of both sides, passed explicitly so that neither side's defaults matter: the values
# bench/train and bench/peers use (GPT-2's usual weight decay and clipping; clipping costs a norm
# over every gradient each step, on both sides).
LR_FLAGS=(--lr 1e-3 --beta1 0.9 --beta2 0.999 --eps 1e-8 --weight-decay 0.1 --clip 1.0)

log() { printf '%s\n' "$*" >&2; }

if [[ ! -x "$Z" ]]; then
  log "bench/gpu/run.sh: no zerodp binary at '$Z' (set Z to a CUDA build's zerodp)"
  exit 2
fi
Z=$(cd "$(dirname "$Z")" && pwd)/$(basename "$Z")
if ((STEPS <= WARMUP)); then
  log "bench/gpu/run.sh: STEPS ($STEPS) must exceed WARMUP ($WARMUP)"
  exit 2
fi

# Every run sees the one GPU only, numbered as nvidia-smi numbers it, so that the two W = 2 ranks
# share it and the memory samples below watch the GPU the runs use.
export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="$GPU_INDEX"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
# torch_gpt2_cuda.py imports zdptest (tests/pylib): on PYTHONPATH for whichever Python runs the peer (the
# venv, PY_TORCH, the system's), so none of them needs it installed.
export PYTHONPATH="$root/tests/pylib${PYTHONPATH:+:$PYTHONPATH}"
have_smi=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  have_smi=1
fi

data="$OUT/data"
mkdir -p "$data"
# Results of an earlier run would mix into the report: remove them (the data and the venv stay).
rm -f "$OUT"/*.json "$OUT"/*.jsonl "$OUT"/*.jsonl.partial "$OUT"/*.log "$OUT"/*.smi "$OUT"/*.txt

# ---- inputs: the same init and token file for every run -----------------------------------------------
model_tag="l${LAYERS}h${HEADS}c${EMBD}v${VOCAB}n${SEQ}"
tokens="$data/tokens.bin"
if [[ "$ARCH" == llama ]]; then
  model_tag+="kv${KV_HEADS}i${INTERMEDIATE}r${ROPE_THETA}t${TIE}"
  init="$data/llama-$model_tag"
  peer_script=bench/gpu/torch_llama_cuda.py
  tie=()
  [[ "$TIE" == 1 ]] && tie=(--tie)
  # bf16 tensors in the file: both sides start from the same values, at half the bytes to write.
  [[ -f "$init/config.json" ]] || "$Z" init --arch llama --out "$init" --layers "$LAYERS" --heads "$HEADS" \
    --kv-heads "$KV_HEADS" --embd "$EMBD" --intermediate "$INTERMEDIATE" --vocab "$VOCAB" --ctx "$SEQ" \
    --rope-theta "$ROPE_THETA" "${tie[@]}" --dtype bf16 --seed 1337 >&2
else
  init="$data/gpt2-$model_tag.safetensors"
  peer_script=bench/gpu/torch_gpt2_cuda.py
  [[ -f "$init" ]] || "$Z" init --out "$init" --layers "$LAYERS" --heads "$HEADS" --embd "$EMBD" \
    --vocab "$VOCAB" --ctx "$SEQ" --seed 1337 >&2
fi
[[ -f "$tokens" ]] || "$Z" tokenize --text "$CORPUS" --out "$tokens" >&2

# ---- the peer's Python ----------------------------------------------------------------------------------
# The default torch wheel on PyPI for Linux x86_64 is a CUDA build (with the nvidia-* wheels, a few GB).
# Called in an `if`, where `set -e` does not act: every step says `|| return 1` itself.
make_venv() {
  local base
  base=$(command -v /usr/bin/python3 || command -v python3) || return 1
  if [[ ! -x "$VENV/bin/python" ]]; then
    # Debian without python3-venv has no ensurepip: then a venv without pip, seeing the system's
    # packages, whose pip (python3-pip) installs into the venv all the same.
    "$base" -m venv "$VENV" || "$base" -m venv --without-pip --system-site-packages "$VENV" || return 1
  fi
  timeout "${PIP_TIMEOUT:-1800}" "$VENV/bin/python" -m pip install --disable-pip-version-check \
    --progress-bar off "$TORCH_SPEC" numpy || return 1
  "$VENV/bin/python" -c 'import torch, numpy; print("torch", torch.__version__)' || return 1
}

peer_py=""
peer_reason=""
if [[ -n "$PEER_MODES" ]]; then
  if [[ -n "${PY_TORCH:-}" ]]; then
    peer_py=$PY_TORCH
  elif [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import torch, numpy' >/dev/null 2>&1; then
    peer_py=$(cd "$VENV/bin" && pwd)/python  # made by an earlier run: reused as it is
  else
    log "making the venv $VENV ($TORCH_SPEC, numpy from PyPI; log in $OUT/venv.log)"
    if make_venv >"$OUT/venv.log" 2>&1; then
      peer_py=$(cd "$VENV/bin" && pwd)/python
    else
      peer_reason="not run: could not make the venv $VENV with $TORCH_SPEC from PyPI (see venv.log):"
      peer_reason+=" $(grep -v '^\s*$' "$OUT/venv.log" | tail -1 || true)"
      log "PyTorch peer $peer_reason"
    fi
  fi
fi

# ---- machine, versions, settings --------------------------------------------------------------------------
smi_field() {  # $1 = nvidia-smi --query-gpu field, of the GPU the runs use
  if ((have_smi)); then
    nvidia-smi -i "$GPU_INDEX" --query-gpu="$1" --format=csv,noheader 2>/dev/null | head -1
  fi
}
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "gpu=$(smi_field name)"
  echo "driver=$(smi_field driver_version)"
  echo "gpu_memory=$(smi_field memory.total)"
  echo "gpu_memory_used_before=$(smi_field memory.used)"
  echo "gpu_clock_max=$(smi_field clocks.max.sm)"
  echo "gpu_index=$GPU_INDEX"
  echo "gpus=1"
  echo "cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
  echo "commit=${COMMIT:-${ZERODP_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "?")}}"
  echo "zerodp=$("$Z" --version 2>/dev/null | head -1)"
  echo "zerodp_cuda=$("$Z" info 2>/dev/null | sed -n 's/^  CUDA:[[:space:]]*//p' | head -1)"
  echo "zerodp_gpus=$("$Z" info 2>/dev/null | sed -n 's/^  GPUs:[[:space:]]*//p' | head -1)"
  echo "mpi=$("$Z" info 2>/dev/null | sed -n 's/^  MPI:[[:space:]]*//p' | head -1)"
  if [[ -n "$peer_py" ]]; then
    echo "torch=$("$peer_py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null)"
    echo "python=$("$peer_py" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)"
  fi
  echo "device=$DEVICE"
  echo "dtype=bf16"
  echo "arch=$ARCH"
  echo "layers=$LAYERS"
  echo "heads=$HEADS"
  echo "embd=$EMBD"
  echo "vocab=$VOCAB"
  echo "seq=$SEQ"
  if [[ "$ARCH" == llama ]]; then
    echo "kv_heads=$KV_HEADS"
    echo "head_dim=$((EMBD / HEADS))"
    echo "intermediate=$INTERMEDIATE"
    echo "rope_theta=$ROPE_THETA"
    echo "tie=$TIE"
  fi
  echo "micro_batch=$B"
  echo "steps=$STEPS"
  echo "warmup=$WARMUP"
  echo "optimizer=${LR_FLAGS[*]}"
  echo "peak_tflops=${PEAK_TFLOPS:-}"
  echo "run_timeout=$RUN_TIMEOUT"
} >"$OUT/env.txt"
cat "$OUT/env.txt" >&2

# ---- running and recording --------------------------------------------------------------------------------
smi_pid=""
smi_start() {  # samples the GPU's used memory every 200 ms into $1 while a run goes on
  smi_pid=""
  if ((have_smi)); then
    nvidia-smi -i "$GPU_INDEX" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$1" 2>/dev/null &
    smi_pid=$!
  fi
}
smi_stop() {
  if [[ -n "$smi_pid" ]]; then
    kill "$smi_pid" 2>/dev/null || true
    wait "$smi_pid" 2>/dev/null || true
  fi
  smi_pid=""
}

# measure TAG STDOUT_FILE COMMAND...: runs the command under `timeout`, its stdout into STDOUT_FILE and
# its stderr into TAG.log (the same file when STDOUT_FILE is TAG.log); records the exit status and
# the seconds in status.txt. Never fails itself: a failed run is what the report lists.
measure() {
  local tag=$1 stdout=$2 rc=0 t0 t1; shift 2
  local logf="$OUT/$tag.log"
  log "[$tag] $*"
  printf '%s\t%s\n' "$tag" "$*" | sed "s|$root/||g" >>"$OUT/commands.txt"
  smi_start "$OUT/$tag.smi"
  t0=$(date +%s.%N)
  if [[ "$stdout" == "$logf" ]]; then
    timeout -k 30 "$RUN_TIMEOUT" "$@" >"$logf" 2>&1 || rc=$?
  else
    timeout -k 30 "$RUN_TIMEOUT" "$@" >"$stdout" 2>"$logf" || rc=$?
  fi
  t1=$(date +%s.%N)
  smi_stop
  printf '%s\t%s\t%s\n' "$tag" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" >>"$OUT/status.txt"
  if ((rc != 0)); then
    log "  $tag failed (exit $rc): see $logf"
  fi
}

for W in $WORLDS; do
  launcher=()
  if ((W > 1)); then
    # --oversubscribe: the ranks may outnumber the cores or slots Open MPI counts; -x: the GPU choice
    # reaches every rank.
    launcher=(mpirun -n "$W" --oversubscribe -x CUDA_VISIBLE_DEVICES -x CUDA_DEVICE_ORDER)
  fi
  for S in $STAGES; do
    tag="zerodp-w$W-s$S"
    measure "$tag" "$OUT/$tag.log" "${launcher[@]}" "$Z" train --init "$init" --data "$tokens" \
      --steps "$STEPS" --micro-batch "$B" --seq "$SEQ" --zero-stage "$S" --device "$DEVICE" --dtype bf16 \
      "${LR_FLAGS[@]}" --log-every 10 --metrics "$OUT/$tag.jsonl"
  done
done

for mode in $PEER_MODES; do
  tag="torch-$mode"
  if [[ -z "$peer_py" ]]; then
    printf '%s\n' "$peer_reason" >"$OUT/$tag.log"
    printf '%s\t%s\t%s\n' "$tag" "skipped" "0" >>"$OUT/status.txt"
    continue
  fi
  compile=()
  [[ "$mode" == compile ]] && compile=(--compile)
  measure "$tag" "$OUT/$tag.json" "$peer_py" "$peer_script" --device "$DEVICE" --dtype bf16 \
    --init "$init" --data "$tokens" --micro-batch "$B" --seq "$SEQ" --steps "$STEPS" --warmup "$WARMUP" \
    ${PEAK_TFLOPS:+--peak-tflops "$PEAK_TFLOPS"} "${compile[@]}" "${LR_FLAGS[@]}"
done

log "done: PYTHONPATH=tests/pylib python3 bench/gpu/report.py $OUT"
