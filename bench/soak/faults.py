"""The faults of the soak (bench/soak/run.py), each injected into a running Job (job.py) from outside,
and the wait for the job to get going again. Every fault returns a record (a dict) saying what was
done and, once recover() has run, what the job did about it.

A kill is classified by what the save directory showed around it, not by what was intended: a kill
counts as inside a save when that save's `.partial-step-<n>` directory existed both before the kill
and right after it (rank 0 renames it to `step-<n>` only after every rank has written its file and
sent its size and checksum, and the save's last barrier comes after the rename, so a partial still
there after the SIGKILL means the victim had not left its save). A kill meant for a save that lands
after the save committed is counted as the rank kill it was, and a rank kill that lands in a save as
a kill in that save (the record's `meant` says which was aimed at).
"""
import os
import signal
import time

RANK_KILL, SYNC_SAVE_KILL, ASYNC_SAVE_KILL, LINK_CUT = ("rank kill", "kill in a sync save", "kill in an async save",
                                                        "link cut")
KINDS = (RANK_KILL, SYNC_SAVE_KILL, ASYNC_SAVE_KILL, LINK_CUT)


def _rank_file(rank):
    return f"rank-{rank:05d}.safetensors"


def _save_kind(mode):
    return ASYNC_SAVE_KILL if mode == "async" else SYNC_SAVE_KILL


def _kill(job, pid, victim):
    """SIGKILL to rank `victim` (`pid`). Returns None when it was gone already, else (the save in progress
    around the kill: the partial directory that existed just before and just after it, or None; whether
    the victim's rank file was missing from it just before: its write not finished; the time)."""
    before = job.live_partials()
    missing = {p: not os.path.exists(os.path.join(job.save_dir, p, _rank_file(victim))) for p in before}
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    t = time.monotonic()
    after = job.live_partials()
    in_save = [p for p in before if p in after]
    return (in_save[-1] if in_save else None), (missing[in_save[-1]] if in_save else False), t


def _record(job, kind, t, victim=None, **detail):
    step = job.log.last_step[0] if job.log.last_step else None
    return dict(kind=kind, t=t, attempt=job.log.attempt, tries=job.log.tries, step=step, victim=victim, **detail)


def _classified(job, mode, victim, done, **detail):
    """The record of a kill by where it landed. A sync save holds every rank inside it until its last
    barrier, so any kill while its partial directory stays is inside it. An async save's partial stays
    from the step boundary that began it to a later one that commits it, while training goes on: only a
    kill of a rank whose file is still being written is a kill during the background write; one after
    its writer finished is a kill while training (the save waiting for its commit)."""
    partial, writing, t = done
    if partial is None:
        return _record(job, RANK_KILL, t, victim, **detail)
    phase = "writing its file" if writing else "its file written, the save not committed"
    if mode == "sync":
        return _record(job, SYNC_SAVE_KILL, t, victim, partial=partial, phase=phase, **detail)
    if writing:
        return _record(job, ASYNC_SAVE_KILL, t, victim, partial=partial, phase=phase, **detail)
    return _record(job, RANK_KILL, t, victim, async_save_waiting=partial, **detail)


def rank_kill(job, rng, mode, ranks):
    """SIGKILL to a random rank while the job trains."""
    pids = job.rank_pids()
    if len(pids) < ranks:
        return None
    victim = rng.randrange(ranks)
    done = _kill(job, pids[victim], victim)
    return None if done is None else _classified(job, mode, victim, done, meant=RANK_KILL)


def save_kill(job, rng, mode, ranks, limit_s=30.0):
    """SIGKILL to a rank while a checkpoint is being saved: the soak watches the save directory for
    the next save's partial directory, kills a rank at once or (sync, half the time) 0-10 ms later, so
    that the kill lands in different parts of the save. Sync: any rank, recorded as writing its file (its final
    rank file not yet in the partial directory) or past it (waiting for the others or the commit).
    Async: only a rank whose background write is in flight (its file not yet there); a save whose
    files are all written when seen is let go and the next one waited for. None when no save came
    within `limit_s` or the attempt ended first."""
    attempt = job.log.attempt
    pids = job.rank_pids()
    if len(pids) < ranks:
        return None
    end = time.monotonic() + limit_s
    skipped = set()
    while time.monotonic() < end and job.alive() and job.log.attempt == attempt:
        job.log.update()
        live = [p for p in job.live_partials() if p not in skipped]
        if not live:
            time.sleep(0.001)
            continue
        partial = live[-1]
        if mode == "sync" and rng.random() < 0.5:  # at once or a little later: while writing, or past it
            time.sleep(rng.uniform(0.0, 0.010))
        try:
            present = set(os.listdir(os.path.join(job.save_dir, partial)))
        except OSError:
            continue  # committed meanwhile: the next save
        writing = [r for r in range(ranks) if _rank_file(r) not in present]
        if mode == "async" and not writing:
            skipped.add(partial)  # every writer done: not a kill during the background write
            continue
        victim = rng.choice(writing) if mode == "async" else rng.randrange(ranks)
        done = _kill(job, pids[victim], victim)
        if done is None:
            return None
        return _classified(job, mode, victim, done, meant=_save_kind(mode))
    return None


def link_cut(job, rng, hosts, down_range=(2.0, 8.0)):
    """Host 1's end of the link down for a random 2-8 s, then up again (the job watched meanwhile)."""
    down = rng.uniform(*down_range)
    hosts.sever()
    t = time.monotonic()
    rec = _record(job, LINK_CUT, t, down_s=round(down, 2))
    try:
        job.poll(down, until=lambda: time.monotonic() - t >= down)
        while time.monotonic() - t < down:  # the launch ended during the cut: keep the link down as chosen
            time.sleep(0.05)
    finally:
        hosts.restore()
    rec["back"] = time.monotonic()
    return rec


def recover(job, rec, settle_s, limit_s):
    """Waits until the job trains again after the fault `rec` and adds to it: `restarted` (a new attempt
    ran), `recovery_s` (fault to the next attempt's first logged step, or for a cut the job rode
    through, to its first step after the link came back), `after_back_s` (cuts: from the link's return).
    A cut is ridden through when the same attempt is still training `settle_s` after the link came
    back (the watchdog's --comm-timeout and the launch's --end-grace would have ended it by then).
    Returns False when nothing trained within `limit_s` of the fault (a hang) and the launch still runs."""
    t, attempt = rec["t"], rec["attempt"]
    back = rec.get("back")
    end = t + limit_s

    def new_attempt_trains():
        return job.log.attempt > attempt and job.log.running()

    if back is not None:
        # The attempt running at the cut: still training settle_s after the link is back?
        job.poll(max(0.0, back + settle_s - time.monotonic()), until=lambda: job.log.attempt > attempt)
        last = job.log.last_step
        if job.log.attempt == attempt and last is not None and last[1] > back:
            first = job.log.first_step_after(back)
            rec.update(restarted=False, recovery_s=round(first - t, 2), after_back_s=round(first - back, 2))
            return True
    job.poll(max(0.0, end - time.monotonic()), until=new_attempt_trains)
    if new_attempt_trains():
        first = job.log.first_steps[job.log.attempt]
        rec.update(restarted=True, recovery_s=round(first - t, 2), restarts=job.log.attempt - attempt,
                   tries_not_started=job.log.tries - rec["tries"])
        if back is not None:
            rec["after_back_s"] = round(first - back, 2)
        return True
    rec.update(restarted=job.log.attempt > attempt, recovery_s=None)
    return not job.alive()
