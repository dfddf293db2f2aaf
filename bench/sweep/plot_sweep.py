#!/usr/bin/env python3
"""Plots of `zerodp sweep` (docs/planner.md): reads sweep.csv and gpt2xl_global_batch.csv from IN_DIR,
writes memory_by_category.png, predicted_vs_measured.png and global_batch.png to OUT_DIR.

usage: plot_sweep.py IN_DIR OUT_DIR     (`zerodp sweep` runs it on its --out-dir, docs/benchmarks/sweep/ by default)"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

in_dir, out_dir = sys.argv[1], sys.argv[2]
with open(os.path.join(in_dir, "sweep.csv")) as f:
    runs = [r for r in csv.DictReader(f)]
with open(os.path.join(in_dir, "gpt2xl_global_batch.csv")) as f:
    ref = [r for r in csv.DictReader(f)]
for r in runs:
    for k, v in r.items():
        r[k] = int(v) if v not in ("", None) else None
MB = 1e6
budget = runs[0]["memory_budget"]


def largest(world, stage):
    fit = [r for r in runs if r["world"] == world and r["stage"] == stage and r["fits"]]
    return max(fit, key=lambda r: r["micro_batch"]) if fit else None


# 1. Memory by category at each stage's largest micro-batch (the world of the stage sweep: the most
#    common world among stage 1 and 3 runs).
sweep_world = max({r["world"] for r in runs if r["stage"] in (1, 3)} or {runs[0]["world"]})
cats = [("param", "param"), ("grad", "grad"), ("master", "master"), ("optim", "optim"),
        ("gathered", "gathered"), ("comm", "comm"), ("act", "act")]
fig, ax = plt.subplots(figsize=(7, 4.5))
for stage in range(4):
    r = largest(sweep_world, stage)
    if r is None:
        continue
    bottom = 0
    for i, (key, label) in enumerate(cats):
        v = (r[f"measured_{key}"] or 0) / MB
        ax.bar(stage, v, bottom=bottom, color=f"C{i}", label=label if stage == 0 else None)
        bottom += v
    ax.plot([stage - 0.4, stage + 0.4], [r["measured_total"] / MB] * 2, "k-", lw=1)
    ax.plot(stage, r["predicted_total"] / MB, "kx", ms=9, label="predicted total" if stage == 0 else None)
    ax.text(stage, bottom * 1.01, f"B={r['micro_batch']}", ha="center", va="bottom", fontsize=8)
ax.axhline(budget / MB, color="r", ls="--", lw=1, label="budget")
ax.set_xticks(range(4), [f"stage {s}" for s in range(4)])
ax.set_ylabel("peak bytes per rank (MB); stacked: each category's peak")
ax.set_title(f"Measured memory by category at the largest micro-batch, W={sweep_world}")
ax.legend(fontsize=7, ncol=2)
fig.tight_layout()
fig.savefig(os.path.join(out_dir, "memory_by_category.png"), dpi=110)

# 2. Predicted against measured, every run that fit.
fig, ax = plt.subplots(figsize=(5.5, 5))
fit = [r for r in runs if r["fits"]]
for key, marker in (("total", "o"), ("act", "s")):
    xs = [r[f"measured_{key}"] / MB for r in fit]
    ys = [r[f"predicted_{key}"] / MB for r in fit]
    ax.scatter(xs, ys, marker=marker, s=18, label=key, alpha=0.7)
hi = max(max(r["measured_total"], r["predicted_total"]) for r in fit) / MB * 1.05
ax.plot([0, hi], [0, hi], "k-", lw=0.8, label="equal")
ax.fill_between([0, hi], [0, 0.9 * hi], [0, 1.1 * hi], color="grey", alpha=0.15, label="±10%")
ax.set_xlabel("measured peak (MB)")
ax.set_ylabel("predicted (MB)")
ax.set_title("zerodp estimate against real runs")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(out_dir, "predicted_vs_measured.png"), dpi=110)

# 3. Global batch reachable against W: plain DP (stage 0) against ZeRO-2.
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.5))
worlds = sorted({r["world"] for r in runs if r["stage"] in (0, 2)})
for stage, label in ((0, "DP (stage 0)"), (2, "ZeRO-2")):
    ws, meas, pred = [], [], []
    for w in worlds:
        tried = [r for r in runs if r["world"] == w and r["stage"] == stage]
        if not tried:
            continue
        r = largest(w, stage)
        ws.append(w)
        meas.append(w * (r["micro_batch"] if r else 0))
        pred.append(w * tried[0]["predicted_max_micro_batch"])
    a.plot(ws, meas, "o-", label=f"{label}, measured")
    a.plot(ws, pred, "x--", label=f"{label}, predicted")
a.set_xlabel("W (ranks)")
a.set_ylabel("global batch W·B (sequences)")
a.set_xticks(worlds)
a.set_title(f"Sweep model under a {budget / MB:.0f} MB budget per rank")
a.legend(fontsize=8)
for stage, label in ((0, "DP (stage 0)"), (2, "ZeRO-2")):
    for ckpt, style in ((0, "-"), (1, ":")):
        rows = [r for r in ref if int(r["stage"]) == stage and int(r["activation_checkpointing"]) == ckpt]
        b.plot([int(r["world"]) for r in rows], [int(r["global_batch"]) for r in rows], style, marker="o", ms=3,
               label=f"{label}{', checkpointing' if ckpt else ''} (zerodp estimate)")
b.scatter([8, 8], [120, 168], c=["C0", "C1"], marker="*", s=120, zorder=5,
          label="Megatron gpt2-xl R7-R12 at W=8: DP 120, ZeRO-2 168 (reported)")
b.set_xscale("log", base=2)
b.set_yscale("log", base=2)
b.set_xlabel("W (GPUs)")
b.set_ylabel("global batch W·B (sequences of 1024)")
gpu = int(ref[0]["gpu_memory"]) / 1e9
b.set_title(f"GPT-2 XL, bf16, fp32 grad accum., {gpu:.0f} GB GPUs (estimate)")
b.legend(fontsize=6.5)
fig.tight_layout()
fig.savefig(os.path.join(out_dir, "global_batch.png"), dpi=110)
print("wrote memory_by_category.png, predicted_vs_measured.png, global_batch.png")
