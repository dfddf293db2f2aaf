#!/usr/bin/env python3
"""End-to-end checks of `zerodp train --offload-optimizer cpu` (mpirun):

  same_bits:  offloaded runs equal the same runs without offload bit for bit (--out weights, losses,
              grad norms) at W = 1, 2, 4, stages 1-3, fp32 and bf16, with sub-groups of 1000 elements;
              the device tier holds no master or optim and its other categories peak exactly as
              without offload; host_bytes holds master, optim and the gradient staging exactly as
              `zerodp estimate --offload-optimizer cpu --sub-group-size` predicts them;
  budget:     a --memory-budget that stage 3 alone cannot meet (exit 3) while stage 3 with the
              optimizer offloaded trains under it;
  usage:      stage 0 with offload and nvme exit 2 naming the flag; the DeepSpeed keys
              (offload_optimizer.device, sub_group_size) are honoured and flags win over them;
  checkpoint: a checkpoint saved with offload resumes without it, and the other way round, to the
              same bits as a run straight through without offload.

usage: offload_tests.py ZERODP CASE     (CASE: same_bits | budget | usage | checkpoint)
Exits non-zero with a message on the first failed check."""
import functools
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import zdp_test as zt  # noqa: E402
from zdp_test import check, records  # noqa: E402

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

# Units that need padding at every W: unit 0 = 256·48 + 32·48 + 96, a block 28272.
MODEL = {"layers": 2, "heads": 4, "embd": 48, "vocab": 256, "ctx": 32}
tmp = zt.workdir("offload")
tokens, init = zt.make_inputs(ZERODP, tmp, **MODEL, seed=11, text_bytes=30000)
base = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "16", "--lr", "3e-3",
        "--clip", "1.0", "--log-every", "0"]
OFF = ["--offload-optimizer", "cpu"]


def path(name):
    return os.path.join(tmp, name)


def trained(tag, ranks, extra, steps=3):
    """Runs training; returns (weights bytes, [(loss, grad_norm)], memory records)."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    rc, so, se = run(base + ["--steps", str(steps), "--out", out, "--metrics", m] + extra, ranks)
    check(rc == 0, f"{tag} trains", se)
    return zt.read_bytes(out), [(s["loss"], s["grad_norm"]) for s in records(m, "step")], records(m, "memory")


def predicted(W, stage, dtype, sub_group):
    args = ["estimate", "--json", "--gpus", str(W), "--stage", str(stage), "--dtype", dtype, "--micro-batch", "2",
            "--seq", "16", "--offload-optimizer", "cpu", "--sub-group-size", str(sub_group)]
    if dtype != "fp32":
        args.append("--fp32-grad-accum")  # zerodp train's default, not estimate's
    rc, so, se = run(args + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
    check(rc == 0, f"estimate W={W} stage {stage} {dtype} with offload", se)
    s = json.loads(so)["stages"][0]
    return s["bytes_per_rank"], s["offloaded_bytes_per_rank"]["host"]


if CASE == "same_bits":
    for W, stage, dtype in [(1, 1, "fp32"), (1, 3, "bf16"), (2, 2, "fp32"), (2, 3, "bf16"), (2, 1, "bf16"),
                            (4, 3, "fp32"), (4, 2, "bf16")]:
        what = f"W={W} stage {stage} {dtype}"
        flags = ["--zero-stage", str(stage), "--dtype", dtype]
        w0, s0, m0 = trained(f"plain-{W}-{stage}-{dtype}", W, flags)
        w1, s1, m1 = trained(f"off-{W}-{stage}-{dtype}", W, flags + OFF + ["--sub-group-size", "1000"])
        check(w1 == w0, f"{what}: the --out weights are the same bits with offload")
        check(s1 == s0, f"{what}: the same losses and grad norms with offload", f"{s1}\n{s0}")
        device, host = predicted(W, stage, dtype, 1000)
        plain = {r["rank"]: r for r in m0}
        for rec in m1:
            r = rec["rank"]
            peak, live = rec["peak_bytes"], rec["live_bytes"]
            check(peak["master"] == 0 and peak["optim"] == 0, f"{what} rank {r}: no master or optim on the device")
            for key in ("param", "grad", "gathered", "comm", "act"):
                check(peak[key] == plain[r]["peak_bytes"][key],
                      f"{what} rank {r}: device {key} peaks as without offload ({peak[key]})")
            check({k: live[k] for k in ("param", "grad", "master", "optim")} ==
                  {k: device[k] for k in ("param", "grad", "master", "optim")},
                  f"{what} rank {r}: the device's model states are the planner's", f"{live}\n{device}")
            got = {k: rec["host_bytes"][k] for k in ("param", "grad", "master", "optim", "total")}
            check(got == host, f"{what} rank {r}: host_bytes {got} == the planner's {host}")

elif CASE == "budget":
    peaks = {}
    for tag, extra in (("s3", []), ("s3off", OFF)):
        _, _, mem = trained(tag, 2, ["--zero-stage", "3"] + extra, steps=2)
        peaks[tag] = max(r["peak_bytes"]["total"] for r in mem)
    check(peaks["s3off"] < peaks["s3"], f"offload lowers stage 3's device peak ({peaks['s3off']} < {peaks['s3']})")
    budget = (peaks["s3"] + peaks["s3off"]) // 2
    rc, so, se = run(base + ["--steps", "2", "--zero-stage", "3", "--memory-budget", str(budget)], 2)
    check(rc == 3 and "memory budget exceeded" in se, f"stage 3 alone over a budget of {budget} bytes exits 3", se)
    m = path("budget.jsonl")
    rc, so, se = run(base + ["--steps", "2", "--zero-stage", "3", "--memory-budget", str(budget), "--metrics", m]
                     + OFF, 2)
    check(rc == 0, "stage 3 with --offload-optimizer cpu trains under the same budget", se)
    check(all(r["peak_bytes"]["total"] <= budget and r["host_bytes"]["total"] > 0 for r in records(m, "memory")),
          "the device stayed under the budget; the host tier holds the optimizer")
    check("host peak" in so, "the memory table shows the host tier", so)

elif CASE == "usage":
    rc, so, se = run(base + ["--steps", "1", "--zero-stage", "0"] + OFF, 2)
    check(rc == 2 and "--offload-optimizer" in se and "stage 1, 2 or 3" in se, "stage 0 with offload exits 2", se)
    rc, so, se = run(base + ["--steps", "1", "--zero-stage", "2", "--offload-optimizer", "nvme"])
    check(rc == 2 and "nvme is not implemented yet" in se, "nvme exits 2: not implemented yet", se)
    rc, so, se = run(base + ["--steps", "1", "--zero-stage", "2", "--offload-optimizer", "gpu"])
    check(rc == 2 and "--offload-optimizer" in se, "a bad value exits 2 naming the flag", se)
    cfg = path("ds.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 2, "sub_group_size": 500,
                                         "offload_optimizer": {"device": "cpu", "pin_memory": True}}}, f)
    m = path("ds.jsonl")
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m], 2)
    check(rc == 0 and "pin_memory" in se, "the config's offload trains; pin_memory is noted as ignored", se)
    check(all(r["host_bytes"]["grad"] == 500 * 4 and r["host_bytes"]["optim"] > 0 for r in records(m, "memory")),
          "offload_optimizer.device and sub_group_size are honoured (500-element staging)")
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m, "--offload-optimizer", "none"], 2)
    check(rc == 0 and all(r["host_bytes"]["total"] == 0 for r in records(m, "memory")),
          "--offload-optimizer none wins over the config", se)
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m, "--sub-group-size", "64"], 2)
    check(rc == 0 and all(r["host_bytes"]["grad"] == 64 * 4 for r in records(m, "memory")),
          "--sub-group-size wins over the config", se)
    rc, so, se = run(["train", "--help"])
    check("--offload-optimizer" in so and "--sub-group-size" in so, "--help lists the flags", so)

elif CASE == "checkpoint":
    for stage, dtype in ((2, "bf16"), (3, "fp32")):
        flags = ["--zero-stage", str(stage), "--dtype", dtype]
        straight, _, _ = trained(f"straight-{stage}", 2, flags, steps=4)
        for first, second in ((OFF, []), ([], OFF)):
            tag = f"{stage}-{'off' if first else 'plain'}"
            d = path(f"ck-{tag}")
            rc, so, se = run(base + ["--steps", "2", "--save-dir", d] + flags + first, 2)
            check(rc == 0, f"stage {stage} {dtype}: 2 steps saved ({'with' if first else 'without'} offload)", se)
            out = path(f"resumed-{tag}.safetensors")
            rc, so, se = run(base + ["--steps", "4", "--resume", d, "--out", out] + flags + second, 2)
            check(rc == 0, f"stage {stage}: resumed {'without' if first else 'with'} offload", se)
            check(zt.read_bytes(out) == straight,
                  f"stage {stage} {dtype}: saved {'with' if first else 'without'} offload, resumed "
                  f"{'without' if first else 'with'}: the same bits as 4 steps straight")
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
