#!/usr/bin/env python3
"""Fault soak (issue 46, item 7): a training job under `zerodp launch` on two test hosts (network
namespaces joined by a veth pair, 2 ranks each, OpenMPI over TCP: tests/pylib/zdptest/hosts.py) is hit
by random faults for --minutes or more, and must end at the uninterrupted run's bits with every
checkpoint left verifying.

The faults (faults.py), drawn from a seeded RNG (--seed):
  rank kill              SIGKILL to a random rank while the job trains;
  kill in a sync save    SIGKILL to a random rank while a checkpoint is being saved;
  kill in an async save  SIGKILL to a rank whose background write (--async-save) is in flight: only
                         where `zerodp train --help` lists --async-save, else reported as not run;
  link cut               host 1's end of the link down for a random 2-8 s.

It makes its inputs (the first 200 KB of data/tinyshakespeare.txt as byte tokens, a `zerodp init`
GPT-2 L2 H2 C64), runs the job once straight through on the two hosts (the reference), then runs
it in rounds under `zerodp launch --max-restarts 1000`, faulting one round after the other until
--minutes have passed and every kind has happened --per-kind times, then lets the last round finish.
A round is the whole job from step 0 in a fresh --save-dir, with synchronous saves or, where
available, asynchronous ones (whichever save kill has fewer so far); a round that finishes while
faults are still due is followed by another. After each round: the launch exited 0, its --out is
the reference's byte for byte, every step-<n> left in the save directory passes `zerodp ckpt
inspect` and `latest` names the last step. A hang (nothing trains for 240 s after a fault, or no
step for 120 s) stops the soak with the launch's log kept. Not part of CI.

usage: run.py --zerodp BUILD/zerodp [--minutes 10] [--seed 1] [--per-kind 20] [--steps 1500]
              [--work DIR] [--deadline-minutes M] [--no-async]
(root: it makes network namespaces; exit 0 when every round ended at the reference's bits, every
checkpoint verified and every kind reached --per-kind; 1 otherwise; 77 when no test hosts can be made)
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))

import faults as F  # beside this script, which Python puts first on sys.path
from job import Job
from zdptest import harness as zt  # tests/pylib: PYTHONPATH=tests/pylib, or pip install -e tests/pylib
from zdptest.hosts import TestHosts

RANKS = 4  # 2 a host: TestHosts.mpirun_args' default
# Small, so that faults come often: a step takes 7-120 ms on 2 shared, oversubscribed cores (a round
# of 1500 steps 10 s to 3 min), and a save (4 files of 0.36 MB, each fsynced) is still a window of
# some milliseconds to aim a kill at.
MODEL = dict(layers=2, heads=2, embd=64, vocab=256, ctx=64)
SAVE_EVERY, KEEP = 5, 8     # --keep: the removal of old checkpoints is under fire too
COMM_TIMEOUT, END_GRACE = 4, 2
SETTLE_S = COMM_TIMEOUT + END_GRACE + 4   # still training this long after a cut's end: it was ridden through
RECOVERY_LIMIT_S = 240      # a cut of 8 s + the watchdog + the launch's waits for host 1 take < 60 s
STALL_S = 120               # no step for this long while an attempt trains: a hang


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--zerodp", required=True, help="the zerodp binary (build/zerodp)")
    p.add_argument("--minutes", type=float, default=10, help="fault at least this long")
    p.add_argument("--seed", type=int, default=1, help="the faults' RNG seed")
    p.add_argument("--per-kind", type=int, default=20, help="and until every kind happened this often")
    p.add_argument("--steps", type=int, default=1500, help="the job's --steps (a round)")
    p.add_argument("--work", help="working directory (default: a new one under /tmp)")
    p.add_argument("--deadline-minutes", type=float, help="stop whatever happens after this long "
                   "(default 4 x --minutes + 20)")
    p.add_argument("--no-async", action="store_true", help="leave out the async-save kind even where it exists")
    return p.parse_args()


class Interrupted(Exception):
    pass


def on_signal(sig, frame):
    raise Interrupted(f"signal {sig}")


def train_args(tokens, init, steps, save_dir, out, mode):
    args = ["train", "--init", init, "--data", tokens, "--micro-batch", "2", "--seq", "32", "--lr", "1e-3",
            "--zero-stage", "3", "--steps", str(steps), "--save-dir", save_dir, "--save-every", str(SAVE_EVERY),
            "--keep", str(KEEP), "--comm-timeout", str(COMM_TIMEOUT), "--log-every", "1", "--out", out]
    return args + (["--async-save"] if mode == "async" else [])


def verify_checkpoints(zerodp, save_dir, steps):
    """(number of checkpoints verified, problems, leftovers): every step-<n> through `zerodp ckpt
    inspect`, `latest` naming step-<steps>, and the dot-directories left (never read; listed)."""
    names = sorted(os.listdir(save_dir))
    problems = []
    checkpoints = [n for n in names if re.fullmatch(r"step-\d+", n)]
    for n in checkpoints:
        r = zt.launch([zerodp, "ckpt", "inspect", os.path.join(save_dir, n)], timeout=120)
        if r.code != 0:
            problems.append(f"{save_dir}/{n} does not verify (exit {r.code}): {r.text[-800:]}")
    try:
        with open(os.path.join(save_dir, "latest")) as f:
            latest = f.read()
    except OSError as e:
        latest = f"unreadable: {e}"
    if latest != f"step-{steps}\n" or f"step-{steps}" not in checkpoints:
        problems.append(f"{save_dir}/latest reads {latest!r}, not step-{steps} (checkpoints: {checkpoints})")
    return len(checkpoints), problems, [n for n in names if n.startswith(".")]


class Soak:
    def __init__(self, a, hosts, tokens, init, ref_bytes, ref_wall, kinds):
        self.a, self.hosts, self.tokens, self.init = a, hosts, tokens, init
        self.ref_bytes, self.ref_wall, self.kinds = ref_bytes, ref_wall, kinds
        self.zerodp = os.path.abspath(a.zerodp)
        self.rng = random.Random(a.seed)
        self.t0 = time.monotonic()
        self.fault_end = self.t0 + a.minutes * 60
        self.deadline = self.t0 + (a.deadline_minutes or 4 * a.minutes + 20) * 60
        self.records, self.rounds, self.problems = [], [], []
        self.rounds_s = 0.0
        self.counts = {k: 0 for k in kinds}
        # A host that does not answer while a cut lasts is waited for (not a restart); zerodp builds from
        # before --join-timeout (an async-save branch, say) count such tries as failed attempts.
        launch_help = zt.launch([self.zerodp, "launch", "--help"], timeout=60).text
        self.join_flag = ["--join-timeout", "120"] if "--join-timeout" in launch_help else []

    def since(self, t):
        return t - self.t0

    def time_up(self):
        return time.monotonic() >= self.fault_end

    def due(self, kinds):
        """Whether to fault again, and from which of `kinds`: until the time is up and then while a kind
        is short of --per-kind, and never so late that the round could not finish before the deadline."""
        if time.monotonic() > self.deadline - 2 * self.ref_wall - 120:
            return []
        short = [k for k in kinds if self.counts[k] < self.a.per_kind]
        return short if self.time_up() else list(kinds)

    def complete(self):
        return self.time_up() and all(c >= self.a.per_kind for c in self.counts.values())

    def pick(self, kinds):
        # Weighted to the kinds furthest from --per-kind, so that they fill up together.
        weights = [max(1, self.a.per_kind - self.counts[k]) for k in kinds]
        return self.rng.choices(kinds, weights)[0]

    def inject(self, job, kind, mode):
        if kind == F.RANK_KILL:
            return F.rank_kill(job, self.rng, mode, RANKS)
        if kind in (F.SYNC_SAVE_KILL, F.ASYNC_SAVE_KILL):
            return F.save_kill(job, self.rng, mode, RANKS)
        return F.link_cut(job, self.rng, self.hosts)

    def run_round(self, number, mode):
        d = os.path.join(self.work, f"round{number}")
        os.makedirs(d)
        save_dir, out = os.path.join(d, "ckpt"), os.path.join(d, "out.safetensors")
        launch = ["--max-restarts", "1000", "--end-grace", str(END_GRACE)] + self.join_flag
        job = Job(self.hosts, self.zerodp, launch, None,
                  train_args(self.tokens, self.init, self.a.steps, save_dir, out, mode), save_dir,
                  os.path.join(d, "launch.log"))
        kinds = [k for k in self.kinds if k != (F.SYNC_SAVE_KILL if mode == "async" else F.ASYNC_SAVE_KILL)]
        started, noted, faults = time.monotonic(), None, 0
        print(f"[{self.since(started):7.1f} s] round {number} ({mode} saves): {job.log.path}", flush=True)
        try:
            while job.alive():
                if time.monotonic() > self.deadline:
                    self.problems.append(f"round {number}: still running at the deadline")
                    break
                if not job.log.running():
                    if not job.poll(RECOVERY_LIMIT_S, until=job.log.running) and job.alive():
                        self.problems.append(f"round {number}: attempt {job.log.attempt} logged no step in "
                                             f"{RECOVERY_LIMIT_S} s (a hang?): {job.log.path}")
                        break
                    continue
                if noted != job.log.attempt:
                    job.note_stale()
                    noted = job.log.attempt
                last = job.log.last_step
                if last and time.monotonic() - last[1] > STALL_S:
                    self.problems.append(f"round {number}: no step for {STALL_S} s after step {last[0]} "
                                         f"(a hang?): {job.log.path}")
                    break
                due = self.due(kinds)
                if not due:
                    job.poll(1.0)
                    continue
                attempt = job.log.attempt
                job.poll(self.rng.uniform(0.5, 2.5), until=lambda: job.log.attempt != attempt)
                if not job.alive() or job.log.attempt != attempt or not job.log.running():
                    continue  # the job ended or failed by itself meanwhile
                rec = self.inject(job, self.pick(due), mode)
                if rec is None:
                    continue
                ok = F.recover(job, rec, SETTLE_S, RECOVERY_LIMIT_S)
                rec.update(round=number, mode=mode, at_s=round(self.since(rec.pop("t")), 2))
                rec.pop("back", None)
                self.records.append(rec)
                self.counts[rec["kind"]] = self.counts.get(rec["kind"], 0) + 1
                faults += 1
                self.say(rec)
                if not ok:
                    self.problems.append(f"round {number}: nothing trained within {RECOVERY_LIMIT_S} s of the "
                                         f"{rec['kind']} at {rec['at_s']} s (a hang?): {job.log.path}")
                    break
        finally:
            job.stop()
        return self.check_round(number, mode, job, out, save_dir, faults, started)

    def say(self, rec):
        what = f"rank {rec['victim']}" if rec["victim"] is not None else f"{rec['down_s']} s down"
        where = f" ({rec['phase']}, {rec['partial']})" if "phase" in rec else ""
        if rec.get("meant", rec["kind"]) != rec["kind"]:
            where += f" (meant as a {rec['meant']})"
        after = ("a restart" if rec.get("restarted") else "rode through") + \
            (f", training again {rec['recovery_s']} s later" if rec.get("recovery_s") is not None else "")
        print(f"[{rec['at_s']:7.1f} s] {rec['kind']}: {what} at step {rec['step']} of attempt {rec['attempt']}"
              f"{where}: {after}", flush=True)

    def check_round(self, number, mode, job, out, save_dir, faults, started):
        rc = job.proc.returncode
        bits = os.path.exists(out) and zt.read_bytes(out) == self.ref_bytes
        verified, problems, leftovers = verify_checkpoints(self.zerodp, save_dir, self.a.steps) \
            if os.path.isdir(save_dir) else (0, [f"{save_dir} is missing"], [])
        if rc != 0:
            problems.insert(0, f"the launch exited {rc}: {job.log.tail(1500)}")
        if not bits:
            problems.append(f"{out} is not the reference's bytes")
        info = dict(round=number, mode=mode, exit=rc, faults=faults, restarts=max(0, job.log.attempt - 1),
                    tries_not_started=job.log.tries, wall_s=round(time.monotonic() - started, 1),
                    bits_equal=bits, checkpoints_verified=verified, leftovers=leftovers, problems=problems)
        self.rounds.append(info)
        self.problems += [f"round {number}: {p}" for p in problems]
        if not problems:
            shutil.rmtree(save_dir)  # verified; a soak would otherwise leave ~13 MB a round behind
        print(f"[{self.since(time.monotonic()):7.1f} s] round {number} ended: exit {rc}, {faults} faults, "
              f"{info['restarts']} restarts, bits equal: {'yes' if bits else 'NO'}, {verified} checkpoints "
              f"verified{', left: ' + ' '.join(leftovers) if leftovers else ''}"
              f"{'; PROBLEMS: ' + '; '.join(problems) if problems else ''}", flush=True)
        return not problems

    def run(self, work):
        self.work = work
        number = 0
        while not self.complete() and time.monotonic() < self.deadline - 2 * self.ref_wall - 120:
            number += 1
            mode = "sync"
            if F.ASYNC_SAVE_KILL in self.kinds and self.counts[F.ASYNC_SAVE_KILL] < self.counts[F.SYNC_SAVE_KILL]:
                mode = "async"
            ok = self.run_round(number, mode)
            self.rounds_s = time.monotonic() - self.t0
            if not ok:
                break  # a real problem: stop and keep everything as it is for a reproduction


def table(soak, wall_s, async_note):
    """The soak's figures as markdown."""
    def stat(xs):
        xs = [x for x in xs if x is not None]
        return f"{statistics.median(xs):.1f} / {max(xs):.1f}" if xs else "-"

    lines = ["| fault | injected | restarts caused | rode through | fault → training again, s (median / max) |",
             "|---|---:|---:|---:|---|"]
    for k in F.KINDS:
        recs = [r for r in soak.records if r["kind"] == k]
        if k not in soak.kinds:
            lines.append(f"| {k} | not run: {async_note} | | | |")
            continue
        extra = ""
        if k == F.LINK_CUT and recs:
            extra = (f"; from the link's return {stat(r.get('after_back_s') for r in recs)}; down "
                     f"{min(r['down_s'] for r in recs):.1f}-{max(r['down_s'] for r in recs):.1f} s")
        lines.append(f"| {k} | {len(recs)} | {sum(r.get('restarts', 0) for r in recs)} | "
                     f"{sum(1 for r in recs if r.get('restarted') is False)} | "
                     f"{stat(r.get('recovery_s') for r in recs)}{extra} |")
    restarts = sum(r["restarts"] for r in soak.rounds)
    caused = sum(r.get("restarts", 0) for r in soak.records)
    phases = {}
    for r in soak.records:
        if "phase" in r:
            phases[(r["kind"], r["phase"])] = phases.get((r["kind"], r["phase"]), 0) + 1
    missed = sum(1 for r in soak.records if r["kind"] == F.RANK_KILL and r.get("meant", F.RANK_KILL) != F.RANK_KILL)
    landed = sum(1 for r in soak.records if r.get("meant") == F.RANK_KILL and r["kind"] != F.RANK_KILL)
    by_round = ", ".join(f"{r['mode']} {r['faults']} faults" for r in soak.rounds)
    summary = [
        f"- rounds: {len(soak.rounds)} ({by_round}); "
        f"faults: {len(soak.records)}; restarts: {restarts} ({restarts - caused} not caused by an injected "
        f"fault); tries that could not start (a host not answering, no restart spent): "
        f"{sum(r['tries_not_started'] for r in soak.rounds)}",
        f"- wall time: {wall_s / 60:.1f} min in all, of which the rounds {soak.rounds_s / 60:.1f} min (the "
        f"reference run {soak.ref_wall:.1f} s)",
        f"- kills aimed at a save that landed outside one (counted as rank kills): {missed}; rank kills that "
        f"landed in a save (counted as kills in it): {landed}",
        f"- bits equal to the reference in every round: "
        f"{'yes' if soak.rounds and all(r['bits_equal'] for r in soak.rounds) else 'NO'}; checkpoints "
        f"verified: {sum(r['checkpoints_verified'] for r in soak.rounds)}, all: "
        f"{'yes' if not any(p for r in soak.rounds for p in r['problems']) else 'NO'}",
        "- kills inside saves by phase: " + (", ".join(f"{k}, {p}: {n}" for (k, p), n in sorted(phases.items()))
                                             or "none")]
    return "\n".join(lines + [""] + summary)


def main():
    a = parse_args()
    why_not = TestHosts.unavailable()
    if why_not:
        print(f"run.py: no test hosts here: {why_not}")
        return 77
    zerodp = os.path.abspath(a.zerodp)
    work = os.path.abspath(a.work) if a.work else zt.workdir("soak")
    os.makedirs(work, exist_ok=True)
    help_text = zt.launch([zerodp, "train", "--help"], timeout=60).text
    has_async = "--async-save" in help_text
    async_note = ("left out (--no-async)" if a.no_async else
                  "this zerodp has no --async-save (`zerodp train --help` does not list it)")
    kinds = [F.RANK_KILL, F.SYNC_SAVE_KILL, F.LINK_CUT] + ([F.ASYNC_SAVE_KILL] if has_async and not a.no_async else [])
    if F.ASYNC_SAVE_KILL not in kinds:
        print(f"run.py: NOTE: the kind '{F.ASYNC_SAVE_KILL}' is not run: {async_note}", flush=True)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = time.monotonic()
    soak = None
    try:
        tokens, init = zt.make_inputs(zerodp, work, seed=23, text_bytes=200000, **MODEL)
        with TestHosts(work) as hosts:
            ref_out = os.path.join(work, "reference.safetensors")
            cmd = hosts.mpirun([zerodp] + train_args(tokens, init, a.steps, os.path.join(work, "reference-ckpt"),
                                                     ref_out, "sync"))
            r = zt.launch(cmd, timeout=1800)
            if r.code != 0:
                print(f"run.py: the reference run failed (exit {r.code}): {r.text[-3000:]}")
                return 1
            print(f"reference: {a.steps} steps straight through on 2 hosts x 2 ranks in {r.secs:.1f} s", flush=True)
            soak = Soak(a, hosts, tokens, init, zt.read_bytes(ref_out), r.secs, kinds)
            soak.run(work)
    except Interrupted as e:
        print(f"run.py: stopped by {e}; the test hosts are removed", flush=True)
        if soak is not None:
            soak.problems.append(f"interrupted by {e}")
    wall = time.monotonic() - started
    if soak is None:
        return 1
    text = table(soak, wall, async_note)
    version = zt.launch([zerodp, "--version"], timeout=60).out.strip()
    print(f"\nfault soak: {version}, seed {a.seed}, --minutes {a.minutes}, --per-kind {a.per_kind}, --steps "
          f"{a.steps}, work directory {work}\n\n{text}")
    with open(os.path.join(work, "soak.json"), "w") as f:
        json.dump(dict(args=vars(a), kinds=kinds, rounds=soak.rounds, faults=soak.records, problems=soak.problems,
                       wall_s=round(wall, 1), reference_s=round(soak.ref_wall, 1)), f, indent=1)
    if soak.problems:
        print("\nPROBLEMS:\n" + "\n".join(f"- {p}" for p in soak.problems))
        return 1
    if not soak.complete():
        print(f"\nnot complete: faults per kind {soak.counts}, --per-kind {a.per_kind}, by the deadline")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
