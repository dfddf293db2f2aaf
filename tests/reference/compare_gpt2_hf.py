#!/usr/bin/python3
"""GPT-2's Hugging Face model directories (docs/reference/files.md#model-directories) against
transformers' GPT2LMHeadModel itself.

    compare_gpt2_hf.py --zerodp BUILD/zerodp --zerodp-testing BUILD/zerodp-testing --mpirun mpirun
                       --case NAME [--case NAME ...] [--keep]
    compare_gpt2_hf.py --list [--ranks]

Cases:
  logits  a random GPT-2 made and saved by transformers (save_pretrained, in shards with an index) is
          read by `zerodp-testing logits`: the logits of one full-context sequence within LOGITS_ATOL
          of transformers'; and a directory whose config.json asks for another function
          (layer_norm_epsilon 1e-6) is refused by `zerodp eval` with exit 2, naming the file and key.
  out     `zerodp train --init DIR` on 2 ranks (each reading its own shard of the directory) with
          `--out DIR` loads in GPT2LMHeadModel.from_pretrained with no missing, unexpected or
          mis-shaped tensor, its tensors equal, bit for bit, to those of the same run written as one
          GPT-2 file (lm_head tied to wte); `ckpt consolidate --hf` of that run's checkpoint writes the
          same bytes; a BF16 directory in shards read as --init gives a BF16 --out (its dtype, by
          default) in shards of --out-shard-size, each value the F32 run's rounded to BF16; and
          `zerodp init --arch gpt2 --out DIR/` loads too, equal to `zerodp init --out F.safetensors`.

Runs under the python of scripts/setup/transformers_venv.sh (as compare_llama.py, whose helpers it uses).
Exits 0 when every check passes, 1 listing every failed check.
"""
import json
import os
import sys

import compare_llama as cl  # beside this script, which Python puts first on sys.path
from zdptest import harness as zt  # tests/pylib, on PYTHONPATH (ctest sets it)
from zdptest.harness import Checks

# A GPT-2 small enough for seconds, large enough for several 20 KB shards (a block's c_fc is 16 KB).
CONFIG = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 32, "n_layer": 2, "n_head": 4,
          "vocab_size": 64, "n_positions": 32}
LOGITS_ATOL = 1e-5
STEPS = 3
CASES = {"logits": 1, "out": 2}  # name: ranks


def make_gpt2(c, work, name, seed, dtype="float32", shard=None, config=None):
    """A random GPT-2 directory written by transformers' save_pretrained (llama_ref.py make)."""
    path = os.path.join(work, f"{name}.config.json")
    with open(path, "w") as f:
        json.dump(config or CONFIG, f)
    out = os.path.join(work, name)
    argv = ["make", "--config", path, "--seed", seed, "--dtype", dtype, "--out", out]
    if shard:
        argv += ["--max-shard-size", shard]
    if not c.check(cl.ref(*argv) == 0, "llama_ref.py make (GPT-2) failed"):
        raise zt.Failed(1)
    return out


def index_files(model_dir):
    """The shard files an index lists (empty when there is no index)."""
    path = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return sorted(set(json.load(f)["weight_map"].values()))


def run_logits(args, work):
    import numpy as np
    c = Checks()
    model = make_gpt2(c, work, "model", 61, shard="20KB")
    c.check(len(index_files(model)) >= 2, f"save_pretrained --max-shard-size 20KB wrote {index_files(model)}: "
                                          "the case needs shards")
    ctx, vocab = CONFIG["n_positions"], CONFIG["vocab_size"]
    ids = np.random.default_rng(61).integers(0, vocab, ctx).tolist()
    tokens = ",".join(map(str, ids))
    mine, theirs = os.path.join(work, "zerodp_logits.bin"), os.path.join(work, "ref_logits.bin")
    code, text, secs = cl.run(zt.command(args.zerodp_testing, ["logits", "--model", model, "--tokens", tokens,
                                                                "--out", mine]), 120)
    if not c.check(code == 0, f"zerodp-testing logits exited {code}:\n{text[-3000:]}"):
        return c
    if not c.check(cl.ref("logits", "--model", model, "--tokens", tokens, "--out", theirs) == 0,
                   "llama_ref.py logits failed"):
        return c
    a, b = np.fromfile(mine, dtype="<f4"), np.fromfile(theirs, dtype="<f4")
    if not c.check(a.size == b.size == ctx * vocab, f"logits of {a.size} values (reference {b.size}), "
                                                    f"expected T·V = {ctx * vocab}"):
        return c
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).reshape(ctx, vocab)
    worst = float(diff.max()) if np.isfinite(a).all() else float("inf")
    c.note(f"logits: max abs difference {worst:.2e} (position {int(diff.max(1).argmax())}), "
           f"largest |logit| {float(np.abs(b).max()):.2f}")
    c.check(worst <= LOGITS_ATOL, f"logits differ by {worst:.2e} > {LOGITS_ATOL} (max abs)")

    # Another function than zerodp's: refused, not computed.
    other = make_gpt2(c, work, "eps", 62, config=dict(CONFIG, layer_norm_epsilon=1e-6))
    data = cl.make_tokens(work, 62)
    code, text, _ = cl.run(zt.command(args.zerodp, ["eval", "--model", other, "--data", data, "--tokens", "64",
                                                     "--seq", "16"]), 60)
    config_path = os.path.join(other, "config.json")
    c.check(code == 2, f"zerodp eval of a GPT-2 with layer_norm_epsilon 1e-6 exited {code}, expected 2:\n{text[-2000:]}")
    c.check(any(config_path in line and "layer_norm_epsilon" in line for line in text.splitlines()),
            f"no line names {config_path} and layer_norm_epsilon:\n{text[-2000:]}")
    return c


def state_of(path):
    """{name: tensor} of a model directory or file, names without the "transformer." prefix."""
    from zdptest import llama_ref
    return {k.removeprefix("transformer."): v for k, v in llama_ref.read_state(path).items()}


def check_loads_as(c, model_dir, want, dtype):
    """from_pretrained(model_dir) loads every tensor (llama_ref.load_model refuses missing, unexpected and
    mis-shaped ones), in `dtype`, each equal to want[name] (lm_head to wte: tied), exactly."""
    import torch
    from zdptest import llama_ref
    try:
        model = llama_ref.load_model(model_dir, dtype="auto")
    except llama_ref.InputError as e:
        c.check(False, f"transformers does not load {model_dir}: {e}")
        return
    c.check(type(model).__name__ == "GPT2LMHeadModel", f"{model_dir} loads as {type(model).__name__}")
    loaded = {k.removeprefix("transformer."): v for k, v in model.state_dict().items()}
    c.check("lm_head.weight" in loaded and loaded["lm_head.weight"].data_ptr() == loaded["wte.weight"].data_ptr(),
            f"{model_dir}: lm_head.weight is not tied to wte.weight in the model transformers loaded")
    loaded.pop("lm_head.weight", None)
    c.check(sorted(loaded) == sorted(want), f"{model_dir}: transformers' tensors {sorted(set(loaded) ^ set(want))} "
                                            "are not both in it and in the reference")
    bad = []
    for name, t in want.items():
        got = loaded.get(name)
        if got is None:
            continue
        if got.dtype != dtype or got.shape != t.shape or not torch.equal(got, t.to(dtype)):
            bad.append(f"{name} ({got.dtype} {list(got.shape)})")
    c.check(not bad, f"{model_dir}: tensors that differ from the reference's in {dtype}: {bad}")
    c.note(f"{model_dir}: loads in transformers as GPT2LMHeadModel, {len(want)} tensors equal in {dtype}")


def run_out(args, work):
    import torch
    c = Checks()
    init = make_gpt2(c, work, "init", 71)
    tokens = cl.make_tokens(work, 71)

    def train(init_dir, out, stage, extra=()):
        zargs = cl.train_args(init_dir, tokens, STEPS, 2, 1, stage, 1.0, ["--out", out, *extra])
        code, text, secs = cl.run(cl.mpirun(args, 2, zargs, 100), 120)
        c.note(f"zerodp train --out {os.path.basename(out)}: {secs:.1f} s, exit {code}")
        if not c.check(code == 0, f"zerodp train --out {out} exited {code}:\n{text[-4000:]}"):
            raise zt.Failed(1)

    # --out DIR (the form of --init, a directory) and --out F.safetensors of the same run: the same bits.
    out_dir, out_file, ckpt = (os.path.join(work, n) for n in ("out", "out.safetensors", "ckpt"))
    train(init, out_dir, 3, ["--save-dir", ckpt, "--save-every", str(STEPS)])
    train(init, out_file, 3)
    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    for key, want in (("model_type", "gpt2"), ("architectures", ["GPT2LMHeadModel"]), ("n_embd", 32),
                      ("n_layer", 2), ("n_head", 4), ("vocab_size", 64), ("n_positions", 32),
                      ("layer_norm_epsilon", 1e-5), ("tie_word_embeddings", True),
                      ("activation_function", "gelu_new"), ("torch_dtype", "float32")):
        c.check(config.get(key) == want, f"{out_dir}/config.json: {key} is {config.get(key)!r}, expected {want!r}")
    if cl.check_out_files(c, out_dir, "gpt2", "F32", 5_000_000_000, False):
        check_loads_as(c, out_dir, state_of(out_file), torch.float32)

    # train --out beside an --init directory brings the files transformers saved beside the model
    # (generation_config.json), so that the output loads as the input did.
    if os.path.exists(os.path.join(init, "generation_config.json")):
        c.check(os.path.exists(os.path.join(out_dir, "generation_config.json")),
                f"train --out: generation_config.json of --init {init} not copied")

    # ckpt consolidate --hf: the bytes of train --out (the model's files; a checkpoint has no tokenizer or
    # generation files to bring).
    consolidated = os.path.join(work, "consolidated")
    code, text, _ = cl.run(zt.command(args.zerodp, ["ckpt", "consolidate", ckpt, "--hf", consolidated]), 60)
    if c.check(code == 0, f"zerodp ckpt consolidate --hf exited {code}:\n{text[-2000:]}"):
        for name in sorted(os.listdir(consolidated)):
            with open(os.path.join(out_dir, name), "rb") as a, open(os.path.join(consolidated, name), "rb") as b:
                c.check(a.read() == b.read(), f"ckpt consolidate --hf: {name} differs from train --out's")

    # A BF16 --init in shards: --out is BF16 by default, in shards of --out-shard-size, each value the
    # F32 run's rounded to BF16.
    init16 = make_gpt2(c, work, "init16", 72, dtype="bfloat16", shard="20KB")
    c.check(len(index_files(init16)) >= 2, f"{init16}: no shards")
    out16, out16_file = os.path.join(work, "out16"), os.path.join(work, "out16.safetensors")
    train(init16, out16, 2, ["--out-shard-size", "20000"])
    train(init16, out16_file, 2)
    if cl.check_out_files(c, out16, "gpt2", "BF16", 20000, True):
        check_loads_as(c, out16, state_of(out16_file), torch.bfloat16)

    # zerodp init's directory (a path ending in '/') and its file: the same model.
    init_dir, init_file = os.path.join(work, "zinit") + "/", os.path.join(work, "zinit.safetensors")
    for out in (init_dir, init_file):
        code, text, _ = cl.run(zt.command(args.zerodp, ["init", "--out", out, "--layers", "2", "--heads", "4",
                                                         "--embd", "32", "--vocab", "64", "--ctx", "32",
                                                         "--seed", "7"]), 60)
        c.check(code == 0, f"zerodp init --out {out} exited {code}:\n{text[-2000:]}")
    if os.path.isdir(init_dir):
        check_loads_as(c, init_dir, state_of(init_file), torch.float32)
    return c


def main():
    args = cl.argument_parser(__doc__).parse_args()
    cases = cl.selected_cases(args, list(CASES), CASES.get, "compare_gpt2_hf.py")
    if cases is None:
        return 0
    for flag, path in (("--zerodp", args.zerodp), ("--zerodp-testing", args.zerodp_testing)):
        if not path or not os.access(path, os.X_OK):
            print(f"compare_gpt2_hf.py: FAIL: no executable at {flag} {path!r} (build the `{flag[2:]}` target)")
            return 1
    args.zerodp, args.zerodp_testing = os.path.abspath(args.zerodp), os.path.abspath(args.zerodp_testing)
    cl.need_transformers()
    return cl.run_cases(cases, lambda name, work: (run_logits if name == "logits" else run_out)(args, work),
                        "zerodp_gpt2_hf", args.keep)


if __name__ == "__main__":
    sys.exit(main())
