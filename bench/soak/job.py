"""One `zerodp launch` job of the fault soak (bench/soak/run.py) on the two test hosts, as the soak
sees it from outside: the launch's output read as it comes (which attempt runs, the last step it
logged, and when the soak read each line), the save directory's checkpoints in progress, and the
ranks' processes. Standard library and zdptest only.
"""
import os
import re
import subprocess
import time

from zdptest import harness as zt

ATTEMPT = re.compile(r"^zerodp launch: attempt (\d+) of \d+( \(try (\d+) to start\))?")
STEP = re.compile(r"\[rank 0\] \[info\] step\s+(\d+)/(\d+) \|")


class LaunchLog:
    """The launch's merged stdout and stderr (a file the launch writes), parsed line by line as it
    grows. Times are time.monotonic() when the soak read the line: a step line is read within a poll
    (a few ms) of the rank writing it, through mpirun's output forwarding."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.rest = ""           # a line not yet ended
        self.attempt = 0         # the attempt running or starting (1-based; 0: none yet)
        self.tries = 0           # tries that had to be repeated because a host did not answer
        self.attempt_seen = 0.0  # when the current attempt's line was read
        self.first_step = None   # (step, time) of the current attempt's first logged step
        self.last_step = None    # (step, time) of the last logged step, whatever the attempt
        self.first_steps = {}    # attempt -> time its first step was read
        self.step_times = []     # the time each step line was read, in order
        self.lines = []          # the launch's own lines ("zerodp launch: ..."), with the time read

    def update(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        if not data:
            return
        self.offset += len(data)
        now = time.monotonic()
        text = self.rest + data.decode("utf-8", errors="replace")
        *complete, self.rest = text.split("\n")
        for line in complete:
            self._line(line, now)

    def _line(self, line, now):
        if line.startswith("zerodp launch:"):
            self.lines.append((now, line))
            m = ATTEMPT.match(line)
            if m:
                n = int(m.group(1))
                if m.group(2):
                    self.tries += 1
                if n != self.attempt or m.group(2):
                    self.attempt, self.attempt_seen, self.first_step = n, now, None
            return
        m = STEP.search(line)
        if m:
            step = int(m.group(1))
            self.last_step = (step, now)
            self.step_times.append(now)
            if self.first_step is None:
                self.first_step = (step, now)
                self.first_steps.setdefault(self.attempt, now)

    def first_step_after(self, t):
        """When the first step line after time `t` was read (None: none yet)."""
        later = None
        for seen in reversed(self.step_times):
            if seen <= t:
                break
            later = seen
        return later

    def running(self):
        """Whether the current attempt has logged a step (its ranks are training)."""
        return self.first_step is not None

    def tail(self, chars=4000):
        with open(self.path, errors="replace") as f:
            return f.read()[-chars:]


class Job:
    """`zerodp launch ... -- train ...` started on host 0 of `hosts`, its output in `log_path`."""

    def __init__(self, hosts, zerodp, launch_flags, mpi_timeout, train_args, save_dir, log_path):
        self.hosts, self.zerodp, self.save_dir = hosts, zerodp, save_dir
        cmd = hosts.on_host(0, [zerodp, "launch"] + launch_flags + hosts.mpirun_args(mpi_timeout=mpi_timeout) +
                            ["--"] + train_args)
        self.log_file = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=zt.ENV, stdout=self.log_file, stderr=subprocess.STDOUT)
        self.log = LaunchLog(log_path)
        self.stale = {}  # partial directories found when the current attempt began: a killed save's leftovers

    def alive(self):
        return self.proc.poll() is None

    def partials(self):
        """{name: (inode, ctime)} of the save directory's `.partial-step-<n>` directories."""
        found = {}
        try:
            names = os.listdir(self.save_dir)
        except OSError:
            return found
        for n in names:
            if n.startswith(".partial-step-"):
                try:
                    st = os.stat(os.path.join(self.save_dir, n))
                    found[n] = (st.st_ino, st.st_ctime_ns)
                except OSError:
                    pass
        return found

    def note_stale(self):
        """Called once an attempt logs its first step: the partial directories there now are leftovers of
        saves that an earlier attempt did not finish (rank 0 replaces one when it saves that step again,
        as a new directory), never a save of this attempt."""
        self.stale = self.partials()

    def live_partials(self):
        """The partial directories of saves in progress now: new since the attempt began."""
        return sorted(n for n, key in self.partials().items() if self.stale.get(n) != key)

    def rank_pids(self):
        """{world rank: pid} of the current attempt's ranks (on both hosts: host 1's daemon is started by
        the launch agent, a child of mpirun, so every rank descends from the launch)."""
        return zt.rank_pids(self.zerodp, under=self.proc.pid)

    def poll(self, seconds, until=None, step=0.005):
        """Reads the log for up to `seconds` (or until `until()` is true, or the launch ends); returns
        whether `until` became true."""
        end = time.monotonic() + seconds
        while True:
            self.log.update()
            if until is not None and until():
                return True
            if not self.alive() or time.monotonic() >= end:
                self.log.update()
                return until is not None and until()
            time.sleep(step)

    def stop(self):
        """Ends the launch and its job, whatever the link's state (the hosts' processes hold the log)."""
        self.hosts.restore()
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.hosts.kill_host(0)
                self.hosts.kill_host(1)
                self.proc.wait(timeout=20)
        self.log_file.close()
