#!/usr/bin/env python3
"""ZeRO++ through the CLI (zero/settings.h, docs/design.md "ZeRO++"), 4 ranks on 2 hosts of 2 simulated on
one machine (ZERODP_TEST_RANKS_PER_HOST=2: learn_hosts takes ranks 0-1 and 2-3 for hosts, so the
collectives run in two levels as on two real hosts; multihost_stages has the real ones):

  results:    hpZ (--hpz-partition-size 2) gives plain stage 3's weights bit for bit, holds its secondary
              copy in `gathered` (a higher peak, nothing left at the end) and all-gathers fewer bytes
              over all ranks; qwZ (--zero-quantized-weights) all-gathers less than a third of the bytes
              and qgZ (--zero-quantized-gradients) sends fewer bytes across hosts, each with losses
              within 1% of the exact run; all three together (DeepSpeed's keys in a --config) cut the
              bytes across hosts at least 3.5-fold against flat collectives, and give the same bits twice;
  checkpoint: qwZ + qgZ + hpZ saved at step 4 and resumed gives the straight 8-step run's weights bit
              for bit; the checkpoint resumes at 2 ranks too (resharded; one host, so qgZ is exact);
  nonfinite:  an Inf gradient (zerodp-testing --inject-overflow-step) under qwZ + qgZ + hpZ stops an
              fp32 run with exit 1 naming the step, and with --skip-nonfinite skips that step only
              ("skipped": true) and trains on;
  planned:    for each ZeRO++ part and their combinations (hpZ over the host's 2 ranks and over all 4, qgZ
              at stages 2 and 3, bf16 with accumulation, flat collectives), `zerodp estimate
              --ranks-per-host 2` with the same flags predicts on every rank the bytes sent per step and
              the peak of all memory together (hpZ's slices, qwZ's quantized buffers, qgZ's staging), and
              the bytes all ranks sent across hosts, byte for byte.

usage: zeropp_tests.py ZERODP CASE     (CASE: results | checkpoint | nonfinite | planned)
Exits non-zero with a message on the first failed check."""
import json
import os
import sys

from zdptest import harness as zt
from zdptest.harness import check, records

ZERODP, CASE = zt.driver_args(__doc__)
HOSTS = {"ZERODP_TEST_RANKS_PER_HOST": "2"}
tmp = zt.workdir("zeropp")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=2, embd=64, vocab=256, ctx=64, seed=31, text_bytes=60000)
base = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "32", "--lr", "1e-3",
        "--zero-stage", "3", "--log-every", "0"]
ALL3 = ["--zero-quantized-weights", "--zero-quantized-gradients", "--hpz-partition-size", "2"]


def path(name):
    return os.path.join(tmp, name)


def train(tag, extra, steps=12, ranks=4, expect=0, stage=3):
    out, m = path(f"{tag}.safetensors"), path(f"{tag}.jsonl")
    args = [str(stage) if k > 0 and base[k - 1] == "--zero-stage" else a for k, a in enumerate(base)]
    rc, so, se = zt.run(ZERODP, args + ["--steps", str(steps), "--out", out, "--metrics", m] + extra, ranks=ranks,
                        timeout=240, env=HOSTS)
    check(rc == expect, f"{tag}: exit {rc} (expected {expect})", se[-3000:])
    return out, m, se


def losses(m):
    return [s["loss"] for s in records(m, "step")]


def traffic(m, key):
    """{kind: bytes} summed over the ranks of the traffic records' `key`."""
    total = {}
    for t in records(m, "traffic"):
        for k, v in t[key].items():
            total[k] = total.get(k, 0) + v
    return total


def within(a, b, rel):
    return all(abs(x - y) <= rel * abs(y) for x, y in zip(a, b)) and len(a) == len(b)


if CASE == "results":
    exact_out, exact_m, _ = train("exact", [])
    flat_out, flat_m, _ = train("flat", ["--collectives", "flat"])
    check(zt.read_bytes(flat_out) == zt.read_bytes(exact_out), "two-level and flat collectives give the same bits")
    hpz_out, hpz_m, _ = train("hpz", ["--hpz-partition-size", "2"])
    check(zt.read_bytes(hpz_out) == zt.read_bytes(exact_out), "hpZ gives plain stage 3's weights, bit for bit")
    mem_exact, mem_hpz = records(exact_m, "memory"), records(hpz_m, "memory")
    check(all(h["peak_bytes"]["gathered"] > e["peak_bytes"]["gathered"] for h, e in zip(mem_hpz, mem_exact)),
          "hpZ's secondary copy is counted in gathered (a higher peak)", str([m["peak_bytes"] for m in mem_hpz]))
    check(all(h["live_bytes"]["gathered"] == 0 for h in mem_hpz), "hpZ leaves nothing gathered at the end",
          str([m["live_bytes"] for m in mem_hpz]))
    check(traffic(hpz_m, "bytes_sent")["all_gather"] < traffic(exact_m, "bytes_sent")["all_gather"],
          "hpZ: the backward's gathers within the host send fewer bytes over all ranks")
    check(0 < traffic(hpz_m, "bytes_sent_inter_host")["all_gather"] <
          traffic(exact_m, "bytes_sent_inter_host")["all_gather"],
          "hpZ: only the forward's gathers cross hosts (fewer bytes across)")
    qwz_out, qwz_m, _ = train("qwz", ["--zero-quantized-weights"])
    ratio = traffic(qwz_m, "bytes_sent")["all_gather"] / traffic(exact_m, "bytes_sent")["all_gather"]
    check(ratio < 0.3, f"qwZ all-gathers {ratio:.3f} of fp32's bytes (int8 and a scale per 256)")
    check(within(losses(qwz_m), losses(exact_m), 0.01), "qwZ's losses are within 1% of the exact run's",
          f"{losses(qwz_m)}\n{losses(exact_m)}")
    check(losses(qwz_m) != losses(exact_m), "qwZ computes with quantized weights (the losses differ)")
    qgz_out, qgz_m, _ = train("qgz", ["--zero-quantized-gradients"])
    check(traffic(qgz_m, "bytes_sent_inter_host")["reduce_scatter"] * 3 <
          traffic(exact_m, "bytes_sent_inter_host")["reduce_scatter"],
          "qgZ sends under a third of the reduce-scatter's bytes across hosts")
    check(within(losses(qgz_m), losses(exact_m), 0.01), "qgZ's losses are within 1% of the exact run's",
          f"{losses(qgz_m)}\n{losses(exact_m)}")
    cfg = path("zeropp.json")
    with open(cfg, "w") as f:
        json.dump({"zero_optimization": {"stage": 3, "zero_quantized_weights": True, "zero_quantized_gradients": True,
                                         "zero_hpz_partition_size": 2}}, f)
    all_out, all_m, _ = train("all3", ["--config", cfg])
    again_out, _, _ = train("all3-again", ALL3)
    check(zt.read_bytes(all_out) == zt.read_bytes(again_out),
          "qwZ + qgZ + hpZ by DeepSpeed's keys and by the flags: the same bits")
    crossed = sum(traffic(all_m, "bytes_sent_inter_host").values())
    crossed_flat = sum(traffic(flat_m, "bytes_sent_inter_host").values())
    check(crossed_flat >= 3.5 * crossed,
          f"qwZ + qgZ + hpZ: {crossed} bytes across hosts against flat's {crossed_flat} "
          f"({crossed_flat / crossed:.1f}x fewer, at least 3.5x)")
    check(within(losses(all_m), losses(exact_m), 0.01), "qwZ + qgZ + hpZ: losses within 1% of the exact run's",
          f"{losses(all_m)}\n{losses(exact_m)}")

elif CASE == "checkpoint":
    straight, _, _ = train("straight", ALL3 + ["--save-dir", path("ck-straight")], steps=8)
    d = path("ck")
    train("first", ALL3 + ["--save-dir", d, "--save-every", "4"], steps=4)
    # At 2 ranks first (the 4-rank resume below saves its own last step into d).
    _, m2, _ = train("resharded", ALL3 + ["--save-dir", path("ck2"), "--resume", d, "--accum", "2"], steps=8, ranks=2)
    resumed, _, _ = train("resumed", ALL3 + ["--save-dir", d, "--resume", d], steps=8)
    check(zt.read_bytes(resumed) == zt.read_bytes(straight),
          "qwZ + qgZ + hpZ resumed at step 4 gives the straight run's weights, bit for bit")
    _, ms, _ = train("straight-metrics", ALL3 + ["--save-dir", path("ck3")], steps=8)
    check(within(losses(m2), losses(ms)[4:], 0.01),
          "the checkpoint resumes at 2 ranks (resharded) with losses within 1% of the 4-rank run's",
          f"{losses(m2)}\n{losses(ms)}")

elif CASE == "nonfinite":
    fault = ["--inject-overflow-step", "2", "--inject-overflow-rank", "1", "--inject-overflow-unit", "1"]
    _, _, err = train("stops", ALL3 + fault, steps=5, expect=1)
    check("step 2" in err or "step 3" in err, "an Inf gradient under ZeRO++ stops the fp32 run naming the step",
          err[-2000:])
    _, m, _ = train("skips", ALL3 + fault + ["--skip-nonfinite"], steps=5)
    steps = records(m, "step")
    check([s.get("skipped", False) for s in steps] == [False, False, True, False, False],
          "with --skip-nonfinite only the faulty step is skipped", str(steps))
elif CASE == "planned":
    dims = ["--layers", "2", "--heads", "2", "--embd", "64", "--vocab", "256", "--ctx", "64"]
    hpz2, qwz, qgz = ["--hpz-partition-size", "2"], ["--zero-quantized-weights"], ["--zero-quantized-gradients"]
    bf16 = ["--dtype", "bf16", "--fp32-grad-accum"]
    modes = [(3, []), (3, hpz2), (3, ["--hpz-partition-size", "4"]), (3, qwz), (3, qgz), (2, qgz),
             (3, ALL3), (3, ALL3 + bf16 + ["--accum", "2"]), (3, qwz + bf16 + ["--accum", "3"]),
             (3, ALL3 + ["--collectives", "flat"])]
    steps = 2
    for n, (stage, flags) in enumerate(modes):
        what = f"stage {stage} {' '.join(flags) or 'exact'}"
        _, m, _ = train(f"planned-{n}", flags, steps=steps, stage=stage)
        rc, so, se = zt.run(ZERODP, ["estimate", "--json", "--gpus", "4", "--ranks-per-host", "2", "--stage", str(stage),
                                     "--micro-batch", "2", "--seq", "32"] + dims + flags +
                            ([] if "--dtype" in flags else ["--dtype", "fp32"]))  # train's default on the CPU
        check(rc == 0, f"{what}: zerodp estimate takes the flags", se[-2000:])
        est = json.loads(so)["stages"][0]
        for t in records(m, "traffic"):
            sent = sum(t["bytes_sent"].values())
            check(sent == steps * est["traffic_bytes_per_step"],
                  f"{what} rank {t['rank']}: sent {sent} bytes in {steps} steps, "
                  f"{steps} x {est['traffic_bytes_per_step']} planned")
        crossed = sum(traffic(m, "bytes_sent_inter_host").values())
        planned = est["traffic_inter_host_bytes_per_step_all_ranks"]
        check(crossed == steps * planned, f"{what}: {crossed} bytes crossed hosts, {steps} x {planned} planned")
        for rec in records(m, "memory"):
            got = rec["peak_bytes"]["total"]
            check(got == est["bytes_per_rank"]["total"],
                  f"{what} rank {rec['rank']}: peak {got} bytes, {est['bytes_per_rank']['total']} planned",
                  json.dumps(rec["peak_bytes"]))
else:
    sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
