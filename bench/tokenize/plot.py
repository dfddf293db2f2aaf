"""Bar plot of bench.py's results.json: MB/s of zerodp, tiktoken and tokenizers per text and thread
count. Uses Debian's matplotlib (/usr/bin/python3).  plot.py results.json out.png"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

res = json.load(open(sys.argv[1]))
runs = res["runs"]
labels = ["%s\n%d thread%s" % (r["text"], r["threads"], "" if r["threads"] == 1 else "s") for r in runs]
kinds = [("zerodp", "#1f77b4"), ("tiktoken", "#ff7f0e"), ("tokenizers", "#2ca02c")]
fig, ax = plt.subplots(figsize=(8, 4))
w = 0.27
for k, (kind, color) in enumerate(kinds):
    xs = [i + (k - 1) * w for i in range(len(runs))]
    ys = [r[kind] for r in runs]
    ax.bar(xs, ys, w, label=kind, color=color)
    for x, y in zip(xs, ys):
        ax.text(x, y, "%.0f" % y, ha="center", va="bottom", fontsize=7)
ax.set_xticks(range(len(runs)))
ax.set_xticklabels(labels, fontsize=8)
ax.set_ylabel("MB/s")
ax.set_title("Byte-level BPE, Llama-3-style vocabulary of %d\n%s, %s" % (res["vocab"], res["cpu"], res["date"]),
             fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
