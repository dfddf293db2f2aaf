"""Instruction data for the references, written from docs/reference/files.md#instruction-data and
data-order.md#instruction-data rather than from zerodp's code: the labels file beside a token file,
random examples to test with, and the padded global batch of a step with its target count."""

import os

import numpy as np
import torch

LABELS_MAGIC = 20261129
HEADER_BYTES = 1024
TARGET, EXAMPLE_START = 1, 2
IGNORE = -100  # PyTorch's ignore_index


def labels_path(tokens_path):
    root, ext = os.path.splitext(tokens_path)
    return root + ".labels" if ext == ".bin" else tokens_path + ".labels"


def write_labels(path, labels):
    header = np.zeros(256, dtype="<i4")
    header[:4] = [LABELS_MAGIC, 1, len(labels) & 0xFFFFFFFF, len(labels) >> 32]
    with open(path + ".tmp", "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(labels, dtype=np.uint8).tobytes())
    os.replace(path + ".tmp", path)


def read_labels(path, count):
    raw = np.fromfile(path, dtype=np.uint8)
    words = raw[:16].view("<i4")
    if raw.size < HEADER_BYTES or words[0] != LABELS_MAGIC or words[1] != 1:
        raise ValueError(f"{path}: not a labels file")
    labels = raw[HEADER_BYTES:]
    if labels.size != count or int(words[2]) + (int(words[3]) << 32) != count:
        raise ValueError(f"{path}: {labels.size} labels for {count} tokens")
    return labels


def make_examples(rng, vocab, examples, min_len=3, max_len=30):
    """Random examples: (tokens, labels), each a prompt then a response whose tokens are targets."""
    tokens, labels = [], []
    for _ in range(examples):
        n = int(rng.integers(min_len, max_len + 1))
        prompt = int(rng.integers(1, n))
        tokens += [int(t) for t in rng.integers(0, vocab, n)]
        labels += [EXAMPLE_START] + [0] * (prompt - 1) + [TARGET] * (n - prompt)
    return np.asarray(tokens, dtype=np.int64), np.asarray(labels, dtype=np.uint8)


def global_batch(tokens, labels, step, world, micro_batch, seq, accum):
    """Step s's sequences q = ((s·G + g)·W + r)·B + b, ordered by (g, r, b): example q mod E, its first
    T + 1 tokens, padded; targets IGNORE where the next token is no target. Returns (inputs, targets,
    number of targets), inputs and targets [G·W·B, T]."""
    starts = np.nonzero(labels & EXAMPLE_START)[0].tolist() + [len(tokens)]
    E = len(starts) - 1
    first = step * accum * world * micro_batch
    rows = accum * world * micro_batch
    inputs = np.zeros((rows, seq), dtype=np.int64)
    targets = np.full((rows, seq), IGNORE, dtype=np.int64)
    for i in range(rows):
        e = (first + i) % E
        fill_row(inputs[i], targets[i], tokens, labels, starts[e], min(starts[e + 1], starts[e] + seq + 1))
    return torch.from_numpy(inputs), torch.from_numpy(targets), int((targets != IGNORE).sum())


def fill_row(inputs, targets, tokens, labels, a, b):
    """A padded row of the example tokens[a:b] (at most T + 1 tokens): inputs its first T, targets the
    next token where that one is a target."""
    ex, lab = tokens[a:b], labels[a:b]
    inputs[:len(ex)] = ex[:len(inputs)]
    for t in range(len(ex) - 1):
        if lab[t + 1] & TARGET:
            targets[t] = ex[t + 1]


def packs(labels, seq):
    """data-order.md#instruction-data's packs: consecutive examples, each counting with its first T + 1
    tokens and so n - 1 inputs, join a pack while the pack's inputs fit in T. Returns the packs, each a
    list of (start, end) token ranges of its examples."""
    starts = np.nonzero(labels & EXAMPLE_START)[0].tolist() + [len(labels)]
    out, used = [], 0
    for e in range(len(starts) - 1):
        a, b = starts[e], min(starts[e + 1], starts[e] + seq + 1)
        if not out or used + (b - a - 1) > seq:
            out.append([])
            used = 0
        out[-1].append((a, b))
        used += b - a - 1
    return out


def global_batch_packed(tokens, labels, step, world, micro_batch, seq, accum):
    """The packed step s: sequences q as in global_batch, sequence q holding pack q mod P; each of its
    examples computed alone, padded in a row of its own (what packing must equal: data-order.md).
    Returns (inputs, targets, number of targets), [examples of the step, T] each."""
    pk = packs(labels, seq)
    first = step * accum * world * micro_batch
    rows = [r for q in range(first, first + accum * world * micro_batch) for r in pk[q % len(pk)]]
    inputs = np.zeros((len(rows), seq), dtype=np.int64)
    targets = np.full((len(rows), seq), IGNORE, dtype=np.int64)
    for i, (a, b) in enumerate(rows):
        fill_row(inputs[i], targets[i], tokens, labels, a, b)
    return torch.from_numpy(inputs), torch.from_numpy(targets), int((targets != IGNORE).sum())
