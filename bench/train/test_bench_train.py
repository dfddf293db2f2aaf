#!/usr/bin/python3
"""Checks of the training benchmark's own logic (registered with ctest as bench_train_*):

  flops     zdptest/flops.py's matmul count equals the 2·M·N·K of every matmul PyTorch actually runs in a
            forward + backward of zdptest/torch_gpt2.py's model (counted at the aten level, dense attention,
            which is what that model computes), for a few shapes; the causal count is the dense one
            less the masked products.
  report    report.py: the median skips the warm-up steps and pools the rounds, tokens/s and GFLOP/s
            follow from it, the W = 2 speed is relative to DDP, and rewriting docs/benchmarks/training.md
            replaces only its own two sections (appending them when absent).
  sgemm     `zerodp bench-train sgemm` prints its JSON with positive rates, and rejects a bad size
            with exit code 2 (needs --zerodp PATH).

    test_bench_train.py [flops|report|sgemm|all] [--zerodp PATH]
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# zdptest (tests/pylib) comes from pytest.ini under pytest, from PYTHONPATH under ctest
# (bench/train/CMakeLists.txt), or from `pip install tests/pylib`.
import report  # noqa: E402  (bench/train/report.py, this script's folder)
from zdptest import flops  # noqa: E402
from zdptest import harness as zt  # noqa: E402

checks = zt.Checks(prefix="FAIL: ")  # every check runs; the failed ones are listed at the end
check = checks.check
failures = checks.failures


# ---- flops ------------------------------------------------------------------------------------------

def count_aten_matmul_flops(L, H, C, V, B, T):
    """2·M·N·K summed over every mm/addmm/bmm/baddbmm of one forward + backward of torch_gpt2's model."""
    import torch
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode
    from zdptest import torch_gpt2

    total = [0]

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__ if hasattr(func, "__name__") else str(func)
            packet = name.split(".")[0]
            if packet in ("mm", "addmm", "bmm", "baddbmm"):
                a, b = (args[1], args[2]) if packet in ("addmm", "baddbmm") else (args[0], args[1])
                if packet in ("mm", "addmm"):
                    (M, K), N = a.shape, b.shape[1]
                    total[0] += 2 * M * N * K
                else:
                    (batch, M, K), N = a.shape, b.shape[2]
                    total[0] += 2 * batch * M * N * K
            elif packet in ("matmul", "linear", "einsum", "conv1d"):
                raise AssertionError(f"{name} was not decomposed: the counter would miss it")
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = torch_gpt2.GPT2(L, H, C, V, max(T, 8))
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))
    with Counter():
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        loss.backward()
    return total[0]


def test_flops():
    for L, H, C, V, B, T in [(2, 4, 32, 64, 2, 16), (1, 2, 16, 50, 3, 7), (3, 4, 48, 97, 1, 33)]:
        counted = count_aten_matmul_flops(L, H, C, V, B, T)
        ours = flops.step_flops(L, C, V, B, T, causal=False)
        check(counted == ours, f"dense matmul FLOPs of L{L} H{H} C{C} V{V} B{B} T{T}: aten counted {counted}, "
                               f"flops.py says {ours}")
        # Causal: per (sequence, head) and per attention matmul, 2·hs·(T² − Σ_t (t+1)) fewer forward FLOPs.
        masked = T * T - T * (T + 1) // 2
        expected_causal = ours - 3 * L * 2 * B * H * 2 * (C // H) * masked
        check(flops.step_flops(L, C, V, B, T, causal=True) == expected_causal,
              f"causal FLOPs of L{L} C{C} B{B} T{T}: {flops.step_flops(L, C, V, B, T, causal=True)} "
              f"!= {expected_causal}")
    check(flops.params(4, 256, 256, 128) == 3257856, "L4 C256 V256 N128 has 3257856 parameters")
    check(flops.params(12, 768, 50257, 1024) == 124439808, "GPT-2 small has 124439808 parameters")


# ---- report -----------------------------------------------------------------------------------------

def write_zerodp_metrics(path, ms, wait):
    with open(path, "w") as f:
        for i, (m, w) in enumerate(zip(ms, wait)):
            f.write(json.dumps({"event": "step", "step": i, "loss": 5.0, "ms": m, "comm_wait_ms": w}) + "\n")
        f.write(json.dumps({"event": "memory", "rank": 0}) + "\n")


def write_torch(path, ms):
    with open(path, "w") as f:
        f.write(json.dumps({"impl": "pytorch", "ms": ms, "loss": [5.0] * len(ms)}) + "\n")


def test_report():
    with tempfile.TemporaryDirectory() as res:
        with open(os.path.join(res, "env.txt"), "w") as f:
            f.write("date=2026-01-01 00:00 UTC\ncpu=Test CPU\ncores=2\nthreads=threads=2 bind=core rounds=2\n"
                    "torch_blas=openmp\nload_start=0.1 0.2 0.3\n")
        for tag, threads in (("2t-start", 2), ("2t-end", 2), ("1t-start", 1)):
            best = {"2t-start": 100.0, "2t-end": 120.0, "1t-start": 60.0}[tag]
            with open(os.path.join(res, f"peak-{tag}.json"), "w") as f:
                json.dump({"best_gflops": best, "median_gflops": best - 1}, f)
        # Round 1: warm-up 1000 then 100, 300; round 2: warm-up 5000 then 200, 400 -> median of
        # {100, 300, 200, 400} = 250 with the warm-up (2 steps each... here 1) dropped.
        write_zerodp_metrics(os.path.join(res, "one-l4c256-zerodp-r1.jsonl"), [1000, 100, 300], [0, 0, 0])
        write_zerodp_metrics(os.path.join(res, "one-l4c256-zerodp-r2.jsonl"), [5000, 200, 400], [0, 0, 0])
        write_torch(os.path.join(res, "one-l4c256-torch-openmp-r1.json"), [9000, 500, 500])
        write_zerodp_metrics(os.path.join(res, "w2-zerodp-s0-r1.jsonl"), [900, 400, 400], [50, 10, 30])
        write_torch(os.path.join(res, "w2-torch-ddp-r1.json"), [900, 800, 800])
        rows, peak = report.one_rank_rows(res, 2, 1, 1, ["openmp"])
        check(peak == 120.0, f"peak is the best of the 2-thread runs: {peak}")
        z = [r for r in rows if r["impl"] == "zerodp"][0]
        t = [r for r in rows if r["impl"].startswith("PyTorch")][0]
        check(z["ms"] == 250, f"zerodp median pools the rounds after the warm-up: {z['ms']}")
        check(abs(z["tok_s"] - 1024 / 0.25) < 1e-9, f"tokens/s = B·T / median: {z['tok_s']}")
        expected_gflops = flops.step_flops(4, 256, 256, 8, 128) / 0.25 / 1e9
        check(abs(z["gflops"] - expected_gflops) < 1e-9, f"GFLOP/s: {z['gflops']} != {expected_gflops}")
        check(abs(z["frac"] - expected_gflops / 120.0) < 1e-12, "fraction of the peak")
        check(abs(z["vs_torch"] - 2.0) < 1e-12 and abs(t["vs_torch"] - 1.0) < 1e-12,
              f"speed relative to PyTorch: {z['vs_torch']}, {t['vs_torch']}")
        w = report.w2_rows(res, 1, 60.0)
        s0 = [r for r in w if r["impl"] == "zerodp ZeRO-0"][0]
        check(s0["ms"] == 400 and abs(s0["vs_ddp"] - 2.0) < 1e-12, f"W=2 speed vs DDP: {s0}")
        check(s0["wait_ms"] == 20 and abs(s0["tok_s"] - 2048 / 0.4) < 1e-9, f"W=2 comm wait / tokens: {s0}")

        # The docs: other sections survive, ours are replaced, then appended to a file without them.
        doc = os.path.join(res, "training.md")
        with open(doc, "w") as f:
            f.write("# Benchmarks\n\nintro\n\n## Communication\n\ncomm text\n\n"
                    f"{report.SECTION_ONE}\n\nold one-rank text\n\n## Later\n\nlater text\n")
        text = open(doc).read()
        text = report.replace_section(text, report.SECTION_ONE, report.SECTION_ONE + "\n\nnew one-rank text")
        text = report.replace_section(text, report.SECTION_W2, report.SECTION_W2 + "\n\nnew w2 text")
        check("comm text" in text and "later text" in text and "intro" in text, "other sections kept")
        check("old one-rank text" not in text and "new one-rank text" in text, "own section replaced")
        check(text.index("## Communication") < text.index(report.SECTION_ONE) < text.index("## Later"),
              "the replaced section keeps its place")
        check(text.count(report.SECTION_W2) == 1 and text.rstrip().endswith("new w2 text"),
              "an absent section is appended once")
        again = report.replace_section(text, report.SECTION_W2, report.SECTION_W2 + "\n\nnew w2 text")
        check(again == text, "replacing a section with the same text changes nothing")


# ---- sgemm ------------------------------------------------------------------------------------------

def test_sgemm(zerodp):
    out = zt.run(zerodp, ["bench-train", "sgemm", "--size", "96", "--reps", "3", "--warmup", "0"], timeout=120)
    check(out.code == 0, f"bench-train sgemm exit code {out.code}: {out.err}")
    if out.code == 0:
        j = json.loads(out.out.strip().splitlines()[-1])
        check(j["size"] == 96 and j["reps"] == 3 and len(j["all_gflops"]) == 3, f"sgemm JSON fields: {j}")
        check(j["best_gflops"] >= j["median_gflops"] > 0, f"sgemm rates: {j}")
        check(j["omp_threads"] == 1 and j["blas_threads"] == 1, f"sgemm runs on OMP_NUM_THREADS threads: {j}")
    bad = zt.run(zerodp, ["bench-train", "sgemm", "--size", "3"], timeout=60)
    check(bad.code == 2 and "--size" in bad.err, f"bad size: exit {bad.code}, {bad.err!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", nargs="?", default="all", choices=["flops", "report", "sgemm", "all"])
    ap.add_argument("--zerodp", help="the zerodp binary (for the sgemm check)")
    a = ap.parse_args()
    if a.which in ("flops", "all"):
        test_flops()
    if a.which in ("report", "all"):
        test_report()
    if a.which in ("sgemm", "all"):
        if not a.zerodp:
            failures.append("sgemm: --zerodp PATH is required")
        else:
            test_sgemm(a.zerodp)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
