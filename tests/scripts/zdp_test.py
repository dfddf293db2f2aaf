"""Shared helpers of the Python test drivers (tests/cli, tests/ckpt_mpi, tests/plan, tests/hostile, ...):
the environment ranks run in, launching `zerodp` alone or through mpirun with a timeout, checks that
stop the driver with a message, and readers of the outputs (metrics JSON Lines, safetensors).

Import it from a driver with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    import zdp_test as zt
"""
import json
import os
import subprocess
import sys
import tempfile

# The repository root (tests/scripts/ is two levels down).
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Ranks run as root on 2 cores: allow both, one OpenMP thread a rank.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")


class Result:
    """What a command did: its exit code, standard output and standard error (text)."""

    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err

    def __iter__(self):  # rc, out, err = run(...)
        return iter((self.code, self.out, self.err))


def command(zerodp, args, ranks=None, timeout=120):
    """The command line: zerodp alone, or under mpirun with ranks and a timeout below the driver's."""
    launch = []
    if ranks:
        launch = ["mpirun", "-n", str(ranks), "--oversubscribe", "--timeout", str(max(5, timeout - 15))]
    return launch + [zerodp] + list(args)


def run(zerodp, args, ranks=None, timeout=120, env=None):
    """Runs zerodp (through mpirun when ranks is given); a run past `timeout` seconds fails the check."""
    cmd = command(zerodp, args, ranks, timeout)
    try:
        p = subprocess.run(cmd, env=dict(ENV, **(env or {})), capture_output=True, encoding="utf-8",
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"timed out after {timeout} s: {' '.join(cmd)}")
    return Result(p.returncode, p.stdout, p.stderr)


def fail(what, detail=""):
    print(f"FAILED: {what}\n{detail}")
    sys.exit(1)


def check(cond, what, detail=""):
    """Stops the driver with exit 1 when `cond` is false; prints 'ok: what' otherwise."""
    if not cond:
        fail(what, detail)
    print(f"ok: {what}")


def records(path, event):
    """The records of one event ("step", "memory", "traffic") of a metrics file."""
    with open(path) as f:
        return [r for r in map(json.loads, f) if r.get("event") == event]


def steps_of(path):
    """{step: record} of a metrics file."""
    return {r["step"]: r for r in records(path, "step")}


def workdir(prefix):
    return tempfile.mkdtemp(prefix=f"zerodp-{prefix}-")


def make_inputs(zerodp, work, layers=2, heads=4, embd=64, vocab=256, ctx=32, seed=5, text_bytes=60000):
    """A token file of the first `text_bytes` of the corpus and a `zerodp init` model in `work`:
    returns (tokens, init)."""
    text = os.path.join(work, "text.txt")
    with open(os.path.join(SRC, "data", "tinyshakespeare.txt"), "rb") as f, open(text, "wb") as g:
        g.write(f.read(text_bytes))
    tokens, init = os.path.join(work, "tok.bin"), os.path.join(work, "init.safetensors")
    r = run(zerodp, ["tokenize", "--text", text, "--out", tokens])
    check(r.code == 0, "tokenize", r.err)
    r = run(zerodp, ["init", "--out", init, "--layers", str(layers), "--heads", str(heads), "--embd", str(embd),
                     "--vocab", str(vocab), "--ctx", str(ctx), "--seed", str(seed)])
    check(r.code == 0, "init", r.err)
    return tokens, init
