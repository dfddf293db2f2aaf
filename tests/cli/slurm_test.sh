#!/usr/bin/env bash
# zerodp under a real Slurm: this script brings up a private one-node cluster (munged, slurmctld,
# slurmd, all under a temporary directory, on ports of their own), then checks that
#   1. `srun --mpi=pmix -n 4` trains (exit 0), every rank sees W = 4 (metrics `tokens` = W·G·B·T),
#      and the --out weights at ZeRO stage 3 are bit for bit those of `mpirun -n 4 --oversubscribe`;
#   2. `srun -N 1 -n 2` trains with W = 2;
#   3. `mpirun` inside an `sbatch` allocation of 4 tasks (no -n) trains with W = 4, the same bits;
#   4. docs/examples/train.sbatch, submitted with `sbatch --wait` (paths and sizes passed through
#      its ZDP_* variables), trains under `zerodp launch --launcher srun`; one rank is killed with
#      SIGKILL once the first checkpoint exists, the launcher starts the step again from it, and the
#      job ends with exit 0 and the same weights, bit for bit, as the straight mpirun run.
# Every daemon it started is stopped on exit and the temporary directory removed. Each command has
# a time limit, and all of them together stay under one overall deadline.
#
# usage: slurm_test.sh ZERODP
# Exit codes: 0 passed, 1 failed, 77 skipped (no Slurm or munge installed, not root, or the
# daemons would not start; the reason is printed on a line starting with SKIPPED:).
set -uo pipefail

ZERODP=${1:?usage: slurm_test.sh ZERODP}
ZERODP=$(readlink -f "$ZERODP")
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
EXAMPLE=$SRC/docs/examples/train.sbatch
CORPUS=$SRC/data/tinyshakespeare.txt

DEADLINE=$((SECONDS + 300)) # the whole test, daemons included
T0=$SECONDS

say() { printf '[slurm_test %3ds] %s\n' "$((SECONDS - T0))" "$*"; }
skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail() {
  echo "FAILED: $*"
  exit 1
}
# A time limit for the next command: $1 seconds, or what is left before the deadline (at least 1).
limit() {
  local left=$((DEADLINE - SECONDS))
  ((left < 1)) && left=1
  ((left < $1)) && echo "$left" || echo "$1"
}

# ---------------------------------------------------------------- what the test needs
[[ -x $ZERODP ]] || fail "no zerodp executable at '$1'"
[[ -f $EXAMPLE && -f $CORPUS ]] || fail "missing $EXAMPLE or $CORPUS"
[[ $(id -u) == 0 ]] || skip "slurmd must run as root to start job steps, and this is uid $(id -u)"
missing=()
for c in slurmctld slurmd srun sbatch sinfo squeue scancel munged munge unmunge mpirun python3 timeout pgrep hostname; do
  command -v "$c" >/dev/null 2>&1 || missing+=("$c")
done
((${#missing[@]} == 0)) ||
  skip "not installed: ${missing[*]} (Debian: apt-get install slurmctld slurmd slurm-client munge openmpi-bin procps)"

# Nothing from an enclosing Slurm job (if ctest itself runs inside one) may reach the private cluster's
# clients, and no ZDP_* setting may reach the example script but the ones given below.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM|SBATCH|SRUN|SALLOC|SQUEUE|SINFO|SCANCEL|ZDP)_')
unset ZERODP_TEST_CRASH_IN_SAVE ZERODP_TEST_SKIP_COLLECTIVE
export OMP_NUM_THREADS=1

# ---------------------------------------------------------------- cleanup, whatever happens
WORK=$(mktemp -d /tmp/zdp-slurm.XXXXXX) || fail "mktemp"
chmod 755 "$WORK" # munged wants every directory above its socket searchable by all
PIDS=()           # daemons started here, in the order they were started
NAMES=(munged slurmctld slurmd)
SLURM_UP=

# shellcheck disable=SC2317  # (called from the EXIT trap)
stop_pid() { # TERM, then KILL after 10 s; the pid is one of our children
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# shellcheck disable=SC2317
holds_work_file() { # whether process $1 works in, or has a file open in, the temporary directory
  local f cwd
  cwd=$(readlink "/proc/$1/cwd" 2>/dev/null)
  [[ $cwd == "$WORK" || $cwd == "$WORK"/* ]] && return 0
  for f in "/proc/$1/fd/"*; do
    [[ $(readlink "$f" 2>/dev/null) == "$WORK"/* ]] && return 0
  done
  return 1
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$? i p pids
  trap - EXIT INT TERM HUP
  set +e
  if [[ -n $SLURM_UP ]] && kill -0 "${PIDS[1]}" 2>/dev/null; then # slurmctld still there: cancel what is left
    pids=$(timeout 10 squeue -h -o %i 2>/dev/null)
    if [[ -n $pids ]]; then
      # shellcheck disable=SC2086  # one word per job id
      timeout 10 scancel $pids 2>/dev/null
      for ((i = 0; i < 100; i++)); do
        [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
        sleep 0.2
      done
    fi
  fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
  # Anything still working in, or holding a file of, the temporary directory is ours (a job step's
  # slurmstepd or a rank that outlived its daemons): end it by its pid.
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    if holds_work_file "$p"; then
      echo "cleanup: ending leftover process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80))"
      kill -KILL "$p" 2>/dev/null
    fi
  done
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

dump_logs() {
  local f
  for f in "$WORK"/log/*.log "$WORK"/munge/munged.log; do
    [[ -f $f ]] || continue
    echo "---- last lines of $f"
    tail -n 25 "$f"
  done
}

# ---------------------------------------------------------------- munge, with a key of its own
NODE=$(hostname -s)
mkdir -p "$WORK"/{munge,msock,state,spool,log,tmp,run}
chmod 700 "$WORK/munge"
chmod 755 "$WORK/msock"
head -c 1024 /dev/urandom >"$WORK/munge/munge.key"
chmod 400 "$WORK/munge/munge.key"
MSOCK=$WORK/msock/munge.socket
munged -F --socket="$MSOCK" --key-file="$WORK/munge/munge.key" --pid-file="$WORK/munge/munged.pid" \
  --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/munged.seed" >"$WORK/log/munged.out" 2>&1 &
PIDS+=($!)
ok=
for ((i = 0; i < 100; i++)); do
  if [[ -S $MSOCK ]] && munge -n -S "$MSOCK" 2>/dev/null | unmunge -S "$MSOCK" >/dev/null 2>&1; then
    ok=1
    break
  fi
  kill -0 "${PIDS[0]}" 2>/dev/null || break
  sleep 0.1
done
[[ -n $ok ]] || {
  cat "$WORK/log/munged.out" "$WORK/munge/munged.log" 2>/dev/null | tail -n 5
  skip "munged would not start with a private key and socket"
}

# ---------------------------------------------------------------- slurm.conf
# Two free TCP ports, next to each other, away from Slurm's defaults (6817, 6818).
port_free() { ! ss -Hltn 2>/dev/null | awk '{print $4}' | grep -qE "[:.]$1\$"; }
for ((i = 0; i < 50; i++)); do
  CTLD_PORT=$((20000 + RANDOM % 30000))
  port_free "$CTLD_PORT" && port_free $((CTLD_PORT + 1)) && break
done
CPUS=$(nproc)
((CPUS < 4)) && CPUS=4 # four tasks on fewer cores: the node claims 4 CPUs (config_overrides)

export SLURM_CONF=$WORK/slurm.conf
cat >"$SLURM_CONF" <<EOF
# A private test cluster: one controller and one node on this machine, everything under $WORK.
ClusterName=zdptest
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
TmpFS=$WORK/tmp
SlurmctldPidFile=$WORK/run/slurmctld.pid
SlurmdPidFile=$WORK/run/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
InactiveLimit=0
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=test Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF

# ---------------------------------------------------------------- slurmctld and slurmd
say "starting slurmctld and slurmd (node $NODE, ports $CTLD_PORT/$((CTLD_PORT + 1)), $CPUS CPUs) in $WORK"
slurmctld -D -f "$SLURM_CONF" >"$WORK/log/slurmctld.out" 2>&1 &
PIDS+=($!)
SLURM_UP=1
slurmd -D -f "$SLURM_CONF" -N "$NODE" >"$WORK/log/slurmd.out" 2>&1 &
PIDS+=($!)
state='' why=''
up_by=$((SECONDS + 30))
while :; do
  for i in 0 1 2; do
    kill -0 "${PIDS[i]}" 2>/dev/null || why="$why${why:+, }${NAMES[i]} exited"
  done
  [[ -n $why ]] && break
  state=$(timeout 5 sinfo -h -N -n "$NODE" -o %t 2>/dev/null | head -n 1)
  [[ $state == idle ]] && break
  ((SECONDS >= up_by)) && { why="node state '${state:-unknown}' after 30 s"; break; }
  sleep 0.2
done
if [[ $state != idle ]]; then
  dump_logs
  tail -n 5 "$WORK"/log/*.out 2>/dev/null
  skip "the private Slurm cluster did not come up: $why"
fi
mpis=$(timeout 10 srun --mpi=list 2>&1)
grep -qw pmix <<<"$mpis" || skip "this Slurm has no PMIx plugin (srun --mpi=list: $(tr '\n' ' ' <<<"$mpis"))"
say "cluster up: $(tr '\n' ' ' <<<"$mpis" | sed 's/  */ /g')"

# ---------------------------------------------------------------- inputs
head -c 60000 "$CORPUS" >"$WORK/text.txt"
"$ZERODP" tokenize --text "$WORK/text.txt" --out "$WORK/tokens.bin" >/dev/null || fail "zerodp tokenize"
"$ZERODP" init --out "$WORK/init.safetensors" --layers 4 --heads 4 --embd 128 --vocab 256 --ctx 64 \
  --seed 1 >/dev/null || fail "zerodp init"
STEPS=60
B=2
SEQ=64
TRAIN=(train --init "$WORK/init.safetensors" --data "$WORK/tokens.bin" --micro-batch "$B" --seq "$SEQ"
  --log-every 0 --comm-timeout 60)

# check_tokens METRICS W STEPS: every step record carries tokens = W·1·B·SEQ, and the last one is
# step STEPS-1.
check_tokens() {
  python3 - "$1" "$2" "$3" "$B" "$SEQ" <<'EOF'
import json, sys
path, w, steps, b, t = sys.argv[1], *map(int, sys.argv[2:])
recs = [json.loads(l) for l in open(path) if l.strip()]
st = [r for r in recs if r.get("event") == "step"]
want = w * 1 * b * t
bad = [r["tokens"] for r in st if r.get("tokens") != want]
if not st or bad or st[-1]["step"] != steps - 1:
    sys.exit(f"{path}: expected step records up to step {steps - 1} with tokens = {w}*1*{b}*{t} = {want}; "
             f"got {len(st)} records, tokens {sorted(set(r.get('tokens') for r in st))}")
EOF
}

# same_weights A B: whether two --out files hold the same bits; when they do not, says by how much
# the tensors differ (zerodp's reductions run in a fixed order, so any difference is a failure).
same_weights() {
  cmp -s "$1" "$2" && return 0
  python3 - "$1" "$2" <<'EOF' || true
import array, json, struct, sys
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        lo, hi = t["data_offsets"]
        out[name] = array.array("f", raw[8 + n + lo:8 + n + hi])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
if a.keys() != b.keys():
    print(f"different tensors: {sorted(a.keys() ^ b.keys())}")
else:
    worst = max(((max((abs(x - y) for x, y in zip(a[k], b[k])), default=0.0), k) for k in a), default=(0.0, "-"))
    print(f"largest difference {worst[0]:.3g} (in {worst[1]})")
EOF
  return 1
}

# ---------------------------------------------------------------- reference: mpirun -n 4
say "mpirun -n 4 (reference, ZeRO stage 3, $STEPS steps)"
t=$(limit 120)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout "$t" mpirun -n 4 --oversubscribe --timeout $((t > 20 ? t - 10 : t)) "$ZERODP" "${TRAIN[@]}" \
  --zero-stage 3 --steps $STEPS --metrics "$WORK/ref.jsonl" --out "$WORK/ref.safetensors" >"$WORK/ref.log" 2>&1
rc=$?
((rc == 0)) || { tail -n 20 "$WORK/ref.log"; fail "mpirun -n 4 exited $rc"; }
check_tokens "$WORK/ref.jsonl" 4 $STEPS || fail "mpirun -n 4: wrong world size in the metrics"

# ---------------------------------------------------------------- srun -n 4: same bits as mpirun
# The ranks run without OpenMPI's run-as-root switches: those concern mpirun only.
say "srun --mpi=pmix -n 4 (ZeRO stage 3, $STEPS steps)"
t0=$SECONDS
env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
  timeout "$(limit 120)" srun --mpi=pmix --kill-on-bad-exit=1 -N 1 -n 4 --chdir="$WORK" "$ZERODP" "${TRAIN[@]}" \
  --zero-stage 3 --steps $STEPS --metrics "$WORK/srun4.jsonl" --out "$WORK/srun4.safetensors" >"$WORK/srun4.log" 2>&1
rc=$?
((rc == 0)) || { tail -n 30 "$WORK/srun4.log"; dump_logs; fail "srun -n 4 exited $rc"; }
check_tokens "$WORK/srun4.jsonl" 4 $STEPS || fail "srun -n 4: wrong world size in the metrics"
grep -q "on 4 ranks" "$WORK/srun4.log" || { tail -n 20 "$WORK/srun4.log"; fail "srun -n 4: zerodp did not report 4 ranks"; }
same_weights "$WORK/srun4.safetensors" "$WORK/ref.safetensors" ||
  fail "srun -n 4: the --out weights differ from mpirun -n 4's (expected the same bits)"
say "srun -n 4: exit 0, tokens = 4*1*$B*$SEQ, weights identical to mpirun -n 4 ($((SECONDS - t0)) s)"

# ---------------------------------------------------------------- srun -n 2
say "srun --mpi=pmix -N 1 -n 2 (ZeRO stage 2, 4 steps)"
env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
  timeout "$(limit 120)" srun --mpi=pmix --kill-on-bad-exit=1 -N 1 -n 2 --chdir="$WORK" "$ZERODP" "${TRAIN[@]}" \
  --zero-stage 2 --steps 4 --metrics "$WORK/srun2.jsonl" >"$WORK/srun2.log" 2>&1
rc=$?
((rc == 0)) || { tail -n 30 "$WORK/srun2.log"; dump_logs; fail "srun -n 2 exited $rc"; }
check_tokens "$WORK/srun2.jsonl" 2 4 || fail "srun -n 2: wrong world size in the metrics"
say "srun -n 2: exit 0, tokens = 2*1*$B*$SEQ"

# ---------------------------------------------------------------- mpirun inside an allocation
# docs/slurm.md's alternative: mpirun in a batch job takes the world size (4) from the allocation.
say "sbatch --wait -n 4 --wrap 'mpirun ...' (mpirun inside the allocation, ZeRO stage 3, $STEPS steps)"
t0=$SECONDS
printf -v inner '%q ' mpirun --bind-to none -x OMP_NUM_THREADS "$ZERODP" "${TRAIN[@]}" --zero-stage 3 --steps $STEPS \
  --metrics "$WORK/alloc.jsonl" --out "$WORK/alloc.safetensors"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  timeout "$(limit 120)" sbatch --wait --job-name=zdp-mpirun-test -N 1 -n 4 -c 1 --time=10 --chdir="$WORK" \
  --output="$WORK/alloc.out" --wrap "$inner" >"$WORK/alloc.submit" 2>&1
rc=$?
((rc == 0)) || { cat "$WORK/alloc.submit"; tail -n 30 "$WORK/alloc.out"; fail "mpirun inside an sbatch allocation: exit $rc"; }
check_tokens "$WORK/alloc.jsonl" 4 $STEPS || fail "mpirun inside the allocation: wrong world size in the metrics"
same_weights "$WORK/alloc.safetensors" "$WORK/ref.safetensors" ||
  fail "mpirun inside the allocation: the --out weights differ from mpirun -n 4's"
say "mpirun in the allocation: exit 0, tokens = 4*1*$B*$SEQ, weights identical ($((SECONDS - t0)) s)"

# ---------------------------------------------------------------- the sbatch example, with a restart
# The example's #SBATCH lines ask for 2 nodes of 4 tasks with 8 CPUs each; options on sbatch's
# command line take precedence, so the same file runs here as 1 node x 4 tasks x 1 CPU.
RUN=$WORK/sbatch-run
say "sbatch --wait docs/examples/train.sbatch (4 tasks, ZeRO stage 3, $STEPS steps, checkpoint every 10)"
t0=$SECONDS
ZDP_BIN=$ZERODP ZDP_INIT=$WORK/init.safetensors ZDP_DATA=$WORK/tokens.bin ZDP_RUN_DIR=$RUN \
  ZDP_STEPS=$STEPS ZDP_MICRO_BATCH=$B ZDP_SEQ=$SEQ ZDP_STAGE=3 ZDP_SAVE_EVERY=10 ZDP_KEEP=2 \
  ZDP_MAX_RESTARTS=2 ZDP_COMM_TIMEOUT=60 ZDP_TRAIN_ARGS="--log-every 10" \
  timeout "$(limit 150)" sbatch --wait --job-name=zdp-slurm-test --nodes=1 --ntasks-per-node=4 \
  --cpus-per-task=1 --time=10 --chdir="$WORK" --output="$WORK/sbatch.out" "$EXAMPLE" \
  >"$WORK/sbatch.submit" 2>&1 &
SBATCH_PID=$!
# Once the first checkpoint exists, kill rank 1 of the step with SIGKILL (found by its environment:
# this job's run directory and SLURM_PROCID=1). The rank is looked up while the job starts, so that the
# loop that waits for the checkpoint is cheap: the tiny model's 50 steps after it take under 2 s, less
# than a search through /proc under the other tests' load.
killed= rank1=
while kill -0 "$SBATCH_PID" 2>/dev/null && [[ -z $killed ]]; do
  if [[ -z $rank1 ]]; then
    for p in $(pgrep -x zerodp); do
      env_of=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null) || continue
      if grep -qx "ZDP_RUN_DIR=$RUN" <<<"$env_of" && grep -qx "SLURM_PROCID=1" <<<"$env_of"; then
        rank1=$p
        break
      fi
    done
  fi
  if [[ -n $rank1 && -e $RUN/ckpt/latest ]]; then
    if kill -KILL "$rank1" 2>/dev/null; then killed=$rank1; else rank1=; fi # gone: look again
  fi
  sleep 0.05
done
wait "$SBATCH_PID"
rc=$?
if ((rc != 0)); then
  cat "$WORK/sbatch.submit"
  grep -v '^ *[0-9]\+  ' "$WORK/sbatch.out" 2>/dev/null | tail -n 30
  dump_logs
  fail "sbatch --wait of the example exited $rc"
fi
[[ -n $killed ]] || { cat "$WORK/sbatch.out"; fail "the job ended before rank 1 could be killed after the first checkpoint"; }
say "killed rank 1 (pid $killed) after the first checkpoint; what the job said about it:"
grep -E '^(zerodp launch|srun: error|slurmstepd)|resuming from' "$WORK/sbatch.out" | cut -c1-160 | sed 's/^/    /'
if ! grep -q "zerodp launch: attempt 2 of 3" "$WORK/sbatch.out" ||
  ! grep -q "restarting from the latest checkpoint" "$WORK/sbatch.out" ||
  ! grep -q -- "--resume $RUN/ckpt" "$WORK/sbatch.out"; then
  cat "$WORK/sbatch.out"
  fail "the example did not restart the step from its checkpoint"
fi
grep -q "4 ranks on 1 node" "$WORK/sbatch.out" || { head -n 5 "$WORK/sbatch.out"; fail "the job did not get 4 tasks on 1 node"; }
check_tokens "$RUN/metrics.jsonl" 4 $STEPS || fail "sbatch: wrong world size in the metrics"
same_weights "$RUN/final.safetensors" "$WORK/ref.safetensors" ||
  fail "sbatch: the restarted job's --out weights differ from mpirun -n 4's straight run"
say "sbatch: exit 0 after one restart from the checkpoint, tokens = 4*1*$B*$SEQ, weights identical to mpirun -n 4 ($((SECONDS - t0)) s)"

say "PASSED"
exit 0
