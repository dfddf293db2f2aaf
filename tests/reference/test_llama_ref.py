#!/usr/bin/env python3
"""Checks of the transformers reference (zdptest/llama_ref.py) before it is trusted to judge zerodp, with no
zerodp involved: transformers' Llama, Qwen2 and Qwen 3 (zdptest/qwen3_ref.py on a transformers without its
own) against model.md written out in float64 here, for the four presets; make's files (dtypes, shards, tied head) and their round trip through logits and check-load; data-order.md's
reads against the GPT-2 benchmark reference's; the train loop's invariance to how the global batch is
split, and its clipping and AdamW against torch.optim.AdamW; the learning-rate schedules' formulas.

    python3 tests/reference/test_llama_ref.py        (unittest; re-runs itself in the venv of
                                                      scripts/setup/transformers_venv.sh when needed)
"""
import argparse
import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

import numpy as np
import torch

from zdptest import harness  # tests/pylib, on PYTHONPATH (ctest sets it)
from zdptest import llama_ref as lr  # noqa: E402
from zdptest import torch_gpt2  # noqa: E402

if __name__ == "__main__":
    lr.ensure_transformers()  # may replace this process with the venv's python
try:
    import safetensors.torch as st  # noqa: E402
    import transformers  # noqa: E402,F401
    HAVE_TRANSFORMERS = True
except ImportError:  # imported by pytest under a python without the venv: see the end of the file
    HAVE_TRANSFORMERS = False

torch.set_num_threads(1)
CLI = os.path.join(HERE, "llama_ref.py")


def call(*argv):
    """llama_ref's main in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = lr.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


# ---- docs/reference/model.md (Llama) written out, in float64, from its words -------------------------

def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def inverse_frequencies(cfg, head_dim):
    """θ^(-2i/d) for i < d/2, with llama3 scaling when configured: wavelengths shorter than
    original/high_freq_factor are kept, longer than original/low_freq_factor divided by `factor`, and
    those between interpolated on original/wavelength."""
    inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    scaling = cfg.get("rope_scaling")
    if not scaling:
        return inv
    assert scaling["rope_type"] == "llama3"
    factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    out = []
    for f in inv.tolist():
        wavelength = 2 * math.pi / f
        if wavelength < original / hi:
            out.append(f)
        elif wavelength > original / lo:
            out.append(f / factor)
        else:
            smooth = (original / wavelength - lo) / (hi - lo)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=torch.float64)


def contract_logits(state, cfg, ids):
    """Logits [T, V] of one sequence per model.md, from HF-named tensors ({name: tensor}), in float64."""
    p = {k: v.double() for k, v in state.items()}
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or C // H
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    x = p["model.embed_tokens.weight"][torch.tensor(ids)]
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inverse_frequencies(cfg, hd)[None, :]
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)  # [T, hd]

    def rope(z):  # [heads, T, hd], rotate-half: pair i with i + hd/2
        half = hd // 2
        return z * cos + torch.cat([-z[..., half:], z[..., :half]], -1) * sin

    def proj(h, name, heads, norm=None):  # norm: Qwen 3's RMSNorm over each head, before RoPE
        y = h @ p[name + ".weight"].T
        if name + ".bias" in p:
            y = y + p[name + ".bias"]
        y = y.view(T, heads, hd)
        if norm in p:
            y = rms_norm(y, p[norm], eps)
        return y.transpose(0, 1)

    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    if cfg.get("sliding_window"):  # Mistral: row t sees keys t − w < j ≤ t only
        future |= torch.ones(T, T, dtype=torch.bool).tril(-cfg["sliding_window"])
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = rope(proj(h, pre + "self_attn.q_proj", H, pre + "self_attn.q_norm.weight"))
        k = rope(proj(h, pre + "self_attn.k_proj", KV, pre + "self_attn.k_norm.weight"))
        k = k.repeat_interleave(H // KV, 0)  # query head j: kv j·KV/H
        v = proj(h, pre + "self_attn.v_proj", KV).repeat_interleave(H // KV, 0)
        scores = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(future, float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(0, 1).reshape(T, H * hd)
        x = x + y @ p[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        gate = h @ p[pre + "mlp.gate_proj.weight"].T
        up = h @ p[pre + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ p[pre + "mlp.down_proj.weight"].T
    x = rms_norm(x, p["model.norm.weight"], eps)
    head = p["lm_head.weight"] if not cfg["tie_word_embeddings"] else p["model.embed_tokens.weight"]
    return x @ head.T


def expected_names(cfg):
    """The tensor names of model.md a saved model holds (a tied head is not saved)."""
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    if not cfg["tie_word_embeddings"]:
        names.add("lm_head.weight")
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        names |= {pre + "input_layernorm.weight", pre + "post_attention_layernorm.weight"}
        names |= {pre + f"self_attn.{x}_proj.weight" for x in "qkvo"}
        names |= {pre + f"mlp.{x}_proj.weight" for x in ("gate", "up", "down")}
        if cfg.get("attention_bias"):
            names |= {pre + f"self_attn.{x}_proj.bias" for x in "qkv"}
        if cfg["model_type"] == "qwen3":
            names |= {pre + "self_attn.q_norm.weight", pre + "self_attn.k_norm.weight"}
    return names


def token_file(path, n, vocab, seed):
    ids = np.random.default_rng(seed).integers(0, vocab, n).tolist()
    harness.write_token_file(path, ids, 2)
    return ids


class TmpDirCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def make(self, preset, seed=1, dtype="float32", name=None, extra=()):
        out = self.path(name or f"{preset}_{seed}_{dtype}")
        code, _, err = call("make", "--config", preset, "--seed", seed, "--dtype", dtype, "--out", out, *extra)
        self.assertEqual(code, 0, err)
        return out

    def logits(self, model_dir, ids):
        out = self.path("logits.bin")
        code, _, err = call("logits", "--model", model_dir, "--tokens", ",".join(map(str, ids)), "--out", out)
        self.assertEqual(code, 0, err)
        return np.fromfile(out, dtype="<f4").reshape(len(ids), -1)


# ---- presets, make, logits ---------------------------------------------------------------------------

class ModelTest(TmpDirCase):
    IDS = [5, 17, 0, 63, 42, 42, 8, 30, 2, 61, 12, 7, 50, 33, 1, 19, 27, 44, 9, 60]  # 20 > the llama3 original 8

    def test_config_prints_each_preset(self):
        for name, cfg in lr.CONFIGS.items():
            code, out, _ = call("config", name)
            self.assertEqual(code, 0)
            self.assertEqual(json.loads(out), cfg)
        self.assertEqual(set(lr.CONFIGS), {"llama_gqa_untied", "qwen2_bias_tied", "llama3_rope_scaling",
                                           "qwen3_norm_tied", "mistral_window_untied"})

    def test_presets_match_section12(self):
        """make -> files with model.md's names and the preset's config.json -> logits equal to model.md in float64."""
        for name, cfg in lr.CONFIGS.items():
            with self.subTest(name):
                d = self.make(name)
                with open(os.path.join(d, "config.json")) as f:
                    saved = json.load(f)
                for key in ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
                            "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
                            "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
                            "tie_word_embeddings", "attention_bias"):
                    self.assertEqual(saved.get(key), cfg.get(key), key)
                state = lr.read_state(d)
                self.assertEqual(set(state), expected_names(cfg))
                self.assertTrue(all(v.dtype == torch.float32 for v in state.values()))
                got = self.logits(d, self.IDS)
                want = contract_logits(state, cfg, self.IDS).numpy()
                self.assertEqual(got.shape, (len(self.IDS), cfg["vocab_size"]))
                self.assertGreater(np.abs(want).max(), 1.0)  # logits of some size, so the match means something
                np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)

    def test_each_feature_changes_the_logits(self):
        """The presets' features are not no-ops at these sizes: without the llama3 scaling, the Qwen2
        biases, or with a position shift, model.md's logits move well beyond the tolerance above."""
        cfg = lr.CONFIGS["llama3_rope_scaling"]
        state = lr.read_state(self.make("llama3_rope_scaling"))
        base = contract_logits(state, cfg, self.IDS)
        unscaled = contract_logits(state, dict(cfg, rope_scaling=None), self.IDS)
        self.assertGreater((base - unscaled).abs().max().item(), 1e-2)
        cfg = lr.CONFIGS["qwen2_bias_tied"]
        state = lr.read_state(self.make("qwen2_bias_tied"))
        no_bias = {k: (torch.zeros_like(v) if k.endswith(".bias") else v) for k, v in state.items()}
        self.assertGreater((contract_logits(state, cfg, self.IDS) - contract_logits(no_bias, cfg, self.IDS))
                           .abs().max().item(), 1e-2)
        cfg = lr.CONFIGS["mistral_window_untied"]
        state = lr.read_state(self.make("mistral_window_untied"))
        self.assertLess(cfg["sliding_window"], len(self.IDS))
        self.assertGreater((contract_logits(state, cfg, self.IDS) -
                            contract_logits(state, dict(cfg, sliding_window=None), self.IDS)).abs().max().item(), 1e-2)

    def test_draws_are_deterministic_and_non_trivial(self):
        a = lr.read_state(self.make("qwen2_bias_tied", seed=3, name="a"))
        b = lr.read_state(self.make("qwen2_bias_tied", seed=3, name="b"))
        c = lr.read_state(self.make("qwen2_bias_tied", seed=4, name="c"))
        for name in a:
            self.assertTrue(torch.equal(a[name], b[name]), name)
            self.assertFalse(torch.equal(a[name], c[name]), name)
            if name.endswith("norm.weight"):
                self.assertGreater((a[name] - 1).abs().max().item(), 0.05, name)
                self.assertLess((a[name] - 1).abs().max().item(), 0.6, name)
            elif name.endswith(".bias"):
                self.assertGreater(a[name].abs().max().item(), 0.05, name)

    def test_half_precision_files(self):
        """--dtype stores every tensor in that dtype; logits are float32 on the stored values."""
        cfg = lr.CONFIGS["llama_gqa_untied"]
        f32 = lr.read_state(self.make("llama_gqa_untied", seed=2))
        for dtype, torch_dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
            with self.subTest(dtype):
                d = self.make("llama_gqa_untied", seed=2, dtype=dtype)
                state = lr.read_state(d)
                self.assertTrue(all(v.dtype == torch_dtype for v in state.values()))
                for name, v in state.items():  # the same draws, rounded
                    self.assertTrue(torch.equal(v, f32[name].to(torch_dtype)), name)
                np.testing.assert_allclose(self.logits(d, self.IDS), contract_logits(state, cfg, self.IDS).numpy(),
                                           rtol=0, atol=2e-5)

    def test_sharded_loads_identically(self):
        whole = self.make("llama_gqa_untied", seed=5, name="whole")
        shards = self.make("llama_gqa_untied", seed=5, name="shards", extra=("--max-shard-size", "20KB"))
        with open(os.path.join(shards, "model.safetensors.index.json")) as f:
            files = set(json.load(f)["weight_map"].values())
        self.assertGreater(len(files), 1)
        self.assertFalse(os.path.exists(os.path.join(shards, "model.safetensors")))
        for against in (whole, os.path.join(whole, "model.safetensors")):
            code, out, err = call("check-load", "--model", shards, "--against", against)
            self.assertEqual(code, 0, err)
            self.assertIn("equal", out)
        np.testing.assert_array_equal(self.logits(shards, self.IDS), self.logits(whole, self.IDS))
        # Tied: the head is absent from the files and transformers' lm_head is the embedding.
        tied = self.make("qwen2_bias_tied", seed=5, name="tied", extra=("--max-shard-size", "10000"))
        self.assertNotIn("lm_head.weight", lr.read_state(tied))
        self.assertEqual(call("check-load", "--model", tied, "--against", tied)[0], 0)

    def test_check_load_names_what_differs(self):
        ref = self.make("qwen2_bias_tied", seed=6, name="ref")
        state = lr.read_state(ref)
        changed = self.path("changed")
        shutil.copytree(ref, changed)
        bumped = dict(state)
        bumped["model.layers.1.self_attn.k_proj.bias"] = state["model.layers.1.self_attn.k_proj.bias"] + 1e-3
        st.save_file(bumped, os.path.join(changed, "model.safetensors"), metadata={"format": "pt"})
        code, _, err = call("check-load", "--model", changed, "--against", ref)
        self.assertEqual(code, 1)
        self.assertIn("model.layers.1.self_attn.k_proj.bias", err)
        self.assertEqual(call("check-load", "--model", changed, "--against", ref, "--atol", "2e-3")[0], 0)
        # A tensor the model needs, missing: transformers would draw it at random; check-load fails instead.
        missing = {k: v for k, v in state.items() if k != "model.layers.0.mlp.up_proj.weight"}
        st.save_file(missing, os.path.join(changed, "model.safetensors"), metadata={"format": "pt"})
        code, _, err = call("check-load", "--model", changed, "--against", ref)
        self.assertEqual(code, 1)
        self.assertIn("model.layers.0.mlp.up_proj.weight", err)

    def test_rope_parameters_form(self):
        """transformers 5's rope_parameters makes the same model as rope_theta + rope_scaling; a directory
        whose config.json has only that form is refused where transformers 4 would load it with default
        rotary embeddings (no error of its own)."""
        cfg = dict(lr.CONFIGS["llama3_rope_scaling"])
        cfg["rope_parameters"] = dict(cfg.pop("rope_scaling"), rope_theta=cfg.pop("rope_theta"))
        with open(self.path("v5.json"), "w") as f:
            json.dump(cfg, f)
        v5 = self.make(self.path("v5.json"), seed=12, name="v5")
        v4 = self.make("llama3_rope_scaling", seed=12, name="v4")
        np.testing.assert_array_equal(self.logits(v5, self.IDS), self.logits(v4, self.IDS))
        with open(os.path.join(v4, "config.json")) as f:
            saved = json.load(f)
        saved["rope_parameters"] = dict(saved.pop("rope_scaling"), rope_theta=saved.pop("rope_theta"))
        with open(os.path.join(v4, "config.json"), "w") as f:
            json.dump(saved, f)
        if int(transformers.__version__.split(".")[0]) < 5:
            code, _, err = call("check-load", "--model", v4, "--against", v5)
            self.assertEqual(code, 1)
            self.assertIn("rope_parameters", err)
            code, _, err = call("logits", "--model", v4, "--tokens", "1,2", "--out", self.path("x.bin"))
            self.assertEqual(code, 2)
            self.assertIn("rope_theta and rope_scaling", err)

    def test_bad_inputs_exit_2(self):
        d = self.make("llama_gqa_untied")
        cases = [
            (("logits", "--model", d, "--tokens", "1,64", "--out", self.path("x.bin")), "outside the vocabulary"),
            (("logits", "--model", self.path("nowhere"), "--tokens", "1", "--out", self.path("x.bin")), "nowhere"),
            (("make", "--config", "no_such_preset", "--seed", "1", "--out", self.path("m")), "no_such_preset"),
            (("check-load", "--model", d, "--against", self.path("none.safetensors")), "none.safetensors"),
        ]
        bad_type = self.path("gemma2.json")
        with open(bad_type, "w") as f:
            json.dump({"model_type": "gemma2", "num_hidden_layers": 1}, f)
        cases.append((("make", "--config", bad_type, "--seed", "1", "--out", self.path("m")), "gemma2"))
        for argv, text in cases:
            with self.subTest(argv[0] + " " + text):
                code, _, err = call(*argv)
                self.assertEqual(code, 2, err)
                self.assertIn(text, err)


# ---- data-order.md -----------------------------------------------------------------------------------

class BatchTest(TmpDirCase):
    def test_reads_equal_the_gpt2_reference(self):
        """torch_gpt2.batch reads rank r of W at step s (G = 1). With G micro-steps, data-order.md's offset
        ((s·G + g)·W + r)·B·T is that of rank g·W + r of a world of G·W: the same function covers G > 1."""
        tokens = np.random.default_rng(1).integers(0, 64, 997)  # a prime count: windows wrap at odd places
        as_tensor = torch.from_numpy(tokens)
        for world, b, t, g in [(1, 4, 8, 1), (4, 2, 8, 1), (2, 2, 8, 2), (3, 1, 5, 4)]:
            for step in range(0, 40, 7):
                reads = list(lr.micro_batches(tokens, step, world, b, t, g))
                self.assertEqual([(m, r) for m, r, _, _ in reads], [(m, r) for m in range(g) for r in range(world)])
                for m, r, x, y in reads:
                    want_x, want_y = torch_gpt2.batch(as_tensor, step, g * world, m * world + r, b, t)
                    self.assertTrue(torch.equal(x, want_x) and torch.equal(y, want_y), (world, b, t, g, step, m, r))

    def test_offset_written_out(self):
        tokens = np.arange(1000)
        # W=2, B=2, T=3, G=2, step 1, micro-step 1, rank 1: off = ((1·2 + 1)·2 + 1)·6 = 42.
        reads = {(m, r): (x, y) for m, r, x, y in lr.micro_batches(tokens, 1, 2, 2, 3, 2)}
        np.testing.assert_array_equal(reads[(1, 1)][0].numpy(), [[42, 43, 44], [45, 46, 47]])
        np.testing.assert_array_equal(reads[(1, 1)][1].numpy(), [[43, 44, 45], [46, 47, 48]])

    def test_uint32_token_files(self):
        ids = [0, 70000, 5, 65535, 65536, 123456]
        harness.write_token_file(self.path("wide.bin"), ids, 4)
        np.testing.assert_array_equal(lr.read_tokens(self.path("wide.bin"), 200000), ids)
        with self.assertRaisesRegex(lr.InputError, "123456 at position 5"):
            lr.read_tokens(self.path("wide.bin"), 100000)
        harness.write_token_file(self.path("narrow.bin"), [1, 2, 3], 2)  # version 1: ref_train's reader
        np.testing.assert_array_equal(lr.read_tokens(self.path("narrow.bin"), 10), [1, 2, 3])


# ---- model.md, optimizer.md --------------------------------------------------------------------------

HYPER = dict(lr=3e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1)


def train_args(world, b, g, steps, seq=16, clip=0.0):
    """What train() reads of the command line."""
    return argparse.Namespace(world=world, micro_batch=b, accum=g, steps=steps, seq=seq, clip=clip, **HYPER)


class TrainTest(TmpDirCase):
    def run_train(self, model_dir, tokens, world, b, g, steps, clip=0.0, schedule=None):
        model = lr.load_model(model_dir)
        args = train_args(world, b, g, steps, clip=clip)
        records = lr.train(model, tokens, args, schedule or lr.LrSchedule("constant", args.lr, steps))
        return model, records

    def test_splitting_the_global_batch_changes_nothing(self):
        """(W, B, G) = (1, 4, 1), (1, 2, 2) and (2, 2, 1) train on the same global batches (data-order.md)
        and the loss is their mean (model.md): the same losses and norms up to float32 rounding, over
        steps that each move the weights."""
        d = self.make("llama_gqa_untied", seed=7)
        tokens = np.random.default_rng(7).integers(0, 64, 600)
        runs = {split: self.run_train(d, tokens, *split, steps=3, clip=1.0) for split in [(1, 4, 1), (1, 2, 2),
                                                                                          (2, 2, 1)]}
        base_model, base = runs[(1, 4, 1)]
        self.assertNotEqual(base[0]["loss"], base[2]["loss"])
        for split, (model, records) in runs.items():
            for mine, ref in zip(records, base):
                self.assertAlmostEqual(mine["loss"], ref["loss"], delta=1e-6, msg=(split, mine["step"]))
                self.assertAlmostEqual(mine["grad_norm"], ref["grad_norm"], delta=1e-5 * ref["grad_norm"])
                self.assertEqual((mine["tokens"], mine["lr"]), (64, HYPER["lr"]))
            for (name, p), q in zip(model.named_parameters(), base_model.parameters()):
                np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=0, atol=1e-5, err_msg=name)

    def test_update_equals_torch_adamw_with_clipping(self):
        """Two steps with the norm clipped, decoupled decay on 2-D tensors only and a warmup rate, against
        the same step written with torch.optim.AdamW (two groups) and the clip formula of model.md, on Qwen2 with a
        tied head (one parameter, updated once)."""
        d = self.make("qwen2_bias_tied", seed=8)
        tokens = np.random.default_rng(8).integers(0, 64, 500)
        schedule = lr.LrSchedule("warmup", HYPER["lr"], 2, warmup_steps=3)
        clip = 0.5
        model, records = self.run_train(d, tokens, 2, 2, 2, 2, clip=clip, schedule=schedule)

        ref = lr.load_model(d)
        params = list(ref.parameters())
        self.assertIs(ref.lm_head.weight, ref.model.embed_tokens.weight)
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": HYPER["weight_decay"]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=HYPER["lr"], betas=(HYPER["beta1"], HYPER["beta2"]), eps=HYPER["eps"])
        for s in range(2):
            opt.zero_grad()
            loss = 0.0
            for _, _, x, y in lr.micro_batches(tokens, s, 2, 2, 16, 2):
                token_losses = torch.nn.functional.cross_entropy(ref(input_ids=x).logits.reshape(-1, 64),
                                                                 y.reshape(-1), reduction="none")
                part = token_losses.double().sum() / (2 * 2 * 2 * 16)
                part.backward()
                loss += part.item()
            norm = math.sqrt(sum((p.grad.double() ** 2).sum().item() for p in params))
            self.assertGreater(norm, clip)  # the clip is in force
            for p in params:
                p.grad.mul_(min(1.0, clip / (norm + 1e-6)))
            for group in opt.param_groups:
                group["lr"] = HYPER["lr"] * s / 3  # linear warmup over max(2, 3) = 3 steps, from 0
            opt.step()
            self.assertAlmostEqual(records[s]["loss"], loss, delta=1e-6)
            self.assertAlmostEqual(records[s]["grad_norm"], norm, delta=1e-6 * norm)
            self.assertEqual(records[s]["lr"], HYPER["lr"] * s / 3)
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=0, atol=1e-6, err_msg=name)

    def test_cli_writes_step_records(self):
        d = self.make("llama3_rope_scaling", seed=9)
        data = self.path("tokens.bin")
        token_file(data, 800, 64, 9)
        metrics, out = self.path("metrics.jsonl"), self.path("trained")
        code, _, err = call("train", "--model", d, "--data", data, "--world", 2, "--micro-batch", 2, "--seq", 16,
                            "--accum", 2, "--steps", 4, "--lr", 1e-2, "--warmup-steps", 2, "--lr-schedule", "cosine",
                            "--weight-decay", 0.1, "--beta2", 0.95, "--grad-clip", 1.0, "--metrics", metrics,
                            "--out", out)
        self.assertEqual(code, 0, err)
        steps = harness.steps_of(metrics)
        self.assertEqual(sorted(steps), [0, 1, 2, 3])
        for s, r in steps.items():
            self.assertEqual(r["event"], "step")
            self.assertEqual(r["tokens"], 2 * 2 * 2 * 16)
            for key in ("loss", "grad_norm", "lr", "ms"):
                self.assertIsInstance(r[key], float, key)
        self.assertEqual([steps[s]["lr"] for s in range(4)], [lr.LrSchedule("cosine", 1e-2, 4, 2)(s) for s in range(4)])
        trained = lr.read_state(out)
        self.assertFalse(torch.equal(trained["model.norm.weight"], lr.read_state(d)["model.norm.weight"]))
        code, _, err = call("train", "--model", d, "--data", data, "--micro-batch", 1, "--seq", 33, "--steps", 1)
        self.assertEqual(code, 2)
        self.assertIn("max_position_embeddings", err)


class LrScheduleTest(unittest.TestCase):
    def test_formulas(self):
        S = lr.LrSchedule
        lr0 = 1e-3
        self.assertEqual([S("constant", lr0, 5)(s) for s in range(3)], [lr0] * 3)
        # WarmupLR: min + (max - min)·s/W, then max; W = max(2, warmup): 1 warmup step means 2.
        warm = S("warmup", lr0, 10, warmup_steps=4, min_lr=1e-4)
        self.assertEqual([warm(s) for s in (0, 2, 4, 9)], [1e-4, 1e-4 + 9e-4 * 0.5, lr0, lr0])
        self.assertEqual(S("warmup", lr0, 10, warmup_steps=1)(1), lr0 * 0.5)
        log = S("warmup", lr0, 10, warmup_steps=4, warmup_type="log")
        self.assertAlmostEqual(log(1), lr0 * math.log(2) / math.log(4), delta=1e-18)
        # WarmupDecayLR: after warmup, min + (max - min)·(T - s)/(T - W).
        decay = S("warmup-decay", lr0, 10, warmup_steps=4)
        self.assertEqual([decay(s) for s in (4, 7, 10, 12)], [lr0, lr0 * 0.5, 0.0, 0.0])
        # WarmupCosineLR: lr·(c + (1 - c)(1 + cos πq)/2), q = (s - W + 1)/(T - W); --min-lr sets c·lr.
        cos = S("cosine", lr0, 10, warmup_steps=2, min_lr=1e-4)
        self.assertAlmostEqual(cos(5), lr0 * (0.1 + 0.9 * (1 + math.cos(math.pi * 0.5)) / 2), delta=1e-18)
        self.assertAlmostEqual(cos(9), 1e-4, delta=1e-18)
        self.assertAlmostEqual(S("cosine", lr0, 10)(9), lr0 * 1e-4, delta=1e-18)
        # WSD: warmup, peak until the last D steps of T, the first decay step already one step down, T-1 at min.
        wsd = S("wsd", lr0, 10, warmup_steps=2, decay_steps=4, min_lr=1e-4)
        self.assertEqual([wsd(s) for s in (0, 1, 2, 5)], [1e-4, 1e-4 + 9e-4 * 0.5, lr0, lr0])
        self.assertAlmostEqual(wsd(6), 1e-4 + 9e-4 * 0.75, delta=1e-18)
        self.assertAlmostEqual(wsd(9), 1e-4, delta=1e-18)
        self.assertAlmostEqual(S("wsd", lr0, 10, decay_steps=4, decay_type="1-sqrt")(6), lr0 * (1 - 0.5), delta=1e-18)
        with self.assertRaisesRegex(lr.InputError, "do not fit"):
            S("wsd", lr0, 10, warmup_steps=4, decay_steps=7)


# ---- the command-line entry, in subprocesses ---------------------------------------------------------

class CliEntryTest(TmpDirCase):
    def test_make_then_logits_through_the_script(self):
        env = dict(os.environ)  # PYTHONPATH holds tests/pylib (ctest sets it): the script imports zdptest from it
        out = subprocess.run([sys.executable, CLI, "config", "llama3_rope_scaling"], capture_output=True, text=True,
                             env=env, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout), lr.CONFIGS["llama3_rope_scaling"])
        d = self.path("m")
        for argv in (["make", "--config", "llama3_rope_scaling", "--seed", "11", "--dtype", "bfloat16", "--out", d],
                     ["logits", "--model", d, "--tokens", "3,1,4,1,5,9,2,6", "--out", self.path("l.bin")]):
            out = subprocess.run([sys.executable, CLI] + argv, capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
        got = np.fromfile(self.path("l.bin"), dtype="<f4").reshape(8, 64)
        want = contract_logits(lr.read_state(d), lr.CONFIGS["llama3_rope_scaling"], [3, 1, 4, 1, 5, 9, 2, 6])
        np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=2e-5)


if not HAVE_TRANSFORMERS:
    # Imported (by pytest) into a python that cannot run the cases: one case runs this file as a script
    # instead, which re-runs itself in the venv (made on first use). The cases are then judged, not
    # skipped, and a pytest run over the whole tree does not stop at collecting this file.
    del ModelTest, BatchTest, TrainTest, LrScheduleTest, CliEntryTest

    class InTheTransformersVenv(unittest.TestCase):
        def test_every_case_in_the_venv(self):
            out = subprocess.run([sys.executable, os.path.abspath(__file__)], capture_output=True, text=True,
                                 timeout=900)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr[-20000:])


if __name__ == "__main__":
    start = time.monotonic()
    result = unittest.main(exit=False, verbosity=2).result
    print(f"test_llama_ref.py: {time.monotonic() - start:.1f} s with transformers {transformers.__version__}, "
          f"torch {torch.__version__}", file=sys.stderr)
    sys.exit(0 if result.wasSuccessful() else 1)
