"""The PyTorch GPT-2 the benchmarks compare zerodp with: the same model (docs/reference/model.md#gpt2: fp32,
pre-LayerNorm blocks, causal attention, tanh GELU, tied LM head), the same initial weights (read from the
safetensors file `zerodp init` wrote), the same token file and batches (docs/reference/data-order.md#ranks),
and AdamW's parameter groups (weight decay on tensors of two or more dimensions only,
docs/reference/optimizer.md#adamw).

Used by bench/train/torch_gpt2.py (CPU, DDP, ZeroRedundancyOptimizer), bench/peers/peer_train.py
(PyTorch 2.x, FSDP2, DeepSpeed) and bench/gpu/torch_gpt2_cuda.py (CUDA), so that every runner trains the
same GPT-2 on the same batches. Needs numpy and torch (Debian's python3-torch 1.13 is enough: no
scaled_dot_product_attention, so attention is written out as nanoGPT's non-flash path does).
"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- inputs ----------------------------------------------------------------------------------------

def read_safetensors_f32(path):
    """{name: float32 numpy array} and the metadata of an F32 safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len])
    metadata = header.pop("__metadata__", None) or {}
    base = 8 + header_len
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            sys.exit(f"{path}: tensor {name}: dtype {entry['dtype']}, this benchmark reads F32 only")
        begin, end = entry["data_offsets"]
        arr = np.frombuffer(blob, dtype="<f4", count=(end - begin) // 4, offset=base + begin)
        tensors[name.removeprefix("transformer.")] = arr.reshape(entry["shape"])
    return tensors, metadata


def read_tokens(path):
    """The tokens of a token file, as int64: the llm.c layout (a 1024-byte header of int32 magic 20240520,
    version 1 for uint16 ids or 2 for uint32, count) or a raw uint16 stream."""
    head = np.fromfile(path, dtype="<i4", count=3)
    if head.size == 3 and head[0] == 20240520:
        if head[1] not in (1, 2):
            raise ValueError(f"{path}: token file version {int(head[1])}: 1 (uint16) or 2 (uint32) expected")
        ids = np.fromfile(path, dtype="<u2" if head[1] == 1 else "<u4", count=int(head[2]), offset=1024)
    else:
        ids = np.fromfile(path, dtype="<u2")
    return torch.from_numpy(ids.astype(np.int64))


def batch(tokens, step, world, rank, B, T):
    """docs/reference/data-order.md#ranks with G = 1: rank r of W reads B·T+1 tokens from ((s·W + r)·B·T) mod n."""
    n = tokens.numel()
    start = ((step * world + rank) * B * T) % n
    idx = (torch.arange(B * T + 1) + start) % n
    chunk = tokens[idx]
    return chunk[:-1].view(B, T), chunk[1:].view(B, T)


# ---- the model -------------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.attn_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x, causal_mask):
        B, T, C = x.shape
        hs = C // self.H
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        # [B, H, T, hs] each; scores scaled by 1/sqrt(hs), masked above the diagonal.
        q, k, v = (t.view(B, T, self.H, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(causal_mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, H, C, V, N):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(N, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        # A plain attribute, not a buffer: DDP would broadcast a buffer, and gloo cannot send bool.
        self.causal_mask = torch.ones(N, N, dtype=torch.bool).triu(1)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x, self.causal_mask)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head, no bias

    def load_contract_weights(self, w):
        """The names of docs/reference/model.md#gpt2; linear weights there are [in, out], nn.Linear's are [out, in]."""
        def put(param, array, transpose=False):
            t = torch.from_numpy(np.array(array.T if transpose else array, dtype=np.float32, order="C"))
            assert param.shape == t.shape, (param.shape, t.shape)
            param.data.copy_(t)
        with torch.no_grad():
            put(self.wte.weight, w["wte.weight"])
            put(self.wpe.weight, w["wpe.weight"])
            put(self.ln_f.weight, w["ln_f.weight"])
            put(self.ln_f.bias, w["ln_f.bias"])
            for i, b in enumerate(self.h):
                p = f"h.{i}."
                put(b.ln_1.weight, w[p + "ln_1.weight"]); put(b.ln_1.bias, w[p + "ln_1.bias"])
                put(b.ln_2.weight, w[p + "ln_2.weight"]); put(b.ln_2.bias, w[p + "ln_2.bias"])
                put(b.c_attn.weight, w[p + "attn.c_attn.weight"], True); put(b.c_attn.bias, w[p + "attn.c_attn.bias"])
                put(b.attn_proj.weight, w[p + "attn.c_proj.weight"], True)
                put(b.attn_proj.bias, w[p + "attn.c_proj.bias"])
                put(b.c_fc.weight, w[p + "mlp.c_fc.weight"], True); put(b.c_fc.bias, w[p + "mlp.c_fc.bias"])
                put(b.mlp_proj.weight, w[p + "mlp.c_proj.weight"], True)
                put(b.mlp_proj.bias, w[p + "mlp.c_proj.bias"])


def build_model(path):
    weights, meta = read_safetensors_f32(path)
    L, H = int(meta["n_layer"]), int(meta["n_head"])
    V, C = weights["wte.weight"].shape
    N = weights["wpe.weight"].shape[0]
    model = GPT2(L, H, C, V, N)
    model.load_contract_weights(weights)
    return model, dict(L=L, H=H, C=C, V=V, N=N, params=sum(p.numel() for p in model.parameters()))


def param_groups(model, weight_decay):
    """Decay on tensors of two or more dimensions only (docs/reference/optimizer.md#adamw)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def add_optimizer_args(ap):
    """The AdamW and clipping flags, named as zerodp train's (shared with bench/peers). The defaults are the
    benchmarks' settings (weight decay 0.1, clip 1.0), which the run scripts pass to zerodp explicitly: its own
    defaults are 0.01 and no clipping."""
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
