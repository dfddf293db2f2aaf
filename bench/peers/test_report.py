#!/usr/bin/python3
"""Checks of bench/peers/report.py on a results directory made here (python3 bench/peers/test_report.py).

A run of bench/peers/run.sh leaves, per runner, dtype and round, a status line (tag, exit code, CPUs' busy
fraction before, load after) and zerodp's metrics (JSON lines) or a peer's JSON. Here every step time is
chosen, so the medians, tokens/s and each stage's ratio to its best peer are known by hand; one peer
round fails with an exception in its log and one peer has no successful round at all. The page and the
plot are written, and the plot is read back as a PNG of the right size.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")
# report.py imports zdptest: this checkout's tests/pylib on its PYTHONPATH, as run.sh gives it.
PYLIB = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "pylib"))
REPORT_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [PYLIB, os.environ.get("PYTHONPATH")])))
TOKENS = 2 * 8 * 128  # a step's tokens, both ranks (report.py's TOKENS)


def write_zerodp(res, tag, ms):
    with open(os.path.join(res, tag + ".jsonl"), "w") as f:
        f.write(json.dumps({"event": "config", "world_size": 2}) + "\n")
        for i, m in enumerate(ms):
            f.write(json.dumps({"event": "step", "step": i, "ms": m, "loss": 5.5 - 0.1 * i}) + "\n")


def write_peer(res, tag, ms):
    with open(os.path.join(res, tag + ".json"), "w") as f:
        f.write("some warning a library printed\n")
        f.write(json.dumps({"ms": ms, "loss": [5.5 - 0.1 * i for i in range(len(ms))], "torch": "2.x"}) + "\n")


class Report(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.res = os.path.join(self.tmp.name, "results")
        os.makedirs(self.res)
        with open(os.path.join(self.res, "env.txt"), "w") as f:
            f.write("date=2026-11-25 12:00 UTC\ncpu=Test CPU\ncores=2\nsteps=6\n")
        status = []
        # Two warm-up steps (1000 ms, dropped), then the timed ones; the rounds' timed steps are pooled.
        # zerodp stage s: 100 + s ms in both dtypes (bf16 half of it).
        for dt, scale in (("fp32", 1.0), ("bf16", 0.5)):
            for s in range(4):
                for r in (1, 2):
                    tag = f"zerodp-s{s}-{dt}-r{r}"
                    write_zerodp(self.res, tag, [1000, 1000] + [(100 + s) * scale] * 4)
                    status.append((tag, 0))
            # Peers: DDP 250, ZeroRedundancyOptimizer 300, DeepSpeed 1 270 (stage 1's best), FSDP2 290,
            # DeepSpeed 2 280 (stage 2's best), FSDP2 with reshard 310; DeepSpeed 3 fails in both rounds.
            for runner, ms in (("ddp", 250), ("zero1", 300), ("ds1", 270), ("fsdp2", 290), ("ds2", 280),
                               ("fsdp2-reshard", 310)):
                for r in (1, 2):
                    tag = f"{runner}-{dt}-r{r}"
                    write_peer(self.res, tag, [1000, 1000] + [ms * scale] * 4)
                    status.append((tag, 0))
            for r in (1, 2):
                tag = f"ds3-{dt}-r{r}"
                with open(os.path.join(self.res, tag + ".log"), "w") as f:
                    f.write("Traceback (most recent call last):\n  File x\nRuntimeError: out of shared memory\n")
                status.append((tag, 1))
        # A failed round beside a good one: the runner stands on the other round.
        write_peer(self.res, "ddp-fp32-r3", [])
        with open(os.path.join(self.res, "ddp-fp32-r3.log"), "w") as f:
            f.write("terminate called without an active exception\n")
        status.append(("ddp-fp32-r3", 134))
        with open(os.path.join(self.res, "status.txt"), "w") as f:
            for tag, rc in status:
                f.write(f"{tag}\t{rc}\t0.00\t1.00\n")

    def tearDown(self):
        self.tmp.cleanup()

    def run_report(self, *extra):
        r = subprocess.run([sys.executable, REPORT, self.res, "--warmup", "2", *extra], capture_output=True,
                           text=True, timeout=120, env=REPORT_ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_stage_ratios_against_the_best_peer(self):
        out = self.run_report()
        for dt, scale in (("fp32", 1.0), ("bf16", 0.5)):
            start = out.index(f"**{dt}: each zerodp stage")
            end = out.find("### ", start)
            section = out[start:end if end >= 0 else len(out)]
            rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| (\d) \|.*$", section, re.M)}
            for s, best, best_ms in ((0, "PyTorch DDP", 250), (1, "DeepSpeed ZeRO-1", 270),
                                     (2, "DeepSpeed ZeRO-2", 280),
                                     (3, "PyTorch FSDP2 (reshard_after_forward=True)", 310)):
                want = f"{best_ms / (100 + s):.2f}x"  # peer ms / zerodp ms: the scale cancels
                self.assertIn(f"| {best} | {want} |", rows[s], f"{dt} stage {s}")
                self.assertIn(f"| {(100 + s) * scale:.1f} |", rows[s])
            self.assertIn("DeepSpeed ZeRO-3 failed", rows[3])

    def test_runner_table_tokens_and_failures(self):
        out = self.run_report()
        fp32 = out[out.index("### fp32"):out.index("### bf16")]
        # DDP: rounds 1 and 2 pooled at 250 ms; round 3 (exit 134, no steps) noted, not counted.
        ddp = next(l for l in fp32.splitlines() if l.startswith("| PyTorch DDP |"))
        self.assertIn("| 250.0 | 250/250 (1 round(s) failed) |", ddp)
        self.assertIn(f"| {TOKENS / 250 * 1e3:.0f} |", ddp)
        ds3 = next(l for l in fp32.splitlines() if l.startswith("| DeepSpeed ZeRO-3 |"))
        self.assertIn("failed | exit 1: RuntimeError: out of shared memory", ds3)

    def test_page_and_plot(self):
        page = os.path.join(self.tmp.name, "docs", "peers.md")
        png = os.path.join(self.tmp.name, "docs", "peers.png")
        os.makedirs(os.path.dirname(page))
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib is missing (python3-matplotlib): the plot cannot be drawn")
        self.run_report("--write-docs", page, "--notes", os.path.join(self.tmp.name, "none.md"), "--plot", png)
        text = open(page).read()
        self.assertIn("![tokens/s of every runner by stage, fp32 and bf16](peers.png)", text)
        self.assertIn("Machine: Test CPU, 2 cores", text)
        with open(png, "rb") as f:
            head = f.read(24)
        self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n")
        width, height = struct.unpack(">II", head[16:24])
        self.assertGreater(width, 800)
        self.assertGreater(height, 300)

    def test_llama_page_and_plot(self):
        """--arch llama (run.sh's ARCH=llama): the same tables; the page names the Llama from env.txt, the
        transformers version, the attention implementation and the init command."""
        with open(os.path.join(self.res, "env.txt"), "a") as f:
            f.write("arch=llama\nmodel=Llama L10 C512 H8 KV4 I1408 V256, untied head (29764096 parameters)\n"
                    "init=zerodp init --arch llama --out data/llama-l10c512 --layers 10\ntransformers=5.0.0\nattn=sdpa\n")
        gpt2 = self.run_report()
        self.assertEqual(self.run_report("--arch", "llama"), gpt2)  # the tables do not depend on the model
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("matplotlib is missing (python3-matplotlib): the plot cannot be drawn")
        page = os.path.join(self.tmp.name, "llama.md")
        png = os.path.join(self.tmp.name, "llama.png")
        self.run_report("--arch", "llama", "--write-docs", page, "--notes", os.path.join(self.tmp.name, "none.md"),
                        "--plot", png)
        with open(page) as f:
            text = f.read()
        self.assertIn("# zerodp against PyTorch 2.x and DeepSpeed (W = 2, Llama L10 C512 (29.8M))", text)
        self.assertIn("\nLlama L10 C512 H8 KV4 I1408 V256, untied head (29764096 parameters): grouped-query attention", text)
        self.assertIn('transformers 5.0.0 `LlamaForCausalLM.from_pretrained`', text)
        self.assertIn('attn_implementation="sdpa"', text)
        self.assertIn("\nzerodp init --arch llama --out data/llama-l10c512 --layers 10\n", text)
        self.assertNotIn("GPT-2", text)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
