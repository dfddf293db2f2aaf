"""`zerodp tokenize --tokenizer` against the Hugging Face `tokenizers` library (docs/reference/files.md#tokenizer-json).

  reference_test.py ZERODP CASE      (run by run.sh inside the venv of scripts/setup/tokenizer_venv.sh,
                                     with tests/pylib on PYTHONPATH)

Cases:
  gpt2, llama3  train a byte-level BPE of that shape (zdptest/train_tokenizers.py, vocabulary 1500) on
                data/tinyshakespeare.txt, then compare zerodp's ids with tokenizers'
                encode(text, add_special_tokens=False).ids on text it never saw: many languages,
                emoji, digit and whitespace runs, CRLF, contractions, special tokens written in the
                text, combining marks; as one text file (--no-eos), as JSON Lines documents (each
                preceded by the end-of-text token), and as a 3 MB text cut for 2 threads; then
                --decode gives the text back byte for byte; the shards of --out-prefix hold the stream.
  shapes        other pre-tokenizers (Split's behaviours, invert, a string pattern, Digits, ByteLevel's
                prefix space) and added tokens' flags, each against tokenizers on the same texts.
  added         4,000 added tokens that are prefixes of each other and overlap, special or not, normalized
                or not, with lstrip/rstrip/single_word, on random texts made of their pieces; and 60,000
                special tokens (the trie that finds them, the pass that splits them out first).
  malformed     broken tokenizer.json files: exit 2, a message naming the file and the key.
  bytes         invalid UTF-8 through a BPE tokenizer round-trips through --decode; the byte
                tokenizer's file is byte for byte llm.c's uint16 layout.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from zdptest import train_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# Text the tokenizers never saw in training (they train on Shakespeare).
DOCS = [
    "中文测试：你好，世界！今天天气很好，我们去公园散步吧。",
    "日本語のテキストです。カタカナとひらがな、漢字が混ざっています。",
    "مرحبا بالعالم، هذا نص عربي للاختبار.",
    "नमस्ते दुनिया, यह हिंदी में एक परीक्षण है।",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε· το γρήγορο καφέ αλεπού.",
    "Emoji: 👍 👍🏽 👩🏿‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️‍🔥 🇫🇷🇯🇵",
    "Digits: 1234567 3.14159 1,000,000 2024-05-20 0x7fff 99999999999999999999",
    "Whitespace    runs\t\ttabs \t mixed\n\n\n   indented\n \n\t\n",
    "Windows\r\nline\r\nendings\r\n\r\n",
    "trailing spaces   ",
    "   leading spaces",
    "Contractions: it's, I'LL, we've, they'd, YOU'RE, I'm, can't, 'S 'T 'Re",
    "special <|endoftext|> in the middle and <|begin_of_text|> and <|end_of_text|> and <|endoftext",
    "<|endoftext|><|endoftext|>twice",
    "Combining marks: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f",
    "Mixed scripts: Hello世界123abc!!!???...---___",
    "Punctuation runs: !!!??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>>",
    "URL https://example.com/path?q=1&r=2#frag and e-mail someone@example.org",
    "Code: def f(x):\n    return x ** 2  # square\n\tif (a != b) { c++; }",
    "Unicode spaces:\u00a0nbsp\u2003em\u3000ideographic\u2028line\u2029para",
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe",
    "Accents: café naïve résumé façade Ångström Øre",
    "한국어 텍스트도 있습니다. 안녕하세요!",
    "ไทย ภาษาไทย ทดสอบ",
    "עברית: שלום עולם",
    "Math: ∀x∈ℝ, ∃y: x²+y²≤1 ∑∫∂√∞",
    "",
    " ",
    "\n",
    "a",
    "KING RICHARD III:\nNow is the winter of our discontent\nMade glorious summer by this sun of York;",
    "x" * 300 + " " * 200 + "7" * 50,
    # runs of letters of 2 and 3 bytes longer than the regex search's window (256 bytes)
    "中文" * 150 + " Ünïcödé" * 3 + "é" * 301 + " ok",
    # where two regex engines could disagree
    "it'ſ x KK IT'S 's's'S x'LL'll",
    "a᠎b ab x  y   a 　　x v",
    "﻿hi a‍‍b 😀😀 1١٢٣ ½⅕",
    "  \n  \n\r\r\n\n a\x00b ́start x" + "́" * 40,
]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(zerodp, args, ok=True):
    r = subprocess.run([zerodp] + args, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="2"))
    if ok and r.returncode != 0:
        fail("zerodp %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r


def read_ids(path):
    with open(path, "rb") as f:
        d = f.read()
    magic, version, n = struct.unpack("<iii", d[:12])
    if magic != 20240520 or version not in (1, 2):
        fail("%s: bad header %d %d" % (path, magic, version))
    width = 2 if version == 1 else 4
    if len(d) != 1024 + n * width:
        fail("%s: %d tokens announced, %d bytes" % (path, n, len(d)))
    return list(struct.unpack("<%d%s" % (n, "H" if width == 2 else "I"), d[1024:]))


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(label, got, want, text=None):
    if got == want:
        return
    i = first_difference(got, want)
    fail("%s: ids differ at %d (of %d / %d): zerodp %s, tokenizers %s" % (label, i, len(got), len(want),
                                                                         got[max(0, i - 3):i + 5],
                                                                         want[max(0, i - 3):i + 5]))


def reference_case(zerodp, kind, tmp):
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    tok = train_tokenizers.TRAINERS[kind]([shakespeare], 1500)
    tj = os.path.join(tmp, kind + ".json")
    tok.save(tj)
    eos_name = "<|endoftext|>" if kind == "gpt2" else "<|begin_of_text|>"
    eos = tok.token_to_id(eos_name)

    def ref(s):
        return tok.encode(s, add_special_tokens=False).ids

    # 1. every document alone, as a text file, without the end-of-text token
    for i, doc in enumerate(DOCS):
        p = os.path.join(tmp, "doc%d.txt" % i)
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(doc)
        if not doc:
            continue  # an empty text without eos has no tokens: refused (checked below)
        run(zerodp, ["tokenize", "--tokenizer", tj, "--text", p, "--out", p + ".bin", "--no-eos"])
        compare("%s doc %d %r" % (kind, i, doc[:40]), read_ids(p + ".bin"), ref(doc))
        run(zerodp, ["tokenize", "--decode", "--tokenizer", tj, "--tokens", p + ".bin", "--out", p + ".back"])
        with open(p + ".back", "rb") as f:
            if f.read() != doc.encode("utf-8"):
                fail("%s doc %d: --decode did not give the text back" % (kind, i))
    r = run(zerodp, ["tokenize", "--tokenizer", tj, "--text", os.path.join(tmp, "doc%d.txt" % DOCS.index("")),
                     "--out", os.path.join(tmp, "empty.bin"), "--no-eos"], ok=False)
    if r.returncode != 2:
        fail("an empty text with --no-eos: exit %d, expected 2" % r.returncode)

    # 2. JSON Lines, many documents, each preceded by the end-of-text token; and several inputs at once
    jl = os.path.join(tmp, "docs.jsonl")
    with open(jl, "w", encoding="utf-8") as f:
        for doc in DOCS:
            f.write(json.dumps({"text": doc, "id": 1}, ensure_ascii=(len(doc) % 2 == 0)) + "\n")
    run(zerodp, ["tokenize", "--tokenizer", tj, "--text", jl, os.path.join(tmp, "doc0.txt"), "--out",
                 os.path.join(tmp, "docs.bin")])
    want = []
    for doc in DOCS + [DOCS[0]]:
        want += [eos] + ref(doc)
    compare(kind + " jsonl", read_ids(os.path.join(tmp, "docs.bin")), want)

    # 3. a big text (Shakespeare with the documents spliced in, ~3 MB), cut for threads: 1 and 2 threads
    with open(shakespeare, encoding="utf-8") as f:
        sh = f.read()
    parts = []
    for k in range(3):
        for i, doc in enumerate(DOCS):
            parts.append(sh[i * 30000:(i + 1) * 30000 + k])
            parts.append(doc)
    big = "".join(parts)
    bp = os.path.join(tmp, "big.txt")
    with open(bp, "w", encoding="utf-8", newline="") as f:
        f.write(big)
    want = ref(big)
    for threads in ("1", "2"):
        out = os.path.join(tmp, "big%s.bin" % threads)
        run(zerodp, ["tokenize", "--tokenizer", tj, "--text", bp, "--out", out, "--no-eos", "--threads", threads])
        compare("%s big text, %s threads" % (kind, threads), read_ids(out), want)
    run(zerodp, ["tokenize", "--decode", "--tokenizer", tj, "--tokens", os.path.join(tmp, "big2.bin"), "--out",
                 bp + ".back"])
    with open(bp + ".back", "rb") as f:
        if f.read() != big.encode("utf-8"):
            fail(kind + " big text: --decode did not give the text back")

    # 4. shards: val first, then train shards of N tokens, concatenating to the stream
    prefix = os.path.join(tmp, "shards", "s")
    os.makedirs(os.path.dirname(prefix))
    run(zerodp, ["tokenize", "--tokenizer", tj, "--text", bp, "--out-prefix", prefix, "--no-eos",
                 "--shard-tokens", "300000", "--val-tokens", "12345"])
    names = sorted(os.listdir(os.path.dirname(prefix)))
    val = read_ids(prefix + "_val_000000.bin")
    if len(val) != 12345:
        fail("val shard: %d tokens, expected 12345" % len(val))
    stream = list(val)
    train = [n for n in names if n.startswith("s_train_")]
    for j, n in enumerate(train):
        if n != "s_train_%06d.bin" % j:
            fail("shard names %s" % names)
        ids = read_ids(os.path.join(os.path.dirname(prefix), n))
        if j + 1 < len(train) and len(ids) != 300000:
            fail("%s: %d tokens, expected 300000" % (n, len(ids)))
        stream += ids
    compare(kind + " shards", stream, want)
    print("%s: %d documents, %d-token big text: ids identical to tokenizers'" % (kind, len(DOCS), len(want)))


QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def shapes_case(zerodp, tmp):
    """Pre-tokenizers beyond GPT-2's and Llama 3's: every Split behaviour, invert, a string pattern,
    Digits, ByteLevel's prefix space, added tokens with lstrip/rstrip/single_word/normalized."""
    from tokenizers import AddedToken, Regex, pre_tokenizers as pt
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    bl = pt.ByteLevel(add_prefix_space=False, use_regex=False)
    shapes = {
        "removed": pt.Sequence([pt.Split(Regex(r"\s+"), behavior="removed"), bl]),
        "merged_prev": pt.Sequence([pt.Split(Regex(r"[,.;:!?]"), behavior="merged_with_previous"), bl]),
        "merged_next": pt.Sequence([pt.Split(" ", behavior="merged_with_next"), bl]),
        "contiguous": pt.Sequence([pt.Split(Regex(r"\p{P}"), behavior="contiguous"), bl]),
        "invert": pt.Sequence([pt.Split(Regex(r"\p{L}+"), behavior="removed", invert=True), bl]),
        "digits": pt.Sequence([pt.Digits(individual_digits=True), pt.ByteLevel(add_prefix_space=False)]),
        "digits_runs": pt.Sequence([pt.Digits(individual_digits=False), pt.ByteLevel(add_prefix_space=False)]),
        "prefix_space": pt.ByteLevel(add_prefix_space=True),
        "qwen2": pt.Sequence([pt.Split(Regex(QWEN2_PATTERN), behavior="isolated"), bl]),
    }
    for name, pre in shapes.items():
        tok = train_tokenizers.train_gpt2([shakespeare], 400)
        tok.pre_tokenizer = pre
        tok.add_tokens([AddedToken("[X]", lstrip=True, rstrip=True, normalized=False),
                        AddedToken("cat", single_word=True, normalized=True)])
        tok.add_special_tokens([AddedToken("<sep>", normalized=False)])
        tj = os.path.join(tmp, name + ".json")
        tok.save(tj)
        docs = DOCS + ["a  [X]  b [X]x", "cat cats concat (cat) cat. écat caté cat́ cat_ _cat 1cat cat‍", "x<sep>y <sep> z"]
        for i, doc in enumerate(docs):
            if not doc:
                continue
            p = os.path.join(tmp, "%s%d.txt" % (name, i))
            with open(p, "w", encoding="utf-8", newline="") as f:
                f.write(doc)
            want = tok.encode(doc, add_special_tokens=False).ids
            r = run(zerodp, ["tokenize", "--tokenizer", tj, "--text", p, "--out", p + ".bin", "--no-eos"], ok=bool(want))
            if not want:  # (all removed: no tokens, which a token file may not be)
                if r.returncode != 2:
                    fail("%s doc %d: no tokens, exit %d, expected 2" % (name, i, r.returncode))
                continue
            compare("%s doc %d %r" % (name, i, doc[:40]), read_ids(p + ".bin"), want)
        if name == "qwen2":  # a pattern zerodp cuts big texts at: 2 threads on 2.4 MB
            with open(shakespeare, encoding="utf-8") as f:
                big = f.read()[:800000] + "\n".join(DOCS) * 20 + "\nEnd"
                big = big * 2
            bp = os.path.join(tmp, "qwen2-big.txt")
            with open(bp, "w", encoding="utf-8", newline="") as f:
                f.write(big)
            if "Qwen 2 pattern" not in run(zerodp, ["tokenize", "--tokenizer", tj, "--text", bp, "--out", bp + ".bin",
                                                    "--no-eos", "--threads", "2"]).stdout:
                fail("qwen2: the pattern was not recognised")
            compare("qwen2 big text, 2 threads", read_ids(bp + ".bin"), tok.encode(big, add_special_tokens=False).ids)
        print("%s: %d documents, ids identical to tokenizers'" % (name, len(docs)))


def added_case(zerodp, tmp):
    """Many added tokens against tokenizers: leftmost-longest among prefixes of each other, the two
    passes (not normalized first), and every flag zerodp supports."""
    import random
    from tokenizers import AddedToken
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    rng = random.Random(46)
    pieces = ["a", "b", "ab", "<", "|", ">", "é", "中", "x", "1"]
    contents = set()
    while len(contents) < 4000:  # no token starts with a space (below)
        contents.add("".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))))
    tok = train_tokenizers.train_gpt2([shakespeare], 400)
    normal, special = [], []
    for c in sorted(contents):
        flags = dict(lstrip=rng.random() < 0.2, rstrip=rng.random() < 0.2, single_word=rng.random() < 0.1,
                     normalized=rng.random() < 0.5)
        (special if rng.random() < 0.3 else normal).append(AddedToken(c, **flags))
    tok.add_tokens(normal)
    tok.add_special_tokens(special)
    tj = os.path.join(tmp, "added.json")
    tok.save(tj)
    docs = ["".join(rng.choice(pieces + [" ", "  ", "\n", "the ", "é ", "b.", "\t"]) for _ in range(rng.randint(1, 300)))
            for _ in range(200)]
    many = train_tokenizers.train_gpt2([shakespeare], 400)
    many.add_special_tokens(["<|extra_%d|>" % i for i in range(60000)])
    mj = os.path.join(tmp, "many.json")
    many.save(mj)
    extra = ["<|extra_%d|>" % rng.randrange(70000) + rng.choice(["", " ", "x", "<|extra_"]) for _ in range(300)]
    for label, t, path, texts in (("4000 tokens", tok, tj, docs), ("60000 tokens", many, mj, ["".join(extra)] + DOCS[:5])):
        for i, doc in enumerate(texts):
            p = os.path.join(tmp, "added%d.txt" % i)
            with open(p, "w", encoding="utf-8", newline="") as f:
                f.write(doc)
            want = t.encode(doc, add_special_tokens=False).ids
            run(zerodp, ["tokenize", "--tokenizer", path, "--text", p, "--out", p + ".bin", "--no-eos"])
            compare("%s doc %d %r" % (label, i, doc[:40]), read_ids(p + ".bin"), want)
        print("%s: %d documents, ids identical to tokenizers'" % (label, len(texts)))


def malformed_case(zerodp, tmp):
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    tok = train_tokenizers.train_gpt2([shakespeare], 400)
    good = json.loads(tok.to_str())
    text = os.path.join(tmp, "t.txt")
    with open(text, "w") as f:
        f.write("hello world")

    def variant(name, edit, key):
        j = json.loads(json.dumps(good))
        edit(j)
        p = os.path.join(tmp, name + ".json")
        with open(p, "w") as f:
            json.dump(j, f)
        r = run(zerodp, ["tokenize", "--tokenizer", p, "--text", text, "--out", os.path.join(tmp, "o.bin")], ok=False)
        if r.returncode != 2:
            fail("%s: exit %d, expected 2 (%s)" % (name, r.returncode, r.stderr.strip()))
        if p not in r.stderr or key not in r.stderr:
            fail("%s: the message does not name the file and %r: %s" % (name, key, r.stderr.strip()))
        if len(r.stderr) > 400:
            fail("%s: the message is %d characters long" % (name, len(r.stderr)))
        print("%s: %s" % (name, r.stderr.strip()))

    def set_merge(j, i, v):
        j["model"]["merges"][i] = v
    variant("no_merges", lambda j: j["model"].pop("merges"), "model.merges")
    variant("merge_number", lambda j: set_merge(j, 12, 5), "model.merges[12]")
    variant("merge_unknown", lambda j: set_merge(j, 3, "zz qq"), "model.merges[3]")
    variant("merge_long", lambda j: set_merge(j, 7, "x" * 100000), "model.merges[7]")
    variant("vocab_id", lambda j: j["model"]["vocab"].update({"hello": "x" * 5000}), "model.vocab[hello]")
    variant("vocab_negative", lambda j: j["model"]["vocab"].update({"hello": -1}), "model.vocab[hello]")
    variant("model_type", lambda j: j["model"].update({"type": "WordPiece"}), "model.type")
    variant("pre_tokenizer", lambda j: j.update({"pre_tokenizer": {"type": "Whitespace"}}), "pre_tokenizer.type")
    variant("bad_regex", lambda j: j.update({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"},
                                                               "behavior": "Isolated", "invert": False}}),
            "pre_tokenizer.pattern.Regex")
    variant("normalizer", lambda j: j.update({"normalizer": {"type": "NFC"}}), "normalizer")
    variant("added_id", lambda j: j["added_tokens"][0].update({"id": 1 << 40}), "added_tokens[0].id")
    variant("decoder", lambda j: j.update({"decoder": {"type": "WordPiece"}}), "decoder.type")
    # not JSON at all, and a file too big
    p = os.path.join(tmp, "notjson.json")
    with open(p, "w") as f:
        f.write("{\"model\": [1, 2,")
    r = run(zerodp, ["tokenize", "--tokenizer", p, "--text", text, "--out", os.path.join(tmp, "o.bin")], ok=False)
    if r.returncode != 2 or p not in r.stderr:
        fail("truncated JSON: exit %d: %s" % (r.returncode, r.stderr.strip()))
    r = run(zerodp, ["tokenize", "--tokenizer", os.path.join(tmp, "missing.json"), "--text", text, "--out",
                     os.path.join(tmp, "o.bin")], ok=False)
    if r.returncode != 2:
        fail("a missing tokenizer: exit %d" % r.returncode)
    # usage errors
    for args in (["--text", text], ["--text", text, "--out", "a.bin", "--out-prefix", "p"],
                 ["--text", text, "--out-prefix", os.path.join(tmp, "p"), "--shard-tokens", "0"],
                 ["--text", os.path.join(tmp, "nothere.txt"), "--out", os.path.join(tmp, "o.bin")]):
        r = run(zerodp, ["tokenize"] + args, ok=False)
        if r.returncode != 2:
            fail("tokenize %s: exit %d, expected 2" % (" ".join(args), r.returncode))
    # a bad JSON Lines line is named, and nothing is written
    jl = os.path.join(tmp, "bad.jsonl")
    with open(jl, "w") as f:
        f.write('{"text": "ok"}\n\n{"text": 5}\n')
    out = os.path.join(tmp, "never.bin")
    r = run(zerodp, ["tokenize", "--text", jl, "--out", out], ok=False)
    if r.returncode != 2 or "line 3" not in r.stderr or os.path.exists(out):
        fail("a bad JSON Lines line: exit %d, %s" % (r.returncode, r.stderr.strip()))
    print("malformed tokenizers and usage: exit 2 with the file and key named")


def bytes_case(zerodp, tmp):
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    tok = train_tokenizers.train_llama3([shakespeare], 600)
    tj = os.path.join(tmp, "t.json")
    tok.save(tj)
    raw = bytes(range(256)) + b"ok \xff\xfe caf\xc3\xa9 \xc3 \xe4\xb8 broken \xf0\x9f\x91 end\n" * 3
    p = os.path.join(tmp, "raw.txt")
    with open(p, "wb") as f:
        f.write(raw)
    run(zerodp, ["tokenize", "--tokenizer", tj, "--text", p, "--out", p + ".bin", "--no-eos"])
    run(zerodp, ["tokenize", "--decode", "--tokenizer", tj, "--tokens", p + ".bin", "--out", p + ".back"])
    with open(p + ".back", "rb") as f:
        if f.read() != raw:
            fail("invalid UTF-8 did not round-trip through a BPE tokenizer")
    # the byte tokenizer: llm.c's layout, one uint16 token per byte, V = 256
    run(zerodp, ["tokenize", "--text", p, "--out", p + ".bytes.bin"])
    with open(p + ".bytes.bin", "rb") as f:
        d = f.read()
    want = struct.pack("<3i", 20240520, 1, len(raw)) + bytes(1012) + b"".join(struct.pack("<H", b) for b in raw)
    if d != want:
        fail("the byte tokenizer's file is not llm.c's layout of the bytes")
    run(zerodp, ["tokenize", "--decode", "--tokens", p + ".bytes.bin", "--out", p + ".bytes.back"])
    with open(p + ".bytes.back", "rb") as f:
        if f.read() != raw:
            fail("the byte tokenizer did not round-trip")
    print("invalid UTF-8 round-trips; the byte tokenizer writes llm.c's layout")


def main():
    zerodp, case = os.path.abspath(sys.argv[1]), sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="zerodp-tokenizer-") as tmp:
        if case in ("gpt2", "llama3"):
            reference_case(zerodp, case, tmp)
        elif case == "shapes":
            shapes_case(zerodp, tmp)
        elif case == "added":
            added_case(zerodp, tmp)
        elif case == "malformed":
            malformed_case(zerodp, tmp)
        elif case == "bytes":
            bytes_case(zerodp, tmp)
        else:
            fail("unknown case " + case)


if __name__ == "__main__":
    main()
