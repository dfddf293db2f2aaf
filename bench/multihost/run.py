#!/usr/bin/env python3
"""When does hybrid sharding pay, and what do host-aware collectives give? Step time on 2 test hosts x 2
ranks (network namespaces joined by a veth pair, tests/pylib/zdptest/hosts.py) against the bandwidth
of the link between them (tc netem, each direction, with a fixed latency), for ZeRO stage 3 sharded
over all 4 ranks with flat collectives (full: --collectives flat) and with host-aware ones (host-aware:
reduce-scatters and all-gathers in two levels), and over the 2 ranks of each host (hybrid:
--shard-group-size node), at 1 and 4 accumulation micro-steps.

Full sharding sends every gather and reduce-scatter around a ring that crosses the link, once per
micro-step; hybrid keeps them on the host and sends across only the all-reduce of each rank's shard,
once per step, at the price of twice the model states per rank. The measured step time is the
median of the steps after the first two; the bytes that crossed a group boundary come from the
metrics' bytes_sent_inter_host (summed over the ranks, per step).

The link: a veth pair shaped with `tc netem` (latency and bandwidth) where the kernel has netem;
otherwise the user-space wire of tests/pylib/zdptest/wire.py (TUN devices, latency and bandwidth),
or with --link tbf a veth pair shaped by `tc tbf` (bandwidth alone, no added latency). The wire's
own forwarding runs on the same cores as the ranks.

usage: run.py ZERODP OUT_DIR [--quick] [--link netem|wire|tbf]
              [--modes full,host-aware,hybrid,qwz,qgz,hpz,zeropp]
              [--rates 100,1000,none] [--accum 1,4] [--from-csv CSV]
       (--from-csv: plot an earlier run's CSV again instead of measuring)
       (root; writes OUT_DIR/multihost-<link>.csv and multihost-<link>.png; needs zdptest:
       PYTHONPATH=tests/pylib, or `pip install tests/pylib` first)
"""
import csv
import math
import os
import statistics
import sys

from zdptest import harness as zt
from zdptest.hosts import TestHosts

if len(sys.argv) < 3:
    sys.exit(__doc__)
ZERODP, OUT = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
QUICK = "--quick" in sys.argv[3:]


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv[3:] else default


LINK = option("--link", None)
FROM_CSV = option("--from-csv", None)
why_not = TestHosts.unavailable() if FROM_CSV is None else None
if why_not:
    sys.exit(f"run.py: no test hosts here: {why_not}")
os.makedirs(OUT, exist_ok=True)
if LINK is None:
    LINK = "netem" if TestHosts.has_netem() else "wire"
if LINK not in ("netem", "wire", "tbf"):
    sys.exit(f"run.py: --link must be netem, wire or tbf, got {LINK}")

DELAY_MS = 0.5  # one way: 1 ms round trip, a link between racks or a slow cloud network
RATES_MBIT = [100, 1000] if QUICK else [100, 300, 1000, 3000, 10000, None]  # None: no shaping
if "--rates" in sys.argv[3:]:
    RATES_MBIT = [None if r == "none" else int(r) for r in option("--rates", "").split(",")]
ACCUMS = [int(a) for a in option("--accum", "1,4").split(",")]
STEPS = 4 if QUICK else 8
MODEL = dict(layers=4, heads=4, embd=256, vocab=256, ctx=64)

work = zt.workdir("bench-multihost")
tokens, init = zt.make_inputs(ZERODP, work, seed=3, text_bytes=200000, **MODEL)
base = ["train", "--init", init, "--data", tokens, "--steps", str(STEPS), "--micro-batch", "2", "--seq", "64",
        "--zero-stage", "3", "--log-every", "0", "--comm-timeout", "0"]
ALL_MODES = {"full": ["--collectives", "flat"], "host-aware": ["--collectives", "host-aware"],
             "hybrid": ["--shard-group-size", "node"],
             # ZeRO++ (host-aware collectives): each part alone, and the three together.
             "qwz": ["--zero-quantized-weights"], "qgz": ["--zero-quantized-gradients"],
             "hpz": ["--hpz-partition-size", "2"],
             "zeropp": ["--zero-quantized-weights", "--zero-quantized-gradients", "--hpz-partition-size", "2"]}
MODES = [(m, ALL_MODES[m]) for m in option("--modes", "full,host-aware,hybrid").split(",")]

rows = []
if FROM_CSV is not None:
    with open(FROM_CSV, newline="") as f:
        for r in csv.DictReader(f):
            r["rate_mbit"] = int(r["rate_mbit"]) if r["rate_mbit"] else ""
            r["accum"] = int(r["accum"])
            for k in ("step_ms", "step_ms_min", "step_ms_max", "delay_ms"):
                r[k] = float(r[k])
            r["inter_host_bytes_per_step_all_ranks"] = int(r["inter_host_bytes_per_step_all_ranks"])
            rows.append(r)
    DELAY_MS = rows[0]["delay_ms"]
    RATES_MBIT = sorted({r["rate_mbit"] for r in rows if r["rate_mbit"]}) + [None]
    ACCUMS = sorted({r["accum"] for r in rows})
    MODES = [(m, ALL_MODES[m]) for m in dict.fromkeys(r["mode"] for r in rows)]
else:
    if LINK == "tbf":
        DELAY_MS = 0.0
    with TestHosts(work, link="wire" if LINK == "wire" else "veth") as hosts:
        for rate in RATES_MBIT:
            qdisc = hosts.shape(DELAY_MS, rate)
            for accum in ACCUMS:
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
                    crossed = sum(sum(e["bytes_sent_inter_host"].values()) for e in inter)
                    row = {"rate_mbit": rate or "", "delay_ms": DELAY_MS, "qdisc": qdisc, "accum": accum, "mode": mode,
                           "step_ms": round(statistics.median(ms), 1), "step_ms_min": round(min(ms), 1),
                           "step_ms_max": round(max(ms), 1), "inter_host_bytes_per_step_all_ranks": crossed // STEPS}
                    rows.append(row)
                    print(row, flush=True)

with open(os.path.join(OUT, f"multihost-{LINK}.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("run.py: matplotlib is missing (python3-matplotlib): the CSV is written, the plot is not")

# The ring model of what crosses the link each way per step (fp32, W = 4 on 2 hosts, Ψ parameters):
# full sharding's rings cross it once each way, carrying (W-1)/W of each of stage 3's two gathers and
# one reduce-scatter of 4Ψ bytes, every micro-step; hybrid sends each rank's shard (4Ψ/2) once a step
# around a ring of 2 replicas, one per host: 2 ranks x 4Ψ/2 each way. Model: the step time of full
# sharding without shaping plus those bytes at the link's rate (the acceptance line of host-aware
# collectives: within 1.15x of it).
header, _, _ = zt.parse_safetensors(zt.read_bytes(init))
psi = sum(math.prod(e["shape"]) for e in header.values())


def crossing_bytes(mode, accum):
    return accum * 3 * 0.75 * 4 * psi if mode != "hybrid" else 2 * (4 * psi / 2)


def step_of(mode, accum, rate):
    return next((r["step_ms"] for r in rows if r["accum"] == accum and r["mode"] == mode and r["rate_mbit"] == (rate or "")),
                None)


def ring_model_ms(mode, accum, rate):
    base = step_of("full" if mode != "hybrid" else "hybrid", accum, None)
    if base is None or not rate:
        return base
    return base + crossing_bytes(mode, accum) / (rate * 1e6 / 8) * 1e3


print("\nstep time (ms, median) against the ring model (full sharding's unshaped step + its ring bytes at the rate):")
for accum in ACCUMS:
    for rate in RATES_MBIT:
        model = ring_model_ms("full", accum, rate)
        cells = []
        for mode, _ in MODES:
            ms = step_of(mode, accum, rate)
            if ms is not None:
                cells.append(f"{mode} {ms:.0f}" + (f" ({ms / model:.2f}x the model)" if model and mode != "hybrid" else ""))
        print(f"  G={accum} {rate or 'unshaped'} Mbit/s: model {model and round(model)}; " + ", ".join(cells))

COLORS = {"full": "tab:red", "host-aware": "tab:green", "hybrid": "tab:blue", "qwz": "tab:orange",
          "qgz": "tab:brown", "hpz": "tab:pink", "zeropp": "tab:purple"}
LABELS = {"full": "full sharding, flat (4 ranks)", "host-aware": "full sharding, host-aware",
          "hybrid": "hybrid (2 per host)", "qwz": "ZeRO++ qwZ (int8 weight gathers)",
          "qgz": "ZeRO++ qgZ (int8 gradient partials)", "hpz": "ZeRO++ hpZ (secondary copy per host)",
          "zeropp": "ZeRO++ qwZ + qgZ + hpZ"}
unshaped = max(r for r in RATES_MBIT if r) * 3  # where "no shaping" is drawn
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [3, 2]})
styles = {1: "-", 4: "--"}
for accum in ACCUMS:
    style = styles.get(accum, "-.")
    for mode, _ in MODES:
        pts = sorted((r["rate_mbit"] or unshaped, r["step_ms"]) for r in rows if r["accum"] == accum and r["mode"] == mode)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=COLORS[mode], marker="o",
                label=f"{LABELS[mode]}, G={accum}")
        if mode in ("full", "hybrid") and step_of(mode, accum, None) is not None:
            rates = sorted(r for r in RATES_MBIT if r)
            ax.plot(rates, [ring_model_ms(mode, accum, r) for r in rates], ":", color=COLORS[mode], linewidth=1,
                    alpha=0.7)
ax.plot([], [], ":", color="gray", label="ring model: unshaped step + ring bytes / rate")
ax.set_xscale("log")
ax.set_yscale("log")
ticks = sorted({r["rate_mbit"] or unshaped for r in rows})
ax.set_xticks(ticks)
ax.set_xticklabels([("no\nlimit" if t == unshaped else (f"{t // 1000}G" if t >= 1000 else f"{t}M"))
                    for t in ticks])
latency = {"netem": f"tc netem, latency {DELAY_MS} ms one way", "tbf": "tc tbf, no added latency",
           "wire": f"user-space wire, latency {DELAY_MS} ms one way"}[LINK]
ax.set_xlabel(f"link bandwidth between the 2 hosts, each way ({latency})")
ax.set_ylabel("step time (ms, median)")
ax.set_title("ZeRO-3 on 2 hosts x 2 ranks")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=7)
# Right: each mode's speed-up over flat full sharding (above 1: faster).
for accum in ACCUMS:
    style = styles.get(accum, "-.")
    for mode, _ in MODES:
        if mode == "full":
            continue
        pts = []
        for t in ticks:
            rate = None if t == unshaped else t
            f, m = step_of("full", accum, rate), step_of(mode, accum, rate)
            if f and m:
                pts.append((t, f / m))
        ax2.plot([p[0] for p in pts], [p[1] for p in pts], style, color=COLORS[mode], marker="o",
                 label=f"{mode}, G={accum}")
ax2.axhline(1.0, color="gray", linewidth=1)
ax2.set_xscale("log")
ax2.set_yscale("log")
ax2.set_xticks(ticks)
ax2.set_xticklabels(ax.get_xticklabels())
ax2.set_ylabel("flat full sharding's step / the mode's step")
ax2.set_title("speed-up over flat full sharding")
ax2.grid(True, which="both", alpha=0.3)
ax2.legend(fontsize=7)
fig.tight_layout()
fig.savefig(os.path.join(OUT, f"multihost-{LINK}.png"), dpi=110)
for accum in ACCUMS:
    crossed = {mode: next((r["inter_host_bytes_per_step_all_ranks"] for r in rows
                           if r["accum"] == accum and r["mode"] == mode), None) for mode, _ in MODES}
    print(f"G={accum}: bytes crossing the link each way per step, ring model: full "
          f"{crossing_bytes('full', accum) / 1e6:.1f} MB, hybrid {crossing_bytes('hybrid', accum) / 1e6:.1f} MB "
          f"({psi} parameters); counted (bytes_sent_inter_host, both ways): " +
          ", ".join(f"{m} {b / 1e6:.1f} MB" for m, b in crossed.items() if b is not None))
print(f"wrote {OUT}/multihost-{LINK}.csv and multihost-{LINK}.png")
