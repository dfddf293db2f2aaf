#!/usr/bin/python3
"""End-to-end checks of `zerodp` against the independent reference (ref_train.py) and docs/reference/.

    compare.py --zerodp BUILD/zerodp --mpirun mpirun --case NAME [--keep]
    compare.py --list

Training cases (TRAIN_CASES): tokenize the first 100 KB of data/tinyshakespeare.txt and `zerodp init`
a tiny GPT-2, run `mpirun -n W zerodp train` for 6 steps, run the reference (in float64, on the same
global batches), and compare: per-step loss within 1e-4 relative, grad_norm within 1e-3 relative, lr
equal, the final parameters within 1e-4 (max abs); the metrics file also holds one memory and one
traffic record per rank with metrics.md's keys, and their counts agree with what metrics.md says each category holds.

Bad-input cases (BAD_CASES): the CLI must exit with docs/reference/command-line.md's code (2 bad input, 3 over budget)
and a message naming what was wrong, within 30 seconds, and write no weights.

Exits 0 when every check passes, 1 listing every failed check.
"""
import argparse
import json
import os
import re
import struct
import sys
import time

from zdptest import harness as zt
from zdptest.case_driver import run_cases
from zdptest.harness import Checks, read_metrics

try:
    import numpy as np
    import torch  # noqa: F401  (ref_train needs it; fail here with a clear message)
except ImportError as e:
    sys.exit(f"compare.py: FAIL: {sys.executable} cannot import numpy/torch ({e}). The reference tests need "
             "Debian's python3-torch and python3-numpy under /usr/bin/python3: run scripts/setup/setup.sh.")
from zdptest import ref_train as rt  # noqa: E402  (after the check that torch imports)

HERE = os.path.dirname(os.path.abspath(__file__))

MODEL = {"layers": 2, "heads": 4, "embd": 64, "vocab": 256, "ctx": 64}
SEQ = 64
STEPS = 6
HYPER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "clip": 1.0}
LOSS_RTOL, NORM_RTOL, PARAM_ATOL = 1e-4, 1e-3, 1e-4
CATEGORIES = ["param", "grad", "master", "optim", "gathered", "comm", "act", "total"]
COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather", "broadcast"]
FAIL_WITHIN_S = 30

# name -> world, micro-batch, accum, stage, seed, extra zerodp flags, input variant
#   variant "wrap_raw": a raw-layout token file of 1001 tokens, so that data-order.md's positions wrap around
#   variant "bf16_hf": the initial weights in BF16 with Hugging Face names (`transformer.` prefix,
#   lm_head.weight, attn.bias buffers), the hyper-parameters only in a config.json beside the file
TRAIN_CASES = {
    "w1_b8_s0": dict(world=1, b=8, g=1, stage=0, seed=11),
    "w4_b2_s0": dict(world=4, b=2, g=1, stage=0, seed=12),
    "w4_b2_s1": dict(world=4, b=2, g=1, stage=1, seed=13),
    "w4_b2_s2": dict(world=4, b=2, g=1, stage=2, seed=14),
    "w4_b2_s3": dict(world=4, b=2, g=1, stage=3, seed=15),
    # Every tensor of this tiny model is under the default stage-3 persistence threshold (100k
    # elements), which may keep it whole on every rank (DeepSpeed's meaning): threshold 0 shards all.
    "w3_b2_s3": dict(world=3, b=2, g=1, stage=3, seed=16, flags=["--param-persistence-threshold", "0"]),
    "w2_b2_g2_s2": dict(world=2, b=2, g=2, stage=2, seed=17),
    "w2_b4_s3": dict(world=2, b=4, g=1, stage=3, seed=18, flags=["--param-persistence-threshold", "0"]),
    "w2_b2_g2_s1_wrap_raw": dict(world=2, b=2, g=2, stage=1, seed=19, variant="wrap_raw"),
    "w2_b2_s2_bf16_hf": dict(world=2, b=2, g=2, stage=2, seed=20, variant="bf16_hf"),
}
BAD_CASES = ["bad_truncated_safetensors", "bad_tensor_shape", "bad_token", "bad_zero_stage", "bad_config_type",
             "over_budget", "one_rank_fails"]


def run(cmd, timeout):
    """Runs a command (printed first) in the harness's environment for ranks; returns (exit code, stdout +
    stderr, seconds). Exit None on timeout."""
    r = zt.launch(cmd, timeout, echo=True)
    return r.code, r.text, r.secs


def mpirun(args, world, zerodp_args, timeout_s):
    return zt.command(args.zerodp, zerodp_args, world, mpirun=args.mpirun, mpi_timeout=timeout_s)


# ---- inputs ------------------------------------------------------------------------------------------

def prepare(args, work, seed):
    """Tokenizes the first 100 KB of the text and initialises the model; returns (tokens, init) paths."""
    return zt.make_inputs(args.zerodp, work, layers=MODEL["layers"], heads=MODEL["heads"], embd=MODEL["embd"],
                          vocab=MODEL["vocab"], ctx=MODEL["ctx"], seed=seed, text_bytes=100_000)


def make_variant(variant, work, tokens, init):
    """The alternative input files of a case's variant (see TRAIN_CASES)."""
    if variant == "wrap_raw":
        raw = os.path.join(work, "tokens_raw.bin")
        body = rt.read_tokens(tokens, MODEL["vocab"])[:1001]
        with open(raw, "wb") as f:
            f.write(body.astype("<u2").tobytes())
        return raw, init
    if variant == "bf16_hf":
        hf_dir = os.path.join(work, "hf")
        os.makedirs(hf_dir)
        tensors, meta = rt.read_safetensors(init)
        named = {"transformer." + k: v for k, v in tensors.items()}
        for i in range(MODEL["layers"]):
            n = MODEL["ctx"]
            named[f"transformer.h.{i}.attn.bias"] = np.tril(np.ones((n, n), np.float32)).reshape(1, 1, n, n)
            named[f"transformer.h.{i}.attn.masked_bias"] = np.float32([-1e4])
        named["lm_head.weight"] = tensors["wte.weight"]
        path = os.path.join(hf_dir, "model.safetensors")
        rt.write_safetensors(path, named, None, dtype="BF16")
        with open(os.path.join(hf_dir, "config.json"), "w") as f:
            json.dump({k: int(meta[k]) for k in rt.HPARAM_KEYS}, f)
        return tokens, path
    return tokens, init


def train_args(init, tokens, steps, b, g, extra=()):
    out = ["train", "--init", init, "--data", tokens, "--steps", str(steps), "--micro-batch", str(b),
           "--seq", str(SEQ), "--accum", str(g)]
    for k, v in HYPER.items():
        out += ["--" + k.replace("_", "-"), repr(v)]
    return out + list(extra)


# ---- training cases ----------------------------------------------------------------------------------

def rel_err(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def check_steps(c, records, ref_records, world, b, g):
    steps = [r for r in records if r.get("event") == "step"]
    c.check([r.get("step") for r in steps] == list(range(STEPS)),
            f"step records for steps 0..{STEPS - 1}, found {[r.get('step') for r in steps]}")
    worst = {"loss": 0.0, "grad_norm": 0.0}
    print(f"  {'step':>4} {'loss zerodp':>14} {'loss ref':>14} {'rel':>8} "
          f"{'norm zerodp':>12} {'norm ref':>12} {'rel':>8}")
    for mine, ref in zip(steps, ref_records):
        s = ref["step"]
        missing = [k for k in ("loss", "grad_norm", "lr", "tokens", "ms") if not isinstance(mine.get(k), (int, float))]
        if not c.check(not missing, f"step {s}: numeric keys {missing} missing from {mine}"):
            continue
        el, en = rel_err(mine["loss"], ref["loss"]), rel_err(mine["grad_norm"], ref["grad_norm"])
        worst["loss"], worst["grad_norm"] = max(worst["loss"], el), max(worst["grad_norm"], en)
        print(f"  {s:>4} {mine['loss']:>14.8f} {ref['loss']:>14.8f} {el:>8.1e} {mine['grad_norm']:>12.6f} "
              f"{ref['grad_norm']:>12.6f} {en:>8.1e}")
        c.check(el <= LOSS_RTOL, f"step {s}: loss {mine['loss']!r} vs reference {ref['loss']!r}: relative error "
                                 f"{el:.2e} > {LOSS_RTOL}")
        c.check(en <= NORM_RTOL, f"step {s}: grad_norm {mine['grad_norm']!r} vs reference {ref['grad_norm']!r}: "
                                 f"relative error {en:.2e} > {NORM_RTOL}")
        c.check(mine["lr"] == ref["lr"], f"step {s}: lr {mine['lr']!r} != {ref['lr']!r}")
        c.check(mine["tokens"] == world * g * b * SEQ, f"step {s}: tokens {mine['tokens']} != W·G·B·T = "
                                                       f"{world * g * b * SEQ}")
        c.check(mine["ms"] >= 0, f"step {s}: ms {mine['ms']} < 0")
    c.note(f"worst relative error: loss {worst['loss']:.2e}, grad_norm {worst['grad_norm']:.2e}")
    return worst


def check_memory_and_traffic(c, records, world, stage, numel, fully_sharded):
    """metrics.md: one memory and one traffic record per rank, with its keys; the counts agree with what each
    category holds in an fp32 run (P parameters: 4P bytes of parameters, of gradients, 8P of AdamW).
    metrics.md: the memory record also has host_bytes and nvme_bytes with the same keys, all zeros here (no
    offload)."""
    memory = {r.get("rank"): r for r in records if r.get("event") == "memory"}
    traffic = {r.get("rank"): r for r in records if r.get("event") == "traffic"}
    n_mem = sum(1 for r in records if r.get("event") == "memory")
    n_tra = sum(1 for r in records if r.get("event") == "traffic")
    c.check(n_mem == world and sorted(memory) == list(range(world)),
            f"one memory record per rank 0..{world - 1}: found {n_mem} for ranks {sorted(memory, key=str)}")
    c.check(n_tra == world and sorted(traffic) == list(range(world)),
            f"one traffic record per rank 0..{world - 1}: found {n_tra} for ranks {sorted(traffic, key=str)}")
    P4 = 4 * numel
    ok_keys = True
    for r, rec in sorted(memory.items(), key=lambda kv: str(kv[0])):
        for field in ("peak_bytes", "live_bytes", "host_bytes", "nvme_bytes"):
            got = rec.get(field)
            ok_keys &= c.check(isinstance(got, dict) and sorted(got) == sorted(CATEGORIES)
                               and all(isinstance(v, int) and v >= 0 for v in got.values()),
                               f"rank {r}: {field} has exactly the keys {CATEGORIES} as byte counts: {got}")
        for field in ("host_bytes", "nvme_bytes"):
            got = rec.get(field)
            c.check(isinstance(got, dict) and not any(got.values()),
                    f"rank {r}: {field} all zeros without offload: {got}")
    for r, rec in sorted(traffic.items(), key=lambda kv: str(kv[0])):
        got = rec.get("bytes_sent")
        ok_keys &= c.check(isinstance(got, dict) and sorted(got) == sorted(COLLECTIVES)
                           and all(isinstance(v, (int, float)) and v >= 0 for v in got.values()),
                           f"rank {r}: bytes_sent has exactly the keys {COLLECTIVES}: {got}")
    if not ok_keys or sorted(memory) != list(range(world)) or sorted(traffic) != list(range(world)):
        return
    peak = {r: memory[r]["peak_bytes"] for r in range(world)}
    live = {r: memory[r]["live_bytes"] for r in range(world)}
    for r in range(world):
        parts = sum(live[r][k] for k in CATEGORIES if k != "total")
        c.check(live[r]["total"] == parts, f"rank {r}: live total {live[r]['total']} != sum of categories {parts}")
        c.check(max(peak[r][k] for k in CATEGORIES if k != "total") <= peak[r]["total"]
                <= sum(peak[r][k] for k in CATEGORIES if k != "total"),
                f"rank {r}: peak total {peak[r]['total']} not between the largest category peak and their sum")
        c.check(all(peak[r][k] >= live[r][k] for k in CATEGORIES), f"rank {r}: a live count exceeds its peak")
        c.check(peak[r]["master"] == 0, f"rank {r}: master {peak[r]['master']} bytes in an fp32 run (metrics.md: 0)")
        if stage <= 2:
            c.check(peak[r]["param"] == P4, f"rank {r}: param peak {peak[r]['param']} != 4·P = {P4} "
                                            f"(stage {stage} keeps every parameter in fp32)")
        if stage <= 1:
            c.check(peak[r]["grad"] == P4, f"rank {r}: grad peak {peak[r]['grad']} != 4·P = {P4} "
                                           f"(stage {stage} keeps every gradient)")
        if stage == 0:
            c.check(peak[r]["optim"] == 2 * P4, f"rank {r}: optim peak {peak[r]['optim']} != 8·P = {2 * P4} "
                                                "(stage 0: all of AdamW's m and v)")
    # Sharded categories: the shards together hold everything, and (W > 1) no rank holds all of it.
    sharded = {"optim": (1, 2 * P4), "grad": (2, P4), "param": (3, P4)}
    for cat, (from_stage, full) in sharded.items():
        if stage < from_stage:
            continue
        together = sum(peak[r][cat] for r in range(world))
        c.check(together >= full, f"{cat}: the ranks' peaks add up to {together} < {full}, the whole of it")
        # Stage 3 may keep tensors under --param-persistence-threshold whole (DeepSpeed's meaning): only
        # with threshold 0 must every rank hold less than all of the parameters.
        if world > 1 and (cat != "param" or fully_sharded):
            c.check(max(peak[r][cat] for r in range(world)) < full,
                    f"{cat}: a rank holds {max(peak[r][cat] for r in range(world))} bytes, all of it, in stage {stage}")
    # Traffic (ring formulas of metrics.md): nothing moves with one rank; otherwise the gradients must be
    # reduced every step, and in stages 1-3 the updated shards gathered, at least once.
    sent = {r: traffic[r]["bytes_sent"] for r in range(world)}
    summary = ", ".join(f"{k} {sent[0][k]}" for k in COLLECTIVES)
    c.note(f"rank 0 bytes_sent: {summary}; P = {numel} parameters")
    if world == 1:
        for k in ("all_reduce", "reduce_scatter", "all_gather"):
            c.check(sent[0][k] == 0, f"{k}: {sent[0][k]} bytes sent with one rank (metrics.md: 2·(W−1)/W·n = 0)")
        return
    f = (world - 1) / world
    for r in range(world):
        reduced = sent[r]["all_reduce"] / (2 * f) + sent[r]["reduce_scatter"] / f  # n, in full-buffer bytes
        c.check(reduced >= 0.99 * STEPS * P4,
                f"rank {r}: all-reduce + reduce-scatter traffic covers {reduced:.0f} bytes of full buffers, "
                f"less than the {STEPS} steps × 4·P = {STEPS * P4} bytes of gradients")
        if stage >= 1:
            moved = reduced + sent[r]["all_gather"] / f + sent[r]["broadcast"]
            c.check(moved >= 0.99 * 2 * STEPS * P4,
                    f"rank {r}: collectives cover {moved:.0f} bytes of full buffers, less than gradients reduced "
                    f"and parameters gathered over {STEPS} steps ({2 * STEPS * P4})")


def check_weights(c, out_path, ref_final, atol=PARAM_ATOL, what="final parameters"):
    """command-line.md and files.md: --out holds every model.md tensor, F32, under its exact name;
    values within `atol` of the reference's. Returns the tensors read and the worst difference."""
    if not c.check(os.path.exists(out_path), f"--out {out_path} was not written"):
        return {}, None
    header, _, _ = zt.parse_safetensors(zt.read_bytes(out_path))
    dtypes = {e["dtype"] for e in header.values()}
    c.check(dtypes == {"F32"}, f"--out tensors are {sorted(dtypes)}, not all F32")
    c.check(sorted(header) == sorted(ref_final), f"--out names differ from model.md: extra "
            f"{sorted(set(header) - set(ref_final))}, missing {sorted(set(ref_final) - set(header))}")
    _, got = rt.load_gpt2(out_path, heads=MODEL["heads"])
    worst, worst_name = 0.0, None
    for name, ref in ref_final.items():
        if name not in got or got[name].shape != ref.shape:
            c.check(False, f"--out tensor {name}: missing or wrongly shaped")
            continue
        d = float(np.abs(got[name].astype(np.float64) - ref).max())
        if d > worst:
            worst, worst_name = d, name
    c.note(f"{what}: max abs difference {worst:.2e} (in {worst_name})")
    c.check(worst <= atol, f"{what} differ from the reference by {worst:.2e} > {atol} (worst tensor {worst_name})")
    return got, worst


def run_train_case(args, name, work):
    spec = TRAIN_CASES[name]
    world, b, g, stage = spec["world"], spec["b"], spec["g"], spec["stage"]
    c = Checks()
    tokens, init = prepare(args, work, spec["seed"])
    tokens, init = make_variant(spec.get("variant"), work, tokens, init)
    metrics, out = os.path.join(work, "metrics.jsonl"), os.path.join(work, "final.safetensors")
    zargs = train_args(init, tokens, STEPS, b, g, ["--zero-stage", str(stage), "--dtype", "fp32", "--metrics",
                                                   metrics, "--out", out] + spec.get("flags", []))
    code, text, secs = run(mpirun(args, world, zargs, 240), 300)
    c.note(f"zerodp train ran {secs:.1f} s, exit {code}")
    if not c.check(code == 0, f"zerodp train exited {code}:\n{text[-4000:]}"):
        return c
    # The reference, in float64 (the exact math to within 1e-15; what remains is zerodp's fp32 rounding).
    ref_args = rt.parse_args(["--init", init, "--data", tokens, "--steps", str(STEPS), "--micro-batch", str(b),
                              "--seq", str(SEQ), "--accum", str(g), "--world", str(world), "--double",
                              "--heads", str(MODEL["heads"]), "--threads", "1"]
                             + sum([["--" + k.replace("_", "-"), repr(v)] for k, v in HYPER.items()], []))
    start = time.monotonic()
    cfg, ref_records, ref_final = rt.run(ref_args)
    c.note(f"reference ran {time.monotonic() - start:.1f} s")
    c.check(cfg == {"n_layer": MODEL["layers"], "n_head": MODEL["heads"], "n_embd": MODEL["embd"],
                    "vocab_size": MODEL["vocab"], "n_ctx": MODEL["ctx"]}, f"hyper-parameters read: {cfg}")
    if not c.check(os.path.exists(metrics), f"--metrics {metrics} was not written"):
        return c
    records = read_metrics(metrics)
    check_steps(c, records, ref_records, world, b, g)
    numel = sum(int(np.prod(v.shape)) for v in ref_final.values())
    flags = spec.get("flags", [])
    fully_sharded = "--param-persistence-threshold" in flags and \
        flags[flags.index("--param-persistence-threshold") + 1] == "0"
    check_memory_and_traffic(c, records, world, stage, numel, fully_sharded)
    check_weights(c, out, ref_final)
    return c


# ---- bad inputs --------------------------------------------------------------------------------------

def expect_failure(c, args, zargs, world, code_wanted, texts, out_path, mpmd=None):
    """Runs zerodp on `world` ranks and checks the exit code, that each of `texts` appears in its output
    (a list of alternatives counts when one of them appears), the time taken, and that no weights were
    written. Returns the output."""
    if mpmd:  # one command line per group of ranks: [(ranks, zerodp args), ...]
        cmd = zt.mpmd_command(args.zerodp, mpmd, mpirun=args.mpirun, mpi_timeout=90)
    else:
        cmd = mpirun(args, world, zargs, 90)
    code, text, secs = run(cmd, 120)
    c.note(f"exit {code} after {secs:.1f} s")
    for line in text.splitlines():
        if "error" in line.lower():
            c.note("| " + line[:300])
    c.check(code == code_wanted, f"exit code {code}, expected {code_wanted}; output:\n{text[-3000:]}")
    # A rank that dies of a signal while the job is ending may still leave the exit code to MPI_Abort.
    crash = [line for line in text.splitlines() if "Signal:" in line or "exited on signal" in line]
    c.check(not crash, f"a rank crashed while failing: {crash[0] if crash else ''}; output:\n{text[-3000:]}")
    c.check(secs < FAIL_WITHIN_S, f"took {secs:.1f} s to exit, more than {FAIL_WITHIN_S} s")
    for want in texts:
        options = want if isinstance(want, list) else [want]
        c.check(any(o in text for o in options), f"the message does not name {' or '.join(map(repr, options))}")
    c.check(not os.path.exists(out_path), f"--out {out_path} was written by a failed run")
    return text


def names_budget_failure(line, budget):
    """Whether a message line names a metrics.md category, the budget, the word live, and two other byte counts
    (asked, live) that together exceed the budget, as they must for the allocation to be refused."""
    if str(budget) not in line or "live" not in line or not any(k in line for k in CATEGORIES[:-1]):
        return False
    numbers = [int(x) for x in re.findall(r"\d+", line.replace(str(budget), " ", 1))]
    return any(a + b > budget for i, a in enumerate(numbers) for b in numbers[i + 1:])


def run_bad_case(args, name, work):
    c = Checks()
    tokens, init = prepare(args, work, 7)
    out = os.path.join(work, "final.safetensors")
    metrics = os.path.join(work, "metrics.jsonl")
    common = ["--zero-stage", "1", "--dtype", "fp32", "--out", out, "--metrics", metrics]
    if name == "bad_truncated_safetensors":
        bad = os.path.join(work, "truncated.safetensors")
        with open(init, "rb") as f:
            blob = f.read()
        with open(bad, "wb") as f:
            f.write(blob[:len(blob) * 2 // 3])  # header intact, data cut short
        expect_failure(c, args, train_args(bad, tokens, 2, 2, 1, common), 2, 2, ["truncated.safetensors"], out)
    elif name == "bad_tensor_shape":
        bad = os.path.join(work, "transposed.safetensors")
        tensors, meta = rt.read_safetensors(init)
        tensors["h.1.mlp.c_fc.weight"] = tensors["h.1.mlp.c_fc.weight"].T  # [4C, C] where [C, 4C] is due
        rt.write_safetensors(bad, tensors, meta)
        text = expect_failure(c, args, train_args(bad, tokens, 2, 2, 1, common), 2, 2,
                              ["transposed.safetensors", "h.1.mlp.c_fc.weight"], out)
        c.check(any("64" in line and "256" in line and "c_fc" in line for line in text.splitlines()),
                "no line gives the expected and the found shape ([64, 256], [256, 64])")
    elif name == "bad_token":
        bad = os.path.join(work, "bad_tokens.bin")
        body = rt.read_tokens(tokens, MODEL["vocab"]).copy()
        body[len(body) - 10] = MODEL["vocab"]  # far beyond what 2 steps read: the whole file is checked
        header = [0] * 256
        header[0], header[1], header[2] = rt.LLMC_MAGIC, 1, len(body)
        with open(bad, "wb") as f:
            f.write(struct.pack("<256i", *header) + body.astype("<u2").tobytes())
        expect_failure(c, args, train_args(init, bad, 2, 2, 1, common), 2, 2, ["bad_tokens.bin"], out)
    elif name == "bad_zero_stage":
        zargs = train_args(init, tokens, 2, 2, 1, ["--zero-stage", "5", "--out", out])
        expect_failure(c, args, zargs, 2, 2, ["--zero-stage"], out)
    elif name == "bad_config_type":
        cfg = os.path.join(work, "ds_config.json")
        with open(cfg, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": "two"}}, f)
        zargs = ["train", "--init", init, "--data", tokens, "--steps", "2", "--seq", str(SEQ), "--config", cfg,
                 "--out", out]
        expect_failure(c, args, zargs, 2, 2, ["zero_optimization", "stage"], out)
    elif name == "over_budget":
        budget = 100_000  # the fp32 parameters alone are ~0.5 MB
        text = expect_failure(c, args, train_args(init, tokens, 2, 2, 1, common + ["--memory-budget",
                                                                                         str(budget)]),
                              2, 3, [CATEGORIES[:-1], str(budget)], out)
        c.check(any(names_budget_failure(line, budget) for line in text.splitlines()),
                "no line names the category, the bytes asked for, the bytes live and the budget")
    elif name == "one_rank_fails":
        # Rank 1 alone runs under a budget one byte short of its peak in a clean run: it fails at the
        # allocation that would reach that peak, in the middle of a step, while rank 0 goes on into a
        # collective that rank 1 never joins. Every rank must still end, promptly.
        ok = train_args(init, tokens, 2, 2, 1, ["--zero-stage", "3", "--dtype", "fp32"])
        code, text, _ = run(mpirun(args, 2, ok + ["--metrics", metrics], 120), 150)
        if not c.check(code == 0 and os.path.exists(metrics), f"the clean run failed (exit {code}):\n{text[-3000:]}"):
            return c
        peaks = {r["rank"]: r["peak_bytes"]["total"] for r in read_metrics(metrics) if r.get("event") == "memory"}
        budget = peaks[1] - 1
        c.note(f"rank 1 peaks at {peaks[1]} bytes in a clean run: its budget is {budget}")
        mpmd = [(1, ok + ["--out", out]), (1, ok + ["--out", out, "--memory-budget", str(budget)])]
        text = expect_failure(c, args, None, 2, 3, ["[rank 1]", str(budget)], out, mpmd=mpmd)
        c.check(any(names_budget_failure(line, budget) for line in text.splitlines()),
                "no line names the category, the bytes asked for, the bytes live and the budget")
    return c


# ---- driver ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerodp", help="the zerodp executable")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--case", action="append", default=[], help="case name (repeatable); 'all' for every one")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    if args.list:
        print("\n".join(list(TRAIN_CASES) + BAD_CASES))
        return 0
    if not args.zerodp or not os.access(args.zerodp, os.X_OK):
        print(f"compare.py: FAIL: no zerodp executable at {args.zerodp!r} (build the `zerodp` target)")
        return 1
    args.zerodp = os.path.abspath(args.zerodp)
    cases = list(TRAIN_CASES) + BAD_CASES if args.case == ["all"] else args.case
    unknown = [n for n in cases if n not in TRAIN_CASES and n not in BAD_CASES]
    if unknown or not cases:
        print(f"compare.py: unknown or no cases {unknown}; --list shows them")
        return 1
    def run_case(name, work):
        return run_train_case(args, name, work) if name in TRAIN_CASES else run_bad_case(args, name, work)

    return run_cases(cases, run_case, "zerodp_ref", args.keep)

if __name__ == "__main__":
    sys.exit(main())
