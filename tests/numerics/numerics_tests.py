#!/usr/bin/env python3
"""End-to-end checks of zerodp's numerics through the CLI and mpirun (docs/reference/command-line.md#offload-faults-devices, docs/design.md):

  nonfinite   bf16 and fp32, stages 0 and 2: an Inf injected into one rank's gradient of block 1
              stops the run with exit 1 naming the step and the unit; the earlier checkpoint stays
              latest and intact, the earlier --out file is untouched; the metrics line says skipped.
  skip        --skip-nonfinite: the step is skipped (weights and optimizer state untouched: the
              checkpoints before and after it hold the same weights), counted in the metrics, and
              the learning-rate schedule does not advance on it.
  fp16        a static loss scale that overflows every step, and a dynamic one whose minimum
              overflows, stop with exit 1 after --max-overflows-at-min-scale skipped steps.
  poison      NaN in the initial weights: exit 2 naming the tensor; NaN in a checkpoint (with valid
              checksums): exit 2 naming the tensor; an lr that makes the weights Inf: exit 1 before
              --out or a checkpoint is written, earlier ones intact.
  stages      bf16 (and fp16) at W=2 and W=4: stages 0-3 write the same --out bytes and the same
              losses and gradient norms, bit for bit.
  shuffle     --shuffle on --seed S: the same global batches at (W=1, B=8), (W=4, B=2), (W=2, B=2,
              G=2); a different order from --shuffle off and from another seed; 6 steps straight ==
              3 + resume 3 bit for bit (the resume inherits the order); a resume asking for another
              seed or order exits 2.
  bf16        16-bit compute against fp32 on the same data: the demo model (L4 H4 C128, T=128), W=2,
              B=4 a rank, 200 steps at lr 1e-3. bf16 keeps an 8-bit significand, so every rounding
              is off by at most u = 2^-9 (0.2%) relative; the loss of a step passes through a few
              dozen such roundings with independent signs, and the trajectories drift apart only as
              the roundings feed back through the updates. Stated tolerance: every step's loss within
              10u (1.95%) of fp32's, and the mean of every 50-step window within 2.5u (0.49%).
              Measured on the author's machine: 0.59% worst step, 0.06% worst window.
  stages_llama  the same for a Llama (GQA, untied head) in bf16 at W=2 and W=4: the same --out
              directory bytes and the same losses and norms at stages 0-3; with --loss-chunk 5 at W=2
              (and --mlp-chunk 7 with checkpointing), stages 0 and 3 alike, and losses within 1% of the
              unchunked run's.
  llama_modes what holds for GPT-2's runs holds for a Llama (GQA, untied head) at W=2: offloading
              the optimizer (cpu, nvme) and the parameters (cpu), activation checkpointing, keeping the
              units gathered from forward to backward (reshard_after_forward off), keeping the embeddings
              whole (persistence threshold) and hpZ write the same --out bytes and losses as the plain
              stage-3 run; hybrid sharding at W=4 (groups of
              2) trains as full sharding does (each step's loss within 1e-5: the sums run in another order); fp16 trains with loss scaling; a non-finite gradient in
              the head's own unit stops a bf16 run naming it, and is a skipped step for fp16.
  bf16_llama  the bf16 case's run for a Llama of the demo's size (L4 H4/2 C128, untied head). Its
              step-0 losses agree as closely as GPT-2's (0.004%), but its trajectories separate
              further as the roundings feed back: over three initial seeds on the author's machine
              the worst step was 1.1-2.1% apart and the worst 50-step window 0.07-0.44% (fp32 at W=1
              against W=2, an ulp-level perturbation, stays within 0.002%). Stated tolerance, with
              room over those: every step within 16u (3.1%), every window's mean within 4u (0.78%).
  bf16_states --bf16-optimizer-states against fp32 states: the demo model, W=2, stage 2, 300 steps of AdamW, fp32
              and bf16 compute, and bf16 with --bf16-master-weights too: every 50-step window's mean loss and the
              last loss within 1%, the optim bytes halved.
  limits      sizes that would wrap (--micro-batch 2^40), a micro-batch whose activations exceed the
              machine's memory, and a DeepSpeed config asking for parameter offload exit 2 at once,
              naming the flag or key.

usage: numerics_tests.py ZERODP CASE
Exits non-zero with a message on the first failed check."""
import functools
import json
import math
import os
import shutil
import struct
import sys

from zdptest import harness as zt
from zdptest.harness import check, crc32c, read_bytes, records, steps_of

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP, timeout=150)
work = zt.workdir("numerics")
tokens, init = zt.make_inputs(ZERODP, work, layers=2, heads=4, embd=32, vocab=256, ctx=16)


def path(*parts):
    return os.path.join(work, *parts)


LLAMA = ["--arch", "llama", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "32", "--vocab", "256",
         "--ctx", "16"]


def llama_init(name, dims=LLAMA):
    d = path(name)
    r = run(["init", "--out", d, "--seed", "1337"] + dims)
    check(r.code == 0, f"init {name}", r.err)
    return d


def dir_bytes(d):
    return {f: read_bytes(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def train_args(steps, B=2, G=1, stage=0, dtype="fp32", extra=(), model=None):
    return ["train", "--init", model or init, "--data", tokens, "--steps", str(steps), "--micro-batch", str(B), "--seq", "16",
            "--accum", str(G), "--zero-stage", str(stage), "--dtype", dtype, "--lr", "3e-3", "--log-every", "0"] + list(extra)


def one_line_error(err):
    """The '[rank r] error: ...' lines of a failed run."""
    return [line for line in err.splitlines() if "error:" in line]


def consolidated(ckpt, name):
    out = path(name)
    r = run(["ckpt", "consolidate", ckpt, "--out", out])
    check(r.code == 0, f"consolidate {ckpt}", r.err)
    return read_bytes(out)


if CASE == "nonfinite":
    for dtype in ("fp32", "bf16"):
        for stage in (0, 2):
            what = f"{dtype} stage {stage}"
            save, out, m = path(f"save-{dtype}-{stage}"), path(f"out-{dtype}-{stage}.safetensors"), path("m.jsonl")
            with open(out, "wb") as f:
                f.write(b"an earlier output")
            r = run(train_args(4, stage=stage, dtype=dtype, extra=[
                "--save-dir", save, "--save-every", "1", "--out", out, "--metrics", m,
                "--inject-overflow-step", "1", "--inject-overflow-rank", "1", "--inject-overflow-unit", "2"]), 2)
            check(r.code == 1, f"{what}: a non-finite gradient stops the run with exit 1 (got {r.code})", r.err)
            errors = one_line_error(r.err)
            check(any("step 1:" in e and "unit 2 (block 1)" in e and "--skip-nonfinite" in e for e in errors),
                  f"{what}: the message names the step, the unit and the way out", "\n".join(errors) or r.err)
            check(all(len(e) < 400 for e in errors), f"{what}: the message is short")
            check(read_bytes(out) == b"an earlier output", f"{what}: the earlier --out file is intact")
            check(open(os.path.join(save, "latest")).read() == "step-1\n", f"{what}: the step-1 checkpoint stays latest")
            check(sorted(d for d in os.listdir(save) if d.startswith("step-")) == ["step-1"],
                  f"{what}: no checkpoint after the non-finite step")
            r2 = run(["ckpt", "inspect", os.path.join(save, "step-1")])
            check(r2.code == 0, f"{what}: the step-1 checkpoint verifies", r2.err)
            partial = m + ".partial"
            steps = steps_of(partial)
            check(steps[1]["skipped"] is True and steps[1]["skipped_steps"] == 1 and steps[1]["loss"] is not None,
                  f"{what}: the metrics record the step as skipped", json.dumps(steps.get(1)))
            check(not os.path.exists(m), f"{what}: no final metrics file for a failed run")

elif CASE == "skip":
    save, m, out = path("save"), path("m.jsonl"), path("out.safetensors")
    sched = ["--lr-schedule", "warmup", "--warmup-steps", "10", "--warmup-type", "linear"]
    r = run(train_args(4, stage=3, extra=sched + [
        "--skip-nonfinite", "--save-dir", save, "--save-every", "1", "--out", out, "--metrics", m,
        "--inject-overflow-step", "1", "--inject-overflow-rank", "0", "--inject-overflow-unit", "0"]), 2)
    check(r.code == 0, "--skip-nonfinite: the run goes on", r.err)
    check("skipped (--skip-nonfinite)" in r.err and "unit 0" in r.err, "the skip is logged naming the unit", r.err)
    steps = steps_of(m)
    check([steps[s]["skipped"] for s in range(4)] == [False, True, False, False], "exactly step 1 is skipped")
    check([steps[s]["skipped_steps"] for s in range(4)] == [0, 1, 1, 1], "skips are counted in the metrics")
    check(math.isinf(steps[1]["grad_norm"]) if isinstance(steps[1]["grad_norm"], float) else steps[1]["grad_norm"] is None,
          "the skipped step's grad_norm is not finite", json.dumps(steps[1]))
    # The schedule counts applied steps: the skipped step's rate is used again by the next step.
    lrs = [steps[s]["lr"] for s in range(4)]
    check(lrs[2] == lrs[1] and lrs[1] > lrs[0] and lrs[3] > lrs[2], f"the lr schedule does not advance on a skipped step: {lrs}")
    check(consolidated(os.path.join(save, "step-1"), "c1.safetensors") ==
          consolidated(os.path.join(save, "step-2"), "c2.safetensors"),
          "the skipped step changed no weight (step-1 and step-2 checkpoints hold the same weights)")
    m1 = json.load(open(os.path.join(save, "step-1", "manifest.json")))
    m2 = json.load(open(os.path.join(save, "step-2", "manifest.json")))
    check(m1["optimizer_steps"] == 1 and m2["optimizer_steps"] == 1, "AdamW's step count did not advance on it")
    check(m2["step"] == 2, "the data position did (the skipped batch is not read again)")
    check(all(math.isfinite(x) for t in zt.safetensors_f32(out).values() for x in t), "--out holds finite weights")

elif CASE == "fp16":
    m = path("m.jsonl")
    r = run(train_args(8, dtype="fp16", extra=["--loss-scale", "1e30", "--max-overflows-at-min-scale", "3",
                                               "--metrics", m]), 2)
    check(r.code == 1, f"a static loss scale that always overflows stops (exit {r.code})", r.err)
    check(any("step 2:" in e and "3 steps in a row" in e for e in one_line_error(r.err)),
          "after 3 overflows in a row, naming the step", r.err)
    steps = steps_of(m + ".partial")
    check(all(steps[s]["skipped"] for s in range(3)), "each of those steps was skipped")
    r = run(train_args(30, dtype="fp16", extra=["--initial-scale-power", "63", "--min-loss-scale", "1e18",
                                                "--hysteresis", "2", "--max-overflows-at-min-scale", "2",
                                                "--metrics", m]), 2)
    check(r.code == 1 and any("at its minimum" in e for e in one_line_error(r.err)),
          f"a dynamic scale overflowing at its minimum stops (exit {r.code})", r.err)
    steps = steps_of(m + ".partial")
    scales = [steps[s]["loss_scale"] for s in sorted(steps)]
    # Every step overflows. Hysteresis 2: the first overflow only counts down, then every one halves
    # (DeepSpeed leaves the hysteresis run down): 2^63, 2^63, 2^62, 2^61, 2^60, then the floor 1e18,
    # where two more overflows in a row stop the run.
    want = [2.0 ** 63, 2.0 ** 63, 2.0 ** 62, 2.0 ** 61, 2.0 ** 60, 1e18, 1e18]
    check(scales == want, f"the scale follows DeepSpeed's hysteresis down to its minimum: {scales}")

elif CASE == "poison":
    # NaN in the initial weights.
    blob = bytearray(read_bytes(init))
    header, _, data = zt.parse_safetensors(bytes(blob))
    base = 8 + struct.unpack("<Q", blob[:8])[0]
    entry = header["h.0.attn.c_attn.weight"]
    off = base + entry["data_offsets"][0] + 4 * 5
    blob[off:off + 4] = struct.pack("<f", float("nan"))
    bad = path("nan.safetensors")
    open(bad, "wb").write(bytes(blob))
    args = train_args(2, extra=["--out", path("o.safetensors")])
    args[args.index(init)] = bad
    r = run(args, 2)
    check(r.code == 2 and "'h.0.attn.c_attn.weight'[5]" in r.err and "nan.safetensors" in r.err,
          f"NaN in the initial weights: exit 2 naming the file and the tensor (got {r.code})", r.err)
    check(not os.path.exists(path("o.safetensors")), "nothing written")

    # NaN in a checkpoint whose checksums are made to match: refused on resume, naming the tensor.
    save = path("save")
    r = run(train_args(2, stage=1, extra=["--save-dir", save]), 2)
    check(r.code == 0, "a checkpoint to poison", r.err)
    ck = os.path.join(save, "step-2")
    rank0 = os.path.join(ck, "rank-00000.safetensors")
    blob = bytearray(read_bytes(rank0))
    header, _, _ = zt.parse_safetensors(bytes(blob))
    base = 8 + struct.unpack("<Q", blob[:8])[0]
    name = next(n for n in sorted(header) if "weight" in n)
    off = base + header[name]["data_offsets"][0]
    blob[off:off + 4] = struct.pack("<f", float("inf"))
    open(rank0, "wb").write(bytes(blob))
    manifest = json.loads(read_bytes(os.path.join(ck, "manifest.json")))
    for f in manifest["files"]:
        if f["rank"] == 0:
            f["crc32c"] = f"{crc32c(bytes(blob)):08x}"
    text = json.dumps(manifest, indent=2).encode()
    open(os.path.join(ck, "manifest.json"), "wb").write(text)
    open(os.path.join(ck, "manifest.crc32c"), "w").write(f"{crc32c(text):08x}  manifest.json\n")
    r = run(["ckpt", "inspect", ck])
    check(r.code == 0, "the poisoned checkpoint's checksums verify (the test rewrote them)", r.out + r.err)
    r = run(["train", "--data", tokens, "--steps", "4", "--micro-batch", "2", "--seq", "16", "--zero-stage", "1",
             "--resume", ck, "--out", path("o2.safetensors")], 2)
    check(r.code == 2 and "step-2" in r.err and "is inf" in r.err and "must hold finite" in r.err,
          f"Inf in a checkpoint: exit 2 naming the checkpoint and the tensor (got {r.code})", r.err)
    check(not os.path.exists(path("o2.safetensors")), "nothing written")

    # An lr that makes the weights Inf: neither --out nor a checkpoint is written; earlier ones stay.
    out, save2 = path("inf.safetensors"), path("save2")
    open(out, "wb").write(b"earlier")
    os.makedirs(save2)
    r = run(train_args(2, extra=["--save-dir", save2, "--save-every", "1"]), 2)
    check(r.code == 0, "an earlier checkpoint", r.err)
    args = train_args(1, extra=["--out", out, "--save-dir", save2])
    args[args.index("3e-3")] = "1e39"  # finite as a double, Inf as the fp32 the update uses
    r = run(args, 2)
    check(r.code == 1 and "not writing" in r.err, f"Inf weights are not written (exit {r.code})", r.err)
    check(read_bytes(out) == b"earlier", "the earlier --out file is intact")
    check(open(os.path.join(save2, "latest")).read() == "step-2\n", "the earlier checkpoint is still latest")
    check(sorted(d for d in os.listdir(save2) if d.startswith("step-")) == ["step-1", "step-2"],
          "no checkpoint of the Inf weights", str(os.listdir(save2)))

elif CASE == "stages":
    for ranks in (2, 4):
        for dtype in ("bf16", "fp16"):
            outs, metrics = {}, {}
            for stage in range(4):
                out, m = path(f"o{stage}.safetensors"), path(f"m{stage}.jsonl")
                r = run(train_args(4, stage=stage, dtype=dtype, extra=["--clip", "1.0", "--out", out, "--metrics", m]),
                        ranks)
                check(r.code == 0, f"W={ranks} {dtype} stage {stage} trains", r.err)
                outs[stage] = read_bytes(out)
                metrics[stage] = [(s["loss"], s["grad_norm"]) for s in records(m, "step")]
            for stage in (1, 2, 3):
                check(metrics[stage] == metrics[0], f"W={ranks} {dtype}: stage {stage}'s losses and norms equal stage 0's bit for bit",
                      f"{metrics[stage]}\n{metrics[0]}")
                check(outs[stage] == outs[0], f"W={ranks} {dtype}: stage {stage}'s --out equals stage 0's byte for byte")

elif CASE == "stages_llama":
    model = llama_init("llama")
    for ranks in (2, 4):
        outs, metrics = {}, {}
        for stage in range(4):
            out, m = path(f"lo{ranks}_{stage}"), path(f"lm{ranks}_{stage}.jsonl")
            r = run(train_args(4, stage=stage, dtype="bf16", model=model,
                               extra=["--clip", "1.0", "--out", out, "--metrics", m]), ranks)
            check(r.code == 0, f"llama W={ranks} bf16 stage {stage} trains", r.err)
            outs[stage] = dir_bytes(out)
            metrics[stage] = [(s["loss"], s["grad_norm"]) for s in records(m, "step")]
        for stage in (1, 2, 3):
            check(metrics[stage] == metrics[0], f"llama W={ranks} bf16: stage {stage}'s losses and norms equal stage 0's",
                  f"{metrics[stage]}\n{metrics[0]}")
            check(outs[stage] == outs[0], f"llama W={ranks} bf16: stage {stage}'s --out directory equals stage 0's byte for byte")
        if ranks == 2:
            whole = metrics[0]
    # The classifier in chunks of 5 tokens (micro-batches of 4 x 16), and the MLPs in chunks of 7 tokens
    # too (with checkpointing): the same bits at stages 0 and 3, and losses within rounding of the whole
    # micro-batch's (the weight gradients sum the chunks in turn).
    for name, chunks in (("--loss-chunk 5", ["--loss-chunk", "5"]),
                         ("--loss-chunk 5 --mlp-chunk 7", ["--loss-chunk", "5", "--mlp-chunk", "7",
                                                           "--activation-checkpointing"])):
        chunked = {}
        for stage in (0, 3):
            out, m = path(f"lc{stage}{len(chunks)}"), path(f"lc{stage}{len(chunks)}.jsonl")
            r = run(train_args(4, stage=stage, dtype="bf16", model=model,
                               extra=["--clip", "1.0", "--out", out, "--metrics", m] + chunks), 2)
            check(r.code == 0, f"llama W=2 bf16 stage {stage} {name} trains", r.err)
            chunked[stage] = (dir_bytes(out), [(s["loss"], s["grad_norm"]) for s in records(m, "step")])
        check(chunked[3] == chunked[0], f"llama W=2 bf16 {name}: stage 3 gives stage 0's losses, norms and --out bytes")
        check(len(chunked[0][1]) == len(whole) and
              all(abs(c[0] - w[0]) <= 1e-2 * w[0] for c, w in zip(chunked[0][1], whole)),
              f"llama W=2 bf16: {name}'s losses within 1% of the whole micro-batch's: {chunked[0][1]} vs {whole}")

elif CASE == "llama_modes":
    model = llama_init("llama")

    def llama_run(name, ranks, stage, dtype="fp32", extra=()):
        out, m = path(f"{name}-out"), path(f"{name}.jsonl")
        r = run(train_args(4, stage=stage, dtype=dtype, model=model, extra=["--clip", "1.0", "--out", out, "--metrics", m]
                           + list(extra)), ranks)
        check(r.code == 0, f"llama {name} trains", r.err)
        return dir_bytes(out), [(s["loss"], s["grad_norm"]) for s in records(m, "step")]

    base = llama_run("plain", 2, 3)
    nvme = path("nvme")
    os.makedirs(nvme, exist_ok=True)
    for name, extra in (("offload-optimizer-cpu", ["--offload-optimizer", "cpu"]),
                        ("offload-optimizer-nvme", ["--offload-optimizer", "nvme", "--nvme-path", nvme]),
                        ("offload-param-cpu", ["--offload-optimizer", "cpu", "--offload-param", "cpu"]),
                        ("checkpointing", ["--activation-checkpointing"]),
                        ("keep-gathered", ["--reshard-after-forward=false"]),
                        # the embeddings (8192 elements) and the head (8224) whole, the blocks (12352) sharded
                        ("persistent-embeddings", ["--param-persistence-threshold", "9000"]),
                        ("hpz", ["--hpz-partition-size", "2"])):
        got = llama_run(name, 2, 3, extra=extra)
        check(got[1] == base[1], f"llama {name}: losses and norms equal the plain stage-3 run's", f"{got[1]}\n{base[1]}")
        check(got[0] == base[0], f"llama {name}: --out equals the plain stage-3 run's byte for byte")
    full = llama_run("w4", 4, 3)
    hybrid = llama_run("w4-hybrid", 4, 3, extra=["--shard-group-size", "2"])
    check(all(abs(h[0] - f[0]) <= 1e-5 * f[0] and abs(h[1] - f[1]) <= 1e-4 * f[1] for h, f in zip(hybrid[1], full[1])),
          f"llama: hybrid sharding (groups of 2 of 4) trains as full sharding: {hybrid[1]} vs {full[1]}")
    out16, steps16 = llama_run("fp16", 2, 2, dtype="fp16")
    check(all(math.isfinite(l) for l, _ in steps16) and steps16[-1][0] < steps16[0][0],
          f"llama fp16 trains with loss scaling: {steps16}")
    head_unit = 3  # embed 0, blocks 1-2, the untied head 3
    for dtype, code in (("bf16", 1), ("fp16", 0)):
        r = run(train_args(4, stage=2, dtype=dtype, model=model, extra=[
            "--inject-overflow-step", "1", "--inject-overflow-rank", "1", "--inject-overflow-unit", str(head_unit)]), 2)
        check(r.code == code, f"llama {dtype}: an Inf in the head's gradient exits {code} (got {r.code})", r.err)
        if code == 1:
            check(any("unit 3 (norm, lm_head)" in e for e in one_line_error(r.err)),
                  "llama bf16: the message names the head's unit", r.err)

elif CASE == "shuffle":
    on = ["--shuffle", "on", "--seed", "3"]
    losses = {}
    for ranks, B, G in ((1, 8, 1), (4, 2, 1), (2, 2, 2)):
        m = path(f"m{ranks}.jsonl")
        r = run(train_args(5, B=B, G=G, stage=2, extra=on + ["--metrics", m]), ranks)
        check(r.code == 0, f"shuffled W={ranks} B={B} G={G}", r.err)
        losses[(ranks, B, G)] = [s["loss"] for s in records(m, "step")]
    ref = losses[(1, 8, 1)]
    for key, got in losses.items():
        check(all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)),
              f"the same global batches at W,B,G = {key}: losses {got} vs {ref}")
    for extra, what in ((["--shuffle", "off"], "in order"), (["--shuffle", "on", "--seed", "4"], "another seed")):
        m = path("other.jsonl")
        r = run(train_args(5, B=8, extra=extra + ["--metrics", m]), 1)
        check(r.code == 0, what, r.err)
        other = [s["loss"] for s in records(m, "step")]
        check(other[1:] != ref[1:], f"{what} reads other batches: {other} vs {ref}")
    # Resume inherits the order: 6 steps straight == 3 + resume 3, bit for bit.
    m_all, m_a, m_b, save = path("all.jsonl"), path("a.jsonl"), path("b.jsonl"), path("save")
    r = run(train_args(6, stage=1, extra=on + ["--metrics", m_all, "--out", path("all.safetensors")]), 2)
    check(r.code == 0, "6 steps straight", r.err)
    r = run(train_args(3, stage=1, extra=on + ["--metrics", m_a, "--save-dir", save]), 2)
    check(r.code == 0, "3 steps, saved", r.err)
    r = run(["train", "--data", tokens, "--steps", "6", "--micro-batch", "2", "--seq", "16", "--zero-stage", "1",
             "--lr", "3e-3", "--log-every", "0", "--resume", save, "--metrics", m_b, "--out", path("b.safetensors")], 2)
    check(r.code == 0, "resumed without --shuffle/--seed", r.err)
    straight = steps_of(m_all)
    got = {**steps_of(m_a), **steps_of(m_b)}
    check(all(got[s]["loss"] == straight[s]["loss"] and got[s]["grad_norm"] == straight[s]["grad_norm"] for s in range(6)),
          "the resumed run continues the shuffled order bit for bit")
    check(read_bytes(path("b.safetensors")) == read_bytes(path("all.safetensors")), "and ends with the same weights")
    for extra, needle in ((["--seed", "4"], "--seed 3"), (["--shuffle", "off"], "--shuffle on")):
        r = run(["train", "--data", tokens, "--steps", "6", "--micro-batch", "2", "--seq", "16", "--zero-stage", "1",
                 "--resume", save] + extra, 2)
        check(r.code == 2 and needle in r.err and "manifest.json" in r.err,
              f"a resume asking for {' '.join(extra)} exits 2 naming the checkpoint's order (got {r.code})", r.err)

elif CASE in ("bf16", "bf16_llama"):
    u = 2.0 ** -9
    demo = path("demo.safetensors" if CASE == "bf16" else "demo-llama")
    llama = ["--arch", "llama", "--kv-heads", "2"] if CASE == "bf16_llama" else []
    r = run(["init", "--out", demo, "--layers", "4", "--heads", "4", "--embd", "128", "--vocab", "256", "--ctx", "128",
             "--seed", "1337"] + llama)
    check(r.code == 0, "init the demo model", r.err)
    curves = {}
    for dtype in ("fp32", "bf16"):
        m = path(f"curve-{dtype}.jsonl")
        r = run(["train", "--init", demo, "--data", tokens, "--steps", "200", "--micro-batch", "4", "--seq", "128",
                 "--dtype", dtype, "--lr", "1e-3", "--clip", "1.0", "--log-every", "0", "--metrics", m], 2, timeout=500)
        check(r.code == 0, f"{dtype}: 200 steps of the demo model", r.err)
        steps = steps_of(m)
        curves[dtype] = [steps[i]["loss"] for i in range(200)]
    f, b = curves["fp32"], curves["bf16"]
    step_tol, window_tol = (10, 2.5) if CASE == "bf16" else (16, 4)
    worst = max(range(200), key=lambda i: abs(b[i] - f[i]) / f[i])
    rel = abs(b[worst] - f[worst]) / f[worst]
    print(f"bf16 against fp32 over 200 steps: worst step {worst} at {rel:.4%} (tolerance {step_tol * u:.2%})")
    check(rel <= step_tol * u,
          f"every step's bf16 loss within {step_tol}u of fp32's: step {worst} has {b[worst]} against {f[worst]}")
    for lo in range(0, 200, 50):
        mf, mb = sum(f[lo:lo + 50]) / 50, sum(b[lo:lo + 50]) / 50
        print(f"  steps {lo}-{lo + 49}: mean loss fp32 {mf:.4f}, bf16 {mb:.4f} ({abs(mb - mf) / mf:.4%})")
        check(abs(mb - mf) <= window_tol * u * mf,
              f"steps {lo}-{lo + 49}: bf16 mean loss {mb} within {window_tol}u of fp32's {mf}")
    check(b != f, "bf16 computes differently from fp32 (16-bit compute is in use)")

elif CASE == "bf16_states":
    # --bf16-optimizer-states against fp32 states: 300 steps of the demo model (the bf16 case's), AdamW, at
    # stage 2 on 2 ranks, fp32 compute (so the states are the only difference) and bf16 compute: every
    # 50-step window's mean loss and the last step's loss within 1% (issue 49's acceptance).
    demo = path("demo.safetensors")
    r = run(["init", "--out", demo, "--layers", "4", "--heads", "4", "--embd", "128", "--vocab", "256", "--ctx", "128",
             "--seed", "1337"])
    check(r.code == 0, "init the demo model", r.err)
    baselines = {}  # dtype -> the fp32 states' run, which both bf16 variants compare against (run once)
    for dtype, low in (("fp32", ["--bf16-optimizer-states"]), ("bf16", ["--bf16-optimizer-states"]),
                       ("bf16", ["--bf16-optimizer-states", "--bf16-master-weights"])):
        curves = dict(baselines.get(dtype, {}))
        for states in ("fp32", "bf16"):
            if states in curves:
                continue
            m = path(f"states-{dtype}-{len(low)}-{states}.jsonl")
            r = run(["train", "--init", demo, "--data", tokens, "--steps", "300", "--micro-batch", "4", "--seq", "128",
                     "--dtype", dtype, "--zero-stage", "2", "--lr", "1e-3", "--clip", "1.0", "--log-every", "0",
                     "--metrics", m] + (low if states == "bf16" else []), 2, timeout=500)
            check(r.code == 0, f"{dtype} compute, {states} states: 300 steps of the demo model", r.err)
            steps = steps_of(m)
            curves[states] = [steps[i]["loss"] for i in sorted(steps)]
            optim = [rec["live_bytes"]["optim"] for rec in zt.records(m, "memory")]
            curves[states + "_optim"] = optim
            if states == "fp32":
                baselines[dtype] = {k: curves[k] for k in ("fp32", "fp32_optim")}
        f, b = curves["fp32"], curves["bf16"]
        check(len(f) == len(b) == 300, f"{dtype}: 300 losses each ({len(f)}, {len(b)})")
        dtype = f"{dtype} ({' '.join(low)})"
        check(all(2 * ob == of for ob, of in zip(curves["bf16_optim"], curves["fp32_optim"])),
              f"{dtype}: bf16 states hold half the optim bytes: {curves['bf16_optim']} vs {curves['fp32_optim']}")
        for lo in range(0, 300, 50):
            mf, mb = sum(f[lo:lo + 50]) / 50, sum(b[lo:lo + 50]) / 50
            print(f"  {dtype}, steps {lo}-{lo + 49}: mean loss fp32 {mf:.4f}, low {mb:.4f} "
                  f"({(mb - mf) / mf:+.3%})")
            check(abs(mb - mf) <= 0.01 * mf, f"{dtype}: steps {lo}-{lo + 49}: bf16 states' mean loss {mb} within 1% of {mf}")
        check(abs(b[-1] - f[-1]) <= 0.01 * f[-1], f"{dtype}: the last loss {b[-1]} within 1% of {f[-1]}")
        check(b != f, f"{dtype}: the states' dtype changes the run (bf16 states are in use)")

elif CASE == "limits":
    for flag, value in (("--micro-batch", str(2 ** 40)), ("--accum", str(2 ** 33)), ("--seq", str(2 ** 30)),
                        ("--steps", str(2 ** 62)), ("--keep", str(2 ** 40))):
        args = train_args(2)
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value, "--save-dir", path("k")]
        r = run(args)
        check(r.code == 2 and flag in r.err and f"got {value}" in r.err, f"{flag} {value}: exit 2 naming the flag and its range (got {r.code})",
              r.err)
    # Within the bounds but beyond the machine: refused before anything is allocated.
    r = run(train_args(2, B=2 ** 20))
    check(r.code == 2 and "more than this machine's" in r.err and "--micro-batch 1048576" in r.err,
          f"a micro-batch whose activations exceed the machine's memory exits 2 (got {r.code})", r.err)
    cfg = path("ds.json")
    json.dump({"zero_optimization": {"stage": 3, "zeropp_loco_param": {"err_beta": 0.8}}}, open(cfg, "w"))
    r = run(train_args(2) + ["--config", cfg])
    check(r.code == 2 and "zero_optimization.zeropp_loco_param" in r.err and "ds.json" in r.err,
          f"a DeepSpeed config asking for an unimplemented feature exits 2 naming the key (got {r.code})", r.err)
else:
    sys.exit(f"unknown case {CASE}")
shutil.rmtree(work, ignore_errors=True)
print(f"{CASE}: all checks passed")
