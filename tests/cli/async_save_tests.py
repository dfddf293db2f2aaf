#!/usr/bin/env python3
"""End-to-end checks of `zerodp train --async-save` (mpirun, W = 2):

  bits:   at stages 1 and 3, fp32 and bf16, saving every 2 of 6 steps: every rank file of every
          checkpoint an async save wrote is byte for byte the sync save's, the manifests are the same
          but for training.async_save, the losses, gradient norms and --out weights are those of the
          run without saves; the host tier holds the copy exactly as `zerodp estimate --async-save`
          predicts it (master and optim, with and without the optimizer offloaded to cpu), and the
          run without --async-save holds none of it. The files are written from the state in place
          (fp32 states), also with the writer held until the update has copied the rest
          (ZERODP_TEST_WRITER_WAITS_FOR_UPDATE), and from the copy taken at the step boundary (bf16
          optimizer states, widened for the file);
  crash:  ZERODP_TEST_CRASH_IN_SAVE kills rank 1 inside the async save of step 4: step-2 stays latest
          and verifies (`zerodp ckpt inspect`), no step-4 is visible, and a resume from it (async
          again) reaches the bits of the straight run (losses, --out weights);
  usage:  --async-save without --save-dir exits 2 naming both; the DeepSpeed key
          checkpoint.writer.decoupled turns it on (its checkpoints are the flag's) and a bad value is
          refused naming the key; --help lists the flag.

usage: async_save_tests.py ZERODP CASE     (CASE: bits | crash | usage)
Exits non-zero with a message on the first failed check."""
import functools
import json
import os

from zdptest import harness as zt
from zdptest.harness import check, read_bytes, records, steps_of

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP, timeout=150)  # run(args, ranks=None, timeout=150, env=None)

# Units that need padding at W = 2 (unit 0 = 256·48 + 32·48 + 96, a block 28272).
MODEL = {"layers": 2, "heads": 4, "embd": 48, "vocab": 256, "ctx": 32}
tmp = zt.workdir("async_save")
tokens, init = zt.make_inputs(ZERODP, tmp, **MODEL, seed=13, text_bytes=30000)
base = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "16", "--lr", "3e-3",
        "--clip", "1.0", "--log-every", "0"]
STEPS = 6


def path(*names):
    return os.path.join(tmp, *names)


def trained(tag, extra, env=None, steps=STEPS):
    """W = 2 training; returns (--out bytes, [(loss, grad_norm)], memory records)."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    return zt.trained(ZERODP, base + ["--steps", str(steps), "--out", out, "--metrics", m] + extra, 2, out, m, tag,
                      env=env)


def trained_verbose(tag, extra, env):
    """trained() with debug messages (zerodp -v): also returns the run's stderr."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    rc, _, err = run(["-v"] + base + ["--steps", str(STEPS), "--out", out, "--metrics", m] + extra, 2, env=env)
    check(rc == 0, f"{tag} trains", err)
    return read_bytes(out), [(s["loss"], s["grad_norm"]) for s in records(m, "step")], records(m, "memory"), err


def checkpoint_files(save):
    """{step-<n>/file: bytes} of every checkpoint in a save directory, and its `latest`."""
    out = {}
    for d in sorted(os.listdir(save)):
        if d.startswith("step-"):
            for f in sorted(os.listdir(os.path.join(save, d))):
                out[f"{d}/{f}"] = read_bytes(os.path.join(save, d, f))
    out["latest"] = read_bytes(os.path.join(save, "latest"))
    return out


def without_async_key(manifest_bytes):
    """A manifest without the settings that name this run's own files (and async_save itself)."""
    m = json.loads(manifest_bytes)
    for key in ("async_save", "save_dir", "metrics", "out", "config"):
        m["training"].pop(key, None)
    return m


def same_checkpoints(what, sync_save, async_save):
    a, b = checkpoint_files(sync_save), checkpoint_files(async_save)
    check(sorted(a) == sorted(b), f"{what}: the same checkpoint files", f"{sorted(a)}\n{sorted(b)}")
    for name in sorted(a):
        if name.endswith("manifest.json"):
            check(without_async_key(a[name]) == without_async_key(b[name]),
                  f"{what}: {name} is the sync save's but for training.async_save")
        elif not name.endswith("manifest.crc32c"):
            check(a[name] == b[name], f"{what}: {name} is byte for byte the sync save's")


def predicted_host(stage, dtype, offload, extra):
    """The planner's host tier with --async-save."""
    args = ["estimate", "--json", "--gpus", "2", "--stage", str(stage), "--dtype", dtype, "--micro-batch", "2",
            "--seq", "16", "--async-save"] + (["--offload-optimizer", "cpu", "--sub-group-size", "1000"] if offload else []) + extra
    if dtype != "fp32":
        args.append("--fp32-grad-accum")  # zerodp train's default, not estimate's
    rc, so, se = run(args + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
    check(rc == 0, f"estimate --async-save stage {stage} {dtype}", se)
    return json.loads(so)["stages"][0]["offloaded_bytes_per_rank"]["host"]


if CASE == "bits":
    for stage, dtype, offload, extra in [(1, "fp32", False, []), (3, "bf16", False, []), (2, "fp32", True, []),
                                         (1, "bf16", False, ["--bf16-optimizer-states"])]:
        what = f"stage {stage} {dtype}" + (" offload cpu" if offload else "") + "".join(f" {e}" for e in extra)
        flags = ["--zero-stage", str(stage), "--dtype", dtype] + (
            ["--offload-optimizer", "cpu", "--sub-group-size", "1000"] if offload else []) + extra
        tag = f"{stage}-{dtype}-{offload}-{len(extra)}"
        w0, s0, _ = trained(f"plain-{tag}", flags)
        saves = {}
        modes = ("sync", "async", "waits") if stage == 1 and not extra else ("sync", "async")
        for mode in modes:
            save = path(f"save-{mode}-{tag}")
            args = flags + ["--save-dir", save, "--save-every", "2"] + (["--async-save"] if mode != "sync" else [])
            if mode == "waits":
                w, s, mem, err = trained_verbose(f"{mode}-{tag}", args, {"ZERODP_TEST_WRITER_WAITS_FOR_UPDATE": "1"})
                check("pieces not yet written, copied to host memory" in err,
                      f"{what}: the update copied what the held writer had not read", err[-3000:])
            else:
                w, s, mem = trained(f"{mode}-{tag}", args)
            check(w == w0 and s == s0, f"{what} {mode} saves: the losses, grad norms and weights of the run without saves")
            saves[mode] = (save, mem)
        same_checkpoints(what, saves["sync"][0], saves["async"][0])
        if "waits" in saves:
            same_checkpoints(what + ", the writer held until the update", saves["sync"][0], saves["waits"][0])
        host = predicted_host(stage, dtype, offload, extra)
        for rec in saves["async"][1]:
            got = zt.model_states(rec, "host_bytes")
            check(got == host, f"{what} rank {rec['rank']}: host_bytes {got} == the planner's {host}")
        if not offload:
            check(all(r["host_bytes"]["total"] == 0 for r in saves["sync"][1]), f"{what}: a sync save holds no host copy")

elif CASE == "crash":
    flags = ["--zero-stage", "2", "--dtype", "bf16", "--async-save"]
    w0, s0, _ = trained("straight", ["--zero-stage", "2", "--dtype", "bf16"])
    save = path("save-crash")
    out, m = path("crashed.safetensors"), path("crashed.jsonl")
    rc, _, err = run(base + ["--steps", str(STEPS), "--out", out, "--metrics", m, "--save-dir", save,
                             "--save-every", "2"] + flags, 2, env={"ZERODP_TEST_CRASH_IN_SAVE": "1:4"})
    check(rc != 0, f"the run dies when rank 1 is killed inside the async save of step 4 (exit {rc})", err)
    names = sorted(n for n in os.listdir(save) if not n.startswith("."))
    check(names == ["latest", "step-2"], "only step-2 and latest are visible", str(names))
    check(read_bytes(os.path.join(save, "latest")) == b"step-2\n", "latest still names step-2")
    rc, so, se = run(["ckpt", "inspect", save])
    check(rc == 0 and "all 2 files verified" in so, "step-2 verifies", so + se)
    w1, s1, _ = trained("resumed", ["--resume", save, "--save-dir", save, "--save-every", "2"] + flags)
    check(w1 == w0, "the resumed run's --out weights are the straight run's")
    resumed = steps_of(path("resumed.jsonl"))
    check(sorted(resumed) == [2, 3, 4, 5], "the resumed run continues at step 2", str(sorted(resumed)))
    check([(resumed[s]["loss"], resumed[s]["grad_norm"]) for s in range(2, STEPS)] == s0[2:],
          "its losses and grad norms are the straight run's")
    names = sorted(os.listdir(save))
    check(names == ["latest", "step-2", "step-4", "step-6"], "the resumed run's saves clear the leftovers", str(names))

elif CASE == "usage":
    rc, _, err = run(base + ["--steps", "2", "--async-save"], 2)
    check(rc == 2 and "--async-save" in err and "--save-dir" in err, "--async-save without --save-dir exits 2", err)
    cfg = path("decoupled.json")
    with open(cfg, "w") as f:
        json.dump({"checkpoint": {"writer": {"decoupled": True, "type": "fast"}}}, f)
    save_flag, save_key = path("save-flag"), path("save-key")
    trained("flag", ["--save-dir", save_flag, "--save-every", "2", "--async-save"], steps=4)
    _, _, _ = trained("key", ["--save-dir", save_key, "--save-every", "2", "--config", cfg], steps=4)
    m = json.loads(read_bytes(os.path.join(save_key, "step-4", "manifest.json")))
    check(m["training"]["async_save"] is True, "checkpoint.writer.decoupled sets async_save")
    same_checkpoints("the DeepSpeed key", save_flag, save_key)
    with open(cfg, "w") as f:
        json.dump({"checkpoint": {"writer": {"decoupled": "yes"}}}, f)
    rc, _, err = run(base + ["--steps", "2", "--save-dir", path("bad"), "--config", cfg], 2)
    check(rc == 2 and "checkpoint.writer.decoupled" in err, "a decoupled that is no boolean exits 2 naming the key", err)
    rc, so, se = run(["train", "--help"])
    check(rc == 0 and "--async-save" in so, "train --help lists --async-save", so + se)

else:
    zt.fail(f"unknown case {CASE}")
