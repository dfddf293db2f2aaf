#!/usr/bin/python3
"""Checks of the reference itself (zdptest/ref_train.py), before it is trusted to judge zerodp: its file
readers, its reading of data-order.md, its pieces of model.md against torch.nn.functional, its gradients against
finite differences and float32 against float64, that splitting the global batch changes nothing,
and its AdamW against torch.optim.AdamW. Run: /usr/bin/python3 test_ref_train.py (unittest)."""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"test_ref_train.py: FAIL: {sys.executable} cannot import numpy/torch ({e}). The reference tests "
             "need Debian's python3-torch and python3-numpy under /usr/bin/python3: run scripts/setup/setup.sh.")

from zdptest import ref_train as rt  # noqa: E402  (after the check that torch imports)
from zdptest.harness import read_metrics

torch.set_num_threads(1)

TINY = {"n_layer": 2, "n_head": 2, "n_embd": 16, "vocab_size": 32, "n_ctx": 16}


def gpt2_init(cfg, seed):
    """model.md's scheme with numpy's generator (the draws need not match zerodp's, only the law)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in rt.param_shapes(cfg).items():
        if name.endswith("c_proj.weight"):
            out[name] = rng.normal(0, 0.02 / math.sqrt(2 * cfg["n_layer"]), shape)
        elif name.endswith(".weight") and ("ln_" in name):
            out[name] = np.ones(shape)
        elif name.endswith(".weight"):
            out[name] = rng.normal(0, 0.02, shape)
        else:
            out[name] = np.zeros(shape)
    return {k: v.astype(np.float32) for k, v in out.items()}


def random_weights(cfg, seed, scale=0.3):
    """Larger, non-trivial weights (LayerNorm gains and biases too), so every path carries signal."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in rt.param_shapes(cfg).items():
        base = 1.0 if (name.endswith(".weight") and "ln_" in name) else 0.0
        out[name] = (base + scale * rng.standard_normal(shape)).astype(np.float32)
    return out


def as_params(weights, dtype):
    return {n: torch.tensor(w, dtype=dtype).requires_grad_(True) for n, w in weights.items()}


def write_bytes(path, content):
    with open(path, "wb") as f:
        f.write(content)


def write_llmc(path, tokens, version=1, count=None):
    header = [0] * 256
    header[0], header[1] = rt.LLMC_MAGIC, version
    header[2] = len(tokens) if count is None else count
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


class TmpDirCase(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)


class SafetensorsTest(TmpDirCase):
    def test_round_trip_every_dtype(self):
        # Values exact in all three dtypes: multiples of 1/8 with few significant bits.
        values = {"a": (np.arange(12, dtype=np.float32) / 8 - 0.75).reshape(3, 4), "b": np.float32([3.5, -2.0])}
        for dtype in ("F32", "F16", "BF16"):
            p = self.path(f"x_{dtype}.safetensors")
            rt.write_safetensors(p, values, {"k": 7}, dtype=dtype)
            tensors, meta = rt.read_safetensors(p)
            self.assertEqual(meta, {"k": "7"})
            for name, v in values.items():
                np.testing.assert_array_equal(tensors[name], v, err_msg=dtype)

    def test_bf16_rounds_to_nearest(self):
        p = self.path("r.safetensors")
        x = np.float32([1.0 + 2 ** -8 + 2 ** -12, 1.0 + 2 ** -9, -3.0 - 2 ** -6])
        rt.write_safetensors(p, {"x": x}, dtype="BF16")
        got = rt.read_safetensors(p)[0]["x"]
        # 1 + 2^-8 + 2^-12 rounds up to 1 + 2^-7; 1 + 2^-9 is below half an ulp: 1; -3 - 2^-6 is exact.
        np.testing.assert_array_equal(got, np.float32([1.0 + 2 ** -7, 1.0, -3.0 - 2 ** -6]))

    def test_gpt2_prefix_ignored_buffers_and_config_json(self):
        w = gpt2_init(TINY, 1)
        named = {"transformer." + k: v for k, v in w.items()}
        named["lm_head.weight"] = w["wte.weight"]
        named["transformer.h.0.attn.bias"] = np.ones((1, 1, 16, 16), np.float32)
        named["transformer.h.1.attn.masked_bias"] = np.float32([-1e4])
        p = self.path("hf.safetensors")
        rt.write_safetensors(p, named, None, dtype="F16")
        with self.assertRaisesRegex(rt.InputError, "no hyper-parameters"):
            rt.load_gpt2(p)
        cfg, got = rt.load_gpt2(p, heads=2)  # from the shapes and --heads
        self.assertEqual(cfg, TINY)
        with open(self.path("config.json"), "w") as f:
            json.dump({**TINY, "n_head": 4}, f)
        cfg, got = rt.load_gpt2(p)
        self.assertEqual(cfg["n_head"], 4)
        self.assertEqual(list(got), list(rt.param_shapes(TINY)))
        np.testing.assert_allclose(got["wte.weight"], w["wte.weight"], rtol=1e-3, atol=1e-7)

    def test_bad_files_are_named(self):
        w = gpt2_init(TINY, 2)
        good = self.path("good.safetensors")
        rt.write_safetensors(good, w, TINY)
        with open(good, "rb") as f:
            blob = f.read()
        cases = {
            "truncated": (blob[:len(blob) // 2], "data offsets"),
            "short_header": (blob[:20], "header of"),
            "tiny": (blob[:5], "shorter than"),
        }
        for name, (content, text) in cases.items():
            p = self.path(name + ".safetensors")
            write_bytes(p, content)
            with self.assertRaisesRegex(rt.InputError, text) as ctx:
                rt.load_gpt2(p)
            self.assertIn(p, str(ctx.exception))
        missing = dict(w)
        del missing["h.1.mlp.c_fc.bias"]
        rt.write_safetensors(self.path("m.safetensors"), missing, TINY)
        with self.assertRaisesRegex(rt.InputError, r"'h.1.mlp.c_fc.bias' is missing \(expected shape \[64\]\)"):
            rt.load_gpt2(self.path("m.safetensors"))
        wrong = dict(w, **{"h.0.attn.c_attn.weight": np.zeros((48, 16), np.float32)})
        rt.write_safetensors(self.path("w.safetensors"), wrong, TINY)
        with self.assertRaisesRegex(rt.InputError,
                                    r"'h.0.attn.c_attn.weight' has shape \[48, 16\], expected \[16, 48\]"):
            rt.load_gpt2(self.path("w.safetensors"))
        extra = dict(w, **{"h.2.ln_1.weight": np.ones(16, np.float32)})
        rt.write_safetensors(self.path("e.safetensors"), extra, TINY)
        with self.assertRaisesRegex(rt.InputError, "unknown tensor 'h.2.ln_1.weight'"):
            rt.load_gpt2(self.path("e.safetensors"))


class TokensTest(TmpDirCase):
    def test_both_layouts_read_the_same(self):
        tokens = np.arange(100) * 7 % 50
        write_llmc(self.path("a.bin"), tokens)
        write_bytes(self.path("b.bin"), np.asarray(tokens, "<u2").tobytes())
        np.testing.assert_array_equal(rt.read_tokens(self.path("a.bin"), 50), tokens)
        np.testing.assert_array_equal(rt.read_tokens(self.path("b.bin"), 50), tokens)

    def test_errors(self):
        write_bytes(self.path("empty.bin"), b"")
        write_llmc(self.path("version.bin"), [1, 2, 3], version=2)
        write_llmc(self.path("count.bin"), [1, 2, 3], count=4)
        write_llmc(self.path("big.bin"), [1, 2, 50, 3])
        write_bytes(self.path("odd.bin"), b"\x01\x00\x02")
        for name, text in [("empty", "empty"), ("version", "bad header"), ("count", "bad header"),
                           ("big", "token 50 at position 2 is >= the vocabulary size 50"), ("odd", "odd length")]:
            with self.assertRaisesRegex(rt.InputError, text) as ctx:
                rt.read_tokens(self.path(name + ".bin"), 50)
            self.assertIn(self.path(name + ".bin"), str(ctx.exception))


class GlobalBatchTest(unittest.TestCase):
    def test_offsets_follow_section5(self):
        tokens = np.arange(1000)
        # W=2, B=2, T=3, G=2, step 1, micro-step 1, rank 0: off = ((1·2 + 1)·2 + 0)·6 = 36.
        x, y = rt.global_batch(tokens, 1, world=2, micro_batch=2, seq=3, accum=2)
        self.assertEqual(tuple(x.shape), (8, 3))
        np.testing.assert_array_equal(x[4].numpy(), [36, 37, 38])
        np.testing.assert_array_equal(x[5].numpy(), [39, 40, 41])
        np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)

    def test_same_global_batch_however_split(self):
        tokens = np.random.default_rng(0).integers(0, 50, 5000)
        for step in range(3):
            ref = rt.global_batch(tokens, step, 1, 8, 16, 1)
            for w, b, g in [(4, 2, 1), (2, 2, 2), (8, 1, 1), (1, 1, 8)]:
                got = rt.global_batch(tokens, step, w, b, 16, g)
                # Same multiset of sequences; indeed the same order, (g, r, b) being contiguous in data-order.md.
                np.testing.assert_array_equal(got[0].numpy(), ref[0].numpy())
                np.testing.assert_array_equal(got[1].numpy(), ref[1].numpy())

    def test_positions_wrap_modulo_the_token_count(self):
        tokens = np.arange(10)
        x, y = rt.global_batch(tokens, 1, world=1, micro_batch=2, seq=4, accum=1)  # off 8: 8 9 0 1 | 2 3 4 5, 6
        np.testing.assert_array_equal(x.numpy(), [[8, 9, 0, 1], [2, 3, 4, 5]])
        np.testing.assert_array_equal(y.numpy(), [[9, 0, 1, 2], [3, 4, 5, 6]])


class ModelTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_layer_norm_matches_torch(self):
        x = torch.randn(3, 5, 16, dtype=torch.float64)
        w, b = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
        torch.testing.assert_close(rt.layer_norm(x, w, b), F.layer_norm(x, (16,), w, b, eps=1e-5),
                                   rtol=1e-12, atol=1e-12)

    def test_gelu_matches_torch_tanh_approximation(self):
        x = torch.linspace(-8, 8, 1001, dtype=torch.float64)
        torch.testing.assert_close(rt.gelu_tanh(x), F.gelu(x, approximate="tanh"), rtol=1e-12, atol=1e-12)
        self.assertGreater((rt.gelu_tanh(x) - F.gelu(x)).abs().max().item(), 1e-5)  # not the erf form

    def test_attention_matches_torch_sdpa(self):
        n, t, c, h = 2, 7, 16, 4
        x = torch.randn(n, t, c, dtype=torch.float64)
        wa, ba = torch.randn(c, 3 * c, dtype=torch.float64) * 0.3, torch.randn(3 * c, dtype=torch.float64)
        wp, bp = torch.randn(c, c, dtype=torch.float64) * 0.3, torch.randn(c, dtype=torch.float64)
        got = rt.causal_self_attention(x, wa, ba, wp, bp, h)
        # torch.nn.MultiheadAttention (its weights [out, in], scaled by 1/sqrt(head size), True = masked).
        mha = torch.nn.MultiheadAttention(c, h, bias=True, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            mha.in_proj_weight.copy_(wa.t())
            mha.in_proj_bias.copy_(ba)
            mha.out_proj.weight.copy_(wp.t())
            mha.out_proj.bias.copy_(bp)
        future = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        want, _ = mha(x, x, x, attn_mask=future, need_weights=False)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)

    def test_causal_and_tied(self):
        p = as_params(random_weights(TINY, 3), torch.float64)
        idx = torch.randint(0, 32, (2, 10))
        base = rt.gpt2_logits(p, TINY, idx)
        changed = idx.clone()
        changed[:, 6] = (changed[:, 6] + 1) % 32
        other = rt.gpt2_logits(p, TINY, changed)
        torch.testing.assert_close(other[:, :6], base[:, :6], rtol=0, atol=0)
        self.assertGreater((other[:, 6:] - base[:, 6:]).abs().max().item(), 1e-6)
        # Tied head: the logits are linear in wte through the last projection; its gradient gets both uses.
        loss, grads = rt.loss_and_grads(p, TINY, idx, torch.randint(0, 32, (2, 10)))
        self.assertEqual(tuple(grads["wte.weight"].shape), (32, 16))
        self.assertTrue(torch.all(grads["wte.weight"].abs().sum(1) > 0))  # every row: the head touches all

    def test_initial_loss_is_near_log_vocab(self):
        # model.md's small initialisation gives near-uniform predictions: loss ≈ ln V.
        p = as_params(gpt2_init(TINY, 4), torch.float64)
        idx = torch.randint(0, 32, (4, 16))
        loss, _ = rt.loss_and_grads(p, TINY, idx, torch.randint(0, 32, (4, 16)))
        self.assertAlmostEqual(loss, math.log(32), delta=0.02)

    def test_gradient_against_finite_differences(self):
        w = random_weights(TINY, 5)
        p = as_params(w, torch.float64)
        idx, tgt = torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8))
        _, grads = rt.loss_and_grads(p, TINY, idx, tgt)
        rng = np.random.default_rng(6)
        h = 1e-6
        for name in ["wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias",
                     "h.1.attn.c_proj.weight", "h.1.mlp.c_fc.weight", "h.1.mlp.c_proj.bias", "ln_f.bias"]:
            flat = p[name].detach().view(-1)
            for _ in range(3):
                i = int(rng.integers(flat.numel()))
                with torch.no_grad():
                    old = flat[i].item()
                    flat[i] = old + h
                    up = rt.token_losses(p, TINY, idx, tgt).mean().item()
                    flat[i] = old - h
                    down = rt.token_losses(p, TINY, idx, tgt).mean().item()
                    flat[i] = old
                numeric = (up - down) / (2 * h)
                self.assertAlmostEqual(grads[name].view(-1)[i].item(), numeric, delta=1e-6 + 1e-5 * abs(numeric),
                                       msg=f"{name}[{i}]")

    def test_float32_agrees_with_float64(self):
        w = random_weights(TINY, 7, scale=0.1)
        idx, tgt = torch.randint(0, 32, (4, 16)), torch.randint(0, 32, (4, 16))
        l64, g64 = rt.loss_and_grads(as_params(w, torch.float64), TINY, idx, tgt)
        l32, g32 = rt.loss_and_grads(as_params(w, torch.float32), TINY, idx, tgt)
        self.assertAlmostEqual(l32, l64, delta=1e-6 * l64)
        n64 = rt.global_norm(g64)
        self.assertAlmostEqual(rt.global_norm(g32), n64, delta=1e-5 * n64)
        for name in g64:
            err = (g32[name].double() - g64[name]).abs().max().item()
            self.assertLess(err, 1e-5 * n64, name)

    def test_splitting_the_batch_changes_nothing(self):
        w = random_weights(TINY, 8, scale=0.1)
        p = as_params(w, torch.float64)
        idx, tgt = torch.randint(0, 32, (8, 12)), torch.randint(0, 32, (8, 12))
        whole, g1 = rt.loss_and_grads(p, TINY, idx, tgt, chunks=1)
        direct = rt.token_losses(p, TINY, idx, tgt).mean().item()
        self.assertAlmostEqual(whole, direct, delta=1e-14)
        for chunks in (2, 3, 8):
            part, gk = rt.loss_and_grads(p, TINY, idx, tgt, chunks=chunks)
            self.assertAlmostEqual(part, whole, delta=1e-13, msg=f"chunks={chunks}")
            for name in g1:
                torch.testing.assert_close(gk[name], g1[name], rtol=1e-11, atol=1e-14)


class OptimizerTest(unittest.TestCase):
    def test_adamw_matches_torch_with_two_groups(self):
        torch.manual_seed(1)
        shapes = {"w2": (5, 4), "b1": (4,), "w3": (2, 3, 2)}
        init = {n: torch.randn(s, dtype=torch.float64) for n, s in shapes.items()}
        mine = {n: v.clone() for n, v in init.items()}
        theirs = {n: v.clone().requires_grad_(True) for n, v in init.items()}
        hp = dict(lr=3e-2, beta1=0.8, beta2=0.95, eps=1e-8, weight_decay=0.1)
        opt = rt.AdamW(mine, **hp)
        ref = torch.optim.AdamW(
            [{"params": [theirs["w2"], theirs["w3"]], "weight_decay": hp["weight_decay"]},
             {"params": [theirs["b1"]], "weight_decay": 0.0}],
            lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
        for s in range(5):
            grads = {n: torch.randn(sh, dtype=torch.float64) * (s + 1) for n, sh in shapes.items()}
            opt.step(s, grads)
            for n in shapes:
                theirs[n].grad = grads[n].clone()
            ref.step()
        for n in shapes:
            torch.testing.assert_close(mine[n], theirs[n].detach(), rtol=1e-12, atol=1e-14)
        self.assertGreater((mine["w2"] - init["w2"]).abs().max().item(), 1e-2)  # it moved

    def test_weight_decay_only_on_matrices(self):
        params = {"w": torch.ones(2, 2, dtype=torch.float64), "b": torch.ones(2, dtype=torch.float64)}
        opt = rt.AdamW(params, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.5)
        opt.step(0, {"w": torch.zeros(2, 2, dtype=torch.float64), "b": torch.zeros(2, dtype=torch.float64)})
        torch.testing.assert_close(params["w"], torch.full((2, 2), 0.95, dtype=torch.float64))
        torch.testing.assert_close(params["b"], torch.ones(2, dtype=torch.float64))

    def test_clip(self):
        grads = {"a": torch.tensor([3.0, 0.0], dtype=torch.float64), "b": torch.tensor([4.0], dtype=torch.float64)}
        norm = rt.global_norm(grads)
        self.assertEqual(norm, 5.0)
        rt.clip_grads(grads, norm, 1.0)
        self.assertAlmostEqual(rt.global_norm(grads), 5.0 / (5.0 + 1e-6), delta=1e-12)
        before = {k: v.clone() for k, v in grads.items()}
        rt.clip_grads(grads, rt.global_norm(grads), 2.0)  # under the threshold: untouched
        for k in grads:
            torch.testing.assert_close(grads[k], before[k], rtol=0, atol=0)


class CommandLineTest(TmpDirCase):
    def test_train_writes_metrics_and_weights(self):
        rt.write_safetensors(self.path("init.safetensors"), gpt2_init(TINY, 9), TINY)
        rng = np.random.default_rng(10)
        pattern = rng.integers(0, 32, 40)  # a repeated pattern: learnable, so the loss must fall
        write_llmc(self.path("tok.bin"), np.tile(pattern, 30))
        args = ["--init", self.path("init.safetensors"), "--data", self.path("tok.bin"), "--steps", "8",
                "--micro-batch", "2", "--seq", "16", "--accum", "2", "--world", "2", "--lr", "1e-2",
                "--beta1", "0.9", "--beta2", "0.95", "--eps", "1e-8", "--weight-decay", "0.1", "--clip", "1.0",
                "--double", "--metrics", self.path("m.jsonl"), "--out", self.path("out.safetensors")]
        out = subprocess.run([sys.executable, rt.__file__] + args, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        records = read_metrics(self.path("m.jsonl"))
        self.assertEqual([r["step"] for r in records], list(range(8)))
        self.assertEqual(set(records[0]), {"step", "loss", "grad_norm", "lr"})
        self.assertTrue(all(r["lr"] == 1e-2 for r in records))
        self.assertAlmostEqual(records[0]["loss"], math.log(32), delta=0.05)
        self.assertLess(records[-1]["loss"], records[0]["loss"] - 0.3)
        cfg, final = rt.load_gpt2(self.path("out.safetensors"))
        self.assertEqual(cfg, TINY)
        init = gpt2_init(TINY, 9)
        moved = max(np.abs(final[n] - init[n]).max() for n in final)
        self.assertGreater(moved, 1e-2)
        self.assertLessEqual(moved, 8 * 1e-2 * 1.01 + 1e-3)  # Adam moves each entry at most ~lr per step
        # The same run split differently (W=1, B=8, G=1, chunks 4) gives the same numbers.
        args2 = list(args)
        for flag, value in [("--micro-batch", "8"), ("--accum", "1"), ("--world", "1")]:
            args2[args2.index(flag) + 1] = value
        args2[args2.index("--metrics") + 1] = self.path("m2.jsonl")
        args2 += ["--chunks", "4"]
        self.assertEqual(rt.main(args2), 0)
        for a, b in zip(records, read_metrics(self.path("m2.jsonl"))):
            self.assertAlmostEqual(a["loss"], b["loss"], delta=1e-12)
            self.assertAlmostEqual(a["grad_norm"], b["grad_norm"], delta=1e-10)

    def test_bad_input_exits_2(self):
        rt.write_safetensors(self.path("init.safetensors"), gpt2_init(TINY, 9), TINY)
        write_llmc(self.path("tok.bin"), [1, 2, 40, 3] * 10)
        out = subprocess.run([sys.executable, rt.__file__, "--init", self.path("init.safetensors"), "--data",
                              self.path("tok.bin"), "--steps", "1", "--micro-batch", "1", "--seq", "4"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2)
        self.assertIn("tok.bin", out.stderr)
        self.assertIn(">= the vocabulary size 32", out.stderr)


class RegistrationTest(unittest.TestCase):
    @staticmethod
    def registered(script):
        """The CASE:RANKS entries CMakeLists.txt's zerodp_ref_cases call for `script` lists."""
        import re
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "CMakeLists.txt")) as f:
            text = f.read()
        call = re.search(r"zerodp_ref_cases\(\w+ " + re.escape(script) + r" \d+([^)]*)\)", text)
        return dict(re.findall(r"(\w+):(\d+)", call.group(1)))

    def test_every_compare_case_is_a_ctest_entry(self):
        import compare  # (imported here: it is not needed by the checks above)
        registered = self.registered("compare.py")
        self.assertEqual(sorted(registered), sorted(list(compare.TRAIN_CASES) + compare.BAD_CASES))
        for name, spec in compare.TRAIN_CASES.items():  # the rank count registered is the case's W
            self.assertEqual(registered[name], str(spec["world"]), name)

    def test_every_muon_case_is_a_ctest_entry(self):
        import compare_muon
        registered = self.registered("compare_muon.py")
        self.assertEqual(registered, {name: str(spec["world"]) for name, spec in compare_muon.CASES.items()})


if __name__ == "__main__":
    unittest.main()
