"""A reference of zerodp's Llama-family models (docs/reference/model.md) built on Hugging Face `transformers`:
the model is `LlamaForCausalLM` / `Qwen2ForCausalLM` itself, so comparing with it checks zerodp against
the implementation that defines those checkpoints, not against a second reading of docs/reference/.
The data order (data-order.md), the loss and clipping (model.md) and AdamW (optimizer.md) are
zdptest.ref_train's, imported.

The command line (config, make, logits, train, check-load) is zdptest.llama_ref_cli's.

Exit codes: 0 done (check-load: every tensor agrees); 1 check-load found a difference, or transformers
is missing; 2 bad usage or input (a message names the file).

Needs torch and numpy (Debian's) and `transformers` with `safetensors` (the venv of
scripts/setup/transformers_venv.sh; tests/reference/llama_ref.py re-runs itself there). Everything is
computed in float32 with the eager attention: transformers' other attention paths differ in rounding,
and its RMSNorm, softmax and rotary tables are float32 whatever the model's dtype, so float64 would
not buy exactness here as it does in ref_train.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from zdptest import instruction_ref
from zdptest import qwen3_ref
from zdptest import ref_train as rt
from zdptest.transformers_env import REEXEC_ENV, VENV_SCRIPT, ensure_transformers  # noqa: F401 (scripts' main)

InputError = rt.InputError

# ---- presets -----------------------------------------------------------------------------------------

# Tiny models that between them take every branch of the Llama family (model.md): grouped-query
# attention with an untied head;
# Qwen2's q/k/v biases with a tied head, one key/value head (multi-query) and head_dim ≠ C/H; llama3
# rope scaling whose original context (8) is shorter than the sequences, so the scaled frequencies
# matter; Qwen 3's per-head q/k norms with grouped-query attention, a tied head and head_dim ≠ C/H;
# Mistral's sliding window of 5 keys, shorter than the sequences, with grouped-query attention.
# `attention_bias` is informational for Qwen2 (its q/k/v always carry biases in transformers) but
# spelled out so a reader of config.json need not know that.
CONFIGS = {
    "llama_gqa_untied": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "intermediate_size": 48, "vocab_size": 64, "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
    },
    "qwen2_bias_tied": {
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
        "head_dim": 16, "intermediate_size": 48, "vocab_size": 64, "max_position_embeddings": 32,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
        "tie_word_embeddings": True, "attention_bias": True, "use_sliding_window": False, "hidden_act": "silu",
    },
    "qwen3_norm_tied": {
        "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 48, "vocab_size": 64, "max_position_embeddings": 32,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
        "tie_word_embeddings": True, "attention_bias": False, "use_sliding_window": False, "hidden_act": "silu",
    },
    "mistral_window_untied": {
        "model_type": "mistral", "architectures": ["MistralForCausalLM"],
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 8, "intermediate_size": 48, "vocab_size": 64, "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "sliding_window": 5,
        "tie_word_embeddings": False, "hidden_act": "silu",
    },
    "llama3_rope_scaling": {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "head_dim": 8, "intermediate_size": 48, "vocab_size": 64, "max_position_embeddings": 32,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8},
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
    },
}

# model_type -> (config class, model class), by name: transformers is imported only when needed, so
# that `config` (and importing this module) works without it. GPT-2 is here for its Hugging Face
# directories (tests/reference/compare_gpt2_hf.py): making, loading and logits, not `train`.
ARCHITECTURES = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
                 "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"), "mistral": ("MistralConfig", "MistralForCausalLM"),
                 "gpt2": ("GPT2Config", "GPT2LMHeadModel")}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class MissingTransformers(Exception):
    """transformers (or safetensors) cannot be imported by this python."""


def _transformers():
    """The transformers module, quiet (no progress bars or advice on stderr)."""
    try:
        import transformers
    except ImportError as e:
        raise MissingTransformers(f"{sys.executable} cannot import transformers ({e}): run it with the python that "
                                  f"{VENV_SCRIPT} prints")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


def _safetensors_torch():
    try:
        import safetensors.torch
    except ImportError as e:
        raise MissingTransformers(f"{sys.executable} cannot import safetensors ({e}): run it with the python that "
                                  f"{VENV_SCRIPT} prints")
    return safetensors.torch


def architecture(model_type, source):
    """(config class, model class) of a model_type; InputError naming `source` for another."""
    if model_type not in ARCHITECTURES:
        raise InputError(f"{source}: model_type {model_type!r} is not one of {sorted(ARCHITECTURES)}")
    tf = _transformers()
    config_name, model_name = ARCHITECTURES[model_type]
    if model_type == "qwen3" and not hasattr(tf, model_name):  # transformers < 4.51: zdptest.qwen3_ref
        return tf.LlamaConfig, qwen3_ref.model_class(tf)
    return getattr(tf, config_name), getattr(tf, model_name)


# ---- making, loading, saving -------------------------------------------------------------------------

def read_config_arg(value):
    """--config: a config.json path, or the name of a preset of CONFIGS."""
    if os.path.isfile(value):
        try:
            with open(value) as f:
                d = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{value}: cannot read a config.json: {e}")
        if not isinstance(d, dict):
            raise InputError(f"{value}: config.json is not a JSON object")
        return d, value
    if value in CONFIGS:
        return json.loads(json.dumps(CONFIGS[value])), f"preset {value}"  # a deep copy
    raise InputError(f"--config {value}: neither a file nor a preset ({', '.join(CONFIGS)})")


def make_model(config, seed, dtype=torch.float32, source="config"):
    """A randomly initialised model of a config.json dict, deterministic in `seed`.

    transformers' own initialisation (N(0, 0.02) matrices, unit norms, zero biases) is replaced: at these
    widths it leaves logits near zero and the norm gains and biases at values where a mistake in how
    they are applied cannot show. Every tensor is drawn again, in named_parameters() order (a tied head
    is one parameter, drawn once): matrices N(0, 1/in_features) so activations keep unit scale (GPT-2's
    Conv1D weights are [in, out], the others [out, in] or [rows, width]), norm gains 1 + 0.1·N(0, 1),
    biases 0.1·N(0, 1)."""
    if not isinstance(config.get("model_type"), str):
        raise InputError(f"{source}: no model_type")
    config_cls, model_cls = architecture(config["model_type"], source)
    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "torch_dtype")}
    if "rope_parameters" in fields:
        fields.update(rope_fields(fields.pop("rope_parameters"), source))
    try:
        cfg = config_cls(**fields, attn_implementation="eager")
        torch.manual_seed(seed)
        model = model_cls(cfg)
    except (TypeError, ValueError, KeyError) as e:
        raise InputError(f"{source}: transformers refuses this configuration: {e}")
    conv1d = {f"{n}.weight" for n, m in model.named_modules() if type(m).__name__ == "Conv1D"}
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, dtype=torch.float32)
            if p.dim() >= 2:
                p.copy_(noise / math.sqrt(p.shape[0] if name in conv1d else p.shape[-1]))
            elif name.endswith(".bias"):
                p.copy_(0.1 * noise)
            else:  # a 1-D weight is a norm's gain (RMSNorm, GPT-2's LayerNorm)
                p.copy_(1.0 + 0.1 * noise)
    return model.to(dtype).eval()


def rope_fields(rope_parameters, source):
    """rope_theta and rope_scaling from transformers 5's `rope_parameters` ({"rope_type", "rope_theta", and
    the scaling's own keys}): the transformers this reference runs (4.x) reads only the older pair and would
    silently leave the rotary embeddings at their defaults."""
    if not isinstance(rope_parameters, dict) or "rope_theta" not in rope_parameters:
        raise InputError(f"{source}: rope_parameters {rope_parameters!r} has no rope_theta")
    scaling = {k: v for k, v in rope_parameters.items() if k != "rope_theta"}
    if scaling.get("rope_type", "default") == "default":
        scaling = None
    return {"rope_theta": rope_parameters["rope_theta"], "rope_scaling": scaling}


def check_rope_read(model, config_path):
    """A config.json in transformers 5's form (rope_parameters only) loads in transformers 4 without an error
    but with default rotary embeddings: refuse it unless what was loaded agrees with it."""
    with open(config_path) as f:
        raw = json.load(f)
    if "rope_parameters" not in raw:
        return
    want = rope_fields(raw["rope_parameters"], config_path)
    got_scaling = getattr(model.config, "rope_scaling", None)
    got = {"rope_theta": getattr(model.config, "rope_theta", None),
           "rope_type": (got_scaling or {}).get("rope_type", (got_scaling or {}).get("type", "default"))}
    if (got["rope_theta"] != want["rope_theta"] or
            got["rope_type"] != (want["rope_scaling"] or {}).get("rope_type", "default")):
        raise InputError(f"{config_path}: rope_parameters {raw['rope_parameters']} is read by transformers "
                         f"{_transformers().__version__} as rope_theta {got['rope_theta']}, rope type "
                         f"{got['rope_type']}: it reads rope_theta and rope_scaling (write those too)")


def save_model(model, out_dir, max_shard_size=None):
    """save_pretrained in safetensors; a max_shard_size ("20KB", or bytes) small enough gives shards and
    model.safetensors.index.json."""
    os.makedirs(out_dir, exist_ok=True)
    kwargs = {"safe_serialization": True}
    if max_shard_size is not None:
        kwargs["max_shard_size"] = int(max_shard_size) if str(max_shard_size).isdigit() else max_shard_size
    model.save_pretrained(out_dir, **kwargs)
    qwen3_ref.fix_saved_config(model, out_dir)


def read_model_type(model_dir):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}")
    if not isinstance(d, dict) or not isinstance(d.get("model_type"), str):
        raise InputError(f"{path}: no model_type")
    return d["model_type"]


def load_model(model_dir, dtype=torch.float32):
    """from_pretrained with the eager attention, in `dtype` ("auto": as stored). Every tensor the model has
    must come from the files, none may be left over or mis-shaped: transformers would otherwise draw the
    missing ones at random and only warn, and the comparison would then be with noise."""
    _, model_cls = architecture(read_model_type(model_dir), os.path.join(model_dir, "config.json"))
    try:
        model, info = model_cls.from_pretrained(model_dir, torch_dtype=dtype, attn_implementation="eager",
                                                output_loading_info=True)
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise InputError(f"{model_dir}: transformers cannot load it: {e}")
    problems = []
    for key, what in (("missing_keys", "missing"), ("unexpected_keys", "unexpected"),
                      ("mismatched_keys", "of the wrong shape"), ("error_msgs", "errors")):
        if info.get(key):
            problems.append(f"{what}: {', '.join(map(str, info[key]))}")
    if problems:
        raise InputError(f"{model_dir}: from_pretrained found tensors " + "; ".join(problems))
    check_rope_read(model, os.path.join(model_dir, "config.json"))
    return model.eval()


def read_state(path):
    """{name: tensor} of a safetensors file, or of a model directory (model.safetensors, or the shards
    that model.safetensors.index.json lists)."""
    st = _safetensors_torch()
    if os.path.isdir(path):
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            try:
                with open(index) as f:
                    files = sorted(set(json.load(f)["weight_map"].values()))
            except (OSError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                raise InputError(f"{index}: cannot read the weight_map: {e}")
        elif os.path.exists(os.path.join(path, "model.safetensors")):
            files = ["model.safetensors"]
        else:
            raise InputError(f"{path}: neither model.safetensors nor model.safetensors.index.json")
        paths = [os.path.join(path, f) for f in files]
    else:
        paths = [path]
    state = {}
    for p in paths:
        try:
            part = st.load_file(p)
        except Exception as e:  # safetensors raises its own SafetensorError, OSError, ...
            raise InputError(f"{p}: cannot read safetensors: {e}")
        for name, value in part.items():
            if name in state:
                raise InputError(f"{p}: tensor '{name}' appears in two files")
            state[name] = value
    return state


# ---- logits ------------------------------------------------------------------------------------------

def parse_tokens(text, vocab_size):
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t != ""]
    except ValueError:
        raise InputError(f"--tokens {text!r}: not a comma-separated list of integers")
    if not ids:
        raise InputError("--tokens: no tokens")
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        raise InputError(f"--tokens: token {bad[0]} is outside the vocabulary [0, {vocab_size})")
    return ids


@torch.no_grad()
def logits_of(model, ids):
    """The logits [T, V] of one sequence, positions 0..T-1, as float32 numpy."""
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False).logits
    return out[0].to(torch.float32).numpy()


def write_f32(path, array):
    tmp = path + ".tmp"
    np.ascontiguousarray(array, dtype="<f4").tofile(tmp)
    os.replace(tmp, path)


# ---- tokens and batches (files.md#token-files, data-order.md) ----------------------------------------

def read_tokens(path, vocab_size):
    """ref_train's reader, plus files.md's uint32 layout (header [1] = 2), which vocabularies over 65536 need."""
    try:
        with open(path, "rb") as f:
            head = f.read(rt.LLMC_HEADER_BYTES)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e}")
    words = np.frombuffer(head[:12], dtype="<i4") if len(head) >= 12 else None
    if words is None or words[0] != rt.LLMC_MAGIC or words[1] != 2:
        return rt.read_tokens(path, vocab_size)
    size = os.path.getsize(path)
    count = int(words[2])
    if len(head) < rt.LLMC_HEADER_BYTES or count <= 0 or rt.LLMC_HEADER_BYTES + 4 * count != size:
        raise InputError(f"{path}: bad header: {count} uint32 tokens announced, "
                         f"{size - rt.LLMC_HEADER_BYTES} bytes of tokens present")
    tokens = np.fromfile(path, dtype="<u4", offset=rt.LLMC_HEADER_BYTES).astype(np.int64)
    bad = np.nonzero(tokens >= vocab_size)[0]
    if bad.size:
        raise InputError(f"{path}: token {tokens[bad[0]]} at position {bad[0]} is >= the vocabulary size {vocab_size}")
    return tokens


def micro_batches(tokens, step, world, micro_batch, seq, accum):
    """data-order.md's reads of step `step`, one (g, r, inputs [B, T], targets [B, T]) per micro-step g and rank r,
    in that order: every rank of the world simulated in this one process."""
    inputs, targets = rt.global_batch(tokens, step, world, micro_batch, seq, accum)
    for i in range(accum * world):
        rows = slice(i * micro_batch, (i + 1) * micro_batch)
        yield i // world, i % world, inputs[rows], targets[rows]


# ---- learning rate (docs/reference/optimizer.md#lr) --------------------------------------------------

SCHEDULES = ("constant", "warmup", "warmup-decay", "cosine", "wsd")


class LrSchedule:
    """The rate of each optimizer step s (0-based): DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR
    formulas evaluated at s itself, and zerodp's warmup-stable-decay, as optimizer.md describes them.

    W = max(2, warmup_steps) when warmup_steps > 0 (DeepSpeed's floor), else no warmup; the warmup
    fraction at s < W is s/W (linear) or ln(s+1)/ln(W) (log). T = total_steps, or the run's steps."""

    def __init__(self, kind, lr, run_steps, warmup_steps=0, warmup_type="linear", min_lr=None, total_steps=0,
                 decay_steps=0, decay_type="linear", warmup_min_ratio=0.0):
        if kind not in SCHEDULES:
            raise InputError(f"--lr-schedule {kind!r}: one of {', '.join(SCHEDULES)}")
        self.kind, self.lr = kind, lr
        self.warmup = max(2, warmup_steps) if warmup_steps > 0 else 0
        self.warmup_type = warmup_type
        self.total = total_steps if total_steps > 0 else run_steps
        self.decay_steps, self.decay_type = decay_steps, decay_type
        self.warmup_min_ratio = warmup_min_ratio
        # --min-lr is where warmup starts and decay ends; the cosine schedule holds it as a ratio of lr.
        self.min_lr = 0.0 if min_lr is None else min_lr
        self.cos_min_ratio = 1e-4 if min_lr is None else min_lr / lr
        if kind == "wsd" and self.warmup + decay_steps > self.total:
            raise InputError(f"--lr-schedule wsd: --warmup-steps {self.warmup} + --decay-steps {decay_steps} do not "
                             f"fit in the {self.total} total steps")

    def _fraction(self, s):
        if self.warmup_type == "log":
            return math.log(s + 1) / math.log(self.warmup)
        return s / self.warmup

    def __call__(self, s):
        lo, hi, W, T = self.min_lr, self.lr, self.warmup, self.total
        if self.kind == "constant":
            return self.lr
        if self.kind == "cosine":
            if s < W:
                return self.lr * (self.warmup_min_ratio + (1 - self.warmup_min_ratio) * self._fraction(s))
            q = min(1.0, (s - W + 1) / max(1, T - W))
            c = self.cos_min_ratio
            return self.lr * max(0.0, c + (1 - c) * (1 + math.cos(math.pi * q)) / 2)
        if s < W:
            return lo + (hi - lo) * self._fraction(s)
        if self.kind == "warmup":
            return hi
        if self.kind == "warmup-decay":
            return lo + (hi - lo) * max(0.0, (T - s) / max(1, T - W))
        # wsd: the peak until the last decay_steps steps of T, then down to min_lr at T - 1.
        D = self.decay_steps
        if s < T - D:
            return hi
        q = min(1.0, (s - (T - D) + 1) / D)
        shape = {"linear": 1 - q, "cosine": (1 + math.cos(math.pi * q)) / 2, "1-sqrt": 1 - math.sqrt(q)}
        return lo + (hi - lo) * shape[self.decay_type]


# ---- training (data-order.md, model.md, optimizer.md) ------------------------------------------------

def step_batches(tokens, labels, s, args):
    """Step s's micro-batches, one (inputs [B, T], targets [B, T]) per micro-step and rank, and what
    the loss is averaged over: W·G·B·T for a token stream, the targets for instruction data (labels)."""
    W, B, T, G = args.world, args.micro_batch, args.seq, args.accum
    if labels is None:
        return [(i, t) for _, _, i, t in micro_batches(tokens, s, W, B, T, G)], W * G * B * T
    if getattr(args, "packing", False):  # every example of the step's packs alone, one batch
        inputs, targets, count = instruction_ref.global_batch_packed(tokens, labels, s, W, B, T, G)
        return [(inputs, targets)], count
    inputs, targets, count = instruction_ref.global_batch(tokens, labels, s, W, B, T, G)
    return [(inputs[k * B:(k + 1) * B], targets[k * B:(k + 1) * B]) for k in range(G * W)], count


def train(model, tokens, args, schedule, on_step=None, labels=None):
    """Trains `model` in place on data-order.md's global batches; returns the per-step records.

    Each (micro-step, rank) micro-batch goes forward and backward on its own, with its token losses
    summed and divided by the whole global batch's W·G·B·T (instruction data: its number of targets),
    so that the accumulated gradients are those of model.md's mean however the batch is split.
    Clipping, the norm and AdamW are ref_train's."""
    params = dict(model.named_parameters())  # deduplicated: a tied head is the embedding, updated once
    opt = rt.AdamW(params, args.lr, args.beta1, args.beta2, args.eps, args.weight_decay)
    vocab = model.config.vocab_size
    total_tokens = args.world * args.accum * args.micro_batch * args.seq
    model.eval()  # no dropout (model.md); gradients flow the same in eval mode
    records = []
    for s in range(args.steps):
        start = time.monotonic()
        for p in params.values():
            p.grad = None
        loss = 0.0
        batches, count = step_batches(tokens, labels, s, args)
        for inputs, targets in batches:
            logits = model(input_ids=inputs, use_cache=False).logits
            # Token losses summed in float64: the reported loss then moves with the split only as much
            # as the logits' own rounding does, not with float32 sums of different lengths.
            token_losses = F.cross_entropy(logits.reshape(-1, vocab).float(), targets.reshape(-1), reduction="none",
                                           ignore_index=instruction_ref.IGNORE)
            part = token_losses.double().sum() / count
            part.backward()
            loss += part.item()
        grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in params.items()}
        norm = rt.global_norm(grads)
        rt.clip_grads(grads, norm, args.clip)
        opt.lr = schedule(s)
        opt.step(s, grads)
        record = {"event": "step", "step": s, "loss": loss, "grad_norm": norm, "lr": opt.lr,
                  "tokens": total_tokens, "ms": (time.monotonic() - start) * 1e3}
        records.append(record)
        if on_step:
            on_step(record)
    return records


# ---- check-load --------------------------------------------------------------------------------------

def compare_with(model, reference, atol=0.0):
    """The differences between a loaded model's tensors and `reference` ({name: tensor}), one line each;
    empty when every tensor agrees within atol. A tied head may be absent from the reference: it is
    the embedding then."""
    mine = model.state_dict()
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    problems = []
    for name in sorted(set(mine) | set(reference)):
        if name not in mine:
            problems.append(f"'{name}' is in the reference but not in transformers' model")
            continue
        ref = reference.get(name)
        if ref is None and name == "lm_head.weight" and tied:
            ref = reference.get("model.embed_tokens.weight")
        if ref is None:
            problems.append(f"'{name}' is in transformers' model but not in the reference")
            continue
        a, b = mine[name].detach().double(), ref.double()
        if a.shape != b.shape:
            problems.append(f"'{name}': shape {list(a.shape)} in transformers' model, {list(b.shape)} in the reference")
            continue
        diff = (a - b).abs().max().item() if a.numel() else 0.0
        if not diff <= atol:  # also catches NaN
            problems.append(f"'{name}': max |difference| {diff:.3g} > atol {atol:g}")
    return problems


# ---- command line (llama_ref_cli.py) -----------------------------------------------------------------

def main(argv=None):
    """The command line (zdptest.llama_ref_cli, whose docstring lists it): its exit code."""
    from zdptest import llama_ref_cli
    return llama_ref_cli.main(argv)
