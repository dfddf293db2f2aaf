#!/usr/bin/python3
"""End-to-end checks of zerodp's Llama-family models (docs/reference/model.md) against Hugging Face
`transformers` (the reference of zdptest/llama_ref.py: LlamaForCausalLM / Qwen2ForCausalLM themselves, trained per
data-order.md, model.md and optimizer.md).

    compare_llama.py --zerodp BUILD/zerodp --zerodp-testing BUILD/zerodp-testing --mpirun mpirun
                     --case NAME [--case NAME ...] [--keep]
    compare_llama.py --list

Logits cases (LOGITS_CASES): a float32 model of a preset made by the reference; `zerodp-testing logits`
on one full-context sequence within LOGITS_ATOL (max abs) of transformers' logits.

Training cases (TRAIN_CASES): the same model directory and raw token file trained STEPS steps by
`mpirun -n W zerodp train` and by the reference: per-step loss within LOSS_ATOL (absolute), grad_norm
within NORM_RTOL (relative), lr equal, tokens W·G·B·T. zerodp's --out directory must hold what its
flags ask for (dtype, shards and an index that agree with them) and load in transformers with no
conversion, its tensors equal to the reference's trained ones within a tolerance of its dtype
(`llama_ref.py check-load`). The resume case trains in two runs, the second resharded onto another
world size and stage, and is compared with one uninterrupted reference run.

Bad-input cases (BAD_CASES): `zerodp train` on 2 ranks must exit 2 within FAIL_WITHIN_S seconds with
a message naming the file and the tensor (or key) at fault, and write nothing.

Runs under the python of scripts/setup/transformers_venv.sh (it re-runs itself there, making the venv on first
use; without one it FAILS saying why). Exits 0 when every check passes, 1 listing every failed check.
"""
import json
import os
import re
import sys
import time

from zdptest import harness as zt  # tests/pylib, on PYTHONPATH (ctest sets it)
from zdptest.case_driver import argument_parser, run_cases, selected_cases  # noqa: F401 (compare_gpt2_hf.py)
from zdptest.harness import Checks, read_metrics

SEQ = 16                                # T; the presets' context is 32
STEPS = 12
# eps 1e-6, not AdamW's usual 1e-8: AdamW's first step moves a weight by lr·g/(|g| + eps), about ±lr
# whatever |g| is, and a few of these weights' first gradients are ~1e-8 by cancellation (measured:
# -1.3e-8 where the median is 4.7e-3), where fp32's rounding (~1e-9) decides the step; with eps 1e-8
# one such weight ended 2.1e-4 from the reference after 12 steps while the losses agreed within 2e-6.
# At 1e-6 a rounding error δ in a gradient moves a weight by lr·δ/eps ≈ 1e-6 at most, and every gradient
# that is not near zero is still normalised as AdamW does it.
HYPER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.95, "eps": 1e-6, "weight_decay": 0.1}
LOSS_ATOL, NORM_RTOL = 2e-5, 1e-4
LOGITS_ATOL = 1e-5
OUT_ATOL = 1e-4                         # trained fp32 weights, zerodp against the reference
# Fewer than the 12·128 + 1 tokens the cases of W·G·B = 8 read: data-order.md's positions wrap around in them, in
# the middle of a sequence (1000 is no multiple of T).
TOKENS_IN_FILE = 1000
FAIL_WITHIN_S = 30
PRESETS = ["llama_gqa_untied", "qwen2_bias_tied", "llama3_rope_scaling", "qwen3_norm_tied", "mistral_window_untied"]

LOGITS_CASES = {f"logits_{p}": dict(preset=p, seed=31 + i) for i, p in enumerate(PRESETS)}

# name -> preset, world W, micro-batch B, accumulation G, stage, clip (0: off), seed of model and tokens,
# and what else the case is about:
#   init "bf16_shards": the --init directory in BF16, in shards of at most 10 KB with an index; --out
#     then defaults to BF16 (the --init directory's dtype)
#   out_dtype / out_shard: --out-dtype and --out-shard-size (an index must come out)
# Between them: every stage, every W from 1 to 4, every preset, G = 2, B = 1, clipping on (a clip below
# every step's norm, checked to have acted) and off. Gradient norms here are 2-4.
TRAIN_CASES = {
    "gqa_w1_b4_s0": dict(preset="llama_gqa_untied", world=1, b=4, g=1, stage=0, clip=0.5, seed=41),
    "qwen2_w2_b2_g2_s1": dict(preset="qwen2_bias_tied", world=2, b=2, g=2, stage=1, clip=0.5, seed=42),
    "rope_w3_b2_s2": dict(preset="llama3_rope_scaling", world=3, b=2, g=1, stage=2, clip=1.0, seed=43),
    "gqa_w4_b2_s3": dict(preset="llama_gqa_untied", world=4, b=2, g=1, stage=3, clip=0.5, seed=44),
    "qwen2_w4_b1_g2_s2": dict(preset="qwen2_bias_tied", world=4, b=1, g=2, stage=2, clip=1.0, seed=45),
    "gqa_w1_b2_g2_s3_noclip": dict(preset="llama_gqa_untied", world=1, b=2, g=2, stage=3, clip=0.0, seed=46),
    "rope_w2_b2_s3_bf16_sharded_init": dict(preset="llama3_rope_scaling", world=2, b=2, g=1, stage=3, clip=0.5,
                                            seed=47, init="bf16_shards"),
    "qwen2_w3_b2_s0_out_bf16_shards": dict(preset="qwen2_bias_tied", world=3, b=2, g=1, stage=0, clip=0.5, seed=48,
                                           out_dtype="bf16", out_shard=10000),
    # Qwen 3 (its per-head q/k norms) at every W and every stage.
    "qwen3_w1_b2_s0": dict(preset="qwen3_norm_tied", world=1, b=2, g=1, stage=0, clip=0.5, seed=50),
    "qwen3_w2_b2_g2_s1": dict(preset="qwen3_norm_tied", world=2, b=2, g=2, stage=1, clip=1.0, seed=51),
    "qwen3_w3_b2_s2": dict(preset="qwen3_norm_tied", world=3, b=2, g=1, stage=2, clip=0.5, seed=52),
    "qwen3_w4_b2_s3": dict(preset="qwen3_norm_tied", world=4, b=2, g=1, stage=3, clip=0.0, seed=53),
    # Instruction data (sft): random examples of 3-30 tokens, a prompt then targets, padded to T + 1
    # = 17 or truncated, the loss averaged over the global batch's targets; every W and every stage.
    "sft_gqa_w1_b2_s0": dict(preset="llama_gqa_untied", world=1, b=2, g=1, stage=0, clip=0.5, seed=60, sft=True),
    "sft_qwen2_w2_b2_g2_s1": dict(preset="qwen2_bias_tied", world=2, b=2, g=2, stage=1, clip=1.0, seed=61, sft=True),
    "sft_mistral_w3_b2_s2": dict(preset="mistral_window_untied", world=3, b=2, g=1, stage=2, clip=0.5, seed=62,
                                 sft=True),
    "sft_qwen3_w4_b1_g2_s3": dict(preset="qwen3_norm_tied", world=4, b=1, g=2, stage=3, clip=0.0, seed=63, sft=True),
    # Packed (--packing): several examples a sequence, each attending only to itself from position 0;
    # the reference runs each example of the step alone.
    "sft_packed_gqa_w1_b2_s0": dict(preset="llama_gqa_untied", world=1, b=2, g=1, stage=0, clip=0.5, seed=64,
                                    sft=True, packing=True),
    "sft_packed_qwen2_w2_b2_g2_s1": dict(preset="qwen2_bias_tied", world=2, b=2, g=2, stage=1, clip=1.0, seed=65,
                                         sft=True, packing=True),
    "sft_packed_mistral_w3_b2_s2": dict(preset="mistral_window_untied", world=3, b=2, g=1, stage=2, clip=0.5,
                                        seed=66, sft=True, packing=True),
    "sft_packed_qwen3_w4_b1_g2_s3": dict(preset="qwen3_norm_tied", world=4, b=1, g=2, stage=3, clip=0.0, seed=67,
                                         sft=True, packing=True),
    # Mistral (a sliding window of 5 keys in sequences of 16) at every W and every stage.
    "mistral_w1_b2_s0": dict(preset="mistral_window_untied", world=1, b=2, g=1, stage=0, clip=0.5, seed=54),
    "mistral_w2_b2_g2_s1": dict(preset="mistral_window_untied", world=2, b=2, g=2, stage=1, clip=1.0, seed=55),
    "mistral_w3_b2_s2": dict(preset="mistral_window_untied", world=3, b=2, g=1, stage=2, clip=0.5, seed=56),
    "mistral_w4_b2_s3": dict(preset="mistral_window_untied", world=4, b=2, g=1, stage=3, clip=0.0, seed=57),
}
# Saved after 6 steps on W=2 at stage 2 with B=3, resumed on W=3 at stage 3 with B=2 (the same global
# batch of 6 sequences, as a resume requires) for steps 6..11; a cosine schedule with warmup, so that
# the resumed run's rates must continue the first run's, not restart.
RESUME_CASE = "resume_qwen2_w2s2_to_w3s3"
RESUME = dict(preset="qwen2_bias_tied", seed=49, clip=0.5, first=dict(world=2, b=3, stage=2, steps=6),
              second=dict(world=3, b=2, stage=3),
              schedule=["--lr-schedule", "cosine", "--warmup-steps", "3", "--min-lr", "1e-4",
                        "--total-steps", str(STEPS)])
BAD_CASES = ["bad_missing_tensor", "bad_tensor_shape", "bad_index_escapes", "bad_model_type",
             "bad_out_not_model_dir"]


def all_cases():
    return list(LOGITS_CASES) + list(TRAIN_CASES) + [RESUME_CASE] + BAD_CASES


def ranks_of(name):
    """The ranks a case runs on at most (ctest's PROCESSORS); `--list --ranks` prints them."""
    if name in TRAIN_CASES:
        return TRAIN_CASES[name]["world"]
    if name == RESUME_CASE:
        return max(RESUME["first"]["world"], RESUME["second"]["world"])
    return 2 if name in BAD_CASES else 1


# ---- the reference, in this process ---------------------------------------------------------------

def need_transformers():
    """Re-runs this process in transformers_venv.sh's venv when needed; exits 1 saying FAIL if that cannot be."""
    from zdptest import transformers_env  # (not llama_ref: no import of torch before the re-run)
    try:
        transformers_env.ensure_transformers()  # returns here, replaces this process, or exits with a message
    except SystemExit as e:
        print(f"compare_llama.py: FAIL: the transformers reference is unavailable: {e.code}\n"
              f"(scripts/setup/transformers_venv.sh makes its venv; scripts/setup/setup.sh --tests runs it)", flush=True)
        sys.exit(1)


def ref(*argv):
    """`llama_ref.py ARGV` in this process (its main; torch imported once): its exit code. Prints the command."""
    from zdptest import llama_ref
    argv = [str(a) for a in argv]
    print("$ llama_ref.py " + " ".join(argv), flush=True)
    start = time.monotonic()
    code = llama_ref.main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    print(f"  (exit {code}, {time.monotonic() - start:.1f} s)", flush=True)
    return code


def make_model(c, work, name, preset, seed, dtype="float32", shard=None):
    out = os.path.join(work, name)
    argv = ["make", "--config", preset, "--seed", seed, "--dtype", dtype, "--out", out]
    if shard:
        argv += ["--max-shard-size", shard]
    if not c.check(ref(*argv) == 0, f"llama_ref.py make {preset} failed"):
        raise zt.Failed(1)
    return out


def make_tokens(work, seed, vocab=64):
    """A raw little-endian uint16 token file (no header) of TOKENS_IN_FILE random ids below `vocab`."""
    import numpy as np
    path = os.path.join(work, "tokens.bin")
    np.random.default_rng(seed).integers(0, vocab, TOKENS_IN_FILE).astype("<u2").tofile(path)
    return path


def make_instructions(work, seed, vocab=64, examples=40):
    """A token file of random instruction examples (3-30 tokens: a prompt, then targets) and its labels
    file beside it (files.md#instruction-data), written by the reference's own writer."""
    import numpy as np
    from zdptest import instruction_ref
    tokens, labels = instruction_ref.make_examples(np.random.default_rng(seed), vocab, examples)
    path = os.path.join(work, "sft.bin")
    tokens.astype("<u2").tofile(path)
    instruction_ref.write_labels(instruction_ref.labels_path(path), labels)
    return path


def hyper_flags(clip):
    out = []
    for k, v in HYPER.items():
        out += ["--" + k.replace("_", "-"), repr(v)]
    return out + ["--clip", repr(clip)]


# ---- running zerodp -------------------------------------------------------------------------------

def run(cmd, timeout):
    r = zt.launch(cmd, timeout, echo=True)
    return r.code, r.text, r.secs


def mpirun(args, world, zargs, timeout_s):
    return zt.command(args.zerodp, zargs, world, mpirun=args.mpirun, mpi_timeout=timeout_s)


def train_args(init, tokens, steps, b, g, stage, clip, extra=()):
    out = ["train", "--data", tokens, "--steps", str(steps), "--micro-batch", str(b), "--seq", str(SEQ),
           "--accum", str(g), "--zero-stage", str(stage), "--dtype", "fp32"]
    if init:
        out += ["--init", init]
    return out + hyper_flags(clip) + list(extra)


def ref_train(c, model, tokens, world, b, g, clip, work, extra=()):
    """The reference's STEPS steps: (step records, its --out directory)."""
    metrics, out = os.path.join(work, "ref_metrics.jsonl"), os.path.join(work, "ref_out")
    code = ref("train", "--model", model, "--data", tokens, "--steps", STEPS, "--world", world, "--micro-batch", b,
               "--seq", SEQ, "--accum", g, *hyper_flags(clip), *extra, "--metrics", metrics, "--out", out)
    if not c.check(code == 0, f"llama_ref.py train exited {code}"):
        raise zt.Failed(1)
    return read_metrics(metrics), out


# ---- comparisons ----------------------------------------------------------------------------------

def check_steps(c, records, ref_records, world, b, g, first_step=0):
    """metrics.md's step records of zerodp against the reference's, for the steps of `records` (from
    first_step on); returns the worst (loss abs, grad_norm rel) differences."""
    steps = [r for r in records if r.get("event") == "step"]
    c.check(bool(steps) and [r.get("step") for r in steps] == list(range(first_step, first_step + len(steps))),
            f"step records numbered from {first_step} on, found {[r.get('step') for r in steps]}")
    by_step = {r["step"]: r for r in ref_records}
    worst_loss = worst_norm = 0.0
    print(f"  {'step':>4} {'loss zerodp':>14} {'loss ref':>14} {'abs':>8} {'norm zerodp':>12} {'norm ref':>12} "
          f"{'rel':>8} {'lr':>10}")
    for mine in steps:
        s = mine.get("step")
        ref_rec = by_step.get(s)
        if not c.check(ref_rec is not None, f"step {s}: no such step in the reference"):
            continue
        missing = [k for k in ("loss", "grad_norm", "lr", "tokens") if not isinstance(mine.get(k), (int, float))]
        if not c.check(not missing, f"step {s}: numeric keys {missing} missing from {mine}"):
            continue
        dl = abs(mine["loss"] - ref_rec["loss"])
        dn = abs(mine["grad_norm"] - ref_rec["grad_norm"]) / max(abs(ref_rec["grad_norm"]), 1e-30)
        if not dl <= worst_loss:  # NaN becomes the worst
            worst_loss = dl
        if not dn <= worst_norm:
            worst_norm = dn
        print(f"  {s:>4} {mine['loss']:>14.8f} {ref_rec['loss']:>14.8f} {dl:>8.1e} {mine['grad_norm']:>12.6f} "
              f"{ref_rec['grad_norm']:>12.6f} {dn:>8.1e} {mine['lr']:>10.3g}")
        c.check(dl <= LOSS_ATOL, f"step {s}: loss {mine['loss']!r} vs reference {ref_rec['loss']!r}: "
                                 f"|difference| {dl:.2e} > {LOSS_ATOL}")
        c.check(dn <= NORM_RTOL, f"step {s}: grad_norm {mine['grad_norm']!r} vs reference {ref_rec['grad_norm']!r}: "
                                 f"relative difference {dn:.2e} > {NORM_RTOL}")
        c.check(mine["lr"] == ref_rec["lr"], f"step {s}: lr {mine['lr']!r} != reference {ref_rec['lr']!r}")
        c.check(mine["tokens"] == world * g * b * SEQ,
                f"step {s}: tokens {mine['tokens']} != W·G·B·T = {world * g * b * SEQ}")
    c.note(f"worst: loss {worst_loss:.2e} absolute, grad_norm {worst_norm:.2e} relative")
    return worst_loss, worst_norm


def check_clipped(c, ref_records, clip):
    """A case that sets a clip is meant to exercise it: some step's norm must be above it."""
    if clip > 0:
        above = sum(1 for r in ref_records if r["grad_norm"] > clip)
        c.note(f"clip {clip}: the norm is above it at {above} of {len(ref_records)} steps")
        c.check(above > 0, f"--clip {clip} never acted (every reference norm is below it): the case tests nothing")


def model_type(preset):
    from zdptest import llama_ref
    return llama_ref.CONFIGS[preset]["model_type"]


def tensor_bytes(entry):
    b, e = entry["data_offsets"]
    return e - b


def check_out_files(c, out, want_type, dtype, shard_size, want_index):
    """The files of zerodp's --out directory: config.json of model_type `want_type` with torch_dtype of
    the tensors; every tensor in `dtype` (safetensors' name); model.safetensors alone, or (want_index)
    shards of at most shard_size bytes of tensor data each with an index that maps exactly their tensors
    and totals their bytes."""
    if not c.check(os.path.isdir(out), f"--out {out} was not written"):
        return False
    try:
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        c.check(False, f"{out}/config.json: cannot read: {e}")
        return False
    c.check(config.get("model_type") == want_type, f"config.json model_type {config.get('model_type')!r}, "
                                                   f"expected {want_type!r}")
    torch_dtype = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[dtype]
    c.check(config.get("torch_dtype") == torch_dtype,
            f"config.json torch_dtype {config.get('torch_dtype')!r} while the tensors should be {torch_dtype}")
    files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    index_path = os.path.join(out, "model.safetensors.index.json")
    headers = {}
    for f in files:
        try:
            headers[f], _, _ = zt.parse_safetensors(zt.read_bytes(os.path.join(out, f)))
        except (OSError, ValueError, KeyError) as e:
            c.check(False, f"{out}/{f}: not a safetensors file: {e}")
            return False
    dtypes = {e["dtype"] for h in headers.values() for e in h.values()}
    c.check(dtypes == {dtype}, f"--out tensors are {sorted(dtypes)}, expected all {dtype}")
    if not want_index:
        c.check(files == ["model.safetensors"] and not os.path.exists(index_path),
                f"--out holds {files}{' and an index' if os.path.exists(index_path) else ''}, "
                "expected model.safetensors alone")
        return True
    if not c.check(os.path.exists(index_path), f"--out-shard-size {shard_size}: no model.safetensors.index.json "
                                               f"in {out} (files {files})"):
        return True
    with open(index_path) as f:
        index = json.load(f)
    weight_map = index.get("weight_map", {})
    c.check(sorted(set(weight_map.values())) == files,
            f"the index maps to {sorted(set(weight_map.values()))}, the directory holds {files}")
    c.check(len(files) >= 2, f"--out-shard-size {shard_size}: only {len(files)} shard")
    for f, h in headers.items():
        mapped = sorted(n for n, v in weight_map.items() if v == f)
        c.check(sorted(h) == mapped, f"{f} holds {sorted(h)}, the index maps {mapped} to it")
        size = sum(tensor_bytes(e) for e in h.values())
        c.check(size <= shard_size or len(h) == 1,
                f"{f}: {size} bytes of tensors in {len(h)} tensors, above --out-shard-size {shard_size}")
    total = sum(tensor_bytes(e) for h in headers.values() for e in h.values())
    c.check(index.get("metadata", {}).get("total_size") == total,
            f"the index's total_size {index.get('metadata', {}).get('total_size')} != {total} bytes of tensors")
    c.note(f"--out: {len(files)} shards of {', '.join(str(len(h)) for h in headers.values())} tensors, "
           f"{total} bytes in all")
    return True


def check_out_values(c, out, ref_out, dtype):
    """--out loads in transformers as stored (check-load: from_pretrained with torch_dtype auto, every
    tensor present and of its shape) and equals the reference's trained weights within the tolerance of
    its dtype; the worst difference is reported too. A BF16 tensor may differ from the float32 value by
    half a unit in its last place, 2^-8 of its magnitude at most."""
    from zdptest import llama_ref
    import torch
    ref_state = llama_ref.read_state(ref_out)
    atol = OUT_ATOL
    if dtype == "BF16":
        atol += max(float(t.abs().max()) for t in ref_state.values()) * 2.0 ** -8
    code = ref("check-load", "--model", out, "--against", ref_out, "--atol", repr(atol))
    c.check(code == 0, f"llama_ref.py check-load --model {out} --against {ref_out} --atol {atol:g} exited {code}")
    mine = llama_ref.read_state(out)
    worst, worst_name, worst_ratio = 0.0, None, 0.0
    for name, t in ref_state.items():
        if name not in mine:
            continue  # a tied head saved once: check-load judged it
        a, b = mine[name].to(torch.float64), t.to(torch.float64)
        d = float((a - b).abs().max())
        if not d <= worst:
            worst, worst_name = d, name
        if dtype == "BF16":
            # Element by element, which check-load's one atol for all tensors cannot do: each value
            # within half a BF16 unit of its own magnitude (plus the fp32 tolerance) of the reference's,
            # so that truncating instead of rounding, or a lost low byte, does not pass.
            ratio = float(((a - b).abs() / (b.abs() * 2.0 ** -8 + OUT_ATOL)).max())
            worst_ratio = max(worst_ratio, ratio)
            c.check(ratio <= 1.0, f"--out {name}: a BF16 value is {ratio:.2f} times further from the reference's "
                                  "than rounding to BF16 allows")
    c.note(f"--out against the reference's: max abs difference {worst:.2e} (in {worst_name}), atol {atol:.3g}"
           + (f"; worst element at {worst_ratio:.2f} of its BF16 rounding bound" if dtype == "BF16" else ""))
    return worst


# ---- cases -----------------------------------------------------------------------------------------

def run_logits_case(args, name, work):
    import numpy as np
    spec = LOGITS_CASES[name]
    c = Checks()
    model = make_model(c, work, "model", spec["preset"], spec["seed"])
    ctx = 32
    ids = np.random.default_rng(spec["seed"]).integers(0, 64, ctx).tolist()  # every position of the context
    tokens = ",".join(map(str, ids))
    mine, theirs = os.path.join(work, "zerodp_logits.bin"), os.path.join(work, "ref_logits.bin")
    code, text, secs = run(zt.command(args.zerodp_testing, ["logits", "--model", model, "--tokens", tokens,
                                                             "--out", mine]), 120)
    c.note(f"zerodp-testing logits: exit {code} after {secs:.1f} s")
    if not c.check(code == 0, f"zerodp-testing logits exited {code}:\n{text[-3000:]}"):
        return c
    if not c.check(ref("logits", "--model", model, "--tokens", tokens, "--out", theirs) == 0,
                   "llama_ref.py logits failed"):
        return c
    a, b = np.fromfile(mine, dtype="<f4"), np.fromfile(theirs, dtype="<f4")
    if not c.check(a.size == b.size == ctx * 64, f"logits of {a.size} values (reference {b.size}), expected "
                                                 f"T·V = {ctx * 64}"):
        return c
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).reshape(ctx, 64)
    worst = float(diff.max()) if np.isfinite(a).all() else float("inf")
    c.note(f"logits: max abs difference {worst:.2e} (position {int(diff.max(1).argmax())}), "
           f"largest |logit| {float(np.abs(b).max()):.2f}")
    c.check(worst <= LOGITS_ATOL, f"logits differ by {worst:.2e} > {LOGITS_ATOL} (max abs)")
    return c


def run_train_case(args, name, work):
    spec = TRAIN_CASES[name]
    world, b, g, stage, clip = spec["world"], spec["b"], spec["g"], spec["stage"], spec["clip"]
    c = Checks()
    if spec.get("init") == "bf16_shards":
        model = make_model(c, work, "model", spec["preset"], spec["seed"], dtype="bfloat16", shard="10KB")
        c.check(os.path.exists(os.path.join(model, "model.safetensors.index.json")),
                f"llama_ref.py make --max-shard-size 10KB wrote no index in {model}: the case needs shards")
        out_dtype = "BF16"  # --out's default: the --init directory's dtype
    else:
        model = make_model(c, work, "model", spec["preset"], spec["seed"])
        out_dtype = {"bf16": "BF16", "fp16": "F16", None: "F32"}[spec.get("out_dtype")]
    tokens = make_instructions(work, spec["seed"]) if spec.get("sft") else make_tokens(work, spec["seed"])
    metrics, out = os.path.join(work, "metrics.jsonl"), os.path.join(work, "out")
    extra = ["--metrics", metrics, "--out", out]
    if spec.get("out_dtype"):
        extra += ["--out-dtype", spec["out_dtype"]]
    if spec.get("out_shard"):
        extra += ["--out-shard-size", str(spec["out_shard"])]
    packing = ["--packing"] if spec.get("packing") else []
    code, text, secs = run(mpirun(args, world, train_args(model, tokens, STEPS, b, g, stage, clip, extra + packing),
                                  100), 120)
    c.note(f"zerodp train ran {secs:.1f} s, exit {code}")
    if not c.check(code == 0, f"zerodp train exited {code}:\n{text[-4000:]}"):
        return c
    ref_records, ref_out = ref_train(c, model, tokens, world, b, g, clip, work, packing)
    check_clipped(c, ref_records, clip)
    if c.check(os.path.exists(metrics), f"--metrics {metrics} was not written"):
        records = read_metrics(metrics)
        c.check(len([r for r in records if r.get("event") == "step"]) == STEPS, f"not {STEPS} step records")
        check_steps(c, records, ref_records, world, b, g)
    shard = spec.get("out_shard")
    if check_out_files(c, out, model_type(spec["preset"]), out_dtype, shard or 5_000_000_000, bool(shard)):
        check_out_values(c, out, ref_out, out_dtype)
    return c


def run_resume_case(args, work):
    spec = RESUME
    first, second, clip = spec["first"], spec["second"], spec["clip"]
    c = Checks()
    model = make_model(c, work, "model", spec["preset"], spec["seed"])
    tokens = make_tokens(work, spec["seed"])
    ckpt = os.path.join(work, "ckpt")
    m1, m2, out = (os.path.join(work, n) for n in ("metrics1.jsonl", "metrics2.jsonl", "out"))
    zargs = train_args(model, tokens, first["steps"], first["b"], 1, first["stage"], clip,
                       spec["schedule"] + ["--save-dir", ckpt, "--metrics", m1])
    code, text, secs = run(mpirun(args, first["world"], zargs, 100), 120)
    c.note(f"first run (W={first['world']}, stage {first['stage']}): {secs:.1f} s, exit {code}")
    if not c.check(code == 0, f"the first run exited {code}:\n{text[-4000:]}"):
        return c
    saved = os.path.join(ckpt, f"step-{first['steps']}")
    found = sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else "no --save-dir at all"
    if not c.check(os.path.isdir(saved), f"no checkpoint {saved}: found {found}"):
        return c
    # No --init: the model comes from the checkpoint alone, --out's config.json included.
    zargs = train_args(None, tokens, STEPS, second["b"], 1, second["stage"], clip,
                       spec["schedule"] + ["--resume", ckpt, "--metrics", m2, "--out", out])
    code, text, secs = run(mpirun(args, second["world"], zargs, 100), 120)
    c.note(f"resumed run (W={second['world']}, stage {second['stage']}): {secs:.1f} s, exit {code}")
    if not c.check(code == 0, f"the resumed run exited {code}:\n{text[-4000:]}"):
        return c
    # One uninterrupted reference run of all the steps (its global batch is both runs': W·B = 6).
    ref_records, ref_out = ref_train(c, model, tokens, first["world"], first["b"], 1, clip, work,
                                     extra=spec["schedule"])
    check_clipped(c, ref_records, clip)
    lrs = sorted({r["lr"] for r in ref_records})
    c.check(len(lrs) >= 6, f"the schedule gives only the rates {lrs}: the case means them to vary")
    worst = [0.0, 0.0]
    for path, part, first_step, count in ((m1, first, 0, first["steps"]),
                                          (m2, second, first["steps"], STEPS - first["steps"])):
        if not c.check(os.path.exists(path), f"--metrics {path} was not written"):
            continue
        records = read_metrics(path)
        n = len([r for r in records if r.get("event") == "step"])
        c.check(n == count, f"{os.path.basename(path)}: {n} step records, expected {count}")
        got = check_steps(c, records, ref_records, part["world"], part["b"], 1, first_step=first_step)
        worst = [max(worst[0], got[0]), max(worst[1], got[1])]
    c.note(f"both runs: worst loss {worst[0]:.2e} absolute, grad_norm {worst[1]:.2e} relative")
    if check_out_files(c, out, model_type(spec["preset"]), "F32", 5_000_000_000, False):
        check_out_values(c, out, ref_out, "F32")
    return c


def tree(path):
    """Every path under `path` (relative) with its size, to tell whether a failed run wrote anything."""
    found = {}
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            p = os.path.join(root, n)
            found[os.path.relpath(p, path)] = os.path.getsize(p) if os.path.isfile(p) else None
    return found


def run_bad_case(args, name, work):
    import safetensors.torch as st
    c = Checks()
    inputs = os.path.join(work, "inputs")  # what the run may read; `out` is its only place to write
    os.makedirs(inputs)
    model = make_model(c, inputs, "model", "llama_gqa_untied", 51)
    tokens = make_tokens(inputs, 51)
    weights = os.path.join(model, "model.safetensors")
    out = os.path.join(work, "out")
    expect = []  # every entry must appear in one line of the output: a list of alternatives counts when one does
    if name == "bad_missing_tensor":
        victim = "model.layers.1.mlp.down_proj.weight"
        state = st.load_file(weights)
        del state[victim]
        st.save_file(state, weights, metadata={"format": "pt"})
        expect = [victim, [model, weights]]
    elif name == "bad_tensor_shape":
        victim = "model.layers.0.self_attn.k_proj.weight"  # [16, 32] ([out, in]: 2 key/value heads of 8)
        state = st.load_file(weights)
        state[victim] = state[victim].t().contiguous()
        st.save_file(state, weights, metadata={"format": "pt"})
        expect = [victim, "model.safetensors"]
    elif name == "bad_index_escapes":
        # Two shards, one of them outside the directory: it exists and holds the right tensor, so the
        # only thing wrong is where the index points.
        state = st.load_file(weights)
        os.remove(weights)
        victim = "model.norm.weight"
        inside = {k: v for k, v in state.items() if k != victim}
        st.save_file(inside, os.path.join(model, "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
        st.save_file({victim: state[victim]}, os.path.join(inputs, "x.safetensors"), metadata={"format": "pt"})
        weight_map = {k: "model-00001-of-00002.safetensors" for k in inside}
        weight_map[victim] = "../x.safetensors"
        with open(os.path.join(model, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(v.numel() * 4 for v in state.values())},
                       "weight_map": weight_map}, f, indent=2)
        expect = ["model.safetensors.index.json", "../x.safetensors"]
    elif name == "bad_model_type":
        path = os.path.join(model, "config.json")
        with open(path) as f:
            config = json.load(f)
        config["model_type"], config["architectures"] = "gemma2", ["Gemma2ForCausalLM"]
        with open(path, "w") as f:
            json.dump(config, f, indent=2)
        expect = ["config.json", "gemma2"]
    elif name == "bad_out_not_model_dir":
        os.makedirs(out)
        with open(os.path.join(out, "notes.txt"), "w") as f:
            f.write("someone's notes, not a model\n")
        expect = [out]
    before = tree(work)
    zargs = train_args(model, tokens, 2, 2, 1, 1, 1.0, ["--out", out])
    code, text, secs = run(mpirun(args, 2, zargs, 90), 120)
    c.note(f"exit {code} after {secs:.1f} s")
    for line in text.splitlines():
        if "error" in line.lower() and "ORTE_ERROR_LOG" not in line:
            c.note("| " + line[:300])
    c.check(code == 2, f"exit code {code}, expected 2; output:\n{text[-3000:]}")
    crash = [line for line in text.splitlines() if "Signal:" in line or "exited on signal" in line]
    c.check(not crash, f"a rank crashed while failing: {crash[0] if crash else ''}")
    c.check(secs < FAIL_WITHIN_S, f"took {secs:.1f} s to exit, more than {FAIL_WITHIN_S} s")
    lines = [line for line in text.splitlines() if "error" in line.lower()]
    c.check(any(all(any(o in line for o in (w if isinstance(w, list) else [w])) for w in expect) for line in lines),
            "no error line names all of " + ", ".join(" or ".join(map(repr, w)) if isinstance(w, list) else repr(w)
                                                       for w in expect))
    if name == "bad_tensor_shape":
        # The found and the expected shape, however they are spelled: 32 then 16, and 16 then 32.
        def shapes_named(line):
            numbers = ",".join(re.findall(r"\d+", line.split(victim, 1)[-1]))
            return "32,16" in numbers and "16,32" in numbers
        c.check(any(victim in line and shapes_named(line) for line in lines),
                "no error line gives the shape found ([32, 16]) and the shape expected ([16, 32])")
    after = tree(work)
    changed = sorted(p for p in set(before) | set(after) if before.get(p, -1) != after.get(p, -1))
    c.check(not changed, f"the failed run wrote or changed {changed}")
    return c


# ---- driver ------------------------------------------------------------------------------------------

def main():
    args = argument_parser(__doc__).parse_args()
    cases = selected_cases(args, all_cases(), ranks_of, "compare_llama.py")
    if cases is None:
        return 0
    for flag, path, needed in (("--zerodp", args.zerodp, any(n not in LOGITS_CASES for n in cases)),
                               ("--zerodp-testing", args.zerodp_testing, any(n in LOGITS_CASES for n in cases))):
        if needed and (not path or not os.access(path, os.X_OK)):
            print(f"compare_llama.py: FAIL: no executable at {flag} {path!r} (build the `{flag[2:]}` target)")
            return 1
    args.zerodp = os.path.abspath(args.zerodp) if args.zerodp else None
    args.zerodp_testing = os.path.abspath(args.zerodp_testing) if args.zerodp_testing else None
    need_transformers()

    def run_case(name, work):
        if name in LOGITS_CASES:
            return run_logits_case(args, name, work)
        if name in TRAIN_CASES:
            return run_train_case(args, name, work)
        if name == RESUME_CASE:
            return run_resume_case(args, work)
        return run_bad_case(args, name, work)
    return run_cases(cases, run_case, "zerodp_llama", args.keep)


if __name__ == "__main__":
    sys.exit(main())
