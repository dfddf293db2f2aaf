"""The PyTorch peer of `zerodp train --device cuda` (bench/gpu/run.sh, issue 15 point 5).

The same GPT-2 as zerodp trains (docs/reference/model.md#gpt2), from the same initial weights (the safetensors file
`zerodp init` wrote), on the same batches of the same token file (docs/reference/data-order.md#ranks, W = 1), with AdamW on
the same parameter groups (weight decay on tensors of two or more dimensions, optimizer.md) and the same
gradient clipping (model.md): the model, readers and batches are zdptest.torch_gpt2's (tests/pylib), imported.
What changes is how it runs, set up as a PyTorch user training on a GPU would:

  - bf16 autocast around forward and loss, fp32 parameters, gradients and AdamW state (the master
    weights are the parameters themselves);
  - attention through F.scaled_dot_product_attention(is_causal=True), which picks the flash kernel
    on an H100/H200 in bf16; on a torch without it (Debian's 1.13) the explicit masked softmax of
    zdptest.torch_gpt2, so that the script still runs there for its smoke test;
  - AdamW with fused=True on CUDA (one kernel for the whole update);
  - --compile: torch.compile on the model and its loss.

    torch_gpt2_cuda.py --init F --data tokens.bin --micro-batch B --seq T --steps K --warmup W
                       [--device cuda|cpu] [--dtype bf16|fp32] [--compile] [--peak-tflops X]
                       [--lr ... --beta1 ... --beta2 ... --eps ... --weight-decay ... --clip ...]

Each step is timed from a torch.cuda.synchronize() before it to one after it: the copy of the batch
to the device, zero_grad, forward, loss, backward, clipping and the optimizer step. Prints one JSON
object on stdout: every step's ms and loss, the median ms of the steps after the first --warmup,
tokens/s, MFU against the GPU's dense bf16 peak (zdptest/gpu_peak.py; null with a note for a GPU
it does not know unless --peak-tflops is given), torch.cuda.max_memory_allocated() and
max_memory_reserved(), the torch version and the GPU's name.
"""
import argparse
import contextlib
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from zdptest import flops  # step_flops, the causal matmul count report.py uses too
from zdptest import gpu_peak
from zdptest import torch_gpt2  # build_model, read_tokens, batch, param_groups, add_optimizer_args

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")
PROG = "torch_gpt2_cuda.py"  # the prefix of its messages


class DeviceGPT2(nn.Module):
    """torch_gpt2.GPT2's parameters with a forward that runs on any device and returns the loss.

    torch_gpt2.GPT2.forward makes its position indices and causal mask on the CPU, which a CUDA
    model cannot use, and writes attention out in full; this forward makes them where the input is
    and uses scaled_dot_product_attention when torch has it. The parameters are the same modules,
    so torch_gpt2.param_groups and the weights loaded from the init file apply unchanged."""

    def __init__(self, gpt, attention):
        super().__init__()
        self.gpt = gpt
        self.attention = attention
        if attention == "math":
            n_ctx = gpt.wpe.weight.shape[0]
            # A buffer, so that .to(device) moves it; not saved (nothing here is saved).
            self.register_buffer("causal_mask", torch.ones(n_ctx, n_ctx, dtype=torch.bool).triu(1),
                                 persistent=False)

    def attend(self, q, k, v):
        if self.attention == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T, hs = q.shape[-2], q.shape[-1]
        att = (q @ k.transpose(-2, -1)) * (1.0 / hs ** 0.5)
        att = att.masked_fill(self.causal_mask[:T, :T], float("-inf")).softmax(dim=-1)
        return att @ v

    def forward(self, idx, targets):
        g = self.gpt
        B, T = idx.shape
        x = g.wte(idx) + g.wpe(torch.arange(T, device=idx.device))
        for blk in g.h:
            C = x.shape[-1]
            hs = C // blk.H
            q, k, v = blk.c_attn(blk.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, blk.H, hs).transpose(1, 2) for t in (q, k, v))
            y = self.attend(q, k, v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + blk.attn_proj(y)
            x = x + blk.mlp_proj(F.gelu(blk.c_fc(blk.ln_2(x)), approximate="tanh"))
        logits = F.linear(g.ln_f(x), g.wte.weight)  # tied head, no bias
        # The loss in fp32 whatever the logits' dtype (autocast does so on CUDA anyway; explicit
        # here so that the CPU smoke test's numbers mean the same).
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def make_optimizer(model, args, device, prog=PROG):
    """torch.optim.AdamW on torch_gpt2's groups; fused=True on CUDA (one kernel for every tensor)."""
    kwargs = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    groups = torch_gpt2.param_groups(model, args.weight_decay)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs), "fused"
        except (TypeError, RuntimeError) as e:  # a torch without fused AdamW (before 2.0)
            print(f"{prog}: fused AdamW unavailable ({e}); using the default", file=sys.stderr)
            groups = torch_gpt2.param_groups(model, args.weight_decay)
    return torch.optim.AdamW(groups, **kwargs), "default"


def autocast_context(device, dtype):
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def add_run_args(ap, init_help):
    """The flags both peers take (this one and torch_llama_cuda.py), in the order --help lists them."""
    ap.add_argument("--init", required=True, help=init_help)
    ap.add_argument("--data", required=True, help="token file (llm.c layout or raw uint16)")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="first steps left out of the median")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (cpu: for a smoke test)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                    help="bf16: autocast to bf16 around forward and loss (fp32 parameters); fp32: none")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model and its loss")
    ap.add_argument("--attention", choices=["auto", "sdpa", "math"], default="auto",
                    help="auto: scaled_dot_product_attention when torch has it, else the explicit softmax")
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help="dense bf16 peak to compute MFU against (default: from the GPU's name)")
    torch_gpt2.add_optimizer_args(ap)
    # zerodp train's own defaults (src/train/train_config.h, `zerodp train --help`): weight decay 0.01,
    # no clipping. torch_gpt2's flags default to the benchmarks' 0.1 and 1.0, which run.sh passes
    # explicitly to both sides anyway.
    ap.set_defaults(weight_decay=0.01, clip=0.0)


def check_run_args(ap, args):
    if args.steps <= args.warmup:
        ap.error(f"--steps ({args.steps}) must exceed --warmup ({args.warmup}): no step would be timed")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_args(ap, "initial weights (F32 safetensors from `zerodp init`)")
    args = ap.parse_args(argv)
    check_run_args(ap, args)
    return args


def choose_device(args, prog=PROG):
    """(device, attention) for the flags, or an exit naming what this machine or torch lacks. On CUDA the
    device is made current, so that whatever allocates without naming one lands on it."""
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"{prog}: error: --device {args.device}: torch {torch.__version__} "
                 f"(CUDA build {torch.version.cuda}) sees no usable GPU")
    if args.attention == "sdpa" and not HAVE_SDPA:
        sys.exit(f"{prog}: error: --attention sdpa: torch {torch.__version__} has no "
                 "scaled_dot_product_attention")
    attention = args.attention if args.attention != "auto" else ("sdpa" if HAVE_SDPA else "math")
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"{prog}: error: --compile: torch {torch.__version__} has no torch.compile")
    if device.type == "cuda":
        if device.index is None:  # "cuda": the current device, named by its index from here on
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    return device, attention


def train_and_report(model, cfg, step_fl, tokens, args, device, attention, prog=PROG, extra=None):
    """Trains model (on device; its forward takes (inputs, targets) and returns the loss) for args.steps
    steps of torch_gpt2.batch, timing each, and prints the result JSON. extra: keys that go into the
    JSON right after "impl" (the Llama peer's "arch"); none for this script, whose output stays as
    report.py and test_bench_gpu.py read it. step_fl: the causal FLOPs of one step (zdptest/flops.py)."""
    opt, adamw = make_optimizer(model, args, device, prog)
    step_fn = torch.compile(model) if args.compile else model

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    B, T = args.micro_batch, args.seq
    params = [p for p in model.parameters() if p.requires_grad]
    ms, losses = [], []
    for step in range(args.steps):
        x, y = torch_gpt2.batch(tokens, step, 1, 0, B, T)
        sync()
        t0 = time.perf_counter()
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=True)
        with autocast_context(device, args.dtype):
            loss = step_fn(x, y)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.clip)
        opt.step()
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())  # after the timed region: reading it back would sync anyway

    timed = ms[args.warmup:]
    median_ms = statistics.median(timed)
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    if device.type == "cuda" or args.peak_tflops:
        peak, peak_note = gpu_peak.choose_peak(gpu_name, args.peak_tflops)
    else:
        peak, peak_note = None, "cpu run: MFU not computed (no GPU peak)"
    achieved = step_fl / (median_ms / 1e3)
    result = {
        "impl": "pytorch", **(extra or {}), "mode": "compile" if args.compile else "eager", "device": str(device),
        "dtype": args.dtype, "world": 1, "micro_batch": B, "seq": T, "model": cfg,
        "attention": attention, "adamw": adamw, "warmup": args.warmup,
        "hyper": {"lr": args.lr, "beta1": args.beta1, "beta2": args.beta2, "eps": args.eps,
                  "weight_decay": args.weight_decay, "clip": args.clip},
        "ms": ms, "loss": losses, "median_ms": median_ms, "tokens_per_step": B * T,
        "tokens_per_s": B * T / (median_ms / 1e3), "step_flops": step_fl, "flops_per_s": achieved,
        "peak_flops": peak, "mfu": achieved / peak if peak else None, "peak_note": peak_note,
        "max_memory_allocated": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "max_memory_reserved": torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None,
        "torch": torch.__version__, "cuda": torch.version.cuda, "gpu": gpu_name,
    }
    print(json.dumps(result), flush=True)


def main(argv=None):
    args = parse_args(argv)
    device, attention = choose_device(args)
    torch.manual_seed(0)

    gpt, cfg = torch_gpt2.build_model(args.init)
    if args.seq > cfg["N"]:
        sys.exit(f"{PROG}: error: --seq {args.seq} exceeds the model's context {cfg['N']}")
    model = DeviceGPT2(gpt, attention).to(device)
    tokens = torch_gpt2.read_tokens(args.data)
    step_fl = flops.step_flops(cfg["L"], cfg["C"], cfg["V"], args.micro_batch, args.seq, causal=True)
    train_and_report(model, cfg, step_fl, tokens, args, device, attention)


if __name__ == "__main__":
    main()
