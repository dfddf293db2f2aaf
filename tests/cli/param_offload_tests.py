#!/usr/bin/env python3
"""End-to-end checks of `zerodp train --offload-param cpu` (stage 3; mpirun):

  same_bits:  runs with the parameter shards offloaded equal the same runs without (--out weights,
              losses, grad norms) at W = 1, 2, 4, fp32 and bf16, alone and with --offload-optimizer cpu
              too; the device holds no parameter bytes, its grad/master/optim are the planner's and
              its gathered copies peak as without; host_bytes holds the parameter shards (and the
              optimizer's states when offloaded too) exactly as `zerodp estimate --offload-param cpu`
              predicts them;
  budget:     a --memory-budget that stage 3 with the optimizer offloaded cannot meet (exit 3) while
              stage 3 with both offloads trains under it (8 layers: the shards saved outweigh the
              staging of the gathers in flight);
  usage:      stages 0-2 with --offload-param and nvme exit 2 naming the flag; the DeepSpeed key
              (offload_param.device) is honoured, its pin_memory noted as ignored, the flag wins;
  checkpoint: a checkpoint saved with parameter offload resumes without it, and the other way round,
              to the same bits as a run straight through without offload.

usage: param_offload_tests.py ZERODP CASE     (CASE: same_bits | budget | usage | checkpoint)
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
if CASE == "budget":
    MODEL["layers"] = 8
tmp = zt.workdir("param-offload")
tokens, init = zt.make_inputs(ZERODP, tmp, **MODEL, seed=11, text_bytes=30000)
base = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "16", "--lr", "3e-3",
        "--clip", "1.0", "--log-every", "0"]
POFF = ["--offload-param", "cpu"]
OOFF = ["--offload-optimizer", "cpu"]
S3 = ["--zero-stage", "3"]


def path(name):
    return os.path.join(tmp, name)


def trained(tag, ranks, extra, steps=3):
    """Runs training; returns (weights bytes, [(loss, grad_norm)], memory records)."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    rc, so, se = run(base + ["--steps", str(steps), "--out", out, "--metrics", m] + extra, ranks)
    check(rc == 0, f"{tag} trains", se)
    return zt.read_bytes(out), [(s["loss"], s["grad_norm"]) for s in records(m, "step")], records(m, "memory")


def predicted(W, dtype, offload_optimizer):
    args = ["estimate", "--json", "--gpus", str(W), "--stage", "3", "--dtype", dtype, "--micro-batch", "2",
            "--seq", "16"] + POFF + (OOFF if offload_optimizer else [])
    if dtype != "fp32":
        args.append("--fp32-grad-accum")  # zerodp train's default, not estimate's
    rc, so, se = run(args + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
    check(rc == 0, f"estimate W={W} {dtype} with parameter offload", se)
    s = json.loads(so)["stages"][0]
    return s["bytes_per_rank"], s["offloaded_bytes_per_rank"]["host"]


if CASE == "same_bits":
    for W, dtype in [(1, "fp32"), (1, "bf16"), (2, "fp32"), (2, "bf16"), (4, "fp32"), (4, "bf16")]:
        flags = S3 + ["--dtype", dtype]
        w0, s0, m0 = trained(f"plain-{W}-{dtype}", W, flags)
        plain = {r["rank"]: r for r in m0}
        for opt in (False, True):
            what = f"W={W} stage 3 {dtype}{' + optimizer offload' if opt else ''}"
            w1, s1, m1 = trained(f"poff-{W}-{dtype}-{opt}", W, flags + POFF + (OOFF if opt else []))
            check(w1 == w0, f"{what}: the --out weights are the same bits with parameter offload")
            check(s1 == s0, f"{what}: the same losses and grad norms with parameter offload", f"{s1}\n{s0}")
            device, host = predicted(W, dtype, opt)
            for rec in m1:
                r = rec["rank"]
                peak, live = rec["peak_bytes"], rec["live_bytes"]
                check(peak["param"] == 0, f"{what} rank {r}: no parameter bytes on the device ({peak['param']})")
                for key in ("grad", "gathered", "act") + (() if opt else ("master", "optim")):
                    check(peak[key] == plain[r]["peak_bytes"][key],
                          f"{what} rank {r}: device {key} peaks as without offload ({peak[key]})")
                check({k: live[k] for k in ("param", "grad", "master", "optim")} ==
                      {k: device[k] for k in ("param", "grad", "master", "optim")},
                      f"{what} rank {r}: the device's model states are the planner's", f"{live}\n{device}")
                got = {k: rec["host_bytes"][k] for k in ("param", "grad", "master", "optim", "total")}
                check(got == host and got["param"] > 0, f"{what} rank {r}: host_bytes {got} == the planner's {host}")

elif CASE == "budget":
    peaks = {}
    for tag, extra in (("s3oo", OOFF), ("s3both", OOFF + POFF)):
        _, _, mem = trained(tag, 2, S3 + extra, steps=2)
        peaks[tag] = max(r["peak_bytes"]["total"] for r in mem)
    check(peaks["s3both"] < peaks["s3oo"],
          f"parameter offload lowers stage 3's device peak ({peaks['s3both']} < {peaks['s3oo']})")
    budget = (peaks["s3oo"] + peaks["s3both"]) // 2
    rc, so, se = run(base + ["--steps", "2", "--memory-budget", str(budget)] + S3 + OOFF, 2)
    check(rc == 3 and "memory budget exceeded" in se,
          f"stage 3 with the optimizer offloaded over a budget of {budget} bytes exits 3", se)
    m = path("budget.jsonl")
    rc, so, se = run(base + ["--steps", "2", "--memory-budget", str(budget), "--metrics", m] + S3 + OOFF + POFF, 2)
    check(rc == 0, "stage 3 with both offloads trains under the same budget", se)
    check(all(r["peak_bytes"]["total"] <= budget and r["host_bytes"]["param"] > 0 for r in records(m, "memory")),
          "the device stayed under the budget; the host tier holds the parameter shards")

elif CASE == "usage":
    for stage in (0, 1, 2):
        rc, so, se = run(base + ["--steps", "1", "--zero-stage", str(stage)] + POFF, 2)
        check(rc == 2 and "--offload-param" in se and "stage 3" in se, f"stage {stage} with --offload-param exits 2",
              se)
    rc, so, se = run(base + ["--steps", "1", "--offload-param", "nvme"] + S3)
    check(rc == 2 and "--offload-param" in se and "nvme is not implemented yet" in se,
          "nvme exits 2: not implemented yet", se)
    rc, so, se = run(base + ["--steps", "1", "--offload-param", "gpu"] + S3)
    check(rc == 2 and "--offload-param" in se, "a bad value exits 2 naming the flag", se)
    cfg = path("ds.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "pin_memory": True}}}, f)
    m = path("ds.jsonl")
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m], 2)
    check(rc == 0 and "pin_memory" in se, "the config's parameter offload trains; pin_memory is noted as ignored", se)
    check(all(r["host_bytes"]["param"] > 0 and r["peak_bytes"]["param"] == 0 for r in records(m, "memory")),
          "offload_param.device is honoured (the shards in the host tier)")
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m, "--offload-param", "none"], 2)
    check(rc == 0 and all(r["host_bytes"]["total"] == 0 and r["peak_bytes"]["param"] > 0
                          for r in records(m, "memory")), "--offload-param none wins over the config", se)
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}, f)
    rc, so, se = run(base + ["--steps", "1", "--config", cfg], 2)
    check(rc == 2 and "offload_param" in se and "stage 3" in se, "the config's offload_param at stage 2 exits 2", se)
    rc, so, se = run(["train", "--help"])
    check("--offload-param" in so, "--help lists the flag", so)

elif CASE == "checkpoint":
    for dtype, extra in (("bf16", []), ("fp32", OOFF)):
        flags = S3 + ["--dtype", dtype]
        straight, _, _ = trained(f"straight-{dtype}", 2, flags, steps=4)
        for first, second in ((POFF + extra, []), ([], POFF + extra)):
            tag = f"{dtype}-{'off' if first else 'plain'}"
            d = path(f"ck-{tag}")
            rc, so, se = run(base + ["--steps", "2", "--save-dir", d] + flags + first, 2)
            check(rc == 0, f"{dtype}: 2 steps saved ({'with' if first else 'without'} parameter offload)", se)
            out = path(f"resumed-{tag}.safetensors")
            rc, so, se = run(base + ["--steps", "4", "--resume", d, "--out", out] + flags + second, 2)
            check(rc == 0, f"{dtype}: resumed {'without' if first else 'with'} parameter offload", se)
            check(zt.read_bytes(out) == straight,
                  f"stage 3 {dtype}: saved {'with' if first else 'without'} parameter offload {extra}, resumed "
                  f"{'without' if first else 'with'}: the same bits as 4 steps straight")
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
