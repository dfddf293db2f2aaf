#!/usr/bin/env python3
"""End-to-end checks of `zerodp train --offload-optimizer cpu|nvme` (mpirun):

  same_bits:  offloaded runs (cpu, and nvme with 1, 2 or 4 I/O slots) equal the same runs without
              offload bit for bit (--out weights, losses, grad norms) at W = 1, 2, 4, stages 1-3,
              fp32 and bf16, with sub-groups of 1000 elements (1024 on nvme); the device tier holds
              no master or optim and its other categories peak exactly as without offload;
              host_bytes and nvme_bytes hold master, optim and the gradient staging exactly as
              `zerodp estimate --offload-optimizer cpu|nvme --sub-group-size --buffer-count`
              predicts them; no file or directory is left under --nvme-path;
  budget:     a --memory-budget that stage 3 alone cannot meet (exit 3) while stage 3 with the
              optimizer offloaded (cpu, nvme) trains under it;
  usage:      stage 0 with offload, nvme without --nvme-path, an --nvme-path that is no directory
              exit 2 naming the flag; the DeepSpeed keys (offload_optimizer.device, sub_group_size,
              nvme_path, buffer_count) are honoured and flags win over them; stale run directories
              of dead processes are removed, others kept;
  checkpoint: a checkpoint saved with offload (cpu, nvme) resumes without it, and the other way
              round, to the same bits as a run straight through without offload; a W=2 checkpoint
              saved with nvme offload resumes at W=4 with it as without it;
  kill:       kill -9 of one rank of a W=2 stage-3 run with the optimizer and the parameters on
              nvme: the job ends (exit non-zero, well within the test's timeout), no offload file
              is left, the next run removes the killed run's directory, and the checkpoint saved
              before the kill resumes.

usage: offload_tests.py ZERODP CASE     (CASE: same_bits | budget | usage | checkpoint | kill)
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
tmp = zt.workdir("offload")
tokens, init = zt.make_inputs(ZERODP, tmp, **MODEL, seed=11, text_bytes=30000)
base = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "16", "--lr", "3e-3",
        "--clip", "1.0", "--log-every", "0"]
OFF = ["--offload-optimizer", "cpu"]
NVME_DIR = os.path.join(tmp, "nvme")
os.makedirs(NVME_DIR, exist_ok=True)
NVME = ["--offload-optimizer", "nvme", "--nvme-path", NVME_DIR]


def path(name):
    return os.path.join(tmp, name)


def nvme_left():
    """What runs left under --nvme-path (nothing, once they have ended)."""
    return sorted(os.listdir(NVME_DIR))


def steps_logged(partial):
    """Step records a running job has written to its metrics file so far."""
    try:
        with open(partial) as f:
            return sum(1 for line in f if '"event":"step"' in line)
    except OSError:
        return 0


def buffer_count_config(count):
    """A --config that sets only offload_optimizer.buffer_count (the slots of nvme offload)."""
    cfg = path(f"buffers{count}.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"offload_optimizer": {"buffer_count": count}}}, f)
    return ["--config", cfg]


def trained(tag, ranks, extra, steps=3):
    """Runs training; returns (weights bytes, [(loss, grad_norm)], memory records)."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    return zt.trained(ZERODP, base + ["--steps", str(steps), "--out", out, "--metrics", m] + extra, ranks, out, m, tag)


def predicted(W, stage, dtype, sub_group, device="cpu", buffers=4):
    """The planner's device bytes and offloaded host and nvme bytes."""
    args = ["estimate", "--json", "--gpus", str(W), "--stage", str(stage), "--dtype", dtype, "--micro-batch", "2",
            "--seq", "16", "--offload-optimizer", device, "--sub-group-size", str(sub_group),
            "--buffer-count", str(buffers)]
    if dtype != "fp32":
        args.append("--fp32-grad-accum")  # zerodp train's default, not estimate's
    rc, so, se = run(args + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
    check(rc == 0, f"estimate W={W} stage {stage} {dtype} with offload", se)
    s = json.loads(so)["stages"][0]
    return s["bytes_per_rank"], s["offloaded_bytes_per_rank"]["host"], s["offloaded_bytes_per_rank"]["nvme"]


def check_memory(what, plain_records, records_, prediction):
    """The device tier as without offload but for master and optim (none), the model states the
    planner's; the host and nvme tiers exactly the planner's."""
    device, host, nvme = prediction
    plain = {r["rank"]: r for r in plain_records}
    for rec in records_:
        r = rec["rank"]
        peak, live = rec["peak_bytes"], rec["live_bytes"]
        check(peak["master"] == 0 and peak["optim"] == 0, f"{what} rank {r}: no master or optim on the device")
        for key in ("param", "grad", "gathered", "comm", "act"):
            check(peak[key] == plain[r]["peak_bytes"][key],
                  f"{what} rank {r}: device {key} peaks as without offload ({peak[key]})")
        check({k: live[k] for k in ("param", "grad", "master", "optim")} ==
              {k: device[k] for k in ("param", "grad", "master", "optim")},
              f"{what} rank {r}: the device's model states are the planner's", f"{live}\n{device}")
        check(zt.model_states(rec, "host_bytes") == host, f"{what} rank {r}: host_bytes {zt.model_states(rec, 'host_bytes')} == the planner's {host}")
        check(zt.model_states(rec, "nvme_bytes") == nvme, f"{what} rank {r}: nvme_bytes {zt.model_states(rec, 'nvme_bytes')} == the planner's {nvme}")


if CASE == "same_bits":
    # (W, stage, dtype, nvme I/O slots or None: cpu only)
    for W, stage, dtype, slots in [(1, 1, "fp32", 4), (1, 3, "bf16", None), (2, 2, "fp32", 2), (2, 3, "bf16", 1),
                                   (2, 1, "bf16", None), (4, 3, "fp32", 4), (4, 2, "bf16", None)]:
        what = f"W={W} stage {stage} {dtype}"
        flags = ["--zero-stage", str(stage), "--dtype", dtype]
        w0, s0, m0 = trained(f"plain-{W}-{stage}-{dtype}", W, flags)
        modes = [("cpu", OFF, 4)]
        if slots:
            modes.append(("nvme", NVME + buffer_count_config(slots), slots))
        for device, extra, buffers in modes:
            what = f"W={W} stage {stage} {dtype} offload {device}" + (f" ({buffers} slots)" if device == "nvme" else "")
            w1, s1, m1 = trained(f"off-{device}-{W}-{stage}-{dtype}", W, flags + extra + ["--sub-group-size", "1000"])
            check(w1 == w0, f"{what}: the --out weights are the same bits with offload")
            check(s1 == s0, f"{what}: the same losses and grad norms with offload", f"{s1}\n{s0}")
            check(nvme_left() == [], f"{what}: nothing left under --nvme-path", nvme_left())
            check_memory(what, m0, m1, predicted(W, stage, dtype, 1000, device, buffers))

elif CASE == "budget":
    peaks = {}
    for tag, extra in (("s3", []), ("s3off", OFF)):
        _, _, mem = trained(tag, 2, ["--zero-stage", "3"] + extra, steps=2)
        peaks[tag] = max(r["peak_bytes"]["total"] for r in mem)
    check(peaks["s3off"] < peaks["s3"], f"offload lowers stage 3's device peak ({peaks['s3off']} < {peaks['s3']})")
    budget = (peaks["s3"] + peaks["s3off"]) // 2
    rc, so, se = run(base + ["--steps", "2", "--zero-stage", "3", "--memory-budget", str(budget)], 2)
    check(rc == 3 and "memory budget exceeded" in se, f"stage 3 alone over a budget of {budget} bytes exits 3", se)
    for device, extra, where in (("cpu", OFF, "host_bytes"), ("nvme", NVME, "nvme_bytes")):
        m = path(f"budget-{device}.jsonl")
        rc, so, se = run(base + ["--steps", "2", "--zero-stage", "3", "--memory-budget", str(budget), "--metrics", m]
                         + extra, 2)
        check(rc == 0, f"stage 3 with --offload-optimizer {device} trains under the same budget", se)
        check(all(r["peak_bytes"]["total"] <= budget and r[where]["optim"] > 0 for r in records(m, "memory")),
              f"the device stayed under the budget; the {where.split('_')[0]} tier holds the optimizer states")
        check(f"{where.split('_')[0]} peak" in so, f"the memory table shows the {where.split('_')[0]} tier", so)
    check(nvme_left() == [], "nothing left under --nvme-path", nvme_left())

elif CASE == "usage":
    rc, so, se = run(base + ["--steps", "1", "--zero-stage", "0"] + OFF, 2)
    check(rc == 2 and "--offload-optimizer" in se and "stage 1, 2 or 3" in se, "stage 0 with offload exits 2", se)
    rc, so, se = run(base + ["--steps", "1", "--zero-stage", "2", "--offload-optimizer", "nvme"])
    check(rc == 2 and "--nvme-path" in se, "nvme without --nvme-path exits 2 naming it", se)
    for bad, why in ((path("no-such-dir"), "not a directory"), (path("ds.jsonl.file"), "not a directory")):
        open(path("ds.jsonl.file"), "w").close()
        rc, so, se = run(base + ["--steps", "1", "--zero-stage", "2", "--offload-optimizer", "nvme",
                                 "--nvme-path", bad])
        check(rc == 2 and "--nvme-path" in se and why in se, f"--nvme-path {os.path.basename(bad)} exits 2: {why}", se)
    # The DeepSpeed keys of nvme offload; a stale run directory of a dead process (a pid that cannot
    # be one: above the kernel's pid_max) and one of another host are there before the run.
    host = zt.run_dir_host()
    stale = os.path.join(NVME_DIR, f"zerodp-offload.{host}.4194399.12345")
    foreign = os.path.join(NVME_DIR, f"zerodp-offload.{host}-elsewhere.4194399.12345")
    os.makedirs(stale)
    os.makedirs(foreign)
    nv = path("ds-nvme.json")
    with open(nv, "w") as f:
        json.dump({"zero_optimization": {"stage": 2, "sub_group_size": 3000,
                                         "offload_optimizer": {"device": "nvme", "nvme_path": NVME_DIR,
                                                               "buffer_count": 3, "pipeline_read": True}}}, f)
    m = path("ds-nvme.jsonl")
    rc, so, se = run(base + ["--steps", "1", "--config", nv, "--metrics", m], 2)
    check(rc == 0 and "pipeline_read" in se, "the config's nvme offload trains; pipeline_read is noted as ignored", se)
    _, host_pred, nvme_pred = predicted(2, 2, "fp32", 3000, "nvme", 3)
    check(all(zt.model_states(r, "host_bytes") == host_pred and zt.model_states(r, "nvme_bytes") == nvme_pred for r in records(m, "memory")),
          "nvme_path, buffer_count (3 slots) and sub_group_size (3072 on nvme) are honoured", records(m, "memory"))
    check(not os.path.exists(stale), "the stale run directory of a dead process was removed")
    check(os.path.exists(foreign), "another host's run directory was left alone")
    os.rmdir(foreign)
    check(nvme_left() == [], "nothing left under --nvme-path", nvme_left())
    rc, so, se = run(base + ["--steps", "1", "--zero-stage", "2", "--offload-optimizer", "gpu"])
    check(rc == 2 and "--offload-optimizer" in se, "a bad value exits 2 naming the flag", se)
    cfg = path("ds.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 2, "sub_group_size": 500,
                                         "offload_optimizer": {"device": "cpu", "pin_memory": True}}}, f)
    m = path("ds.jsonl")
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m], 2)
    check(rc == 0 and "pin_memory" in se, "the config's offload trains; pin_memory is noted as ignored", se)
    check(all(r["host_bytes"]["grad"] == 2 * 500 * 4 and r["host_bytes"]["optim"] > 0 for r in records(m, "memory")),
          "offload_optimizer.device and sub_group_size are honoured (two 500-element staging buffers)")
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m, "--offload-optimizer", "none"], 2)
    check(rc == 0 and all(r["host_bytes"]["total"] == 0 for r in records(m, "memory")),
          "--offload-optimizer none wins over the config", se)
    rc, so, se = run(base + ["--steps", "1", "--config", cfg, "--metrics", m, "--sub-group-size", "64"], 2)
    check(rc == 0 and all(r["host_bytes"]["grad"] == 2 * 64 * 4 for r in records(m, "memory")),
          "--sub-group-size wins over the config", se)
    rc, so, se = run(["train", "--help"])
    check(all(f in so for f in ("--offload-optimizer", "--sub-group-size", "--nvme-path")), "--help lists the flags", so)

elif CASE == "checkpoint":
    for stage, dtype, off in ((2, "bf16", OFF), (3, "fp32", OFF), (3, "bf16", NVME), (1, "fp32", NVME)):
        flags = ["--zero-stage", str(stage), "--dtype", dtype]
        straight, _, _ = trained(f"straight-{stage}-{dtype}", 2, flags, steps=4)
        device = off[1]
        for first, second in ((off, []), ([], off)):
            tag = f"{stage}-{dtype}-{device}-{'off' if first else 'plain'}"
            d = path(f"ck-{tag}")
            rc, so, se = run(base + ["--steps", "2", "--save-dir", d] + flags + first, 2)
            check(rc == 0, f"stage {stage} {dtype}: 2 steps saved ({'with' if first else 'without'} {device} offload)", se)
            out = path(f"resumed-{tag}.safetensors")
            rc, so, se = run(base + ["--steps", "4", "--resume", d, "--out", out] + flags + second, 2)
            check(rc == 0, f"stage {stage}: resumed {'without' if first else 'with'} {device} offload", se)
            check(zt.read_bytes(out) == straight,
                  f"stage {stage} {dtype}: saved {'with' if first else 'without'} {device} offload, resumed "
                  f"{'without' if first else 'with'}: the same bits as 4 steps straight")
    # Resharding: a W=2 checkpoint saved with nvme offload resumes at W=4 with nvme offload to the same
    # bits as the same checkpoint resumed at W=4 without offload.
    d = path("ck-3-bf16-nvme-off")
    flags = ["--zero-stage", "3", "--dtype", "bf16"]
    outs = []
    base4 = [("1" if prev == "--micro-batch" else a) for prev, a in zip([None] + base, base)]  # W·B stays 4
    for tag, extra in (("nvme", NVME), ("plain", [])):
        out = path(f"reshard-{tag}.safetensors")
        rc, so, se = run(base4 + ["--steps", "4", "--resume", d, "--out", out] + flags + extra, 4)
        check(rc == 0, f"the W=2 checkpoint resumes at W=4 ({tag})", se)
        outs.append(zt.read_bytes(out))
    check(outs[0] == outs[1], "resharded to W=4: with nvme offload the same bits as without")
    check(nvme_left() == [], "nothing left under --nvme-path", nvme_left())

elif CASE == "kill":
    # A run long enough to be killed in the middle: checkpoints every 2 steps, the metrics file shows
    # how far it got; rank 1 is killed once step 3's record is there (after the first checkpoint).
    d, m = path("ck-kill"), path("kill.jsonl")
    args = base + ["--steps", "400", "--zero-stage", "3", "--save-dir", d, "--save-every", "2", "--metrics", m,
                   "--sub-group-size", "5000", "--offload-param", "nvme"] + NVME
    outcome = zt.run_and_kill_rank(ZERODP, args, ranks=2, victim=1,
                                   when=lambda: steps_logged(m + ".partial") >= 3, timeout=120)
    check(outcome["killed"], "rank 1 was killed mid-run", outcome)
    check(outcome["rc"] != 0, f"the job failed (exit {outcome['rc']})", outcome)
    check(outcome["seconds_after_kill"] < 60, f"every rank exited {outcome['seconds_after_kill']:.1f} s after the kill")
    check(zt.offload_files_open() == [], "no process holds an offload file", zt.offload_files_open())
    left = [os.path.join(r, f) for r, _, fs in os.walk(NVME_DIR) for f in fs]
    check(left == [], "no offload file is left under --nvme-path", left)
    # The next run removes the killed run's (empty) directory and resumes the checkpoint saved before it.
    out = path("after-kill.safetensors")
    with open(os.path.join(d, "latest")) as f:
        saved = int(f.read().strip().split("-")[-1])
    check(0 < saved < 400, f"the killed run had saved step {saved}, mid-run")
    rc, so, se = run(base + ["--steps", str(saved + 2), "--zero-stage", "3", "--resume", d, "--out", out,
                             "--offload-param", "nvme"] + NVME, 2)
    check(rc == 0, "the checkpoint saved before the kill resumes", se)
    check(nvme_left() == [], "the killed run's directory was removed by the next run", nvme_left())
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
