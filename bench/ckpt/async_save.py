#!/usr/bin/env python3
"""Asynchronous checkpoints (issue 46): the step time of `zerodp train` saving a checkpoint every 10
steps, with --async-save and without (a synchronous save), against the same run saving nothing, for
GPT-2 124M (L12 H12 C768 V50257) and a Llama of about the same size (L12 H12 KV4 C768 I2048 V32000) at
W = 2, stage 1, fp32 on the CPU, in one run of this script on one machine.

The step time is the wall time between the progress lines of steps FIRST and STEPS (the trainer's log,
millisecond timestamps) over their distance: it includes the saves at steps 10, 20, ... (a synchronous
save stops training for the whole write; an asynchronous one for what the step boundary does and for
the CPU time its writer takes from the steps), which the metrics' per-step `ms` leaves out. The modes
run interleaved REPEAT times, their order turned by one each round, so that the machine's drift falls
on all of them alike; the report gives each mode's median step time, the median over the rounds of
each round's ratio to its run without saves, and, beside them, each run's step time over the median
of its own intervals that follow no save (the same cost, measured within one run). Prints a markdown
table (and writes it to OUT/report.md).

usage: bench/ckpt/async_save.py    env: BUILD (build), OUT (runs/bench-async-save), STEPS (30), FIRST (10),
       SEQ (64), MICRO_BATCH (1), REPEAT (1), MODELS (gpt2,llama)
"""
import datetime
import os
import platform
import random
import re
import shutil
import statistics
import struct
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
OUT = os.path.abspath(os.environ.get("OUT", os.path.join(ROOT, "runs", "bench-async-save")))
STEPS = int(os.environ.get("STEPS", "30"))
FIRST = int(os.environ.get("FIRST", "10"))
SEQ = int(os.environ.get("SEQ", "64"))
B = int(os.environ.get("MICRO_BATCH", "1"))
REPEAT = int(os.environ.get("REPEAT", "1"))
MODELS = os.environ.get("MODELS", "gpt2,llama").split(",")
Z = os.path.join(BUILD, "zerodp")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
INIT = {
    "gpt2": ["--layers", "12", "--heads", "12", "--embd", "768", "--vocab", "50257", "--ctx", "1024"],
    "llama": ["--arch", "llama", "--layers", "12", "--heads", "12", "--kv-heads", "4", "--embd", "768",
              "--intermediate", "2048", "--vocab", "32000", "--ctx", "1024"],
}
VOCAB = {"gpt2": 50257, "llama": 32000}
MODES = {"none": [], "sync": ["--save-every", "10"], "async": ["--save-every", "10", "--async-save"]}
LINE = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\.(\d\d\d)\] \[rank 0\] \[info\] step +(\d+)/")


def sh(cmd, timeout):
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def inputs(model):
    """The model's init and a token file of random ids (raw uint16, enough for every step)."""
    init = os.path.join(OUT, f"{model}-init" + ("/" if model == "llama" else ".safetensors"))
    if not os.path.exists(init):
        sh([Z, "init", "--out", init, "--seed", "1"] + INIT[model], 600)
    tokens = os.path.join(OUT, f"{model}-tokens.bin")
    if not os.path.exists(tokens):
        rng = random.Random(1)
        n = 2 * B * SEQ * (STEPS + 1) + 1
        with open(tokens, "wb") as f:
            f.write(struct.pack(f"<{n}H", *(rng.randrange(VOCAB[model]) for _ in range(n))))
    return init, tokens


def step_time_ms(log):
    """(wall time between the progress lines of steps FIRST and STEPS) / (STEPS - FIRST), in ms; and the
    same over the median of this run's intervals that follow no save (steps k with k - 1 not a multiple
    of 10): the run's cost of saving measured against its own steps, free of the machine's drift
    between runs."""
    at = {}
    for line in log.splitlines():
        m = LINE.match(line)
        if m:
            h, mi, s, ms, step = map(int, m.groups())
            at[step] = ((h * 60 + mi) * 60 + s) * 1000 + ms
    if any(k not in at for k in range(FIRST, STEPS + 1)):
        sys.exit(f"no progress lines for steps {FIRST}..{STEPS} in the log:\n{log[-2000:]}")
    day = 24 * 3600 * 1000  # past midnight
    mean = ((at[STEPS] - at[FIRST]) % day) / (STEPS - FIRST)
    plain = [(at[k] - at[k - 1]) % day for k in range(FIRST + 1, STEPS + 1) if (k - 1) % 10 != 0]
    return mean, mean / statistics.median(plain)


def run(model, mode, init, tokens):
    save = os.path.join(OUT, f"save-{model}-{mode}")
    shutil.rmtree(save, ignore_errors=True)
    args = ["mpirun", "-n", "2", "--oversubscribe", "--timeout", "1700", Z, "train", "--init", init, "--data", tokens,
            "--steps", str(STEPS), "--micro-batch", str(B), "--seq", str(SEQ), "--zero-stage", "1", "--lr", "1e-4",
            "--log-every", "1"]
    if mode != "none":
        args += ["--save-dir", save, "--keep", "1"] + MODES[mode]
    log = sh(args, 1800)
    shutil.rmtree(save, ignore_errors=True)
    return step_time_ms(log)


def main():
    os.makedirs(OUT, exist_ok=True)
    times = {(m, mode): [] for m in MODELS for mode in MODES}
    within = {(m, mode): [] for m in MODELS for mode in MODES}
    for model in MODELS:
        init, tokens = inputs(model)
        for r in range(REPEAT):
            names = list(MODES)
            for mode in names[r % len(names):] + names[:r % len(names)]:
                t, w = run(model, mode, init, tokens)
                times[(model, mode)].append(t)
                within[(model, mode)].append(w)
                print(f"{model} {mode} round {r + 1}: {t:.0f} ms a step ({w:.3f}x its steps without a save)",
                      flush=True)
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    lines = [f"Machine: {os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}; "
             f"{datetime.date.today().isoformat()}. W = 2 ranks x 1 thread, stage 1, fp32, B = {B}, T = {SEQ}, "
             f"steps {FIRST}..{STEPS} timed, a checkpoint every 10 steps (--keep 1), {REPEAT} round(s).", "",
             "| model | no saves (ms/step) | sync saves | async saves | sync / none (rounds' median) | async / none | "
             "sync, within its run | async, within its run |",
             "|---|---|---|---|---|---|---|---|"]
    for model in MODELS:
        med = {mode: statistics.median(times[(model, mode)]) for mode in MODES}
        own = {mode: statistics.median(within[(model, mode)]) for mode in MODES}
        paired = {mode: statistics.median(t / n for t, n in zip(times[(model, mode)], times[(model, "none")]))
                  for mode in MODES}
        lines.append(f"| {model} | {med['none']:.0f} | {med['sync']:.0f} | {med['async']:.0f} | "
                     f"{paired['sync']:.3f} | {paired['async']:.3f} | "
                     f"{own['sync']:.3f} | {own['async']:.3f} |")
    report = "\n".join(lines) + "\n"
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
