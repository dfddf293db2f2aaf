#!/usr/bin/env python3
"""Checks of bench/gpu on a machine without a GPU (python3 bench/gpu/test_bench_gpu.py [-v]).

  Report         report.py on an OUT directory built here: zerodp metrics in the real format (written
                 by the CPU build, `zerodp train --device cpu`, when one is found; else lines such a
                 run wrote, kept below), their step times set to known values, a PyTorch peer JSON,
                 failed, timed-out, skipped and result-less runs; ms/step, tokens/s and MFU against
                 figures worked out by hand, the memory columns, the reasons listed for failures.
  GpuPeak        the dense bf16 peak taken for each GPU name.
  PeerSmoke      torch_gpt2_cuda.py --device cpu on a tiny model with every Python found that imports
                 torch (Debian's 1.13 takes the explicit-softmax attention, a torch 2.x
                 scaled_dot_product_attention; --compile where torch has it), and its first loss
                 against zerodp's on the same weights and batch.
  RunScript      run.sh end to end with DEVICE=cpu on a tiny model (zerodp W = 1 and 2, the peer),
                 then report.py on what it wrote; and with DEVICE=cuda, where without a GPU every run
                 must be listed as failed with zerodp's own message.

Finding things: zerodp at $ZERODP, else build/zerodp (ZERODP=none: as if there were none); Pythons
with torch: $PY_TORCH, this one, /usr/bin/python3, runs/peers-venv/bin/python (what
bench/peers/run.sh makes). What is missing is
skipped with the reason. Only the standard library.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
# report.py, torch_gpt2_cuda.py and run.sh import zdptest: this checkout's tests/pylib goes on PYTHONPATH
# for every script started here (whichever Python runs it), as run.sh gives it. This process has it from
# pytest.ini under pytest, and from PYTHONPATH under ctest (bench/gpu/CMakeLists.txt).
PYLIB = os.path.join(ROOT, "tests", "pylib")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [PYLIB, os.environ.get("PYTHONPATH")]))
import report  # noqa: E402  (bench/gpu/report.py, this script's folder)
from zdptest import gpu_peak  # noqa: E402

GIB = 1024 ** 3
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_base_warn_component_unused="0")

# The tiny model every check here trains: GPT-2 L2 H2 C64 V256 N64, B = 2, T = 64.
TINY = dict(layers=2, heads=2, embd=64, vocab=256, ctx=64)
B, T = 2, 64
# Step FLOPs of one rank's micro-batch (tests/pylib/zdptest/flops.py's causal count), by hand, n = B·T = 128:
#   per block  dense 24·n·C² = 24·128·4096 = 12,582,912; attention 2·B·C·T·(T+1) = 2·2·64·64·65 = 1,064,960
#   2 blocks   2·13,647,872 = 27,295,744;  head 2·n·C·V = 2·128·64·256 = 4,194,304
#   forward    31,490,048;  step (×3) 94,470,144
STEP_FLOPS_TINY = 94_470_144

# What `zerodp train --device cpu --dtype bf16` wrote (W = 1 stage 1; W = 2 stage 3), for when no
# zerodp binary is at hand.
FIXTURE_W1 = """\
{"comm_wait_ms":0.0,"event":"step","grad_norm":2.881641346467393,"loss":5.521601676940918,"loss_scale":1.0,"lr":0.001,"ms":160.608598,"skipped":false,"skipped_steps":0,"step":0,"tokens":128}
{"comm_wait_ms":0.0,"event":"step","grad_norm":2.504463597961285,"loss":5.369576454162598,"loss_scale":1.0,"lr":0.001,"ms":2.38258,"skipped":false,"skipped_steps":0,"step":1,"tokens":128}
{"comm_wait_ms":0.0,"event":"step","grad_norm":2.0438157143950035,"loss":5.2107319831848145,"loss_scale":1.0,"lr":0.001,"ms":1.049305,"skipped":false,"skipped_steps":0,"step":2,"tokens":128}
{"comm_wait_ms":0.0,"event":"step","grad_norm":1.868569281780148,"loss":5.095183849334717,"loss_scale":1.0,"lr":0.001,"ms":18.485057,"skipped":false,"skipped_steps":0,"step":3,"tokens":128}
{"event":"memory","host_bytes":{"act":0,"comm":0,"gathered":0,"grad":0,"master":0,"optim":0,"param":0,"total":0},"live_bytes":{"act":1498624,"comm":0,"gathered":0,"grad":482304,"master":482304,"optim":964608,"param":241152,"total":3668992},"nvme_bytes":{"act":0,"comm":0,"gathered":0,"grad":0,"master":0,"optim":0,"param":0,"total":0},"peak_bytes":{"act":1698560,"comm":0,"gathered":0,"grad":482304,"master":482304,"optim":964608,"param":241152,"total":3868928},"rank":0}
{"bytes_sent":{"all_gather":0,"all_reduce":0,"broadcast":0,"reduce_scatter":0},"bytes_sent_inter_group":{"all_gather":0,"all_reduce":0,"broadcast":0,"reduce_scatter":0},"event":"traffic","rank":0}
"""
FIXTURE_W2 = """\
{"comm_wait_ms":0.8751670000000001,"event":"step","grad_norm":2.608650700900579,"loss":5.5258355140686035,"loss_scale":1.0,"lr":0.001,"ms":14.145729,"skipped":false,"skipped_steps":0,"step":0,"tokens":256}
{"comm_wait_ms":0.23327499999999998,"event":"step","grad_norm":2.5959922566349825,"loss":5.330118179321289,"loss_scale":1.0,"lr":0.001,"ms":1.90987,"skipped":false,"skipped_steps":0,"step":1,"tokens":256}
{"comm_wait_ms":0.25639,"event":"step","grad_norm":2.111166299410899,"loss":5.21132230758667,"loss_scale":1.0,"lr":0.001,"ms":1.602415,"skipped":false,"skipped_steps":0,"step":2,"tokens":256}
{"comm_wait_ms":0.215971,"event":"step","grad_norm":1.9470274080288024,"loss":5.088976860046387,"loss_scale":1.0,"lr":0.001,"ms":1.500163,"skipped":false,"skipped_steps":0,"step":3,"tokens":256}
{"event":"memory","host_bytes":{"act":0,"comm":0,"gathered":0,"grad":0,"master":0,"optim":0,"param":0,"total":0},"live_bytes":{"act":1498624,"comm":0,"gathered":0,"grad":241152,"master":241152,"optim":482304,"param":120576,"total":2583808},"nvme_bytes":{"act":0,"comm":0,"gathered":0,"grad":0,"master":0,"optim":0,"param":0,"total":0},"peak_bytes":{"act":1598592,"comm":561664,"gathered":482304,"grad":241152,"master":241152,"optim":482304,"param":120576,"total":3316032},"rank":0}
{"event":"memory","host_bytes":{"act":0,"comm":0,"gathered":0,"grad":0,"master":0,"optim":0,"param":0,"total":0},"live_bytes":{"act":1498624,"comm":0,"gathered":0,"grad":241152,"master":241152,"optim":482304,"param":120576,"total":2583808},"nvme_bytes":{"act":0,"comm":0,"gathered":0,"grad":0,"master":0,"optim":0,"param":0,"total":0},"peak_bytes":{"act":1598592,"comm":561664,"gathered":482304,"grad":241152,"master":241152,"optim":482304,"param":120576,"total":3316032},"rank":1}
{"bytes_sent":{"all_gather":964608,"all_reduce":32,"broadcast":0,"reduce_scatter":482304},"bytes_sent_inter_group":{"all_gather":0,"all_reduce":0,"broadcast":0,"reduce_scatter":0},"event":"traffic","rank":0}
{"bytes_sent":{"all_gather":964608,"all_reduce":32,"broadcast":0,"reduce_scatter":482304},"bytes_sent_inter_group":{"all_gather":0,"all_reduce":0,"broadcast":0,"reduce_scatter":0},"event":"traffic","rank":1}
"""
# What `mpirun -n 2 zerodp train --device cuda` printed on a machine without a GPU.
FAILED_W2_LOG = """\
[rank 1] error: --device cuda: no GPU is visible to this process (cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version); train with --device cpu
[rank 0] error: --device cuda: no GPU is visible to this process (cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version); train with --device cpu
[vm:00950] [[28488,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ../../../orte/util/show_help.c at line 501
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
with errorcode 2.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.
You may or may not see output from other processes, depending on
exactly when Open MPI kills them.
--------------------------------------------------------------------------
"""


def find_zerodp():
    if os.environ.get("ZERODP") == "none":  # to check the fixtures' path on a machine with a build
        return None
    for path in (os.environ.get("ZERODP"), os.path.join(ROOT, "build", "zerodp")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def torch_pythons():
    """[(python, torch version, has scaled_dot_product_attention, has torch.compile)], each distinct."""
    found, seen = [], set()
    for py in (os.environ.get("PY_TORCH"), sys.executable, "/usr/bin/python3",
               os.path.join(ROOT, "runs", "peers-venv", "bin", "python")):
        if not py or not os.access(py, os.X_OK):
            continue
        real = os.path.realpath(py)
        code = ("import torch, numpy, json, torch.nn.functional as F; print(json.dumps([torch.__version__, "
                "hasattr(F, 'scaled_dot_product_attention'), hasattr(torch, 'compile')]))")
        probe = subprocess.run([py, "-c", code], capture_output=True, text=True)
        if probe.returncode != 0:
            continue
        version, sdpa, comp = json.loads(probe.stdout.strip().splitlines()[-1])
        key = (real, version)
        if key not in seen:
            seen.add(key)
            found.append((py, version, sdpa, comp))
    return found


ZERODP = find_zerodp()
TORCH_PYTHONS = torch_pythons()


def make_tiny_inputs(d, zerodp):
    """init.safetensors and tokens.bin in d, by zerodp."""
    init, tokens = os.path.join(d, "init.safetensors"), os.path.join(d, "tokens.bin")
    subprocess.run([zerodp, "init", "--out", init, "--seed", "1337"] +
                   [f"--{k}={v}" for k, v in TINY.items()], check=True, capture_output=True)
    subprocess.run([zerodp, "tokenize", "--text", os.path.join(ROOT, "data", "tinyshakespeare.txt"), "--out", tokens],
                   check=True, capture_output=True)
    return init, tokens


def zerodp_train(zerodp, init, tokens, metrics, world, stage, dtype="bf16", steps=4):
    cmd = [zerodp, "train", "--init", init, "--data", tokens, "--steps", str(steps), "--micro-batch", str(B),
           "--seq", str(T), "--zero-stage", str(stage), "--device", "cpu", "--dtype", dtype, "--log-every", "0",
           "--metrics", metrics]
    if world > 1:
        cmd = ["mpirun", "-n", str(world), "--oversubscribe"] + cmd
    subprocess.run(cmd, check=True, capture_output=True, env=MPI_ENV)


def set_step_ms(lines, ms):
    """The metrics lines with the step records' "ms" replaced by ms, in order; everything else as is."""
    out, i = [], 0
    for line in lines.splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("event") == "step":
            rec["ms"] = ms[i]
            i += 1
        out.append(json.dumps(rec))
    assert i == len(ms), (i, ms)
    return "\n".join(out) + "\n"


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Report(unittest.TestCase):
    """report.py on a synthetic OUT directory."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bench-gpu-report-")
        out = cls.out = os.path.join(cls.tmp, "out")
        os.makedirs(out)
        cls.real_metrics = False
        w1, w2 = FIXTURE_W1, FIXTURE_W2
        if ZERODP:
            init, tokens = make_tiny_inputs(cls.tmp, ZERODP)
            m1, m2 = os.path.join(cls.tmp, "w1.jsonl"), os.path.join(cls.tmp, "w2.jsonl")
            zerodp_train(ZERODP, init, tokens, m1, 1, 1)
            w1 = read(m1)
            if shutil.which("mpirun"):
                zerodp_train(ZERODP, init, tokens, m2, 2, 3)
                w2 = read(m2)
            cls.real_metrics = True
        # W = 1 stage 1: first step left out (warm-up 1), median of 2, 2, 3 = 2 ms.
        write(os.path.join(out, "zerodp-w1-s1.jsonl"), set_step_ms(w1, [100.0, 2.0, 3.0, 2.0]))
        # W = 2 stage 3: median of 4, 5, 4 = 4 ms; rank 1's peak made 1 MiB larger than rank 0's.
        recs = [json.loads(l) for l in set_step_ms(w2, [50.0, 4.0, 5.0, 4.0]).splitlines()]
        for r in recs:
            if r.get("event") == "memory" and r["rank"] == 1:
                r["peak_bytes"]["total"] += 2 ** 20
        cls.w2_peaks = [r["peak_bytes"]["total"] for r in recs if r.get("event") == "memory"]
        write(os.path.join(out, "zerodp-w2-s3.jsonl"), "\n".join(json.dumps(r) for r in recs) + "\n")
        # nvidia-smi samples (MiB), the last line cut short as when the sampler is stopped.
        write(os.path.join(out, "zerodp-w1-s1.smi"), "1000\n81000\n500\n8")
        # The peer: median of 1, 1, 1 after its warm-up step.
        peer = {"impl": "pytorch", "mode": "eager", "world": 1, "micro_batch": B, "seq": T,
                "model": {"L": 2, "H": 2, "C": 64, "V": 256, "N": 64, "params": 120576},
                "ms": [500.0, 1.0, 1.0, 1.0], "loss": [5.52, 5.37, 5.21, 5.0942],
                "max_memory_allocated": 3 * GIB, "max_memory_reserved": 4 * GIB, "torch": "2.9.0"}
        write(os.path.join(out, "torch-eager.json"), "some warning printed on stdout\n" + json.dumps(peer) + "\n")
        # Failures: zerodp's own refusal at W = 1 and under mpirun, a timeout, an exit 0 without
        # metrics (only the .partial), a peer that was not run.
        write(os.path.join(out, "zerodp-w1-s0.log"), FAILED_W2_LOG.splitlines()[1] + "\n")
        write(os.path.join(out, "zerodp-w2-s0.log"), FAILED_W2_LOG)
        write(os.path.join(out, "zerodp-w2-s1.log"), "[info] step 10 loss 7.1\n")
        write(os.path.join(out, "zerodp-w1-s2.log"), "")
        write(os.path.join(out, "zerodp-w1-s2.jsonl.partial"), "")
        write(os.path.join(out, "torch-compile.log"),
              "not run: could not make the venv runs/gpu-venv with torch>=2.4 from PyPI (see venv.log): ERROR: x\n")
        write(os.path.join(out, "status.txt"), "".join(f"{t}\t{rc}\t1.0\n" for t, rc in [
            ("zerodp-w1-s0", "2"), ("zerodp-w1-s1", "0"), ("zerodp-w1-s2", "0"), ("zerodp-w2-s0", "2"),
            ("zerodp-w2-s1", "124"), ("zerodp-w2-s3", "0"), ("torch-eager", "0"), ("torch-compile", "skipped")]))
        write(os.path.join(out, "env.txt"), "\n".join([
            "date=2026-11-25 06:00 UTC", "gpu=NVIDIA H200", "driver=570.86.15", "gpu_memory=143771 MiB",
            "gpus=1", "commit=abc1234", "zerodp=zerodp 0.1.0 (abc1234)", "device=cuda", "layers=2", "heads=2",
            "embd=64", "vocab=256", "seq=64", "micro_batch=2", "steps=4", "warmup=1", "run_timeout=900",
            "optimizer=--lr 1e-3 --clip 1.0", "peak_tflops=", "torch=2.9.0 CUDA 12.8"]) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def rows(self, peak_tflops=None):
        _, rows, failed, peak, note, warmup = report.collect(self.out, peak_tflops=peak_tflops)
        return {r["tag"]: r for r in rows}, dict(failed), peak, note, warmup

    def test_timing_and_mfu_by_hand(self):
        rows, _, peak, note, warmup = self.rows()
        self.assertEqual(warmup, 1)
        self.assertEqual(peak, 989.4e12, note)
        w1, w2, pt = rows["zerodp-w1-s1"], rows["zerodp-w2-s3"], rows["torch-eager"]
        self.assertEqual((w1["median_ms"], w2["median_ms"], pt["median_ms"]), (2.0, 4.0, 1.0))
        # tokens/s: 128 / 2 ms, both ranks' 256 / 4 ms, 128 / 1 ms.
        self.assertAlmostEqual(w1["tokens_per_s"], 64000.0)
        self.assertAlmostEqual(w2["tokens_per_s"], 64000.0)
        self.assertAlmostEqual(pt["tokens_per_s"], 128000.0)
        # FLOPs: one micro-batch's at W = 1, both ranks' at W = 2 against the one GPU's peak.
        self.assertEqual(w1["flops"], STEP_FLOPS_TINY)
        self.assertEqual(w2["flops"], 2 * STEP_FLOPS_TINY)
        self.assertAlmostEqual(w1["mfu"] / (94_470_144 / 0.002 / 989.4e12), 1.0, places=12)
        self.assertAlmostEqual(w2["mfu"] / (188_940_288 / 0.004 / 989.4e12), 1.0, places=12)
        self.assertAlmostEqual(pt["mfu"] / (94_470_144 / 0.001 / 989.4e12), 1.0, places=12)

    def test_memory_columns(self):
        rows, _, _, _, _ = self.rows()
        w1, w2, pt = rows["zerodp-w1-s1"], rows["zerodp-w2-s3"], rows["torch-eager"]
        self.assertEqual(w2["mem"], max(self.w2_peaks))
        self.assertEqual(w2["mem_ranks"], self.w2_peaks)
        self.assertEqual(w2["ranks"], 2)
        self.assertIsNone(w1["reserved"])
        self.assertEqual(w1["smi"], 81000 * 2 ** 20)
        self.assertIsNone(w2["smi"])
        self.assertEqual((pt["mem"], pt["reserved"]), (3 * GIB, 4 * GIB))

    def test_failures(self):
        _, failed, _, _, _ = self.rows()
        self.assertEqual(set(failed), {"zerodp-w1-s0", "zerodp-w1-s2", "zerodp-w2-s0", "zerodp-w2-s1", "torch-compile"})
        msg = "error: --device cuda: no GPU is visible to this process"
        self.assertTrue(failed["zerodp-w1-s0"].startswith("exit 2: [rank 0] " + msg), failed["zerodp-w1-s0"])
        # Under mpirun: a rank's own message, not Open MPI's lines around it.
        self.assertRegex(failed["zerodp-w2-s0"], r"^exit 2: \[rank [01]\] " + msg)
        self.assertEqual(failed["zerodp-w2-s1"], "timed out after 900 s; last: [info] step 10 loss 7.1")
        self.assertEqual(failed["zerodp-w1-s2"], "exit 0 but no metrics file (only the unfinished .partial)")
        self.assertTrue(failed["torch-compile"].startswith("not run: could not make the venv"))

    def test_markdown(self):
        text, _, _ = report.render(self.out, peak_tflops=0.1)
        lines = text.splitlines()
        self.assertTrue(lines[0].startswith("## "))
        self.assertIn("NVIDIA H200 (driver 570.86.15, 143771 MiB)", lines[2])
        self.assertIn("2026-11-25 06:00 UTC", lines[2])
        self.assertIn("commit abc1234", lines[2])
        table = [l for l in lines if l.startswith("| ")]
        self.assertEqual(len(table), 1 + 3)  # the header and three results
        cells = {tuple(c.strip() for c in l.strip("|").split("|"))[:3]: [c.strip() for c in l.strip("|").split("|")]
                 for l in table[1:]}
        # At 0.1 TFLOP/s: 47.235 GFLOP/s is 47.2%, the peer's 94.47 GFLOP/s 94.5%.
        w1 = cells[("zerodp", "1", "1")]
        self.assertEqual(w1[3:6], ["2.0", "64000", "47.2%"])
        self.assertEqual(w1[8], f"{81000 / 1024:.2f}")
        w2 = cells[("zerodp", "2", "3")]
        self.assertEqual(w2[3:6], ["4.0", "64000", "47.2%"])
        self.assertIn(" / ", w2[6])  # the ranks' peaks differ: each is listed
        pt = cells[("PyTorch eager", "1", "-")]
        self.assertEqual(pt[3:9], ["1.0", "128000", "94.5%", "3.00", "4.00", "n/a"])
        self.assertEqual(pt[9], "5.0942")
        self.assertIn("zerodp's fastest at W = 1 (ZeRO stage 1, 64000 tokens/s) runs at 0.50x PyTorch eager "
                      "(128000 tokens/s).", lines)
        self.assertIn("Failed or not run:", lines)
        self.assertTrue(any(l.startswith("- `zerodp-w2-s1`: timed out after 900 s") for l in lines))
        self.assertIn("MFU against the 0.1 TFLOP/s (given)", text)

    def test_cli_and_unknown_gpu(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), self.out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("MFU against the H200 SXM: 989.4 TFLOP/s dense bf16", r.stdout)
        # --check: zerodp runs failed here, so exit 1 naming them.
        r = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), self.out, "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("zerodp-w1-s0 zerodp-w1-s2 zerodp-w2-s0 zerodp-w2-s1", r.stderr)
        # An unknown GPU: MFU n/a, with the reason in the text.
        d = os.path.join(self.tmp, "unknown-gpu")
        shutil.copytree(self.out, d)
        env = read(os.path.join(d, "env.txt")).replace("gpu=NVIDIA H200", "gpu=NVIDIA GeForce RTX 4090")
        write(os.path.join(d, "env.txt"), env)
        text, rows, _ = report.render(d)
        self.assertTrue(all(r["mfu"] is None for r in rows))
        self.assertIn("unknown GPU 'NVIDIA GeForce RTX 4090'", text)
        self.assertIn("| n/a |", text)


    def test_llama_flops_by_hand(self):
        """arch=llama in env.txt (and "arch": "llama" in the peer's JSON): zdptest/flops.py's Llama count."""
        d = os.path.join(self.tmp, "llama")
        shutil.copytree(self.out, d)
        llama = {"arch": "llama", "layers": "2", "heads": "2", "kv_heads": "1", "head_dim": "32", "embd": "64",
                 "intermediate": "96", "vocab": "256", "seq": "64", "tie": "1"}
        env = [l for l in read(os.path.join(d, "env.txt")).splitlines() if l.split("=")[0] not in llama]
        write(os.path.join(d, "env.txt"), "\n".join(env + [f"{k}={v}" for k, v in llama.items()]) + "\n")
        peer = json.loads(read(os.path.join(d, "torch-eager.json")).splitlines()[-1])
        peer["arch"] = "llama"
        peer["model"] = {"L": 2, "C": 64, "V": 256, "heads": 2, "kv_heads": 1, "head_dim": 32, "I": 96}
        write(os.path.join(d, "torch-eager.json"), json.dumps(peer) + "\n")
        # n = B·T = 128, q = 64, kv = 32: per block 128·(2·64·(64 + 64) + 2·64·64 + 6·64·96) = 7,864,320 and
        # attention 2·2·64·64·65 = 1,064,960; two blocks 17,858,560; head 2·128·64·256 = 4,194,304;
        # forward 22,052,864; step 66,158,592.
        step = 66_158_592
        _, rows, _, _, _, _ = report.collect(d)
        rows = {r["tag"]: r for r in rows}
        self.assertEqual(rows["zerodp-w1-s1"]["flops"], step)
        self.assertEqual(rows["zerodp-w2-s3"]["flops"], 2 * step)
        self.assertEqual(rows["torch-eager"]["flops"], step)
        text, _, _ = report.render(d)
        self.assertIn("Llama L2 H2/1 C64 I96 V256 (tied), T 64", text)


class GpuPeak(unittest.TestCase):
    def test_names(self):
        cases = {"NVIDIA H100 80GB HBM3": 989.4e12, "NVIDIA H200": 989.4e12, "NVIDIA H200 NVL": 835.5e12,
                 "NVIDIA H100 PCIe": 756.5e12, "NVIDIA H100 NVL": 835.5e12, "NVIDIA GH200 480GB": 989.4e12,
                 "NVIDIA A100-SXM4-80GB": 312e12, "NVIDIA GeForce RTX 4090": None, "": None, None: None}
        for name, want in cases.items():
            self.assertEqual(gpu_peak.dense_bf16_peak(name)[0], want, name)

    def test_override(self):
        self.assertEqual(gpu_peak.choose_peak("NVIDIA H200", 500)[0], 500e12)
        self.assertEqual(gpu_peak.choose_peak("unknown", "123.5")[0], 123.5e12)


@unittest.skipUnless(TORCH_PYTHONS, "no Python here imports torch and numpy (tried $PY_TORCH, this one, "
                     "/usr/bin/python3, runs/peers-venv/bin/python)")
class PeerSmoke(unittest.TestCase):
    """torch_gpt2_cuda.py --device cpu on the tiny model."""

    @classmethod
    def setUpClass(cls):
        if not ZERODP:
            raise unittest.SkipTest("no zerodp binary to write the tiny model's weights and tokens "
                                    "($ZERODP, build/zerodp)")
        cls.tmp = tempfile.mkdtemp(prefix="bench-gpu-peer-")
        cls.init, cls.tokens = make_tiny_inputs(cls.tmp, ZERODP)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def peer(self, py, *extra, steps=4):
        cmd = [py, os.path.join(HERE, "torch_gpt2_cuda.py"), "--device", "cpu", "--init", self.init,
               "--data", self.tokens, "--micro-batch", str(B), "--seq", str(T), "--steps", str(steps),
               "--warmup", "1", *extra]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, f"{' '.join(cmd)}\n{r.stderr}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def check_result(self, j, sdpa, mode):
        self.assertEqual(j["mode"], mode)
        self.assertEqual(j["attention"], "sdpa" if sdpa else "math")
        self.assertEqual(len(j["ms"]), 4)
        self.assertEqual(j["median_ms"], sorted(j["ms"][1:])[1])
        self.assertAlmostEqual(j["tokens_per_s"], B * T / (j["median_ms"] / 1e3))
        self.assertEqual(j["step_flops"], STEP_FLOPS_TINY)
        self.assertTrue(all(math.isfinite(x) for x in j["loss"]))
        self.assertLess(j["loss"][-1], j["loss"][0])  # it trains
        self.assertAlmostEqual(j["loss"][0], math.log(256), delta=0.3)  # near uniform at the start
        self.assertIsNone(j["mfu"])  # no GPU, no --peak-tflops
        self.assertIsNone(j["max_memory_allocated"])

    def test_eager_every_torch(self):
        for py, version, sdpa, _ in TORCH_PYTHONS:
            with self.subTest(python=py, torch=version):
                self.check_result(self.peer(py), sdpa, "eager")

    def test_peak_override_gives_mfu(self):
        py = TORCH_PYTHONS[0][0]
        j = self.peer(py, "--peak-tflops", "0.5")
        self.assertAlmostEqual(j["mfu"], STEP_FLOPS_TINY / (j["median_ms"] / 1e3) / 0.5e12)

    def test_first_loss_matches_zerodp(self):
        """fp32 on both sides, same weights and batch: step 0's loss agrees to float rounding."""
        m = os.path.join(self.tmp, "fp32.jsonl")
        zerodp_train(ZERODP, self.init, self.tokens, m, 1, 0, dtype="fp32", steps=2)
        z = [json.loads(l)["loss"] for l in read(m).splitlines() if '"step"' in l]
        for py, version, _, _ in TORCH_PYTHONS:
            with self.subTest(python=py, torch=version):
                j = self.peer(py, "--dtype", "fp32", "--weight-decay", "0.01", "--clip", "0", steps=2)
                self.assertAlmostEqual(j["loss"][0], z[0], delta=1e-4)
                self.assertAlmostEqual(j["loss"][1], z[1], delta=1e-3)

    def test_compile(self):
        with_compile = [p for p in TORCH_PYTHONS if p[3]]
        if not with_compile:
            # The script must then refuse clearly (exit 1), which run.sh records as a failed run.
            py = TORCH_PYTHONS[0][0]
            r = subprocess.run([py, os.path.join(HERE, "torch_gpt2_cuda.py"), "--device", "cpu", "--compile",
                                "--init", self.init, "--data", self.tokens, "--micro-batch", "2", "--seq", "64",
                                "--steps", "2", "--warmup", "1"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("has no torch.compile", r.stderr)
            self.skipTest(f"no torch here has torch.compile (found: {[p[1] for p in TORCH_PYTHONS]})")
        py, _, sdpa, _ = with_compile[0]
        self.check_result(self.peer(py, "--compile"), sdpa, "compile")


@unittest.skipUnless(ZERODP, "no zerodp binary ($ZERODP, build/zerodp)")
@unittest.skipUnless(shutil.which("mpirun"), "no mpirun")
class RunScript(unittest.TestCase):
    """run.sh end to end on the CPU build, then report.py on what it wrote."""

    def run_sh(self, out, **env):
        e = dict(MPI_ENV, Z=ZERODP, OUT=out, COMMIT="test", LAYERS="2", HEADS="2", EMBD="64", VOCAB="256",
                 SEQ="64", B=str(B), STEPS="4", WARMUP="1", STAGES="0 3", WORLDS="1 2", PEER_MODES="eager",
                 PY_TORCH=TORCH_PYTHONS[0][0] if TORCH_PYTHONS else "/bin/false")
        e.update(env)
        r = subprocess.run(["bash", os.path.join(HERE, "run.sh")], env=e, capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r

    def test_cpu_end_to_end(self):
        with tempfile.TemporaryDirectory(prefix="bench-gpu-run-") as d:
            out = os.path.join(d, "out")
            self.run_sh(out, DEVICE="cpu")
            tags = [t for t, _, _ in report.read_status(out)]
            self.assertEqual(tags, ["zerodp-w1-s0", "zerodp-w1-s3", "zerodp-w2-s0", "zerodp-w2-s3", "torch-eager"])
            env = report.read_env(out)
            self.assertEqual((env["layers"], env["vocab"], env["seq"], env["device"]), ("2", "256", "64", "cpu"))
            text, rows, failed = report.render(out)
            got = {r["tag"]: r for r in rows}
            for tag in tags[:4]:
                self.assertIn(tag, got, f"{tag} failed: {dict(failed).get(tag)}")
                self.assertEqual(len(got[tag]["ms"]), 4)
            self.assertEqual(got["zerodp-w2-s3"]["tokens"], 2 * B * T)
            self.assertEqual(got["zerodp-w2-s3"]["ranks"], 2)
            # Stages agree at a world size (the same global batch and the same sums).
            self.assertEqual(got["zerodp-w1-s0"]["loss"], got["zerodp-w1-s3"]["loss"])
            r = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), out, "--check"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            if TORCH_PYTHONS:
                self.assertIn("torch-eager", got, dict(failed).get("torch-eager"))
                self.assertAlmostEqual(got["torch-eager"]["loss"], got["zerodp-w1-s0"]["loss"], delta=0.05)
                self.assertIn("zerodp's fastest at W = 1", text)
            else:
                self.assertIn("torch-eager", dict(failed))

    def test_llama_cpu_end_to_end(self):
        """ARCH=llama: zerodp's Llama directory made by run.sh, both stages the same losses, the peer near them."""
        with tempfile.TemporaryDirectory(prefix="bench-gpu-run-") as d:
            out = os.path.join(d, "out")
            self.run_sh(out, DEVICE="cpu", ARCH="llama", KV_HEADS="1", INTERMEDIATE="96", ROPE_THETA="10000",
                        WORLDS="1")
            env = report.read_env(out)
            self.assertEqual((env["arch"], env["kv_heads"], env["head_dim"], env["intermediate"]),
                             ("llama", "1", "32", "96"))
            text, rows, failed = report.render(out)
            got = {r["tag"]: r for r in rows}
            for tag in ("zerodp-w1-s0", "zerodp-w1-s3"):
                self.assertIn(tag, got, f"{tag} failed: {dict(failed).get(tag)}")
            self.assertEqual(got["zerodp-w1-s0"]["loss"], got["zerodp-w1-s3"]["loss"])
            self.assertIn("Llama L2 H2/1 C64 I96 V256 (tied)", text)
            if TORCH_PYTHONS:
                self.assertIn("torch-eager", got, dict(failed).get("torch-eager"))
                self.assertAlmostEqual(got["torch-eager"]["loss"], got["zerodp-w1-s0"]["loss"], delta=0.05)
                self.assertEqual(got["torch-eager"]["flops"], got["zerodp-w1-s0"]["flops"])

    def test_cuda_without_gpu_lists_every_failure(self):
        has_gpu = subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0
        if has_gpu:
            self.skipTest("a GPU is here: the runs may well succeed")
        with tempfile.TemporaryDirectory(prefix="bench-gpu-run-") as d:
            out = os.path.join(d, "out")
            self.run_sh(out, DEVICE="cuda", STAGES="1")
            text, rows, failed = report.render(out)
            failed = dict(failed)
            self.assertEqual(rows, [])
            self.assertEqual(set(failed), {"zerodp-w1-s1", "zerodp-w2-s1", "torch-eager"})
            for tag in ("zerodp-w1-s1", "zerodp-w2-s1"):
                # zerodp's own message (whatever it says), not Open MPI's lines around it
                self.assertRegex(failed[tag], r"^exit [1-9]\d*: \[rank \d\] error: ", failed[tag])
            self.assertIn("error", failed["torch-eager"])
            self.assertIn("No comparison", text)


if __name__ == "__main__":
    unittest.main()
