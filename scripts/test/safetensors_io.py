#!/usr/bin/env python3
"""An independent safetensors implementation (numpy only) to check zerodp's reader and writer against.

  safetensors_io.py write OUT   writes the reference file described below
  safetensors_io.py check IN    reads IN (as zerodp wrote it) and checks it holds that same content

The reference content: tensor "a" F32 [3, 5] with a[i] = 0.25*i - 1.5; "b" F16 [7] with
b[i] = 0.5*(i - 3); "c" BF16 [2, 2, 3] with c[i] = 0.375*(i + 1); "e" F32 [0, 4] (empty); metadata
{"n_layer": "2", "format": "pt"}. Every value is exact in its dtype. The writer deliberately does not
pad its header, so the data section is not aligned: readers must not assume it is.
Exits 0 when all is well, 1 with a message otherwise."""
import json
import struct
import sys

import numpy as np


def reference():
    a = (0.25 * np.arange(15, dtype=np.float32) - 1.5).reshape(3, 5)
    b = 0.5 * (np.arange(7, dtype=np.float32) - 3)
    c = (0.375 * (np.arange(12, dtype=np.float32) + 1)).reshape(2, 2, 3)
    e = np.zeros((0, 4), dtype=np.float32)
    return {"a": ("F32", a), "b": ("F16", b), "c": ("BF16", c), "e": ("F32", e)}, {"n_layer": "2", "format": "pt"}


def to_bytes(dtype, values):
    v = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == "F32":
        return v.astype("<f4").tobytes()
    if dtype == "F16":
        return v.astype("<f2").tobytes()
    # BF16: the upper half of the float32 bits, rounded to nearest even.
    bits = v.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def from_bytes(dtype, raw, shape):
    if dtype == "F32":
        out = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        out = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif dtype == "BF16":
        out = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        raise ValueError(f"unexpected dtype {dtype}")
    return out.reshape(shape)


def write(path):
    tensors, meta = reference()
    header = {"__metadata__": meta}
    blobs = []
    offset = 0
    # Written in an order different from the names' order, to show offsets (not names) place data.
    for name in ["c", "a", "e", "b"]:
        dtype, values = tensors[name]
        blob = to_bytes(dtype, values)
        header[name] = {"dtype": dtype, "shape": list(values.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(text) % 8 == 0:
        text += b" "  # keep the data section misaligned on purpose
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def check(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    if (8 + n) % 8 != 0:
        return f"header length {n}: the data section does not start 8-byte aligned"
    text = raw[8 : 8 + n]
    if not text.startswith(b"{") or not text.rstrip(b" ").endswith(b"}"):
        return f"header is not a JSON object padded with spaces: {text[-16:]!r}"
    header = json.loads(text.decode("utf-8"))
    data = raw[8 + n :]
    tensors, meta = reference()
    if header.get("__metadata__") != meta:
        return f"metadata {header.get('__metadata__')} != {meta}"
    names = set(header) - {"__metadata__"}
    if names != set(tensors):
        return f"tensors {sorted(names)} != {sorted(tensors)}"
    spans = []
    for name, (dtype, values) in tensors.items():
        e = header[name]
        if e["dtype"] != dtype or e["shape"] != list(values.shape):
            return f"{name}: {e['dtype']} {e['shape']}, expected {dtype} {list(values.shape)}"
        begin, end = e["data_offsets"]
        got = from_bytes(dtype, data[begin:end], values.shape)
        if not np.array_equal(got, values):
            return f"{name}: values differ: {got.ravel()[:6]} vs {values.ravel()[:6]}"
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            return f"data section not covered back to back: span {begin}..{end} after {pos}"
        pos = end
    if pos != len(data):
        return f"data section has {len(data)} bytes, tensors cover {pos}"
    return None


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__)
        return 2
    if sys.argv[1] == "write":
        write(sys.argv[2])
        return 0
    problem = check(sys.argv[2])
    if problem:
        print(f"safetensors_io.py: {sys.argv[2]}: {problem}")
        return 1
    print("safetensors_io.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
