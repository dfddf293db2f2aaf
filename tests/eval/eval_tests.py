#!/usr/bin/python3
"""End-to-end checks of datasets in shards, the validation loss during training and `zerodp eval`
(docs/reference/data-order.md#validation), through mpirun.

usage: eval_tests.py ZERODP CASE
  splits   val_loss the same (within 2e-5) at (W=1,B=4), (W=2,B=2), (W=3,B=1), (W=2,B=1) x stages 0-3
           (fp32; every run trains the same global batch of 12 sequences, G making up the rest, and
           evaluates E = 1000 tokens: 31 windows, divisible by no W·B); `zerodp eval` on each --out file
           prints the run's last val_loss; an independent PyTorch computation (tests/pylib/zdptest/ref_train.py's
           GPT-2, in float64) of the val loss of the final weights agrees within 2e-5; training with
           --val-data gives the same bits (losses, grad norms, --out bytes, traffic, memory) as without it
  shards   a token file split into 3 shards of uneven sizes (one of them uint32) trains to the same bits
           as the file (losses, --out bytes), in order and shuffled, read as a directory and as a glob;
           the validation loss of shards equals the file's
  variants hybrid sharding, parameter offload (cpu, nvme), units kept gathered, activation checkpointing
           at stage 3: training the same bits, traffic and memory with --val-data as without, the val loss
           the plain run's
  resume   a run resumed from a checkpoint evaluates at the same steps, to the same bits
  dtypes   bf16 and fp16 runs evaluate in their compute dtype: the same at stages 0 and 3, within 2% of fp32's
  choices  `zerodp eval --choices` picks the ending PyTorch's mean ending loss picks, item by item
  usage    bad flags and inputs exit 2 naming what is wrong
Needs /usr/bin/python3 with torch and numpy (Debian's python3-torch) for the reference computations."""
import json
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

HERE = os.path.dirname(os.path.abspath(__file__))

ZERODP, CASE = zt.driver_args(__doc__)


def run(args, ranks=None, timeout=180):
    return zt.run(ZERODP, args, ranks, timeout)


tmp = zt.workdir("eval")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=2, embd=32, vocab=256, ctx=32, seed=3, text_bytes=40000)
# The validation text: another part of the corpus.
val_text = os.path.join(tmp, "val.txt")
with open(zt.CORPUS, "rb") as f:
    f.seek(200000)
    data = f.read(4000)
with open(val_text, "wb") as g:
    g.write(data)
val = os.path.join(tmp, "val.bin")
check(run(["tokenize", "--text", val_text, "--out", val]).code == 0, "tokenize the validation text")

T = 32
E = 1000  # 31 windows of 32
SPLITS = [(1, 4, 3), (2, 2, 3), (3, 1, 4), (2, 1, 6)]  # (W, B, G): 12 sequences a step each


def train(ranks, extra, name, B=2, G=1, stage=0, steps=3):
    m, out = os.path.join(tmp, f"{name}.jsonl"), os.path.join(tmp, f"{name}.safetensors")
    args = ["train", "--init", init, "--data", tokens, "--steps", str(steps), "--micro-batch", str(B), "--accum",
            str(G), "--seq", str(T), "--zero-stage", str(stage), "--lr", "3e-3", "--metrics", m, "--out", out] + extra
    r = run(args, ranks)
    check(r.code == 0, f"{name}: trains", r.text[-3000:])
    return m, out, r


def steps_without_time(m):
    return [{k: v for k, v in s.items() if k not in ("ms", "comm_wait_ms")} for s in records(m, "step")]


def torch_val_loss(model_path, val_path, e_tokens, seq):
    """The validation loss (docs/reference/data-order.md#validation) of a model file, computed in float64 by the reference GPT-2."""
    import numpy as np
    import torch
    from zdptest import ref_train
    cfg, weights = ref_train.load_gpt2(model_path)
    p = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}
    toks = np.array(zt.read_token_file(val_path), dtype=np.int64)
    K = e_tokens // seq
    inputs = torch.tensor(np.stack([toks[q * seq:q * seq + seq] for q in range(K)]))
    targets = torch.tensor(np.stack([toks[q * seq + 1:q * seq + seq + 1] for q in range(K)]))
    with torch.no_grad():
        return ref_train.token_losses(p, cfg, inputs, targets).mean().item()


if CASE == "splits":
    finals, evals = {}, {}
    for W, B, G in SPLITS:
        for stage in range(4):
            name = f"w{W}_b{B}_g{G}_s{stage}"
            m, out, _ = train(W, ["--val-data", val, "--eval-every", "2", "--eval-tokens", str(E)], name, B, G, stage)
            ev = records(m, "eval")
            check([e["step"] for e in ev] == [2, 3] and all(e["tokens"] == 31 * T for e in ev),
                  f"{name}: evals after steps 2 and 3 (the last), over 31 windows of {T} tokens", str(ev))
            evals[name] = [e["val_loss"] for e in ev]
            finals[name] = out
    ref = evals["w1_b4_g3_s0"]
    worst = max(abs(a - b) for v in evals.values() for a, b in zip(v, ref))
    check(worst <= 2e-5, f"val_loss agrees across W, B, G and stages 0-3 within 2e-5 (worst {worst:.3g})",
          json.dumps(evals, indent=1))
    worst_cli, worst_ref = 0.0, 0.0
    for name, out in finals.items():
        r = run(["eval", "--model", out, "--data", val, "--tokens", str(E), "--seq", str(T), "--micro-batch", "3"])
        check(r.code == 0 and r.out.startswith("val_loss ") and f"tokens {31 * T}" in r.out, f"{name}: zerodp eval",
              r.text)
        worst_cli = max(worst_cli, abs(float(r.out.split()[1]) - evals[name][-1]))
    check(worst_cli <= 2e-5, f"`zerodp eval` of each --out file prints the run's last val_loss within 2e-5 "
          f"(worst {worst_cli:.3g})")
    for name in ("w1_b4_g3_s0", "w3_b1_g4_s3"):
        ref_loss = torch_val_loss(finals[name], val, E, T)
        worst_ref = max(worst_ref, abs(ref_loss - evals[name][-1]))
        print(f"  {name}: zerodp {evals[name][-1]:.9f}, PyTorch float64 {ref_loss:.9f}")
    check(worst_ref <= 2e-5, f"PyTorch's val loss of the final weights agrees within 2e-5 (worst {worst_ref:.3g})")
    # Training is untouched by evaluation: the same bits with and without --val-data.
    for stage in range(4):
        m0, o0, _ = train(2, [], f"plain_s{stage}", 2, 1, stage)
        m1, o1, _ = train(2, ["--val-data", val, "--eval-every", "1", "--eval-tokens", str(E)], f"val_s{stage}", 2, 1,
                          stage)
        check(steps_without_time(m0) == steps_without_time(m1), f"stage {stage}: the same losses and norms with --val-data")
        check(zt.read_bytes(o0) == zt.read_bytes(o1), f"stage {stage}: the same --out bytes with --val-data")
        check(records(m0, "traffic") == records(m1, "traffic"), f"stage {stage}: the same traffic (eval's is not counted)")
        check(records(m0, "memory") == records(m1, "memory"), f"stage {stage}: the same memory peaks")

elif CASE == "variants":
    # What stage 3 gathers differently (hybrid groups, parameters offloaded to host memory or NVMe, units
    # kept gathered from forward to backward, recomputed blocks): evaluation still leaves training's bits,
    # traffic and memory as without it, and gives the plain run's val loss to rounding.
    variants = {"hybrid": (4, ["--shard-group-size", "2"]),
                "offload_cpu": (2, ["--offload-param", "cpu", "--offload-optimizer", "cpu"]),
                "offload_nvme": (2, ["--offload-param", "nvme", "--offload-optimizer", "cpu", "--nvme-path", tmp]),
                "keep_gathered": (3, ["--reshard-after-forward=false", "--max-live-parameters", "3000"]),
                "checkpointing": (2, ["--activation-checkpointing"])}
    m, _, _ = train(2, ["--val-data", val, "--eval-tokens", str(E)], "plain", 2, 1, 3, steps=2)
    plain = records(m, "eval")[-1]["val_loss"]
    for name, (W, extra) in variants.items():
        B = 4 // W if W != 3 else 1
        m0, o0, _ = train(W, extra, f"{name}_without", B, 1, 3, steps=2)
        m1, o1, _ = train(W, extra + ["--val-data", val, "--eval-every", "1", "--eval-tokens", str(E)], f"{name}_with", B,
                          1, 3, steps=2)
        check(steps_without_time(m0) == steps_without_time(m1) and zt.read_bytes(o0) == zt.read_bytes(o1),
              f"{name}: the same losses and --out bytes with --val-data")
        check(records(m0, "traffic") == records(m1, "traffic") and records(m0, "memory") == records(m1, "memory"),
              f"{name}: the same traffic and memory with --val-data")
        if W != 3:  # W = 3 trains another global batch
            got = records(m1, "eval")[-1]["val_loss"]
            check(abs(got - plain) <= 2e-5, f"{name}: the plain run's val loss within 2e-5 ({got} vs {plain})")

elif CASE == "shards":
    toks = zt.read_token_file(tokens)
    shard_dir = os.path.join(tmp, "shards")
    os.makedirs(shard_dir)
    cuts = [0, 7001, 7013, len(toks)]  # uneven: 7001, 12 and the rest
    for i in range(3):
        zt.write_token_file(os.path.join(shard_dir, f"part_{i:06d}.bin"), toks[cuts[i]:cuts[i + 1]],
                            4 if i == 1 else 2)
    with open(os.path.join(shard_dir, "README"), "w") as f:
        f.write("not a shard")
    vals = zt.read_token_file(val)
    val_dir = os.path.join(tmp, "val_shards")
    os.makedirs(val_dir)
    zt.write_token_file(os.path.join(val_dir, "v_b.bin"), vals[500:], 4)
    zt.write_token_file(os.path.join(val_dir, "v_a.bin"), vals[:500], 2)  # a is read first, whatever was written first
    for shuffle in ("off", "on"):
        common = ["--shuffle", shuffle, "--seed", "11", "--eval-tokens", str(E)]
        m0, o0, _ = train(2, common + ["--val-data", val], f"file_{shuffle}", 2, 2, 2, steps=8)
        for how, spec, val_spec in (("directory", shard_dir, val_dir),
                                    ("glob", os.path.join(shard_dir, "part_*.bin"), os.path.join(val_dir, "v_?.bin"))):
            m1 = os.path.join(tmp, f"sh_{shuffle}_{how}.jsonl")
            o1 = os.path.join(tmp, f"sh_{shuffle}_{how}.safetensors")
            r = run(["train", "--init", init, "--data", spec, "--steps", "8", "--micro-batch", "2", "--accum", "2",
                     "--seq", str(T), "--zero-stage", "2", "--lr", "3e-3", "--metrics", m1, "--out", o1, "--val-data",
                     val_spec] + common, 2)
            check(r.code == 0, f"shuffle {shuffle}: trains on the shards as a {how}", r.text[-3000:])
            check("(2 files)" in r.text, f"{how}: the log names the validation shards", r.text[-3000:])
            check(steps_without_time(m0) == steps_without_time(m1),
                  f"shuffle {shuffle}, {how}: the same losses and norms as the one file")
            check(zt.read_bytes(o0) == zt.read_bytes(o1), f"shuffle {shuffle}, {how}: the same --out bytes")
            check(records(m0, "eval") == records(m1, "eval"),
                  f"shuffle {shuffle}, {how}: the val loss of the val shards is the file's, bit for bit")

elif CASE == "resume":
    save = os.path.join(tmp, "ckpt")
    common = ["--val-data", val, "--eval-every", "2", "--eval-tokens", str(E)]
    m0, o0, _ = train(2, common, "straight", 2, 1, 3, steps=6)
    m1, o1, _ = train(2, common + ["--save-dir", save, "--save-every", "3"], "first", 2, 1, 3, steps=3)
    m2 = os.path.join(tmp, "resumed.jsonl")
    o2 = os.path.join(tmp, "resumed.safetensors")
    r = run(["train", "--resume", save, "--data", tokens, "--steps", "6", "--micro-batch", "2", "--seq", str(T),
             "--zero-stage", "3", "--lr", "3e-3", "--metrics", m2, "--out", o2] + common, 2)
    check(r.code == 0, "resumes", r.text[-3000:])
    straight = records(m0, "eval")
    check([e["step"] for e in straight] == [2, 4, 6], "the straight run evaluates after steps 2, 4 and 6")
    first = records(m1, "eval")
    check([e["step"] for e in first] == [2, 3] and first[0] == straight[0],
          "the first part evaluates after step 2 (the straight run's bits) and after its last step, 3", str(first))
    check(records(m2, "eval") == straight[1:], "the resumed run evaluates after steps 4 and 6, to the same bits",
          f"{records(m2, 'eval')} vs {straight[1:]}")
    check(zt.read_bytes(o0) == zt.read_bytes(o2), "and ends with the same weights")

elif CASE == "dtypes":
    m, _, _ = train(2, ["--val-data", val, "--eval-tokens", str(E)], "fp32", 2, 1, 0)
    fp32 = records(m, "eval")[-1]["val_loss"]
    for dtype in ("bf16", "fp16"):
        got = []
        for stage in (0, 3):
            m, _, _ = train(2, ["--val-data", val, "--eval-tokens", str(E), "--dtype", dtype], f"{dtype}_s{stage}", 2, 1,
                            stage)
            got.append(records(m, "eval")[-1]["val_loss"])
        check(got[0] == got[1], f"{dtype}: stages 0 and 3 evaluate to the same bits ({got})")
        rel = abs(got[0] - fp32) / fp32
        check(0 < rel < 0.02, f"{dtype}: within 2% of fp32's val loss, and not fp32's bits (relative {rel:.3g})")

elif CASE == "choices":
    import torch
    from zdptest import ref_train
    m, out, _ = train(1, [], "model", 4, 1, 0, steps=20)
    items = []
    # Short enough for the model's 32 positions (bytes: one token each).
    contexts = ["First Citizen:\nBefore", "MENENIUS:\nWhat", "All:\nWe know"]
    endings = [[" we proceed", " zqx vvv", "ZZZZ QQ"], [" work's", "@@@##", " xxxxxxx"], ["'t, we", "}}}}", " the"]]
    for i, (c, e) in enumerate(zip(contexts, endings)):
        items.append({"context": c, "endings": e, "label": i % len(e)})
    path = os.path.join(tmp, "choices.jsonl")
    with open(path, "w") as f:
        for it in items:
            f.write(json.dumps(it) + "\n")
        f.write("\n")  # blank lines are skipped
    cfg, weights = ref_train.load_gpt2(out)
    p = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}
    expected = 0
    for it in items:
        ctx = list(it["context"].encode())
        means = []
        for e in it["endings"]:
            ids = ctx + list(e.encode())
            inp = torch.tensor([ids[:-1]])
            tgt = torch.tensor([ids[1:]])
            with torch.no_grad():
                losses = ref_train.token_losses(p, cfg, inp, tgt)[0]
            means.append(losses[len(ctx) - 1:].mean().item())
        expected += 1 if min(range(len(means)), key=lambda k: means[k]) == it["label"] else 0
    mj = os.path.join(tmp, "choices_metrics.json")
    r = run(["eval", "--model", out, "--choices", path, "--metrics", mj])
    check(r.code == 0 and f"({expected}/3)" in r.out, f"accuracy as PyTorch scores the endings ({expected}/3)", r.text)
    with open(mj) as f:
        j = json.loads(f.read())
    check(j["event"] == "choices" and j["correct"] == expected and j["total"] == 3, "--metrics holds the result", str(j))
    # With a BPE tokenizer: the context and each ending are encoded on their own (the ids `zerodp tokenize
    # --no-eos` gives each text), and each item's winner is PyTorch's (one item a file, label 0: 1/1 when
    # ending 0 wins).
    tk = os.path.join(zt.SRC, "data", "tokenizers", "shakespeare-bpe-1024", "tokenizer.json")
    bpe_model = os.path.join(tmp, "bpe.safetensors")
    check(run(["init", "--out", bpe_model, "--layers", "2", "--heads", "2", "--embd", "32", "--vocab", "1024", "--ctx",
               "64", "--seed", "9"]).code == 0, "init a BPE-vocabulary model")
    cfg, weights = ref_train.load_gpt2(bpe_model)
    p = {n: torch.tensor(w, dtype=torch.float64) for n, w in weights.items()}

    def bpe_ids(text):
        src, dst = os.path.join(tmp, "piece.txt"), os.path.join(tmp, "piece.bin")
        with open(src, "w") as f:
            f.write(text)
        r = run(["tokenize", "--tokenizer", tk, "--text", src, "--out", dst, "--no-eos"])
        check(r.code == 0, f"tokenize {text!r}", r.text)
        return zt.read_token_file(dst)

    bpe_items = [("ROMEO: I will", [" go", " zzq", " not"]), ("JULIET: O", [" Romeo", " xq"]),
                 ("First Citizen:\nWe are", [" accounted poor", " ZZ", " the"])]
    for k, (c, ends) in enumerate(bpe_items):
        ctx = bpe_ids(c)
        means = []
        for e in ends:
            ids = ctx + bpe_ids(e)
            with torch.no_grad():
                losses = ref_train.token_losses(p, cfg, torch.tensor([ids[:-1]]), torch.tensor([ids[1:]]))[0]
            means.append(losses[len(ctx) - 1:].mean().item())
        want = 1 if min(range(len(means)), key=lambda i: means[i]) == 0 else 0
        one = os.path.join(tmp, f"bpe_{k}.jsonl")
        with open(one, "w") as f:
            f.write(json.dumps({"context": c, "endings": ends, "label": 0}) + "\n")
        r = run(["eval", "--model", bpe_model, "--choices", one, "--tokenizer", tk])
        check(r.code == 0 and f"({want}/1)" in r.out, f"BPE item {k}: the winner PyTorch picks ({want}/1; means {means})",
              r.text)
    long_item = os.path.join(tmp, "long.jsonl")
    with open(long_item, "w") as f:
        f.write(json.dumps({"context": "a" * 40, "endings": ["b"], "label": 0}) + "\n")
    r = run(["eval", "--model", out, "--choices", long_item])
    check(r.code == 2 and "line 1" in r.err and "n_ctx = 32" in r.err, "an item longer than the context exits 2 naming it",
          r.err)
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps(items[0]) + "\n" + json.dumps({"context": "x", "endings": ["a"], "label": 3}) + "\n")
    r = run(["eval", "--model", out, "--choices", bad])
    check(r.code == 2 and "line 2" in r.err and "label" in r.err, "a label out of range exits 2 naming the line", r.err)

elif CASE == "usage":
    base_args = ["train", "--init", init, "--data", tokens, "--steps", "1", "--micro-batch", "2", "--seq", str(T)]
    r = run(base_args + ["--eval-tokens", "100"], 1)
    check(r.code == 2 and "--val-data" in r.err, "--eval-tokens without --val-data exits 2", r.err)
    r = run(base_args + ["--val-data", val, "--eval-tokens", "100000"], 2)
    check(r.code == 2 and "--eval-tokens 100000" in r.err and "holds" in r.err and "val.bin" in r.err,
          "more --eval-tokens than the stream holds exits 2 saying how many it holds", r.err)
    r = run(base_args + ["--val-data", val, "--eval-tokens", "10"], 1)
    check(r.code == 2 and "less than one window" in r.err, "--eval-tokens below one window exits 2", r.err)
    pattern = os.path.join(tmp, "nothing_*.bin")
    r = run(["train", "--init", init, "--data", pattern, "--steps", "1", "--micro-batch", "2", "--seq", str(T)], 2)
    check(r.code == 2 and pattern in r.err and "no token file matches" in r.err, "an empty glob exits 2 naming it", r.err)
    r = run(["eval", "--model", init, "--data", val, "--seq", str(T)])
    check(r.code == 2 and "--tokens" in r.err, "zerodp eval --data without --tokens exits 2", r.err)
    r = run(["eval", "--model", init, "--data", val, "--tokens", "1000", "--seq", "64"])
    check(r.code == 2 and "n_ctx" in r.err, "zerodp eval --seq over the context exits 2", r.err)
    r = run(["train", "--help"])
    check(r.code == 0 and "--val-data" in r.out and "--eval-every" in r.out and "--eval-tokens" in r.out
          and "directory" in r.out, "train --help lists the flags", r.out[-2000:])

else:
    sys.exit(f"unknown case '{CASE}'\n{__doc__}")
print("PASSED")
