#!/usr/bin/env python3
"""End-to-end checks of `zerodp train --shard-group-size N|node` (hybrid sharding; mpirun):

  results:    at W = 4, N = 2 and N = 1 train as full sharding does at stages 1-3 (fp32: losses and
              grad norms within 1e-5 relative, the --out weights within 1e-4 absolute; another order
              of the same sums), and hold on each rank exactly the model states (param, grad, master,
              optim) of a W = N run without hybrid sharding; the traffic event's
              bytes_sent_inter_group holds the all-reduces across groups only (zero with one group),
              and both equal `zerodp estimate --shard-group-size 2` byte for byte; `node` on one host is one group of all
              ranks: the same bits as without the flag; on two (simulated) hosts of two ranks it is N = 2, bit
              for bit;
  usage:      N that does not divide W, stage 0, a bad value, node over uneven hosts exit 2 naming the flag;
              the DeepSpeed key
              mics_shard_size is honoured (the states of its N) and the flag wins; hpZ
              (zero_hpz_partition_size) together with hybrid sharding is refused, naming both;
  checkpoint: a W = 4, N = 2 run saves N files (world_size N, data.ranks W) and resumes at W = 4, N = 2
              to the same bits as a straight run, and at W = 2 without hybrid sharding (same global batch).

usage: hybrid_tests.py ZERODP CASE     (CASE: results | usage | checkpoint)
Exits non-zero with a message on the first failed check."""
import functools
import json
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

ZERODP, CASE = zt.driver_args(__doc__)
run = functools.partial(zt.run, ZERODP)  # run(args, ranks=None, timeout=120)

MODEL = {"layers": 2, "heads": 4, "embd": 48, "vocab": 256, "ctx": 32}
tmp = zt.workdir("hybrid")
tokens, init = zt.make_inputs(ZERODP, tmp, **MODEL, seed=13, text_bytes=30000)
base = ["train", "--init", init, "--data", tokens, "--seq", "16", "--lr", "3e-3", "--clip", "1.0", "--log-every", "0"]
STATES = ("param", "grad", "master", "optim")


def path(name):
    return os.path.join(tmp, name)


def trained(tag, ranks, extra, steps=3, micro_batch=2, env=None):
    """Runs training; returns (weights {name: values}, weights bytes, [(loss, grad_norm)], memory records)."""
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    blob, steps_, memory = zt.trained(ZERODP, base + ["--micro-batch", str(micro_batch), "--steps", str(steps), "--out",
                                                      out, "--metrics", m] + extra, ranks, out, m, tag, env)
    return zt.safetensors_f32(out), blob, steps_, memory


def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b))


if CASE == "results":
    for stage in (1, 2, 3):
        flags = ["--zero-stage", str(stage)]
        w_full, b_full, s_full, _ = trained(f"full-{stage}", 4, flags)
        blob = {}
        for N in (2, 1):
            what = f"W=4 N={N} stage {stage}"
            w, blob[N], s, mem = trained(f"hybrid-{stage}-{N}", 4, flags + ["--shard-group-size", str(N)])
            check(all(close(a[0], b[0], 1e-5) and close(a[1], b[1], 1e-5) for a, b in zip(s, s_full)),
                  f"{what}: losses and grad norms within 1e-5 of full sharding", f"{s}\n{s_full}")
            worst = max(abs(x - y) for k in w_full for x, y in zip(w[k], w_full[k]))
            check(worst < 1e-4, f"{what}: the --out weights within 1e-4 of full sharding (largest difference {worst:.2e})")
            if N == 2:
                rc, so, se = run(["estimate", "--json", "--gpus", "4", "--stage", str(stage), "--shard-group-size", "2", "--dtype", "fp32",
                                  "--micro-batch", "2", "--seq", "16"] +
                                 [a for k, v in MODEL.items() for a in (f"--{k}", str(v))])
                check(rc == 0, f"{what}: estimate --shard-group-size 2", se)
                est = json.loads(so)["stages"][0]
                for t in records(path(f"hybrid-{stage}-{N}.jsonl"), "traffic"):
                    scalar = 12 if t["rank"] % 2 == 1 else 0  # the last of its group sends the scalars across
                    check(sum(t["bytes_sent"].values()) == 3 * est["traffic_bytes_per_step"] and
                          sum(t["bytes_sent_inter_group"].values()) ==
                          3 * (est["traffic_inter_group_bytes_per_step"] + scalar),
                          f"{what} rank {t['rank']}: 3 steps sent what the planner says, across groups too",
                          f"{t}\n{est}")
            for t in records(path(f"hybrid-{stage}-{N}.jsonl"), "traffic"):
                inter = t["bytes_sent_inter_group"]
                check(inter["reduce_scatter"] == inter["all_gather"] == 0 and
                      0 < inter["all_reduce"] <= t["bytes_sent"]["all_reduce"],
                      f"{what} rank {t['rank']}: only the all-reduces across the groups cross a group boundary", t)
            _, _, _, mem_n = trained(f"plain-{stage}-{N}", N, flags, micro_batch=2)
            want = {r["rank"]: {k: r["live_bytes"][k] for k in STATES} for r in mem_n}
            for rec in mem:
                got = {k: rec["live_bytes"][k] for k in STATES}
                check(got == want[rec["rank"] % N],
                      f"{what} rank {rec['rank']}: the model states of a {N}-rank run", f"{got}\n{want}")
        check(all(sum(t["bytes_sent_inter_group"].values()) == 0 for t in records(path(f"full-{stage}.jsonl"), "traffic")),
              f"stage {stage}: full sharding is one group: nothing crosses a group boundary")
        _, b_node, s_node, _ = trained(f"node-{stage}", 4, flags + ["--shard-group-size", "node"])
        check(b_node == b_full and s_node == s_full, f"stage {stage}: --shard-group-size node on one host is full "
              "sharding, the same bits")
        # Two simulated hosts of two ranks (learn_hosts reads ZERODP_TEST_RANKS_PER_HOST): node means 2.
        _, b_hosts, _, _ = trained(f"node-hosts-{stage}", 4, flags + ["--shard-group-size", "node"],
                                   env={"ZERODP_TEST_RANKS_PER_HOST": "2"})
        check(b_hosts == blob[2], f"stage {stage}: --shard-group-size node on 2 hosts x 2 ranks is "
              "--shard-group-size 2, the same bits")

elif CASE == "usage":
    for extra, what in ((["--zero-stage", "2", "--shard-group-size", "3"], "3 does not divide 4"),
                        (["--zero-stage", "0", "--shard-group-size", "2"], "stage 0 shards nothing"),
                        (["--zero-stage", "2", "--shard-group-size", "0"], "0 is no group"),
                        (["--zero-stage", "2", "--shard-group-size", "two"], "not a number")):
        rc, so, se = run(base + ["--micro-batch", "2", "--steps", "1"] + extra, 4)
        check(rc == 2 and "--shard-group-size" in se, f"{what}: exit 2 naming --shard-group-size", se)
    # node over hosts of 3 and 1 ranks (simulated): no group size fits them all; refused, saying so.
    rc, so, se = run(base + ["--micro-batch", "2", "--steps", "1", "--zero-stage", "2", "--shard-group-size", "node"],
                     4, env={"ZERODP_TEST_RANKS_PER_HOST": "3"})
    check(rc == 2 and "--shard-group-size node" in se and "between 1 and 3 ranks a host" in se,
          "node over uneven hosts: exit 2 naming the flag and the hosts' sizes", se)
    cfg = path("mics.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 2, "mics_shard_size": 2}}, f)
    _, _, _, mem = trained("mics", 4, ["--config", cfg], steps=1)
    _, _, _, mem2 = trained("mics-plain-2", 2, ["--zero-stage", "2"], steps=1)
    _, _, _, mem4 = trained("mics-flag-4", 4, ["--config", cfg, "--shard-group-size", "4"], steps=1)
    _, _, _, full = trained("mics-full-4", 4, ["--zero-stage", "2"], steps=1)
    check(all({k: r["live_bytes"][k] for k in STATES} == {k: mem2[r["rank"] % 2]["live_bytes"][k] for k in STATES}
              for r in mem), "mics_shard_size 2 shards over groups of 2")
    check(all({k: r["live_bytes"][k] for k in STATES} == {k: full[r["rank"]]["live_bytes"][k] for k in STATES}
              for r in mem4), "--shard-group-size 4 wins over the config's mics_shard_size")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2, "mics_shard_size": 2}}, f)
    rc, so, se = run(base + ["--micro-batch", "2", "--steps", "1", "--config", cfg], 4)
    check(rc == 2 and "--hpz-partition-size" in se and "--shard-group-size" in se,
          "zero_hpz_partition_size with mics_shard_size is refused, naming both", se)
    rc, so, se = run(["train", "--help"])
    check("--shard-group-size" in so, "--help lists the flag", so)

elif CASE == "checkpoint":
    flags = ["--zero-stage", "3", "--shard-group-size", "2"]
    _, straight, _, _ = trained("straight", 4, flags, steps=4)
    d = path("ck")
    rc, so, se = run(base + ["--micro-batch", "2", "--steps", "2", "--save-dir", d] + flags, 4)
    check(rc == 0, "W=4 N=2: 2 steps saved", se)
    manifest = json.load(open(os.path.join(d, "step-2", "manifest.json")))
    check(manifest["world_size"] == 2 and manifest["data"]["ranks"] == 4 and len(manifest["files"]) == 2,
          "the checkpoint holds N = 2 rank files and says the run had 4 ranks",
          json.dumps({k: manifest[k] for k in ("world_size", "data")}))
    out = path("resumed.safetensors")
    rc, so, se = run(base + ["--micro-batch", "2", "--steps", "4", "--resume", d, "--out", out] + flags, 4)
    check(rc == 0 and zt.read_bytes(out) == straight, "resumed at W=4 N=2: the same bits as 4 steps straight", se)
    out2 = path("resumed-w2.safetensors")
    rc, so, se = run(base + ["--micro-batch", "4", "--steps", "4", "--resume", d, "--out", out2, "--zero-stage", "2"], 2)
    check(rc == 0, "resumed at W=2 without hybrid sharding (the same global batch: 2 ranks x 4)", se)
    a, b = zt.safetensors_f32(out2), zt.safetensors_f32(path("straight.safetensors"))
    worst = max(abs(x - y) for k in b for x, y in zip(a[k], b[k]))
    check(worst < 1e-3, f"... and lands near the straight run (largest difference {worst:.2e})")
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
