#!/usr/bin/env python3
"""Regenerates the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from real files that
zerodp makes, plus a few malformed ones that reach the readers' less travelled paths.

  make_corpus.py ZERODP [MPIRUN]

ZERODP is a built `zerodp` binary; MPIRUN (default: mpirun) runs the tiny two-rank training whose
checkpoint gives the manifest seeds. Every file stays small (the largest a few kB): libFuzzer takes
the largest seed as its default input size limit, and the fuzzers mutate small inputs faster.
Files of a corpus directory that this script does not write (reproducers of findings, named
crash-*/oom-*/timeout-*/repro-*) are left alone."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def run(cmd, cwd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, timeout=300)


def corpus_dir(target):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):  # regenerate ours; keep reproducers
        if not re.match(r"(crash|oom|timeout|leak|slow-unit|repro)-", name):
            os.remove(os.path.join(d, name))
    return d


def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(HERE, "corpus", target, name), "wb") as f:
        f.write(data)


def safetensors_bytes(header, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def main():
    zerodp = os.path.abspath(sys.argv[1])
    mpirun = sys.argv[2] if len(sys.argv) > 2 else "mpirun"
    for t in ("safetensors", "tokens", "manifest", "ds_config"):
        corpus_dir(t)
    tmp = tempfile.mkdtemp(prefix="zerodp-corpus-")
    try:
        # ---- real files: a tiny model, tokens, and a two-rank checkpoint of a few steps
        run([zerodp, "init", "--out", "tiny.safetensors", "--layers", "1", "--heads", "1", "--embd", "4",
             "--vocab", "16", "--ctx", "4", "--seed", "1"], tmp)
        run([zerodp, "init", "--out", "two.safetensors", "--layers", "2", "--heads", "2", "--embd", "4",
             "--vocab", "8", "--ctx", "8", "--seed", "2"], tmp)
        with open(os.path.join(ROOT, "data", "tinyshakespeare.txt"), "rb") as f:
            text = f.read(400)
        # Bytes below 16 only, so the tiny model's vocabulary takes them.
        with open(os.path.join(tmp, "small.txt"), "wb") as f:
            f.write(bytes(b % 16 for b in text))
        run([zerodp, "tokenize", "--text", "small.txt", "--out", "small.bin"], tmp)
        run([mpirun, "-n", "2", "--oversubscribe", zerodp, "train", "--init", "tiny.safetensors", "--data",
             "small.bin", "--steps", "2", "--micro-batch", "1", "--seq", "4", "--zero-stage", "3",
             "--save-dir", "ck3", "--log-every", "0"], tmp)
        run([mpirun, "-n", "1", zerodp, "train", "--init", "tiny.safetensors", "--data", "small.bin", "--steps", "1",
             "--micro-batch", "2", "--seq", "4", "--accum", "2", "--zero-stage", "0", "--optimizer", "SGD",
             "--momentum", "0.9", "--dtype", "bf16", "--save-dir", "ck0", "--log-every", "0"], tmp)

        def read(rel):
            with open(os.path.join(tmp, rel), "rb") as f:
                return f.read()

        # ---- safetensors
        put("safetensors", "init_tiny.safetensors", read("tiny.safetensors"))
        put("safetensors", "init_two_layers.safetensors", read("two.safetensors"))
        put("safetensors", "checkpoint_rank1.safetensors", read("ck3/step-2/rank-00001.safetensors"))
        # (Debian's python3, which has numpy; see tests/reference/CMakeLists.txt)
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        subprocess.run([py, os.path.join(ROOT, "scripts", "test", "safetensors_io.py"), "write",
                        os.path.join(HERE, "corpus", "safetensors", "f32_f16_bf16_empty_metadata.safetensors")],
                       check=True)
        put("safetensors", "scalar_and_metadata.safetensors",
            safetensors_bytes({"__metadata__": {"format": "pt"}, "s": {"dtype": "BF16", "shape": [],
                                                                        "data_offsets": [0, 2]}}, b"\x80\x3f"))
        put("safetensors", "bad_overlapping.safetensors",
            safetensors_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
        put("safetensors", "bad_huge_shape.safetensors",
            safetensors_bytes({"a": {"dtype": "F16", "shape": [4294967296, 4294967296, 4],
                                     "data_offsets": [0, 0]}}))
        put("safetensors", "bad_offsets_past_end.safetensors",
            safetensors_bytes({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}}))
        put("safetensors", "bad_header_length.safetensors", struct.pack("<Q", 2**63 + 5) + b"{}")
        put("safetensors", "bad_dtype_i64.safetensors",
            safetensors_bytes({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)))
        put("safetensors", "bad_deep_header.safetensors", safetensors_bytes(json.loads("[" * 40 + "]" * 40)))

        # ---- token files
        small = read("small.bin")
        put("tokens", "llmc_bytes.bin", small)
        put("tokens", "raw_bytes.bin", small[1024:])
        gpt2 = [0, 1, 255, 256, 50255, 50256, 15496, 11, 995, 0]
        put("tokens", "raw_gpt2_vocab.bin", struct.pack(f"<{len(gpt2)}H", *gpt2))
        put("tokens", "llmc_gpt2_vocab.bin",
            struct.pack("<3i", 20240520, 1, len(gpt2)) + bytes(1024 - 12) + struct.pack(f"<{len(gpt2)}H", *gpt2))
        put("tokens", "bad_llmc_count.bin", struct.pack("<3i", 20240520, 1, 2**31 - 1) + bytes(1024 - 12) + b"\x01\x00")
        put("tokens", "bad_llmc_version.bin", struct.pack("<3i", 20240520, 2, 1) + bytes(1024 - 12) + b"\x01\x00")
        put("tokens", "bad_short_header.bin", struct.pack("<3i", 20240520, 1, 1))
        put("tokens", "bad_odd_length.bin", b"\x01\x00\x02")
        put("tokens", "bad_token_65535.bin", b"\x01\x00\xff\xff")
        # uint32 tokens (header [1] = 2), above uint16's range; an unknown width
        put("tokens", "llmc_u32.bin", struct.pack("<3i", 20240520, 2, 4) + bytes(1024 - 12)
            + struct.pack("<4I", 5, 50256, 70000, 0))
        put("tokens", "bad_llmc_version3.bin", struct.pack("<3i", 20240520, 3, 1) + bytes(1024 - 12) + b"\x01\x00")

        # ---- manifests
        m3 = read("ck3/step-2/manifest.json")
        m0 = read("ck0/step-1/manifest.json")
        put("manifest", "w2_stage3_adamw.json", m3)
        put("manifest", "w1_stage0_sgd_bf16.json", m0)
        j = json.loads(m3)
        j["data"]["micro_batch"] = 2**62
        put("manifest", "bad_overflowing_batch.json", json.dumps(j))
        j = json.loads(m3)
        j["files"][1]["ranges"] = j["files"][0]["ranges"]
        put("manifest", "bad_overlapping_ranges.json", json.dumps(j))
        j = json.loads(m3)
        j["model"]["n_layer"] = 2**31 - 1
        put("manifest", "bad_huge_model.json", json.dumps(j))
        put("manifest", "bad_not_object.json", "[1, 2, 3]")

        # ---- DeepSpeed configs: every one the tests use (test_config.cpp's raw strings, the CLI
        # tests' and the reference comparison's), then a few edge cases.
        with open(os.path.join(ROOT, "tests", "train", "test_config.cpp")) as f:
            src = f.read()
        seen = set()
        for k, m in enumerate(re.finditer(r'R"\((.*?)\)"', src, re.S)):
            text = m.group(1)
            if text in seen or not text.lstrip().startswith(("{", "[")):
                continue
            seen.add(text)
            put("ds_config", f"test_config_{len(seen):02d}.json", text)
        put("ds_config", "cli_tests.json", json.dumps(
            {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
             "gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4, "betas": [0.9, 0.95],
             "eps": 1e-8, "weight_decay": 0.1}}, "zero_optimization": {"stage": 2, "overlap_comm": True},
             "bf16": {"enabled": False}, "wall_clock_breakdown": False}))
        put("ds_config", "reference_bad_stage.json",
            json.dumps({"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": "two"}}))
        put("ds_config", "edge_numbers.json",
            '{"train_micro_batch_size_per_gpu": 9223372036854775807, "gradient_accumulation_steps": 9223372036854775807,'
            ' "train_batch_size": 18446744073709551615, "gradient_clipping": 1e308,'
            ' "optimizer": {"type": "sgd", "params": {"lr": -0.0, "momentum": 1e-320}}}')
        put("ds_config", "edge_scheduler.json",
            '{"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 9223372036854775807,'
            ' "total_num_steps": 1, "warmup_min_lr": 1e308, "warmup_max_lr": 5e-324}},'
            ' "fp16": {"enabled": true, "initial_scale_power": 2147483647, "loss_scale_window": 0}}')
        put("ds_config", "edge_duplicate_keys_deep.json",
            '{"bf16": {"enabled": true}, "bf16": {"enabled": false}, "x": ' + "[" * 40 + "]" * 40 + "}")
    finally:
        shutil.rmtree(tmp)
    total = 0
    for t in ("safetensors", "tokens", "manifest", "ds_config"):
        d = os.path.join(HERE, "corpus", t)
        size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
        total += size
        print(f"{t}: {len(os.listdir(d))} files, {size} bytes")
    print(f"all corpora: {total} bytes")


if __name__ == "__main__":
    main()
