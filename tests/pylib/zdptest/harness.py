"""Shared helpers of the Python test drivers (tests/cli, tests/ckpt_mpi, tests/plan, tests/reference,
tests/hostile, bench/multihost, ...): the environment ranks run in, launching `zerodp` alone or through
mpirun with a timeout, checks that stop the driver with a message (or collect every failure), and
readers of the outputs (metrics JSON Lines, safetensors).

    from zdptest import harness as zt

(ctest and pytest put tests/pylib on PYTHONPATH.) Standard library only: the drivers run under
whichever python3 CMake found (the reference drivers under /usr/bin/python3 with numpy and torch).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

# The repository root (this file is tests/pylib/zdptest/harness.py).
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The text every driver tokenizes a piece of.
CORPUS = os.path.join(SRC, "data", "tinyshakespeare.txt")

# What ranks need on this machine: run as root on 2 cores, more ranks than cores, one OpenMP thread a rank.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1"}
# The environment of every command: this process's, MPI_ENV, and no test hook leaking in from outside
# (a driver that wants one passes it in `env`).
ENV = dict(os.environ, **MPI_ENV)
ENV.pop("ZERODP_TEST_CRASH_IN_SAVE", None)


class Result:
    """What a command did: its exit code (None when it ran past its timeout), standard output and
    standard error (text), and the seconds it took."""

    def __init__(self, code, out, err, secs=0.0):
        self.code, self.out, self.err, self.secs = code, out, err, secs

    @property
    def text(self):
        """Standard output then standard error."""
        return self.out + self.err

    def __iter__(self):  # rc, out, err = run(...)
        return iter((self.code, self.out, self.err))


def command(zerodp, args, ranks=None, timeout=120, mpirun="mpirun", mpi_timeout=None):
    """The command line: zerodp alone, or under `mpirun -n ranks` whose own --timeout (`mpi_timeout`,
    by default 15 s below `timeout`) ends a hung job before the driver's timeout does."""
    launch = []
    if ranks:
        limit = mpi_timeout if mpi_timeout is not None else max(5, timeout - 15)
        launch = [mpirun, "-n", str(ranks), "--oversubscribe", "--timeout", str(limit)]
    return launch + [zerodp] + list(args)


def mpmd_command(zerodp, groups, timeout=120, mpirun="mpirun", mpi_timeout=None):
    """One mpirun job whose groups of ranks run different command lines: groups = [(ranks, args), ...]
    gives `mpirun --oversubscribe --timeout T -n a zerodp args_a : -n b zerodp args_b ...`."""
    limit = mpi_timeout if mpi_timeout is not None else max(5, timeout - 15)
    cmd = [mpirun, "--oversubscribe", "--timeout", str(limit)]
    for i, (ranks, args) in enumerate(groups):
        cmd += ([":"] if i else []) + ["-n", str(ranks), zerodp] + list(args)
    return cmd


def _text(x):
    return x.decode("utf-8", errors="replace") if isinstance(x, bytes) else (x or "")


def launch(cmd, timeout, env=None, echo=False):
    """Runs any command line in ENV (plus `env`) for at most `timeout` seconds. Never raises on a
    timeout: the Result's code is then None, with what the command had written. `echo` prints it first."""
    if echo:
        print("$ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=dict(ENV, **(env or {})), capture_output=True, encoding="utf-8",
                           errors="replace", timeout=timeout)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, _text(e.stdout), _text(e.stderr)
    return Result(code, out, err, time.monotonic() - start)


def run(zerodp, args, ranks=None, timeout=120, env=None, mpirun="mpirun", mpi_timeout=None):
    """Runs zerodp (through mpirun when ranks is given); a run past `timeout` seconds fails the check."""
    cmd = command(zerodp, args, ranks, timeout, mpirun, mpi_timeout)
    r = launch(cmd, timeout, env)
    if r.code is None:
        fail(f"timed out after {timeout} s: {' '.join(cmd)}", r.text[-3000:])
    return r


class Failed(SystemExit):
    """Raised by fail(): ends a driver with exit code 1, or is caught by one that goes on to its next case."""


def fail(what, detail=""):
    print(f"FAILED: {what}\n{detail}", flush=True)
    raise Failed(1)


def check(cond, what, detail=""):
    """Stops the driver with exit 1 when `cond` is false; prints 'ok: what' otherwise."""
    if not cond:
        fail(what, detail)
    print(f"ok: {what}")


class Checks:
    """Checks that go on after a failure, so that one run reports all of them: check() records and
    prints each failed one and returns `ok`; `failures` lists them."""

    def __init__(self, prefix="  FAIL "):
        self.failures = []
        self.prefix = prefix

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
            print(f"{self.prefix}{what}", flush=True)
        return ok

    def note(self, text):
        print(f"  {text}")


def driver_args(usage):
    """(absolute path of ZERODP, CASE) from `driver.py ZERODP CASE`; exit 2 with `usage` otherwise."""
    if len(sys.argv) != 3:
        sys.exit(usage)
    return os.path.abspath(sys.argv[1]), sys.argv[2]


# ---- killing a rank ---------------------------------------------------------------------------------

def descendants(pid):
    """The pids of every process descended from `pid` (children, theirs, ...), from /proc."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])  # after the command name, which may hold spaces
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def rank_pids(zerodp, under=None):
    """{world rank: pid} of the running `zerodp` processes mpirun started (from their environment);
    with `under`, only those descended from that pid (a job's mpirun: not another test's ranks)."""
    found = {}
    mine = descendants(under) if under is not None else None
    for d in os.listdir("/proc"):
        if not d.isdigit() or (mine is not None and int(d) not in mine):
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode(errors="replace")
            if os.path.realpath(argv0) != os.path.realpath(zerodp):
                continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            if b"OMPI_COMM_WORLD_RANK" in env:
                found[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(d)
        except (OSError, ValueError):
            continue  # gone meanwhile
    return found


def run_and_kill_rank(zerodp, args, ranks, victim, when, timeout=120):
    """Starts `zerodp args` on `ranks` ranks, waits until when() is true, sends SIGKILL to rank
    `victim`, and waits for the job to end. Returns {"killed": bool, "rc": exit code (None: still
    running at the timeout, then killed), "seconds_after_kill": float, "err": stderr's last 3000
    characters, "err_all": all of it}."""
    import signal
    cmd = command(zerodp, args, ranks=ranks, timeout=timeout)
    p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start, killed, kill_time = time.monotonic(), False, None
    while p.poll() is None and time.monotonic() - start < timeout:
        if not killed and when():
            pid = rank_pids(zerodp, under=p.pid).get(victim)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed, kill_time = True, time.monotonic()
        time.sleep(0.05)
    rc = p.poll()
    if rc is None:
        p.kill()
    out, err = p.communicate()
    end = time.monotonic()
    return {"killed": killed, "rc": rc, "seconds_after_kill": end - kill_time if kill_time else -1.0,
            "err": _text(err)[-3000:], "err_all": _text(err)}


def offload_files_open():
    """Offload files (rank<r>-<what> under a zerodp-offload.* directory) some process still has open."""
    held = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{d}/fd"):
                target = os.readlink(f"/proc/{d}/fd/{fd}")
                if "/zerodp-offload." in target:
                    held.append(f"{d}: {target}")
        except OSError:
            continue
    return held


def run_dir_host():
    """This host's name as zerodp writes it in an offload run directory's name (io/run_dir.h)."""
    import re
    import socket
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:64] or "unknown"


# ---- outputs ---------------------------------------------------------------------------------------

def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_metrics(path):
    """Every record of a metrics file (JSON Lines), in order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def records(path, event):
    """The records of one event ("step", "memory", "traffic") of a metrics file."""
    return [r for r in read_metrics(path) if r.get("event") == event]


def steps_of(path):
    """{step: record} of a metrics file (or of the .partial a killed run left)."""
    return {r["step"]: r for r in records(path, "step")}


# A token file (docs/formats): a 1024-byte header of int32 magic, version (1: uint16 ids, 2: uint32)
# and count, then the ids.
TOKENS_MAGIC, TOKENS_HEADER_BYTES = 20240520, 1024


def read_token_file(path):
    """The ids of a token file, as a list."""
    blob = read_bytes(path)
    magic, version, count = struct.unpack("<3i", blob[:12])
    if magic != TOKENS_MAGIC or version not in (1, 2):
        fail(f"{path}: not a token file (magic {magic}, version {version})")
    code, width = ("H", 2) if version == 1 else ("I", 4)
    return list(struct.unpack(f"<{count}{code}", blob[TOKENS_HEADER_BYTES:TOKENS_HEADER_BYTES + count * width]))


def write_token_file(path, ids, width):
    """A token file of `ids` at `width` bytes an id (2 or 4)."""
    code = "H" if width == 2 else "I"
    header = struct.pack("<3i", TOKENS_MAGIC, 1 if width == 2 else 2, len(ids))
    with open(path, "wb") as f:
        f.write(header + bytes(TOKENS_HEADER_BYTES - len(header)) + struct.pack(f"<{len(ids)}{code}", *ids))


def model_states(record, tier):
    """The model-state bytes of one tier (peak_bytes, live_bytes, host_bytes, nvme_bytes) of a memory record."""
    return {k: record[tier][k] for k in ("param", "grad", "master", "optim", "total")}


def trained(zerodp, args, ranks, out, metrics, what, env=None):
    """Runs `zerodp args` (a training run writing `out` and `metrics`; `env`: extra environment) and checks
    it exits 0; returns (the bytes of out, [(loss, grad_norm)] a step, the memory records)."""
    rc, _, err = run(zerodp, args, ranks, env=env)
    check(rc == 0, f"{what} trains", err)
    return read_bytes(out), [(s["loss"], s["grad_norm"]) for s in records(metrics, "step")], records(metrics, "memory")


def parse_safetensors(blob):
    """(header without __metadata__, metadata, data section) of a safetensors file's bytes."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, blob[8 + n:]


def f32_values(data, entry):
    """The floats of one F32 tensor: `entry` its header entry, `data` the file's data section."""
    b, e = entry["data_offsets"]
    return struct.unpack(f"<{(e - b) // 4}f", data[b:e])


def safetensors_f32(path):
    """{name: tuple of floats} of an F32 safetensors file."""
    header, _, data = parse_safetensors(read_bytes(path))
    return {name: f32_values(data, entry) for name, entry in header.items()}


def _crc32c_table():
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli) as docs/checkpoints.md defines it (manifest.crc32c), written independently
    of zerodp's."""
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _CRC32C_TABLE[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


# ---- inputs ----------------------------------------------------------------------------------------

def workdir(prefix):
    return tempfile.mkdtemp(prefix=f"zerodp-{prefix}-")


def corpus_excerpt(work, text_bytes=60000):
    """work/text.txt: the first `text_bytes` of the corpus; returns its path."""
    text = os.path.join(work, "text.txt")
    if not os.path.exists(CORPUS):
        fail(f"{CORPUS} is missing: the tests train on it (it is part of the repository)")
    with open(CORPUS, "rb") as f, open(text, "wb") as g:
        g.write(f.read(text_bytes))
    return text


def make_inputs(zerodp, work, layers=2, heads=4, embd=64, vocab=256, ctx=32, seed=5, text_bytes=60000):
    """A token file of the first `text_bytes` of the corpus (work/text.txt) and a `zerodp init` model
    in `work`: returns (tokens, init)."""
    text = corpus_excerpt(work, text_bytes)
    tokens, init = os.path.join(work, "tok.bin"), os.path.join(work, "init.safetensors")
    r = run(zerodp, ["tokenize", "--text", text, "--out", tokens])
    check(r.code == 0, "tokenize", r.err)
    r = run(zerodp, ["init", "--out", init, "--layers", str(layers), "--heads", str(heads), "--embd", str(embd),
                     "--vocab", str(vocab), "--ctx", str(ctx), "--seed", str(seed)])
    check(r.code == 0, "init", r.err)
    return tokens, init
