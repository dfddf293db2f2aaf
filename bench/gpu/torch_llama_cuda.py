"""The PyTorch peer of `zerodp train --device cuda` for a Llama-family model (bench/gpu/run.sh with ARCH=llama).

The Llama twin of torch_gpt2_cuda.py: the same function as zerodp trains (docs/reference/model.md#llama:
RMSNorm, rotary embeddings in the rotate-half convention, grouped-query attention, SwiGLU MLP), from the
same initial weights (the model directory `zerodp init --arch llama` wrote: config.json with
model.safetensors or shards listed in model.safetensors.index.json, tensors in F32, BF16 or F16 widened
exactly to fp32), on the same batches (zdptest.torch_gpt2.batch, W = 1), with AdamW on the same groups
(weight decay on tensors of two or more dimensions) and the same clipping. The timed loop and the
result JSON are torch_gpt2_cuda.py's (train_and_report), so both peers measure the same thing.

Self-contained: no `transformers`, no `safetensors` package (the GPU machine may have neither and no
network), just torch and numpy. Run as a PyTorch user training on a GPU would:

  - fp32 parameters, gradients and AdamW state; bf16 autocast around forward and loss (--dtype bf16);
  - attention through F.scaled_dot_product_attention(is_causal=True) (the flash kernel on an H100/H200
    in bf16), the key/value heads shared by enable_gqa=True where torch has it (2.5 on), else repeated
    as transformers' repeat_kv does; on a torch without scaled_dot_product_attention (Debian's 1.13)
    the explicit masked softmax, so that the CPU smoke test runs there;
  - the rotary tables in fp32, applied as transformers does (bf16 q and k times fp32 tables: the
    rotation itself in fp32); the loss by F.cross_entropy on fp32 logits;
  - AdamW with fused=True on CUDA; --compile: torch.compile on the model and its loss.

    torch_llama_cuda.py --init DIR --data tokens.bin --micro-batch B --seq T --steps K --warmup W
                        [--device cuda|cuda:N|cpu] [--dtype bf16|fp32] [--compile] [--peak-tflops X]
                        [--attention auto|sdpa|math] [--gqa auto|native|repeat]
                        [--lr ... --beta1 ... --beta2 ... --eps ... --weight-decay ... --clip ...]

Prints torch_gpt2_cuda.py's JSON object on stdout, with "arch": "llama", "gqa" (how the key/value heads
were shared: "enable_gqa", "repeat_kv", or "none" when there are as many as query heads) and "model"
holding the Llama's sizes (L, C, V, N, heads, kv_heads, head_dim, I, ...); step_flops is
zdptest.flops.llama_step_flops's causal count. Refused, with "torch_llama_cuda.py: error: ...": no GPU
on --device cuda, --seq beyond max_position_embeddings, a config this peer does not compute (Qwen 3's
q/k norms, sliding windows, rope types other than default and llama3, other activations, MLP biases), a
damaged or mismatched weight file, token ids not below vocab_size.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_gpt2_cuda as gpt2_peer  # this folder: choose_device, train_and_report, the shared flags
from zdptest import flops  # llama_step_flops, the causal matmul count report.py uses too
from zdptest import torch_gpt2  # read_tokens, batch

PROG = "torch_llama_cuda.py"
HAVE_SDPA = gpt2_peer.HAVE_SDPA


class LoadError(Exception):
    """A model directory, weight file, config or token file this peer will not train on; the message
    names the file and what is wrong with it."""


# ---- safetensors, read without the safetensors package -------------------------------------------

# safetensors' own reader refuses headers over 100 MB; a real one is a few hundred bytes a tensor.
MAX_HEADER_BYTES = 100 * 1000 * 1000
ITEM_BYTES = {"F32": 4, "BF16": 2, "F16": 2}


def no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"the key '{dup}' occurs twice")
    return dict(pairs)


def is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def read_safetensors_header(path):
    """{name: (dtype, shape, begin, end)} with begin, end absolute byte offsets in the file.

    Everything is checked before any tensor is read or allocated: the header's length against the
    file's size and MAX_HEADER_BYTES, the JSON, each dtype, shape and data_offsets, each tensor's byte
    count against its shape, and that the tensors tile the data section without gaps or overlaps."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise LoadError(f"{path}: {size} bytes, too short for a safetensors file")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > MAX_HEADER_BYTES or header_len > size - 8:
                raise LoadError(f"{path}: the header claims {header_len} bytes; the file has {size - 8} after "
                                f"the length and headers are at most {MAX_HEADER_BYTES}: not a safetensors file")
            text = f.read(header_len)
    except OSError as e:
        raise LoadError(f"{path}: {e.strerror or e}") from None
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=no_duplicate_keys)
    except (UnicodeDecodeError, ValueError) as e:
        raise LoadError(f"{path}: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise LoadError(f"{path}: the header is not a JSON object")
    header.pop("__metadata__", None)
    base, data_bytes = 8 + header_len, size - 8 - header_len
    entries = {}
    for name, e in header.items():
        where = f"{path}: tensor {name}"
        if not isinstance(e, dict):
            raise LoadError(f"{where}: its entry is not a JSON object")
        dtype, shape, offsets = e.get("dtype"), e.get("shape"), e.get("data_offsets")
        if dtype not in ITEM_BYTES:
            raise LoadError(f"{where}: dtype {dtype!r}; this peer reads F32, BF16 and F16")
        if not isinstance(shape, list) or not all(is_count(d) for d in shape):
            raise LoadError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(is_count(o) for o in offsets)
                or not offsets[0] <= offsets[1] <= data_bytes):
            raise LoadError(f"{where}: data_offsets {offsets!r} are not within the {data_bytes} bytes of data")
        want = math.prod(shape) * ITEM_BYTES[dtype]
        if offsets[1] - offsets[0] != want:
            raise LoadError(f"{where}: {offsets[1] - offsets[0]} bytes of data for {dtype} {shape} ({want} bytes)")
        entries[name] = (dtype, tuple(shape), base + offsets[0], base + offsets[1])
    end = base
    for name, (_, _, begin, stop) in sorted(entries.items(), key=lambda kv: (kv[1][2], kv[1][3])):
        if begin != end:
            raise LoadError(f"{path}: tensor {name}: its data starts at byte {begin - base} of the data section, "
                            f"not {end - base} where the one before it ends (gap or overlap)")
        end = stop
    if end != size:
        raise LoadError(f"{path}: the tensors end at byte {end - base} of a data section of {data_bytes}")
    return entries


def widen_to_f32(raw, dtype):
    """raw: the little-endian bytes of a tensor (a uint8 numpy array); its values as float32, exactly
    (a bf16 is the top half of the float32 of the same value; an fp16 widens exactly)."""
    if dtype == "F32":
        return raw.view("<f4").astype(np.float32)
    if dtype == "BF16":
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    return raw.view("<f2").astype(np.float32)


# ---- the model directory ----------------------------------------------------------------------------

def shard_files(model_dir):
    """[(path, names the index puts in it, or None for model.safetensors)] of a model directory."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    single = os.path.join(model_dir, "model.safetensors")
    if not os.path.isfile(index):
        if not os.path.isfile(single):
            raise LoadError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")
        return [(single, None)]
    try:
        with open(index) as f:
            weight_map = json.load(f).get("weight_map")
    except (OSError, ValueError, AttributeError) as e:
        raise LoadError(f"{index}: not a JSON object with a weight_map ({e})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise LoadError(f"{index}: weight_map is not a non-empty object of tensor name -> file name")
    by_file = {}
    for name, file in weight_map.items():
        # A shard is a file of this directory: a name that reaches outside it is refused.
        if not isinstance(file, str) or os.path.basename(file) != file or file in ("", ".", ".."):
            raise LoadError(f"{index}: tensor {name}: file {file!r} is not a file name in {model_dir}")
        by_file.setdefault(file, set()).add(name)
    return [(os.path.join(model_dir, file), names) for file, names in sorted(by_file.items())]


def read_model_headers(model_dir):
    """{name: (path, dtype, shape, begin, end)} over every shard, each name once."""
    found = {}
    for path, listed in shard_files(model_dir):
        entries = read_safetensors_header(path)
        for name in sorted(listed or ()):
            if name not in entries:
                raise LoadError(f"{path}: the index puts tensor {name} here, but the file has no such tensor")
        for name, entry in entries.items():
            if name in found:
                raise LoadError(f"{path}: tensor {name} is also in {found[name][0]}")
            found[name] = (path,) + entry
    return found


def rope_settings(raw, source):
    """(rope_theta, llama3 scaling dict or None) from rope_parameters (transformers 5) or rope_theta and
    rope_scaling (earlier), as zerodp reads them (src/model/llama_config.cpp)."""
    key = "rope_parameters" if "rope_parameters" in raw else "rope_scaling"
    theta = raw.get("rope_theta", 10000.0)
    scaling = raw.get(key)
    if scaling is None:
        return float(theta), None
    if not isinstance(scaling, dict):
        raise LoadError(f"{source}: {key} {scaling!r} is not an object")
    theta = scaling.get("rope_theta", theta) if key == "rope_parameters" else theta
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return float(theta), None
    if rope_type != "llama3":
        raise LoadError(f"{source}: {key} has rope_type {rope_type!r}: this peer computes 'default' and 'llama3' RoPE")
    try:
        llama3 = {k: float(scaling[k]) for k in ("factor", "low_freq_factor", "high_freq_factor")}
        llama3["original_max_position_embeddings"] = int(scaling["original_max_position_embeddings"])
    except (KeyError, TypeError, ValueError) as e:
        raise LoadError(f"{source}: {key} of rope_type llama3 lacks a number: {e}") from None
    if not 0 < llama3["low_freq_factor"] < llama3["high_freq_factor"] or llama3["factor"] < 1:
        raise LoadError(f"{source}: {key}: llama3 scaling needs factor >= 1 and 0 < low_freq_factor < high_freq_factor")
    return float(theta), llama3


def read_config(model_dir):
    """The Llama's sizes and options from config.json (docs/reference/files.md#model-directories), or a
    LoadError naming the field this peer does not compute."""
    source = os.path.join(model_dir, "config.json")
    try:
        with open(source) as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        raise LoadError(f"{source}: cannot read it as JSON ({e})") from None
    if not isinstance(raw, dict):
        raise LoadError(f"{source}: not a JSON object")
    model_type = raw.get("model_type")
    if model_type == "qwen3":
        raise LoadError(f"{source}: model_type 'qwen3': Qwen 3's per-head q/k norms are not computed by this peer")
    if model_type not in ("llama", "qwen2", "mistral"):
        raise LoadError(f"{source}: model_type {model_type!r}: this peer trains 'llama', 'qwen2' and 'mistral'")

    def size(key, default=None):
        v = raw.get(key, default)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise LoadError(f"{source}: {key} is {v!r}, not a positive integer")
        return v

    C, H = size("hidden_size"), size("num_attention_heads")
    if raw.get("head_dim") is None and C % H:
        raise LoadError(f"{source}: no head_dim, and num_attention_heads {H} does not divide hidden_size {C}")
    cfg = dict(model_type=model_type, L=size("num_hidden_layers"), C=C, V=size("vocab_size"),
               N=size("max_position_embeddings"), heads=H, kv_heads=size("num_key_value_heads", H),
               head_dim=size("head_dim", C // H) if raw.get("head_dim") is not None else C // H,
               I=size("intermediate_size"))
    if H % cfg["kv_heads"]:
        raise LoadError(f"{source}: num_key_value_heads {cfg['kv_heads']} does not divide num_attention_heads {H}")
    if cfg["head_dim"] % 2:
        raise LoadError(f"{source}: head_dim {cfg['head_dim']} is odd: rotary embeddings turn pairs of values")
    if raw.get("hidden_act", "silu") != "silu":
        raise LoadError(f"{source}: hidden_act {raw['hidden_act']!r}: this peer's MLP is SiLU-gated ('silu')")
    if raw.get("mlp_bias"):
        raise LoadError(f"{source}: mlp_bias is true: this peer's MLP has no biases")
    if raw.get("partial_rotary_factor", 1.0) != 1.0:
        raise LoadError(f"{source}: partial_rotary_factor {raw['partial_rotary_factor']!r}: this peer turns "
                        "whole heads")
    if raw.get("use_sliding_window") or (model_type == "mistral" and raw.get("sliding_window") is not None):
        raise LoadError(f"{source}: a sliding window (sliding_window {raw.get('sliding_window')!r}): this peer's "
                        "attention is full causal attention")
    attention_bias = bool(raw.get("attention_bias", False))
    if model_type == "mistral" and attention_bias:
        raise LoadError(f"{source}: attention_bias on a Mistral, which has none")
    eps = raw.get("rms_norm_eps", 1e-6)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 <= eps < 1:
        raise LoadError(f"{source}: rms_norm_eps {eps!r} is not a number in [0, 1)")
    theta, llama3 = rope_settings(raw, source)
    if not theta > 1:
        raise LoadError(f"{source}: rope_theta {theta} is not above 1")
    # Qwen 2 always biases q, k and v (never o); a Llama with attention_bias biases all four.
    cfg.update(qkv_bias=model_type == "qwen2" or attention_bias, o_bias=model_type != "qwen2" and attention_bias,
               tie=bool(raw.get("tie_word_embeddings", False)), rms_norm_eps=float(eps), rope_theta=theta,
               rope_scaling=llama3)
    return cfg


# ---- the model ---------------------------------------------------------------------------------------

class Linear(nn.Module):
    """nn.Linear's layout ([out, in] weight) and function, without its random initialisation: every
    value is loaded from the file, and drawing a billion numbers first would only cost time."""

    def __init__(self, n_in, n_out, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_out, n_in))
        self.bias = nn.Parameter(torch.empty(n_out)) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Embedding(nn.Module):
    """nn.Embedding's weight [V, C] and lookup, without its random initialisation (as Linear)."""

    def __init__(self, V, C):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(V, C))

    def forward(self, idx):
        return F.embedding(idx, self.weight)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · w, the statistic in fp32 whatever the input's dtype."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim))
        self.eps = eps

    def forward(self, x):
        x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_inv_freq(theta, D, llama3):
    """inv_freq[i] = θ^(-2i/D), i < D/2, in fp32 in transformers' order of operations (as zerodp's
    src/model/rope.cpp), with the llama3 rescaling of the long wavelengths when configured."""
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    if llama3 is None:
        return inv
    factor, low, high = llama3["factor"], llama3["low_freq_factor"], llama3["high_freq_factor"]
    old_len = llama3["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old_len / low, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
    return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, H, KV, D = cfg["C"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        self.H, self.KV, self.D = H, KV, D
        self.q_proj = Linear(C, H * D, cfg["qkv_bias"])
        self.k_proj = Linear(C, KV * D, cfg["qkv_bias"])
        self.v_proj = Linear(C, KV * D, cfg["qkv_bias"])
        self.o_proj = Linear(H * D, C, cfg["o_bias"])

    def forward(self, h, cos, sin, attend):
        B, T, _ = h.shape
        q = self.q_proj(h).view(B, T, self.H, self.D).transpose(1, 2)  # [B, H, T, D]
        k = self.k_proj(h).view(B, T, self.KV, self.D).transpose(1, 2)  # [B, KV, T, D]
        v = self.v_proj(h).view(B, T, self.KV, self.D).transpose(1, 2)  # [B, KV, T, D]
        # cos, sin [T, D] in fp32: under autocast q and k are bf16 and the products promote to fp32,
        # as in transformers' apply_rotary_pos_emb; attention casts them back.
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = attend(q, k, v)  # [B, H, T, D]
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.H * self.D))


class MLP(nn.Module):
    def __init__(self, C, I):
        super().__init__()
        self.gate_proj = Linear(C, I, False)
        self.up_proj = Linear(C, I, False)
        self.down_proj = Linear(I, C, False)

    def forward(self, h):
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["C"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["C"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg["C"], cfg["I"])


class Decoder(nn.Module):
    """transformers' LlamaModel's parameters (named so that the file's names are this module's)."""

    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = Embedding(cfg["V"], cfg["C"])
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg["L"]))
        self.norm = RMSNorm(cfg["C"], cfg["rms_norm_eps"])


class LlamaForCausalLM(nn.Module):
    """transformers' LlamaForCausalLM's parameters under its names (those of the file), lm_head absent
    when tied; forward(inputs, targets) returns the mean token cross-entropy."""

    def __init__(self, cfg, seq, attention, gqa):
        super().__init__()
        self.model = Decoder(cfg)
        self.lm_head = None if cfg["tie"] else Linear(cfg["C"], cfg["V"], False)
        self.attention, self.gqa = attention, gqa
        self.n_rep = cfg["heads"] // cfg["kv_heads"]
        # Buffers, so that .to(device) moves them; not saved (nothing here is saved). The angles
        # t·inv_freq[i] in fp32, each half of a head turning by the same angles (rotate-half).
        inv = rope_inv_freq(cfg["rope_theta"], cfg["head_dim"], cfg["rope_scaling"])
        angles = torch.outer(torch.arange(seq, dtype=torch.int64).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)  # [seq, D]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        if attention == "math":
            self.register_buffer("causal_mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)

    def attend(self, q, k, v):
        """Causal softmax(q·kᵀ/sqrt(D))·v; query head h reads key/value head h // n_rep."""
        if self.attention == "sdpa" and self.gqa == "enable_gqa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        if self.n_rep > 1:  # transformers' repeat_kv: each key/value head n_rep times, in place
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = v.repeat_interleave(self.n_rep, dim=1)
        if self.attention == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T, D = q.shape[-2], q.shape[-1]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(self.causal_mask[:T, :T], float("-inf")).softmax(dim=-1)
        return att @ v

    def forward(self, idx, targets):
        m = self.model
        T = idx.shape[1]
        cos, sin = self.cos[:T], self.sin[:T]
        x = m.embed_tokens(idx)
        for layer in m.layers:
            x = x + layer.self_attn(layer.input_layernorm(x), cos, sin, self.attend)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        head = m.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(m.norm(x), head)
        # The loss in fp32 whatever the logits' dtype (as torch_gpt2_cuda.py: explicit, so that the CPU
        # smoke test's numbers mean the same as the GPU's).
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def load_weights(model, headers, model_dir):
    """Every parameter from the files, widened to fp32; the names and shapes are all checked before any
    data is read. Ignored: a tied model's lm_head.weight and rotary_emb.inv_freq buffers."""
    params = dict(model.named_parameters())
    for name in sorted(params):
        if name not in headers:
            raise LoadError(f"{model_dir}: no tensor {name} in its weight files")
        path, _, shape, _, _ = headers[name]
        if shape != tuple(params[name].shape):
            raise LoadError(f"{path}: tensor {name}: shape {list(shape)}, expected {list(params[name].shape)}")
    for name, (path, _, shape, _, _) in sorted(headers.items()):
        if name in params or name.endswith("rotary_emb.inv_freq"):
            continue
        if name == "lm_head.weight" and model.lm_head is None:
            continue
        raise LoadError(f"{path}: tensor {name} is not a parameter of this Llama")
    maps = {}
    with torch.no_grad():
        for name, p in params.items():
            path, dtype, _, begin, end = headers[name]
            if path not in maps:
                maps[path] = np.memmap(path, dtype=np.uint8, mode="r")
            values = widen_to_f32(np.asarray(maps[path][begin:end]), dtype).reshape(p.shape)
            p.copy_(torch.from_numpy(values))
    maps.clear()
    return sorted({h[1] for n, h in headers.items() if n in params})


def read_token_file(path, V):
    """torch_gpt2.read_tokens' int64 tokens (uint16 or uint32 ids), checked against the vocabulary."""
    if not os.path.isfile(path):
        raise LoadError(f"{path}: no such token file")
    try:
        tokens = torch_gpt2.read_tokens(path)
    except ValueError as e:
        raise LoadError(str(e)) from e
    if tokens.numel() == 0:
        raise LoadError(f"{path}: no tokens")
    top = int(tokens.max())
    if top >= V:
        raise LoadError(f"{path}: token id {top} at position {int(tokens.argmax())} is not below the model's "
                        f"vocab_size {V}")
    return tokens


# ---- the run ---------------------------------------------------------------------------------------

def torch_has_enable_gqa():
    """Whether this torch's scaled_dot_product_attention takes enable_gqa (2.5 on): tried on a tiny input."""
    if not HAVE_SDPA:
        return False
    q, kv = torch.zeros(1, 2, 1, 2), torch.zeros(1, 1, 1, 2)
    try:
        F.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
        return True
    except (TypeError, RuntimeError):
        return False


def choose_gqa(args, attention, n_rep):
    if n_rep == 1:
        return "none"
    if args.gqa == "native":
        if attention != "sdpa" or not torch_has_enable_gqa():
            sys.exit(f"{PROG}: error: --gqa native: needs scaled_dot_product_attention with enable_gqa "
                     f"(torch {torch.__version__}, attention {attention})")
        return "enable_gqa"
    if args.gqa == "auto" and attention == "sdpa" and torch_has_enable_gqa():
        return "enable_gqa"
    return "repeat_kv"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpt2_peer.add_run_args(ap, "model directory from `zerodp init --arch llama` (config.json; model.safetensors "
                               "or shards; F32, BF16 or F16)")
    ap.add_argument("--gqa", choices=["auto", "native", "repeat"], default="auto",
                    help="how query heads share key/value heads: native (scaled_dot_product_attention's "
                         "enable_gqa), repeat (each key/value head copied, transformers' repeat_kv); "
                         "auto: native where torch has it")
    args = ap.parse_args(argv)
    gpt2_peer.check_run_args(ap, args)
    return args


def main(argv=None):
    args = parse_args(argv)
    device, attention = gpt2_peer.choose_device(args, PROG)
    torch.manual_seed(0)  # nothing is drawn (every value is loaded); as the GPT-2 peer, for any later change
    try:
        if not os.path.isdir(args.init):
            raise LoadError(f"{args.init}: not a model directory (config.json and model.safetensors)")
        cfg = read_config(args.init)
        if args.seq > cfg["N"]:
            sys.exit(f"{PROG}: error: --seq {args.seq} exceeds the model's context (max_position_embeddings) "
                     f"{cfg['N']}")
        headers = read_model_headers(args.init)
        if not cfg["tie"] and "lm_head.weight" not in headers:
            # transformers would draw a random head and zerodp refuses: a comparison needs both sides to
            # train the same model, so refuse too.
            raise LoadError(f"{args.init}: tie_word_embeddings is false but the weights have no lm_head.weight")
        gqa = choose_gqa(args, attention, cfg["heads"] // cfg["kv_heads"])
        model = LlamaForCausalLM(cfg, args.seq, attention, gqa)
        cfg["weights_dtype"] = "+".join(load_weights(model, headers, args.init))
        tokens = read_token_file(args.data, cfg["V"])
    except LoadError as e:
        sys.exit(f"{PROG}: error: {e}")
    cfg["params"] = sum(p.numel() for p in model.parameters())
    model = model.to(device)
    B, T = args.micro_batch, args.seq
    step_fl = flops.llama_step_flops(cfg["L"], cfg["C"], cfg["heads"] * cfg["head_dim"],
                                     cfg["kv_heads"] * cfg["head_dim"], cfg["I"], cfg["V"], B, T, causal=True)
    gpt2_peer.train_and_report(model, cfg, step_fl, tokens, args, device, attention, prog=PROG,
                               extra={"arch": "llama", "gqa": gqa})


if __name__ == "__main__":
    main()
