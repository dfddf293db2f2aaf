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
  qwen25, llama2, mistral
                the same for tokenizers built like Qwen 2.5's (byte-level, NFC normalizer), Llama 2's
                (SentencePiece-style: Prepend + Replace normalizer, byte fallback, <s> template) and
                Mistral's (Metaspace pre-tokenizer and decoder) (zdptest/train_shapes.py): documents are
                surrounded by the template's tokens (add_special_tokens=True), and --decode gives
                tokenizers' decode.
  normalizers   every normalizer, Metaspace's schemes, merges across words, unknown tokens fused or not,
                ignore_merges, normalized added tokens: ids and decoding against tokenizers.
  shapes        other pre-tokenizers (Split's behaviours, invert, a string pattern, Digits, ByteLevel's
                prefix space) and added tokens' flags, each against tokenizers on the same texts.
  added         4,000 added tokens that are prefixes of each other and overlap, special or not, normalized
                or not, with lstrip/rstrip/single_word, on random texts made of their pieces; and 60,000
                special tokens (the trie that finds them, the pass that splits them out first).
  malformed     broken tokenizer.json files: exit 2, a message naming the file and the key.
  bytes         invalid UTF-8 through a BPE tokenizer (byte-level, or with byte fallback) round-trips
                through --decode; the byte
                tokenizer's file is byte for byte llm.c's uint16 layout.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

from zdptest import train_shapes, train_tokenizers, unseen_texts


# Byte-level shapes (zdptest), then the ones with a normalizer or SentencePiece-style (train_shapes).
TRAINERS = dict(train_tokenizers.TRAINERS, **train_shapes.TRAINERS)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

DOCS = unseen_texts.DOCS


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


def compare_documents(zerodp, tj, tok, name, docs, tmp):
    """zerodp's ids for each of `docs` (one text file each, one `zerodp tokenize` run over them all:
    a document's ids do not depend on its neighbours) against tokenizers'; when the stream differs,
    each document alone, so that the message names the first one that differs. Returns the ids."""
    wants, paths = [], []
    for i, doc in enumerate(docs):
        p = os.path.join(tmp, "%s%d.txt" % (name, i))
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(doc)
        paths.append(p)
        wants.append(tok.encode(doc, add_special_tokens=False).ids)
    out = os.path.join(tmp, name + "-docs.bin")
    run(zerodp, ["tokenize", "--tokenizer", tj, "--text"] + paths + ["--out", out, "--no-eos"])
    got = read_ids(out)
    if got != [t for w in wants for t in w]:
        for i, (p, want) in enumerate(zip(paths, wants)):
            run(zerodp, ["tokenize", "--tokenizer", tj, "--text", p, "--out", p + ".bin", "--no-eos"])
            compare("%s doc %d %r" % (name, i, docs[i][:40]), read_ids(p + ".bin"), want)
        compare("%s, %d documents in one run" % (name, len(docs)), got, [t for w in wants for t in w])
    return wants


def reference_case(zerodp, kind, tmp):
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")
    tok = TRAINERS[kind]([shakespeare], 1500)
    tj = os.path.join(tmp, kind + ".json")
    tok.save(tj)
    byte_level = kind in ("gpt2", "llama3")  # no normalizer: decoding gives the text back byte for byte

    def ref(s):
        return tok.encode(s, add_special_tokens=False).ids

    def ref_document(s):
        """What zerodp writes for a document: the post-processor's template (Llama 2's <s> $A), or the
        end-of-text token before."""
        if kind in ("llama2", "mistral"):
            return tok.encode(s, add_special_tokens=True).ids
        eos = {"gpt2": "<|endoftext|>", "llama3": "<|begin_of_text|>", "qwen25": "<|endoftext|>"}[kind]
        return [tok.token_to_id(eos)] + ref(s)

    def check_decode(label, ids, back_path, text):
        with open(back_path, "rb") as f:
            back = f.read()
        want = tok.decode(ids, skip_special_tokens=False)
        if back != want.encode("utf-8") or (byte_level and back != text.encode("utf-8")):
            fail("%s: --decode gave %r, tokenizers' decode %r" % (label, back[:60], want[:60]))

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
        check_decode("%s doc %d" % (kind, i), ref(doc), p + ".back", doc)
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
        want += ref_document(doc)
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
    check_decode(kind + " big text", want, bp + ".back", big)

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
        empty = [d for d in docs if d and not tok.encode(d, add_special_tokens=False).ids]
        for i, doc in enumerate(empty):  # (all removed: no tokens, which a token file may not be)
            p = os.path.join(tmp, "%s-empty%d.txt" % (name, i))
            with open(p, "w", encoding="utf-8", newline="") as f:
                f.write(doc)
            r = run(zerodp, ["tokenize", "--tokenizer", tj, "--text", p, "--out", p + ".bin", "--no-eos"], ok=False)
            if r.returncode != 2:
                fail("%s doc %r: no tokens, exit %d, expected 2" % (name, doc[:40], r.returncode))
        compare_documents(zerodp, tj, tok, name, [d for d in docs if d and d not in empty], tmp)
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


def normalizers_case(zerodp, tmp):
    """Normalizers and SentencePiece-style shapes beyond those of Qwen 2.5, Llama 2 and Mistral, each
    against tokenizers (ids, and --decode against its decode) on the same texts, with added tokens
    normalized and not: every Unicode form, Lowercase, Strip, Replace with a regex; Metaspace's
    prepend schemes and split; merges across the "▁" between words; unknown tokens where byte
    tokens are missing, fused or not; ignore_merges."""
    import random
    from tokenizers import AddedToken, Regex, Tokenizer, normalizers as nz
    shakespeare = os.path.join(ROOT, "data", "tinyshakespeare.txt")

    def byte_level(normalizer):
        return lambda: train_shapes.train_qwen25([shakespeare], 500, normalizer)

    def edited(make, edit):
        def build():
            j = json.loads(make().to_str())
            edit(j)
            return Tokenizer.from_str(json.dumps(j))
        return build

    def drop_bytes(j):  # no byte tokens for 0xE0..0xFF: unknown tokens for most non-Latin characters
        for b in range(0xE0, 0x100):
            del j["model"]["vocab"]["<0x%02X>" % b]

    llama2 = lambda: train_shapes.train_llama2([shakespeare], 600)  # noqa: E731
    shapes = {
        "nfkc": byte_level(nz.NFKC()),
        "nfd": byte_level(nz.NFD()),
        "nfkd": byte_level(nz.NFKD()),
        "lowercase": byte_level(nz.Sequence([nz.NFC(), nz.Lowercase()])),
        "nfc_prefix_space": edited(byte_level(nz.NFC()), lambda j: j.update(
            {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}})),
        "strip_replace": byte_level(nz.Sequence([nz.Strip(left=True, right=True), nz.NFKC(),
                                                 nz.Replace(Regex(r"\s+"), " "), nz.Replace("e", "E")])),
        "llama2_joined": lambda: train_shapes.train_llama2([shakespeare], 600, split_words=False),
        "llama2_unk": edited(llama2, drop_bytes),
        "llama2_unk_unfused": edited(llama2, lambda j: (drop_bytes(j), j["model"].update({"fuse_unk": False}))),
        "llama2_ignore_merges": edited(llama2, lambda j: j["model"].update({"ignore_merges": True})),
        "metaspace_always_split": lambda: train_shapes.train_mistral([shakespeare], 600, "always", True),
        "metaspace_never": lambda: train_shapes.train_mistral([shakespeare], 600, "never", False),
        "metaspace_nfkc": edited(lambda: train_shapes.train_mistral([shakespeare], 600),
                                 lambda j: j.update({"normalizer": {"type": "NFKC"}})),
    }
    rng = random.Random(48)
    pieces = ["cat", " ", "  ", "[X]", "<sep>", "\u00c5", "A\u030a", "\ufb01", "e\u0301", "中", "x", "\n", "\u0130"]
    docs = DOCS + ["a  [X]  b [X]x <sep>cat", "cat cats concat (cat) cat. Cat CAT \u0130cat",
                   "".join(rng.choice(pieces) for _ in range(400))]
    for name, make in shapes.items():
        tok = make()
        tok.add_tokens([AddedToken("[X]", lstrip=True, rstrip=True, normalized=False),
                        AddedToken("Cat", single_word=True, normalized=True)])
        tok.add_special_tokens([AddedToken("<sep>", normalized=False)])
        tj = os.path.join(tmp, name + ".json")
        tok.save(tj)
        kept = [d for d in docs if tok.encode(d, add_special_tokens=False).ids]
        wants = compare_documents(zerodp, tj, tok, name, kept, tmp)
        # --decode: the whole stream, and the first documents alone (a text's start is where
        # SentencePiece-style decoders drop the prepended space).
        decodes = [("%d documents" % len(kept), os.path.join(tmp, name + "-docs.bin"), [t for w in wants for t in w])]
        for i in range(3):
            p = os.path.join(tmp, "%s%d.txt" % (name, i))
            run(zerodp, ["tokenize", "--tokenizer", tj, "--text", p, "--out", p + ".bin", "--no-eos"])
            decodes.append(("doc %d" % i, p + ".bin", wants[i]))
        for label, tokens, want in decodes:
            run(zerodp, ["tokenize", "--decode", "--tokenizer", tj, "--tokens", tokens, "--out", tokens + ".back"])
            with open(tokens + ".back", "rb") as f:
                back = f.read()
            if back != tok.decode(want, skip_special_tokens=False).encode("utf-8"):
                fail("%s %s: --decode gave %r, tokenizers' decode %r" % (name, label, back[:60],
                                                                        tok.decode(want, skip_special_tokens=False)[:60]))
        if name in ("llama2_joined", "metaspace_always_split", "nfkc"):  # big texts cut for 2 threads
            with open(shakespeare, encoding="utf-8") as f:
                big = (f.read()[:600000] + "\n".join(DOCS)) * 2
            bp = os.path.join(tmp, name + "-big.txt")
            with open(bp, "w", encoding="utf-8", newline="") as f:
                f.write(big)
            run(zerodp, ["tokenize", "--tokenizer", tj, "--text", bp, "--out", bp + ".bin", "--no-eos", "--threads", "2"])
            compare(name + " big text, 2 threads", read_ids(bp + ".bin"), tok.encode(big, add_special_tokens=False).ids)
        print("%s: %d documents, ids and decoding identical to tokenizers'" % (name, len(docs)))


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
    variant("normalizer", lambda j: j.update({"normalizer": {"type": "Precompiled", "precompiled_charsmap": "x" * 9000}}),
            "normalizer.type")
    variant("normalizer_nested", lambda j: j.update({"normalizer": {"type": "Sequence", "normalizers": [
        {"type": "NFC"}, {"type": "Sequence", "normalizers": []}]}}), "normalizer.normalizers[1]")
    variant("normalizer_steps", lambda j: j.update({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}] * 100}}),
            "normalizer.normalizers")
    variant("replace_pattern", lambda j: j.update({"normalizer": {"type": "Replace", "pattern": {"Glob": "*"},
                                                                  "content": "x"}}), "normalizer.pattern")
    variant("prepend_long", lambda j: j.update({"normalizer": {"type": "Prepend", "prepend": "\u2581" * 100000}}),
            "normalizer.prepend")
    variant("metaspace_scheme", lambda j: j.update({"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                                                                      "prepend_scheme": "sometimes", "split": False}}),
            "pre_tokenizer.prepend_scheme")
    variant("metaspace_replacement", lambda j: j.update({"pre_tokenizer": {"type": "Metaspace", "replacement": "ab"}}),
            "pre_tokenizer.replacement")
    variant("metaspace_sequence", lambda j: j.update({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Metaspace", "replacement": "\u2581"}]}}), "pre_tokenizer.pretokenizers[0]")
    variant("byte_fallback", lambda j: j["model"].update({"byte_fallback": True}), "model.byte_fallback")
    variant("template_unknown", lambda j: j.update({"post_processor": {
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {}}}), "post_processor.single[0].SpecialToken.id")
    variant("template_id", lambda j: j.update({"post_processor": {
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [99999], "tokens": ["<s>"]}}}}), "post_processor")
    variant("sp_decoder", lambda j: j.update({"pre_tokenizer": None, "decoder": {"type": "Sequence", "decoders": [
        {"type": "Strip", "content": " ", "start": -1, "stop": 0}]}}), "decoder.decoders[0].start")
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
    # a SentencePiece-style vocabulary: each invalid byte its <0xAB> token (byte fallback), decoded to itself
    sp = os.path.join(tmp, "llama2.json")
    train_shapes.train_llama2([shakespeare], 600).save(sp)
    run(zerodp, ["tokenize", "--tokenizer", sp, "--text", p, "--out", p + ".sp.bin", "--no-eos"])
    run(zerodp, ["tokenize", "--decode", "--tokenizer", sp, "--tokens", p + ".sp.bin", "--out", p + ".sp.back"])
    with open(p + ".sp.back", "rb") as f:
        if f.read() != raw:
            fail("invalid UTF-8 did not round-trip through a SentencePiece-style tokenizer with byte fallback")
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
        if case in TRAINERS:
            reference_case(zerodp, case, tmp)
        elif case == "shapes":
            shapes_case(zerodp, tmp)
        elif case == "normalizers":
            normalizers_case(zerodp, tmp)
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
