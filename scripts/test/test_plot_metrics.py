#!/usr/bin/python3
"""Checks of scripts/plot_metrics.py (/usr/bin/python3 scripts/test/test_plot_metrics.py).

Two small hand-made metrics files: a run of 40 steps of 1024 tokens with an eval before the first
step and every 10 steps (the eval event's "step" is the steps done, as train/metrics.h eval_json
writes it), and a run resumed at step 20 with steps of 2048 tokens, a null (skipped) loss and the
memory and traffic events at the end. The tokens trained at each eval are worked out by hand; the PNG
is read back (signature and size); bad inputs end with exit 2 and a message naming the file and line;
no matplotlib, exit 1 saying so. Exit 77 (skipped) without matplotlib.
"""
import importlib.util
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.environ.get("PLOT_METRICS", os.path.join(HERE, "..", "plot_metrics.py"))


def load_module():
    spec = importlib.util.spec_from_file_location("plot_metrics", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_lines(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def step(s, loss, tokens):
    return {"event": "step", "step": s, "loss": loss, "grad_norm": 1.0, "lr": 1e-3, "tokens": tokens, "ms": 5.0}


def first_run():
    recs = [{"event": "eval", "step": 0, "val_loss": 5.6, "tokens": 4096}]
    for s in range(40):
        recs.append(step(s, 5.5 * math.exp(-s / 30) + 0.05 * math.sin(s), 1024))
        if (s + 1) % 10 == 0:
            recs.append({"event": "eval", "step": s + 1, "val_loss": 5.6 * math.exp(-s / 35), "tokens": 4096})
    return recs


def resumed_run():
    recs = [step(s, 4.0 - 0.03 * (s - 20), 2048) for s in range(20, 40)]
    recs[5]["loss"] = None  # a skipped step: not finite, dumped as null
    recs.append({"event": "eval", "step": 30, "val_loss": 3.9, "tokens": 8192})
    recs.append({"event": "eval", "step": 40, "val_loss": 3.7, "tokens": 8192})
    recs.append({"event": "memory", "rank": 0, "peak_bytes": {"total": 1}, "live_bytes": {"total": 1}})
    recs.append({"event": "traffic", "rank": 0, "bytes_sent": {"all_reduce": 0}})
    return recs


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


class PlotMetrics(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.a = os.path.join(self.tmp.name, "a.jsonl")
        self.b = os.path.join(self.tmp.name, "b.jsonl")
        write_lines(self.a, first_run())
        write_lines(self.b, resumed_run())

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_tokens_trained_at_each_eval(self):
        mod = load_module()
        a = mod.read_run(self.a, "a")
        cum = a.trained_tokens()
        self.assertEqual(cum[0], 1024)
        self.assertEqual(cum[39], 40 * 1024)
        self.assertEqual([a.tokens_after(k, cum) for k in sorted(a.evals)], [0, 10240, 20480, 30720, 40960])
        b = mod.read_run(self.b, "b")
        cum = b.trained_tokens()
        self.assertEqual(cum[20], 21 * 2048)  # resumed: 20 earlier steps of the first step's size
        self.assertEqual(b.tokens_after(30, cum), 30 * 2048)
        self.assertIsNone(b.steps[25][1])  # the null loss is kept out of the curve, its tokens counted
        self.assertEqual(cum[26] - cum[25], 2048)
        self.assertEqual(b.tokens_after(6, cum), 6 * 2048)  # before the first step event
        self.assertEqual(b.tokens_after(45, cum), 45 * 2048)  # after the last
        self.assertEqual(mod.moving_average([1.0, 2.0, 3.0, 4.0, 5.0], 1), [1.5, 2.0, 3.0, 4.0, 4.5])
        self.assertEqual(mod.moving_average([1.0, 3.0], 0), [1.0, 3.0])
        self.assertEqual(mod.default_smoothing([a, b]), 1)

    def test_writes_a_png(self):
        out = self.path("loss.png")
        r = run(self.a, self.b, "--out", out, "--title", "test run", "--label", "fresh", "--label", "resumed")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 runs, 60 steps, 7 evals", r.stdout)
        with open(out, "rb") as f:
            head = f.read(24)
        self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n")
        width, height = struct.unpack(">II", head[16:24])
        self.assertEqual((width, height), (880, 550))  # 8 x 5 inches at 110 dpi
        self.assertGreater(os.path.getsize(out), 10000)
        self.assertFalse(os.path.exists(out + ".partial.png"))

    def test_one_file_defaults(self):
        cwd = self.path("cwd")
        os.mkdir(cwd)
        r = subprocess.run([sys.executable, SCRIPT, self.a, "--smooth", "0", "--log-y"], capture_output=True,
                           text=True, timeout=120, cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(os.path.join(cwd, "loss.png")), 0)

    def expect_usage_error(self, lines, *needles, args=()):
        bad = self.path("bad.jsonl")
        if lines is None:
            if os.path.exists(bad):
                os.remove(bad)
        else:
            write_lines(bad, lines)
        out = self.path("bad.png")
        r = run(bad, *args, "--out", out)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        for n in needles:
            self.assertIn(n, r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_bad_inputs_exit_2_with_a_message(self):
        bad = self.path("bad.jsonl")
        self.expect_usage_error([step(0, 5.0, 64), "{not json"], f"{bad}:2: not JSON")
        self.expect_usage_error([step(0, 5.0, 64), "[1, 2]"], f"{bad}:2: expected a JSON object")
        self.expect_usage_error([{"event": "step", "step": 0, "loss": 5.0}], f"{bad}:1:", "\"tokens\"")
        self.expect_usage_error([step(0, "high", 64)], f"{bad}:1:", "\"loss\" must be a number")
        self.expect_usage_error([step(-1, 5.0, 64)], f"{bad}:1:", "step number")
        self.expect_usage_error([{"event": "eval", "step": 3, "val_loss": None, "tokens": 1}], "\"val_loss\"")
        self.expect_usage_error([{"event": "eval", "step": 3, "val_loss": 4.0, "tokens": 1}], "no step events")
        self.expect_usage_error([], "no \"step\" or \"eval\" events")
        self.expect_usage_error(None, "cannot read")  # no such file
        with open(bad, "wb") as f:
            f.write(b"\xff\xfe\x00binary")
        r = run(bad, "--out", self.path("x.png"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a text file", r.stderr)

    def test_without_matplotlib_exits_1_saying_so(self):
        shadow = self.path("shadow/matplotlib")
        os.makedirs(shadow)
        with open(os.path.join(shadow, "__init__.py"), "w") as f:
            f.write("raise ImportError('no matplotlib here')\n")
        env = dict(os.environ, PYTHONPATH=self.path("shadow"), ZERODP_PLOT_REEXEC="1")
        out = self.path("x.png")
        r = subprocess.run([sys.executable, SCRIPT, self.a, "--out", out], capture_output=True, text=True,
                           timeout=120, env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("matplotlib is missing", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_bad_usage_exits_2(self):
        self.assertEqual(run().returncode, 2)  # no file
        r = run(self.a, "--label", "one", "--label", "two", "--out", self.path("x.png"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("one per file", r.stderr)
        self.assertEqual(run(self.a, "--smooth", "-1", "--out", self.path("x.png")).returncode, 2)
        r = run(self.a, "--out", self.path("no-such-dir/x.png"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot write", r.stderr)


if __name__ == "__main__":
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skipped: no matplotlib (Debian's python3-matplotlib)")
        sys.exit(77)
    unittest.main()
