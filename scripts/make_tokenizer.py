#!/usr/bin/env python3
"""Trains the repository's small tokenizer: a GPT-2-style byte-level BPE (ByteLevel pre-tokenizer with
GPT-2's regex, <|endoftext|> as its special token, id 0) of 1024 tokens on data/tinyshakespeare.txt,
with Hugging Face `tokenizers` (the venv of scripts/setup/tokenizer_venv.sh, which this script re-runs itself
in), and writes data/tokenizers/shakespeare-bpe-1024/tokenizer.json and its README.md.

  PYTHONPATH=tests/pylib python3 scripts/make_tokenizer.py [VOCAB]       (default 1024)

The training itself is zdptest.train_tokenizers's (tests/pylib, shared with the tokenizer tests and
bench/tokenize): tests/pylib on PYTHONPATH as above, or `pip install tests/pylib`.

Training is deterministic for a given `tokenizers` version: rerunning gives the same file."""
import os
import subprocess
import sys

import zdptest  # noqa: F401  (before the venv is made: no PYTHONPATH fails here, at once)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import tokenizers
except ImportError:
    if os.environ.get("ZERODP_MAKE_TOKENIZER_REEXEC"):
        sys.exit("make_tokenizer.py: the venv has no tokenizers")
    py = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup", "tokenizer_venv.sh")], check=True,
                        stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    os.environ["ZERODP_MAKE_TOKENIZER_REEXEC"] = "1"
    os.execv(py, [py] + sys.argv)

from zdptest import train_tokenizers  # noqa: E402


def main():
    vocab = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    text = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    out_dir = os.path.join(ROOT, "data", "tokenizers", "shakespeare-bpe-%d" % vocab)
    os.makedirs(out_dir, exist_ok=True)
    tok = train_tokenizers.train_gpt2([text], vocab)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    ids = tok.encode(open(text, encoding="utf-8").read(), add_special_tokens=False).ids
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(
            "# shakespeare-bpe-%d\n\n"
            "A GPT-2-style byte-level BPE of %d tokens (256 bytes, <|endoftext|> = id %d, %d merges) trained on\n"
            "data/tinyshakespeare.txt by `PYTHONPATH=tests/pylib python3 scripts/make_tokenizer.py %d` with Hugging Face tokenizers %s:\n"
            "a ByteLevel pre-tokenizer with GPT-2's regex, no normalizer, a ByteLevel decoder. It turns the\n"
            "%d bytes of Shakespeare into %d tokens (%.2f bytes a token).\n\n"
            "    build/zerodp tokenize --tokenizer data/tokenizers/shakespeare-bpe-%d/tokenizer.json \\\n"
            "        --text data/tinyshakespeare.txt --out-prefix shakespeare --val-tokens 30000\n"
            % (vocab, tok.get_vocab_size(), tok.token_to_id("<|endoftext|>"), tok.get_vocab_size() - 257, vocab,
               tokenizers.__version__, os.path.getsize(text), len(ids), os.path.getsize(text) / len(ids), vocab))
    print("wrote %s (V = %d): %d tokens for Shakespeare" % (path, tok.get_vocab_size(), len(ids)))


if __name__ == "__main__":
    main()
