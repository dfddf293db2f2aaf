#!/usr/bin/env python3
"""End-to-end checks of `zerodp train --offload-param cpu|nvme` (stage 3; mpirun):

  same_bits:  runs with the parameter shards offloaded equal the same runs without (--out weights,
              losses, grad norms) at W = 1, 2, 4, fp32 and bf16: cpu alone and with --offload-optimizer
              cpu too, nvme with --offload-optimizer cpu and with nvme; the device holds no parameter
              bytes, its grad/master/optim are the planner's and its gathered copies peak as without;
              host_bytes and nvme_bytes hold the parameter shards (and the optimizer's states when
              offloaded too) exactly as `zerodp estimate --offload-param cpu|nvme` predicts them;
              nothing is left under --nvme-path;
  budget:     a --memory-budget that stage 3 with the optimizer offloaded cannot meet (exit 3) while
              stage 3 with both offloads (cpu; nvme) trains under it (8 layers: the shards saved
              outweigh the staging of the gathers in flight);
  usage:      stages 0-2 with --offload-param, nvme without --offload-optimizer or without
              --nvme-path exit 2 naming the flag; the DeepSpeed keys (offload_param.device,
              nvme_path, buffer_count, max_in_cpu: the tiers are the planner's) are honoured,
              pin_memory and buffer_size noted as ignored, the flag wins;
  checkpoint: a checkpoint saved with parameter offload (cpu; nvme) resumes without it, and the other
              way round, to the same bits as a run straight through without offload.

usage: param_offload_tests.py ZERODP CASE     (CASE: same_bits | budget | usage | checkpoint)
Exits non-zero with a message on the first failed check."""
import functools
import json
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

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
NVME_DIR = os.path.join(tmp, "nvme")
os.makedirs(NVME_DIR, exist_ok=True)
PNVME = ["--offload-param", "nvme", "--nvme-path", NVME_DIR]
ONVME = ["--offload-optimizer", "nvme"]  # always beside PNVME, which names the directory


def path(name):
    return os.path.join(tmp, name)


def trained(tag, ranks, extra, steps=3):
    """Runs training; returns (weights bytes, [(loss, grad_norm)], memory records)."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    return zt.trained(ZERODP, base + ["--steps", str(steps), "--out", out, "--metrics", m] + extra, ranks, out, m, tag)


def predicted(W, dtype, offload_optimizer, param="cpu", extra=()):
    """The planner's device bytes and offloaded host and nvme bytes; offload_optimizer: None, "cpu", "nvme"."""
    args = ["estimate", "--json", "--gpus", str(W), "--stage", "3", "--dtype", dtype, "--micro-batch", "2",
            "--seq", "16", "--offload-param", param] + (["--offload-optimizer", offload_optimizer] if offload_optimizer else [])
    args += list(extra)
    if dtype != "fp32":
        args.append("--fp32-grad-accum")  # zerodp train's default, not estimate's
    rc, so, se = run(args + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
    check(rc == 0, f"estimate W={W} {dtype} with parameter offload", se)
    s = json.loads(so)["stages"][0]
    return s["bytes_per_rank"], s["offloaded_bytes_per_rank"]["host"], s["offloaded_bytes_per_rank"]["nvme"]


if CASE == "same_bits":
    for W, dtype in [(1, "fp32"), (1, "bf16"), (2, "fp32"), (2, "bf16"), (4, "fp32"), (4, "bf16")]:
        flags = S3 + ["--dtype", dtype]
        w0, s0, m0 = trained(f"plain-{W}-{dtype}", W, flags)
        plain = {r["rank"]: r for r in m0}
        # (parameters to, optimizer to): cpu alone and with the optimizer; nvme with either optimizer offload
        for param, opt in (("cpu", None), ("cpu", "cpu"), ("nvme", "cpu"), ("nvme", "nvme")):
            what = f"W={W} stage 3 {dtype} parameters to {param}{f' + optimizer to {opt}' if opt else ''}"
            extra = (POFF if param == "cpu" else PNVME) + ({"cpu": OOFF, "nvme": ONVME}[opt] if opt else [])
            w1, s1, m1 = trained(f"poff-{W}-{dtype}-{param}-{opt}", W, flags + extra)
            check(w1 == w0, f"{what}: the --out weights are the same bits with parameter offload")
            check(s1 == s0, f"{what}: the same losses and grad norms with parameter offload", f"{s1}\n{s0}")
            check(os.listdir(NVME_DIR) == [], f"{what}: nothing left under --nvme-path", os.listdir(NVME_DIR))
            device, host, nvme = predicted(W, dtype, opt, param)
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
                got = zt.model_states(rec, "host_bytes")
                check(got == host and got["param"] > 0, f"{what} rank {r}: host_bytes {got} == the planner's {host}")
                got = zt.model_states(rec, "nvme_bytes")
                check(got == nvme and (got["param"] > 0) == (param == "nvme"),
                      f"{what} rank {r}: nvme_bytes {got} == the planner's {nvme}")

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
    for param, extra, where in (("cpu", POFF, "host_bytes"), ("nvme", PNVME, "nvme_bytes")):
        rc, so, se = run(base + ["--steps", "2", "--memory-budget", str(budget), "--metrics", m] + S3 + OOFF + extra, 2)
        check(rc == 0, f"stage 3 with both offloads (parameters to {param}) trains under the same budget", se)
        check(all(r["peak_bytes"]["total"] <= budget and r[where]["param"] > 0 for r in records(m, "memory")),
              f"the device stayed under the budget; the {where.split('_')[0]} tier holds the parameter shards")

elif CASE == "usage":
    for stage in (0, 1, 2):
        rc, so, se = run(base + ["--steps", "1", "--zero-stage", str(stage)] + POFF, 2)
        check(rc == 2 and "--offload-param" in se and "stage 3" in se, f"stage {stage} with --offload-param exits 2",
              se)
    rc, so, se = run(base + ["--steps", "1"] + PNVME + S3)
    check(rc == 2 and "--offload-param" in se and "--offload-optimizer" in se,
          "nvme without the optimizer offloaded exits 2 saying so", se)
    rc, so, se = run(base + ["--steps", "1", "--offload-param", "nvme"] + OOFF + S3)
    check(rc == 2 and "--nvme-path" in se, "nvme without --nvme-path exits 2 naming it", se)
    nv = path("ds-nvme.json")
    # At W=2 unit 0's shard is 6960 elements and a block's 14136: 25000 keeps unit 0 and block 1 in
    # host memory and puts block 2 in the file; 1e9 keeps all three (no file); 0 none.
    for count, max_in_cpu, in_file in ((2, 25000, True), (5, 10**9, False), (1, 0, True)):
        what = f"offload_param buffer_count {count} max_in_cpu {max_in_cpu}"
        with open(nv, "w") as f:
            json.dump({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                                             "offload_param": {"device": "nvme", "nvme_path": NVME_DIR,
                                                               "buffer_count": count, "max_in_cpu": max_in_cpu,
                                                               "buffer_size": 1e8}}}, f)
        m = path("ds-nvme.jsonl")
        rc, so, se = run(base + ["--steps", "1", "--config", nv, "--metrics", m], 2)
        check(rc == 0 and "buffer_size" in se, f"{what}: the config's nvme parameter offload trains; buffer_size "
              "noted as ignored", se)
        _, host, nvme = predicted(2, "fp32", "cpu", "nvme", ["--param-buffer-count", str(count),
                                                             "--max-in-cpu", str(max_in_cpu)])
        for r in records(m, "memory"):
            check(zt.model_states(r, "host_bytes") == host and zt.model_states(r, "nvme_bytes") == nvme and r["peak_bytes"]["param"] == 0,
                  f"{what} rank {r['rank']}: the shards in the tiers the planner says "
                  f"(host {zt.model_states(r, 'host_bytes')} == {host}, nvme {zt.model_states(r, 'nvme_bytes')} == {nvme})")
            check((r["nvme_bytes"]["param"] > 0) == in_file and (r["host_bytes"]["param"] > 0),
                  f"{what} rank {r['rank']}: parameters in the file: {in_file}", r)
        check(os.listdir(NVME_DIR) == [], "nothing left under --nvme-path", os.listdir(NVME_DIR))
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
    for dtype, extra in (("bf16", POFF), ("fp32", POFF + OOFF), ("bf16", PNVME + ONVME), ("fp32", PNVME + OOFF)):
        flags = S3 + ["--dtype", dtype]
        straight, _, _ = trained(f"straight-{dtype}", 2, flags, steps=4)
        for first, second in ((extra, []), ([], extra)):
            tag = f"{dtype}-{extra[1]}-{len(extra)}-{'off' if first else 'plain'}"
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
