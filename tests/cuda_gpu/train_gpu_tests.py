#!/usr/bin/env python3
"""Whole training runs of `zerodp train --device cuda` against themselves and the CPU (ctest label gpu).
Without a GPU (or without CUDA in the build) it prints SKIPPED and exits 77, which ctest reports as
skipped, never as passed.

usage: train_gpu_tests.py ZERODP CASE
  stages    bf16 at stages 0-3, W=1 (NCCL's single rank) and W=2 (two ranks, one GPU: host staging; or
            NCCL where there are two GPUs): every stage gives the same losses bit for bit at each W, as on
            the CPU; the first step's loss agrees with the CPU's bf16 run within 5e-3 relative and the
            later ones within 2e-2; the model states in the memory record (param, grad, master, optim)
            are the CPU run's byte for byte; an fp16 run (dynamic loss scaling) trains.
  resume    a W=2 stage 3 GPU run saved at step 2 and resumed gives the losses of the uninterrupted run
            bit for bit; its checkpoint resumes on the CPU at W=1 stage 1 (resharded) and its --out
            (consolidated on the GPU through host memory) samples on the CPU.
  offload   ZeRO-Offload on the GPU (--offload-optimizer cpu, then nvme), W=2 stage 2: the losses of the
            run without offload bit for bit (the CPU's AdamW on the host is the GPU's bit for bit); the
            masters and optimizer states are in host memory (the memory record's host tier), none on
            the GPU. Then stage 3 with the parameters offloaded too (cpu, then nvme): the same losses,
            no parameter shard on the GPU.
  sgd       SGD with momentum (and nesterov) at stages 0 and 2, W=2: the stages agree bit for bit, the
            losses within 2e-2 of the CPU's bf16 run; with the optimizer offloaded, the same bits.
  muon      Muon, bf16 optimizer states, and both, W=2 at stages 0-3: the stages agree bit for bit, the losses
            within 2e-2 of the CPU's bf16 run (written before any GPU ran them).
  refusals  what the GPU does not do in this version (fp32 compute) exits 2 saying so.
  llama     a Llama (grouped-query heads 4/2 of 64, SwiGLU, untied head) in bf16 at stages 0-3, W=1 and
            W=2: every stage gives the same losses bit for bit at each W, within 2e-2 of the CPU's bf16
            run (the first within 5e-3); the model states in the memory record are the CPU run's byte
            for byte, and the measured peak is within 2% of `zerodp estimate --device cuda`; a Qwen2
            (q/k/v biases, tied head) gives stage 0's losses at stage 3, W=2.
"""
import functools
import math
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)

rc, info, err = run(["info"])
if "CUDA:    built in" not in info or "GPU 0:" not in info:
    print("SKIPPED: no GPU visible to this zerodp (or CUDA not built in):\n" + info + err)
    sys.exit(77)

tmp = zt.workdir("gpu-train")
# Head size 64 (the flash attention's), a vocabulary that is not a multiple of 64 (the padding paths).
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=2, embd=128, vocab=320, ctx=128, seed=11,
                              text_bytes=200000)
STEPS = 4
common = ["train", "--init", init, "--data", tokens, "--steps", str(STEPS), "--micro-batch", "4", "--seq", "128",
          "--lr", "1e-3"]
base = common + ["--dtype", "bf16"]


def train(name, extra, ranks=None, timeout=300, start=None):
    m = os.path.join(tmp, f"{name}.jsonl")
    rc, out, err = run((start or base) + extra + ["--metrics", m], ranks, timeout=timeout)
    check(rc == 0, f"{name}: trains", err[-3000:])
    steps = records(m, "step")
    check(len(steps) == STEPS and all(math.isfinite(s["loss"]) for s in steps), f"{name}: {STEPS} finite losses",
          str(steps))
    return [s["loss"] for s in steps], records(m, "memory"), err


STATE_CATEGORIES = ("param", "grad", "master", "optim")

if CASE == "stages":
    for W in (1, 2):
        ranks = W if W > 1 else None
        cpu, cpu_mem, _ = train(f"cpu-w{W}", ["--device", "cpu", "--zero-stage", "0"], ranks)
        first = None
        for stage in range(4):
            losses, mem, err = train(f"gpu-w{W}-s{stage}", ["--device", "cuda", "--zero-stage", str(stage)], ranks)
            check("cuda:" in err, f"W={W} stage {stage}: the log names the GPU it trained on", err[-2000:])
            if first is None:
                first = losses
                check(abs(losses[0] - cpu[0]) <= 5e-3 * abs(cpu[0]),
                      f"W={W}: the first loss agrees with the CPU's bf16 run (GPU {losses[0]!r}, CPU {cpu[0]!r})")
                check(all(abs(g - c) <= 2e-2 * abs(c) for g, c in zip(losses, cpu)),
                      f"W={W}: every loss within 2e-2 of the CPU's (GPU {losses}, CPU {cpu})")
            else:
                check(losses == first, f"W={W}: stage {stage} gives stage 0's losses bit for bit ({losses} vs {first})")
            if stage == 0:
                for g, c in zip(mem, cpu_mem):
                    for cat in STATE_CATEGORIES:
                        check(g["peak_bytes"].get(cat) == c["peak_bytes"].get(cat),
                              f"W={W} rank {g['rank']}: peak {cat} bytes on the GPU are the CPU's "
                              f"({g['peak_bytes'].get(cat)} vs {c['peak_bytes'].get(cat)})")
    m = os.path.join(tmp, "fp16.jsonl")
    rc, out, err = run(common + ["--device", "cuda", "--zero-stage", "2", "--dtype", "fp16", "--metrics", m], timeout=300)
    check(rc == 0 and all(math.isfinite(s["loss"]) or s["skipped"] for s in records(m, "step")),
          "fp16 with dynamic loss scaling trains on the GPU", err[-3000:])

elif CASE == "resume":
    full, _, _ = train("full", ["--device", "cuda", "--zero-stage", "3"], 2)
    ck = os.path.join(tmp, "ck")
    m = os.path.join(tmp, "first.jsonl")
    # The whole run again, saving every 2 steps (base's --steps stays the only one: the CLI refuses a
    # second); step-2 is the first half's checkpoint.
    rc, out, err = run(base + ["--device", "cuda", "--zero-stage", "3", "--save-dir", ck, "--save-every", "2",
                               "--metrics", m], 2, timeout=300)
    check(rc == 0, "the run saves a checkpoint at step 2", err[-3000:])
    ck = os.path.join(ck, "step-2")
    m2 = os.path.join(tmp, "second.jsonl")
    rc, out, err = run(base + ["--device", "cuda", "--zero-stage", "3", "--resume", ck, "--metrics", m2], 2,
                       timeout=300)
    check(rc == 0, "the GPU run resumes", err[-3000:])
    second = [s["loss"] for s in records(m2, "step")]
    check(second == full[2:], f"the resumed losses are the uninterrupted run's bit for bit ({second} vs {full[2:]})")
    m3 = os.path.join(tmp, "cpu.jsonl")
    # One rank takes both ranks' sequences: the global batch W·G·B (2·1·4) is the checkpoint's.
    one_rank = [("8" if prev == "--micro-batch" else a) for prev, a in zip([None] + base[:-1], base)]
    rc, out, err = run(one_rank + ["--device", "cpu", "--zero-stage", "1", "--resume", ck, "--metrics", m3], None,
                       timeout=300)
    check(rc == 0, "the GPU's checkpoint resumes on the CPU at W=1 stage 1", err[-3000:])
    cpu = [s["loss"] for s in records(m3, "step")]
    check(all(math.isfinite(x) for x in cpu) and len(cpu) == 2, f"the CPU continues it ({cpu})")
    out_path = os.path.join(tmp, "out.safetensors")
    rc, out, err = run(base + ["--device", "cuda", "--zero-stage", "3", "--out", out_path], 2, timeout=300)
    check(rc == 0 and os.path.exists(out_path), "a GPU run writes --out", err[-3000:])
    rc, text, err = run(["sample", "--model", out_path, "--prompt", "A", "--tokens", "5", "--temperature", "0"])
    check(rc == 0 and len(text) >= 6, "the GPU's --out samples on the CPU", err)

elif CASE == "offload":
    plain, _, _ = train("plain", ["--device", "cuda", "--zero-stage", "2"], 2)
    nvme_dir = os.path.join(tmp, "nvme")
    os.makedirs(nvme_dir, exist_ok=True)
    for where in ("cpu", "nvme"):
        extra = ["--device", "cuda", "--zero-stage", "2", "--offload-optimizer", where]
        if where == "nvme":
            extra += ["--nvme-path", nvme_dir]
        losses, mem, err = train(f"offload-{where}", extra, 2)
        check(losses == plain, f"{where}: the losses without offload bit for bit ({losses} vs {plain})")
        for rec in mem:
            check(rec["peak_bytes"].get("master") == 0 and rec["peak_bytes"].get("optim") == 0,
                  f"{where} rank {rec['rank']}: no master or optimizer state on the GPU ({rec['peak_bytes']})")
            tier = rec["host_bytes"] if where == "cpu" else rec["nvme_bytes"]
            check(tier.get("master", 0) > 0 and tier.get("optim", 0) > 0,
                  f"{where} rank {rec['rank']}: masters and states in the {where} tier ({tier})")

    s3 = ["--device", "cuda", "--zero-stage", "3", "--offload-optimizer", "cpu"]
    opt_only, _, _ = train("offload-s3", s3, 2)
    for where in ("cpu", "nvme"):
        extra = s3 + ["--offload-param", where] + (["--nvme-path", nvme_dir] if where == "nvme" else [])
        losses, mem, err = train(f"offload-param-{where}", extra, 2)
        check(losses == opt_only == plain, f"parameters on {where}: the losses without offload bit for bit "
                                           f"({losses} vs {opt_only} vs {plain})")
        for rec in mem:
            check(rec["peak_bytes"].get("param") == 0,
                  f"parameters on {where}, rank {rec['rank']}: no parameter shard on the GPU ({rec['peak_bytes']})")

elif CASE == "sgd":
    for nesterov in ([], ["--nesterov"]):
        opt = ["--optimizer", "sgd", "--momentum", "0.9"] + nesterov
        cpu, _, _ = train("sgd-cpu", opt + ["--device", "cpu", "--zero-stage", "0"], 2)
        s0, _, _ = train("sgd-s0", opt + ["--device", "cuda", "--zero-stage", "0"], 2)
        s2, _, _ = train("sgd-s2", opt + ["--device", "cuda", "--zero-stage", "2"], 2)
        off, _, _ = train("sgd-off", opt + ["--device", "cuda", "--zero-stage", "2", "--offload-optimizer", "cpu"], 2)
        what = "nesterov" if nesterov else "momentum"
        check(s0 == s2 == off, f"SGD ({what}): stages 0, 2 and 2 offloaded agree bit for bit ({s0}, {s2}, {off})")
        check(all(abs(g - c) <= 2e-2 * abs(c) for g, c in zip(s0, cpu)),
              f"SGD ({what}): every loss within 2e-2 of the CPU's (GPU {s0}, CPU {cpu})")

elif CASE == "muon":
    # Muon (the Newton-Schulz GEMMs through cuBLASLt, the momentum and step kernels) and bf16 optimizer states
    # (the stochastic rounding kernel): the stages agree bit for bit on the GPU, and the losses follow the CPU's.
    for name, opt in (("muon", ["--optimizer", "Muon", "--lr", "0.02", "--adam-lr", "1e-3"]),
                      ("bf16-states", ["--bf16-optimizer-states"]),
                      ("muon-bf16-states", ["--optimizer", "Muon", "--lr", "0.02", "--bf16-optimizer-states"])):
        cpu, _, _ = train(f"{name}-cpu", opt + ["--device", "cpu", "--zero-stage", "0"], 2)
        gpu = [train(f"{name}-s{s}", opt + ["--device", "cuda", "--zero-stage", str(s)], 2)[0] for s in range(4)]
        check(all(g == gpu[0] for g in gpu), f"{name}: stages 0-3 agree bit for bit on the GPU ({gpu})")
        check(all(abs(g - c) <= 2e-2 * abs(c) for g, c in zip(gpu[0], cpu)),
              f"{name}: every loss within 2e-2 of the CPU's (GPU {gpu[0]}, CPU {cpu})")

elif CASE == "refusals":
    for extra, says in ((["--dtype", "fp32"], "fp32 compute runs on the CPU only"),):
        rc, out, err = run(common + ["--device", "cuda"] + extra)
        check(rc == 2 and "--device cuda" in err and says in err, f"{' '.join(extra)} on the GPU exits 2 saying so",
              err[-2000:])

elif CASE == "llama":
    import json

    dims = ["--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "256", "--intermediate", "512",
            "--vocab", "320", "--ctx", "128"]

    def llama_dir(name, extra=()):
        d = os.path.join(tmp, name)
        rc, out, err = run(["init", "--arch", "llama", *dims, "--seed", "11", "--out", d, *extra])
        check(rc == 0, f"init --arch llama {' '.join(extra)}", err)
        return [d if a == init else a for a in base]

    start = llama_dir("llama")
    for W in (1, 2):
        ranks = W if W > 1 else None
        cpu, cpu_mem, _ = train(f"llama-cpu-w{W}", ["--device", "cpu", "--zero-stage", "0"], ranks, start=start)
        first = None
        for stage in range(4):
            losses, mem, err = train(f"llama-gpu-w{W}-s{stage}", ["--device", "cuda", "--zero-stage", str(stage)],
                                     ranks, start=start)
            if first is None:
                first = losses
                check(abs(losses[0] - cpu[0]) <= 5e-3 * abs(cpu[0]),
                      f"Llama W={W}: the first loss agrees with the CPU's bf16 run (GPU {losses[0]!r}, CPU {cpu[0]!r})")
                check(all(abs(g - c) <= 2e-2 * abs(c) for g, c in zip(losses, cpu)),
                      f"Llama W={W}: every loss within 2e-2 of the CPU's (GPU {losses}, CPU {cpu})")
                for g, c in zip(mem, cpu_mem):
                    for cat in STATE_CATEGORIES:
                        check(g["peak_bytes"].get(cat) == c["peak_bytes"].get(cat),
                              f"Llama W={W} rank {g['rank']}: peak {cat} bytes on the GPU are the CPU's "
                              f"({g['peak_bytes'].get(cat)} vs {c['peak_bytes'].get(cat)})")
            else:
                check(losses == first, f"Llama W={W}: stage {stage} gives stage 0's losses bit for bit "
                                       f"({losses} vs {first})")
            rc, out, err = run(["estimate", "--arch", "llama", *dims, "--seq", "128", "--micro-batch", "4",
                                "--gpus", str(W), "--stage", str(stage), "--dtype", "bf16", "--device", "cuda",
                                "--fp32-grad-accum", "--json"])
            check(rc == 0, f"Llama W={W} stage {stage}: estimate --device cuda", err)
            want = json.loads(out)["stages"][0]["bytes_per_rank"]["total"]
            for rec in mem:
                got = rec["peak_bytes"]["total"]
                check(abs(want - got) <= 0.02 * got, f"Llama W={W} stage {stage} rank {rec['rank']}: peak {got} bytes, "
                                                     f"predicted {want} ({100 * (want - got) / got:+.3f}%)")
    qwen = llama_dir("qwen2", ("--qwen2", "--tie"))
    s0, _, _ = train("qwen2-gpu-s0", ["--device", "cuda", "--zero-stage", "0"], 2, start=qwen)
    s3, _, _ = train("qwen2-gpu-s3", ["--device", "cuda", "--zero-stage", "3"], 2, start=qwen)
    check(s3 == s0, f"Qwen2 (biases, tied head) W=2: stage 3 gives stage 0's losses bit for bit ({s3} vs {s0})")

else:
    sys.exit(f"unknown case {CASE}")
print(f"train_gpu_tests {CASE}: all checks passed")
