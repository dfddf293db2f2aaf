#!/usr/bin/env python3
"""Muon and bf16 optimizer states against AdamW (issue 49's measurements), on this machine.

1. Loss curves and step time: the demo's two models (scripts/demo.sh: GPT-2 L4 C128 and the Llama L4 C128
   with 4/2 heads, vocabulary 1,024, on the Shakespeare BPE shards) trained on the same tokens at W = 2,
   ZeRO stage 2, fp32, B = 4, T = 128, the demo's WSD schedule, with
     AdamW        lr 3e-3, β2 0.95, weight decay 0.1 (the demo's);
     AdamW-bf16   the same with --bf16-optimizer-states;
     Muon         --optimizer Muon --lr 0.02 (the matrices) --adam-lr 3e-3 (the rest), weight decay 0.
   The variants run one after another (keep the machine otherwise idle); prints a Markdown table (median
   step ms over the steps after the 5th, its ratio to AdamW's, the mean training loss of the last 20 steps, the
   last validation loss) and plots the curves (the training loss smoothed, the validation losses).
2. Bytes a parameter at each stage, as the planner gives them (`zerodp estimate --json --config`; the
   ledger equals them byte for byte: tests/plan plan_cli_bf16_states and plan_cli_muon): the model states
   (param + grad + master + optim) over the parameter count, Llama 3.2 1B on 8 ranks in bf16 (with zerodp
   train's fp32 gradient accumulation, which bf16_master_weights_and_grads turns off).

usage: optimizers.py ZERODP OUT_DIR [STEPS]     (default 600; tokenizes the demo's shards into
       runs/demo when they are missing; writes OUT_DIR/optimizers.md, .csv and .png)"""
import csv
import glob
import json
import os
import statistics
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
ZERODP, OUT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 600
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "runs", "demo")
os.makedirs(OUT, exist_ok=True)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, env=env, capture_output=True, text=True, **kw)


if not glob.glob(os.path.join(DEMO, "shakespeare_train_*.bin")):
    os.makedirs(DEMO, exist_ok=True)
    run([ZERODP, "tokenize", "--tokenizer", os.path.join(ROOT, "data/tokenizers/shakespeare-bpe-1024/tokenizer.json"),
         "--text", os.path.join(ROOT, "data/tinyshakespeare.txt"), "--out-prefix", os.path.join(DEMO, "shakespeare"),
         "--val-tokens", "32768", "--shard-tokens", "131072"])

MODELS = {"GPT-2": [], "Llama": ["--arch", "llama", "--kv-heads", "2"]}
# The demo's schedule: WSD from the peak to a tenth of it (Muon's AdamW tensors follow in proportion).
VARIANTS = {"AdamW": ["--lr", "3e-3", "--min-lr", "3e-4", "--weight-decay", "0.1"],
            "AdamW-bf16": ["--lr", "3e-3", "--min-lr", "3e-4", "--weight-decay", "0.1", "--bf16-optimizer-states"],
            "Muon": ["--optimizer", "Muon", "--lr", "0.02", "--min-lr", "2e-3", "--adam-lr", "3e-3",
                     "--weight-decay", "0"]}
for model, arch in MODELS.items():
    init = os.path.join(OUT, f"init-{model}")
    if not os.path.exists(init):
        run([ZERODP, "init", "--out", init, "--layers", "4", "--heads", "4", "--embd", "128", "--vocab", "1024",
             "--ctx", "128", "--seed", "1337"] + arch)


def metrics_path(model, variant):
    return os.path.join(OUT, f"{model}-{variant}.jsonl")


for model in MODELS:
    for variant, extra in VARIANTS.items():
        if os.path.exists(metrics_path(model, variant)) and not os.environ.get("RERUN"):
            continue  # an earlier run's (RERUN=1 trains again)
        print(f"train {model} {variant}", file=sys.stderr, flush=True)
        run(["mpirun", "-n", "2", "--oversubscribe", ZERODP, "train", "--init", os.path.join(OUT, f"init-{model}"),
             "--data", os.path.join(DEMO, "shakespeare_train_*.bin"),
             "--val-data", os.path.join(DEMO, "shakespeare_val_000000.bin"), "--eval-every", str(STEPS // 6),
             "--eval-tokens", "32640", "--steps", str(STEPS), "--micro-batch", "4", "--seq", "128", "--zero-stage", "2",
             "--lr-schedule", "wsd", "--warmup-steps", str(STEPS // 20), "--decay-steps",
             str(STEPS // 5), "--beta2", "0.95", "--clip", "1.0", "--log-every", "0",
             "--metrics", metrics_path(model, variant)] + extra)


def records(path, event):
    with open(path) as f:
        return [r for r in map(json.loads, f) if r.get("event") == event]


rows = []
lines = ["| model | optimizer | step ms (median) | vs AdamW | train loss (last 20) | val loss |", "|---|---|---|---|---|---|"]
for model in MODELS:
    base = None
    for variant in VARIANTS:
        steps = records(metrics_path(model, variant), "step")
        ms = statistics.median(r["ms"] for r in steps if r["step"] >= 5)
        base = base or ms
        train = statistics.mean(r["loss"] for r in steps[-20:])
        val = records(metrics_path(model, variant), "eval")[-1]["val_loss"]
        rows.append([model, variant, f"{ms:.2f}", f"{ms / base:.2f}", f"{train:.4f}", f"{val:.4f}"])
        lines.append("| " + " | ".join(rows[-1]) + " |")

# Bytes a parameter, planned.
lines += ["", "Bytes a parameter (param + grad + master + optim), Llama 3.2 1B, 8 ranks, bf16, planned:", "",
          "| optimizer | stage 0 | stage 1 | stage 2 | stage 3 |", "|---|---|---|---|---|"]
for label, kind, states, masters in (("AdamW", "AdamW", False, False), ("AdamW, bf16 states", "AdamW", True, False),
                                     ("AdamW, bf16 states and masters", "AdamW", True, True),
                                     ("Muon", "Muon", False, False), ("Muon, bf16 states", "Muon", True, False)):
    cfg = os.path.join(OUT, f"plan-{kind}-{states}-{masters}.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                   "optimizer": {"type": kind, "params": {"lr": 1e-3}},
                   "bf16": {"enabled": True, "bf16_optimizer_states": states,
                            "bf16_master_weights_and_grads": masters}}, f)
    cells = []
    for stage in range(4):
        doc = json.loads(run([ZERODP, "estimate", "--json", "--config", cfg, "--preset", "llama-3.2-1b", "--gpus", "8",
                              "--stage", str(stage), "--seq", "2048"]).stdout)
        b = doc["stages"][0]["bytes_per_rank"]
        params = 1_235_814_400  # Llama 3.2 1B, tied
        cells.append(f"{(b['param'] + b['grad'] + b['master'] + b['optim']) / params:.2f}")
    lines.append(f"| {label} | " + " | ".join(cells) + " |")

report = "\n".join(lines)
print(report)
with open(os.path.join(OUT, "optimizers.md"), "w") as f:
    f.write(report + "\n")
with open(os.path.join(OUT, "optimizers.csv"), "w", newline="") as f:
    csv.writer(f).writerows([["model", "optimizer", "step_ms", "vs_adamw", "train_loss", "val_loss"]] + rows)

for model in MODELS:
    files = [metrics_path(model, v) for v in VARIANTS]
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts/plot_metrics.py")] + files +
                   ["--out", os.path.join(OUT, f"optimizers-{model}.png"), "--title",
                    f"{model} L4 C128, W=2, ZeRO-2: AdamW, AdamW with bf16 states, Muon (same tokens)",
                    "--smooth", "10"] + [a for v in VARIANTS for a in ("--label", v)], check=True, env=env)
