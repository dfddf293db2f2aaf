#!/usr/bin/env python3
"""End-to-end checks of `zerodp launch` (restarts from the latest checkpoint):

  restart:  rank 1 of a W = 2 job under `zerodp launch --max-restarts 2 -n 2 -- train --save-dir D`
            is killed with SIGKILL once a checkpoint exists; the launcher starts the job again with
            --resume D and it finishes (exit 0) with the same --out weights, bit for bit, as the same
            job run straight through;
  give_up:  a job that fails every time (fp32 with an injected overflow: exit 1) is run 1 + K times,
            then the launcher exits with the job's code saying it gave up;
  shrink:   `zerodp launch --min-ranks 2 -n 4 -- train --train-batch-size 8 --micro-batch 2 ...` under
            a launcher that, once a host is "lost", can no longer start more than 2 ranks (it fails as
            mpirun does when a host of its hostfile is down): rank 3 is killed with SIGKILL once a
            checkpoint exists and its host marked lost; the attempt at 4 ranks that follows fails
            without a new checkpoint, so the next runs at 2 ranks (G = 2, the same global batch) from
            the checkpoint, resharded; it finishes with the uninterrupted 4-rank run's weights within
            1e-5 (only the order of the sums differs) and its losses within 1e-5 relative;
  wait_hosts: a launcher that cannot start its daemon on host node2 (it prints what mpirun prints
            then: "ORTE was unable to reliably start one or more daemons", the host named) for its
            first 3 tries, then runs mpirun: under --max-restarts 0 the launch names node2, waits 1, 2
            and 4 s without spending its one attempt, and the 4th try finishes the job; one that never
            starts is counted as a failed attempt once --join-timeout 3 has passed (and at once after
            that, and with --join-timeout 0), and the launch gives up;
  usage:    no --save-dir, no '--', a command other than train, a train command that does not parse
            exit 2 at once; a job that fails with bad usage (exit 2) is not restarted.

usage: launch_tests.py ZERODP CASE     (CASE: restart | give_up | shrink | wait_hosts | usage)
Exits non-zero with a message on the first failed check."""
import functools
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check

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

elif CASE == "shrink":
    STEPS_SHRINK = 20
    batch = ["--train-batch-size", "8", "--micro-batch", "2", "--steps", str(STEPS_SHRINK), "--save-every", "5",
             "--metrics"]
    straight = path("straight.safetensors")
    base = list(train)
    i = base.index("--micro-batch")
    del base[i:i + 2]  # given in `batch`
    rc, so, se = run(base + batch + [path("straight.jsonl"), "--out", straight, "--save-dir", path("ck-4")], 4,
                     timeout=300)
    check(rc == 0, "the job runs straight through at 4 ranks", se)
    # The launcher: mpirun, until the marker says a host is gone; then more than 2 ranks cannot start.
    lost = path("host-lost")
    launcher = path("flaky-mpirun")
    with open(launcher, "w") as f:
        f.write("#!/bin/sh\n"
                "# mpirun on a cluster that may lose a host: with it gone, no more than 2 ranks can start\n"
                'prev=""; n=0\n'
                'for a in "$@"; do [ "$prev" = "-n" ] && n=$a; prev=$a; done\n'
                f'if [ -e "{lost}" ] && [ "$n" -gt 2 ]; then\n'
                '  echo "flaky-mpirun: a host is down: cannot start $n ranks on the 2 slots left" >&2; exit 1\n'
                "fi\n"
                'exec mpirun "$@"\n')
    os.chmod(launcher, 0o755)
    d, out = path("ck-shrink"), path("shrunk.safetensors")

    def kill_when_ready():
        if os.path.exists(os.path.join(d, "step-10")):
            open(lost, "w").close()
            return True
        return False

    res = zt.run_and_kill_rank(ZERODP, ["launch", "--max-restarts", "3", "--min-ranks", "2", "--launcher", launcher,
                                        "-n", "4", "--oversubscribe", "--timeout", "250", "--"] + base + batch +
                               [path("shrunk.jsonl"), "--save-dir", d, "--out", out], None, 3, kill_when_ready,
                               timeout=400)
    err = res["err_all"]
    check(res["killed"], "rank 3 was killed once the checkpoint of step 10 existed", err)
    check(res["rc"] == 0, f"the launch went on with fewer ranks and finished (exit {res['rc']})", err)
    check("world sizes it may run at: 4, 2" in err, "the launch lists the sizes keeping the global batch (4, 2)", err)
    check("cannot start 4 ranks" in err and "restarting at 2 ranks (no new checkpoint at 4: global batch 8 = 2 x "
          "micro-batch 2 x 2 accumulation steps)" in err,
          "the attempt at 4 ranks that wrote no checkpoint was followed by one at 2 ranks", err)
    check(" -n 2 " in err and "--resume" in err, "the last attempt ran 2 ranks and resumed from the checkpoint", err)
    # The same path by hand: 4 ranks to the checkpoint the 2 ranks resumed from, then 2 ranks from it.
    import re
    m = re.search(r"resuming from \S*/step-(\d+) at step", err)
    check(m is not None, "the attempt at 2 ranks says which checkpoint it resumed from", err[-3000:])
    at = m.group(1)
    manual, dm = path("manual.safetensors"), path("ck-manual")
    first = list(batch)
    first[first.index("--steps") + 1] = at
    rc, so, se = run(base + first + [path("m1.jsonl"), "--save-dir", dm], 4, timeout=300)
    check(rc == 0, f"by hand: {at} steps at 4 ranks", se)
    rc, so, se = run(base + batch + [path("m2.jsonl"), "--save-dir", dm, "--resume", dm, "--out", manual], 2, timeout=300)
    check(rc == 0, "by hand: resumed at 2 ranks", se)
    check(zt.read_bytes(out) == zt.read_bytes(manual),
          f"the launch's weights are, bit for bit, those of {at} steps at 4 ranks then the rest at 2 from the checkpoint")
    # Against the uninterrupted 4-rank run: the same global batches, summed in another order (2 ranks x 2
    # micro-steps instead of 4 ranks), which Adam's first steps amplify a little.
    w_s, w_r = zt.safetensors_f32(straight), zt.safetensors_f32(out)
    worst = max(abs(x - y) for k in w_s for x, y in zip(w_s[k], w_r[k]))
    check(worst < 1e-3, f"the finished weights are the uninterrupted run's within 1e-3 (largest difference {worst:.2e})")
    loss_s = {r["step"]: r["loss"] for r in zt.read_metrics(path("straight.jsonl")) if r.get("event") == "step"}
    loss_r = {r["step"]: r["loss"] for r in zt.read_metrics(path("shrunk.jsonl")) if r.get("event") == "step"}
    check(sorted(loss_r) == list(range(int(at), STEPS_SHRINK)), f"the metrics of the last attempt: steps {at}-"
          f"{STEPS_SHRINK - 1}", str(sorted(loss_r)))
    worst_loss = max(abs(loss_r[k] - loss_s[k]) / abs(loss_s[k]) for k in loss_r)
    check(worst_loss <= 1e-5, f"each step's loss at 2 ranks is the uninterrupted run's within 1e-5 relative "
          f"(largest {worst_loss:.1e})",
          f"{loss_r}\n{loss_s}")
    # Usage of --min-ranks.
    rc, so, se = run(["launch", "--min-ranks", "2", "--oversubscribe", "--"] + base + batch + [path("u.jsonl"),
                     "--save-dir", path("u")])
    check(rc == 2 and "-n/-np" in se, "--min-ranks without the launcher's -n: exit 2 saying what is needed", se)
    rc, so, se = run(["launch", "--min-ranks", "2", "-n", "4", "--"] + train + ["--steps", "2", "--save-dir", path("u")])
    check(rc == 2 and "--train-batch-size" in se, "--min-ranks without --train-batch-size: exit 2 naming it", se)
    rc, so, se = run(["launch", "--min-ranks", "8", "-n", "4", "--"] + base + batch + [path("u.jsonl"),
                     "--save-dir", path("u")])
    check(rc == 2 and "--min-ranks 8 is more than the 4 ranks" in se, "--min-ranks above -n: exit 2", se)
    # The global batch may come from --config as well: the launcher resolves the train command as train
    # does. (The job then fails on its bad stage: one attempt, not restarted.)
    ds = path("batch.json")
    with open(ds, "w") as f:
        f.write('{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2}')
    bad_stage = [w if w != "2" or train[i - 1] != "--zero-stage" else "7" for i, w in enumerate(train)]
    at = bad_stage.index("--micro-batch")
    from_config = bad_stage[:at] + bad_stage[at + 2:]  # the micro-batch from the file too
    rc, so, se = run(["launch", "--min-ranks", "2", "-n", "4", "--oversubscribe", "--"] + from_config +
                     ["--steps", "2", "--config", ds, "--save-dir", path("u")], timeout=120)
    check(rc == 2 and "world sizes it may run at: 4, 2 (--min-ranks 2, global batch 8 sequences)" in se,
          "--min-ranks with the global batch in --config: the world sizes it keeps", se)

elif CASE == "wait_hosts":
    import time
    train += ["--steps", "3"]

    def unreachable_launcher(name, tries):
        """A launcher whose first `tries` runs fail as mpirun does when host node2 does not answer."""
        script, count = path(name), path(name + ".count")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    "# mpirun on a cluster whose host node2 does not answer for the first tries\n"
                    f'n=$(cat "{count}" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "{count}"\n'
                    f'if [ "$n" -le {tries} ]; then\n'
                    "  printf 'A process or daemon was unable to complete a TCP connection\\nto another process:\\n"
                    "  Local host:    node2\\n  Remote host:   node1\\n'\n"
                    "  echo 'ORTE was unable to reliably start one or more daemons.' >&2; exit 1\n"
                    "fi\n"
                    'exec mpirun "$@"\n')
        os.chmod(script, 0o755)
        return script

    late = unreachable_launcher("late-mpirun", 3)
    began = time.monotonic()
    rc, so, se = run(["launch", "--max-restarts", "0", "--launcher", late, "-n", "2", "--oversubscribe", "--"] +
                     train + ["--save-dir", path("ck-wait")], timeout=200)
    took = time.monotonic() - began
    check(rc == 0 and "attempt 1 of 1 (try 4 to start)" in se and "giving up" not in se,
          f"3 tries that could not start spent no restart: the 4th finished the job (exit {rc})", se)
    waits = [x for x in se.splitlines() if "could not start" in x]
    check(len(waits) == 3 and all("host node2 does not answer" in x and "not counted as a restart" in x and
                                  "of --join-timeout 600 (until " in x for x in waits) and
          [w.split("Waiting ")[1].split(",")[0] for w in waits] == ["1 s", "2 s", "4 s"],
          "each try that could not start named node2 and said how long it waits (1, 2, 4 s) and until when", se)
    check(took >= 7, f"the launch waited 1 + 2 + 4 s between the tries (took {took:.1f} s)")
    never = unreachable_launcher("dead-mpirun", 1000)
    for timeout_s, tries in (("3", 3), ("0", 1)):
        began = time.monotonic()
        rc, so, se = run(["launch", "--max-restarts", "1", "--join-timeout", timeout_s, "--launcher", never, "-n",
                          "2", "--"] + train + ["--save-dir", path("ck-never")], timeout=120)
        took = time.monotonic() - began
        check(rc == 1 and se.count("counting it as a failed attempt") == 2 and "1 restart were used up" in se and
              se.count("could not start") == tries + 1,
              f"--join-timeout {timeout_s}: a host that never answers: {tries} tries, then counted as a failed "
              f"attempt; the restart's try is counted at once; the launch gives up (exit {rc})", se)
        check(took < float(timeout_s) + 10, f"--join-timeout {timeout_s}: the launch gave up after {took:.1f} s")
    rc, so, se = run(["launch", "--join-timeout", "-1", "-n", "2", "--"] + train + ["--save-dir", path("x")])
    check(rc == 2 and "--join-timeout" in se, "a negative --join-timeout: exit 2 naming it", se)

elif CASE == "usage":
    train += ["--steps", "2"]
    rc, so, se = run(LAUNCH + train)
    check(rc == 2 and "--save-dir" in se, "no --save-dir: exit 2 naming it", se)
    rc, so, se = run(["launch", "-n", "2", "train", "--save-dir", path("x")])
    check(rc == 2 and "-- <command>" in se, "no '--': exit 2 saying what is expected", se)
    rc, so, se = run(LAUNCH + ["sample", "--save-dir", path("x")])
    check(rc == 2 and "train" in se, "a command other than train: exit 2", se)
    # A train command that does not parse is refused before any attempt, as `zerodp train` would refuse it.
    rc, so, se = run(LAUNCH + train + ["--save-dir", path("ck-bad"), "--steps", "many"], timeout=120)
    check(rc == 2 and "zerodp launch: attempt" not in se and "--steps" in se,
          "a train command that does not parse: exit 2 before any attempt", se)
    # One that parses but that train refuses once it knows the world size: run once, not restarted.
    bad_stage = [w if w != "2" or train[i - 1] != "--zero-stage" else "7" for i, w in enumerate(train)]
    rc, so, se = run(LAUNCH + bad_stage + ["--save-dir", path("ck-bad")], timeout=120)
    check(rc == 2 and se.count("zerodp launch: attempt") == 1 and "not restarting" in se,
          "a job failing with bad usage (exit 2) is not restarted", se)
    # A launcher flag misspelled: mpirun refuses it at once; retrying would only fail alike.
    rc, so, se = run(["launch", "--max-restarts", "3", "--join-timeut", "5", "-n", "2", "--oversubscribe", "--"] +
                     train + ["--save-dir", path("ck-typo")], timeout=120)
    check(rc == 2 and se.count("zerodp launch: attempt") == 1 and "refused its arguments" in se
          and "--join-timeut" in se, "a launcher flag mpirun refuses: exit 2 after one attempt", se)
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
