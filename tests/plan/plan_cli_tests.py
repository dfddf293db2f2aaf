#!/usr/bin/env python3
"""End-to-end checks of the planner against real runs of `zerodp train` (CPU, mpirun):

  states: the model states `zerodp estimate --json` predicts (param, grad, master, optim) EQUAL the
          ledger's live bytes of every rank, for each stage, in fp32 and bf16, on a model whose
          units need padding;
  act:    the predicted `act` is within 10% of the measured peak_bytes.act, with and without
          --activation-checkpointing (and the predicted total within 10% of the measured peak);
  sweep:  `zerodp sweep` on a small model: every stage's largest micro-batch trains under the budget
          and the next one exits 3; the CSV and the plots are written.

usage: plan_cli_tests.py ZERODP CASE     (CASE: states | act | sweep)
Exits non-zero with a message on the first failed check."""
import json
import os
import subprocess
import sys
import tempfile

ZERODP = os.path.abspath(sys.argv[1])
CASE = sys.argv[2]
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
# Dimensions whose units do not divide evenly: unit 0 = 256·48 + 32·48 + 96 = 13920, a block 28272.
MODEL = {"layers": 2, "heads": 4, "embd": 48, "vocab": 256, "ctx": 32}
W = 2


def run(args, ranks=None, timeout=120):
    cmd = (["mpirun", "-n", str(ranks), "--oversubscribe", "--timeout", str(timeout - 10)] if ranks else []) + [ZERODP] + args
    p = subprocess.run(cmd, env=ENV, capture_output=True, encoding="latin-1", timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, detail=""):
    if not cond:
        print(f"FAILED: {what}\n{detail}")
        sys.exit(1)
    print(f"ok: {what}")


def memory_records(path):
    with open(path) as f:
        return [r for r in map(json.loads, f) if r["event"] == "memory"]


def estimate(stage, dtype, fp32_accum, B, T, ckpt):
    args = ["estimate", "--json", "--gpus", str(W), "--stage", str(stage), "--dtype", dtype, "--micro-batch", str(B),
            "--seq", str(T)] + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))]
    if fp32_accum:
        args.append("--fp32-grad-accum")
    if ckpt:
        args.append("--activation-checkpointing")
    rc, out, err = run(args)
    check(rc == 0, f"estimate stage {stage} {dtype}", err)
    doc = json.loads(out)
    check(list(doc) == ["stages"] and len(doc["stages"]) == 1, "the JSON holds one stage", out)
    s = doc["stages"][0]
    check(list(s) == ["stage", "bytes_per_rank", "traffic_bytes_per_step", "max_micro_batch"]
          and list(s["bytes_per_rank"]) == ["param", "grad", "master", "optim", "act", "total"],
          "the JSON has exactly the documented keys, in order", out)
    return s["bytes_per_rank"]


def train(stage, dtype, fp32_accum, B, T, ckpt, metrics):
    args = ["train", "--init", init, "--data", tokens, "--steps", "2", "--micro-batch", str(B), "--seq", str(T),
            "--zero-stage", str(stage), "--dtype", dtype, "--metrics", metrics, "--log-every", "0",
            "--fp32-grad-accum" if fp32_accum else "--no-fp32-grad-accum"]
    if ckpt:
        args.append("--activation-checkpointing")
    rc, out, err = run(args, W)
    check(rc == 0, f"train stage {stage} {dtype} B={B} T={T} checkpointing={ckpt}", err)
    recs = memory_records(metrics)
    check(len(recs) == W, f"one memory record per rank ({len(recs)})")
    return recs


tmp = tempfile.mkdtemp(prefix="zerodp-plan-")
text = os.path.join(tmp, "text.txt")
with open(os.path.join(SRC, "data", "tinyshakespeare.txt"), "rb") as f, open(text, "wb") as g:
    g.write(f.read(20000))
tokens, init = os.path.join(tmp, "tok.bin"), os.path.join(tmp, "init.safetensors")
rc, out, err = run(["tokenize", "--text", text, "--out", tokens])
check(rc == 0, "tokenize", err)
rc, out, err = run(["init", "--out", init, "--seed", "3"] + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
check(rc == 0, "init", err)

if CASE == "states":
    cases = [(s, "fp32", False) for s in range(4)] + [(s, "bf16", s % 2 == 0) for s in range(4)]
    for n, (stage, dtype, accum) in enumerate(cases):
        want = estimate(stage, dtype, accum, 2, 16, False)
        for rec in train(stage, dtype, accum, 2, 16, False, os.path.join(tmp, f"s{n}.jsonl")):
            got = {k: rec["live_bytes"][k] for k in ("param", "grad", "master", "optim")}
            check(got == {k: want[k] for k in got},
                  f"stage {stage} {dtype} fp32-accum={accum} rank {rec['rank']}: ledger {got} == estimate")

elif CASE == "act":
    for n, (stage, dtype, B, T, ckpt) in enumerate([(0, "fp32", 4, 32, False), (0, "fp32", 4, 32, True),
                                                   (3, "bf16", 2, 32, False), (3, "bf16", 2, 32, True),
                                                   (2, "fp32", 1, 8, True)]):
        want = estimate(stage, dtype, True, B, T, ckpt)
        for rec in train(stage, dtype, True, B, T, ckpt, os.path.join(tmp, f"a{n}.jsonl")):
            for key in ("act", "total"):
                got = rec["peak_bytes"][key]
                err = abs(want[key] - got) / got
                check(err <= 0.10, f"stage {stage} {dtype} B={B} T={T} checkpointing={ckpt} rank {rec['rank']}: "
                                   f"{key} predicted {want[key]}, measured {got} ({100 * err:.2f}% apart)")
elif CASE == "sweep":
    out = os.path.join(tmp, "sweep")
    rc, so, se = run(["sweep", "--layers", "2", "--embd", "96", "--heads", "4", "--seq", "16", "--gpus", "2",
                      "--worlds", "1,2", "--memory-budget", "12MB", "--max-micro-batch", "40", "--steps", "1",
                      "--text", text, "--out-dir", out, "--work-dir", os.path.join(tmp, "work"),
                      "--plot-script", os.path.join(SRC, "docs", "sweep", "plot_sweep.py")], timeout=280)
    check(rc == 0, "zerodp sweep runs", so + se)
    import csv
    with open(os.path.join(out, "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    tried = {(int(r["world"]), int(r["stage"])) for r in rows}
    check({(2, s) for s in range(4)} | {(1, 0), (1, 2)} <= tried, f"every stage was swept ({sorted(tried)})")
    for w, stage in sorted(tried):
        runs = {int(r["micro_batch"]): r for r in rows if (int(r["world"]), int(r["stage"])) == (w, stage)}
        fit = [b for b, r in runs.items() if r["fits"] == "1"]
        best = max(fit, default=0)
        check(best == 40 or (best + 1 in runs and runs[best + 1]["fits"] == "0"),
              f"W={w} stage {stage}: B={best} is the largest that fits (B+1 exits 3)")
        for b in fit:
            r = runs[b]
            check(int(r["measured_total"]) <= int(r["memory_budget"]), f"W={w} stage {stage} B={b} stayed under budget")
    check(any(r["fits"] == "1" for r in rows if r["stage"] == "3"), "stage 3 fits somewhere")
    for png in ("memory_by_category.png", "predicted_vs_measured.png", "global_batch.png"):
        path = os.path.join(out, png)
        check(os.path.exists(path) and os.path.getsize(path) > 1000, f"{png} written")
else:
    sys.exit(f"unknown case {CASE}")
