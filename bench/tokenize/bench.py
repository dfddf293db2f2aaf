"""Tokenizer throughput: `zerodp tokenize` (the whole command: load, read, encode, write) against
tiktoken and Hugging Face tokenizers (encode calls only, text already in memory), on the same text and
the same Llama-3-style byte-level BPE of 1,500 tokens trained on Shakespeare, on one core (taskset -c 0,
one thread each) and on all cores. Run by run.sh inside the venv of scripts/setup/tokenizer_venv.sh, with
tests/pylib (zdptest.train_tokenizers, zdptest.unseen_texts) on PYTHONPATH.

  bench.py ZERODP OUT_DIR [MB]

Texts: Shakespeare repeated to MB megabytes (default 50), and a multilingual mix (unseen languages,
emoji, digits, whitespace runs spliced into Shakespeare) of MB/5. Writes OUT_DIR/results.json and
prints MB/s and ratios; plot.py draws them."""
import json
import os
import subprocess
import sys
import tempfile
import time

from zdptest import train_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CHILD = r'''
import json, os, sys, time
kind, tok_path, text_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
text = open(text_path, encoding="utf-8", newline="").read()
nbytes = len(text.encode("utf-8"))
# Documents of about 64 kB (what suits both libraries best here: far longer ones slow tokenizers down,
# single paragraphs cost tiktoken its per-call overhead), cut at a blank line before an ASCII letter,
# a cut that changes no ids: the three give the same tokens as for the whole text.
docs, b = [], 0
while b < len(text):
    e = text.find("\n\n", b + 65536)
    while e >= 0 and not (e + 2 < len(text) and text[e + 2].isascii() and text[e + 2].isalpha()):
        e = text.find("\n\n", e + 1)
    e = len(text) if e < 0 else e + 2
    docs.append(text[b:e]); b = e
if kind == "tokenizers":
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    t0 = time.perf_counter()
    n = sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
    dt = time.perf_counter() - t0
else:
    import tiktoken
    j = json.load(open(tok_path, encoding="utf-8"))
    byte_of = {}
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = 0
    for c in range(256):
        if c in printable: byte_of[chr(c)] = c
        else: byte_of[chr(256 + extra)] = c; extra += 1
    specials = {a["content"]: a["id"] for a in j["added_tokens"]}
    ranks = {bytes(byte_of[ch] for ch in s): i for s, i in j["model"]["vocab"].items() if s not in specials}
    pat = j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    enc = tiktoken.Encoding("bench", pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)
    t0 = time.perf_counter()
    n = sum(len(x) for x in enc.encode_batch(docs, num_threads=threads, allowed_special="all"))
    dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "tokens": n, "bytes": nbytes, "documents": len(docs)}))
'''


def make_texts(mb, mix_share):
    """Shakespeare repeated to about `mb` MB, and the multilingual mix (zdptest.unseen_texts' documents
    spliced into Shakespeare) of about mb * mix_share MB."""
    from zdptest import unseen_texts
    sh = open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), encoding="utf-8").read()
    texts = {"shakespeare": sh * max(1, int(mb * 1e6 / len(sh.encode("utf-8"))))}
    mix, k = [], 0
    while sum(len(p) for p in mix) < mb * 1e6 * mix_share / 1.3:
        for d in unseen_texts.DOCS:
            mix.append(sh[(k * 7919) % 1000000:(k * 7919) % 1000000 + 2000])
            mix.append(d)
            k += 1
    texts["multilingual"] = "".join(mix)
    return texts


def finish(results, path, tmp):
    """The load after the runs, then the results written to `path`; the temporaries removed."""
    results["load_after"] = os.getloadavg()[0]
    print("load average (1 min) before %.2f, after %.2f" % (results["load_before"], results["load_after"]))
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    subprocess.run(["rm", "-rf", tmp])


def timed(cmd, env=None):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("bench: %s failed: %s" % (" ".join(cmd), r.stderr))
    return dt, r.stdout


def main():
    zerodp, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    mb = float(sys.argv[3]) if len(sys.argv) > 3 else 50
    os.makedirs(out_dir, exist_ok=True)
    cores = len(os.sched_getaffinity(0))
    tmp = tempfile.mkdtemp(prefix="zerodp-bench-tokenize-")
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    tok = train_tokenizers.train_llama3([shakespeare], 1500)
    tj = os.path.join(tmp, "llama3-1500.json")
    tok.save(tj)
    texts = make_texts(mb, 1 / 5)
    results = {"cores": cores, "date": time.strftime("%Y-%m-%d"), "vocab": tok.get_vocab_size(), "runs": [],
               "load_before": os.getloadavg()[0]}
    try:
        results["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except Exception:
        results["cpu"] = "?"
    for name, text in texts.items():
        tp = os.path.join(tmp, name + ".txt")
        with open(tp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        nbytes = os.path.getsize(tp)
        for threads in (1, cores):
            pin = ["taskset", "-c", "0"] if threads == 1 else []
            env = dict(os.environ, OMP_NUM_THREADS=str(threads), RAYON_NUM_THREADS=str(threads),
                       TOKENIZERS_PARALLELISM="true" if threads > 1 else "false")
            row = {"text": name, "mb": nbytes / 1e6, "threads": threads}
            best = None
            for _ in range(2):  # the better of two runs
                dt, _out = timed(pin + [zerodp, "tokenize", "--tokenizer", tj, "--text", tp, "--out",
                                        os.path.join(tmp, "z.bin"), "--no-eos", "--threads", str(threads)], env)
                best = dt if best is None else min(best, dt)
            row["zerodp"] = nbytes / 1e6 / best
            ids_z = None
            # The better of two runs for tiktoken too; tokenizers, ten times slower, runs once.
            for kind, tries in (("tiktoken", 2), ("tokenizers", 1)):
                for _ in range(tries):
                    _, out = timed(pin + [sys.executable, "-c", CHILD, kind, tj, tp, str(threads)], env)
                    r = json.loads(out)
                    row[kind] = max(row.get(kind, 0), r["bytes"] / 1e6 / r["seconds"])
                    row[kind + "_tokens"] = r["tokens"]
            with open(os.path.join(tmp, "z.bin"), "rb") as f:
                row["zerodp_tokens"] = int.from_bytes(f.read(12)[8:12], "little")
            row["vs_tiktoken"] = row["zerodp"] / row["tiktoken"]
            row["vs_tokenizers"] = row["zerodp"] / row["tokenizers"]
            results["runs"].append(row)
            print("%-12s %5.1f MB, %d thread(s): zerodp %6.1f MB/s, tiktoken %6.1f MB/s, tokenizers %6.1f MB/s; "
                  "zerodp/tiktoken %.2fx, zerodp/tokenizers %.2fx (tokens %d / %d / %d)"
                  % (name, row["mb"], threads, row["zerodp"], row["tiktoken"], row["tokenizers"], row["vs_tiktoken"],
                     row["vs_tokenizers"], row["zerodp_tokens"], row["tiktoken_tokens"], row["tokenizers_tokens"]),
                  flush=True)
    finish(results, os.path.join(out_dir, "results.json"), tmp)


if __name__ == "__main__":
    main()
