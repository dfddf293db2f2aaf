#!/usr/bin/env python3
"""End-to-end checks of the planner against real runs of `zerodp train` (CPU, mpirun):

  states: the model states `zerodp estimate --json` predicts (param, grad, master, optim) EQUAL the
          ledger's live bytes of every rank, for each stage, in fp32 and bf16, on a model whose
          units need padding;
  act:    the predicted `act` is within 10% of the measured peak_bytes.act, with and without
          --activation-checkpointing (and the predicted total within 10% of the measured peak);
  accum:  with gradient accumulation (--accum 2, 3) at stages 2 and 3, fp32 and bf16, the predicted
          total within 10% of the measured peak, and what the micro-steps add to it (the
          reductions one micro-step leaves in flight into the next) equal to what they add to the
          measured peak, byte for byte;
  stages01: at stages 0 and 1 in bf16, with and without --fp32-grad-accum, --accum 1 and 2 (and
          --reduce-dtype fp32; and a vocabulary-heavy model whose unit 0 outweighs the blocks; and
          --max-reductions-in-flight 1), the
          predicted total EQUAL to the measured peak of every rank, byte for byte;
  sweep:  `zerodp sweep` on a small model: every stage's largest micro-batch trains under the budget
          and the next one exits 3; the CSV and the plots are written.
  llama:  a Llama with grouped-query heads, untied (its head a unit of its own) and tied: at every
          stage, fp32 and bf16, --accum 1 and 2, the predicted model states EQUAL the ledger's live
          bytes, and the predicted act and total EQUAL the measured peaks of every rank, byte for byte;
  sweep_llama: `zerodp sweep --arch llama`: every run's predicted total EQUALS its measured peak.
  persistence: stage 3 with --param-persistence-threshold keeping unit 0 whole, and every unit, in fp32,
          in bf16 with --offload-param cpu (the whole units stay on the device) and with hpZ: the model
          states, the host's parameter bytes, the peak total and the bytes sent per step EQUAL the
          prediction on every rank.
  config: one DeepSpeed JSON given to both `zerodp estimate --config` and `zerodp train --config` (stages
          1-3, bf16 and fp16, SGD with and without momentum, AdamW): the file's stage alone is planned at
          the world size its train_batch_size gives, and the model states and the peak total EQUAL the
          measured ones on every rank; flags given override the file.
  keep_gathered: stage 3 with --no-reshard-after-forward (GPT-2 L8, an untied Llama L6; fp32 and bf16, G = 1
          and 2, qwZ, parameter offload, a prefetch limit): the predicted total EQUALS the measured peak of
          every rank, byte for byte, and differs from resharding's in each (above it, or below where the
          backward of a resharded run stages its gathers).
  no_overlap: --no-overlap-comm at every stage, fp32 and bf16 (with and without fp32 accumulation, reduced in
          bf16 and fp32), G = 1 and 2: the predicted total EQUALS the measured peak of every rank.
  loss_chunk: a Llama with a 128,256-token vocabulary, with and without --loss-chunk and --mlp-chunk (and
          checkpointing), stage 0 fp32 and stage 3 bf16: the predicted act and total EQUAL the measured peaks, and the chunks lower the measured
          act peak by exactly the planned bytes.
  muon:   Muon through one DeepSpeed JSON (type Muon) given to estimate and train, GPT-2 and an untied Llama, every
          stage, fp32 and bf16: the model states, the act and total peaks and the bytes sent per step EQUAL the
          prediction on every rank, and Muon's exchanges are in them (above AdamW's).
  bf16_states: the same with bf16.bf16_optimizer_states for AdamW, Muon and SGD with momentum (and in bf16 with
          bf16_master_weights_and_grads too): EQUAL, with half the optim bytes of fp32 states planned, no
          masters without them, and the same traffic.

usage: plan_cli_tests.py ZERODP CASE     (CASE: states | act | accum | stages01 | sweep | llama | sweep_llama |
                                          persistence | config | keep_gathered | no_overlap | loss_chunk | muon |
                                          bf16_states)
Exits non-zero with a message on the first failed check."""
import csv
import functools
import json
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

# Dimensions whose units do not divide evenly: unit 0 = 256·48 + 32·48 + 96 = 13920, a block 28272.
MODEL = {"layers": 2, "heads": 4, "embd": 48, "vocab": 256, "ctx": 32}
W = 2


def estimate(stage, dtype, fp32_accum, B, T, ckpt, accum=1, reduce_dtype=None, model=None, extra=()):
    args = ["estimate", "--json", "--gpus", str(W), "--stage", str(stage), "--dtype", dtype, "--micro-batch", str(B),
            "--seq", str(T), "--accum", str(accum)] + [a for k, v in (model or MODEL).items() for a in (f"--{k}", str(v))]
    args += list(extra)
    if reduce_dtype:
        args += ["--reduce-dtype", reduce_dtype]
    if fp32_accum:
        args.append("--fp32-grad-accum")
    if ckpt:
        args.append("--activation-checkpointing")
    rc, out, err = run(args)
    check(rc == 0, f"estimate stage {stage} {dtype}", err)
    doc = json.loads(out)
    check(list(doc) == ["stages"] and len(doc["stages"]) == 1, "the JSON holds one stage", out)
    s = doc["stages"][0]
    check(list(s) == ["stage", "bytes_per_rank", "traffic_bytes_per_step", "max_micro_batch"]
          and list(s["bytes_per_rank"]) == ["param", "grad", "master", "optim", "act", "total"],
          "the JSON has exactly the documented keys, in order", out)
    return s["bytes_per_rank"]


def train(stage, dtype, fp32_accum, B, T, ckpt, metrics, accum=1, reduce_dtype=None, inputs=None, extra=()):
    tokens, init = inputs or (model_tokens, model_init)
    args = ["train", "--init", init, "--data", tokens, "--steps", "2", "--micro-batch", str(B), "--seq", str(T),
            "--zero-stage", str(stage), "--dtype", dtype, "--metrics", metrics, "--log-every", "0",
            "--accum", str(accum), "--fp32-grad-accum" if fp32_accum else "--no-fp32-grad-accum"] + list(extra)
    if ckpt:
        args.append("--activation-checkpointing")
    if reduce_dtype:
        args += ["--reduce-dtype", reduce_dtype]
    rc, out, err = run(args, W)
    check(rc == 0, f"train stage {stage} {dtype} B={B} T={T} checkpointing={ckpt} accum={accum}", err)
    recs = zt.records(metrics, "memory")
    check(len(recs) == W, f"one memory record per rank ({len(recs)})")
    return recs


def train_config(path, init, what, peaks=("total",)):
    """`zerodp train --config path` on W ranks for 2 steps; returns each rank's model states (live) and `peaks`
    (peak bytes) from its memory record, and the metrics file."""
    metrics = path + ".jsonl"
    rc, out, err = run(["train", "--config", path, "--init", init, "--data", model_tokens, "--steps", "2",
                        "--seq", "16", "--metrics", metrics, "--log-every", "0"], W)
    check(rc == 0, f"train {what}", err)
    recs = zt.records(metrics, "memory")
    check(len(recs) == W, f"{what}: one memory record per rank ({len(recs)})")
    got = [{**{k: rec["live_bytes"][k] for k in ("param", "grad", "master", "optim")},
            **{k: rec["peak_bytes"][k] for k in peaks}} for rec in recs]
    return got, metrics


tmp = zt.workdir("plan")
model_tokens, model_init = zt.make_inputs(ZERODP, tmp, **MODEL, seed=3, text_bytes=20000)
text = os.path.join(tmp, "text.txt")  # the corpus excerpt make_inputs tokenized

if CASE == "states":
    cases = [(s, "fp32", False) for s in range(4)] + [(s, "bf16", s % 2 == 0) for s in range(4)]
    for n, (stage, dtype, accum) in enumerate(cases):
        want = estimate(stage, dtype, accum, 2, 16, False)
        for rec in train(stage, dtype, accum, 2, 16, False, os.path.join(tmp, f"s{n}.jsonl")):
            got = {k: rec["live_bytes"][k] for k in ("param", "grad", "master", "optim")}
            check(got == {k: want[k] for k in got},
                  f"stage {stage} {dtype} fp32-accum={accum} rank {rec['rank']}: ledger {got} == estimate")

elif CASE == "act":
    for n, (stage, dtype, B, T, ckpt) in enumerate([(0, "fp32", 4, 32, False), (0, "fp32", 4, 32, True),
                                                   (3, "bf16", 2, 32, False), (3, "bf16", 2, 32, True),
                                                   (2, "fp32", 1, 8, True)]):
        want = estimate(stage, dtype, True, B, T, ckpt)
        for rec in train(stage, dtype, True, B, T, ckpt, os.path.join(tmp, f"a{n}.jsonl")):
            for key in ("act", "total"):
                got = rec["peak_bytes"][key]
                err = abs(want[key] - got) / got
                check(err <= 0.10, f"stage {stage} {dtype} B={B} T={T} checkpointing={ckpt} rank {rec['rank']}: "
                                   f"{key} predicted {want[key]}, measured {got} ({100 * err:.2f}% apart)")
elif CASE == "accum":
    # Each micro-step after the first begins with the previous one's last reductions still in flight
    # (the third with ones that received into buffers); bf16 without fp32 accumulation received the
    # first micro-step's sums in place.
    for n, (stage, dtype, fp32_accum, accums) in enumerate([(3, "fp32", True, (1, 2, 3)), (3, "bf16", True, (1, 2)),
                                                           (2, "fp32", True, (1, 2)), (2, "bf16", True, (1, 2)),
                                                           (2, "bf16", False, (1, 2))]):
        base = {}  # rank: (predicted, measured) total with one micro-step
        for G in accums:
            what = f"stage {stage} {dtype} fp32-accum={fp32_accum} accum={G}"
            want = estimate(stage, dtype, fp32_accum, 2, 16, False, G)["total"]
            for rec in train(stage, dtype, fp32_accum, 2, 16, False, os.path.join(tmp, f"g{n}_{G}.jsonl"), G):
                got = rec["peak_bytes"]["total"]
                err = abs(want - got) / got
                check(err <= 0.10, f"{what} rank {rec['rank']}: total predicted {want}, measured {got} "
                                   f"({100 * err:.2f}% apart)")
                if G == 1:
                    base[rec["rank"]] = (want, got)
                    continue
                want_more, got_more = want - base[rec["rank"]][0], got - base[rec["rank"]][1]
                peaks = {k: rec["peak_bytes"][k] for k in ("gathered", "comm")}
                check(want_more == got_more, f"{what} rank {rec['rank']}: the micro-steps add {want_more} bytes to the "
                                             f"predicted total, {got_more} to the measured peak ({peaks})")
elif CASE == "stages01":
    # Stages 0-1 reduce after the last micro-step only: stage 0 all-reduces buckets in place, stage 1
    # reduce-scatters each unit in place, and a reduction in another dtype than the stored gradient
    # holds conversion buffers (beside the communicator's staging) until it is retired.
    heavy = {"layers": 2, "heads": 4, "embd": 32, "vocab": 2048, "ctx": 32}  # unit 0 over twice a block
    heavy_dir = os.path.join(tmp, "heavy")
    os.makedirs(heavy_dir)
    heavy_inputs = zt.make_inputs(ZERODP, heavy_dir, **heavy, seed=3, text_bytes=20000)
    cases = [(stage, fp32_accum, G, None, None, ()) for stage in (0, 1) for fp32_accum in (False, True) for G in (1, 2)]
    cases += [(0, False, 1, "fp32", None, ()), (1, False, 1, "fp32", None, ()),
              (1, False, 1, None, heavy, ()), (1, True, 1, None, heavy, ()), (0, True, 1, None, heavy, ())]
    # Fewer reductions in flight hold fewer conversion buffers: the planner follows the setting.
    one = ("--max-reductions-in-flight", "1")
    cases += [(1, False, 1, None, None, one), (1, False, 1, "fp32", None, one), (0, False, 1, "fp32", None, one)]
    for n, (stage, fp32_accum, G, red, model, extra) in enumerate(cases):
        what = (f"stage {stage} bf16 fp32-accum={fp32_accum} accum={G} reduce-dtype={red or 'bf16'}"
                f"{' V2048' if model else ''} {' '.join(extra)}")
        want = estimate(stage, "bf16", fp32_accum, 2, 16, False, G, red, model, extra)["total"]
        for rec in train(stage, "bf16", fp32_accum, 2, 16, False, os.path.join(tmp, f"z{n}.jsonl"), G, red,
                         heavy_inputs if model else None, extra):
            peaks = {k: rec["peak_bytes"][k] for k in ("gathered", "comm", "grad", "act")}
            check(want == rec["peak_bytes"]["total"], f"{what} rank {rec['rank']}: total predicted {want}, "
                                                      f"measured {rec['peak_bytes']['total']} ({peaks})")
elif CASE == "sweep":
    out = os.path.join(tmp, "sweep")
    rc, so, se = run(["sweep", "--layers", "2", "--embd", "96", "--heads", "4", "--seq", "16", "--gpus", "2",
                      "--worlds", "1,2", "--memory-budget", "12MB", "--max-micro-batch", "40", "--steps", "1",
                      "--text", text, "--out-dir", out, "--work-dir", os.path.join(tmp, "work"),
                      "--plot-script", os.path.join(zt.SRC, "bench", "sweep", "plot_sweep.py")], timeout=280)
    check(rc == 0, "zerodp sweep runs", so + se)
    with open(os.path.join(out, "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    tried = {(int(r["world"]), int(r["stage"])) for r in rows}
    check({(2, s) for s in range(4)} | {(1, 0), (1, 2)} <= tried, f"every stage was swept ({sorted(tried)})")
    for w, stage in sorted(tried):
        runs = {int(r["micro_batch"]): r for r in rows if (int(r["world"]), int(r["stage"])) == (w, stage)}
        fit = [b for b, r in runs.items() if r["fits"] == "1"]
        best = max(fit, default=0)
        check(best == 40 or (best + 1 in runs and runs[best + 1]["fits"] == "0"),
              f"W={w} stage {stage}: B={best} is the largest that fits (B+1 exits 3)")
        for b in fit:
            r = runs[b]
            check(int(r["measured_total"]) <= int(r["memory_budget"]), f"W={w} stage {stage} B={b} stayed under budget")
    check(any(r["fits"] == "1" for r in rows if r["stage"] == "3"), "stage 3 fits somewhere")
    for png in ("memory_by_category.png", "predicted_vs_measured.png", "global_batch.png"):
        path = os.path.join(out, png)
        check(os.path.exists(path) and os.path.getsize(path) > 1000, f"{png} written")
elif CASE == "llama":
    dims = ["--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "48", "--vocab", "256", "--ctx", "32"]
    for tie in ([], ["--tie"]):
        init = os.path.join(tmp, "llama" + "".join(tie))
        rc, _, err = run(["init", "--arch", "llama", "--out", init, "--seed", "3"] + dims + tie)
        check(rc == 0, "init --arch llama", err)
        points = [(s, d, g) for s in range(4) for d in ("fp32", "bf16") for g in (1, 2)]
        if tie:  # the tied head is unit 0, as GPT-2's: fewer points
            points = [(s, "bf16", 2) for s in range(4)]
        for n, (stage, dtype, G) in enumerate(points):
            what = f"llama{' tied' if tie else ''} stage {stage} {dtype} accum={G}"
            rc, out, err = run(["estimate", "--json", "--arch", "llama", "--gpus", str(W), "--stage", str(stage),
                                "--dtype", dtype, "--fp32-grad-accum", "--micro-batch", "2", "--seq", "16",
                                "--accum", str(G)] + dims + tie)
            check(rc == 0, f"estimate {what}", err)
            want = json.loads(out)["stages"][0]["bytes_per_rank"]
            for rec in train(stage, dtype, True, 2, 16, False, os.path.join(tmp, f"l{len(tie)}_{n}.jsonl"), G,
                             inputs=(model_tokens, init)):
                got = {k: rec["live_bytes"][k] for k in ("param", "grad", "master", "optim")}
                got.update({k: rec["peak_bytes"][k] for k in ("act", "total")})
                check(got == {k: want[k] for k in got}, f"{what} rank {rec['rank']}: measured {got}, predicted {want}")
elif CASE == "persistence":
    # Unit 0 (13920 elements) whole under 20000; every unit (blocks 28272) under 30000.
    for n, (threshold, dtype, extra) in enumerate([(20000, "fp32", ()), (30000, "fp32", ()),
                                                   (20000, "bf16", ("--offload-param", "cpu")),
                                                   (30000, "bf16", ("--offload-param", "cpu")),
                                                   (20000, "bf16", ("--hpz-partition-size", "2"))]):
        flags = ["--param-persistence-threshold", str(threshold)] + list(extra)
        what = f"stage 3 {dtype} {' '.join(flags)}"
        rc, out, err = run(["estimate", "--json", "--gpus", str(W), "--stage", "3", "--dtype", dtype, "--fp32-grad-accum",
                            "--micro-batch", "2", "--seq", "16"] + [a for k, v in MODEL.items() for a in (f"--{k}", str(v))] +
                           flags)
        check(rc == 0, f"estimate {what}", err)
        est = json.loads(out)["stages"][0]
        want, host = est["bytes_per_rank"], est.get("offloaded_bytes_per_rank", {}).get("host", {}).get("param", 0)
        metrics = os.path.join(tmp, f"p{n}.jsonl")
        for rec in train(3, dtype, True, 2, 16, False, metrics, extra=flags):
            got = {k: rec["live_bytes"][k] for k in ("param", "grad", "master", "optim")}
            got["total"] = rec["peak_bytes"]["total"]
            check(got == {k: want[k] for k in got} and rec["host_bytes"]["param"] == host,
                  f"{what} rank {rec['rank']}: measured {got} (host param {rec['host_bytes']['param']}), "
                  f"predicted {want} (host param {host})")
        for t in zt.records(metrics, "traffic"):
            sent = sum(t["bytes_sent"].values())
            check(sent == 2 * est["traffic_bytes_per_step"],
                  f"{what} rank {t['rank']}: sent {sent} bytes in 2 steps, 2 x {est['traffic_bytes_per_step']} predicted")
elif CASE == "config":
    # One DeepSpeed JSON for both commands: estimate --config plans the file's stage alone, at the world
    # size its train_batch_size gives (8 = 2 x 2 x W), with its optimizer's states; train --config runs it.
    # The model states and the peak total EQUAL the prediction on every rank; flags given win over the file.
    dims = [a for k, v in MODEL.items() for a in (f"--{k}", str(v))]
    for n, (stage, precision, optimizer) in enumerate([
            (1, {"bf16": {"enabled": True}}, {"type": "SGD", "params": {"lr": 0.01, "momentum": 0.9}}),
            (2, {"bf16": {"enabled": True}}, {"type": "SGD", "params": {"lr": 0.01}}),
            (3, {"fp16": {"enabled": True, "initial_scale_power": 8}}, {"type": "AdamW", "params": {"lr": 1e-3}})]):
        ds = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
              "zero_optimization": {"stage": stage}, "optimizer": optimizer, **precision}
        path = os.path.join(tmp, f"ds{n}.json")
        with open(path, "w") as f:
            json.dump(ds, f)
        what = f"--config stage {stage} {list(precision)[0]} {optimizer['type']}"
        rc, out, err = run(["estimate", "--json", "--config", path, "--seq", "16"] + dims)
        check(rc == 0, f"estimate {what}", err)
        doc = json.loads(out)["stages"]
        check([e["stage"] for e in doc] == [stage], f"{what}: the file's stage alone is planned ({out})")
        want = doc[0]["bytes_per_rank"]
        rc, out, err = run(["estimate", "--json", "--config", path, "--seq", "16", "--gpus", str(W)] + dims)
        check(rc == 0 and json.loads(out)["stages"][0]["bytes_per_rank"] == want,
              f"{what}: --gpus {W} is the world size train_batch_size gives", out + err)
        for rank, got in enumerate(train_config(path, model_init, what)[0]):
            check(got == {k: want[k] for k in got}, f"{what} rank {rank}: measured {got}, predicted {want}")
    # Flags given override the file; a world size train_batch_size contradicts is refused, naming both.
    rc, out, err = run(["estimate", "--json", "--config", path, "--seq", "16", "--stage", "1", "--dtype", "bf16",
                        "--micro-batch", "4", "--accum", "1"] + dims)
    check(rc == 0 and [e["stage"] for e in json.loads(out)["stages"]] == [1], "--stage overrides the file's", out + err)
    rc, out, err = run(["estimate", "--config", path, "--gpus", "3"] + dims)
    check(rc == 2 and "train_batch_size 8" in err and "--gpus 3" in err, "a contradicting --gpus is refused", err)
elif CASE == "keep_gathered":
    # Stage 3 without reshard_after_forward: every block gathered from its forward to its backward, the
    # forward's prefetches staged beside them. Eight blocks, so that it holds more than resharding does.
    g8 = dict(MODEL, layers=8)
    g8_init = os.path.join(tmp, "g8.safetensors")
    llama = ["--arch", "llama", "--layers", "6", "--heads", "4", "--kv-heads", "2", "--embd", "48", "--vocab", "256",
             "--ctx", "32"]
    llama_init = os.path.join(tmp, "llama6")
    for args in (["init", "--out", g8_init, "--seed", "3"] + [a for k, v in g8.items() for a in (f"--{k}", str(v))],
                 ["init", "--out", llama_init, "--seed", "3"] + llama):
        rc, _, err = run(args)
        check(rc == 0, " ".join(args[:3]), err)
    g8_dims = [a for k, v in g8.items() for a in (f"--{k}", str(v))]
    offload = ("--offload-param", "cpu", "--offload-optimizer", "cpu")
    differs = 0
    for n, (dims, init, dtype, G, extra) in enumerate([
            (g8_dims, g8_init, "fp32", 2, ()), (g8_dims, g8_init, "bf16", 2, ("--zero-quantized-weights",)),
            (g8_dims, g8_init, "bf16", 1, offload), (llama, llama_init, "fp32", 2, ()),
            (llama, llama_init, "bf16", 1, ("--max-live-parameters", "60000"))]):
        what = f"{'llama' if dims is llama else 'gpt2'} L{dims[dims.index('--layers') + 1]} {dtype} G={G} {' '.join(extra)}"
        common = ["--gpus", str(W), "--stage", "3", "--dtype", dtype, "--fp32-grad-accum", "--micro-batch", "1",
                  "--seq", "8", "--accum", str(G)] + dims + list(extra)
        totals = {}
        for keep in (False, True):
            rc, out, err = run(["estimate", "--json"] + common + (["--no-reshard-after-forward"] if keep else []))
            check(rc == 0, f"estimate {what} keep={keep}", err)
            totals[keep] = json.loads(out)["stages"][0]["bytes_per_rank"]["total"]
        differs += totals[True] != totals[False]
        metrics = os.path.join(tmp, f"k{n}.jsonl")
        rc, out, err = run(["train", "--init", init, "--data", model_tokens, "--steps", "2", "--micro-batch", "1",
                            "--seq", "8", "--accum", str(G), "--zero-stage", "3", "--dtype", dtype, "--fp32-grad-accum",
                            "--no-reshard-after-forward", "--metrics", metrics, "--log-every", "0"] + list(extra), W)
        check(rc == 0, f"train {what}", err)
        recs = zt.records(metrics, "memory")
        check(len(recs) == W, f"{what}: one memory record per rank ({len(recs)})")
        for rec in recs:
            got = rec["peak_bytes"]["total"]
            check(got == totals[True], f"{what} rank {rec['rank']}: measured peak {got}, predicted {totals[True]} "
                                       f"({totals[False]} with resharding)")
    # More blocks held in the backward, or (with staged gathers) none staged there: never the same peak.
    check(differs == 5, f"keeping the blocks gathered changes the prediction in every run ({differs} of 5)")
elif CASE == "no_overlap":
    # Without overlap_comm each reduction is waited for as it is launched (its buffers and the staging go
    # with it) and stage 3 prefetches nothing: every stage, fp32 and bf16 (with and without fp32
    # accumulation, reduced in bf16 and fp32), G = 1 and 2.
    differs = 0
    cases = [(stage, "fp32", True, None, G) for stage in range(4) for G in (1, 2)]
    cases += [(stage, "bf16", acc, red, 2) for stage in range(4) for acc, red in ((True, None), (False, None),
                                                                                  (True, "fp32"))]
    for n, (stage, dtype, acc, red, G) in enumerate(cases):
        what = f"stage {stage} {dtype} fp32-accum={acc} reduce-dtype={red or dtype} accum={G}"
        extra = ("--no-overlap-comm",)
        want = estimate(stage, dtype, acc, 1, 16, False, G, red, extra=extra)["total"]
        differs += want != estimate(stage, dtype, acc, 1, 16, False, G, red)["total"]
        for rec in train(stage, dtype, acc, 1, 16, False, os.path.join(tmp, f"o{n}.jsonl"), G, red, extra=extra):
            got = rec["peak_bytes"]["total"]
            check(got == want, f"{what} --no-overlap-comm rank {rec['rank']}: measured peak {got}, predicted {want}")
    check(differs >= len(cases) // 2, f"the prediction without overlap differs from overlap's in {differs} of "
                                      f"{len(cases)} runs")
elif CASE == "sweep_llama":
    out = os.path.join(tmp, "sweep")
    rc, so, se = run(["sweep", "--arch", "llama", "--layers", "2", "--embd", "64", "--heads", "4", "--kv-heads", "2",
                      "--seq", "16", "--gpus", "2", "--worlds", "2", "--memory-budget", "6MB", "--max-micro-batch",
                      "24", "--steps", "1", "--text", text, "--out-dir", out, "--work-dir", os.path.join(tmp, "work"),
                      "--plot-script", ""], timeout=280)
    check(rc == 0, "zerodp sweep --arch llama runs", so + se)
    with open(os.path.join(out, "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    fit = [r for r in rows if r["fits"] == "1"]
    check(len(fit) >= 4 and {r["stage"] for r in fit} == {"0", "1", "2", "3"}, f"every stage fits somewhere ({len(fit)} runs)")
    for r in fit:
        check(r["measured_total"] == r["predicted_total"],
              f"W={r['world']} stage {r['stage']} B={r['micro_batch']}: measured {r['measured_total']}, "
              f"predicted {r['predicted_total']}")
elif CASE == "loss_chunk":
    # A scaled-down Llama with Llama 3's vocabulary of 128,256 (C = 32, one block, untied): the logits
    # [B·T, V] are most of its activations. With --loss-chunk 16, and with the MLPs in chunks of 8 tokens
    # on top (with and without checkpointing), the predicted act and total EQUAL the measured peaks of
    # every rank, and the measured peak falls by exactly what the planner says.
    dims = ["--layers", "1", "--heads", "2", "--kv-heads", "1", "--embd", "32", "--vocab", "128256", "--ctx", "32"]
    init = os.path.join(tmp, "llama_v128k")
    rc, _, err = run(["init", "--arch", "llama", "--out", init, "--seed", "3"] + dims)
    check(rc == 0, "init --arch llama --vocab 128256", err)
    variants = {"whole": [], "loss16": ["--loss-chunk", "16"], "loss16+mlp8": ["--loss-chunk", "16", "--mlp-chunk", "8"],
                "ckpt": ["--activation-checkpointing"],
                "ckpt+mlp8": ["--activation-checkpointing", "--mlp-chunk", "8"]}
    for stage, dtype in ((0, "fp32"), (3, "bf16")):
        peaks = {}
        for name, flags in variants.items():
            what = f"V=128256 stage {stage} {dtype} {' '.join(flags) or 'whole'}"
            rc, out, err = run(["estimate", "--json", "--arch", "llama", "--gpus", str(W), "--stage", str(stage),
                                "--dtype", dtype, "--fp32-grad-accum", "--micro-batch", "2", "--seq", "32"] + dims + flags)
            check(rc == 0, f"estimate {what}", err)
            want = json.loads(out)["stages"][0]["bytes_per_rank"]
            for rec in train(stage, dtype, True, 2, 32, False, os.path.join(tmp, f"lc{stage}_{name}.jsonl"),
                             inputs=(model_tokens, init), extra=flags):
                got = {k: rec["peak_bytes"][k] for k in ("act", "total")}
                check(got == {k: want[k] for k in got}, f"{what} rank {rec['rank']}: measured {got}, predicted {want}")
            peaks[name] = (got["act"], want["act"])
        # (before, after, the least fall: the rows no longer held, of fp32 logits; of the MLP's hidden layer,
        # gate|up and act in the compute dtype and their fp32 gradients, I = the layout's intermediate size)
        hidden_row = 3 * 96 * (4 if dtype == "fp32" else 2) + 3 * 96 * 4  # I = 96: 8C/3 rounded up to 32
        for before, after, least in (("whole", "loss16", 48 * 128256 * 4), ("loss16", "loss16+mlp8", 56 * hidden_row),
                                     ("ckpt", "ckpt+mlp8", 56 * hidden_row)):
            (b, b_plan), (a, a_plan) = peaks[before], peaks[after]
            check(b - a == b_plan - a_plan and b - a >= least,
                  f"stage {stage} {dtype}: {after} lowers the measured act peak from {before}'s by {b - a} bytes, the "
                  f"plan by {b_plan - a_plan} (at least the {least} bytes no longer held)")
            print(f"stage {stage} {dtype}: act {b} -> {a} bytes from {before} to {after} (planned the same)")
elif CASE in ("muon", "bf16_states"):
    # One DeepSpeed JSON given to estimate --config and train --config, for GPT-2 and an untied Llama at
    # every stage in fp32 and bf16: muon compares Muon with AdamW (its exchanges and working memory on top);
    # bf16_states runs AdamW, Muon and SGD with momentum with bf16.bf16_optimizer_states (half the optim
    # bytes, the widened chunks of the update) against the same optimizer with fp32 states.
    llama_dims = ["--arch", "llama", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "48", "--vocab",
                  "256", "--ctx", "32"]  # untied: the head a unit of its own, without a matrix
    llama_init = os.path.join(tmp, "llama")
    rc, _, err = run(["init", "--out", llama_init, "--seed", "3"] + llama_dims)
    check(rc == 0, "init --arch llama", err)
    gpt2_dims = [a for k, v in MODEL.items() for a in (f"--{k}", str(v))]
    if CASE == "muon":
        variants = [("AdamW", False), ("Muon", False)]  # (optimizer, bf16 states): the first is the baseline
    else:
        # "master": bf16 states and bf16 master weights and gradients (bf16 compute only).
        variants = [(kind, states) for kind in ("AdamW", "Muon", "SGD") for states in (False, True, "master")]
    differs, runs = 0, 0
    for n, (arch, stage, dtype) in enumerate([(a, s, d) for a in ("gpt2", "llama") for s in range(4)
                                              for d in ("fp32", "bf16")]):
        dims, init = (gpt2_dims, model_init) if arch == "gpt2" else (llama_dims, llama_init)
        est = {}
        for kind, states in variants:
            if states == "master" and dtype != "bf16":
                continue
            params = {"lr": 0.02, "momentum": 0.9} if kind == "SGD" else {"lr": 0.02}
            ds = {"train_batch_size": 2 * W, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
                  "zero_optimization": {"stage": stage}, "optimizer": {"type": kind, "params": params},
                  "bf16": {"enabled": dtype == "bf16", "bf16_optimizer_states": bool(states),
                           "bf16_master_weights_and_grads": states == "master"}}
            path = os.path.join(tmp, f"{CASE}{n}_{kind}_{states}.json")
            with open(path, "w") as f:
                json.dump(ds, f)
            rc, out, err = run(["estimate", "--json", "--config", path, "--seq", "16"] + dims)
            check(rc == 0, f"estimate {arch} stage {stage} {dtype} {kind} bf16 states {states}", err)
            est[(kind, states)] = (path, json.loads(out)["stages"][0])
        for (kind, states), (path, e) in est.items():
            if CASE == "muon" and kind == "AdamW":
                continue  # the baseline: planned only
            if CASE == "bf16_states" and not states:
                continue
            what = f"{kind} {arch} stage {stage} {dtype} bf16 states {states}"
            want = e["bytes_per_rank"]
            base = est[("AdamW", False)][1] if CASE == "muon" else est[(kind, False)][1]
            if CASE == "muon":
                check(e["traffic_bytes_per_step"] > base["traffic_bytes_per_step"],
                      f"{what}: the exchanges are in the planned traffic")
            else:
                check(2 * want["optim"] == base["bytes_per_rank"]["optim"] and e["traffic_bytes_per_step"] ==
                      base["traffic_bytes_per_step"], f"{what}: half the optim bytes planned, the same traffic")
                check((want["master"] == 0) == (states == "master" or dtype == "fp32"),
                      f"{what}: fp32 masters planned exactly when kept ({want['master']} bytes)")
            differs += want["total"] != base["bytes_per_rank"]["total"]
            runs += 1
            measured, metrics = train_config(path, init, what, ("act", "total"))
            for rank, got in enumerate(measured):
                check(got == {k: want[k] for k in got}, f"{what} rank {rank}: measured {got}, predicted {want}")
            for t in zt.records(metrics, "traffic"):
                sent = sum(t["bytes_sent"].values())
                check(sent == 2 * e["traffic_bytes_per_step"],
                      f"{what} rank {t['rank']}: sent {sent} bytes in 2 steps, 2 x {e['traffic_bytes_per_step']} "
                      "predicted")
    print(f"{CASE}: the predicted total differs from the baseline's in {differs} of {runs} runs")
else:
    sys.exit(f"unknown case {CASE}")
