"""One rank of a PyTorch 2.x / DeepSpeed peer of `zerodp train` (bench/peers/run.sh, issue 12 point 4).

Launched by mpirun, one process a rank (`mpirun -n 2 --bind-to core`, so the ranks are pinned as
zerodp's are); the rank and world size come from Open MPI's environment and the ranks meet over gloo on
127.0.0.1:$MASTER_PORT. The model, initial weights, token file, batches and AdamW parameter groups are
zdptest.torch_gpt2's (tests/pylib, shared with bench/train and bench/gpu), so every runner trains the same
GPT-2 from the same weights on the same batches as zerodp. run.sh installs zdptest in the peers' venv
(`pip install tests/pylib`); one_rank.sh uses that venv too.

    peer_train.py MODE --dtype fp32|bf16 --init F --data tokens.bin --micro-batch B --seq T --steps K
                  [--arch gpt2|llama] [--attn sdpa|eager]

--arch llama (bench/peers/run.sh with ARCH=llama): --init is the model directory `zerodp init --arch llama`
wrote (config.json + model.safetensors), and the model is Hugging Face transformers' LlamaForCausalLM
loaded from it with from_pretrained in fp32 (every tensor must come from the file: none missing, left
over or mis-shaped), attention implementation --attn (default sdpa: PyTorch's
scaled_dot_product_attention; eager: transformers' written-out softmax(QK^T)V). FSDP2 shards every
LlamaDecoderLayer and the root. The data, batches, loss, AdamW groups and clipping are the GPT-2's.

MODE:
    single         one process: the plain model and torch.optim.AdamW (bench/peers/one_rank.sh)
    ddp            DistributedDataParallel + torch.optim.AdamW
    zero1          DDP + torch.distributed.optim.ZeroRedundancyOptimizer(AdamW)
    fsdp2          FSDP2 fully_shard on every block and the root, reshard_after_forward=False (ZeRO-2 like)
    fsdp2-reshard  the same with reshard_after_forward=True (ZeRO-3 like)
    ds1 ds2 ds3    DeepSpeed ZeRO stage 1/2/3 on its CPU accelerator (DS_ACCELERATOR=cpu), gloo, the
                   client optimizer torch.optim.AdamW with the same groups, gradient_clipping 1.0

bf16: torch.autocast("cpu", torch.bfloat16) around the forward for the PyTorch modes (fp32 parameters,
gradients and communication); DeepSpeed's `bf16.enabled` (bf16 parameters and gradients, fp32 master
weights in its optimizer wrapper). fp32: no autocast, no bf16.

Rank 0 prints one JSON object: the wall-clock ms of every step (forward, backward, gradient clipping,
optimizer step and zeroing of gradients; every collective of the step is inside), the loss of every
step averaged over the ranks (as zerodp's metrics report it; the averaging all-reduce is outside the
timed region), the versions and the settings.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from zdptest import torch_gpt2  # build_model, read_tokens, batch, param_groups, add_optimizer_args

MODES = ["single", "ddp", "zero1", "fsdp2", "fsdp2-reshard", "ds1", "ds2", "ds3"]


class WithLoss(nn.Module):
    """The GPT-2 (or the transformers Llama) with its cross-entropy loss inside forward (DeepSpeed's engine
    returns what forward does). The loss is taken in fp32 whatever the logits' dtype."""

    def __init__(self, gpt, hf=False):
        super().__init__()
        self.gpt = gpt
        self.hf = hf

    def forward(self, x, y):
        logits = self.gpt(input_ids=x, use_cache=False).logits if self.hf else self.gpt(x)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))


def build_llama(model_dir, attn):
    """(LlamaForCausalLM from the directory `zerodp init --arch llama` wrote, fp32, train mode; its sizes and
    the versions). Exits naming the directory if any tensor is missing, left over or mis-shaped."""
    import transformers
    from transformers import LlamaForCausalLM
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    major, minor = (int(v) for v in transformers.__version__.split(".")[:2])
    dtype_kw = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"  # renamed in 4.56
    model, info = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation=attn, output_loading_info=True,
                                                   **{dtype_kw: torch.float32})
    bad = {k: v for k, v in info.items() if v}
    if bad:
        sys.exit(f"peer_train.py: {model_dir}: from_pretrained did not load every tensor as it is: {bad}")
    model.config.use_cache = False
    model.train()
    c = model.config
    cfg = dict(arch="llama", L=c.num_hidden_layers, H=c.num_attention_heads, KV=c.num_key_value_heads,
               C=c.hidden_size, I=c.intermediate_size, V=c.vocab_size, N=c.max_position_embeddings,
               tied=bool(c.tie_word_embeddings), attn=model.config._attn_implementation,
               params=sum(p.numel() for p in model.parameters()))
    return model, cfg, {"transformers": transformers.__version__}


def rank_env():
    """RANK/WORLD_SIZE/LOCAL_RANK from Open MPI's (or torchrun's) environment."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("LOCAL_RANK", str(rank))))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local),
                      LOCAL_WORLD_SIZE=str(world))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return rank, world


def setup(args, rank, world):
    """(module to call, optimizer or None, DeepSpeed engine or None, versions)."""
    versions = {"torch": torch.__version__}
    llama = args.arch == "llama"
    if llama:
        gpt, cfg, more = build_llama(args.init, args.attn)
        versions.update(more)
        blocks = gpt.model.layers
    else:
        gpt, cfg = torch_gpt2.build_model(args.init)
        blocks = gpt.h
    model = WithLoss(gpt, hf=llama)
    hyper = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    mode = args.mode
    if mode.startswith("ds"):
        import deepspeed
        versions["deepspeed"] = deepspeed.__version__
        versions["ds_accelerator"] = deepspeed.get_accelerator().device_name()
        deepspeed.init_distributed(dist_backend="gloo")
        stage = int(mode[2])
        config = {
            "train_micro_batch_size_per_gpu": args.micro_batch,
            "gradient_accumulation_steps": 1,
            "train_batch_size": args.micro_batch * world,
            "gradient_clipping": args.clip,
            "zero_optimization": {"stage": stage},
            "bf16": {"enabled": args.dtype == "bf16"},
            "zero_allow_untested_optimizer": True,
            "steps_per_print": 10 ** 9,
            "wall_clock_breakdown": False,
        }
        if stage == 3 and not llama:
            # The tied LM head reads wte.weight outside the embedding module's forward: ZeRO-3 must
            # keep that parameter gathered for the root's forward.
            deepspeed.zero.register_external_parameter(gpt, gpt.wte.weight)
        opt = torch.optim.AdamW(torch_gpt2.param_groups(model, args.weight_decay), **hyper)
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
        return engine, None, engine, versions, cfg
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    if mode == "single":  # one process, no wrapper: the plain model and optimizer
        opt = torch.optim.AdamW(torch_gpt2.param_groups(model, args.weight_decay), **hyper)
        return model, opt, None, versions, cfg
    if mode in ("ddp", "zero1"):
        net = nn.parallel.DistributedDataParallel(model)
        if mode == "ddp":
            opt = torch.optim.AdamW(torch_gpt2.param_groups(model, args.weight_decay), **hyper)
        else:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(torch_gpt2.param_groups(model, args.weight_decay),
                                          optimizer_class=torch.optim.AdamW, **hyper)
        return net, opt, None, versions, cfg
    from torch.distributed.device_mesh import init_device_mesh
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:  # torch < 2.6
        from torch.distributed._composable.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    reshard = mode == "fsdp2-reshard"
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    opt = torch.optim.AdamW(torch_gpt2.param_groups(model, args.weight_decay), **hyper)
    return model, opt, None, versions, cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=MODES)
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--init", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1, help="threads per rank (torch.set_num_threads)")
    ap.add_argument("--arch", choices=["gpt2", "llama"], default="gpt2",
                    help="gpt2: --init is zerodp's GPT-2 safetensors file; llama: a Llama model directory, "
                         "run as transformers' LlamaForCausalLM")
    ap.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa",
                    help="--arch llama: transformers' attention implementation (default sdpa)")
    torch_gpt2.add_optimizer_args(ap)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rank, world = rank_env()
    net, opt, engine, versions, cfg = setup(args, rank, world)
    tokens = torch_gpt2.read_tokens(args.data)
    bf16 = args.dtype == "bf16"
    autocast = bf16 and engine is None
    B, T = args.micro_batch, args.seq
    ms, losses = [], []
    for step in range(args.steps):
        x, y = torch_gpt2.batch(tokens, step, world, rank, B, T)
        t0 = time.perf_counter()
        if engine is not None:
            loss = engine(x, y)
            engine.backward(loss)
            engine.step()  # clips (gradient_clipping), steps and zeroes the gradients
        else:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = net(x, y)
            loss.backward()
            if args.clip > 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), args.clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
        ms.append((time.perf_counter() - t0) * 1e3)
        mean_loss = loss.detach().float().clone()
        torch.distributed.all_reduce(mean_loss)
        losses.append(mean_loss.item() / world)
    torch.distributed.barrier()
    if rank == 0:
        print(json.dumps({"impl": "deepspeed" if engine is not None else "pytorch", "mode": args.mode,
                          "dtype": args.dtype, "world": world, "threads": args.threads,
                          "threads_seen": torch.get_num_threads(), "micro_batch": B, "seq": T,
                          "model": cfg, "ms": ms, "loss": losses, **versions,
                          "affinity": sorted(os.sched_getaffinity(0))}), flush=True)
    torch.distributed.destroy_process_group()
    # Leave without running the interpreter's and libraries' exit handlers: gloo's threads sometimes
    # abort the process there ("terminate called without an active exception", seen on rank 1 in 2 of
    # 44 runs on 2026-11-23), after the results were printed and every collective was done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
