#!/usr/bin/env python3
"""zerodp across two test hosts (network namespaces joined by a veth pair, OpenMPI over TCP between
them, tests/pylib/zdptest/hosts.py), 2 hosts x 2 ranks:

  stages:  ZeRO stages 0-3 (fp32; stage 2 with G = 2, stage 3 also in bf16) give the --out weights
           of the same job on one host, bit for bit; hybrid sharding by node (--shard-group-size
           node: a group per host) gives the one-host run with --shard-group-size 2, bit for bit, and
           only the across-group all-reduce crosses the link (bytes_sent_inter_group); the default
           (--collectives auto: reduce-scatters and all-gathers in two levels, host then link) and
           --collectives flat give the same bits, and the bytes that crossed the link
           (bytes_sent_inter_host, summed over the ranks) are what `zerodp estimate --ranks-per-host 2`
           predicts for each, hybrid sharding's too;
  wire:    the hosts joined by the user-space wire (tests/pylib/zdptest/wire.py: what tc netem does,
           for kernels without it) instead of the veth pair: a 5 ms wire each way gives a TCP round
           trip of about 10 ms, and stage 3 and hybrid sharding across it give one host's bits;
  lost_host: `zerodp launch --min-ranks 2` runs the job on both hosts; once a checkpoint exists, host
           1 dies (every process on it killed) and its link goes down. The attempt at 4 ranks that
           follows cannot start its daemon there and writes no checkpoint, so the launch goes on at 2
           ranks on host 0 (G = 2, the same global batch) from the checkpoint, resharded: the same bits
           as 4 ranks to that checkpoint and 2 ranks from it, each loss within 1e-5 of the
           uninterrupted 4-rank run;
  sever:   the link is cut mid-run: every rank, on both hosts, exits within --comm-timeout + 30 s with
           the watchdog's message naming the collective, the step and the ranks across the link as
           not answering; the link back, mpirun ends with exit 1;
  sever_launch: the same under `zerodp launch`: mpirun, which would wait minutes for its daemon
           across the cut link, is ended after the ranks' failure notes, and the next attempt starts
           within --comm-timeout + 30 s of the cut; the link back, the launch finishes the job
           (exit 0) with the weights of an uninterrupted run;
  outage_launch: `zerodp launch --max-restarts 3` and a link cut that lasts 35 s
           (ZERODP_OUTAGE_S seconds): the attempt running at the cut ends through the watchdog; the
           tries that follow, while the link is down, cannot start their daemon on host 1 (mpirun
           fails within a second) and spend no restart: the launch names host 1, waits 1 s, 2 s,
           4 s ... between them and says until when; the link back, the next try runs the job to the
           end (exit 0, no attempt 3) with the weights of an uninterrupted run. Without the waits the
           three restarts are gone in a second and the launch gives up. Prints the timeline (each
           attempt and try, in seconds from the cut).

Where namespaces cannot be made (not root, no iproute2), prints SKIPPED with the reason and exits 77.

usage: multihost_tests.py ZERODP CASE     (CASE: stages | wire | lost_host | sever | sever_launch |
                                          outage_launch)
Exits non-zero with a message on the first failed check."""
import json
import os
import subprocess
import sys
import time

from zdptest import harness as zt
from zdptest.harness import check
from zdptest.hosts import TestHosts

ZERODP, CASE = zt.driver_args(__doc__)
why_not = TestHosts.unavailable()
if why_not:
    print(f"SKIPPED: no test hosts on this machine: {why_not}")
    sys.exit(77)

tmp = zt.workdir("multihost")
tokens, init = zt.make_inputs(ZERODP, tmp, layers=2, heads=2, embd=64, vocab=256, ctx=64, seed=23,
                              text_bytes=60000)
train = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "32", "--lr", "1e-3",
         "--log-every", "0"]


def path(name):
    return os.path.join(tmp, name)


def one_host(args, name):
    out = path(f"{name}-one.safetensors")
    rc, so, se = zt.run(ZERODP, train + args + ["--out", out], ranks=4, timeout=180)
    check(rc == 0, f"{name}: the one-host run (4 ranks) trains", se[-2000:])
    return out


def two_hosts(hosts, args, name):
    out, metrics = path(f"{name}-two.safetensors"), path(f"{name}-two.jsonl")
    r = zt.launch(hosts.mpirun([ZERODP] + train + args + ["--out", out, "--metrics", metrics], mpi_timeout=150),
                  timeout=180)
    check(r.code == 0, f"{name}: the run on 2 hosts x 2 ranks trains (exit {r.code})", r.err[-3000:])
    return out, zt.read_metrics(metrics)


def crossed_as_planned(metrics, steps, name, estimate_args):
    """The bytes all ranks sent across hosts (bytes_sent_inter_host) are `steps` times the planner's
    prediction for the stage-3 fp32 run of `train` on 2 hosts x 2 ranks."""
    rc, so, se = zt.run(ZERODP, ["estimate", "--json", "--gpus", "4", "--ranks-per-host", "2", "--stage", "3",
                                 "--dtype", "fp32", "--micro-batch", "2", "--seq", "32", "--layers", "2", "--heads",
                                 "2", "--embd", "64", "--vocab", "256", "--ctx", "64"] + estimate_args)
    check(rc == 0, f"{name}: zerodp estimate --ranks-per-host 2", se[-2000:])
    planned = json.loads(so)["stages"][0]["traffic_inter_host_bytes_per_step_all_ranks"]
    crossed = sum(sum(t["bytes_sent_inter_host"].values()) for t in metrics if t.get("event") == "traffic")
    check(crossed == steps * planned > 0,
          f"{name}: {crossed} bytes crossed the link in {steps} steps, as planned ({planned} a step)")
    return crossed


def stop(p):
    """Ends a job started on the hosts, whatever state it and the link are in; returns its stderr. (Its
    daemons and ranks hold its output pipes: they must go too, and a cut link must be mended for that.)"""
    if p.poll() is None:
        p.kill()
    try:
        return (p.communicate(timeout=20)[1] or b"").decode(errors="replace")
    except subprocess.TimeoutExpired:
        hosts.restore()
        hosts.kill_host(0)
        hosts.kill_host(1)
        return (p.communicate()[1] or b"").decode(errors="replace")


def launch_cut_job(hosts, launch_flags, mpi_timeout):
    """The job of the cases that cut the link under `zerodp launch` (stage 3, 200 steps, a checkpoint
    every 10, --comm-timeout 5): runs it straight through at 4 ranks, then starts `zerodp launch
    LAUNCH_FLAGS` of it on host 0, its stderr into a file. Returns the launch's process, the straight
    run's --out, the launch's --out and save directory, and a function that reads the launch's stderr."""
    job = train + ["--zero-stage", "3", "--steps", "200", "--save-every", "10", "--comm-timeout", "5"]
    straight = path("straight.safetensors")
    rc, so, se = zt.run(ZERODP, job + ["--save-dir", path("ck-straight"), "--out", straight], ranks=4, timeout=300)
    check(rc == 0, "the uninterrupted run at 4 ranks", se[-2000:])
    d, out, log = path("ck"), path("out.safetensors"), path("launch.err")
    cmd = hosts.on_host(0, [ZERODP, "launch"] + launch_flags + hosts.mpirun_args(mpi_timeout=mpi_timeout) + ["--"] +
                        job + ["--save-dir", d, "--out", out])
    with open(log, "wb") as err_file:
        p = subprocess.Popen(cmd, env=zt.ENV, stdout=subprocess.DEVNULL, stderr=err_file)

    def launch_log():
        with open(log, errors="replace") as f:
            return f.read()

    return p, straight, out, d, launch_log


RTT_PROBE = """
import socket, sys, time
if sys.argv[1] == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.213.0.2", 5701)); s.listen(1); print("listening", flush=True)
    c, _ = s.accept()
    while c.recv(1):
        c.sendall(b"k")
else:
    c = socket.create_connection(("10.213.0.2", 5701)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(21):
        t = time.monotonic(); c.sendall(b"x"); c.recv(1); rtts.append(time.monotonic() - t)
    print(sorted(rtts)[10] * 1e3)
"""


def round_trip_ms(hosts):
    """The median round trip of a 1-byte TCP message from host 0 to host 1 and back."""
    server = subprocess.Popen(hosts.on_host(1, [sys.executable, "-c", RTT_PROBE, "serve"]), stdout=subprocess.PIPE,
                              text=True)
    try:
        server.stdout.readline()
        r = subprocess.run(hosts.on_host(0, [sys.executable, "-c", RTT_PROBE, "ask"]), capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, "the round trip probe ran", r.stderr[-1000:])
        return float(r.stdout)
    finally:
        server.kill()
        server.wait()


with TestHosts(tmp, link="wire" if CASE == "wire" else "veth") as hosts:
    if CASE == "wire":
        # The user-space wire (zdptest/wire.py, for kernels without netem): its latency is there, and
        # training across it gives the bits of one host.
        base_rtt = round_trip_ms(hosts)
        check(hosts.shape(delay_ms=5, rate_mbit=200) == "wire", "the wire takes a latency and a bandwidth")
        rtt = round_trip_ms(hosts)
        check(9.5 <= rtt <= 9.5 + max(5.0, 3 * base_rtt), f"a 5 ms wire each way gives a ~10 ms round trip: "
              f"{rtt:.2f} ms (unshaped {base_rtt:.2f} ms)")
        for name, args in (("wire-stage3", ["--zero-stage", "3", "--steps", "3"]),
                           ("wire-hybrid", ["--zero-stage", "2", "--steps", "3", "--shard-group-size", "node"])):
            two, _ = two_hosts(hosts, args, name)
            one_args = args[:-2] + ["--shard-group-size", "2"] if "node" in args else args
            check(zt.read_bytes(two) == zt.read_bytes(one_host(one_args, name)),
                  f"{name}: 2 hosts x 2 ranks across the wire give the one-host run's weights, bit for bit")

    elif CASE == "stages":
        cases = [("stage0", ["--zero-stage", "0", "--steps", "4"]),
                 ("stage1", ["--zero-stage", "1", "--steps", "4"]),
                 ("stage2-accum2", ["--zero-stage", "2", "--steps", "3", "--accum", "2"]),
                 ("stage3", ["--zero-stage", "3", "--steps", "4"]),
                 ("stage3-bf16", ["--zero-stage", "3", "--steps", "4", "--dtype", "bf16"])]
        for name, args in cases:
            two, _ = two_hosts(hosts, args, name)
            check(zt.read_bytes(two) == zt.read_bytes(one_host(args, name)),
                  f"{name}: 2 hosts x 2 ranks give the one-host run's weights, bit for bit")
        for stage in ("2", "3"):
            name = f"hybrid-stage{stage}"
            two, metrics = two_hosts(hosts, ["--zero-stage", stage, "--steps", "4", "--shard-group-size", "node"], name)
            one = one_host(["--zero-stage", stage, "--steps", "4", "--shard-group-size", "2"], name)
            check(zt.read_bytes(two) == zt.read_bytes(one),
                  f"{name}: --shard-group-size node on 2 hosts gives --shard-group-size 2 on one, bit for bit")
            traffic = [m for m in metrics if m.get("event") == "traffic"]
            check(len(traffic) == 4, f"{name}: a traffic event per rank", str(metrics[-4:]))
            for t in traffic:
                inter, sent = t["bytes_sent_inter_group"], t["bytes_sent"]
                check(inter["all_gather"] == 0 and inter["reduce_scatter"] == 0 and inter["broadcast"] == 0 and
                      0 < inter["all_reduce"] <= sent["all_reduce"],
                      f"{name}: rank {t['rank']}'s gathers and reduce-scatters stay on its host; only the "
                      f"across-group all-reduce crosses the link", str(t))
            if stage == "3":
                crossed_as_planned(metrics, 4, name, ["--shard-group-size", "2"])
        outs = {}
        for mode in ("host-aware", "flat"):
            name = f"stage3-{mode}"
            outs[mode], metrics = two_hosts(hosts, ["--zero-stage", "3", "--steps", "4", "--collectives", mode], name)
            crossed_as_planned(metrics, 4, name, ["--collectives", mode])
        check(outs["host-aware"] and zt.read_bytes(outs["host-aware"]) == zt.read_bytes(outs["flat"]),
              "stage 3: two-level collectives give the flat ones' weights, bit for bit")

    elif CASE == "lost_host":
        import re
        steps = 40
        job = train[:] + ["--train-batch-size", "8", "--zero-stage", "2", "--steps", str(steps), "--save-every", "5"]
        del job[job.index("--micro-batch"):job.index("--micro-batch") + 2]
        job += ["--micro-batch", "2"]
        straight = path("straight.safetensors")
        rc, so, se = zt.run(ZERODP, job + ["--save-dir", path("ck-straight"), "--out", straight, "--metrics",
                                           path("straight.jsonl")], ranks=4, timeout=240)
        check(rc == 0, "the uninterrupted run at 4 ranks", se[-2000:])
        d, out = path("ck"), path("out.safetensors")
        cmd = hosts.on_host(0, [ZERODP, "launch", "--max-restarts", "3", "--min-ranks", "2"] +
                            hosts.mpirun_args(mpi_timeout=200) + ["--"] + job +
                            ["--save-dir", d, "--out", out, "--metrics", path("out.jsonl"), "--comm-timeout", "10"])
        p = subprocess.Popen(cmd, env=zt.ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        killed = False
        try:
            deadline = time.monotonic() + 240
            while p.poll() is None and time.monotonic() < deadline:
                if not killed and os.path.exists(os.path.join(d, "step-10")):
                    hosts.kill_host(1)  # the machine dies ...
                    hosts.sever()       # ... and stays unreachable
                    killed = True
                time.sleep(0.02)
            rc = p.poll()
        finally:
            err = stop(p)
        check(killed, "host 1 was killed once the checkpoint of step 10 existed", err[-3000:])
        check(rc == 0, f"the launch went on at 2 ranks and finished (exit {rc})", err[-4000:])
        attempts = re.findall(r"zerodp launch: attempt \d+ of \d+: .*? -n (\d+) ", err)
        check(attempts[:1] == ["4"] and attempts[-1] == "2" and "restarting at 2 ranks" in err,
              f"the attempts ran at {attempts} ranks: 4 first, 2 after an attempt that wrote no checkpoint", err[-4000:])
        m = re.search(r"resuming from \S*/step-(\d+) at step", err)
        check(m is not None, "the last attempt resumed from a checkpoint", err[-3000:])
        at = m.group(1)
        # By hand: 4 ranks (one host: the same bits as two) to that checkpoint, then 2 ranks from it.
        dm, manual = path("ck-manual"), path("manual.safetensors")
        first = job[:]
        first[first.index("--steps") + 1] = at
        rc, so, se = zt.run(ZERODP, first + ["--save-dir", dm], ranks=4, timeout=240)
        check(rc == 0, f"by hand: {at} steps at 4 ranks", se[-2000:])
        rc, so, se = zt.run(ZERODP, job + ["--save-dir", dm, "--resume", dm, "--out", manual], ranks=2, timeout=240)
        check(rc == 0, "by hand: the rest at 2 ranks from the checkpoint", se[-2000:])
        check(zt.read_bytes(out) == zt.read_bytes(manual),
              f"the launch's weights are, bit for bit, {at} steps at 4 ranks on 2 hosts then the rest at 2 ranks")
        loss_s = {r["step"]: r["loss"] for r in zt.read_metrics(path("straight.jsonl")) if r.get("event") == "step"}
        loss_r = {r["step"]: r["loss"] for r in zt.read_metrics(path("out.jsonl")) if r.get("event") == "step"}
        worst = max(abs(loss_r[k] - loss_s[k]) / abs(loss_s[k]) for k in loss_r)
        check(sorted(loss_r) == list(range(int(at), steps)) and worst <= 1e-5,
              f"each step's loss at 2 ranks is the uninterrupted run's within 1e-5 relative (largest {worst:.1e})")

    elif CASE == "sever":
        timeout_s = 5
        outputs = path("ranks-output")
        cmd = hosts.mpirun([ZERODP] + train + ["--zero-stage", "3", "--steps", "1000000", "--comm-timeout",
                                               str(timeout_s)], output_dir=outputs)
        p = subprocess.Popen(cmd, env=zt.ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # Training on every rank, then the cable pulled.
            deadline = time.monotonic() + 60
            while len(hosts.processes(ZERODP)) < 4 or not os.path.exists(os.path.join(outputs, "1", "rank.0")):
                check(time.monotonic() < deadline and p.poll() is None, "the 4 ranks started", "")
                time.sleep(0.2)
            time.sleep(3)
            ranks = hosts.processes(ZERODP)
            check(len(ranks) == 4 and sorted(ranks.values()) == [0, 0, 1, 1], "2 ranks run on each host", str(ranks))
            hosts.sever()
            cut = time.monotonic()
            while hosts.processes(ZERODP) and time.monotonic() - cut < timeout_s + 40:
                time.sleep(0.2)
            took = time.monotonic() - cut
            left = hosts.processes(ZERODP)
            check(not left, f"every rank, on both hosts, exited within --comm-timeout + 30 s of the cut "
                  f"(took {took:.1f} s)", f"still running: {left}")
            check(took < timeout_s + 30, f"the ranks exited {took:.1f} s after the cut, within {timeout_s} + 30 s")
            print(f"the last rank exited {took:.1f} s after the link was cut (--comm-timeout {timeout_s})")
            # Whichever rank of a host diagnoses first ends its host's ranks (MPI_Abort), so each host
            # must have at least one message, and every message must tell the story from its side.
            told = {0: [], 1: []}
            for rank in range(4):
                with open(os.path.join(outputs, "1", f"rank.{rank}", "stderr"), errors="replace") as f:
                    err = f.read()
                line = next((x for x in err.splitlines() if "(--comm-timeout)" in x), None)
                if line is None:
                    # A rank sending across the link when it went down (the last host of a two-level
                    # reduce-scatter sends finished chunks back) is ended by OpenMPI's TCP transport
                    # itself, which aborts on a failed reconnect instead of returning an error.
                    if "Unable to connect to the peer" in err:
                        told[rank // 2].append(rank)
                    continue
                across = "ranks 2-3" if rank < 2 else "ranks 0-1"
                check(line.startswith(f"[rank {rank}] error: collective ") and "did not complete within 5 s" in
                      line and "(step " in line and f"Not arrived: {across} did not answer" in line and
                      "disagree" not in line,
                      f"rank {rank}'s message names the collective, the step, and {across} (across the link) as "
                      f"not answering", line)
                told[rank // 2].append(rank)
            check(told[0] and told[1], f"a rank on each host wrote the watchdog's message, or OpenMPI's on a lost "
                  f"connection (its host's output file): {told}")
            # The launcher's daemons cannot talk across a cut link: mpirun ends once it is back.
            hosts.restore()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
            check(p.returncode is not None and p.returncode != 0,
                  f"mpirun ended with a failure once the link was back (exit {p.returncode})")
        finally:
            stop(p)
    elif CASE == "sever_launch":
        import re
        timeout_s = 5  # the job's --comm-timeout
        p, straight, out, d, launch_log = launch_cut_job(hosts, ["--max-restarts", "6"], 280)
        try:
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(d, "step-10")):
                if time.monotonic() > deadline or p.poll() is not None:
                    check(False, "the job wrote its checkpoint of step 10", launch_log()[-3000:])
                time.sleep(0.05)
            hosts.sever()
            cut = time.monotonic()
            while "attempt 2 of" not in launch_log() and p.poll() is None and time.monotonic() - cut < timeout_s + 60:
                time.sleep(0.05)
            took = time.monotonic() - cut
            check("attempt 2 of" in launch_log(), f"the launch started another attempt after the cut (waited "
                  f"{took:.1f} s)", launch_log()[-3000:])
            print(f"the next attempt started {took:.1f} s after the link was cut (--comm-timeout {timeout_s})")
            check(took < timeout_s + 30, f"it started {took:.1f} s after the cut, within {timeout_s} + 30 s",
                  launch_log()[-3000:])
            hosts.restore()
            try:
                p.wait(timeout=240)
            except subprocess.TimeoutExpired:
                pass
            err = launch_log()
            check(p.returncode == 0, f"the link back, the launch finished the job (exit {p.returncode})", err[-4000:])
            check(re.search(r"resuming from \S*/step-\d+ at step", err) is not None,
                  "an attempt after the cut resumed from a checkpoint", err[-3000:])
            check(zt.read_bytes(out) == zt.read_bytes(straight),
                  "the launch's weights are the uninterrupted run's, bit for bit")
        finally:
            stop(p)
    elif CASE == "outage_launch":
        import re
        outage_s = float(os.environ.get("ZERODP_OUTAGE_S", "35"))
        # As the user ran it: --max-restarts 3 and the default --join-timeout (600 s).
        p, straight, out, d, launch_log = launch_cut_job(hosts, ["--max-restarts", "3"], int(outage_s + 250))
        began = time.monotonic()

        timeline = []  # (seconds since the launch began, the launch's line)

        def note_lines():
            """The launch's own lines that appeared since the last call, with the time they were seen."""
            lines = [x for x in launch_log().splitlines() if x.startswith("zerodp launch:")]
            for line in lines[len(timeline):]:
                timeline.append((time.monotonic() - began, line))

        try:
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(d, "step-10")):
                if time.monotonic() > deadline or p.poll() is not None:
                    check(False, "the job wrote its checkpoint of step 10", launch_log()[-3000:])
                note_lines()
                time.sleep(0.05)
            hosts.sever()
            cut = time.monotonic() - began
            while time.monotonic() - began - cut < outage_s and p.poll() is None:
                note_lines()
                time.sleep(0.05)
            hosts.restore()
            back = time.monotonic() - began
            deadline = time.monotonic() + outage_s + 250
            while p.poll() is None and time.monotonic() < deadline:
                note_lines()
                time.sleep(0.05)
            note_lines()
            print(f"the link cut at {cut:.1f} s and back at {back:.1f} s (down {back - cut:.1f} s); the launch's "
                  f"lines, in seconds from its start:")
            for t, line in timeline:
                print(f"{t:7.1f} s  {line[:200]}")
            print(f"the launch ended (exit {p.returncode}) at {time.monotonic() - began:.1f} s")
            err = launch_log()
            check(p.returncode == 0, f"the link back, the launch finished the job (exit {p.returncode})", err[-5000:])
            waits = [line for t, line in timeline if "could not start" in line and cut <= t <= back]
            check(len(waits) >= 2 and all("host h1 does not answer" in w and "not counted as a restart" in w and
                                          "--join-timeout" in w and "(until " in w for w in waits),
                  f"while the link was down, {len(waits)} tries could not start; each named host h1, spent no "
                  f"restart and said how long it waits and until when", err[-5000:])
            check("attempt 3 of" not in err and "the job finished after 1 restart" in err,
                  "the tries that could not start spent no restart: attempt 2 finished the job", err[-5000:])
            check(re.search(r"resuming from \S*/step-\d+ at step", err) is not None,
                  "the attempt after the outage resumed from a checkpoint", err[-3000:])
            check(zt.read_bytes(out) == zt.read_bytes(straight),
                  "the launch's weights are the uninterrupted run's, bit for bit")
        finally:
            hosts.restore()
            stop(p)
    else:
        sys.exit(f"unknown case {CASE}")
print(f"{CASE}: all checks passed")
