#!/usr/bin/env python3
"""End-to-end checks of the collective watchdog (`--comm-timeout`; mpirun):

  sigstop: rank 1 of a W = 3 job is stopped with SIGSTOP mid-run; every other rank gives up on its
           collective after --comm-timeout 5 s: the job has ended (exit 1) well within 5 + 30 s of the
           stop, the message names the collective, the step, rank 1 as not answering and the ranks
           that had arrived; no process of the job is left;
  skip:    a rank that skips a collective (a testing aid: rank 2 completes the world communicator's
           42nd operation, a reduce-scatter after the first, learn_hosts' task, without MPI): the job ends (exit 1) within 5 + 30 s; rank 2, waiting on a
           later collective, names ranks 0 and 1 as not arrived and what they wait on; they name
           rank 2 as having gone past the collective they wait on (each message that gets out before
           the first rank to finish ends the job);
  usage:   --comm-timeout below 0 exits 2 naming the flag; 0 turns the watchdog off.

usage: watchdog_tests.py ZERODP CASE     (CASE: sigstop | skip | usage)
Exits non-zero with a message on the first failed check."""
import functools
import os
import signal
import subprocess
import sys
import time

from zdptest import harness as zt
from zdptest.harness import check

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

tmp = zt.workdir("watchdog")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=4, embd=64, vocab=256, ctx=32, seed=19, text_bytes=30000)
train = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "32", "--lr", "1e-3",
         "--zero-stage", "2", "--log-every", "0"]


def path(name):
    return os.path.join(tmp, name)


if CASE == "sigstop":
    metrics = path("m.jsonl")
    cmd = zt.command(ZERODP, train + ["--steps", "100000", "--comm-timeout", "5", "--metrics", metrics], ranks=3,
                     timeout=120)
    p = subprocess.Popen(cmd, env=zt.ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    start = time.monotonic()
    stopped_at, victim, job_ranks = None, None, set()
    while p.poll() is None and time.monotonic() - start < 110:
        if victim is None and time.monotonic() - start > 2.0:
            pids = zt.rank_pids(ZERODP, under=p.pid)
            if 1 in pids:
                victim = pids[1]
                job_ranks = set(pids.values())
                os.kill(victim, signal.SIGSTOP)
                stopped_at = time.monotonic()
        time.sleep(0.05)
    rc = p.poll()
    if rc is None:
        p.kill()
    out, err = p.communicate()
    err = err.decode(errors="replace")
    ended = time.monotonic()
    if victim is not None:
        try:
            os.kill(victim, signal.SIGKILL)  # in case it outlived the job
        except ProcessLookupError:
            pass
    check(victim is not None, "rank 1 was stopped with SIGSTOP")
    check(rc is not None and rc != 0, f"the job ended (exit {rc}) instead of hanging", err[-3000:])
    check(ended - stopped_at < 5 + 30, f"... {ended - stopped_at:.1f} s after the stop: within --comm-timeout + 30 s")
    check("did not complete within 5 s" in err and "(--comm-timeout)" in err,
          "a rank's message names the timeout", err[-3000:])
    check("rank 1 did not answer" in err and "step " in err and "Arrived: rank" in err,
          "the message names rank 1 as not answering, the step and the ranks that arrived", err[-3000:])
    time.sleep(0.5)
    left = [pid for pid in zt.rank_pids(ZERODP).values() if pid == victim or pid in job_ranks]
    check(not left, "no process of the job is left", str(left))

elif CASE == "skip":
    env = dict(zt.ENV, ZERODP_TEST_SKIP_COLLECTIVE="2:41")
    cmd = zt.command(ZERODP, train + ["--steps", "200", "--comm-timeout", "5"], ranks=3, timeout=120)
    start = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=120)
    took = time.monotonic() - start
    err = p.stderr.decode(errors="replace")
    lines = [line for line in err.splitlines() if "did not complete within 5 s" in line]
    check(p.returncode == 1 and took < 5 + 30, f"the job ended with exit {p.returncode} after {took:.1f} s", err[-3000:])
    # Whichever rank finishes asking first ends the job, so not every rank's message may get out; each
    # that does must tell the story from its side, and at least one must.
    check(lines, "at least one rank printed the watchdog's message", err[-3000:])
    for line in lines:
        if line.startswith("[rank 2]"):
            check("Not arrived: rank 0 (issued 42 collectives there" in line and "rank 1 (issued 42" in line and
                  "waiting on" in line, "rank 2 names ranks 0 and 1 as not arrived, and what they wait on", line)
        else:
            check("Went past it" in line and "rank 2 (issued 43 there" in line,
                  "a rank left behind names rank 2 as having gone past its collective", line)

elif CASE == "usage":
    rc, so, se = run(train + ["--steps", "1", "--comm-timeout", "-1"], 2)
    check(rc == 2 and "--comm-timeout" in se, "--comm-timeout -1 exits 2 naming the flag", se)
    rc, so, se = run(train + ["--steps", "2", "--comm-timeout", "0"], 2)
    check(rc == 0, "--comm-timeout 0 (no watchdog) trains", se)
    rc, so, se = run(["train", "--help"])
    check("--comm-timeout" in so, "--help lists the flag", so)
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
