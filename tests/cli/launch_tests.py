#!/usr/bin/env python3
"""End-to-end checks of `zerodp launch` (restarts from the latest checkpoint):

  restart:  rank 1 of a W = 2 job under `zerodp launch --max-restarts 2 -n 2 -- train --save-dir D`
            is killed with SIGKILL once a checkpoint exists; the launcher starts the job again with
            --resume D and it finishes (exit 0) with the same --out weights, bit for bit, as the same
            job run straight through;
  give_up:  a job that fails every time (fp32 with an injected overflow: exit 1) is run 1 + K times,
            then the launcher exits with the job's code saying it gave up;
  usage:    no --save-dir, no '--', a command other than train exit 2 at once; a job that fails with
            bad usage (exit 2) is not restarted.

usage: launch_tests.py ZERODP CASE     (CASE: restart | give_up | usage)
Exits non-zero with a message on the first failed check."""
import functools
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import zdp_test as zt  # noqa: E402
from zdp_test import check  # noqa: E402

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

tmp = zt.workdir("launch")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=4, heads=4, embd=128, vocab=256, ctx=64, seed=17,
                              text_bytes=60000)
STEPS = 60
train = ["train", "--init", init, "--data", tokens, "--micro-batch", "4", "--seq", "64", "--lr", "1e-3",
         "--zero-stage", "2", "--log-every", "0"]
LAUNCH = ["launch", "--max-restarts", "2", "-n", "2", "--oversubscribe", "--timeout", "200", "--"]


def path(name):
    return os.path.join(tmp, name)


if CASE == "restart":
    straight = path("straight.safetensors")
    train += ["--steps", str(STEPS)]
    rc, so, se = run(train + ["--save-dir", path("ck-straight"), "--save-every", "5", "--out", straight], 2,
                     timeout=300)
    check(rc == 0, "the job runs straight through", se)
    d, out = path("ck"), path("restarted.safetensors")
    res = zt.run_and_kill_rank(ZERODP, LAUNCH + train + ["--save-dir", d, "--save-every", "5", "--out", out],
                               None, 1, lambda: os.path.exists(os.path.join(d, "step-10")), timeout=300)
    check(res["killed"], "rank 1 was killed once the checkpoint of step 10 existed", res["err"])
    check(res["rc"] == 0, f"the launcher restarted the job and it finished (exit {res['rc']})", res["err"])
    check("attempt 2 of 3" in res["err"] and "restarting from the latest checkpoint" in res["err"] and
          "--resume" in res["err"], "the second attempt resumed from the save directory", res["err"])
    check(zt.read_bytes(out) == zt.read_bytes(straight),
          "the restarted job's --out weights are the straight run's, bit for bit")

elif CASE == "give_up":
    rc, so, se = run(["launch", "--max-restarts", "1", "-n", "2", "--oversubscribe", "--"] + train +
                     ["--steps", "3", "--save-dir", path("ck-fail"), "--inject-overflow-step", "1"], timeout=200)
    check(rc == 1 and se.count("zerodp launch: attempt") == 2 and "giving up" in se,
          "a job failing every time runs 1 + 1 times, then the launcher gives up with its exit code 1", se)

elif CASE == "usage":
    train += ["--steps", "2"]
    rc, so, se = run(LAUNCH + train)
    check(rc == 2 and "--save-dir" in se, "no --save-dir: exit 2 naming it", se)
    rc, so, se = run(["launch", "-n", "2", "train", "--save-dir", path("x")])
    check(rc == 2 and "-- <command>" in se, "no '--': exit 2 saying what is expected", se)
    rc, so, se = run(LAUNCH + ["sample", "--save-dir", path("x")])
    check(rc == 2 and "train" in se, "a command other than train: exit 2", se)
    rc, so, se = run(LAUNCH + train + ["--save-dir", path("ck-bad"), "--zero-stage", "7"], timeout=120)
    check(rc == 2 and se.count("zerodp launch: attempt") == 1 and "not restarting" in se,
          "a job failing with bad usage (exit 2) is not restarted", se)
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
