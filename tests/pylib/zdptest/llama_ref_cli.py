"""Command line of the transformers reference of the Llama-family models (zdptest.llama_ref):
tests/reference/llama_ref.py runs it, compare_llama.py calls main() in-process.

    llama_ref.py config NAME                       print a preset of CONFIGS as config.json
    llama_ref.py make --config CONFIG.json|NAME --seed S --dtype float32|bfloat16|float16 --out DIR
                      [--max-shard-size N|20KB]
    llama_ref.py logits --model DIR --tokens 1,2,3 --out F.bin        (float32 [T, V], little-endian)
    llama_ref.py train --model DIR --data TOKENS.bin --world W --micro-batch B --seq T --accum G
                       --steps N [--lr X --beta1 X --beta2 X --eps X --weight-decay X --clip X]
                       [--lr-schedule constant|warmup|warmup-decay|cosine|wsd --warmup-steps N
                        --warmup-type linear|log --min-lr X --total-steps N --decay-steps N
                        --decay-type linear|cosine|1-sqrt] [--metrics OUT.jsonl] [--out DIR]
    llama_ref.py check-load --model DIR --against REF.safetensors|DIR [--atol X]

Exit codes: 0 done (check-load: every tensor agrees); 1 check-load found a difference, or transformers
is missing; 2 bad usage or input (a message names the file).
"""
import argparse
import json
import os
import sys

import torch

from zdptest.llama_ref import (  # noqa: F401 (every name the subcommands use)
    CONFIGS,
    DTYPES,
    InputError,
    LrSchedule,
    MissingTransformers,
    SCHEDULES,
    compare_with,
    load_model,
    logits_of,
    make_model,
    parse_tokens,
    read_config_arg,
    read_state,
    read_tokens,
    save_model,
    train,
    write_f32,
)
from zdptest import instruction_ref
from zdptest.llama_ref import _transformers as transformers_module


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="llama_ref.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    c = sub.add_parser("config", help="print a preset config.json")
    c.add_argument("name", choices=sorted(CONFIGS))

    m = sub.add_parser("make", help="a random model directory (config.json + safetensors)")
    m.add_argument("--config", required=True, help="config.json path, or a preset name")
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--dtype", choices=sorted(DTYPES), default="float32", help="dtype of the saved tensors")
    m.add_argument("--out", required=True, help="directory to write")
    m.add_argument("--max-shard-size", help="save_pretrained's max_shard_size (bytes, or e.g. 20KB): shards")

    lg = sub.add_parser("logits", help="float32 logits [T, V] of one sequence")
    lg.add_argument("--model", required=True)
    lg.add_argument("--tokens", required=True, help="comma-separated token ids")
    lg.add_argument("--out", required=True, help="raw little-endian float32 file")

    t = sub.add_parser("train", help="train as docs/reference/ says, writing metrics.md's step records")
    t.add_argument("--model", "--init", dest="model", required=True, help="model directory")
    t.add_argument("--data", required=True, help="token file (raw uint16, or llm.c layout uint16/uint32)")
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--world", type=int, default=1, help="W, the world size whose global batch to train on")
    t.add_argument("--micro-batch", type=int, required=True, help="B, sequences per rank per micro-step")
    t.add_argument("--seq", type=int, required=True, help="T, tokens per sequence")
    t.add_argument("--accum", type=int, default=1, help="G, micro-steps per optimizer step")
    t.add_argument("--packing", action="store_true",
                   help="instruction data packed (data-order.md#instruction-data): each example of the step alone")
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--beta1", type=float, default=0.9)
    t.add_argument("--beta2", type=float, default=0.999)
    t.add_argument("--eps", type=float, default=1e-8)
    t.add_argument("--weight-decay", type=float, default=0.01, help="on tensors of 2 or more dimensions")
    t.add_argument("--clip", "--grad-clip", dest="clip", type=float, default=0.0, help="global-norm clip; 0: off")
    t.add_argument("--lr-schedule", choices=SCHEDULES, default="constant")
    t.add_argument("--warmup-steps", "--warmup", dest="warmup_steps", type=int, default=0)
    t.add_argument("--warmup-type", choices=("linear", "log"), default="linear")
    t.add_argument("--min-lr", type=float, default=None)
    t.add_argument("--total-steps", type=int, default=0, help="0: --steps")
    t.add_argument("--decay-steps", type=int, default=0, help="wsd's decay tail")
    t.add_argument("--decay-type", choices=("linear", "cosine", "1-sqrt"), default="linear")
    t.add_argument("--metrics", help="JSON Lines, one step record per step")
    t.add_argument("--out", help="directory for the trained model (float32 safetensors)")

    k = sub.add_parser("check-load", help="from_pretrained DIR and compare each tensor with a reference")
    k.add_argument("--model", required=True, help="model directory to load with from_pretrained")
    k.add_argument("--against", required=True, help="safetensors file or model directory")
    k.add_argument("--atol", type=float, default=0.0)

    for p in (m, lg, t, k):
        p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = ap.parse_args(argv)

    if args.command == "train":
        for flag in ("steps", "micro_batch", "seq", "accum", "world"):
            if getattr(args, flag) <= 0:
                t.error(f"--{flag.replace('_', '-')} must be positive")
        if args.lr_schedule == "constant" and (args.warmup_steps or args.min_lr is not None):
            t.error("--warmup-steps and --min-lr need a --lr-schedule other than constant")
        if args.lr_schedule != "wsd" and args.decay_steps:
            t.error("--decay-steps needs --lr-schedule wsd")
    return args


def run(args):
    """Runs one subcommand; returns its exit code. Raises InputError or MissingTransformers."""
    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    if args.command == "config":
        print(json.dumps(CONFIGS[args.name], indent=2))
        return 0
    if args.command == "make":
        config, source = read_config_arg(args.config)
        model = make_model(config, args.seed, DTYPES[args.dtype], source)
        save_model(model, args.out, args.max_shard_size)
        return 0
    if args.command == "logits":
        model = load_model(args.model)
        ids = parse_tokens(args.tokens, model.config.vocab_size)
        write_f32(args.out, logits_of(model, ids))
        return 0
    if args.command == "train":
        model = load_model(args.model)
        if args.seq > model.config.max_position_embeddings:
            raise InputError(f"--seq {args.seq} is longer than max_position_embeddings "
                             f"{model.config.max_position_embeddings} of {args.model}")
        tokens = read_tokens(args.data, model.config.vocab_size)
        schedule = LrSchedule(args.lr_schedule, args.lr, args.steps, args.warmup_steps, args.warmup_type,
                              args.min_lr, args.total_steps, args.decay_steps, args.decay_type)
        metrics = open(args.metrics, "w") if args.metrics else None
        try:
            def emit(record):
                line = json.dumps(record)
                if metrics:
                    metrics.write(line + "\n")
                    metrics.flush()
                else:
                    print(line, flush=True)
            # Instruction data: the labels file beside the tokens (files.md#instruction-data).
            labels_file = instruction_ref.labels_path(args.data)
            labels = instruction_ref.read_labels(labels_file, len(tokens)) if os.path.exists(labels_file) else None
            train(model, tokens, args, schedule, on_step=emit, labels=labels)
        finally:
            if metrics:
                metrics.close()
        if args.out:
            save_model(model.float(), args.out)
        return 0
    if args.command == "check-load":
        reference = read_state(args.against)  # an unreadable reference is bad usage (2), not a failed check
        try:
            model = load_model(args.model, dtype="auto")  # as stored: nothing converted on the way
        except InputError as e:  # the directory under test does not load: the check fails
            print(f"llama_ref.py check-load: {e}", file=sys.stderr)
            return 1
        problems = compare_with(model, reference, args.atol)
        if problems:
            print(f"llama_ref.py check-load: {args.model} loaded by transformers differs from {args.against} in "
                  f"{len(problems)} tensors:", file=sys.stderr)
            for p in problems:
                print("  " + p, file=sys.stderr)
            return 1
        print(f"llama_ref.py check-load: {args.model} loads in transformers {transformers_module().__version__} as "
              f"{type(model).__name__}; its {len(model.state_dict())} tensors equal {args.against}'s"
              f"{'' if args.atol == 0 else f' within {args.atol:g}'}")
        return 0
    raise AssertionError(args.command)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except InputError as e:
        print(f"llama_ref.py: error: {e}", file=sys.stderr)
        return 2
    except MissingTransformers as e:
        print(f"llama_ref.py: error: {e}", file=sys.stderr)
        return 1
