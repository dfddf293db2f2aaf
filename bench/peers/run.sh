#!/usr/bin/env bash
# zerodp's ZeRO stages 0-3 against PyTorch 2.x and DeepSpeed at W = 2, all in one run (issue 12 point 4).
#
# GPT-2 L4 C256 H4 V256, T = 128, B = 8 a rank, 2 ranks of 1 thread each, pinned (mpirun --bind-to
# core for every runner), AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.1 on tensors of two
# or more dimensions), clip 1.0, the same initial weights (`zerodp init --seed 1337`) and batches, in fp32
# and in bf16:
#   zerodp    `mpirun -n 2 zerodp train --zero-stage S --dtype fp32|bf16`, S = 0..3
#   PyTorch   (from PyPI, in a venv this script makes) over gloo: DDP, DDP + ZeroRedundancyOptimizer,
#             FSDP2 fully_shard without and with reshard-after-forward; bf16 = torch.autocast(cpu, bf16)
#   DeepSpeed (from PyPI) ZeRO 1, 2, 3 on its CPU accelerator (DS_ACCELERATOR=cpu) over gloo;
#             bf16 = `bf16.enabled`
# The peers run bench/peers/peer_train.py (model, weights, data from tests/pylib/zdptest/torch_gpt2.py).
# Then bench/peers/report.py prints the tables and writes docs/benchmarks/peers.md and its plot, docs/benchmarks/peers.png
# (WRITE_DOCS=0: neither).
#
# ARCH=llama: the same protocol on a Llama of 29.8 M parameters instead of the GPT-2: `zerodp init --arch llama
# --layers 10 --heads 8 --kv-heads 4 --embd 512 --intermediate 1408 --vocab 256 --ctx 128 --seed 1337` (grouped-query
# attention, 8 query and 4 key/value heads of 64; SwiGLU MLP of 1408; RMSNorm; RoPE θ 10000; untied head), a Hugging
# Face model directory that zerodp trains with `train --init DIR` and the peers load as transformers'
# LlamaForCausalLM (from_pretrained, fp32, attn_implementation ATTN). Its own defaults: OUT runs/bench-peers-llama,
# DOCS docs/benchmarks/peers_llama.md (and .png), NOTES bench/peers/notes_llama.md; transformers (TRANSFORMERS_SPEC)
# is installed into the venv when it cannot be imported there.
#
# Environment (defaults in brackets):
#   ARCH [gpt2]             gpt2 or llama (above)
#   ATTN [sdpa]             ARCH=llama: the peers' attention implementation in transformers, sdpa or eager
#   TRANSFORMERS_SPEC ["transformers>=4.46"]  ARCH=llama: what pip installs into the venv when it lacks transformers
#   BUILD [build]           zerodp build directory (configured and `zerodp` built if missing)
#   VENV [runs/peers-venv]  the Python venv of the peers; made and filled from PyPI when missing
#   TORCH_SPEC ["torch>=2.6"] DS_SPEC [deepspeed]  what pip installs there
#   OUT [runs/bench-peers]  data, weights and results
#   STEPS [12] WARMUP [2]   steps of every run, and how many of them are not timed
#   ROUNDS [2]              every run repeated this many times, interleaved; medians pool the rounds
#   DTYPES ["fp32 bf16"]    RUNNERS [all: zerodp-s0..s3 ddp zero1 fsdp2 fsdp2-reshard ds1 ds2 ds3]
#   RUN_TIMEOUT [600]       seconds a run may take before it is killed (and reported as failed)
#   QUIET_BUSY [0.3] QUIET_MAX [90]  before each run, wait (at most QUIET_MAX s) until the CPUs were busy
#                           less than QUIET_BUSY of the time over 2 s (other people's jobs: the machine is
#                           shared); the busy fraction found is recorded next to the run
#   ROUND_FROM [1]          the first round's number; above 1 the run continues an earlier one into the
#                           same OUT (its results are kept and pooled with the new rounds)
#   DOCS [docs/benchmarks/peers.md] NOTES [bench/peers/notes.md]  the page written, and its commentary
#   QUICK=1                 a fast check: 4 steps, 1 warm-up, 1 round, docs left alone
#   The zerodp binary is $BUILD/zerodp: to compare two builds, point BUILD at each (a folder holding a
#                           `zerodp` is enough) with its own OUT.
#   Where /usr/bin/time exists, each run's wall, user and system seconds (the whole run: start-up, all
#                           ranks and mpirun) go to OUT/results/cputime.txt, one `tag wall user sys` line a run.
#   ISA [native]            avx2: every runner held to what an AVX2 CPU (x86-64-v3) has, so that a ratio
#                           measured on an AVX-512 machine predicts an AVX2 machine's: zerodp by
#                           ZERODP_MAX_CPU_ISA=x86-64-v3 (its kernels' baseline copies, 16-bit GEMMs as
#                           without AVX-512 BF16 or AMX), OpenBLAS by OPENBLAS_CORETYPE=Haswell, oneMKL by
#                           MKL_ENABLE_INSTRUCTIONS=AVX2, oneDNN by DNNL_MAX_CPU_ISA=AVX2, PyTorch's
#                           kernels by ATEN_CPU_CAPABILITY=avx2. Its own defaults: OUT <OUT>-avx2, DOCS
#                           <DOCS without .md>_avx2.md, NOTES bench/peers/notes_avx2.md. On an Intel
#                           machine zerodp's fp32 GEMMs stay on oneMKL (AVX2 kernels), where an AMD
#                           CPU would run OpenBLAS's (ZERODP_GEMM32=openblas gives those).
#   KEEP_OPENBLAS_CORETYPE [0]  1: keep OPENBLAS_CORETYPE from the environment. By default the script
#                           unsets it, so that OpenBLAS (zerodp's fp32 GEMMs; the peers do not use it)
#                           picks its kernels by CPUID as on a machine where nobody set it: some of
#                           this workplace's machines set Haswell, which holds an AVX-512 CPU to AVX2
#                           kernels (about half the fp32 GEMM speed on an AMD Zen 5). env.txt records
#                           the value found and the kernels zerodp ran.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

BUILD=${BUILD:-build}
VENV=${VENV:-runs/peers-venv}
TORCH_SPEC=${TORCH_SPEC:-torch>=2.6}
DS_SPEC=${DS_SPEC:-deepspeed}
ARCH=${ARCH:-gpt2}
case $ARCH in
  gpt2) OUT=${OUT:-runs/bench-peers} ;;
  llama) OUT=${OUT:-runs/bench-peers-llama} ATTN=${ATTN:-sdpa} TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-transformers>=4.46}
    [[ $ATTN == sdpa || $ATTN == eager ]] || { echo "run.sh: ATTN must be sdpa or eager, got '$ATTN'" >&2; exit 2; } ;;
  *) echo "run.sh: ARCH must be gpt2 or llama, got '$ARCH'" >&2; exit 2 ;;
esac
STEPS=${STEPS:-12}
WARMUP=${WARMUP:-2}
ROUNDS=${ROUNDS:-2}
DTYPES=${DTYPES:-fp32 bf16}
RUNNERS=${RUNNERS:-zerodp-s0 zerodp-s1 zerodp-s2 zerodp-s3 ddp zero1 fsdp2 fsdp2-reshard ds1 ds2 ds3}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
ROUND_FROM=${ROUND_FROM:-1}
WRITE_DOCS=${WRITE_DOCS:-1}
if [[ "${QUICK:-0}" == 1 ]]; then
  STEPS=4 WARMUP=1 ROUNDS=1 WRITE_DOCS=${WRITE_DOCS_QUICK:-0}
fi
OPENBLAS_CORETYPE_FOUND=${OPENBLAS_CORETYPE-(unset)}
[[ "${KEEP_OPENBLAS_CORETYPE:-0}" == 1 ]] || unset OPENBLAS_CORETYPE
ISA=${ISA:-native}
case $ISA in
  native) ;;
  avx2)
    OUT=$OUT-avx2 NOTES=${NOTES:-bench/peers/notes_avx2.md}
    export ZERODP_MAX_CPU_ISA=x86-64-v3 OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2 DNNL_MAX_CPU_ISA=AVX2 \
      ATEN_CPU_CAPABILITY=avx2 ;;
  *) echo "run.sh: ISA must be native or avx2, got '$ISA'" >&2; exit 2 ;;
esac
LR_FLAGS=(--lr 1e-3 --beta1 0.9 --beta2 0.999 --eps 1e-8 --weight-decay 0.1 --clip 1.0)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
log() { printf '%s\n' "$*" >&2; }

# ---- zerodp -----------------------------------------------------------------------------------------
if [[ ! -x "$BUILD/zerodp" ]]; then
  [[ -f "$BUILD/CMakeCache.txt" ]] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" --target zerodp -j2
fi
Z=$(cd "$BUILD" && pwd)/zerodp

# ---- the peers' venv ----------------------------------------------------------------------------------
# The default torch wheel on PyPI for Linux x86_64 is the CUDA build: it pulls the nvidia-* wheels
# (about 2.7 GB installed in all); PyPI has no CPU-only build of torch 2.x. DeepSpeed installs as pure
# Python (DS_BUILD_OPS=0: no op is compiled at install time); on CPU it needs py-cpuinfo.
if [[ ! -f "$VENV/.peers-ready" ]]; then
  log "making the venv $VENV (torch, deepspeed from PyPI)"
  [[ -x "$VENV/bin/python" ]] || /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip wheel setuptools
  "$VENV/bin/pip" install -q "$TORCH_SPEC" numpy
  DS_BUILD_OPS=0 "$VENV/bin/pip" install -q "$DS_SPEC" py-cpuinfo
  touch "$VENV/.peers-ready"
fi
PY=$(cd "$VENV/bin" && pwd)/python
# ARCH=llama: the peers' model is transformers' LlamaForCausalLM (with safetensors to read the weights).
if [[ $ARCH == llama ]] && ! "$PY" -c 'import safetensors.torch, transformers; from transformers import LlamaForCausalLM' >/dev/null 2>&1; then
  log "installing $TRANSFORMERS_SPEC and safetensors into $VENV (ARCH=llama)"
  "$PY" -m pip install -q "$TRANSFORMERS_SPEC" safetensors
fi
# peer_train.py imports zdptest (tests/pylib): installed in the venv, editable, so that it follows the checkout.
"$PY" -c 'import zdptest' >/dev/null 2>&1 || "$PY" -m pip install -q --no-build-isolation -e tests/pylib
# DeepSpeed on CPU: its CPU accelerator, no op builds at run time either.
export DS_ACCELERATOR=cpu DS_BUILD_OPS=0

# ---- inputs, machine, versions ------------------------------------------------------------------------
data="$OUT/data"
res="$OUT/results"
mkdir -p "$data" "$res"
if ((ROUND_FROM == 1)); then
  rm -f "$res"/*.json "$res"/*.jsonl "$res"/*.log "$res"/*.txt
fi
[[ -f "$data/shakespeare.bin" ]] || "$Z" tokenize --text data/tinyshakespeare.txt --out "$data/shakespeare.bin"
if [[ $ARCH == llama ]]; then
  model_init=(init --arch llama --out "$data/llama-l10c512" --layers 10 --heads 8 --kv-heads 4 --embd 512
    --intermediate 1408 --vocab 256 --ctx 128 --seed 1337)
  [[ -f "$data/llama-l10c512/model.safetensors" ]] || "$Z" "${model_init[@]}"
  model_file="$data/llama-l10c512"
  peer_arch=(--arch llama --attn "$ATTN")
else
  [[ -f "$data/l4c256.safetensors" ]] ||
    "$Z" init --out "$data/l4c256.safetensors" --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337
  model_file="$data/l4c256.safetensors"
  peer_arch=()
fi

{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)"
  echo "cores=$(nproc)"
  echo "isa=$(grep -o -w -E 'avx512f|avx512_bf16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "zerodp=$("$Z" --version 2>/dev/null | head -1) ($(git rev-parse --short HEAD 2>/dev/null || echo ?)$(git diff --quiet HEAD -- src apps 2>/dev/null || echo ', uncommitted changes in src/apps'))"
  echo "blas=$("$Z" info | sed -n 's/^  BLAS:[[:space:]]*//p' | sed 's/ ([0-9]* threads)//')"
  echo "openblas_coretype_env=$OPENBLAS_CORETYPE_FOUND (run with: ${OPENBLAS_CORETYPE-unset})"
  echo "isa_mode=$ISA$([[ $ISA == native ]] || echo " (ZERODP_MAX_CPU_ISA=$ZERODP_MAX_CPU_ISA OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE MKL_ENABLE_INSTRUCTIONS=$MKL_ENABLE_INSTRUCTIONS DNNL_MAX_CPU_ISA=$DNNL_MAX_CPU_ISA ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY)")"
  echo "zerodp_cpu=$("$Z" info | sed -n 's/^  CPU:[[:space:]]*//p')"
  echo "mpi=$("$Z" info | sed -n 's/^  MPI:[[:space:]]*//p')"
  echo "gemm16=$("$Z" info | sed -n 's/^  bf16 GEMM:[[:space:]]*//p')"
  echo "torch=$("$PY" -c 'import torch; print(torch.__version__, "(cuda", torch.version.cuda, "build; CPU ISA", torch.backends.cpu.get_cpu_capability() + ")")' 2>/dev/null)"
  echo "deepspeed=$("$PY" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -1)"
  echo "python=$("$PY" -c 'import sys; print(sys.version.split()[0])')"
  echo "venv_size=$(du -sh "$VENV" | cut -f1)"
  echo "steps=$STEPS warmup=$WARMUP rounds=$ROUNDS dtypes=$DTYPES"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  if [[ $ARCH == llama ]]; then
    echo "arch=llama"
    echo "model=Llama L10 C512 H8 KV4 I1408 V256, untied head ($(/usr/bin/python3 -c 'import json, math, struct, sys
with open(sys.argv[1], "rb") as f:
    h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
print(sum(math.prod(v["shape"]) for k, v in h.items() if k != "__metadata__"))' "$model_file/model.safetensors") parameters)"
    echo "init=zerodp ${model_init[*]}" | sed "s|$data/|data/|g"
    echo "transformers=$("$PY" -c 'import transformers; print(transformers.__version__)' 2>/dev/null)"
    echo "attn=$ATTN"
  fi
} >"$res/env-r$ROUND_FROM.txt"
cat "$res/env-r$ROUND_FROM.txt" >&2
if ((ROUND_FROM == 1)); then
  cp "$res/env-r1.txt" "$res/env.txt"
else  # a continuation: the first part's machine and versions stand, its settings and loads are added to
  sed -n 's/^\(date\|steps\|load_start\)=/continued_\1=/p' "$res/env-r$ROUND_FROM.txt" >>"$res/env.txt"
fi

MPI=(mpirun -n 2 --bind-to core -x OMP_NUM_THREADS)
common=(--init "$model_file" --data "$data/shakespeare.bin" --steps "$STEPS" --micro-batch 8 --seq 128)

# The fraction of all CPUs busy over the next 2 s (/proc/stat; idle and iowait count as idle).
cpu_busy() {
  local a b
  a=$(head -1 /proc/stat); sleep 2; b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { n = split(a, x); split(b, y); t = 0
    for (i = 2; i <= n; i++) t += y[i] - x[i]
    printf "%.2f", (t > 0) ? 1 - ((y[5] - x[5]) + (y[6] - x[6])) / t : 0 }'
}

# Runs one measured command after waiting for the CPUs to be quiet; records its exit status, the busy
# fraction before it and the 1-minute load average.
measure() {  # $1 = tag (runner-dtype-rR); the rest: the command
  local tag=$1 rc=0 busy waited=0; shift
  busy=$(cpu_busy)
  while awk -v b="$busy" -v t="${QUIET_BUSY:-0.3}" 'BEGIN { exit !(b >= t) }' && ((waited < ${QUIET_MAX:-90})); do
    sleep 3; waited=$((waited + 5)); busy=$(cpu_busy)
  done
  local timer=()
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -a -o "$res/cputime.txt" -f "$tag	%e	%U	%S")
  "${timer[@]}" timeout "$RUN_TIMEOUT" "$@" || rc=$?
  printf '%s\t%s\t%s\t%s\n' "$tag" "$rc" "$busy" "$(cut -d' ' -f1 /proc/loadavg)" >>"$res/status.txt"
  ((rc == 0)) || log "  $tag failed (exit $rc), see $res/$tag.log"
}

one() {  # $1 = runner, $2 = dtype, $3 = round
  local runner=$1 dt=$2 r=$3 tag="$1-$2-r$3"
  log "[round $r] $dt $runner"
  case $runner in
    zerodp-s[0-3])
      measure "$tag" env OMP_NUM_THREADS=1 "${MPI[@]}" "$Z" train "${common[@]}" --zero-stage "${runner#zerodp-s}" \
        --dtype "$dt" "${LR_FLAGS[@]}" --log-every 0 --metrics "$res/$tag.jsonl" >"$res/$tag.log" 2>&1
      cmd="OMP_NUM_THREADS=1 ${MPI[*]} zerodp train ${common[*]} --zero-stage ${runner#zerodp-s} --dtype $dt ${LR_FLAGS[*]} --log-every 0 --metrics $tag.jsonl"
      ;;
    *)
      local port=$((29500 + RANDOM % 2000))
      measure "$tag" env OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${MPI[@]}" -x MASTER_ADDR -x MASTER_PORT \
        -x DS_ACCELERATOR -x DS_BUILD_OPS "$PY" bench/peers/peer_train.py "$runner" "${peer_arch[@]}" --dtype "$dt" \
        "${common[@]}" --threads 1 "${LR_FLAGS[@]}" >"$res/$tag.json" 2>"$res/$tag.log"
      cmd="DS_ACCELERATOR=cpu DS_BUILD_OPS=0 OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=P ${MPI[*]} -x MASTER_ADDR -x MASTER_PORT -x DS_ACCELERATOR -x DS_BUILD_OPS \$VENV/bin/python bench/peers/peer_train.py $runner${peer_arch[*]:+ ${peer_arch[*]}} --dtype $dt ${common[*]} --threads 1 ${LR_FLAGS[*]}"
      ;;
  esac
  printf '%s\t%s\n' "$runner-$dt" "$cmd" | sed "s|$root/||g; s|$data/||g" >>"$res/commands.txt"
}

for ((r = ROUND_FROM; r <= ROUNDS; r++)); do
  for dt in $DTYPES; do
    for runner in $RUNNERS; do
      one "$runner" "$dt" "$r"
    done
  done
done
sed -i '/^load_end=/d' "$res/env.txt"
echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$res/env.txt"

docs=()
if [[ $ARCH == llama ]]; then
  DOCS=${DOCS:-docs/benchmarks/peers_llama.md} NOTES=${NOTES:-bench/peers/notes_llama.md}
  docs=(--arch llama)
fi
DOCS=${DOCS:-docs/benchmarks/peers.md}
[[ $ISA == native || $DOCS == *_avx2.md ]] || DOCS=${DOCS%.md}_avx2.md
[[ "$WRITE_DOCS" == 1 ]] && docs+=(--write-docs "$DOCS" --notes "${NOTES:-bench/peers/notes.md}" --plot "${DOCS%.md}.png")
PYTHONPATH="$root/tests/pylib${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 bench/peers/report.py "$res" --warmup "$WARMUP" "${docs[@]}"
