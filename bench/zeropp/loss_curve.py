#!/usr/bin/env python3
"""ZeRO++'s quantization against the exact run: the demo model (scripts/demo.sh: GPT-2 L4 C128 V1024 on
the Shakespeare BPE shards, 4 ranks, ZeRO stage 3, fp32, B = 4, T = 128, the demo's schedule) trained
for STEPS steps exactly and with each ZeRO++ part (qwZ, qgZ, hpZ) and all three, on 2 hosts x 2 ranks
simulated on this machine (ZERODP_TEST_RANKS_PER_HOST=2: the collectives run in two levels, as across
two real hosts, so qgZ quantizes what would cross the link). Prints the final training loss (the mean
of the last 20 steps) and validation loss of each against the exact run's, and plots the curves.

usage: loss_curve.py ZERODP OUT_DIR [STEPS]     (default 300; needs the demo's shards: run
       scripts/demo.sh once, or the tokenize step of it; writes OUT_DIR/zeropp-loss.csv and .png)"""
import csv
import json
import os
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
ZERODP, OUT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 300
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "runs", "demo")
os.makedirs(OUT, exist_ok=True)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
           ZERODP_TEST_RANKS_PER_HOST="2")
init = os.path.join(OUT, "init.safetensors")
subprocess.run([ZERODP, "init", "--out", init, "--layers", "4", "--heads", "4", "--embd", "128", "--vocab", "1024",
                "--ctx", "128", "--seed", "1337"], check=True, env=env, capture_output=True)
MODES = {"exact": [], "qwZ": ["--zero-quantized-weights"], "qgZ": ["--zero-quantized-gradients"],
         "hpZ": ["--hpz-partition-size", "2"],
         "qwZ+qgZ+hpZ": ["--zero-quantized-weights", "--zero-quantized-gradients", "--hpz-partition-size", "2"]}
curves, rows = {}, []
for mode, extra in MODES.items():
    metrics = os.path.join(OUT, f"{mode}.jsonl")
    cmd = ["mpirun", "-n", "4", "--oversubscribe", ZERODP, "train", "--init", init,
           "--data", os.path.join(DEMO, "shakespeare_train_*.bin"), "--val-data",
           os.path.join(DEMO, "shakespeare_val_000000.bin"), "--eval-tokens", "32640", "--steps", str(STEPS),
           "--micro-batch", "4", "--seq", "128", "--zero-stage", "3", "--lr", "3e-3", "--lr-schedule", "wsd",
           "--warmup-steps", str(STEPS // 20), "--decay-steps", str(STEPS // 5), "--min-lr", "3e-4",
           "--weight-decay", "0.1", "--beta2", "0.95", "--clip", "1.0", "--log-every", "0", "--metrics", metrics] + extra
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"loss_curve.py: {mode} failed (exit {r.returncode}): {r.stderr[-2000:]}")
    records = [json.loads(line) for line in open(metrics)]
    steps = [e for e in records if e.get("event") == "step"]
    curves[mode] = [e["loss"] for e in steps]
    val = [e["val_loss"] for e in records if e.get("event") == "eval"][-1]
    traffic = [e for e in records if e.get("event") == "traffic"]
    crossed = sum(sum(t["bytes_sent_inter_host"].values()) for t in traffic) // STEPS
    tail = sum(curves[mode][-20:]) / 20
    rows.append({"mode": mode, "train_loss_last20": round(tail, 5), "val_loss": round(val, 5),
                 "inter_host_bytes_per_step_all_ranks": crossed})
    print(rows[-1], flush=True)
exact = rows[0]
for row in rows:
    row["train_vs_exact"] = round(row["train_loss_last20"] / exact["train_loss_last20"] - 1, 5)
    row["val_vs_exact"] = round(row["val_loss"] / exact["val_loss"] - 1, 5)
    row["bytes_cut"] = round(exact["inter_host_bytes_per_step_all_ranks"] / row["inter_host_bytes_per_step_all_ranks"], 2)
    print(f"{row['mode']:>12}: train loss (last 20) {row['train_loss_last20']:.4f} ({row['train_vs_exact']:+.3%}), "
          f"val loss {row['val_loss']:.4f} ({row['val_vs_exact']:+.3%}), bytes across hosts "
          f"{row['inter_host_bytes_per_step_all_ranks']} a step ({row['bytes_cut']}x fewer than exact two-level)")
with open(os.path.join(OUT, "zeropp-loss.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("loss_curve.py: matplotlib is missing (python3-matplotlib): the CSV is written, the plot is not")
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.2))
for (mode, losses), color in zip(curves.items(), ("black", "tab:orange", "tab:brown", "tab:pink", "tab:purple")):
    ax.plot(range(1, len(losses) + 1), losses, label=mode, linewidth=1, color=color)
    if mode != "exact":
        ax2.plot(range(1, len(losses) + 1), [a / b - 1 for a, b in zip(losses, curves["exact"])], label=mode,
                 linewidth=1, color=color)
ax.set_xlabel("step")
ax.set_ylabel("training loss")
ax.set_title(f"demo model, 4 ranks (2 hosts x 2), ZeRO-3, fp32, {STEPS} steps")
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
ax2.axhline(0, color="gray", linewidth=1)
ax2.set_xlabel("step")
ax2.set_ylabel("loss / exact run's loss - 1")
ax2.set_title("relative to the exact run")
ax2.legend(fontsize=8)
ax2.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "zeropp-loss.png"), dpi=110)
print(f"wrote {OUT}/zeropp-loss.csv and zeropp-loss.png")
