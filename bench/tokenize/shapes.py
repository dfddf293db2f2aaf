"""Encode speed of `zerodp tokenize` per tokenizer shape, as ratios to the byte-level path without a
normalizer, measured in one run on the same texts: a Llama-3-style byte-level BPE (the reference),
a Qwen-2.5-style one (Qwen 2's regex and an NFC normalizer) and its vocabulary without the
normalizer, and the SentencePiece-style BPEs of Llama 2
(Prepend + Replace normalizer, no pre-tokenizer, byte fallback) and Mistral (Metaspace), all of
1,500 tokens trained by `tokenizers` on Shakespeare. One thread pinned to core 0 (taskset -c 0),
the whole command (load, map, encode, write), the best of three runs, the shapes interleaved so that
a change in the machine's load falls on all of them. Run by run.sh's environment (the venv of
scripts/setup/tokenizer_venv.sh, tests/pylib on PYTHONPATH).

  shapes.py ZERODP OUT_DIR [MB]

Texts: Shakespeare repeated to MB megabytes (default 20), and a multilingual mix (bench.py's) of MB/2.
Writes OUT_DIR/shapes.json and prints MB/s and the ratios."""
import os
import subprocess
import sys
import tempfile
import time

import bench
from zdptest import train_shapes, train_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def train_qwen2(files, vocab_size):
    """Qwen 2.5's vocabulary without its NFC normalizer: what the normalizer alone costs."""
    t = train_shapes.train_qwen25(files, vocab_size)
    t.normalizer = None
    return t


SHAPES = {"llama3": train_tokenizers.train_llama3, "qwen2": train_qwen2, "qwen25": train_shapes.train_qwen25,
          "llama2": train_shapes.train_llama2, "mistral": train_shapes.train_mistral}


def main():
    zerodp, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    mb = float(sys.argv[3]) if len(sys.argv) > 3 else 20
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="zerodp-bench-shapes-")
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    paths = {}
    for name, train in SHAPES.items():
        paths[name] = os.path.join(tmp, name + ".json")
        train([shakespeare], 1500).save(paths[name])
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_before": os.getloadavg()[0], "runs": []}
    for text_name, text in bench.make_texts(mb, 1 / 2).items():
        tp = os.path.join(tmp, text_name + ".txt")
        with open(tp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        nbytes = os.path.getsize(tp)
        best = {name: None for name in SHAPES}
        tokens = {}
        for _ in range(3):
            for name in SHAPES:
                out = os.path.join(tmp, name + ".bin")
                t0 = time.perf_counter()
                subprocess.run(["taskset", "-c", "0", zerodp, "tokenize", "--tokenizer", paths[name], "--text", tp,
                                "--out", out, "--no-eos", "--threads", "1"], check=True, capture_output=True)
                dt = time.perf_counter() - t0
                best[name] = dt if best[name] is None else min(best[name], dt)
                with open(out, "rb") as f:
                    tokens[name] = int.from_bytes(f.read(12)[8:12], "little")
        for name in SHAPES:
            speed = nbytes / 1e6 / best[name]
            row = {"text": text_name, "mb": nbytes / 1e6, "shape": name, "mb_per_s": speed, "tokens": tokens[name],
                   "time_ratio": best[name] / best["llama3"]}
            results["runs"].append(row)
            print("%-12s %5.1f MB  %-8s %6.1f MB/s  time per byte %.2fx the byte-level path's  (%d tokens)"
                  % (text_name, row["mb"], name, speed, row["time_ratio"], tokens[name]), flush=True)
    bench.finish(results, os.path.join(out_dir, "shapes.json"), tmp)


if __name__ == "__main__":
    main()
