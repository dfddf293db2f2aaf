#!/usr/bin/env python3
"""End-to-end checks of the zerodp CLI through mpirun: the memory budget (stage 2 stops with exit 3,
stage 3 trains), DeepSpeed JSON configuration, atomic outputs, the memory report, sampling, instruction
data (tokenize --sft, then train on it), --device.

usage: cli_tests.py ZERODP CASE     (CASE: budget | ds_config | atomic_out | report | sample | sample_bpe | sft | device)
Exits non-zero with a message on the first failed check."""
import functools
import json
import math
import os
import struct
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

tmp = zt.workdir("cli")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=8 if CASE == "budget" else 2, heads=4, embd=64, vocab=256, ctx=32,
                              seed=5, text_bytes=60000)
base = ["train", "--init", init, "--data", tokens, "--steps", "2", "--micro-batch", "2", "--seq", "32", "--lr", "1e-3"]

if CASE == "budget":
    # Peaks of stages 2 and 3 at W = 2 without a budget; stage 3's gathers limited to about one block.
    peaks = {}
    for stage in (2, 3):
        m = os.path.join(tmp, f"m{stage}.jsonl")
        rc, out, err = run(base + ["--zero-stage", str(stage), "--metrics", m, "--max-live-parameters", "60000"], 2)
        check(rc == 0, f"stage {stage} trains without a budget", err)
        peaks[stage] = max(r["peak_bytes"]["total"] for r in records(m, "memory"))
    check(peaks[3] < peaks[2], f"stage 3 peaks below stage 2 ({peaks[3]} < {peaks[2]})")
    budget = (peaks[2] + peaks[3]) // 2
    rc, out, err = run(base + ["--zero-stage", "2", "--memory-budget", str(budget)], 2)
    check(rc == 3, f"stage 2 over a budget of {budget} bytes exits 3 (got {rc})", err)
    check("memory budget exceeded" in err and f"budget of {budget} bytes" in err and "bytes live" in err
          and "'" in err, "the message names the category, the bytes asked, live and the budget", err)
    rc, out, err = run(base + ["--zero-stage", "3", "--max-live-parameters", "60000", "--memory-budget", str(budget)], 2)
    check(rc == 0, "stage 3 trains under the same budget", err)

elif CASE == "ds_config":
    cfg = os.path.join(tmp, "ds.json")
    with open(cfg, "w") as f:
        json.dump({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
                   "gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "betas": [0.9, 0.95],
                   "eps": 1e-8, "weight_decay": 0.1}}, "zero_optimization": {"stage": 2, "overlap_comm": True},
                   "bf16": {"enabled": False}, "wall_clock_breakdown": False}, f)
    m = os.path.join(tmp, "m.jsonl")
    args = ["train", "--init", init, "--data", tokens, "--steps", "2", "--seq", "32", "--config", cfg, "--metrics", m]
    rc, out, err = run(args, 2)
    check(rc == 0, "a DeepSpeed config trains (train_batch_size 8 = 2 x 2 x 2 ranks)", err)
    steps = records(m, "step")
    check(all(abs(s["lr"] - 5e-4) < 1e-12 for s in steps), "lr comes from optimizer.params.lr")
    check(all(s["tokens"] == 8 * 32 for s in steps), "tokens per step = W*G*B*T from the config")
    check("wall_clock_breakdown" in err, "an unknown key is named in a warning", err)
    rc, out, err = run(args + ["--lr", "2e-4"], 2)
    check(rc == 0 and all(abs(s["lr"] - 2e-4) < 1e-12 for s in records(m, "step")), "a flag wins over the config", err)
    rc, out, err = run(args, 3)
    check(rc == 2 and "train_batch_size" in err and "8" in err, "train_batch_size != B x G x W exits 2 naming the numbers", err)
    with open(cfg, "w") as f:
        json.dump({"optimizer": {"type": "AdamW", "params": {"betas": 0.9}}}, f)
    rc, out, err = run(args)
    check(rc == 2 and "betas" in err and "ds.json" in err, "a wrong type exits 2 naming the file and key", err)

elif CASE == "atomic_out":
    out_path = os.path.join(tmp, "final.safetensors")
    with open(out_path, "wb") as f:
        f.write(b"earlier output")
    bad = os.path.join(tmp, "bad.bin")
    with open(bad, "wb") as f:
        f.write(b"\x01")  # one byte: not a token file
    with_bad_data = [bad if a == tokens else a for a in base]
    rc, out, err = run(with_bad_data + ["--out", out_path], 2)
    check(rc == 2 and "bad.bin" in err, "a bad token file exits 2 naming it", err)
    with open(out_path, "rb") as f:
        check(f.read() == b"earlier output", "the earlier --out file is intact")
    rc, out, err = run(base + ["--out", out_path, "--zero-stage", "3"], 2)
    check(rc == 0, "a good run writes --out", err)
    rc, out2, err = run(["sample", "--model", out_path, "--prompt", "A", "--tokens", "5", "--temperature", "0"])
    check(rc == 0 and len(out2) >= 6, "the written model loads and samples", err)

elif CASE == "device":
    # Without a GPU (or, with one, for this fp32 run, which the GPU does not do) --device cuda exits 2
    # on every rank before anything is written, saying why; --device cpu is the default and trains.
    out_path = os.path.join(tmp, "device.safetensors")
    rc, out, err = run(base + ["--device", "cuda", "--out", out_path], 2)
    check(rc == 2 and "--device cuda" in err and ("no GPU is visible" in err or "built without CUDA" in err
                                                   or "fp32 compute runs on the CPU only" in err),
          "--device cuda without a usable GPU exits 2 saying why", err)
    check(not os.path.exists(out_path), "nothing was written")
    rc, out, err = run(base + ["--device", "tpu"], 1)
    check(rc == 2 and "expected cpu, cuda or cuda:N" in err and "'tpu'" in err, "a bad --device exits 2", err)
    rc, out, err = run(base + ["--device", "cpu", "--out", out_path], 2)
    check(rc == 0 and os.path.exists(out_path), "--device cpu trains", err)
    rc, out, err = run(["info"])
    check(rc == 0 and "CUDA:" in out, "zerodp info has a CUDA line", out + err)
    if "CUDA:    built in" in out:
        check("GPUs:    none visible" in out or "GPU 0:" in out, "info lists the visible GPUs or says why none", out)
    # OpenBLAS held by OPENBLAS_CORETYPE to its AVX2 kernels: info says so, and on a CPU with AVX-512
    # (this machine's flags) both info and a training run warn that fp32 GEMMs leave it unused.
    with open("/proc/cpuinfo") as f:
        avx512 = "avx512f" in f.read().split()
    rc, out, err = run(["info"], env={"OPENBLAS_CORETYPE": "Haswell"})
    blas = [l for l in out.splitlines() if l.startswith("  BLAS:")]
    check(rc == 0 and len(blas) == 1 and "Haswell kernels (chosen by OPENBLAS_CORETYPE=Haswell" in blas[0],
          "info names the OpenBLAS kernels and that OPENBLAS_CORETYPE chose them", out + err)
    check(("warning: OpenBLAS runs its Haswell kernels, without AVX-512" in out) == avx512,
          f"info warns exactly when the CPU has AVX-512 ({avx512})", out)
    rc, out, err = run(base + ["--device", "cpu"], 2, env={"OPENBLAS_CORETYPE": "Haswell"})
    check(rc == 0 and (err.count("OPENBLAS_CORETYPE=Haswell is set") == (1 if avx512 else 0)),
          "training warns once (rank 0) when fp32 GEMMs leave AVX-512 unused", err)
    rc, out, err = run(["info"], env={"OPENBLAS_CORETYPE": "SkylakeX"})
    check(rc == 0 and "SkylakeX kernels (chosen by OPENBLAS_CORETYPE=SkylakeX)" in out and "warning: OpenBLAS" not in out,
          "AVX-512 kernels chosen by OPENBLAS_CORETYPE: no warning", out + err)

elif CASE == "report":
    m = os.path.join(tmp, "m.jsonl")
    rc, out, err = run(base + ["--zero-stage", "3", "--metrics", m], 4)
    check(rc == 0, "4 ranks at stage 3", err)
    check("Memory per rank (ZeRO stage 3, 4 ranks)" in out, "the memory table is printed", out)
    rows = [l for l in out.splitlines() if l.split()[1:2] == ["states"]]
    check(len(rows) == 4 and all(l.rstrip().endswith("0.25x") for l in rows),
          "each rank holds 1/4 of stage 0's model states", out)
    # Nothing offloads: the table has no host or nvme column, and the memory records' host and nvme
    # tiers (docs/reference/command-line.md#offload-faults-devices) have every key of peak_bytes, all zero.
    check("host peak" not in out and "nvme peak" not in out, "no tier columns without offload", out)
    mem = records(m, "memory")
    check(len(mem) == 4, f"one memory record per rank ({len(mem)})")
    for rec in mem:
        for field in ("host_bytes", "nvme_bytes"):
            got = rec.get(field)
            check(isinstance(got, dict) and sorted(got) == sorted(rec["peak_bytes"]) and not any(got.values()),
                  f"rank {rec['rank']}: {field} has the keys of peak_bytes, all zero: {got}")

elif CASE == "sample":
    rc, out, err = run(["sample", "--model", init, "--prompt", "ROMEO:", "--tokens", "20", "--seed", "3"])
    check(rc == 0 and out.startswith("ROMEO:") and len(out) >= 26, "sample prints prompt + tokens", err)
    rc2, out2, _ = run(["sample", "--model", init, "--prompt", "ROMEO:", "--tokens", "20", "--seed", "3"])
    check(out2 == out, "sampling is deterministic in the seed")
    rc, out, err = run(["sample", "--model", os.path.join(tmp, "missing.safetensors"), "--prompt", "x"])
    check(rc == 2 and "missing.safetensors" in err, "a missing model exits 2 naming it", err)
elif CASE == "sample_bpe":
    # The repository's BPE tokenizer (V = 1024, <|endoftext|> = id 0) on a model whose vocabulary is
    # padded to 1100: the ids 1024..1099 have logits but no text, and must never be drawn.
    tok = os.path.join(zt.SRC, "data", "tokenizers", "shakespeare-bpe-1024", "tokenizer.json")
    model = os.path.join(tmp, "v1100.safetensors")
    rc, out, err = run(["init", "--out", model, "--layers", "2", "--heads", "2", "--embd", "32", "--vocab", "1100",
                        "--ctx", "32", "--seed", "7"])
    check(rc == 0, "init of a V = 1100 model", err)
    args = ["sample", "--model", model, "--tokenizer", tok, "--prompt", "ROMEO:", "--tokens", "60", "--seed", "3"]
    rc, out, err = run(args + ["--no-stop"])
    check(rc == 0 and out.startswith("ROMEO:") and len(out) > len("ROMEO:\n"),
          "sample --tokenizer prints the prompt and a decoded continuation (no id past the tokenizer's drawn)", err)
    rc2, out2, _ = run(args + ["--no-stop"])
    check(out2 == out, "sampling with a tokenizer is deterministic in the seed")
    # ln_f zeroed: every logit is 0, so greedy sampling draws id 0, the end-of-text token, first.
    header, _, data = zt.parse_safetensors(zt.read_bytes(model))
    blob = bytearray(zt.read_bytes(model))
    start = 8 + struct.unpack("<Q", bytes(blob[:8]))[0]
    for name in ("ln_f.weight", "ln_f.bias"):
        b, e = header[name]["data_offsets"]
        blob[start + b:start + e] = bytes(e - b)
    flat = os.path.join(tmp, "flat.safetensors")
    with open(flat, "wb") as f:
        f.write(blob)
    greedy = ["sample", "--model", flat, "--tokenizer", tok, "--prompt", "ROMEO:", "--tokens", "5", "--temperature", "0"]
    rc, out, err = run(greedy)
    check(rc == 0 and out == "ROMEO:\n", f"generation stops at the end-of-text token (got {out!r})", err)
    rc, out, err = run(greedy + ["--no-stop"])
    check(rc == 0 and out == "ROMEO:" + "<|endoftext|>" * 5 + "\n",
          f"--no-stop goes on past it, decoding it as its text (got {out!r})", err)
    rc, out, err = run(["sample", "--model", init, "--tokenizer", tok, "--prompt", "x"])
    check(rc == 2 and "1024" in err and "256" in err, "a tokenizer larger than the model's vocabulary exits 2", err)
elif CASE == "sft":
    # tokenize --sft with the repository's BPE (V = 1024, <|endoftext|> = 0), then train on the pair:
    # the losses of W = 2 at stage 3 equal W = 1's with the same global batch.
    tok = os.path.join(zt.SRC, "data", "tokenizers", "shakespeare-bpe-1024", "tokenizer.json")
    jsonl, data = os.path.join(tmp, "sft.jsonl"), os.path.join(tmp, "sft.bin")
    with open(jsonl, "w") as f:
        for i in range(12):
            f.write(json.dumps({"prompt": f"Question {i}: who speaks?\n", "completion": "ROMEO. " * (1 + i % 4)}) + "\n")
    rc, out, err = run(["tokenize", "--tokenizer", tok, "--sft", jsonl, "--out", data])
    check(rc == 0 and "12 examples" in out and os.path.exists(os.path.join(tmp, "sft.labels")),
          "tokenize --sft writes the tokens and the labels beside them", out + err)
    model = os.path.join(tmp, "v1024.safetensors")
    rc, _, err = run(["init", "--out", model, "--layers", "2", "--heads", "2", "--embd", "32", "--vocab", "1024",
                      "--ctx", "32", "--seed", "7"])
    check(rc == 0, "init of a V = 1024 model", err)
    losses = {}
    for world, b, stage in ((1, 4, 0), (2, 2, 3)):
        m = os.path.join(tmp, f"sft_{world}.jsonl")
        rc, out, err = run(["train", "--init", model, "--data", data, "--steps", "3", "--micro-batch", str(b),
                            "--seq", "32", "--lr", "1e-3", "--zero-stage", str(stage), "--metrics", m], world)
        check(rc == 0 and "instruction data: 12 examples" in err, f"W = {world} trains on the instruction data", err)
        losses[world] = [r["loss"] for r in records(m, "step")]
    check(all(abs(a - b) < 1e-5 for a, b in zip(losses[1], losses[2])) and len(losses[1]) == 3,
          f"the same losses at W = 1 and W = 2 stage 3: {losses}")
    with open(jsonl, "a") as f:
        f.write(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    rc, out, err = run(["tokenize", "--tokenizer", tok, "--sft", jsonl, "--out", data])
    check(rc == 2 and "line 13" in err and "chat template" in err and "there is none" in err,
          "a messages line without a tokenizer_config.json beside the tokenizer exits 2 naming its line", err)
    # {"messages"} lines rendered by the chat template of the tokenizer_config.json beside a copy of the
    # tokenizer: the targets are each assistant content and the <|endoftext|> after it, found in the text
    # (no generation blocks) or marked by generation blocks alike; then W = 2 trains on the pair.
    chat_dir = os.path.join(tmp, "chat")
    os.makedirs(chat_dir, exist_ok=True)
    chat_tok = os.path.join(chat_dir, "tokenizer.json")
    with open(tok, "rb") as f, open(chat_tok, "wb") as g:
        g.write(f.read())
    turn = "{{ m['role'] }}: {{ m['content'] }}{{ eos_token }}\n"
    marked = ("{{ m['role'] }}: {% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] }}{{ eos_token }}"
              "{% endgeneration %}{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}{{ '\\n' }}")
    chats = os.path.join(tmp, "chats.jsonl")
    with open(chats, "w") as f:
        for i in range(12):
            f.write(json.dumps({"messages": [{"role": "system", "content": "Speak as Shakespeare."},
                                             {"role": "user", "content": f"Who speaks in scene {i}?"},
                                             {"role": "assistant", "content": "ROMEO. " * (1 + i % 3)},
                                             {"role": "user", "content": "And then?"},
                                             {"role": "assistant", "content": "JULIET."}]}) + "\n")
        f.write(json.dumps({"prompt": "Question: who speaks?\n", "completion": "ROMEO."}) + "\n")
    labels = {}
    for name, body in (("fallback", turn), ("generation", marked)):
        with open(os.path.join(chat_dir, "tokenizer_config.json"), "w") as f:
            json.dump({"eos_token": "<|endoftext|>",
                       "chat_template": "{% for m in messages %}" + body + "{% endfor %}"}, f)
        chat_data = os.path.join(tmp, f"chat_{name}.bin")
        rc, out, err = run(["tokenize", "--tokenizer", chat_tok, "--sft", chats, "--out", chat_data])
        check(rc == 0 and "13 examples (12 conversations)" in out,
              f"tokenize --sft renders the messages lines with the chat template ({name})", out + err)
        with open(os.path.join(tmp, f"chat_{name}.labels"), "rb") as f:
            labels[name] = f.read()
    check(labels["fallback"] == labels["generation"],
          "the assistant contents and end-of-turn tokens found in the text are what generation blocks mark")
    ids = zt.read_token_file(os.path.join(tmp, "chat_fallback.bin"))
    first = labels["fallback"][1024:1024 + 40]
    check(first[0] == 2 and sum(b & 1 for b in first) > 0 and ids[0] != 0,
          "a conversation starts with its own text (no document token) and has targets", f"{ids[:10]} {list(first)}")
    m = os.path.join(tmp, "sft_chat.jsonl")
    rc, out, err = run(["train", "--init", model, "--data", os.path.join(tmp, "chat_fallback.bin"), "--steps", "2",
                        "--micro-batch", "2", "--seq", "32", "--lr", "1e-3", "--zero-stage", "3", "--metrics", m], 2)
    check(rc == 0 and "instruction data: 13 examples" in err and len(records(m, "step")) == 2,
          "W = 2 trains on the conversations", err)
    # sample --chat: the message rendered by the template with the generation prompt (which the
    # template above does not write: the reply follows the user's turn), the template's text not echoed.
    rc, out, err = run(["sample", "--model", model, "--tokenizer", chat_tok, "--chat", "Who speaks?", "--tokens", "4",
                        "--temperature", "0"])
    check(rc == 0 and "Who speaks?" not in out and "user:" not in out, "sample --chat answers the message", out + err)
    rc, out, err = run(["sample", "--model", model, "--tokenizer", tok, "--chat", "Who speaks?"])
    check(rc == 2 and "no chat template" in err and "tokenizer_config.json" in err,
          "sample --chat without a tokenizer_config.json beside the tokenizer exits 2 saying so", err)
    # Packed (--packing) and held-out validation on instruction data: with --lr 0 the weights stay, so
    # the validation loss over all 12 prompt-completion examples after the step equals the step's
    # training loss when that step's global batch is those 12 examples padded (W·B = 12), and it is
    # the same at W = 1 and W = 3 (each example a sequence of its own however they are split). The
    # packed run trains on fewer sequences, and its loss must be finite and its val loss the same.
    vals = {}
    for world, b, packing in ((1, 12, []), (3, 4, []), (2, 2, ["--packing"])):
        m = os.path.join(tmp, f"sft_val_{world}.jsonl")
        rc, out, err = run(["train", "--init", model, "--data", data, "--val-data", data, "--steps", "1",
                            "--micro-batch", str(b), "--seq", "32", "--lr", "0", "--zero-stage", "3",
                            "--metrics", m] + packing, world)
        check(rc == 0 and "validation: 12 examples (" in err, f"W = {world} {packing} validates on held-out examples",
              err)
        steps, evals = records(m, "step"), records(m, "eval")
        check(len(steps) == 1 and len(evals) == 1 and math.isfinite(steps[0]["loss"]),
              f"one step and one eval record at W = {world} {packing}", str(steps) + str(evals))
        vals[(world, bool(packing))] = (steps[0]["loss"], evals[0]["val_loss"], evals[0]["tokens"])
        if packing:
            check("packed into" in err, "--packing packs the examples", err)
    (train1, val1, tokens1), (_, val3, tokens3) = vals[(1, False)], vals[(3, False)]
    check(abs(train1 - val1) < 1e-6 and abs(val3 - val1) < 1e-6 and tokens1 == tokens3,
          f"the validation loss is the mean over the examples' targets, whatever W: {vals}")
    check(abs(vals[(2, True)][1] - val1) < 1e-6, f"and the same in the packed run: {vals}")
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
