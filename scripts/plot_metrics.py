#!/usr/bin/python3
"""Loss curves from `zerodp train --metrics` files (docs/reference/metrics.md and files.md, JSON Lines).

usage: plot_metrics.py METRICS.jsonl [METRICS.jsonl ...] [--out loss.png] [--title TEXT]
                       [--label NAME ...] [--smooth K] [--log-y]

Draws, for each file, the training loss of every step (light) with a centered moving average of
it (solid: the mean over the K steps either side, fewer at the ends; it does not lag behind the
curve as an exponential average does), and the validation loss of every eval (markers), against
the tokens trained so far, into one PNG. The legend names each file (its file name, or --label, one per file, in order).

What it reads of each file:
  {"event":"step","step":s,"loss":x,"tokens":n,...}  s 0-based; n = the tokens of that one step (W·G·B·T)
  {"event":"eval","step":k,"val_loss":x,"tokens":n}  after k steps done (0-based steps 0 .. k-1);
                                                     n = the tokens evaluated, not trained
Other events (memory, traffic, ...) are skipped. A step's point sits at the tokens trained through
it: the sum of the step events' "tokens" up to and including it; a file that starts at a step
s0 > 0 (a resumed run) counts s0 more steps of its first step's size before it. An eval after k
steps sits at the tokens trained through step k - 1 (0 for k = 0). A step whose loss is null (not
finite: a skipped step) is counted but not drawn.

Runs with Debian's python3-matplotlib (/usr/bin/python3); started by another python3 that has no
matplotlib (a virtual environment, pyenv), it runs itself again under /usr/bin/python3. Exit codes:
0 done; 1 no matplotlib at all; 2 bad usage or a bad metrics file (a message on stderr names the
file and the line)."""
import argparse
import json
import math
import os
import sys

EXIT_USAGE = 2
SYSTEM_PYTHON = "/usr/bin/python3"


class InputError(Exception):
    pass


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class Run:
    """One metrics file: its steps (step -> (tokens of the step, loss or None)) and evals (steps done -> val_loss)."""

    def __init__(self, path, label):
        self.path = path
        self.label = label
        self.steps = {}
        self.evals = {}

    def trained_tokens(self):
        """step -> tokens trained up to and including it, for every step event."""
        if not self.steps:
            return {}
        order = sorted(self.steps)
        first = order[0]
        total = first * self.steps[first][0]  # a resumed run: the steps before it, of the first's size
        out = {}
        for s in order:
            total += self.steps[s][0]
            out[s] = total
        return out

    def tokens_after(self, steps_done, cumulative):
        """Tokens trained by the first `steps_done` steps (an eval event's "step"), also where the
        file has no event for step steps_done - 1."""
        step = steps_done - 1
        if step < 0:
            return 0
        if step in cumulative:
            return cumulative[step]
        if not cumulative:
            return None
        order = sorted(cumulative)
        before = [s for s in order if s < step]
        if not before:
            first = order[0]
            return (step + 1) * self.steps[first][0]
        last = before[-1]
        return cumulative[last] + (step - last) * self.steps[last][0]


def read_run(path, label):
    run = Run(path, label)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file (expected JSON Lines from `zerodp train --metrics`)")
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{where}: not JSON ({e.msg}); expected one JSON object a line "
                             "(`zerodp train --metrics`)")
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        event = rec.get("event")
        if event == "step":
            step, loss, tokens = rec.get("step"), rec.get("loss"), rec.get("tokens")
            if not is_int(step) or step < 0:
                raise InputError(f"{where}: step event without a step number >= 0 (\"step\": {step!r})")
            if not is_int(tokens) or tokens <= 0:
                raise InputError(f"{where}: step {step}: \"tokens\" must be the step's token count > 0, "
                                 f"got {tokens!r}")
            if loss is not None and not is_number(loss):
                raise InputError(f"{where}: step {step}: \"loss\" must be a number, got {loss!r}")
            ok = loss is not None and math.isfinite(loss)
            run.steps[step] = (tokens, float(loss) if ok else None)
        elif event == "eval":
            step, val = rec.get("step"), rec.get("val_loss")
            if not is_int(step) or step < 0:
                raise InputError(f"{where}: eval event without a step number >= 0 (\"step\": {step!r})")
            if not is_number(val):
                raise InputError(f"{where}: eval at step {step}: \"val_loss\" must be a number, got {val!r}")
            run.evals[step] = float(val)
    if not run.steps and not run.evals:
        raise InputError(f"{path}: no \"step\" or \"eval\" events: not a `zerodp train --metrics` file?")
    if run.evals and not run.steps:
        raise InputError(f"{path}: eval events but no step events: the tokens trained at each eval are unknown")
    return run


def moving_average(values, k):
    """values[i] averaged over values[i-k .. i+k], the window cut at both ends."""
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    n = len(values)
    return [(prefix[min(n, i + k + 1)] - prefix[max(0, i - k)]) / (min(n, i + k + 1) - max(0, i - k))
            for i in range(n)]


def default_smoothing(runs):
    """A fiftieth of the longest run's drawn steps, at least 1."""
    longest = max((sum(1 for t, loss in r.steps.values() if loss is not None) for r in runs), default=0)
    return max(1, longest // 50)


def plot(runs, out, title, smooth, log_y):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, run in enumerate(runs):
        color = f"C{i % 10}"
        cumulative = run.trained_tokens()
        pts = [(cumulative[s], run.steps[s][1]) for s in sorted(run.steps) if run.steps[s][1] is not None]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, color=color, alpha=0.25, lw=0.8)
            ax.plot(xs, moving_average(ys, smooth), color=color, lw=1.8, label=f"{run.label}: train")
        if run.evals:
            ev = [(run.tokens_after(k, cumulative), run.evals[k]) for k in sorted(run.evals)]
            xs, ys = zip(*ev)
            ax.plot(xs, ys, ls="--", lw=1, color=color, marker="o", ms=6, mfc="white", mew=1.6,
                    label=f"{run.label}: val")
    ax.set_xlabel("tokens trained")
    ax.set_ylabel("loss (mean token cross-entropy)")
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    if log_y:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = out + ".partial.png"
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, out)


def ensure_matplotlib(argv):
    """Returns when matplotlib imports; otherwise runs this script under /usr/bin/python3 (once), or
    exits 1 saying what is missing."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    here = os.path.realpath(sys.executable or "")
    if (os.path.exists(SYSTEM_PYTHON) and here != os.path.realpath(SYSTEM_PYTHON)
            and not os.environ.get("ZERODP_PLOT_REEXEC")):
        os.environ["ZERODP_PLOT_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__), *argv])
    print(f"plot_metrics.py: matplotlib is missing ({sys.executable}): install Debian's python3-matplotlib "
          f"(scripts/setup/setup.sh does) and run it with {SYSTEM_PYTHON}", file=sys.stderr)
    sys.exit(1)


def main(argv):
    ap = argparse.ArgumentParser(
        description="Train and validation loss against tokens trained, from `zerodp train --metrics` files.")
    ap.add_argument("metrics", nargs="+", help="metrics JSON Lines files, one curve each")
    ap.add_argument("--out", default="loss.png", help="the PNG to write (default loss.png)")
    ap.add_argument("--title", default="Loss", help="the plot's title")
    ap.add_argument("--label", action="append", default=[],
                    help="the legend name of each file, in order (default: the file names)")
    ap.add_argument("--smooth", type=int, default=None, metavar="K",
                    help="the train loss's moving average spans K steps either side (0: none; default: a "
                         "fiftieth of the longest run's steps, at least 1)")
    ap.add_argument("--log-y", action="store_true", help="logarithmic loss axis")
    args = ap.parse_args(argv)
    if args.smooth is not None and args.smooth < 0:
        ap.error(f"--smooth must be >= 0, got {args.smooth}")
    if args.label and len(args.label) != len(args.metrics):
        ap.error(f"{len(args.label)} --label for {len(args.metrics)} metrics files: give one per file, or none")
    labels = args.label or [os.path.basename(p) for p in args.metrics]
    try:
        runs = [read_run(p, l) for p, l in zip(args.metrics, labels)]
    except InputError as e:
        print(f"plot_metrics.py: {e}", file=sys.stderr)
        return EXIT_USAGE
    smooth = default_smoothing(runs) if args.smooth is None else args.smooth
    ensure_matplotlib(argv)
    try:
        plot(runs, args.out, args.title, smooth, args.log_y)
    except OSError as e:
        print(f"plot_metrics.py: cannot write {args.out}: {e.strerror}", file=sys.stderr)
        return EXIT_USAGE
    steps = sum(len(r.steps) for r in runs)
    evals = sum(len(r.evals) for r in runs)
    print(f"wrote {args.out}: {len(runs)} run{'s' if len(runs) != 1 else ''}, {steps} steps, {evals} eval{'s' if evals != 1 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
