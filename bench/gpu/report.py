#!/usr/bin/env python3
"""The markdown table of bench/gpu/run.sh's results, ready for docs/benchmarks/gpu.md.

    report.py OUT [--warmup N] [--peak-tflops X] [--check]

Reads OUT/env.txt (machine, versions, settings), OUT/status.txt (each run's exit status), zerodp's
metrics (OUT/zerodp-wW-sS.jsonl, docs/reference/metrics.md: the per-step records' "ms" and "tokens", rank 0's
clock; the per-rank "memory" records' peak_bytes.total), the PyTorch peer's JSON (OUT/torch-*.json)
and the nvidia-smi samples (OUT/*.smi). Only the standard library and tests/pylib's zdptest
(`PYTHONPATH=tests/pylib`, or `pip install tests/pylib`).

Columns:
  ms/step       the median of the steps after the first --warmup (default: env.txt's warmup)
  tokens/s      tokens of a step over all ranks (W·B·T) / that median
  MFU           the causal matmul FLOPs of zdptest/flops.py (step_flops, or llama_step_flops when env.txt
                says arch=llama) for all ranks' tokens / the median /
                (GPUs × the GPU's dense bf16 peak, zdptest/gpu_peak.py); the W = 2 ranks share
                one GPU, so their FLOPs add up against one peak
  peak memory   per rank, the most of any rank: zerodp's exact ledger (peak_bytes.total: the bytes
                the run asked for; not the CUDA context, cuBLASLt's workspace or the caching
                allocator's slack); PyTorch's torch.cuda.max_memory_allocated()
  reserved      what the allocator took from the driver at most: PyTorch's max_memory_reserved();
                zerodp's when its memory record carries a "reserved" figure, else n/a
  GPU used      the most nvidia-smi's memory.used showed while the run went on: the whole GPU, all
                ranks, CUDA contexts and caches included (sampled every 200 ms)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

from zdptest import bench_report as br
from zdptest import flops
from zdptest import gpu_peak
from zdptest.harness import read_metrics

HERE = os.path.dirname(os.path.abspath(__file__))

GIB = 1024 ** 3
MEMORY_KEYS = {"event", "rank", "peak_bytes", "live_bytes", "host_bytes", "nvme_bytes"}
# Lines an mpirun job prints around a rank's own message: never the reason a run failed.
MPI_NOISE = re.compile(r"^(-{5,}|\[[\w.-]+:\d+\]|MPI_ABORT was invoked|with errorcode|NOTE: invoking MPI_ABORT|"
                       r"You may or may not see|exactly when Open MPI|(prte|mpi)run (has|detected|noticed)|"
                       r"Primary job|Process name|Exit code|Local host|Node:|PID:)")


class RunError(Exception):
    """A run that exited 0 but left no usable result."""


def read_env(out):
    return br.read_env(out, missing_ok=True)


def read_status(out):
    """[(tag, exit status as written: a number or 'skipped', seconds)] in the order the runs ran."""
    rows = []
    path = os.path.join(out, "status.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if fields and fields[0]:
                    rows.append((fields[0], fields[1] if len(fields) > 1 else "?",
                                 fields[2] if len(fields) > 2 else ""))
    return rows


def timed(ms, warmup):
    """The step times after the first `warmup` (all of them when there are no more)."""
    if not ms:
        raise RunError("no step was recorded")
    return ms[warmup:] if len(ms) > warmup else ms


def parse_tag(tag):
    """('zerodp', W, stage) for zerodp-wW-sS, ('pytorch', 1, mode) for torch-MODE, else None."""
    m = re.fullmatch(r"zerodp-w(\d+)-s(\d)", tag)
    if m:
        return "zerodp", int(m.group(1)), int(m.group(2))
    m = re.fullmatch(r"torch-(\w+)", tag)
    if m:
        return "pytorch", 1, m.group(1)
    return None


def model_step_flops(env, B):
    """The causal matmul FLOPs of one micro-batch of B sequences of the model env.txt describes."""
    L, C, V, T = (int(env[k]) for k in ("layers", "embd", "vocab", "seq"))
    if env.get("arch", "gpt2") == "llama":
        heads, kv, hd, inter = (int(env[k]) for k in ("heads", "kv_heads", "head_dim", "intermediate"))
        return flops.llama_step_flops(L, C, heads * hd, kv * hd, inter, V, B, T, causal=True)
    return flops.step_flops(L, C, V, B, T, causal=True)


def zerodp_result(out, tag, warmup, env):
    path = os.path.join(out, tag + ".jsonl")
    if not os.path.exists(path):
        partial = os.path.exists(path + ".partial")
        raise RunError("exit 0 but no metrics file" + (" (only the unfinished .partial)" if partial else ""))
    records = read_metrics(path)
    steps = [r for r in records if r.get("event") == "step"]
    mem = sorted((r for r in records if r.get("event") == "memory"), key=lambda r: r.get("rank", 0))
    if not steps:
        raise RunError("the metrics file has no step record")
    ms = [float(s["ms"]) for s in steps]
    tokens = int(steps[-1]["tokens"])
    T = int(env["seq"])
    if tokens % T:
        raise RunError(f"tokens per step {tokens} is not a multiple of T = {T}")
    peak_rank = [int(m["peak_bytes"]["total"]) for m in mem]
    reserved = []
    for m in mem:  # a figure of what the allocator reserved, should the memory record carry one
        for k, v in m.items():
            if k not in MEMORY_KEYS and "reserved" in k:
                reserved.append(int(v["total"] if isinstance(v, dict) else v))
                break
    return dict(ms=ms, timed=timed(ms, warmup), tokens=tokens,
                flops=model_step_flops(env, tokens // T),
                mem=max(peak_rank) if peak_rank else None, mem_ranks=peak_rank,
                reserved=max(reserved) if reserved else None, loss=float(steps[-1]["loss"]),
                ranks=len(mem) or None)


def peer_result(out, tag, warmup):
    j = br.last_json_line(os.path.join(out, tag + ".json"))
    if j is None:
        raise RunError("exit 0 but no JSON result on stdout")
    cfg, B, T = j["model"], int(j["micro_batch"]), int(j["seq"])
    ms = [float(x) for x in j["ms"]]
    if j.get("arch", "gpt2") == "llama":
        L, C, V, heads, kv, hd, inter = (int(cfg[k]) for k in ("L", "C", "V", "heads", "kv_heads", "head_dim", "I"))
        step_fl = flops.llama_step_flops(L, C, heads * hd, kv * hd, inter, V, B, T, causal=True)
    else:
        step_fl = flops.step_flops(int(cfg["L"]), int(cfg["C"]), int(cfg["V"]), B, T, causal=True)
    return dict(ms=ms, timed=timed(ms, warmup), tokens=B * T, flops=step_fl,
                mem=j.get("max_memory_allocated"), mem_ranks=None, reserved=j.get("max_memory_reserved"),
                loss=float(j["loss"][-1]) if j.get("loss") else None, ranks=1, torch=j.get("torch"),
                attention=j.get("attention"), adamw=j.get("adamw"))


def smi_peak_bytes(out, tag):
    """The most memory.used (MiB) nvidia-smi showed during the run, in bytes; None without samples."""
    path = os.path.join(out, tag + ".smi")
    if not os.path.exists(path):
        return None
    vals = []
    with open(path) as f:
        for line in f:
            try:
                vals.append(float(line.strip().split(",")[0]))
            except ValueError:
                pass  # a line cut short when the sampler was stopped
    return max(vals) * 2 ** 20 if vals else None


def failure_reason(out, tag, rc, env):
    """One line: why the run failed, from its log."""
    path = os.path.join(out, tag + ".log")
    lines = []
    if os.path.exists(path):
        with open(path, errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    own = [l for l in lines if not MPI_NOISE.match(l)]
    errors = [l for l in own if re.search(r"error\s*:|exception|traceback|out of memory", l, re.I)]
    line = errors[-1] if errors else (own[-1] if own else (lines[-1] if lines else "no output"))
    if len(line) > 300:
        line = line[:297] + "..."
    if rc == "124":
        return f"timed out after {env.get('run_timeout', '?')} s; last: {line}"
    if rc == "137":
        return f"killed (SIGKILL: past the timeout's grace, or out of host memory); last: {line}"
    if rc == "skipped":
        return line
    return f"exit {rc}: {line}"


def collect(out, warmup=None, peak_tflops=None):
    """(env, rows of the runs that gave results, [(tag, reason)] of the others, peak FLOP/s, peak note)."""
    env = read_env(out)
    if warmup is None:
        warmup = int(env.get("warmup") or 5)
    peak, note = gpu_peak.choose_peak(env.get("gpu"), peak_tflops or env.get("peak_tflops") or None)
    gpus = int(env.get("gpus") or 1)
    rows, failed = [], []
    for tag, rc, seconds in read_status(out):
        kind = parse_tag(tag)
        if rc != "0":
            failed.append((tag, failure_reason(out, tag, rc, env)))
            continue
        try:
            if kind is None:
                raise RunError("an unknown run name")
            r = zerodp_result(out, tag, warmup, env) if kind[0] == "zerodp" else peer_result(out, tag, warmup)
        except (RunError, OSError, ValueError, KeyError, IndexError) as e:
            failed.append((tag, f"exit 0 but {e}" if not str(e).startswith("exit 0") else str(e)))
            continue
        median_ms = statistics.median(r["timed"])
        flops_per_s = r["flops"] / (median_ms / 1e3)
        r.update(tag=tag, impl=kind[0], world=kind[1], stage=kind[2] if kind[0] == "zerodp" else None,
                 mode=kind[2] if kind[0] == "pytorch" else None, median_ms=median_ms,
                 tokens_per_s=r["tokens"] / (median_ms / 1e3), flops_per_s=flops_per_s,
                 mfu=flops_per_s / (gpus * peak) if peak else None, smi=smi_peak_bytes(out, tag),
                 seconds=seconds)
        rows.append(r)
    return env, rows, failed, peak, note, warmup


def runner_label(r):
    if r["impl"] == "zerodp":
        return "zerodp"
    return {"eager": "PyTorch eager", "compile": "PyTorch torch.compile"}.get(r["mode"], f"PyTorch {r['mode']}")


def gib(b):
    return "n/a" if b is None else f"{b / GIB:.2f}"


def commit(env):
    if env.get("commit") and env["commit"] != "?":
        return env["commit"]
    try:  # read-only; the table says "?" outside a git checkout
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, check=True).stdout.strip() or "?"
    except (OSError, subprocess.CalledProcessError):
        return "?"


def comparison(rows):
    """The line comparing zerodp's fastest W = 1 run with each PyTorch run."""
    z = [r for r in rows if r["impl"] == "zerodp" and r["world"] == 1]
    t = [r for r in rows if r["impl"] == "pytorch"]
    if not z or not t:
        missing = "zerodp at W = 1" if not z else "PyTorch"
        return f"No comparison: no result of {missing}."
    best = max(z, key=lambda r: r["tokens_per_s"])
    parts = [f"{br.ratio(best['tokens_per_s'] / p['tokens_per_s'])} {runner_label(p)} ({p['tokens_per_s']:.0f} tokens/s)"
             for p in t]
    return (f"zerodp's fastest at W = 1 (ZeRO stage {best['stage']}, {best['tokens_per_s']:.0f} tokens/s) runs at "
            + ", ".join(parts) + ".")


def render(out, warmup=None, peak_tflops=None):
    env, rows, failed, peak, note, warmup = collect(out, warmup, peak_tflops)
    L, H, C, V, T = (env.get(k, "?") for k in ("layers", "heads", "embd", "vocab", "seq"))
    B, steps = env.get("micro_batch", "?"), env.get("steps", "?")
    if env.get("arch", "gpt2") == "llama":
        model = (f"Llama L{L} H{H}/{env.get('kv_heads', '?')} C{C} I{env.get('intermediate', '?')} V{V}"
                 + (" (tied)" if env.get("tie") == "1" else ""))
    else:
        model = f"GPT-2 L{L} H{H} C{C} V{V}"
    gpu = env.get("gpu") or "no GPU seen by nvidia-smi"
    issue = "issue 45" if env.get("arch") == "llama" else "issue 15"
    lines = [f"## Training on one GPU, against PyTorch ({issue})", "",
             f"{model}, T {T}, bf16, B {B} sequences a rank, on {gpu} "
             f"(driver {env.get('driver') or '?'}, {env.get('gpu_memory') or '?'}); device {env.get('device', '?')}. "
             f"{env.get('date', '?')}, {env.get('zerodp') or 'zerodp'}, commit {commit(env)}"
             + (f", torch {env['torch']}" if env.get("torch") else "") + ".",
             "",
             f"{steps} steps a run; ms/step is the median of the steps after the first {warmup}. "
             f"Optimizer on both sides: AdamW {env.get('optimizer', '?')}. "
             + (f"MFU against the {note}" if peak else f"MFU: {note}")
             + (f", {env.get('gpus')} GPUs" if env.get("gpus", "1") != "1" else "") + ".",
             ""]
    cells = []
    for r in rows:
        stage = str(r["stage"]) if r["stage"] is not None else "-"
        mfu = "n/a" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%"
        mem = gib(r["mem"])
        if r["mem_ranks"] and len(set(r["mem_ranks"])) > 1:
            mem += " (" + " / ".join(gib(m) for m in r["mem_ranks"]) + ")"
        loss = "n/a" if r["loss"] is None else f"{r['loss']:.4f}"
        cells.append([runner_label(r), str(r["world"]), stage, f"{r['median_ms']:.1f}", f"{r['tokens_per_s']:.0f}",
                      mfu, mem, gib(r["reserved"]), gib(r["smi"]), loss])
    lines += [br.table(["runner", "W", "ZeRO stage", "ms/step", "tokens/s", "MFU", "peak memory / rank (GiB)",
                        "reserved / rank (GiB)", "GPU used, nvidia-smi (GiB)", "loss at last step"], cells),
              "", comparison(rows)]
    if failed:
        lines += ["", "Failed or not run:"]
        lines += [f"- `{tag}`: {reason}" for tag, reason in failed]
    if not rows and not failed:
        lines += ["", f"No runs recorded in {out} (status.txt missing or empty)."]
    return "\n".join(lines) + "\n", rows, failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the OUT directory of bench/gpu/run.sh")
    ap.add_argument("--warmup", type=int, default=None, help="steps left out of each median (default: env.txt's)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak (default: from the GPU's name)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a zerodp run failed or none ran (the PyTorch peer's failures do not "
                         "count: it depends on a torch from PyPI)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.out):
        sys.exit(f"report.py: {args.out}: no such directory")
    text, rows, failed = render(args.out, args.warmup, args.peak_tflops)
    sys.stdout.write(text)
    if args.check:
        bad = [tag for tag, _ in failed if tag.startswith("zerodp-")]
        if bad or not any(r["impl"] == "zerodp" for r in rows):
            print(f"report.py: --check: zerodp runs failed: {' '.join(bad) or 'none ran'}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
