#!/usr/bin/env python3
"""Never lose a user's work (issue 46), end to end through the CLI:

  before_step: every output a run writes (train's --out as a file and as a directory, --metrics, --log-csv,
               --save-dir, --nvme-path; tokenize's --out and --out-prefix; init's --out; consolidate's --hf
               and --out; eval's --metrics) with a missing parent or of the wrong kind exits 2 naming the
               flag the user gave, before a step is run or a token read, and leaves nothing behind;
  readonly:    the same for a directory on a read-only mount (root ignores permission bits; a mount it
               cannot write) — skipped (exit 77) where a mount namespace cannot be made;
  keep_files:  a model directory written into a project keeps its files (init, train, consolidate), a
               directory of files but no model is refused unless --overwrite-output-dir, fine-tuning in
               place keeps the tokenizer and generation files, and --out beside an --init directory gets
               its tokenizer files;
  flags:       flags checked against each other before the run: --min-lr above --lr, eval's sizes.

usage: outputs_tests.py ZERODP CASE     (CASE: before_step | readonly | keep_files | flags)
Exits non-zero with a message on the first failed check."""
import functools
import json
import os
import shutil
import subprocess
import sys

from zdptest import harness as zt
from zdptest.harness import check

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

tmp = zt.workdir("outputs")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=4, embd=64, vocab=256, ctx=32, seed=5, text_bytes=20000)
base = ["train", "--init", init, "--data", tokens, "--steps", "2", "--micro-batch", "2", "--seq", "32", "--lr", "1e-3"]


def refused(args, flag, why, ranks=None, what=None):
    """The command exits 2 naming `flag` and `why`, before training starts."""
    rc, out, err = run(args, ranks)
    check(rc == 2 and flag in err and why in err and "training " not in err,
          what or f"{flag}: '{why}' exits 2 before training", err[-2000:])
    return err


def listing(d):
    return sorted(os.listdir(d))


if CASE == "before_step":
    missing = os.path.join(tmp, "no", "such")
    a_file = os.path.join(tmp, "a_file")
    with open(a_file, "w") as f:
        f.write("x")
    before = listing(tmp)
    refused(base + ["--out", os.path.join(missing, "final.safetensors")], "--out", "does not exist", 2)
    refused(base + ["--out", os.path.join(missing, "model/")], "--out", "does not exist", 2)
    refused(base + ["--out", tmp + "/" + "tok.bin/"], "--out", "is not a directory", 2)
    refused(base + ["--metrics", os.path.join(missing, "m.jsonl")], "--metrics", "does not exist", 2)
    refused(base + ["--metrics", tmp], "--metrics", "is a directory", 2)
    refused(base + ["--log-csv", os.path.join(missing, "log.csv")], "--log-csv", "does not exist", 2)
    refused(base + ["--save-dir", os.path.join(a_file, "ckpt")], "--save-dir", "not a directory", 2)
    refused(base + ["--zero-stage", "1", "--offload-optimizer", "nvme", "--nvme-path", missing], "--nvme-path",
            "does not exist", 2)
    check(listing(tmp) == before, "nothing was written by the refused runs", str(listing(tmp)))

    text = os.path.join(tmp, "text.txt")
    refused(["tokenize", "--text", text, "--out", os.path.join(missing, "t.bin")], "--out", "does not exist")
    refused(["tokenize", "--text", text, "--out-prefix", os.path.join(missing, "shards")], "--out-prefix",
            "does not exist")
    refused(["init", "--out", os.path.join(missing, "init.safetensors")], "--out", "does not exist")
    refused(["init", "--arch", "llama", "--out", os.path.join(missing, "llama")], "--out", "does not exist")
    refused(["eval", "--model", init, "--data", tokens, "--tokens", "64", "--seq", "32", "--metrics",
             os.path.join(missing, "e.json")], "--metrics", "does not exist")

    # consolidate: the flag given is named (--hf, not --out), and the checkpoint is not even opened.
    save = os.path.join(tmp, "ckpt")
    rc, out, err = run(base + ["--save-dir", save], 2)
    check(rc == 0, "a run saves a checkpoint", err)
    err = refused(["ckpt", "consolidate", save, "--hf", a_file], "--hf", "is not a directory")
    check("--out" not in err, "consolidate --hf FILE speaks of --hf, not --out", err)
    refused(["ckpt", "consolidate", save, "--out", os.path.join(missing, "f.safetensors")], "--out",
            "does not exist")

elif CASE == "readonly":
    ro = os.path.join(tmp, "ro")
    os.makedirs(os.path.join(ro, "model"))
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro}"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"skipped: cannot make a read-only mount here ({probe.stderr.strip()})")
        sys.exit(77)

    def under_ro(args):
        """zerodp `args` in a mount namespace where `ro` is read-only (one process: no mpirun in it)."""
        cmd = " ".join([f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && exec", ZERODP] +
                       [f"'{a}'" for a in args])
        r = zt.launch(["unshare", "-m", "sh", "-c", cmd], timeout=120)
        check(r.code is not None, "finished in time", r.text[-2000:])
        return r

    cases = [(["--out", os.path.join(ro, "final.safetensors")], "--out"),
             (["--out", os.path.join(ro, "model")], "--out"),
             (["--metrics", os.path.join(ro, "m.jsonl")], "--metrics"),
             (["--log-csv", os.path.join(ro, "log.csv")], "--log-csv"),
             (["--save-dir", os.path.join(ro, "ckpt")], "--save-dir")]
    for extra, flag in cases:
        r = under_ro(base + extra)
        check(r.code == 2 and flag in r.err and "Read-only file system" in r.err and "training " not in r.err,
              f"{flag} on a read-only mount exits 2 before training", r.err[-2000:])
    r = under_ro(["tokenize", "--text", os.path.join(tmp, "text.txt"), "--out-prefix", os.path.join(ro, "s")])
    check(r.code == 2 and "--out-prefix" in r.err and "Read-only" in r.err, "tokenize --out-prefix read-only", r.err)
    check(listing(ro) == ["model"], "nothing written", str(listing(ro)))

elif CASE == "keep_files":
    proj = os.path.join(tmp, "proj")
    os.makedirs(os.path.join(proj, "src"))
    user = {"notes.md": "my notes", "src/train.py": "print('mine')", "config.json": '{"learning_rate": 3e-4}'}
    for name, text in user.items():
        with open(os.path.join(proj, name), "w") as f:
            f.write(text)

    def user_files_intact(what):
        for name, text in user.items():
            with open(os.path.join(proj, name)) as f:
                got = f.read()
            if name != "config.json":
                check(got == text, f"{what}: {name} kept", got)

    llama = ["init", "--arch", "llama", "--layers", "2", "--heads", "4", "--kv-heads", "2", "--embd", "64",
             "--vocab", "256", "--ctx", "32", "--out"]
    err = refused(llama + [proj], "--out", "holds files but no model")
    check("--overwrite-output-dir" in err, "the refusal says how to write there all the same", err)
    with open(os.path.join(proj, "config.json")) as f:
        check(f.read() == user["config.json"], "the user's config.json is untouched")
    rc, out, err = run(llama + [proj, "--overwrite-output-dir"])
    check(rc == 0, "init --overwrite-output-dir writes the model beside the project's files", err)
    user_files_intact("init")
    check(os.path.exists(os.path.join(proj, "model.safetensors")), "the model is there")

    # A downloaded model fine-tuned in place: its tokenizer and generation files stay.
    ft = os.path.join(tmp, "ft")
    rc, out, err = run(llama + [ft, "--dtype", "bf16"])
    check(rc == 0, "a Llama model directory", err)
    extras = {"tokenizer.json": '{"version": "1.0"}', "tokenizer_config.json": '{"model_max_length": 32}',
              "generation_config.json": '{"do_sample": false}', "README.md": "model card"}
    for name, text in extras.items():
        with open(os.path.join(ft, name), "w") as f:
            f.write(text)
    llama_train = ["train", "--init", ft, "--data", tokens, "--steps", "2", "--micro-batch", "2", "--seq", "32",
                   "--lr", "1e-3", "--zero-stage", "3"]
    rc, out, err = run(llama_train + ["--out", ft], 2)
    check(rc == 0, "train --init ft --out ft", err)
    for name, text in extras.items():
        with open(os.path.join(ft, name)) as f:
            check(f.read() == text, f"fine-tuning in place keeps {name}")
    # --out elsewhere: the tokenizer and generation files come along (not the README).
    ft2 = os.path.join(tmp, "ft2")
    rc, out, err = run(llama_train + ["--out", ft2], 2)
    check(rc == 0, "train --init ft --out ft2", err)
    check(listing(ft2) == ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json"], "--out beside an --init directory gets its tokenizer files",
          str(listing(ft2)))

    # consolidate --hf into the project (a model directory now): its files stay.
    save = os.path.join(tmp, "ckpt")
    rc, out, err = run(llama_train + ["--save-dir", save], 2)
    check(rc == 0, "a Llama run saves a checkpoint", err)
    rc, out, err = run(["ckpt", "consolidate", save, "--hf", proj])
    check(rc == 0, "consolidate --hf into the project", err)
    user_files_intact("consolidate")
    with open(os.path.join(proj, "config.json")) as f:
        check(json.load(f).get("model_type") == "llama", "config.json is the model's")

elif CASE == "flags":
    rc, out, err = run(base + ["--lr-schedule", "wsd", "--decay-steps", "1", "--min-lr", "5"], 1)
    check(rc == 2 and "--min-lr" in err and "above" in err and "training " not in err,
          "--min-lr 5 above --lr 1e-3 exits 2 naming --min-lr", err)
    rc, out, err = run(base + ["--lr-schedule", "cosine", "--min-lr", "0.01"], 1)
    check(rc == 2 and "--min-lr" in err and "above" in err, "the cosine floor above --lr exits 2", err)
    rc, out, err = run(base + ["--lr-schedule", "wsd", "--decay-steps", "1", "--min-lr", "1e-4"], 1)
    check(rc == 0, "a floor below the peak trains", err)
    r = run(["eval", "--model", init, "--data", tokens, "--tokens", "64", "--seq", "32", "--micro-batch", "1048576"])
    check(r.code == 2 and "--micro-batch" in r.err and "memory" in r.err,
          "eval --micro-batch 1048576 exits 2 before allocating, naming --micro-batch", r.err)
    r = run(["eval", "--model", init, "--data", tokens, "--tokens", "64", "--seq", "32", "--micro-batch", "2000000"])
    check(r.code == 2 and "--micro-batch must be in [1, 1048576]" in r.err, "eval's --micro-batch bound is train's",
          r.err)

else:
    sys.exit(__doc__)

shutil.rmtree(tmp, ignore_errors=True)
