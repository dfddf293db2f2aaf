#!/usr/bin/python3
"""Tables of bench/peers/run.sh's results and (--write-docs F) the file F (docs/benchmarks/peers.md),
rewritten whole; the commentary comes from bench/peers/notes.md when it exists.

Timing: every run's first --warmup steps are dropped; the step times of the remaining steps of all
rounds of the same runner and dtype are pooled, and their median is the figure (ms/step, rank 0's wall
time of a whole step); tokens/s = 2 ranks x 8 x 128 tokens / median. A runner with no successful round
is listed as failed with the one-line reason taken from its log.

--arch llama (run.sh with ARCH=llama): the same tables and plot for the Llama run; the page names the
model, transformers' version and attention implementation, and the init command from the run's env.txt.

Needs zdptest (tests/pylib): run.sh puts it on PYTHONPATH; by hand, `PYTHONPATH=tests/pylib` or
`pip install tests/pylib` first.
"""
import argparse
import os
import re
import statistics

from zdptest import bench_report as br

TOKENS = 2 * 8 * 128
LABELS = {
    "zerodp-s0": "zerodp ZeRO-0", "zerodp-s1": "zerodp ZeRO-1", "zerodp-s2": "zerodp ZeRO-2",
    "zerodp-s3": "zerodp ZeRO-3",
    "ddp": "PyTorch DDP", "zero1": "PyTorch DDP + ZeroRedundancyOptimizer",
    "fsdp2": "PyTorch FSDP2 (reshard_after_forward=False)", "fsdp2-reshard": "PyTorch FSDP2 (reshard_after_forward=True)",
    "ds1": "DeepSpeed ZeRO-1", "ds2": "DeepSpeed ZeRO-2", "ds3": "DeepSpeed ZeRO-3",
}
ORDER = list(LABELS)
PEERS_OF_STAGE = {0: ["ddp"], 1: ["zero1", "ds1"], 2: ["fsdp2", "ds2"], 3: ["fsdp2-reshard", "ds3"]}
HERE = os.path.dirname(os.path.abspath(__file__))


def read_status(res):
    """{tag: (rc, CPUs' busy fraction just before, 1-min load average after)}"""
    out = {}
    path = os.path.join(res, "status.txt")
    if os.path.exists(path):
        for line in open(path):
            tag, rc, l0, l1 = line.rstrip("\n").split("\t")
            out[tag] = (int(rc), l0, l1)
    return out


def read_run(res, tag):
    """(ms list, loss list) of one run, or None."""
    jl = os.path.join(res, tag + ".jsonl")
    js = os.path.join(res, tag + ".json")
    if os.path.exists(jl):
        steps = br.step_records(jl)
        return ([s["ms"] for s in steps], [s["loss"] for s in steps]) if steps else None
    j = br.last_json_line(js, objects_only=True)
    return (j["ms"], j["loss"]) if j is not None else None


def reason(res, tag):
    """One line saying why a run failed: the last exception-like line of its log."""
    path = os.path.join(res, tag + ".log")
    if not os.path.exists(path):
        return "no log"
    lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
    pat = re.compile(r"(Error|Exception|error:|Traceback|not supported|NotImplemented|Killed|Terminated)")
    hits = [l for l in lines if pat.search(l) and not l.startswith("Traceback")]
    line = hits[-1] if hits else (lines[-1] if lines else "empty log")
    line = re.sub(r"^\[rank\d+\]:\s*", "", line)
    return line[:300]


def collect(res, warmup, rounds_seen):
    status = read_status(res)
    table = {}
    for dt in ("fp32", "bf16"):
        for runner in ORDER:
            tags = sorted(t for t in status if t.startswith(f"{runner}-{dt}-r"))
            if not tags:
                continue
            pooled, medians, loss0, fails = [], [], None, []
            for tag in tags:
                rc = status[tag][0]
                run = read_run(res, tag) if rc == 0 else None
                if run is None or len(run[0]) <= warmup:
                    fails.append((tag, rc))
                    continue
                ms, loss = run
                pooled.extend(ms[warmup:])
                medians.append(statistics.median(ms[warmup:]))
                if loss0 is None:
                    loss0 = loss[0]
            entry = {"tags": tags, "fails": fails, "loads": [status[t][1] for t in tags]}  # busy before each round
            if pooled:
                med = statistics.median(pooled)
                entry.update(ms=med, tps=TOKENS / med * 1e3, medians=medians, loss0=loss0)
            else:
                tag, rc = fails[0]
                entry["reason"] = f"exit {rc}" + (" (timeout)" if rc == 124 else "") + ": " + reason(res, tag)
            table[(runner, dt)] = entry
    return table


def fmt_ms(v):
    return f"{v:.1f}"


def tables(table, dtypes):
    out = []
    for dt in dtypes:
        rows = [(r, table[(r, dt)]) for r in ORDER if (r, dt) in table]
        if not rows:
            continue
        out.append(f"### {dt}\n")
        cells = []
        for r, e in rows:
            if "ms" in e:
                extra = f" ({len(e['fails'])} round(s) failed)" if e["fails"] else ""
                cells.append([LABELS[r], fmt_ms(e["ms"]), "/".join(f"{m:.0f}" for m in e["medians"]) + extra,
                              f"{e['tps']:.0f}", f"{e['loss0']:.4f}", "/".join(e["loads"])])
            else:
                cells.append([LABELS[r], "failed", e["reason"], "", "", "/".join(e["loads"])])
        out.append(br.table(["runner", "ms/step", "rounds' medians", "tokens/s (both ranks)", "loss at step 0",
                             "CPUs busy before (rounds)"], cells, align=["---", "---:", "---", "---:", "---:", "---"]))
        out.append("")
        out.append(f"**{dt}: each zerodp stage against its best peer of the same sharding** (ratio = zerodp "
                   "tokens/s ÷ best peer tokens/s = peer ms ÷ zerodp ms; > 1 means zerodp is faster)\n")
        cells = []
        for s, peers in PEERS_OF_STAGE.items():
            z = table.get((f"zerodp-s{s}", dt))
            zms = z.get("ms") if z else None
            zdesc = fmt_ms(zms) if zms else ("failed" if z else "not run")
            ok = [(p, table[(p, dt)]["ms"]) for p in peers if "ms" in table.get((p, dt), {})]
            desc = "; ".join(f"{LABELS[p]} {fmt_ms(table[(p, dt)]['ms'])}" if "ms" in table.get((p, dt), {})
                             else f"{LABELS[p]} failed" if (p, dt) in table else f"{LABELS[p]} not run"
                             for p in peers)
            if ok:
                best, bms = min(ok, key=lambda x: x[1])
                cells.append([str(s), zdesc, desc, LABELS[best], br.ratio(bms / zms) if zms else "n/a"])
            else:
                cells.append([str(s), zdesc, desc, "none ran", "n/a"])
        out.append(br.table(["stage", "zerodp ms/step", "peers (ms/step)", "best peer", "zerodp / best peer"], cells,
                            align=["---", "---:", "---", "---", "---:"]))
        out.append("")
    return "\n".join(out)


def plot(table, dtypes, env, path, arch="gpt2"):
    """Tokens/s of every runner, grouped by the ZeRO stage whose sharding it has, one panel per dtype;
    each zerodp bar is labelled with its ratio to the best peer of its group."""
    plt = br.pyplot()
    colors = {"zerodp": "#1f5fa8", "PyTorch": "#e08a2c", "DeepSpeed": "#4c9a4c"}
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.2 * len(dtypes), 4.4), squeeze=False)
    for ax, dt in zip(axes[0], dtypes):
        x, ticks, tick_at = 0.0, [], []
        for s, peers in PEERS_OF_STAGE.items():
            group = [f"zerodp-s{s}"] + peers
            start = x
            best = min((table[(p, dt)]["ms"] for p in peers if "ms" in table.get((p, dt), {})), default=None)
            for r in group:
                e = table.get((r, dt), {})
                if "ms" not in e:
                    x += 1
                    continue
                who = LABELS[r].split()[0]
                ax.bar(x, e["tps"], width=0.9, color=colors.get(who, "grey"), label=who)
                short = LABELS[r].replace("PyTorch ", "").replace("DeepSpeed ", "DS ").replace(
                    " + ZeroRedundancyOptimizer", "+ZeRO").replace("(reshard_after_forward=False)", "").replace(
                    "(reshard_after_forward=True)", "reshard").replace("zerodp ", "")
                ax.text(x, e["tps"] * 0.02, short, rotation=90, ha="center", va="bottom", fontsize=7, color="white")
                if r.startswith("zerodp") and best:
                    ax.text(x, e["tps"], f"{best / e['ms']:.2f}×", ha="center", va="bottom", fontsize=8)
                x += 1
            tick_at.append((start + x - 1) / 2)
            ticks.append(f"stage {s}")
            x += 0.8
        ax.set_xticks(tick_at, ticks)
        ax.set_ylabel("tokens/s (both ranks)")
        ax.set_title(f"{dt}")
        ax.margins(y=0.12)
    handles, labels = axes[0][0].get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    fig.legend(uniq.values(), uniq.keys(), fontsize=9, loc="lower center", ncol=len(uniq), frameon=False)
    model = "GPT-2 L4 C256" if arch == "gpt2" else llama_short(env)
    fig.suptitle(f"W = 2 ranks × 1 thread, {model}, B8 T128: zerodp against its peers "
                 f"({env.get('cpu', '?')}, {env.get('date', '?')})", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    br.save_figure(fig, path, dpi=110)


LLAMA_INIT = ("zerodp init --arch llama --out data/llama-l10c512 --layers 10 --heads 8 --kv-heads 4 --embd 512 "
              "--intermediate 1408 --vocab 256 --ctx 128 --seed 1337")


def llama_short(env):
    """The model line of env.txt, short: Llama L10 C512 (29.8M)."""
    model = env.get("model", "Llama")
    m = re.match(r"^(Llama L\d+ C\d+)\b.*\((\d+) parameters\)", model)
    return f"{m.group(1)} ({int(m.group(2)) / 1e6:.1f}M)" if m else model.split(",")[0]


def llama_page_text(env):
    """(title suffix, the model paragraph's first lines, the peers' model bullet, the init command) of a Llama run."""
    model = env.get("model", "Llama (model line missing from env.txt)")
    attn = env.get("attn", "?")
    model_line = ("`mpirun -n 2 --bind-to core` (so each rank is bound to its own core);\n"
                  f"{model}: grouped-query attention, RMSNorm, RoPE, SwiGLU MLP\n"
                  "(docs/reference/model.md), T = 128, B = 8 a rank (2048 tokens a step),")
    bullet = (f"- The peers' model: Hugging Face transformers {env.get('transformers', '?')} `LlamaForCausalLM.from_pretrained`\n"
              f"  of the directory `zerodp init --arch llama` wrote (every tensor loaded, fp32), attn_implementation=\"{attn}\";\n"
              "  the cross-entropy on its logits in fp32. FSDP2 shards every `LlamaDecoderLayer` and the root.\n")
    return f", {llama_short(env)}", model_line, bullet, env.get("init", LLAMA_INIT)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2",
                    help="the model of the run (run.sh's ARCH): names it on the page and the plot")
    ap.add_argument("--write-docs", metavar="FILE")
    ap.add_argument("--plot", metavar="PNG", help="also draw the tokens/s of every runner by stage into PNG")
    ap.add_argument("--notes", metavar="FILE", default=os.path.join(HERE, "notes.md"),
                    help="the commentary put into FILE (default bench/peers/notes.md)")
    args = ap.parse_args()
    env = br.read_env(args.results)
    table = collect(args.results, args.warmup, None)
    dtypes = [d for d in ("fp32", "bf16") if any(k[1] == d for k in table)]
    body = tables(table, dtypes)
    print(body)
    if args.plot:
        plot(table, dtypes, env, args.plot, args.arch)
    if not args.write_docs:
        return
    cmds = br.unique_commands(args.results) or []
    notes = ""
    npath = args.notes
    if os.path.exists(npath):
        notes = open(npath).read().strip() + "\n\n"
    cont = ""
    zv = env.get("zerodp", "?")
    isa = env.get("isa_mode", "native")
    isa_line = ("" if isa == "native" else
                f"Instruction sets held to AVX2 (bench/peers ISA={isa}); zerodp's CPU, as it saw it: "
                f"{env.get('zerodp_cpu', '?')}.\n")
    m = re.match(r"^(.*) \(([^()]*)\)$", zv)
    if m:  # "<binary's --version> (<git HEAD of the tree at run time>)"
        zv = f"{m.group(1)} (binary's --version; working tree at {m.group(2)})"
    if env.get("continued_date"):
        cont = (f" (rounds continued by a second invocation from {env['continued_date']}, "
                f"steps={env.get('continued_steps')}, load average then {env.get('continued_load_start')})")
    plot_line = ""
    if args.plot:
        rel = os.path.relpath(os.path.abspath(args.plot), os.path.dirname(os.path.abspath(args.write_docs)))
        plot_line = f"![tokens/s of every runner by stage, fp32 and bf16]({rel})\n\n"
    title, peer_model = "", ""
    model_line = ("`mpirun -n 2 --bind-to core` (so each rank is bound to its own core); GPT-2 L4 C256 H4 V256, T = 128,\n"
                  "B = 8 a rank (2048 tokens a step),")
    init = "zerodp init --out data/l4c256.safetensors --layers 4 --heads 4 --embd 256 --vocab 256 --ctx 128 --seed 1337"
    if args.arch == "llama":
        title, model_line, peer_model, init = llama_page_text(env)
    doc = f"""# zerodp against PyTorch 2.x and DeepSpeed (W = 2{title})

Generated by `bench/peers/run.sh` (bench/peers/report.py); do not edit by hand, edit
{os.path.relpath(os.path.abspath(npath), os.path.join(HERE, "..", ".."))} for the commentary.

Machine: {env.get('cpu')}, {env.get('cores')} cores (lscpu), ISA flags {env.get('isa', '').strip()}; shared with other
jobs. Date: {env.get('date')}{cont}. Load average (1, 5, 15 min) at the start {env.get('load_start')}, at the end
{env.get('load_end', '?')}.
Versions: {zv}; {env.get('blas')} (OPENBLAS_CORETYPE in the environment: {env.get('openblas_coretype_env', 'not recorded')}); {env.get('mpi')}; PyTorch {env.get('torch')}
and DeepSpeed {env.get('deepspeed')} from PyPI on Python {env.get('python')} (venv {env.get('venv_size')}).
Settings: steps={env.get('steps')}.
{isa_line}
Two ranks of one thread each (OMP_NUM_THREADS=1; torch.set_num_threads(1)), every runner launched by
{model_line} AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.1 on
tensors of two or more dimensions), gradient clipping 1.0, the same initial weights and batches
(`zerodp init --seed 1337`, tinyshakespeare bytes). The PyTorch and DeepSpeed ranks meet over gloo on
127.0.0.1; zerodp uses its MPI backend.
- zerodp: `zerodp train --zero-stage S --dtype fp32|bf16`. bf16 is 16-bit compute (bf16 parameters and
  GEMM operands, fp32 accumulation through the 16-bit GEMM `zerodp info` names below, fp32 residual
  stream, statistics and gradients, fp32 master weights; docs/design.md), bf16 collectives.
  bf16 GEMM: {env.get('gemm16', '?')}.
- PyTorch: DDP (default buckets) with torch.optim.AdamW; DDP + ZeroRedundancyOptimizer(AdamW);
  FSDP2 `fully_shard` on each block and the root, reshard_after_forward False (ZeRO-2-like) and True
  (ZeRO-3-like). bf16: `torch.autocast("cpu", torch.bfloat16)` around the forward (fp32 parameters,
  gradients and collectives).
- DeepSpeed: ZeRO stage 1/2/3 on its CPU accelerator (DS_ACCELERATOR=cpu, `init_distributed("gloo")`),
  client optimizer torch.optim.AdamW with the same groups (`zero_allow_untested_optimizer`),
  `gradient_clipping` 1.0, default buckets. bf16: `bf16.enabled` (bf16 parameters, gradients and
  collectives, fp32 master weights).
{peer_model}
ms/step is rank 0's wall time of a whole step (forward, backward, clipping, optimizer step, zeroing;
every collective inside), the median over the steps after the first {args.warmup} of every round, the
rounds pooled. The loss at step 0 is the mean over the two ranks (as zerodp reports it): every runner
starts from the same model on the same batch, so it agrees to about 1e-4 in fp32 and to bf16's
rounding in bf16.

{body}
{plot_line}{notes}Commands (`$VENV` = runs/peers-venv; data/ = the run's inputs):

```
zerodp tokenize --text data/tinyshakespeare.txt --out data/shakespeare.bin
{init}
{chr(10).join(cmds)}
```
"""
    br.write_atomically(args.write_docs, doc)
    print(f"wrote {args.write_docs}")


if __name__ == "__main__":
    main()
