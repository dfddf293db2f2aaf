#!/usr/bin/python3
"""An independent PyTorch implementation of zerodp's training semantics
(docs/reference/: model.md, data-order.md, optimizer.md).

Written from those documents alone (never from zerodp's C++), so that comparing the two catches mistakes
in either. It trains one process on the whole global batch: data-order.md defines which W·G·B sequences make up
step s, model.md says the loss is the mean over all of their tokens, so how zerodp splits them over ranks
and micro-steps must not change the result (only the rounding).

    ref_train.py --init F.safetensors --data tokens.bin --steps K --micro-batch B --seq T --accum G
                 --world W --lr X --beta1 X --beta2 X --eps X --weight-decay X --clip X
                 [--heads H] [--double] [--metrics out.jsonl] [--out final.safetensors]

Writes one JSON object per step, {"step", "loss", "grad_norm", "lr"}, and the final parameters as F32
safetensors under the names of model.md. Exit 2 with a message naming the file for a bad input file.

Only numpy and torch (Debian's python3-torch): the safetensors and token formats are parsed here.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch


class InputError(Exception):
    """A bad input file or argument (the message says which and where)."""


# ---- safetensors (files.md) --------------------------------------------------------------------------

# dtype name -> (bytes per element, decoder from raw little-endian bytes to float32 numpy)
def _decode_f32(raw):
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def _decode_f16(raw):
    return np.frombuffer(raw, dtype="<f2").astype(np.float32)


def _decode_bf16(raw):
    # bf16 is the upper half of an f32: widen the bits and reinterpret.
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32)


SAFETENSORS_DTYPES = {"F32": (4, _decode_f32), "F16": (2, _decode_f16), "BF16": (2, _decode_bf16)}


def read_safetensors(path):
    """Returns ({name: float32 numpy array}, metadata dict). InputError for a malformed file."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e}")
    if len(blob) < 8:
        raise InputError(f"{path}: malformed safetensors: {len(blob)} bytes, shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise InputError(f"{path}: malformed safetensors: header of {header_len} bytes but the file has only "
                         f"{len(blob) - 8} after the length")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: malformed safetensors header: {e}")
    if not isinstance(header, dict):
        raise InputError(f"{path}: malformed safetensors header: not a JSON object")
    data = memoryview(blob)[8 + header_len:]
    metadata = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], list(entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: tensor '{name}': malformed header entry {entry!r}")
        if dtype not in SAFETENSORS_DTYPES:
            raise InputError(f"{path}: tensor '{name}': unsupported dtype {dtype} (F32, F16, BF16 are read)")
        width, decode = SAFETENSORS_DTYPES[dtype]
        numel = math.prod(shape)
        if not (0 <= begin <= end <= len(data)) or end - begin != numel * width:
            raise InputError(f"{path}: tensor '{name}': data offsets [{begin}, {end}) do not hold {dtype} {shape} "
                             f"within the {len(data)} bytes of data")
        tensors[name] = decode(bytes(data[begin:end])).reshape(shape)
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None, dtype="F32"):
    """Writes {name: array} in `dtype` (F32, F16 or BF16), in the order given, atomically."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, value in tensors.items():
        a = np.ascontiguousarray(np.asarray(value, dtype=np.float32))
        if dtype == "F32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        elif dtype == "BF16":  # round to nearest even on the upper 16 bits
            bits = a.view(np.uint32).astype(np.uint64)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            raw = bits.astype("<u2").tobytes()
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # keeps the data 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
    os.replace(tmp, path)


# ---- GPT-2 (model.md) --------------------------------------------------------------------------------

HPARAM_KEYS = ("n_layer", "n_head", "n_embd", "vocab_size", "n_ctx")


def param_shapes(cfg):
    """The model.md table: name -> shape, in the table's order."""
    L, C, V, N = cfg["n_layer"], cfg["n_embd"], cfg["vocab_size"], cfg["n_ctx"]
    shapes = {"wte.weight": [V, C], "wpe.weight": [N, C]}
    for i in range(L):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": [C], p + "ln_1.bias": [C],
            p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
            p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
            p + "ln_2.weight": [C], p + "ln_2.bias": [C],
            p + "mlp.c_fc.weight": [C, 4 * C], p + "mlp.c_fc.bias": [4 * C],
            p + "mlp.c_proj.weight": [4 * C, C], p + "mlp.c_proj.bias": [C],
        })
    shapes.update({"ln_f.weight": [C], "ln_f.bias": [C]})
    return shapes


def _is_ignored(name):
    """Buffers and the tied head that files.md says to skip."""
    if name == "lm_head.weight":
        return True
    parts = name.split(".")
    return len(parts) == 4 and parts[0] == "h" and parts[2] == "attn" and parts[3] in ("bias", "masked_bias")


def _hparams(path, tensors, metadata, heads):
    """files.md: __metadata__, else config.json beside the file, else the shapes and --heads."""
    def from_dict(d, source):
        try:
            return {k: int(d[k]) for k in HPARAM_KEYS}
        except (TypeError, ValueError) as e:
            raise InputError(f"{source}: bad hyper-parameter value: {e}")

    if all(k in metadata for k in HPARAM_KEYS):
        return from_dict(metadata, f"{path}: __metadata__")
    cfg_path = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path) as f:
            try:
                d = json.load(f)
            except json.JSONDecodeError as e:
                raise InputError(f"{cfg_path}: {e}")
        if all(k in d for k in HPARAM_KEYS):
            return from_dict(d, cfg_path)
    if heads is None:
        raise InputError(f"{path}: no hyper-parameters in __metadata__ or config.json, and no --heads")
    for needed in ("wte.weight", "wpe.weight"):
        if needed not in tensors:
            raise InputError(f"{path}: tensor '{needed}' is missing")
    layers = 0
    while f"h.{layers}.ln_1.weight" in tensors:
        layers += 1
    V, C = tensors["wte.weight"].shape
    N = tensors["wpe.weight"].shape[0]
    return {"n_layer": layers, "n_head": heads, "n_embd": C, "vocab_size": V, "n_ctx": N}


def load_gpt2(path, heads=None):
    """Reads a GPT-2 safetensors file: (cfg, {model.md name: float32 numpy array}), checked against model.md."""
    raw, metadata = read_safetensors(path)
    tensors = {}
    for name, value in raw.items():
        short = name[len("transformer."):] if name.startswith("transformer.") else name
        if _is_ignored(short):
            continue
        if short in tensors:
            raise InputError(f"{path}: tensor '{short}' appears twice")
        tensors[short] = value
    cfg = _hparams(path, tensors, metadata, heads)
    if cfg["n_embd"] % cfg["n_head"] != 0:
        raise InputError(f"{path}: n_embd {cfg['n_embd']} is not divisible by n_head {cfg['n_head']}")
    expected = param_shapes(cfg)
    for name, shape in expected.items():
        if name not in tensors:
            raise InputError(f"{path}: tensor '{name}' is missing (expected shape {shape})")
        if list(tensors[name].shape) != shape:
            raise InputError(f"{path}: tensor '{name}' has shape {list(tensors[name].shape)}, expected {shape}")
    unknown = sorted(set(tensors) - set(expected))
    if unknown:
        raise InputError(f"{path}: unknown tensor '{unknown[0]}'")
    return cfg, {name: tensors[name] for name in expected}


# Each function below is one piece of model.md, written out rather than taken from torch.nn so that the
# math is visible (tests/reference/test_ref_train.py checks them against torch.nn.functional).

def layer_norm(x, weight, bias, eps=1e-5):
    # y = (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance over the last axis
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def gelu_tanh(x):
    # GELU, tanh approximation: 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def causal_self_attention(x, c_attn_w, c_attn_b, c_proj_w, c_proj_b, n_head):
    # qkv = x·W + b, split q | k | v; per head softmax(q·kᵀ/sqrt(hs) + causal mask)·v; then c_proj.
    n, t, c = x.shape
    hs = c // n_head
    qkv = x @ c_attn_w + c_attn_b
    q, k, v = qkv.split(c, dim=-1)
    q, k, v = (z.view(n, t, n_head, hs).transpose(1, 2) for z in (q, k, v))  # [n, H, t, hs]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    future = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v  # [n, H, t, hs]
    y = y.transpose(1, 2).reshape(n, t, c)
    return y @ c_proj_w + c_proj_b


def gpt2_logits(p, cfg, idx):
    """idx: [n, t] token ids -> logits [n, t, V]."""
    t = idx.shape[1]
    x = p["wte.weight"][idx] + p["wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        h = f"h.{i}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        x = x + causal_self_attention(a, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"],
                                      p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"], cfg["n_head"])
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        m = gelu_tanh(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].t()  # tied head, no bias


def token_losses(p, cfg, inputs, targets):
    """Per-token cross-entropy, -log softmax(logits)[target], shape [n, t]."""
    logits = gpt2_logits(p, cfg, inputs)
    logp = torch.log_softmax(logits, dim=-1)
    return -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def loss_and_grads(p, cfg, inputs, targets, chunks=1):
    """model.md: the mean cross-entropy over every token of (inputs, targets) and its gradient. `chunks`
    splits the sequences into that many groups, each weighted by its share of the tokens: the result
    must be the same (up to rounding) however it is split."""
    names = list(p)
    total_tokens = inputs.numel()
    loss = 0.0
    grads = [torch.zeros_like(p[n]) for n in names]
    for part_in, part_tg in zip(inputs.tensor_split(chunks), targets.tensor_split(chunks)):
        if part_in.numel() == 0:
            continue
        part_loss = token_losses(p, cfg, part_in, part_tg).sum() / total_tokens
        part_grads = torch.autograd.grad(part_loss, [p[n] for n in names])
        loss += part_loss.item()
        for acc, g in zip(grads, part_grads):
            acc += g
    return loss, dict(zip(names, grads))


# ---- token files (files.md) and the global batch (data-order.md) -------------------------------------

LLMC_MAGIC = 20240520
LLMC_HEADER_BYTES = 1024


def read_tokens(path, vocab_size):
    """The tokens of a raw uint16 stream or an llm.c file, as int64 numpy. InputError for a bad file."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e}")
    if len(blob) == 0:
        raise InputError(f"{path}: empty token file")
    if len(blob) >= 4 and struct.unpack("<i", blob[:4])[0] == LLMC_MAGIC:
        if len(blob) < LLMC_HEADER_BYTES:
            raise InputError(f"{path}: bad header: llm.c magic but only {len(blob)} bytes")
        header = struct.unpack("<256i", blob[:LLMC_HEADER_BYTES])
        if header[1] != 1:
            raise InputError(f"{path}: bad header: version {header[1]}, expected 1")
        count = header[2]
        if count <= 0 or LLMC_HEADER_BYTES + 2 * count != len(blob):
            raise InputError(f"{path}: bad header: {count} tokens announced, {len(blob) - LLMC_HEADER_BYTES} "
                             "bytes of tokens present")
        body = blob[LLMC_HEADER_BYTES:]
    else:
        if len(blob) % 2 != 0:
            raise InputError(f"{path}: raw token stream of odd length {len(blob)}")
        body = blob
    tokens = np.frombuffer(body, dtype="<u2").astype(np.int64)
    if tokens.size == 0:
        raise InputError(f"{path}: no tokens")
    bad = np.nonzero(tokens >= vocab_size)[0]
    if bad.size:
        raise InputError(f"{path}: token {tokens[bad[0]]} at position {bad[0]} is >= the vocabulary size {vocab_size}")
    return tokens


def global_batch(tokens, step, world, micro_batch, seq, accum):
    """data-order.md: every (micro-step g, rank r) of step s reads B·T+1 tokens from ((s·G + g)·W + r)·B·T,
    modulo the token count. Returns (inputs, targets), each [G·W·B, T], ordered by (g, r, b)."""
    n = tokens.size
    bt = micro_batch * seq
    inputs, targets = [], []
    for g in range(accum):
        for r in range(world):
            off = ((step * accum + g) * world + r) * bt
            window = tokens[(off + np.arange(bt + 1)) % n]
            inputs.append(window[:-1].reshape(micro_batch, seq))
            targets.append(window[1:].reshape(micro_batch, seq))
    return torch.from_numpy(np.concatenate(inputs)), torch.from_numpy(np.concatenate(targets))


# ---- optimizer (model.md's clipping, optimizer.md's AdamW) -------------------------------------------

def global_norm(grads):
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))


def clip_grads(grads, norm, clip):
    """model.md: with clip > 0, scales every gradient by min(1, clip / (norm + 1e-6)), in place."""
    if clip > 0:
        scale = min(1.0, clip / (norm + 1e-6))
        for g in grads.values():
            g.mul_(scale)


class AdamW:
    """optimizer.md, term by term. m and v start at zero; decay only on tensors of 2 or more dimensions."""

    def __init__(self, params, lr, beta1, beta2, eps, weight_decay):
        self.params, self.lr, self.beta1, self.beta2 = params, lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay
        self.m = {n: torch.zeros_like(v) for n, v in params.items()}
        self.v = {n: torch.zeros_like(v) for n, v in params.items()}

    @torch.no_grad()
    def step(self, step, grads):
        t = step + 1
        for name, p in self.params.items():
            g = grads[name]
            if p.dim() >= 2:
                p -= self.lr * self.weight_decay * p
            m, v = self.m[name], self.v[name]
            m.mul_(self.beta1).add_((1 - self.beta1) * g)
            v.mul_(self.beta2).add_((1 - self.beta2) * g * g)
            m_hat = m / (1 - self.beta1 ** t)
            v_hat = v / (1 - self.beta2 ** t)
            p -= self.lr * m_hat / (torch.sqrt(v_hat) + self.eps)


def is_muon_matrix(name, shape):
    """optimizer.md#muon: the hidden 2-D weight matrices, those of the blocks (not wte, wpe, norms, biases)."""
    return len(shape) == 2 and name.startswith("h.")


def newton_schulz5(u):
    """The published quintic iteration, as docs/reference/optimizer.md#muon writes it."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = u / (torch.linalg.norm(u) + 1e-7)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(5):
        A = x @ x.T
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    return x.T if tall else x


class Muon:
    """optimizer.md#muon for the block matrices, written from the algorithm; AdamW (above) for the rest at
    adam_lr. momentum and nesterov as given; the matrices' weight decay decoupled like AdamW's."""

    def __init__(self, params, lr, adam_lr, momentum, nesterov, beta1, beta2, eps, weight_decay):
        self.lr, self.momentum, self.nesterov, self.weight_decay = lr, momentum, nesterov, weight_decay
        self.matrices = {n: p for n, p in params.items() if is_muon_matrix(n, tuple(p.shape))}
        others = {n: p for n, p in params.items() if n not in self.matrices}
        self.adamw = AdamW(others, adam_lr, beta1, beta2, eps, weight_decay)
        self.m = {n: torch.zeros_like(p) for n, p in self.matrices.items()}

    @torch.no_grad()
    def step(self, step, grads):
        mu = self.momentum
        for name, p in self.matrices.items():
            g, m = grads[name], self.m[name]
            m.mul_(mu).add_((1 - mu) * g)
            u = (1 - mu) * g + mu * m if self.nesterov else m
            rows, cols = p.shape
            p.mul_(1 - self.lr * self.weight_decay)
            p -= self.lr * max(1.0, rows / cols) ** 0.5 * newton_schulz5(u)
        self.adamw.step(step, {n: grads[n] for n in self.adamw.params})


def make_optimizer(params, args):
    if getattr(args, "optimizer", "adamw") == "muon":
        return Muon(params, args.lr, args.adam_lr if args.adam_lr else args.lr, args.momentum, not args.no_nesterov,
                    args.beta1, args.beta2, args.eps, args.weight_decay)
    return AdamW(params, args.lr, args.beta1, args.beta2, args.eps, args.weight_decay)


def train(cfg, weights, tokens, args, on_step=None):
    """Trains per data-order.md, model.md and optimizer.md; returns (records, final weights as float32 numpy)."""
    dtype = torch.float64 if args.double else torch.float32
    params = {n: torch.tensor(w, dtype=dtype).requires_grad_(True) for n, w in weights.items()}
    opt = make_optimizer(params, args)
    records = []
    for s in range(args.steps):
        inputs, targets = global_batch(tokens, s, args.world, args.micro_batch, args.seq, args.accum)
        loss, grads = loss_and_grads(params, cfg, inputs, targets, chunks=args.chunks)
        norm = global_norm(grads)
        clip_grads(grads, norm, args.clip)
        opt.step(s, grads)
        record = {"step": s, "loss": loss, "grad_norm": norm, "lr": args.lr}
        records.append(record)
        if on_step:
            on_step(record)
    final = {n: p.detach().to(torch.float32).numpy() for n, p in params.items()}
    return records, final


# ---- command line ------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init", required=True, help="initial weights (safetensors)")
    ap.add_argument("--data", required=True, help="token file (raw uint16 or llm.c layout)")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--micro-batch", type=int, required=True, help="B, sequences per rank per micro-step")
    ap.add_argument("--seq", type=int, required=True, help="T, tokens per sequence")
    ap.add_argument("--accum", type=int, default=1, help="G, micro-steps per optimizer step")
    ap.add_argument("--world", type=int, default=1, help="W, the world size whose global batch to train on")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=0.0, help="global-norm clip; 0: off")
    ap.add_argument("--optimizer", choices=["adamw", "muon"], default="adamw")
    ap.add_argument("--momentum", type=float, default=0.95, help="Muon's")
    ap.add_argument("--no-nesterov", action="store_true", help="Muon: plain momentum")
    ap.add_argument("--adam-lr", type=float, default=0.0, help="Muon: the AdamW tensors' lr (0: --lr)")
    ap.add_argument("--heads", type=int, default=None, help="H when neither __metadata__ nor config.json has it")
    ap.add_argument("--double", action="store_true", help="compute in float64 instead of float32")
    ap.add_argument("--chunks", type=int, default=1, help="split each global batch into this many parts")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--metrics", help="JSON Lines output, one object per step")
    ap.add_argument("--out", help="final weights, F32 safetensors")
    args = ap.parse_args(argv)
    for flag in ("steps", "micro_batch", "seq", "accum", "world", "chunks", "threads"):
        if getattr(args, flag) <= 0:
            ap.error(f"--{flag.replace('_', '-')} must be positive")
    return args


def run(args):
    """Reads the inputs, trains, writes the outputs; returns (cfg, records, final weights)."""
    torch.set_num_threads(args.threads)
    cfg, weights = load_gpt2(args.init, args.heads)
    if args.seq > cfg["n_ctx"]:
        raise InputError(f"--seq {args.seq} is longer than the context n_ctx = {cfg['n_ctx']} of {args.init}")
    tokens = read_tokens(args.data, cfg["vocab_size"])
    metrics = open(args.metrics, "w") if args.metrics else None
    try:
        def emit(record):
            if metrics:
                metrics.write(json.dumps(record) + "\n")
                metrics.flush()
        records, final = train(cfg, weights, tokens, args, on_step=emit)
    finally:
        if metrics:
            metrics.close()
    if args.out:
        write_safetensors(args.out, final, {k: cfg[k] for k in HPARAM_KEYS})
    return cfg, records, final


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        _, records, _ = run(args)
    except InputError as e:
        print(f"ref_train: error: {e}", file=sys.stderr)
        return 2
    if not args.metrics:
        for r in records:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
