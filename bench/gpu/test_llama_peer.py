#!/usr/bin/env python3
"""Checks of the Llama peer, torch_llama_cuda.py, on the CPU (python3 bench/gpu/test_llama_peer.py [-v]).

  MatchesZerodp  tiny Llamas that `zerodp init --arch llama` writes (grouped-query attention untied,
                 tied with attention biases, Qwen 2's q/k/v biases, BF16 and F16 tensors in the file,
                 llama3 RoPE scaling written into config.json), trained for two steps in fp32 by zerodp
                 and by the peer with every Python found that imports torch (Debian's 1.13: the
                 explicit softmax with repeated key/value heads; a torch 2.x: scaled_dot_product_attention
                 with enable_gqa): both steps' losses agree; then the other attention paths, the result
                 JSON against torch_gpt2_cuda.py's keys and FLOPs counted by hand, and bf16 autocast.
  Compile        --compile, where a torch has torch.compile that works on this CPU.
  Refusals       --seq past the context, token ids not below vocab_size, damaged safetensors
                 headers, configs the peer does not compute, --device cuda without a GPU: each exits
                 non-zero with "torch_llama_cuda.py: error: ".

Finding things as test_bench_gpu.py does (its ZERODP and TORCH_PYTHONS, imported): zerodp at $ZERODP,
else build/zerodp; Pythons with torch: $PY_TORCH, this one, /usr/bin/python3, runs/peers-venv/bin/python.
What is missing is skipped with the reason. Only the standard library.
"""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PEER = os.path.join(HERE, "torch_llama_cuda.py")
# test_bench_gpu puts this checkout's tests/pylib on PYTHONPATH for every script started here.
from test_bench_gpu import TORCH_PYTHONS, ZERODP  # noqa: E402  (this script's folder)

ERROR = "torch_llama_cuda.py: error: "
# The tiny model: 4 query heads sharing 2 key/value heads of 16, C64, I96, V256 (byte tokens), N64.
TINY = {"layers": 2, "heads": 4, "kv-heads": 2, "embd": 64, "vocab": 256, "ctx": 64, "intermediate": 96,
        "seed": 1337}
B, T = 2, 32
# Both sides' optimizer, given explicitly (the benchmark's settings: weight decay and clipping both act).
OPT = ["--lr", "1e-3", "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8", "--weight-decay", "0.1", "--clip", "1.0"]
# flops.llama_step_flops(2, 64, 64, 32, 96, 256, 2, 32), by hand, n = B·T = 64, q = 4·16, kv = 2·16:
#   per block  n·(2·C·(q + 2kv) + 2·q·C + 6·C·I) = 64·(16384 + 8192 + 36864) = 3,932,160
#              attention 2·B·q·T·(T+1) = 2·2·64·32·33 = 270,336
#   2 blocks   8,404,992;  head 2·n·C·V = 2,097,152;  forward 10,502,144;  step (×3) 31,506,432
STEP_FLOPS_TINY = 31_506_432
# Step 0: the same weights, batch and fp32 function on both sides; only the order of float sums
# differs (measured: equal to the last bit, or 1e-7 relative with BF16 and F16 files).
FIRST_LOSS_RTOL = 1e-4
# Step 1 follows one AdamW update, which for these gradients is close to lr·sign(g) per weight: a
# gradient near zero can round to either sign on the two sides, so it is allowed to drift more than
# step 0. Measured: 1e-7 relative at most, every variant, both torches; the bound leaves 100x.
SECOND_LOSS_RTOL = 1e-5
# Llama 3's own rope_scaling, with an original context (8) shorter than T, so that scaled and
# interpolated frequencies both occur.
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8}


def corpus():
    for path in (os.path.join(ROOT, "data", "tinyshakespeare.txt"),
                 os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")):
        if os.path.isfile(path):
            return path
    return None


def edit_config(model_dir, **fields):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg.update(fields)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


def zerodp_losses(model_dir, tokens, metrics, steps=2):
    subprocess.run([ZERODP, "train", "--init", model_dir, "--data", tokens, "--steps", str(steps), "--micro-batch",
                    str(B), "--seq", str(T), "--zero-stage", "0", "--device", "cpu", "--dtype", "fp32",
                    "--log-every", "0", "--metrics", metrics] + OPT, check=True, capture_output=True)
    with open(metrics) as f:
        return [json.loads(l)["loss"] for l in f if '"event":"step"' in l.replace(" ", "")]


def run_peer(py, model_dir, tokens, *extra, steps=2, seq=T, timeout=300):
    cmd = [py, PEER, "--device", "cpu", "--init", model_dir, "--data", tokens, "--micro-batch", str(B),
           "--seq", str(seq), "--steps", str(steps), "--warmup", "1", *OPT, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout), cmd


class Inputs:
    """A temporary folder with the token file and the model directories, made once for a class."""

    @classmethod
    def make_inputs(cls):
        if not TORCH_PYTHONS:
            raise unittest.SkipTest("no Python here imports torch and numpy (tried $PY_TORCH, this one, "
                                    "/usr/bin/python3, runs/peers-venv/bin/python)")
        if not ZERODP:
            raise unittest.SkipTest("no zerodp binary to write the models and tokens ($ZERODP, build/zerodp)")
        text = corpus()
        if not text:
            raise unittest.SkipTest("no data/tinyshakespeare.txt (here or in ../shared/data) to tokenize")
        cls.tmp = tempfile.mkdtemp(prefix="bench-gpu-llama-")
        cls.tokens = os.path.join(cls.tmp, "tokens.bin")
        subprocess.run([ZERODP, "tokenize", "--text", text, "--out", cls.tokens], check=True, capture_output=True)

    @classmethod
    def init(cls, name, *flags, sizes=None, **config):
        """A model directory by `zerodp init --arch llama`: TINY with sizes over it, then flags; config:
        config.json fields changed afterwards."""
        d = os.path.join(cls.tmp, name)
        dims = [f"--{k}={v}" for k, v in dict(TINY, **(sizes or {})).items()]
        subprocess.run([ZERODP, "init", "--arch", "llama", "--out", d, *dims, *flags], check=True, capture_output=True)
        if config:
            edit_config(d, **config)
        return d

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def peer_json(self, py, model_dir, *extra, **kw):
        r, cmd = run_peer(py, model_dir, self.tokens, *extra, **kw)
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)}\n{r.stderr[-3000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def assert_close(self, got, want, rtol, what):
        self.assertLessEqual(abs(got - want), rtol * abs(want), f"{what}: {got!r} against zerodp's {want!r}")


class MatchesZerodp(Inputs, unittest.TestCase):
    VARIANTS = {  # name: (zerodp init flags, config.json fields changed afterwards)
        "gqa_untied": ([], {}),
        "tied_attention_bias": (["--tie", "--attention-bias"], {}),
        "qwen2_tied": (["--qwen2", "--tie"], {}),
        "bf16_file": (["--dtype", "bf16"], {}),
        "fp16_file": (["--dtype", "fp16"], {}),
        "llama3_rope": ([], {"rope_theta": 500000.0, "rope_scaling": LLAMA3_SCALING}),
    }

    @classmethod
    def setUpClass(cls):
        cls.make_inputs()
        cls.models, cls.want = {}, {}
        for name, (flags, config) in cls.VARIANTS.items():
            cls.models[name] = cls.init(name, *flags, **config)
            cls.want[name] = zerodp_losses(cls.models[name], cls.tokens, os.path.join(cls.tmp, name + ".jsonl"))

    def check_losses(self, j, name):
        self.assert_close(j["loss"][0], self.want[name][0], FIRST_LOSS_RTOL, f"{name} step 0")
        self.assert_close(j["loss"][1], self.want[name][1], SECOND_LOSS_RTOL, f"{name} step 1")

    def test_losses_every_variant_every_torch(self):
        for py, version, sdpa, _ in TORCH_PYTHONS:
            for name in self.VARIANTS:
                with self.subTest(python=py, torch=version, model=name):
                    j = self.peer_json(py, self.models[name], "--dtype", "fp32")
                    self.assertEqual(j["attention"], "sdpa" if sdpa else "math")
                    self.check_losses(j, name)

    def test_every_attention_path(self):
        """Each way of sharing key/value heads a torch has: enable_gqa, repeated heads into
        scaled_dot_product_attention (a torch 2.0-2.4), the explicit softmax."""
        for py, version, sdpa, _ in TORCH_PYTHONS:
            paths = [("math", "repeat", "repeat_kv")]
            if sdpa:
                paths += [("sdpa", "repeat", "repeat_kv"), ("sdpa", "auto", None)]
            for attention, gqa, want_gqa in paths:
                with self.subTest(python=py, torch=version, attention=attention, gqa=gqa):
                    j = self.peer_json(py, self.models["gqa_untied"], "--dtype", "fp32", "--attention", attention,
                                       "--gqa", gqa)
                    self.assertEqual(j["attention"], attention)
                    if want_gqa:
                        self.assertEqual(j["gqa"], want_gqa)
                    self.assertIn(j["gqa"], ("enable_gqa", "repeat_kv"))
                    self.check_losses(j, "gqa_untied")

    def test_result_json(self):
        py = TORCH_PYTHONS[0][0]
        j = self.peer_json(py, self.models["gqa_untied"], "--dtype", "fp32", steps=4)
        # torch_gpt2_cuda.py's keys (report.py reads either), with "arch" and "gqa" after "impl".
        gpt2_keys = ["impl", "mode", "device", "dtype", "world", "micro_batch", "seq", "model", "attention", "adamw",
                     "warmup", "hyper", "ms", "loss", "median_ms", "tokens_per_step", "tokens_per_s", "step_flops",
                     "flops_per_s", "peak_flops", "mfu", "peak_note", "max_memory_allocated", "max_memory_reserved",
                     "torch", "cuda", "gpu"]
        self.assertEqual(list(j), gpt2_keys[:1] + ["arch", "gqa"] + gpt2_keys[1:])
        self.assertEqual(j["arch"], "llama")
        m = j["model"]
        self.assertEqual({k: m[k] for k in ("L", "C", "V", "N", "heads", "kv_heads", "head_dim", "I", "tie")},
                         dict(L=2, C=64, V=256, N=64, heads=4, kv_heads=2, head_dim=16, I=96, tie=False))
        # embed_tokens, lm_head 2·V·C; per block 2 norms, q, k, v, o, gate, up, down; the final norm.
        self.assertEqual(m["params"], 2 * 256 * 64 + 2 * (2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 64 * 96) + 64)
        self.assertEqual(j["step_flops"], STEP_FLOPS_TINY)
        self.assertEqual(j["median_ms"], sorted(j["ms"][1:])[1])
        self.assertAlmostEqual(j["tokens_per_s"], B * T / (j["median_ms"] / 1e3))
        self.assertIsNone(j["mfu"])  # no GPU, no --peak-tflops
        self.assertLess(j["loss"][-1], j["loss"][0])  # it trains

    def test_bf16_autocast(self):
        """The benchmark's mode, on the CPU: it runs, and stays near the fp32 losses."""
        for py, version, _, _ in TORCH_PYTHONS:
            with self.subTest(python=py, torch=version):
                j = self.peer_json(py, self.models["bf16_file"], "--dtype", "bf16")
                self.assertEqual(j["dtype"], "bf16")
                for got, want in zip(j["loss"], self.want["bf16_file"]):
                    self.assertAlmostEqual(got, want, delta=0.02)


class Compile(Inputs, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.make_inputs()
        cls.model = cls.init("compile")
        cls.want = zerodp_losses(cls.model, cls.tokens, os.path.join(cls.tmp, "compile.jsonl"))

    def test_compile(self):
        with_compile = [p for p in TORCH_PYTHONS if p[3]]
        if not with_compile:
            r, _ = run_peer(TORCH_PYTHONS[0][0], self.model, self.tokens, "--compile")
            self.assertEqual(r.returncode, 1)
            self.assertIn(ERROR + "--compile: torch", r.stderr)
            self.skipTest(f"no torch here has torch.compile (found: {[p[1] for p in TORCH_PYTHONS]})")
        py = with_compile[0][0]
        # Whether torch.compile works on this CPU at all (inductor needs a C++ compiler): if not, that is
        # this machine's limit, not the peer's.
        probe = "import torch; print(torch.compile(lambda x: x * 2 + 1)(torch.ones(3)).sum().item())"
        try:
            p = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            self.skipTest("torch.compile of a one-line function took over 120 s on this CPU")
        if p.returncode != 0:
            self.skipTest(f"torch.compile does not work on this CPU: {p.stderr.strip().splitlines()[-1:]}")
        j = self.peer_json(py, self.model, "--dtype", "fp32", "--compile", timeout=240)
        self.assertEqual(j["mode"], "compile")
        # Compiled kernels fuse and reorder the float sums: the step-1 bound, not the step-0 one.
        for step in (0, 1):
            self.assert_close(j["loss"][step], self.want[step], SECOND_LOSS_RTOL, f"compiled step {step}")


class Refusals(Inputs, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.make_inputs()
        cls.model = cls.init("refuse")
        cls.py = TORCH_PYTHONS[0][0]

    def refused(self, model_dir, *extra, seq=T, tokens=None, expect):
        r, cmd = run_peer(self.py, model_dir, tokens or self.tokens, *extra, seq=seq)
        self.assertNotEqual(r.returncode, 0, " ".join(cmd))
        self.assertIn(ERROR, r.stderr)
        self.assertIn(expect, r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def copy_model(self, name):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.model, d)
        return d

    def test_seq_past_context(self):
        self.refused(self.model, seq=128, expect="--seq 128 exceeds the model's context (max_position_embeddings) 64")

    def test_token_past_vocab(self):
        small = self.init("vocab64", sizes={"vocab": 64})  # byte tokens of English text reach past 64
        self.refused(small, expect="is not below the model's vocab_size 64")

    def test_uint32_token_file(self):
        """A token file of uint32 ids (version 2, what zerodp writes past 65536 ids) trains on the same ids."""
        with open(self.tokens, "rb") as f:
            blob = f.read()
        magic, version, count = struct.unpack("<3i", blob[:12])
        self.assertEqual((magic, version), (20240520, 1))
        ids = struct.unpack(f"<{count}H", blob[1024:1024 + 2 * count])
        wide = os.path.join(self.tmp, "tokens32.bin")
        with open(wide, "wb") as f:
            f.write(struct.pack("<3i", magic, 2, count).ljust(1024, b"\0") + struct.pack(f"<{count}I", *ids))
        losses = []
        for tokens in (self.tokens, wide):
            r, cmd = run_peer(self.py, self.model, tokens, "--dtype", "fp32")
            self.assertEqual(r.returncode, 0, " ".join(cmd) + "\n" + r.stderr)
            losses.append(json.loads(r.stdout.strip().splitlines()[-1])["loss"])
        self.assertEqual(losses[0], losses[1])
        bad = os.path.join(self.tmp, "tokens-v3.bin")
        with open(bad, "wb") as f:
            f.write(struct.pack("<3i", magic, 3, count).ljust(1024, b"\0") + blob[1024:])
        self.refused(self.model, tokens=bad, expect="token file version 3")

    def test_damaged_header(self):
        def first(header):
            return next(k for k in header if k != "__metadata__")

        def second(header):
            return [k for k in header if k != "__metadata__"][1]

        def set_dtype(h):
            h[first(h)]["dtype"] = "I32"

        def longer(h):  # the first tensor 4 bytes longer than its shape says
            h[first(h)]["data_offsets"][1] += 4

        def overlap(h):  # the second tensor 4 bytes earlier: it overlaps the first, a gap after it
            h[second(h)]["data_offsets"] = [o - 4 for o in h[second(h)]["data_offsets"]]

        damages = {
            "length": (lambda blob: struct.pack("<Q", 2 ** 40) + blob[8:], "the header claims"),
            "json": (lambda blob: blob[:8] + b"x" + blob[9:], "the header is not valid JSON"),
            "truncated": (lambda blob: blob[:-100], "are not within"),  # the last tensor's data cut off
            "dtype": (lambda blob: rewrite_header(blob, set_dtype), "dtype 'I32'"),
            "size": (lambda blob: rewrite_header(blob, longer), "bytes of data for"),
            "overlap": (lambda blob: rewrite_header(blob, overlap), "gap or overlap"),
        }
        for name, (damage, expect) in damages.items():
            with self.subTest(damage=name):
                d = self.copy_model("damaged-" + name)
                path = os.path.join(d, "model.safetensors")
                with open(path, "rb") as f:
                    blob = f.read()
                with open(path, "wb") as f:
                    f.write(damage(blob))
                self.refused(d, expect=expect)

    def test_unsupported_config(self):
        cases = {
            "yarn": ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_type 'yarn'"),
            "qwen3": ({"model_type": "qwen3"}, "q/k norms"),
            "window": ({"model_type": "mistral", "sliding_window": 8}, "sliding window"),
            "gelu": ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
            "mlp_bias": ({"mlp_bias": True}, "mlp_bias"),
        }
        for name, (fields, expect) in cases.items():
            with self.subTest(config=name):
                d = self.copy_model("config-" + name)
                edit_config(d, **fields)
                self.refused(d, expect=expect)
        # A tied model's weights (no lm_head.weight) under a config that says untied: zerodp refuses it too.
        untied = self.init("untied-without-head", "--tie", tie_word_embeddings=False)
        self.refused(untied, expect="tie_word_embeddings is false but the weights have no lm_head.weight")

    def test_cuda_without_gpu(self):
        if subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0:
            self.skipTest("a GPU is here: --device cuda may well work")
        r = subprocess.run([self.py, PEER, "--device", "cuda", "--init", self.model, "--data", self.tokens,
                            "--micro-batch", "2", "--seq", "32", "--steps", "2", "--warmup", "1"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn(ERROR + "--device cuda: torch", r.stderr)
        self.assertIn("sees no usable GPU", r.stderr)


def rewrite_header(blob, change):
    """A safetensors file's bytes with change(header dict) applied to its header, the length rewritten."""
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    change(header)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + blob[8 + n:]


if __name__ == "__main__":
    unittest.main()
