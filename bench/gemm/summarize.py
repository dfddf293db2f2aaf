#!/usr/bin/env python3
"""Markdown tables from bench/gemm/run.sh's CSVs: python3 summarize.py RESULTS_DIR"""
import csv
import sys
from collections import defaultdict
from pathlib import Path


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


COLS = [("openblas", "f32"), ("mkl", "f32"), ("mkl", "bf16"), ("mkl", "f16"),
        ("onednn", "f32"), ("onednn", "bf16"), ("onednn", "f16"),
        ("onednn3", "f32"), ("onednn3", "bf16"), ("onednn3", "f16")]
LIBNAME = {"openblas": "OpenBLAS", "mkl": "MKL", "onednn": "oneDNN 2.6", "onednn3": "oneDNN 3.2"}


def case_key(r):
    return (r["case"], r["trans"], r["M"], r["N"], r["K"])


def main_tables(rows):
    by = {}
    order = []
    for r in rows:
        k = case_key(r)
        if k not in order:
            order.append(k)
        by[(k, r["lib"], r["dtype"], r["threads"])] = r
    threads = sorted({r["threads"] for r in rows}, key=int)
    out = []
    for t in threads:
        out.append(f"\n#### {t} thread{'s' if t != '1' else ''}: GFLOP/s (median)\n")
        hdr = ["case", "op", "M×N×K"] + [f"{LIBNAME[l]} {d}" for l, d in COLS] + [
            "MKL bf16 / OpenBLAS f32", "oneDNN 2.6 bf16 / OpenBLAS f32", "oneDNN 3.2 bf16 / OpenBLAS f32"]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "---|" * len(hdr))
        for k in order:
            cells = [k[0], k[1], f"{k[2]}×{k[3]}×{k[4]}"]
            g = {}
            for l, d in COLS:
                r = by.get((k, l, d, t))
                v = num(r["gflops"]) if r else None
                g[(l, d)] = v
                cells.append(f"{v:.0f}" if v else "n/a")

            def ratio(a, b):
                return f"{g[a] / g[b]:.2f}" if g.get(a) and g.get(b) else "n/a"
            cells += [ratio(("mkl", "bf16"), ("openblas", "f32")),
                      ratio(("onednn", "bf16"), ("openblas", "f32")),
                      ratio(("onednn3", "bf16"), ("openblas", "f32"))]
            out.append("| " + " | ".join(cells) + " |")
        # Sums over a model's GEMMs: the time one training step spends in them.
        out.append("")
        out.append(f"Sum of the median times of one model's GEMMs ({t} thread{'s' if t != '1' else ''}), ms:\n")
        hdr = ["model"] + [f"{LIBNAME[l]} {d}" for l, d in COLS]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "---|" * len(hdr))
        for prefix, label in (("L4.", "L4 C256, B·T=1024 (12 GEMMs, one layer)"),
                              ("124M.", "GPT-2 124M, B·T=256 (15 GEMMs: one layer + LM head)")):
            cells = [label]
            for l, d in COLS:
                ms = [num(by[(k, l, d, t)]["ms_median"]) for k in order
                      if k[0].startswith(prefix) and (k, l, d, t) in by]
                cells.append(f"{sum(ms):.2f}" if ms and all(ms) else "n/a")
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def errors_table(rows):
    agg = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        s, f = num(r["err_same"]), num(r["err_fp32"])
        if s is None:
            continue
        a = agg[(r["lib"], r["dtype"])]
        a[0] = max(a[0], s)
        a[1] = max(a[1], f)
        a[2] += 1
    out = ["| library | dtype | cases | max err vs fp64 ref, same rounded inputs | max err vs fp64 ref, fp32 inputs |",
           "|---|---|---|---|---|"]
    for (l, d), (s, f, n) in sorted(agg.items()):
        out.append(f"| {LIBNAME[l]} | {d} | {n} | {s:.2e} | {f:.2e} |")
    return "\n".join(out)


def impl_table(rows, nocache):
    """oneDNN, 1 thread: implementations and primitive creation times, per library and dtype."""
    import statistics
    nc = defaultdict(list)
    for r in nocache:
        if num(r["create_cached_ms"]) is not None:
            nc[r["dtype"]].append(num(r["create_cached_ms"]))
    agg = defaultdict(lambda: {"impl": set(), "cold": [], "hit": []})
    for r in rows:
        if not r["lib"].startswith("onednn") or not num(r["gflops"]) or r["threads"] != "1":
            continue
        a = agg[(r["lib"], r["dtype"])]
        a["impl"].add(r["impl"].strip('"'))
        a["cold"].append(num(r["create_cold_ms"]))
        a["hit"].append(num(r["create_cached_ms"]))

    def mm(v):
        return f"{statistics.median(v):.3f} / {max(v):.3f}" if v else "-"
    out = ["| library | dtype | implementation | first creation, ms (median / max) | re-creation, cache hit | "
           "re-creation, cache off (L4 cases) |", "|---|---|---|---|---|---|"]
    for (l, d), a in sorted(agg.items()):
        off = mm(nc[d]) if l == "onednn" else "-"
        out.append(f"| {LIBNAME[l]} | {d} | {', '.join(sorted(a['impl']))} | {mm(a['cold'])} | {mm(a['hit'])} | {off} |")
    return "\n".join(out)


def fallback_table(rows):
    """ISA cap × library × dtype against the cases measured under each cap (GFLOP/s)."""
    cases, cells, impls = [], {}, defaultdict(set)
    for r in rows:
        c = f"{r['case']} {r['trans']}"
        if c not in cases:
            cases.append(c)
        k = (r["cap"], r["lib"], r["dtype"])
        g = num(r["gflops"])
        cells.setdefault(k, {})[c] = f"{g:.0f}" if g else "unsupp."
        impls[k].add(r["impl"] if g else "-")
    out = ["| ISA cap | library | dtype | " + " | ".join(cases) + " | implementation |",
           "|---|---|---|" + "---|" * len(cases) + "---|"]
    for k, v in cells.items():
        impl = ", ".join(sorted(i.strip('"') for i in impls[k] if i != "-")) or "-"
        out.append(f"| {k[0]} | {LIBNAME[k[1]]} | {k[2]} | " + " | ".join(v.get(c, "") for c in cases)
                   + f" | {impl} |")
    return "\n".join(out)


def unsupported(rows):
    seen = set()
    out = []
    for r in rows:
        if not num(r["gflops"]):
            k = (r["lib"], r["dtype"], r["impl"])
            if k not in seen:
                seen.add(k)
                out.append(f"- {LIBNAME[r['lib']]} {r['dtype']}: {r['impl']}")
    return "\n".join(out)


def best_rounds(rows):
    """Each (library, dtype, case, threads): the row of the round with the highest GFLOP/s."""
    best = {}
    order = []
    for r in rows:
        k = (r["lib"], r["dtype"], case_key(r), r["threads"])
        if k not in best:
            order.append(k)
            best[k] = r
        elif (num(r["gflops"]) or 0) > (num(best[k]["gflops"]) or 0):
            best[k] = r
    return [best[k] for k in order]


def rounds_table(rows):
    """Every round's median for the 2048³ cases, to show the spread between rounds."""
    rounds = sorted({r.get("round", "1") for r in rows}, key=int)
    vals = defaultdict(dict)
    for r in rows:
        if r["case"] == "sq2048" and num(r["gflops"]):
            vals[(r["lib"], r["dtype"], r["trans"], r["threads"])][r.get("round", "1")] = num(r["gflops"])
    out = ["| library | dtype | op | threads | " + " | ".join(f"round {x}" for x in rounds) + " |",
           "|---|---|---|---|" + "---|" * len(rounds)]
    for (l, d, tr, t), v in sorted(vals.items(), key=lambda kv: (kv[0][3], kv[0][0], kv[0][1], kv[0][2])):
        out.append(f"| {LIBNAME[l]} | {d} | {tr} | {t} | " +
                   " | ".join(f"{v[x]:.0f}" if x in v else "" for x in rounds) + " |")
    return "\n".join(out)


def main():
    d = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "results")
    all_rows = load(d / "main.csv")
    rows = best_rounds(all_rows)
    nocache = load(d / "onednn_nocache.csv") if (d / "onednn_nocache.csv").exists() else []
    print("### Throughput (each case: the best round's median)\n")
    print(main_tables(rows))
    print("\n### 2048³ in every round (GFLOP/s, median of the round's repetitions)\n")
    print(rounds_table(all_rows))
    print("\n### Unsupported\n")
    print(unsupported(rows))
    print("\n### Correctness\n")
    print(errors_table(rows))
    print("\n### oneDNN implementations and primitive creation\n")
    print(impl_table(rows, nocache))
    if (d / "fallback.csv").exists():
        print("\n### Emulated fallbacks (1 thread)\n")
        print(fallback_table(load(d / "fallback.csv")))


if __name__ == "__main__":
    main()
