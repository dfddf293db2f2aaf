#!/usr/bin/python3
"""Muon (docs/reference/optimizer.md#muon) in `zerodp train` against the independent reference (ref_train.py's
Muon, written from the published algorithm, in float64).

    compare_muon.py --zerodp BUILD/zerodp --mpirun mpirun --case NAME [--keep]
    compare_muon.py --list

Each case trains the tiny GPT-2 of compare.py for 4 steps in fp32 at one world size W, at every ZeRO stage
(stage 3 with every unit sharded), and checks: each stage's final parameters within 1e-5 (max abs) of the
reference's on the same global batches, the losses within 1e-4 relative, and the four stages' --out files equal
byte for byte. The model has wide (c_attn, c_fc), square (attn.c_proj) and tall (mlp.c_proj) matrices, so the
iteration's transposition and max(1, rows/cols)^0.5 are both exercised; the matrices are split across ranks
at W > 1. `config_w2` sets Muon through a DeepSpeed JSON (type Muon, muon_lr, adam_lr, momentum, nesterov off).

Exits 0 when every check passes, 1 listing every failed check.
"""
import json
import os
import sys
import time

import compare  # this folder's: the model, inputs and launching shared with the AdamW cases
from zdptest import harness as zt
from zdptest import ref_train as rt
from zdptest.case_driver import argument_parser, run_cases, selected_cases
from zdptest.harness import Checks, read_metrics

import numpy as np

STEPS = 4
B = 2
PARAM_ATOL, LOSS_RTOL = 1e-5, 1e-4
HYPER = {"lr": 0.02, "adam_lr": 3e-3, "momentum": 0.95, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
         "weight_decay": 0.1, "clip": 1.0}

# name -> world, seed, stages, how Muon is asked for ("flags" or "config"), Nesterov
CASES = {
    "w1": dict(world=1, seed=31, stages=[0, 1, 2, 3]),
    "w2": dict(world=2, seed=32, stages=[0, 1, 2, 3]),
    "w3": dict(world=3, seed=33, stages=[0, 1, 2, 3]),
    "w4": dict(world=4, seed=34, stages=[0, 1, 2, 3]),
    "config_w2": dict(world=2, seed=35, stages=[2], config=True, nesterov=False),
}


def zerodp_args(work, init, tokens, stage, spec, out, metrics):
    args = ["train", "--init", init, "--data", tokens, "--steps", str(STEPS), "--micro-batch", str(B),
            "--seq", str(compare.SEQ), "--zero-stage", str(stage), "--dtype", "fp32", "--clip", repr(HYPER["clip"]),
            "--param-persistence-threshold", "0", "--out", out, "--metrics", metrics]
    if spec.get("config"):
        path = os.path.join(work, "ds_config.json")
        params = {"muon_lr": HYPER["lr"], "adam_lr": HYPER["adam_lr"], "momentum": HYPER["momentum"],
                  "nesterov": spec.get("nesterov", True), "betas": [HYPER["beta1"], HYPER["beta2"]],
                  "eps": HYPER["eps"], "weight_decay": HYPER["weight_decay"]}
        with open(path, "w") as f:
            json.dump({"optimizer": {"type": "Muon", "params": params}}, f)
        return args + ["--config", path]
    return args + ["--optimizer", "muon"] + sum(
        [["--" + k.replace("_", "-"), repr(HYPER[k])] for k in ("lr", "adam_lr", "momentum", "beta1", "beta2",
                                                                  "eps", "weight_decay")], [])


def reference(init, tokens, world, nesterov):
    ref_args = rt.parse_args(
        ["--init", init, "--data", tokens, "--steps", str(STEPS), "--micro-batch", str(B), "--seq", str(compare.SEQ),
         "--world", str(world), "--double", "--heads", str(compare.MODEL["heads"]), "--threads", "1",
         "--optimizer", "muon"] + ([] if nesterov else ["--no-nesterov"])
        + sum([["--" + k.replace("_", "-"), repr(v)] for k, v in HYPER.items()], []))
    _, records, final = rt.run(ref_args)
    return records, final


def run_case(args, name, work):
    spec = CASES[name]
    world = spec["world"]
    c = Checks()
    tokens, init = compare.prepare(args, work, spec["seed"])
    start = time.monotonic()
    ref_records, ref_final = reference(init, tokens, world, spec.get("nesterov", True))
    c.note(f"reference ran {time.monotonic() - start:.1f} s")
    outs = {}
    for stage in spec["stages"]:
        out, metrics = os.path.join(work, f"s{stage}.safetensors"), os.path.join(work, f"s{stage}.jsonl")
        cmd = compare.mpirun(args, world, zerodp_args(work, init, tokens, stage, spec, out, metrics), 240)
        code, text, secs = compare.run(cmd, 300)
        c.note(f"stage {stage}: zerodp train ran {secs:.1f} s, exit {code}")
        if not c.check(code == 0, f"stage {stage}: zerodp train exited {code}:\n{text[-4000:]}"):
            continue
        steps = [r for r in read_metrics(metrics) if r.get("event") == "step"]
        c.check(len(steps) == STEPS, f"stage {stage}: {len(steps)} step records, not {STEPS}")
        for mine, ref in zip(steps, ref_records):
            err = compare.rel_err(mine["loss"], ref["loss"])
            c.check(err <= LOSS_RTOL, f"stage {stage} step {ref['step']}: loss {mine['loss']!r} vs reference "
                                      f"{ref['loss']!r}: relative error {err:.2e} > {LOSS_RTOL}")
        got, _ = compare.check_weights(c, out, ref_final, PARAM_ATOL, f"stage {stage}: final parameters")
        if not got:
            continue
        moved = max(float(np.abs(got[t] - v).max()) for t, v in rt.load_gpt2(init, heads=compare.MODEL["heads"])[1].items()
                    if rt.is_muon_matrix(t, v.shape))
        c.check(moved > 1e-3, f"stage {stage}: the matrices moved by {moved:.2e} at most: Muon did not step them")
        outs[stage] = zt.read_bytes(out)
    if len(outs) > 1:
        first = min(outs)
        same = [s for s in outs if outs[s] == outs[first]]
        c.check(len(same) == len(outs), f"W = {world}: --out of stages {sorted(outs)} not all byte-equal "
                                        f"(equal to stage {first}: {sorted(same)})")
    return c


def main():
    args = argument_parser(__doc__).parse_args()
    cases = selected_cases(args, list(CASES), lambda n: CASES[n]["world"], "compare_muon.py")
    if cases is None:
        return 0
    if not args.zerodp or not os.access(args.zerodp, os.X_OK):
        print(f"compare_muon.py: FAIL: no zerodp executable at {args.zerodp!r} (build the `zerodp` target)")
        return 1
    args.zerodp = os.path.abspath(args.zerodp)
    return run_cases(cases, lambda name, work: run_case(args, name, work), "zerodp_muon", args.keep)


if __name__ == "__main__":
    sys.exit(main())
