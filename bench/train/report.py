#!/usr/bin/python3
"""Tables of the training benchmarks from the results bench/train/run.sh wrote, and (--write-docs) the
two training sections of docs/benchmarks/training.md: "Training step (one rank)" and "ZeRO stages against
PyTorch DDP (W = 2)". Only those sections are replaced (appended when absent); the rest of the file,
such as the "Communication" section, is left as it is.

Timing: every run's first --warmup steps are dropped; the per-step times of the remaining steps of all
rounds of the same configuration are pooled and their median is the figure (ms per step); tokens/s =
tokens per step / median. zerodp's times come from its metrics ("ms" of each step, rank 0), PyTorch's
from bench/train/torch_gpt2.py (rank 0). GFLOP/s use zdptest/flops.py's causal count (tests/pylib: run.sh
puts it on PYTHONPATH; by hand, `PYTHONPATH=tests/pylib` or `pip install tests/pylib` first).
"""
import argparse
import glob
import json
import os
import re
import statistics

from zdptest import bench_report as br
from zdptest import flops
from zdptest.bench_report import median, replace_section  # noqa: F401  (replace_section: test_bench_train.py)

ONE_RANK = [  # tag, label, L, H, C, V, B, T
    ("l4c256", "GPT-2 L4 C256 H4 V256", 4, 4, 256, 256, 8, 128),
    ("gpt2-124m", "GPT-2 small 124M (L12 C768 H12 V50257)", 12, 12, 768, 50257, 1, 256),
]
W2_STAGES = [0, 1, 2, 3]
SECTION_ONE = "## Training step (one rank)"
SECTION_W2 = "## ZeRO stages against PyTorch DDP (W = 2)"
NOTES_DIR = os.path.dirname(os.path.abspath(__file__))


def zerodp_runs(res, pattern):
    """[(ms list, comm_wait_ms list, losses)] of every round's metrics file."""
    runs = []
    for path in sorted(glob.glob(os.path.join(res, pattern))):
        steps = br.step_records(path)
        runs.append(([s["ms"] for s in steps], [s.get("comm_wait_ms", 0.0) for s in steps],
                     [s["loss"] for s in steps]))
    return runs


def torch_runs(res, pattern):
    runs = []
    for path in sorted(glob.glob(os.path.join(res, pattern))):
        j = br.last_json_line(path)
        if j is None:
            continue
        runs.append((j["ms"], [0.0] * len(j["ms"]), j["loss"]))
    return runs


def pooled(runs, warmup, column=0):
    vals = []
    for r in runs:
        vals.extend(r[column][warmup:])
    return vals


def peaks(res):
    out = {}
    for path in glob.glob(os.path.join(res, "peak-*.json")):
        tag = os.path.basename(path)[len("peak-"):-len(".json")]
        lines = open(path).read().strip().splitlines()
        if lines:  # a repeated measurement appends: the last line counts
            out[tag] = json.loads(lines[-1])
    return out


def best_peak(pk, threads):
    vals = [v["best_gflops"] for k, v in pk.items() if k.startswith(f"{threads}t-")]
    return max(vals) if vals else float("nan")


def loads(res):
    """{run name: [(1-minute load average, CPUs' busy fraction just before, fraction of the machine other
    people's work took during the run) for each round]}"""
    out = {}
    path = os.path.join(res, "loads.txt")
    if os.path.exists(path):
        for line in open(path):
            f = line.rstrip("\n").split("\t")
            num = [float(x) for x in f[1:4]] + [float("nan")] * (4 - len(f))
            out.setdefault(f[0], []).append(tuple(num))
    return out


def load_text(ld, name):
    """'load/load/... (others%/others%/...)' over the rounds."""
    v = ld.get(name)
    if not v:
        return "?"
    return "/".join(f"{l:.1f}" for l, _, _ in v) + " (" + "/".join(f"{100 * o:.0f}" for _, _, o in v) + ")"


def round_medians(runs, warmup):
    return "/".join(f"{median(r[0][warmup:]):.0f}" for r in runs)


# ---- one rank ---------------------------------------------------------------------------------------

def one_rank_rows(res, threads, warmup, warmup_124m, torch_blas):
    peak = best_peak(peaks(res), threads)
    ld = loads(res)
    rows = []
    for tag, label, L, H, C, V, B, T in ONE_RANK:
        w = warmup if tag == "l4c256" else warmup_124m
        step_fl = flops.step_flops(L, C, V, B, T, causal=True)
        impls = [("zerodp", zerodp_runs(res, f"one-{tag}-zerodp-r*.jsonl"), f"one-{tag}-zerodp")]
        for v in torch_blas:
            impls.append((f"PyTorch ({v} OpenBLAS)", torch_runs(res, f"one-{tag}-torch-{v}-r*.json"),
                          f"one-{tag}-torch-{v}"))
        measured = []
        for name, runs, run_name in impls:
            if not runs:
                continue
            ms = median(pooled(runs, w))
            measured.append(dict(impl=name, ms=ms, n=len(pooled(runs, w)), loss0=runs[0][2][0] if runs[0][2] else None,
                                 load=load_text(ld, run_name), rounds=round_medians(runs, w)))
        torch_ms = [m["ms"] for m in measured if m["impl"].startswith("PyTorch")]
        best_torch = min(torch_ms) if torch_ms else float("nan")
        for m in measured:
            gfs = step_fl / (m["ms"] / 1e3) / 1e9
            rows.append(dict(model=label, batch=f"B{B} T{T}", tokens=B * T, flops=step_fl, peak=peak,
                             gflops=gfs, frac=gfs / peak, tok_s=B * T / (m["ms"] / 1e3),
                             vs_torch=best_torch / m["ms"], **m))
    return rows, peak


def one_rank_table(rows):
    header = ["model", "batch", "implementation", "ms/step", "rounds' medians", "tokens/s", "GFLOP/s", "of sgemm peak",
              "speed vs fastest PyTorch", "loss at step 0", "load avg (others' CPU %)"]
    cells = []
    for r in rows:
        loss0 = f"{r['loss0']:.4f}" if r["loss0"] is not None else "?"
        cells.append([r["model"], r["batch"], r["impl"], f"{r['ms']:.1f}", r["rounds"], f"{r['tok_s']:.0f}",
                      f"{r['gflops']:.1f}", f"{100 * r['frac']:.1f}%", br.ratio(r["vs_torch"]), loss0, r["load"]])
    return br.table(header, cells)


# ---- two ranks --------------------------------------------------------------------------------------

def w2_rows(res, warmup, threads1_peak):
    ld = loads(res)
    L, H, C, V, B, T = 4, 4, 256, 256, 8, 128
    tokens = 2 * B * T
    step_fl = 2 * flops.step_flops(L, C, V, B, T, causal=True)  # both ranks' micro-batches
    rows = []
    entries = [(f"zerodp ZeRO-{s}", zerodp_runs(res, f"w2-zerodp-s{s}-r*.jsonl"), f"w2-zerodp-s{s}", True)
               for s in W2_STAGES]
    entries += [("PyTorch DDP (gloo)", torch_runs(res, "w2-torch-ddp-r*.json"), "w2-torch-ddp", False),
                ("PyTorch DDP + ZeroRedundancyOptimizer", torch_runs(res, "w2-torch-zero1-r*.json"),
                 "w2-torch-zero1", False)]
    ddp_ms = None
    for name, runs, run_name, is_zerodp in entries:
        if not runs:
            continue
        ms_list = pooled(runs, warmup)
        ms = median(ms_list)
        row = dict(impl=name, ms=ms, tok_s=tokens / (ms / 1e3), n=len(ms_list), load=load_text(ld, run_name),
                   gflops=step_fl / (ms / 1e3) / 1e9, rounds=round_medians(runs, warmup))
        row["frac"] = row["gflops"] / (2 * threads1_peak)
        if is_zerodp:
            waits = pooled(runs, warmup, column=1)
            row["wait_ms"] = median(waits)
            row["wait_mean_ms"] = statistics.fmean(waits) if waits else float("nan")
        if name == "PyTorch DDP (gloo)":
            ddp_ms = ms
        rows.append(row)
    for r in rows:
        r["vs_ddp"] = ddp_ms / r["ms"] if ddp_ms else float("nan")
    return rows


def w2_table(rows):
    header = ["run", "ms/step", "rounds' medians", "tokens/s (both ranks)", "speed vs DDP", "GFLOP/s (of 2 x 1-thread peak)",
              "comm wait ms/step, median (mean)", "comm wait share", "load avg (others' CPU %)"]
    cells = []
    for r in rows:
        if "wait_ms" in r:
            wait = f"{r['wait_ms']:.1f} ({r['wait_mean_ms']:.1f})"
            share = f"{100 * r['wait_mean_ms'] / r['ms']:.1f}%"
        else:
            wait, share = "n/a", "n/a"
        cells.append([r["impl"], f"{r['ms']:.1f}", r["rounds"], f"{r['tok_s']:.0f}", br.ratio(r["vs_ddp"]),
                      f"{r['gflops']:.1f} ({100 * r['frac']:.0f}%)", wait, share, r["load"]])
    return br.table(header, cells)


# ---- docs -------------------------------------------------------------------------------------------

def commands_block(res, prefixes):
    """The commands of the runs whose names start with one of `prefixes`, once each (rounds repeat them)."""
    cmds = br.unique_commands(res, key=lambda name: re.sub(r"-(r\d+|start|end)$", "", name),
                              keep=lambda name: any(name.startswith(p) for p in prefixes))
    if cmds is None:
        return ""
    return "```\n" + "\n".join(re.sub(r"-r\d+\.jsonl", "-rN.jsonl", c) for c in cmds) + "\n```"


def notes(name):
    path = os.path.join(NOTES_DIR, name)
    return open(path).read().strip() if os.path.exists(path) else ""


def machine_text(env):
    return (f"Machine: {env.get('cpu', '?')}, {env.get('cores', '?')} cores (lscpu), shared with other jobs. "
            f"Date: {env.get('date', '?')}. Load average (1, 5, 15 min) at the start {env.get('load_start', '?')}, "
            f"at the end {env.get('load_end', '?').strip() or '?'}.\n"
            f"Versions: {env.get('zerodp', '?')}, {env.get('compiler', '?')}; {env.get('blas', '?')}; "
            f"{env.get('mpi', '?')}; PyTorch {env.get('torch', '?')} (Debian python3-torch) on Python "
            f"{env.get('python', '?')}.\n"
            f"Settings: threads={env.get('threads', '?')}.")


INPUTS = ("Inputs (bench/train/run.sh makes them under $OUT/data, the `data/` of the commands below):\n\n"
          "```\n"
          "zerodp tokenize --text data/tinyshakespeare.txt --out data/shakespeare.bin\n"
          "zerodp init --out data/l4c256.safetensors --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337\n"
          "zerodp init --out data/gpt2-124m.safetensors --layers 12 --heads 12 --embd 768 --vocab 50257 --ctx 1024 "
          "--seed 1337\n```")


def one_rank_section(env, res, rows, peak, pk, threads, warmup, warmup_124m):
    peak_runs = ", ".join(f"{k}: best {v['best_gflops']:.1f}, median {v['median_gflops']:.1f}"
                          for k, v in sorted(pk.items()))
    return "\n\n".join([
        SECTION_ONE,
        "Generated by `bench/train/run.sh` (bench/train/report.py); do not edit by hand, edit "
        "bench/train/notes_one_rank.md for the commentary.",
        machine_text(env),
        f"One process, {threads} threads (OMP_NUM_THREADS={threads}; PyTorch also torch.set_num_threads({threads})). "
        "fp32, AdamW (weight decay 0.1 on tensors of 2+ dimensions only), clipping at 1.0, lr 1e-3; the same "
        "initial weights (`zerodp init`, seed 1337) and the same batches (docs/reference/data-order.md#ranks, byte-level Shakespeare "
        "tokens: the 124M model keeps its 50257-entry vocabulary and head, the tokens just stay below 256). "
        f"A step is forward + backward + clipping + AdamW. ms/step: median over the steps after the first "
        f"{warmup} (L4) / {warmup_124m} (124M) of every round. "
        "GFLOP/s count every matmul at 2·M·N·K forward and twice that backward: the four linear layers of "
        "each block, attention QKᵀ and P·V counted causally (query t meets t+1 keys), and the tied LM head "
        "(tests/pylib/zdptest/flops.py; elementwise work not counted). "
        f"sgemm peak: `zerodp bench-train sgemm` (cblas_sgemm 2048³, the OpenBLAS the kernels use, "
        f"{threads} threads), the best of the measurements at the start of every round and at the end: "
        f"**{peak:.1f} GFLOP/s** ({peak_runs}). "
        "'loss at step 0' is a check that both sides train the same model on the same batch.",
        one_rank_table(rows),
        notes("notes_one_rank.md"),
        INPUTS,
        "Commands (each round runs them in this order; `bash bench/train/run.sh` runs everything):\n\n"
        + commands_block(res, ["peak-", "one-"]),
    ])


def w2_section(env, res, rows, pk, warmup):
    p1 = best_peak(pk, 1)
    return "\n\n".join([
        SECTION_W2,
        "Generated by `bench/train/run.sh` (bench/train/report.py); do not edit by hand, edit "
        "bench/train/notes_w2.md for the commentary.",
        machine_text(env),
        "Two processes on the same machine, one thread each (OMP_NUM_THREADS=1, torch.set_num_threads(1)), "
        + ("each bound to its own core (mpirun --bind-to core; the PyTorch ranks pinned likewise with "
           "sched_setaffinity); " if " bind=core" in " " + env.get("threads", "") else
           "not bound to cores (mpirun --bind-to none); ") +
        "GPT-2 L4 C256 H4 V256, B8 T128 per rank (2048 tokens a step), fp32, AdamW, clip 1.0. zerodp: "
        "`mpirun -n 2 zerodp train --zero-stage S` over its MPI backend; PyTorch: torch.multiprocessing.spawn "
        "of 2 processes meeting on 127.0.0.1, DistributedDataParallel over gloo (default 25 MB buckets) with "
        "torch.optim.AdamW, and the same with torch.distributed.optim.ZeroRedundancyOptimizer (ZeRO-1) "
        "wrapping AdamW. ms/step is rank 0's wall time of a whole step, median over the steps after the "
        f"first {warmup} of every round. comm wait: zerodp's `comm_wait_ms` (rank 0's time blocked in "
        "wait() on a collective, per step); PyTorch does not report it. GFLOP/s of both ranks together "
        f"against twice the one-thread sgemm peak ({p1:.1f} GFLOP/s).",
        w2_table(rows),
        notes("notes_w2.md"),
        "Commands (inputs as in the one-rank section):\n\n" + commands_block(res, ["peak-1t", "w2-"]),
    ])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--warmup-124m", type=int, default=2)
    ap.add_argument("--write-docs", metavar="FILE")
    a = ap.parse_args()
    env = br.read_env(a.results)
    torch_blas = env.get("torch_blas", "openmp").split()
    pk = peaks(a.results)
    rows, peak = one_rank_rows(a.results, a.threads, a.warmup, a.warmup_124m, torch_blas)
    wrows = w2_rows(a.results, a.warmup, best_peak(pk, 1))
    print(f"\nOne rank, {a.threads} threads; sgemm peak {peak:.1f} GFLOP/s")
    print(one_rank_table(rows))
    print(f"\nW = 2, one thread a rank; one-thread sgemm peak {best_peak(pk, 1):.1f} GFLOP/s")
    print(w2_table(wrows))
    if a.write_docs:
        path = a.write_docs
        text = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
        text = replace_section(text, SECTION_ONE,
                               one_rank_section(env, a.results, rows, peak, pk, a.threads, a.warmup, a.warmup_124m))
        text = replace_section(text, SECTION_W2, w2_section(env, a.results, wrows, pk, a.warmup))
        br.write_atomically(path, text)
        print(f"\nwrote the two training sections of {path}")


if __name__ == "__main__":
    main()
