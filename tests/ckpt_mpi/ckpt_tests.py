#!/usr/bin/env python3
"""End-to-end checks of sharded checkpoints through the CLI and mpirun (docs/checkpoints.md).

usage: ckpt_tests.py ZERODP CASE
  bitwise   same W and stage: 6 steps straight == 3 + resume 3, bit for bit (losses, grad norms,
            --out bytes), in fp32 (W=2, stage 3) and fp16 with dynamic loss scaling (W=2, stage 2);
            --keep; consolidate == --out; inspect
  bitwise_bf16  the same in bf16 at W=2 for each stage 0, 1, 2, 3
  keep      --keep through a resume into a directory holding higher-numbered checkpoints of a longer
            run: those are neither counted nor touched; which remain, latest, equal results
  reshard   a chain of resumes across (W, stage) = (4,3) -> (2,1) -> (3,2) -> (1,0) -> (2,3), with
            B and G changed to keep the global batch, each step's loss within 1e-5 relative of the
            uninterrupted run
  crash     a rank killed half-way through writing its file: the previous checkpoint stays latest,
            intact and resumable (bit for bit), no partial step directory is visible
  bad       truncated / bit-flipped / missing shard, manifest not fitting the model or the flags:
            exit code 2, the file named, nothing trained
Exits non-zero with a message on the first failed check."""
import functools
import json
import os
import shutil
import sys

from zdptest import harness as zt
from zdptest.harness import check, crc32c, read_bytes, safetensors_f32, steps_of

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP, timeout=150)  # run(args, ranks=None, timeout=150, env=None)


def read_checkpoint_as_documented(ckpt):
    """{tensor name: floats} of a checkpoint's weights, following docs/checkpoints.md only: the
    manifest's checksum, every file's size and checksum, and each tensor's pieces."""
    manifest_bytes = read_bytes(os.path.join(ckpt, "manifest.json"))
    want = read_bytes(os.path.join(ckpt, "manifest.crc32c")).decode()
    check(want == f"{crc32c(manifest_bytes):08x}  manifest.json\n", "the manifest's checksum is as documented")
    m = json.loads(manifest_bytes)
    files = {}
    for f in m["files"]:
        data = read_bytes(os.path.join(ckpt, f["file"]))
        check(len(data) == f["bytes"] and f"{crc32c(data):08x}" == f["crc32c"], f"{f['file']}: size and CRC-32C")
        header, _, body = zt.parse_safetensors(data)
        files[f["rank"]] = {name: zt.f32_values(body, entry) for name, entry in header.items()}
    out = {}
    for t in m["tensors"]:
        values = []
        for p in t["pieces"]:
            arr = files[p["rank"]][p["file_tensor"]]
            values.extend(arr[p["file_offset"]:p["file_offset"] + p["end"] - p["begin"]])
        out[t["name"]] = tuple(values)
    return out


tmp = zt.workdir("ckpt")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=2, embd=32, vocab=256, ctx=16, seed=5, text_bytes=40000)
# Global batch: 12 sequences of 16 tokens (W·G·B = 12 for W = 1..4).
common = ["--data", tokens, "--lr", "3e-3", "--weight-decay", "0.1", "--clip", "1.0", "--log-every", "0"]


def path(*parts):
    return os.path.join(tmp, *parts)


def train(name, ranks, stage, steps, B, G=1, extra=(), env=None, init_flag=True, seq=16):
    """Runs `zerodp train`; returns (rc, stdout, stderr), metrics at path(name + '.jsonl'). The directory of
    an --out in `extra` is made first: a run refuses an --out whose directory does not exist."""
    extra = list(extra)
    if "--out" in extra:
        os.makedirs(os.path.dirname(extra[extra.index("--out") + 1]), exist_ok=True)
    args = ["train"] + (["--init", init] if init_flag else []) + common + ["--seq", str(seq),
        "--steps", str(steps), "--zero-stage", str(stage), "--micro-batch", str(B), "--accum", str(G),
        "--metrics", path(name + ".jsonl")] + list(extra)
    return run(args, ranks, env=env)


if CASE == "bitwise":
    for dtype, ranks, stage in (("fp32", 2, 3), ("fp16", 2, 2)):
        d = dtype
        # fp16: the scale doubles every 2 good steps, and step 4 overflows: the resumed run must carry
        # the scaler's counters over to double and skip at the same steps.
        extra = ["--dtype", dtype] + (["--loss-scale-window", "2"] if dtype == "fp16" else [])
        rc, out, err = train(f"{d}-straight", ranks, stage, 6, 6, extra=extra + [
            "--save-dir", path(d, "run1"), "--save-every", "3", "--out", path(d, "straight.safetensors")])
        check(rc == 0, f"{d}: 6 steps straight, saving every 3", err)
        check(sorted(os.listdir(path(d, "run1"))) == ["latest", "step-3", "step-6"],
              f"{d}: the save directory holds step-3, step-6 and latest", str(os.listdir(path(d, "run1"))))
        # Resume from step 3 without --init into a new save directory, saving every step, keeping 2.
        rc, out, err = train(f"{d}-resumed", ranks, stage, 6, 6, init_flag=False, extra=extra + [
            "--resume", path(d, "run1", "step-3"), "--save-dir", path(d, "run2"), "--save-every", "1",
            "--keep", "2", "--out", path(d, "resumed.safetensors")])
        check(rc == 0, f"{d}: resumed at step 3 without --init", err)
        straight, resumed = steps_of(path(f"{d}-straight.jsonl")), steps_of(path(f"{d}-resumed.jsonl"))
        check(sorted(resumed) == [3, 4, 5], f"{d}: the resumed run runs steps 3, 4, 5", str(sorted(resumed)))
        for s in (3, 4, 5):
            for key in ("loss", "grad_norm", "lr", "loss_scale", "skipped"):
                check(resumed[s][key] == straight[s][key],
                      f"{d}: step {s} {key} identical ({resumed[s][key]!r} == {straight[s][key]!r})")
        if dtype == "fp16":
            scales = [straight[s]["loss_scale"] for s in range(6)]
            skipped = [s for s in range(6) if straight[s]["skipped"]]
            check(skipped and skipped[0] >= 3 and len(set(scales)) > 1,
                  f"fp16: the loss scale moves and a step after 3 is skipped (scales {scales}, skipped {skipped})")
        check(read_bytes(path(d, "straight.safetensors")) == read_bytes(path(d, "resumed.safetensors")),
              f"{d}: the --out files are identical byte for byte")
        check(sorted(os.listdir(path(d, "run2"))) == ["latest", "step-5", "step-6"]
              and read_bytes(path(d, "run2", "latest")) == b"step-6\n", f"{d}: --keep 2 leaves step-5, step-6, latest")
        # consolidate (no MPI) == --out of the same run.
        rc, out, err = run(["ckpt", "consolidate", path(d, "run1"), "--out", path(d, "consolidated.safetensors")])
        check(rc == 0, f"{d}: ckpt consolidate of the save directory", err)
        check(read_bytes(path(d, "consolidated.safetensors")) == read_bytes(path(d, "straight.safetensors")),
              f"{d}: consolidate equals the run's --out byte for byte")
    # Another tool, reading only what the documentation says, finds the same weights.
    documented = read_checkpoint_as_documented(path("fp32", "run1", "step-6"))
    check(documented == safetensors_f32(path("fp32", "straight.safetensors")),
          "a reader written from docs/checkpoints.md alone gets the --out weights exactly")
    rc, out, err = run(["ckpt", "inspect", path("fp16", "run2")])
    check(rc == 0, "ckpt inspect", err)
    for needle in ("step-6", "6 optimizer steps run (5 updates applied)", "GPT-2 L2 H2 C32 V256 N16", "2 ranks, ZeRO stage 2",
                   "compute dtype fp16", "exp_avg, exp_avg_sq", "rank-00001.safetensors  ok",
                   "all 2 files verified", "B=6 x G=1 x W=2"):
        check(needle in out, f"inspect prints '{needle}'", out)

elif CASE == "bitwise_bf16":
    # bf16 keeps fp32 masters beside the bf16 parameters: the checkpoint holds the masters, from which
    # the resumed run rounds its parameters again, and that must give back the very same run.
    for stage in range(4):
        d = f"bf16-s{stage}"
        extra = ["--dtype", "bf16"]
        rc, out, err = train(f"{d}-straight", 2, stage, 6, 6, extra=extra + [
            "--save-dir", path(d, "run1"), "--save-every", "3", "--out", path(d, "straight.safetensors")])
        check(rc == 0, f"{d}: 6 steps straight, saving every 3", err)
        manifest = json.loads(read_bytes(path(d, "run1", "step-3", "manifest.json")))
        check((manifest["dtype"], manifest["zero_stage"], manifest["world_size"]) == ("bf16", stage, 2),
              f"{d}: the checkpoint records bf16, stage {stage}, 2 ranks",
              str((manifest["dtype"], manifest["zero_stage"], manifest["world_size"])))
        rc, out, err = train(f"{d}-resumed", 2, stage, 6, 6, init_flag=False, extra=extra + [
            "--resume", path(d, "run1", "step-3"), "--out", path(d, "resumed.safetensors")])
        check(rc == 0, f"{d}: resumed at step 3", err)
        straight, resumed = steps_of(path(f"{d}-straight.jsonl")), steps_of(path(f"{d}-resumed.jsonl"))
        check(sorted(straight) == list(range(6)) and sorted(resumed) == [3, 4, 5],
              f"{d}: the runs ran steps 0..5 and 3, 4, 5", f"{sorted(straight)} {sorted(resumed)}")
        for s in (3, 4, 5):
            for key in ("loss", "grad_norm", "lr", "tokens", "loss_scale", "skipped"):
                check(resumed[s][key] == straight[s][key],
                      f"{d}: step {s} {key} identical ({resumed[s][key]!r} == {straight[s][key]!r})")
        check(read_bytes(path(d, "straight.safetensors")) == read_bytes(path(d, "resumed.safetensors")),
              f"{d}: the --out files are identical byte for byte")

elif CASE == "keep":
    # docs/checkpoints.md, Saving step 5: with --keep K, checkpoints numbered above the one being saved
    # (an earlier, longer run's, when this one resumed from an older step) are neither counted nor removed.
    W, stage, save = 2, 1, path("save")
    rc, out, err = train("long", W, stage, 8, 6, extra=["--save-dir", save, "--save-every", "2"])
    check(rc == 0, "the first run: 8 steps, saving every 2", err)
    check(sorted(os.listdir(save)) == ["latest", "step-2", "step-4", "step-6", "step-8"]
          and read_bytes(os.path.join(save, "latest")) == b"step-8\n",
          "it leaves step-2, -4, -6, -8 and latest naming step-8", str(sorted(os.listdir(save))))

    def snapshot(ckpt):
        """{file name: (bytes, inode, mtime in ns)} of a checkpoint directory."""
        out = {}
        for name in sorted(os.listdir(ckpt)):
            st = os.stat(os.path.join(ckpt, name))
            out[name] = (read_bytes(os.path.join(ckpt, name)), st.st_ino, st.st_mtime_ns)
        return out

    step8, step8_dir_ino = snapshot(path("save", "step-8")), os.stat(path("save", "step-8")).st_ino
    step6_ranks = {n: v[0] for n, v in snapshot(path("save", "step-6")).items() if n.startswith("rank-")}
    step6_dir_ino = os.stat(path("save", "step-6")).st_ino
    # The second run resumes from step-4 (an explicit path, not latest) into the same directory, runs to
    # step 7 (fewer steps than the first), keeps 2: it saves step-6 (over the first run's) and step-7.
    rc, out, err = train("short", W, stage, 7, 6, init_flag=False, extra=[
        "--resume", path("save", "step-4"), "--save-dir", save, "--save-every", "2", "--keep", "2"])
    check(rc == 0, "the second run: resumed from step-4, 7 steps, --keep 2, the same directory", err)
    names = sorted(os.listdir(save))
    # Counting only step <= 7: after step-6's save {4, 6} stay (2 goes), after step-7's {6, 7} (4 goes).
    check(names == ["latest", "step-6", "step-7", "step-8"],
          "step-6 and step-7 (the 2 newest up to 7) and the first run's step-8 remain; step-2 and step-4 are "
          "removed; no hidden leftovers", str(names))
    check(read_bytes(os.path.join(save, "latest")) == b"step-7\n", "latest names step-7, the last one saved",
          read_bytes(os.path.join(save, "latest")).decode(errors="replace"))
    check(os.stat(path("save", "step-8")).st_ino == step8_dir_ino and snapshot(path("save", "step-8")) == step8,
          "step-8 is untouched: the same directory, every file's bytes, inode and mtime")
    rc, out, err = run(["ckpt", "inspect", path("save", "step-8")])
    check(rc == 0 and "all 2 files verified" in out, "step-8 still verifies", out + err)
    long, short = steps_of(path("long.jsonl")), steps_of(path("short.jsonl"))
    check(sorted(short) == [4, 5, 6], "the second run ran steps 4, 5, 6", str(sorted(short)))
    for s in (4, 5, 6):
        for key in ("loss", "grad_norm", "lr"):
            check(short[s][key] == long[s][key], f"step {s} {key} identical to the first run's "
                                                 f"({short[s][key]!r} == {long[s][key]!r})")
    new6 = {n: v[0] for n, v in snapshot(path("save", "step-6")).items() if n.startswith("rank-")}
    check(os.stat(path("save", "step-6")).st_ino != step6_dir_ino, "step-6 was saved again, replacing the first run's")
    check(new6 == step6_ranks, "the second run's step-6 rank files equal the first run's byte for byte",
          f"{sorted(new6)} vs {sorted(step6_ranks)}")
    # Resuming from the directory takes latest: step 7 of the first run, exactly.
    rc, out, err = train("from-latest", W, stage, 8, 6, init_flag=False, extra=["--resume", save])
    check(rc == 0, "resuming from the save directory", err)
    last = steps_of(path("from-latest.jsonl"))
    check(sorted(last) == [7] and last[7]["loss"] == long[7]["loss"] and last[7]["grad_norm"] == long[7]["grad_norm"],
          "it runs step 7 with the first run's loss and grad_norm, bit for bit", str(last))

elif CASE == "reshard":
    # (W, stage, B, G) of each run; run k > 0 resumes from run k-1's checkpoint at step 2k.
    chain = [(4, 3, 3, 1), (2, 1, 6, 1), (3, 2, 4, 1), (1, 0, 6, 2), (2, 3, 3, 2)]
    ref = None
    for k, (W, stage, B, G) in enumerate(chain):
        extra = ["--save-dir", path(f"r{k}"), "--save-every", "2", "--out", path(f"r{k}.safetensors")]
        if k > 0:
            extra += ["--resume", path(f"r{k - 1}", f"step-{2 * k}")]
        rc, out, err = train(f"r{k}", W, stage, 10, B, G, extra=extra, init_flag=(k != 2))
        what = f"W={W} stage {stage} B={B} G={G}" + (f", resumed from W={chain[k - 1][0]} stage {chain[k - 1][1]} at step {2 * k}" if k else "")
        check(rc == 0, what, err)
        steps = steps_of(path(f"r{k}.jsonl"))
        if k == 0:
            ref = steps
            continue
        check(sorted(steps) == list(range(2 * k, 10)), f"{what}: runs steps {2 * k}..9", str(sorted(steps)))
        worst = max(abs(steps[s]["loss"] - ref[s]["loss"]) / abs(ref[s]["loss"]) for s in steps)
        check(worst < 1e-5, f"{what}: every loss within 1e-5 relative of the uninterrupted run (worst {worst:.2e})")
        check(all(steps[s]["tokens"] == ref[s]["tokens"] for s in steps), f"{what}: same tokens per step")
    a, b = safetensors_f32(path("r0.safetensors")), safetensors_f32(path(f"r{len(chain) - 1}.safetensors"))
    worst = max(abs(x - y) for name in a for x, y in zip(a[name], b[name]))
    check(sorted(a) == sorted(b) and worst < 1e-4, f"final weights of the chain match the uninterrupted run (worst {worst:.2e})")

elif CASE == "crash":
    save = path("save")
    rc, out, err = train("crashed", 3, 2, 6, 4, extra=["--save-dir", save, "--save-every", "2"],
                         env={"ZERODP_TEST_CRASH_IN_SAVE": "1:4"})
    check(rc != 0, f"the run dies when rank 1 is killed in the save of step 4 (exit {rc})", err)
    names = sorted(os.listdir(save))
    check([n for n in names if not n.startswith(".")] == ["latest", "step-2"],
          "only step-2 and latest are visible", str(names))
    check(read_bytes(os.path.join(save, "latest")) == b"step-2\n", "latest still names step-2")
    partial = os.path.join(save, ".partial-step-4")
    left = sorted(os.listdir(partial)) if os.path.isdir(partial) else []
    check(any(".tmp." in n for n in left), "rank 1's unfinished file is hidden in .partial-step-4", str(left))
    rc, out, err = run(["ckpt", "inspect", save])
    check(rc == 0 and "all 3 files verified" in out, "the previous checkpoint verifies", out + err)
    rc, out, err = train("after", 3, 2, 6, 4, init_flag=False, extra=["--resume", save, "--save-dir", save,
                                                                      "--save-every", "2"])
    check(rc == 0, "resuming from the save directory (its latest) works", err)
    before, after = steps_of(path("crashed.jsonl.partial")), steps_of(path("after.jsonl"))
    check(sorted(after) == [2, 3, 4, 5], "the resumed run continues at step 2", str(sorted(after)))
    for s in (2, 3):
        check(after[s]["loss"] == before[s]["loss"], f"step {s}'s loss is what the killed run had computed")
    names = sorted(os.listdir(save))
    check(names == ["latest", "step-2", "step-4", "step-6"], "the next saves clear the leftovers", str(names))

elif CASE == "bad":
    rc, out, err = train("good", 2, 1, 2, 6, extra=["--save-dir", path("good"), "--save-every", "2"])
    check(rc == 0, "a good checkpoint at W=2 stage 1", err)
    good = path("good", "step-2")

    def damaged(name, damage):
        d = path(name)
        shutil.copytree(good, d)
        damage(d)
        return d

    def expect_refused(what, ckpt, needles, ranks=2, B=6, seq=16, extra=()):
        rc, out, err = train("refused", ranks, 1, 4, B, init_flag=False, seq=seq, extra=["--resume", ckpt] + list(extra))
        check(rc == 2, f"{what}: exit code 2 (got {rc})", err)
        for n in needles:
            check(n in err, f"{what}: the message names '{n}'", err)
        check("training GPT-2" not in out + err, f"{what}: nothing was trained", out + err)

    def truncate(d):
        f = os.path.join(d, "rank-00001.safetensors")
        os.truncate(f, os.path.getsize(f) - 100)

    def flip(d):
        f = os.path.join(d, "rank-00001.safetensors")
        b = bytearray(read_bytes(f))
        b[len(b) // 2] ^= 0x20
        with open(f, "wb") as g:
            g.write(b)

    t = damaged("truncated", truncate)
    expect_refused("a truncated shard", t, [os.path.join(t, "rank-00001.safetensors"), "truncated"])
    fl = damaged("flipped", flip)
    # Rank 1 verifies rank-00001's checksum; rank 0 must stop with the same error.
    expect_refused("a bit-flipped shard", fl, [os.path.join(fl, "rank-00001.safetensors"), "checksum mismatch"])
    m = damaged("missing", lambda d: os.remove(os.path.join(d, "rank-00000.safetensors")))
    expect_refused("a missing shard", m, [os.path.join(m, "rank-00000.safetensors"), "missing"])
    mf = damaged("manifest", lambda d: open(os.path.join(d, "manifest.json"), "a").write(" "))
    expect_refused("a changed manifest", mf, [os.path.join(mf, "manifest.json"), "checksum mismatch"])
    manifest = os.path.join(good, "manifest.json")
    expect_refused("another global batch", good, [manifest, "global batch", "2·1·6 = 12", "2·1·4 = 8"], B=4)
    expect_refused("another sequence length", good, [manifest, "--seq 16", "--seq 8"], seq=8)
    expect_refused("another optimizer", good, [manifest, "AdamW", "SGD"], extra=["--optimizer", "SGD"])
    other = path("other.safetensors")
    rc, out, err = run(["init", "--out", other, "--layers", "3", "--heads", "2", "--embd", "32", "--vocab", "256",
                        "--ctx", "16"])
    expect_refused("an --init of another model", good, [manifest, "L2 H2 C32", "L3 H2 C32", other],
                   extra=["--init", other])
    rc, out, err = run(["ckpt", "inspect", fl])
    check(rc == 2 and "CORRUPT" in out and "rank-00001.safetensors" in err, "inspect flags the corrupt file, exit 2",
          out + err)
    rc, out, err = run(["ckpt", "consolidate", t, "--out", path("x.safetensors")])
    check(rc == 2 and "truncated" in err and not os.path.exists(path("x.safetensors")),
          "consolidate refuses a truncated checkpoint and writes nothing", err)
    rc, out, err = run(["ckpt", "inspect", path("nowhere")])
    check(rc == 2 and path("nowhere") in err, "inspect of a missing path exits 2 naming it", err)
else:
    sys.exit(f"unknown case {CASE}")
shutil.rmtree(tmp, ignore_errors=True)
print(f"{CASE}: all checks passed")
