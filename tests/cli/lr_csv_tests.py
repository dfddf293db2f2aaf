#!/usr/bin/env python3
"""End-to-end checks of --lr-schedule wsd and --log-csv through mpirun (2 ranks), and of
scripts/plot_metrics.py on what a run wrote.

usage: lr_csv_tests.py ZERODP CASE     (CASE: wsd_csv | failed_csv)
  wsd_csv:    every step's lr is the WSD formula of optim/lr_schedule.h (warmup, stable, cosine tail
              ending at --min-lr); the CSV has one row per step with the metrics' numbers and the tokens
              trained so far, the eval's loss on the row of the step it followed (when the build has
              --val-data); the plot of the metrics file is written; usage errors exit 2 naming the flag.
  failed_csv: a run that stops at a non-finite gradient leaves the earlier CSV intact and its rows,
              the failed step's included, in <path>.partial.
Exits non-zero with a message on the first failed check."""
import csv
import functools
import math
import os
import subprocess
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

tmp = zt.workdir("lr-csv")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=4, embd=64, vocab=256, ctx=32, seed=5, text_bytes=60000)
W, B, T = 2, 2, 32
base = ["train", "--init", init, "--data", tokens, "--micro-batch", str(B), "--seq", str(T), "--log-every", "0"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def wsd_lr(s, lr, min_lr, warmup, decay, total):
    """optim/lr_schedule.h's WSD with a linear warmup and a cosine tail."""
    if s < warmup:
        return min_lr + (lr - min_lr) * s / warmup
    if s < total - decay:
        return lr
    q = min(1.0, (s - (total - decay) + 1) / decay)
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * q)) / 2


if CASE == "wsd_csv":
    steps, warmup, decay, lr, min_lr = 12, 3, 4, 2e-3, 1e-4
    m, c = os.path.join(tmp, "m.jsonl"), os.path.join(tmp, "log.csv")
    args = base + ["--steps", str(steps), "--lr", str(lr), "--lr-schedule", "wsd", "--warmup-steps", str(warmup),
                   "--decay-steps", str(decay), "--decay-type", "cosine", "--min-lr", str(min_lr), "--metrics", m,
                   "--log-csv", c]
    help_text = run(["train", "--help"]).out
    evals = "--val-data" in help_text
    if evals:
        args += ["--val-data", tokens, "--eval-every", "4", "--eval-tokens", str(4 * T)]
    rc, out, err = run(args, W)
    check(rc == 0, "a WSD run with --log-csv trains at W = 2", err)
    step_recs = records(m, "step")
    want = [wsd_lr(s, lr, min_lr, warmup, decay, steps) for s in range(steps)]
    got = [r["lr"] for r in step_recs]
    check(all(abs(g - w) <= 1e-12 * w for g, w in zip(got, want)) and len(got) == steps,
          "each step's lr is WSD's: warmup, stable at --lr, a cosine tail", f"got {got}\nwant {want}")
    check(got[warmup - 1] < lr and got[warmup] == lr and got[steps - decay - 1] == lr and got[steps - decay] < lr,
          "the phase boundaries: steps 0-2 warm up, 3-7 at --lr, 8-11 decay", str(got))
    check(abs(got[-1] - min_lr) <= 1e-18, "the last step is at --min-lr", str(got[-1]))
    rows = read_csv(c)
    check(list(rows[0].keys()) == ["step", "tokens", "loss", "grad_norm", "lr", "ms", "val_loss", "val_tokens"],
          "the CSV header", str(list(rows[0].keys())))
    check([int(r["step"]) for r in rows] == list(range(steps)), "one CSV row per step, in order",
          str([r["step"] for r in rows]))
    check(all(int(r["tokens"]) == (int(r["step"]) + 1) * W * B * T for r in rows), "tokens: trained so far, W*G*B*T a step")
    check(all(float(r["loss"]) == s["loss"] and float(r["lr"]) == s["lr"] and float(r["grad_norm"]) == s["grad_norm"]
              for r, s in zip(rows, step_recs)), "loss, lr and grad_norm are the metrics' numbers, exactly")
    ev = {e["step"]: e for e in records(m, "eval")}
    if evals:
        check(sorted(ev) == [4, 8, 12], "evals after steps 4, 8 and 12", str(sorted(ev)))
        for r in rows:
            e = ev.get(int(r["step"]) + 1)
            if e is None:
                check(r["val_loss"] == "" and r["val_tokens"] == "", f"no eval on row {r['step']}: empty val columns")
            else:
                check(float(r["val_loss"]) == e["val_loss"] and int(r["val_tokens"]) == e["tokens"],
                      f"row {r['step']} holds the eval after step {r['step']} ({e['val_loss']}, {e['tokens']} tokens)")
    else:
        check(all(r["val_loss"] == "" for r in rows), "without --val-data the val columns are empty")
    check(not os.path.exists(c + ".partial"), "no .partial left after a good run")
    check(sum(1 for n in os.listdir(tmp) if n.startswith("log.csv")) == 1, "rank 1 writes no CSV of its own")
    # The loss plot of that run, with Debian's python3-matplotlib.
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    if subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        png = os.path.join(tmp, "loss.png")
        p = subprocess.run([py, os.path.join(SOURCE, "scripts", "plot_metrics.py"), m, "--out", png, "--title", "WSD"],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and os.path.getsize(png) > 0 and ("1 run, 12 steps" in p.stdout),
              "plot_metrics.py draws the run's metrics", p.stdout + p.stderr)
    else:
        print("(no matplotlib: the plot is not checked)")
    # Usage errors name the flag.
    rc, out, err = run(base + ["--steps", "10", "--lr-schedule", "wsd", "--warmup-steps", "5", "--decay-steps", "6"])
    check(rc == 2 and "--warmup-steps 5 + --decay-steps 6" in err and "10 total steps" in err,
          "warmup + decay over the run's steps exits 2 naming both flags", err)
    rc, out, err = run(base + ["--steps", "10", "--lr-schedule", "cosine", "--decay-steps", "3"])
    check(rc == 2 and "--decay-steps needs --lr-schedule wsd" in err, "--decay-steps without wsd exits 2", err)
    rc, out, err = run(base + ["--steps", "2", "--metrics", m, "--log-csv", m])
    check(rc == 2 and "--log-csv" in err, "--log-csv on the --metrics file exits 2", err)

elif CASE == "failed_csv":
    c = os.path.join(tmp, "log.csv")
    with open(c, "w") as f:
        f.write("earlier\n")
    rc, out, err = run(base + ["--steps", "5", "--inject-overflow-step", "2", "--log-csv", c], W)
    check(rc == 1 and "step 2" in err, "a gradient made Inf at step 2 stops the fp32 run with exit 1", err)
    with open(c) as f:
        check(f.read() == "earlier\n", "the earlier CSV is intact")
    rows = read_csv(c + ".partial")
    check([r["step"] for r in rows] == ["0", "1", "2"], "the .partial holds steps 0-2, the failed one included",
          str([r["step"] for r in rows]))

else:
    sys.exit(f"unknown case {CASE}\n{__doc__}")
