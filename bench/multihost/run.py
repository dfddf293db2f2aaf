#!/usr/bin/env python3
"""When does hybrid sharding pay? Step time on 2 test hosts x 2 ranks (network namespaces joined by a
veth pair, tests/scripts/zdp_hosts.py) against the bandwidth of the link between them (tc netem,
each direction, with a fixed latency), for ZeRO stage 3 sharded over all 4 ranks (full sharding) and
over the 2 ranks of each host (hybrid: --shard-group-size node), at 1 and 4 accumulation micro-steps.

Full sharding sends every gather and reduce-scatter around a ring that crosses the link, once per
micro-step; hybrid keeps them on the host and sends across only the all-reduce of each rank's shard,
once per step, at the price of twice the model states per rank. The measured step time is the
median of the steps after the first two; the bytes that crossed a group boundary come from the
metrics' bytes_sent_inter_group.

usage: run.py ZERODP OUT_DIR [--quick]      (root; writes OUT_DIR/multihost.csv and multihost.png)
"""
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "scripts"))
import zdp_test as zt  # noqa: E402
from zdp_hosts import TestHosts  # noqa: E402

if len(sys.argv) < 3:
    sys.exit(__doc__)
ZERODP, OUT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
QUICK = "--quick" in sys.argv[3:]
why_not = TestHosts.unavailable()
if why_not:
    sys.exit(f"run.py: no test hosts here: {why_not}")
os.makedirs(OUT, exist_ok=True)

DELAY_MS = 0.5  # one way: 1 ms round trip, a link between racks or a slow cloud network
RATES_MBIT = [100, 1000] if QUICK else [100, 300, 1000, 3000, 10000, None]  # None: no shaping
STEPS = 4 if QUICK else 5
MODEL = dict(layers=4, heads=4, embd=256, vocab=256, ctx=64)

work = zt.workdir("bench-multihost")
tokens, init = zt.make_inputs(ZERODP, work, seed=3, text_bytes=200000, **MODEL)
base = ["train", "--init", init, "--data", tokens, "--steps", str(STEPS), "--micro-batch", "2", "--seq", "64",
        "--zero-stage", "3", "--log-every", "0", "--comm-timeout", "0"]
MODES = [("full", []), ("hybrid", ["--shard-group-size", "node"])]

rows = []
with TestHosts(work) as hosts:
    for rate in RATES_MBIT:
        try:
            qdisc = hosts.shape(DELAY_MS, rate)
        except RuntimeError as e:  # no netem in this kernel: the bandwidth alone (tbf)
            print(f"run.py: {e}; shaping the bandwidth only", flush=True)
            DELAY_MS = 0.0
            qdisc = hosts.shape(0.0, rate)
        for accum in (1, 4):
            for mode, extra in MODES:
                metrics = os.path.join(work, f"m-{mode}-{accum}-{rate}.jsonl")
                cmd = hosts.mpirun([ZERODP] + base + ["--accum", str(accum), "--metrics", metrics] + extra,
                                   mpi_timeout=580)
                r = zt.launch(cmd, timeout=600)
                if r.code != 0:
                    sys.exit(f"run.py: {mode} G={accum} at {rate} Mbit/s failed (exit {r.code}): {r.err[-2000:]}")
                m = zt.read_metrics(metrics)
                ms = [e["ms"] for e in m if e.get("event") == "step"][2:]
                inter = [e for e in m if e.get("event") == "traffic"]
                crossed = sum(sum(e["bytes_sent_inter_group"].values()) for e in inter) if mode == "hybrid" else None
                row = {"rate_mbit": rate or "", "delay_ms": DELAY_MS, "qdisc": qdisc, "accum": accum, "mode": mode,
                       "step_ms": round(statistics.median(ms), 1), "step_ms_min": round(min(ms), 1),
                       "step_ms_max": round(max(ms), 1), "inter_group_bytes_per_step_all_ranks":
                       (crossed // STEPS) if crossed is not None else ""}
                rows.append(row)
                print(row, flush=True)

with open(os.path.join(OUT, "multihost.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("run.py: matplotlib is missing (python3-matplotlib): the CSV is written, the plot is not")

unshaped = max(r for r in RATES_MBIT if r) * 3  # where "no shaping" is drawn
fig, ax = plt.subplots(figsize=(7, 4.2))
for accum, style in ((1, "-"), (4, "--")):
    for mode, color in (("full", "tab:red"), ("hybrid", "tab:blue")):
        pts = [(r["rate_mbit"] or unshaped, r["step_ms"]) for r in rows if r["accum"] == accum and r["mode"] == mode]
        pts.sort()
        label = f"{'full sharding (4 ranks)' if mode == 'full' else 'hybrid (2 per host)'}, G={accum}"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, marker="o", label=label)
ax.set_xscale("log")
ax.set_yscale("log")
ticks = sorted({r["rate_mbit"] or unshaped for r in rows})
ax.set_xticks(ticks)
ax.set_xticklabels([("veth\n(no limit)" if t == unshaped else (f"{t // 1000}G" if t >= 1000 else f"{t}M"))
                    for t in ticks])
latency = f"netem latency {DELAY_MS} ms one way" if DELAY_MS else "tbf, no added latency"
ax.set_xlabel(f"link bandwidth between the 2 hosts, each way ({latency})")
ax.set_ylabel("step time (ms, median)")
ax.set_title("ZeRO-3 on 2 hosts x 2 ranks: full vs hybrid sharding")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(OUT, "multihost.png"), dpi=110)
print(f"wrote {OUT}/multihost.csv and multihost.png")
