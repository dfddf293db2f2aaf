"""Hostile input files end to end (docs/limits.md): each file is crafted the way an attacker would
(JSON nested 100,000 deep, model dimensions of two billion, a tensor of block two billion, manifest
sizes near 2^63, a token file whose header lies, a FIFO where a file should be) and handed to every
command that reads it: `zerodp train --init/--data/--resume`, `zerodp sample`, `zerodp ckpt inspect`
and `zerodp ckpt consolidate`. Each run must

  - exit with code 2 (bad input), having written nothing where it was asked to write;
  - say what and where: the message names the offending file;
  - keep every line of its output short (under 300 characters: a description, never a dump);
  - end at once (about half a second, MPI start-up included; the test allows 10 s, a hang guard);
  - use little memory: its peak RSS (wait4) stays under 200 MB, and it runs under an address-space
    cap of 8 GiB so that a regression fails here instead of taking the machine down.

`zerodp sample` and `zerodp init` also refuse a valid model too large for this machine, from its
size, before allocating it.

Usage: hostile_tests.py ZERODP CASE, CASE one of: weights, sample, checkpoint, tokens.
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import time

from zdptest import harness as zt

ZERODP, CASE = zt.driver_args(__doc__)
WORK = zt.workdir(f"hostile-{CASE}")

MAX_SECONDS = 10.0  # a hang guard: the measured times (printed) are ~0.5 s, MPI start-up included; CI runs loaded
MAX_RSS_KB = 200 * 1024
MAX_LINE = 300
AS_CAP = 8 << 30


# ---- running one attack ------------------------------------------------------------------------

def run_measured(args, timeout=60):
    """Runs zerodp `args` under the address-space cap, reaping it with os.wait4 to get its own peak
    RSS: (Result, peak RSS in kB). The harness's launch() reports no memory, hence this local helper."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))
    start = time.monotonic()
    outf = open(os.path.join(WORK, ".stdout"), "w+b")
    errf = open(os.path.join(WORK, ".stderr"), "w+b")
    p = subprocess.Popen([ZERODP] + list(args), env=zt.ENV, stdout=outf, stderr=errf, preexec_fn=cap)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid == p.pid:
            break
        if time.monotonic() > deadline:
            p.kill()
            os.wait4(p.pid, 0)
            zt.fail(f"timed out after {timeout} s: zerodp {' '.join(args)}")
        time.sleep(0.005)
    p.returncode = os.waitstatus_to_exitcode(status)
    secs = time.monotonic() - start
    outf.seek(0)
    errf.seek(0)
    out, err = outf.read().decode(errors="replace"), errf.read().decode(errors="replace")
    outf.close()
    errf.close()
    return zt.Result(p.returncode, out, err, secs), usage.ru_maxrss


checks = zt.Checks()


def expect_refused(what, args, names, needles=(), no_output=None):
    """Runs zerodp `args`; it must be refused as described in the module's docstring. `names`: paths
    the message must name (any one of them); `needles`: more text it must hold; `no_output`: a path
    that must not exist afterwards."""
    r, rss_kb = run_measured(args)
    text = r.out + r.err
    ok = checks.check(r.code == 2, f"{what}: exit code 2 (got {r.code})\n{text[-1500:]}")
    ok &= checks.check(any(n in r.err for n in names), f"{what}: the message names {names[0]}\n{r.err[-1500:]}")
    for n in needles:
        ok &= checks.check(n in r.err, f"{what}: the message says '{n}'\n{r.err[-1500:]}")
    long_lines = [line for line in text.splitlines() if len(line) >= MAX_LINE]
    ok &= checks.check(not long_lines, f"{what}: every line under {MAX_LINE} characters "
                                       f"(one has {max(map(len, long_lines), default=0)})")
    ok &= checks.check(r.secs < MAX_SECONDS, f"{what}: refused in {r.secs:.2f} s (limit {MAX_SECONDS} s)")
    ok &= checks.check(rss_kb < MAX_RSS_KB, f"{what}: peak RSS {rss_kb // 1024} MB (limit {MAX_RSS_KB // 1024} MB)")
    if no_output:
        ok &= checks.check(not os.path.exists(no_output), f"{what}: {no_output} was not written")
    if ok:
        print(f"ok: {what}: exit 2 in {r.secs:.2f} s, {rss_kb // 1024} MB: {r.err.strip().splitlines()[-1][:160]}")


# ---- crafting files ----------------------------------------------------------------------------

def nested(depth):
    return "[" * depth + "]" * depth


def read_st(path):
    """(header dict, data bytes) of a safetensors file."""
    blob = zt.read_bytes(path)
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write_st(path, header, data, header_text=None):
    text = (header_text if header_text is not None else json.dumps(header)).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return path


def variant(name, edit=None, text_edit=None):
    """A copy of the good model with its header edited (as a dict, then as text)."""
    header, data = read_st(GOOD)
    if edit:
        edit(header)
    text = json.dumps(header)
    if text_edit:
        text = text_edit(text)
    return write_st(os.path.join(WORK, name), None, data, header_text=text)


def with_metadata(key, value):
    def edit(h):
        h["__metadata__"][key] = value
    return edit


def write_manifest(ckpt_dir, text):
    with open(os.path.join(ckpt_dir, "manifest.json"), "w") as f:
        f.write(text)
    with open(os.path.join(ckpt_dir, "manifest.crc32c"), "w") as f:
        f.write(f"{zt.crc32c(text.encode()):08x}  manifest.json\n")


def damaged_checkpoint(name, edit=None, text_edit=None):
    """A copy of the good checkpoint whose manifest is edited (dict, then text), checksum updated."""
    d = os.path.join(WORK, name)
    shutil.copytree(GOOD_CKPT, d)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    if edit:
        edit(m)
    text = json.dumps(m, indent=2)
    if text_edit:
        text = text_edit(text)
    write_manifest(d, text)
    return d


# ---- inputs ------------------------------------------------------------------------------------

TOKENS, GOOD = zt.make_inputs(ZERODP, WORK, layers=2, heads=2, embd=16, vocab=256, ctx=16, text_bytes=20000)
TRAIN = ["--steps", "1", "--micro-batch", "1", "--seq", "8"]


def weights_attacks():
    """(what, path, needles) of hostile model files."""
    deep = nested(100000)

    def deep_shape(text):
        return text.replace('"shape": [16, 16]', '"shape": ' + deep, 1)

    def block_2e9(h):
        h["h.2000000000.ln_1.weight"] = h.pop("h.0.ln_1.weight")

    def many_buffers(h):
        empty = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
        for p in ("", "transformer."):
            for b in range(2):
                for buf in ("attn.bias", "attn.masked_bias"):
                    h[f"{p}h.{b}.{buf}"] = dict(empty)
        h["lm_head.weight"] = dict(empty)
        h["transformer.lm_head.weight"] = dict(empty)

    out = [
        ("100k-deep nesting in a shape", variant("deep_shape.safetensors", text_edit=deep_shape),
         ["nested deeper than 3 levels"]),
        ("100k-deep nesting in __metadata__", variant("deep_meta.safetensors",
                                                      text_edit=lambda t: t.replace('"n_layer": "2"',
                                                                                    '"n_layer": ' + deep, 1)),
         ["nested deeper than 3 levels"]),
        ("tensor h.2000000000.ln_1.weight", variant("block.safetensors", block_2e9),
         ["h.2000000000.ln_1.weight", "beyond n_layer 2"]),
        ("n_layer 65536 (within limits) in a 2-layer file", variant("absent.safetensors", with_metadata("n_layer", "65536")),
         ["missing tensor 'h.2.ln_1.weight'"]),
        ("more tensors than any 2-layer model has", variant("many.safetensors", many_buffers), ["more than a GPT-2"]),
        ("a 10 KB metadata value", variant("long_meta.safetensors", with_metadata("n_layer", "9" * 10000)),
         ["(10000 bytes)"]),
    ]
    for key in ("n_layer", "n_embd", "vocab_size", "n_ctx", "n_head"):
        out.append((f"{key} = 2e9", variant(f"big_{key}.safetensors", with_metadata(key, "2000000000")),
                    [key, "over the limit"]))
    return out


if CASE == "weights":
    for what, path, needles in weights_attacks():
        expect_refused(f"train --init: {what}", ["train", "--init", path, "--data", TOKENS] + TRAIN, [path], needles)

elif CASE == "sample":
    for what, path, needles in weights_attacks():
        expect_refused(f"sample: {what}", ["sample", "--model", path, "--tokens", "4"], [path], needles)
    # A valid model whose context needs more activation memory than any machine has: refused from its
    # size, before anything is allocated. n_ctx = 2^24 with C = 1: wpe is only 64 MB of F32.
    header = {"__metadata__": {"n_layer": "1", "n_head": "1", "n_embd": "1", "vocab_size": "256",
                               "n_ctx": str(1 << 24)}}
    shapes = [("wte.weight", [256, 1]), ("wpe.weight", [1 << 24, 1]), ("ln_f.weight", [1]), ("ln_f.bias", [1])]
    for name, shape in [("ln_1.weight", [1]), ("ln_1.bias", [1]), ("attn.c_attn.weight", [1, 3]),
                        ("attn.c_attn.bias", [3]), ("attn.c_proj.weight", [1, 1]), ("attn.c_proj.bias", [1]),
                        ("ln_2.weight", [1]), ("ln_2.bias", [1]), ("mlp.c_fc.weight", [1, 4]), ("mlp.c_fc.bias", [4]),
                        ("mlp.c_proj.weight", [4, 1]), ("mlp.c_proj.bias", [1])]:
        shapes.append(("h.0." + name, shape))
    offset = 0
    for name, shape in shapes:
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    huge = write_st(os.path.join(WORK, "long_context.safetensors"), header, b"")
    os.truncate(huge, os.path.getsize(huge) + offset)  # zeros, as a hole
    expect_refused("sample: a valid model needing ~1 PiB of activations", ["sample", "--model", huge, "--tokens", "4"],
                   [huge], ["activations", "more than this machine"])
    # The same for init: C = 2^18 is within the limits, but one block is 3 TB of fp32.
    out = os.path.join(WORK, "wide.safetensors")
    expect_refused("init: a valid model whose one block is 3 TB",
                   ["init", "--out", out, "--layers", "1", "--heads", "1", "--embd", str(1 << 18), "--vocab", "256",
                    "--ctx", "16"], ["GPT-2 L1 H1 C262144"], ["more than this machine"], no_output=out)
    expect_refused("init: n_layer 2e9", ["init", "--out", out, "--layers", "2000000000"], ["n_layer"],
                   ["over the limit of 65536"], no_output=out)

elif CASE == "checkpoint":
    save = os.path.join(WORK, "save")
    r = zt.run(ZERODP, ["train", "--init", GOOD, "--data", TOKENS, "--steps", "1", "--micro-batch", "2", "--seq", "8",
                        "--save-dir", save], timeout=120)
    zt.check(r.code == 0, "a good one-rank checkpoint", r.err)
    GOOD_CKPT = os.path.join(save, "step-1")
    near63 = (1 << 63) - 1

    def deep_training(text):
        return text.replace('"training": {', '"training": {"deep": ' + nested(100000) + ",", 1)

    def set_path(*keys_value):
        *keys, value = keys_value

        def edit(m):
            o = m
            for k in keys[:-1]:
                o = o[k]
            o[keys[-1]] = value
        return edit

    def big_tokens(m):
        m["data"]["micro_batch"] = 1 << 24
        m["data"]["accum"] = 1 << 24
        m["world_size"] = 1 << 20

    attacks = [
        ("100k-deep nesting in the manifest", damaged_checkpoint("deep", text_edit=deep_training),
         ["nested deeper than 32 levels"]),
        ("manifest n_layer 2e9", damaged_checkpoint("layers", set_path("model", "n_layer", 2000000000)),
         ["model.n_layer"]),
        ("manifest n_embd 2e9", damaged_checkpoint("embd", set_path("model", "n_embd", 2000000000)), ["model.n_embd"]),
        ("manifest vocab_size 2e9", damaged_checkpoint("vocab", set_path("model", "vocab_size", 2000000000)),
         ["model.vocab_size"]),
        ("manifest n_ctx 2e9", damaged_checkpoint("ctx", set_path("model", "n_ctx", 2000000000)), ["model.n_ctx"]),
        ("manifest n_layer 65536 with 3 units", damaged_checkpoint("units", set_path("model", "n_layer", 65536)),
         ["'units'"]),
        ("unit numel 2^63-1", damaged_checkpoint("numel", lambda m: m["units"][0].update(numel=near63)),
         ["units[0].numel"]),
        ("unit shard 2^64-1", damaged_checkpoint("shard", lambda m: m["units"][0].update(shard=(1 << 64) - 1)),
         ["units[0].shard"]),
        ("range end 2^63-1", damaged_checkpoint("range", lambda m: m["files"][0]["ranges"][0].update(end=near63)),
         ["files[0].ranges[0]"]),
        ("file bytes 2^63-1", damaged_checkpoint("bytes", lambda m: m["files"][0].update(bytes=near63)),
         ["truncated"]),
        ("tokens a step over 2^63", damaged_checkpoint("tps", big_tokens), ["data.tokens_per_step"]),
        ("step·tokens a step over 2^63", damaged_checkpoint("next", set_path("step", near63 // 2)),
         ["data.next_token"]),
        ("a 10 KB setting in training", damaged_checkpoint("setting", set_path("training", "optimizer", "o" * 10000)),
         ["(10000 bytes)"]),
    ]
    for what, d, needles in attacks:
        manifest = os.path.join(d, "manifest.json")
        names = [manifest, d]
        out = os.path.join(WORK, "consolidated.safetensors")
        expect_refused(f"train --resume: {what}", ["train", "--resume", d, "--data", TOKENS] + TRAIN, names, needles)
        expect_refused(f"ckpt inspect: {what}", ["ckpt", "inspect", d], names, needles)
        expect_refused(f"ckpt consolidate: {what}", ["ckpt", "consolidate", d, "--out", out], names, needles,
                       no_output=out)
    # A `latest` pointer of 1 GiB (sparse): refused from its size.
    ptr = os.path.join(WORK, "pointer")
    shutil.copytree(save, ptr)
    latest = os.path.join(ptr, "latest")
    with open(latest, "r+b") as f:
        f.truncate(1 << 30)
    expect_refused("ckpt inspect: a 1 GiB latest", ["ckpt", "inspect", ptr], [latest], ["over the 4096"])

elif CASE == "tokens":
    def llmc(count, payload):
        hdr = struct.pack("<3i", 20240520, 1, count) + b"\0" * (1024 - 12)
        return hdr + payload

    def token_file(name, blob, size=None):
        path = os.path.join(WORK, name)
        with open(path, "wb") as f:
            f.write(blob)
            if size:
                f.truncate(size)
        return path

    attacks = [
        ("a header claiming 2^31-1 tokens over 10", token_file("max.bin", llmc(2**31 - 1, b"\1\0" * 10)),
         ["2147483647 tokens"]),
        ("a header claiming 5 tokens over 4 GiB (sparse)", token_file("sparse.bin", llmc(5, b""), size=4 << 30),
         ["announces 5 tokens"]),
        ("a negative count", token_file("neg.bin", llmc(-2**31, b"\1\0" * 2)), ["-2147483648 tokens"]),
    ]
    for what, path, needles in attacks:
        expect_refused(f"train --data: {what}", ["train", "--init", GOOD, "--data", path] + TRAIN, [path], needles)
    fifo = os.path.join(WORK, "fifo.bin")
    os.mkfifo(fifo)
    expect_refused("train --data: a FIFO with no writer", ["train", "--init", GOOD, "--data", fifo] + TRAIN, [fifo],
                   ["not a regular file"])
    fifo_model = os.path.join(WORK, "fifo.safetensors")
    os.mkfifo(fifo_model)
    expect_refused("train --init: a FIFO with no writer", ["train", "--init", fifo_model, "--data", TOKENS] + TRAIN,
                   [fifo_model], ["not a regular file"])

else:
    sys.exit(f"unknown case {CASE}")

if checks.failures:
    print(f"{CASE}: {len(checks.failures)} check(s) failed")
    sys.exit(1)
shutil.rmtree(WORK, ignore_errors=True)
print(f"{CASE}: all checks passed")
