#!/usr/bin/python3
"""The PyTorch side of the training benchmarks (bench/train/run.sh): the GPT-2, initial weights, batches and
AdamW parameter groups of zdptest.torch_gpt2 (tests/pylib: the same model, weights and batches as zerodp's)
with gradient clipping (docs/reference/optimizer.md), timed step by step.

    torch_gpt2.py single --init F --data tokens.bin --micro-batch B --seq T --steps K [--threads N]
    torch_gpt2.py ddp    --world 2 ...   (DistributedDataParallel over gloo, one process a rank)
    torch_gpt2.py zero1  --world 2 ...   (DDP + ZeroRedundancyOptimizer wrapping torch.optim.AdamW)

Each rank runs on --threads threads (torch.set_num_threads; the caller also sets OMP_NUM_THREADS, which
the OpenBLAS under torch reads when it loads). Prints one JSON object: the wall-clock ms of every step on
rank 0 (zero_grad, forward, backward, clipping and the optimizer step; for DDP up to the end of the
optimizer step, so every gradient all-reduce is inside), rank 0's loss of every step, and versions.
Only numpy, torch (Debian's python3-torch 1.13 is enough) and zdptest: run.sh puts tests/pylib on
PYTHONPATH; by hand, `PYTHONPATH=tests/pylib` or `pip install tests/pylib` first.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from zdptest.torch_gpt2 import add_optimizer_args, batch, build_model, param_groups, read_tokens


# ---- training --------------------------------------------------------------------------------------

def train(rank, world, args, mode, out_queue):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.pin:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    if world > 1:
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    model, cfg = build_model(args.init)
    tokens = read_tokens(args.data)
    hyper = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    if mode == "single":
        net = model
        opt = torch.optim.AdamW(param_groups(model, args.weight_decay), **hyper)
    else:
        net = nn.parallel.DistributedDataParallel(model)
        if mode == "ddp":
            opt = torch.optim.AdamW(param_groups(model, args.weight_decay), **hyper)
        else:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(param_groups(model, args.weight_decay),
                                          optimizer_class=torch.optim.AdamW, **hyper)
    B, T = args.micro_batch, args.seq
    ms, losses = [], []
    for step in range(args.steps):
        x, y = batch(tokens, step, world, rank, B, T)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = net(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    if rank == 0:
        result = {"impl": "pytorch", "mode": mode, "world": world, "threads": args.threads,
                  "micro_batch": B, "seq": T, "model": cfg, "ms": ms, "loss": losses,
                  "torch": torch.__version__, "pinned": bool(args.pin),
                  "optimizer": "ZeroRedundancyOptimizer(AdamW)" if mode == "zero1" else "AdamW"}
        if out_queue is None:
            print(json.dumps(result), flush=True)
        else:
            out_queue.put(result)


def spawned(rank, world, args, mode, out_queue):
    train(rank, world, args, mode, out_queue)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["single", "ddp", "zero1"])
    ap.add_argument("--init", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="threads per rank")
    ap.add_argument("--pin", action="store_true", help="pin rank r to core r (as mpirun --bind-to core)")
    add_optimizer_args(ap)
    args = ap.parse_args()
    if args.mode == "single":
        if args.world != 1:
            sys.exit("single: --world must be 1")
        train(0, 1, args, "single", None)
        return
    if args.world < 2:
        sys.exit(f"{args.mode}: --world must be at least 2")
    # Loopback only: the ranks meet on 127.0.0.1.
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ctx = torch.multiprocessing.get_context("spawn")
    queue = ctx.SimpleQueue()
    torch.multiprocessing.spawn(spawned, args=(args.world, args, args.mode, queue), nprocs=args.world, join=True)
    print(json.dumps(queue.get()), flush=True)


if __name__ == "__main__":
    main()
