"""What the benchmark reports (bench/train, bench/peers and bench/gpu report.py) share: reading a
results directory (env.txt, metrics, a peer's JSON line, commands.txt), medians of step times,
markdown tables and ratios, a docs section replaced in place, and matplotlib drawing into files.
Standard library only, but for pyplot() (Debian's python3-matplotlib).
"""
import json
import math
import os
import re
import statistics

from zdptest.harness import records


def read_env(results, missing_ok=False):
    """{key: value} of results/env.txt (one key=value a line; a line without '=' is left out); {} for
    a missing file when `missing_ok`."""
    path = os.path.join(results, "env.txt")
    if missing_ok and not os.path.exists(path):
        return {}
    env = {}
    with open(path) as f:
        for line in f:
            key, sep, value = line.rstrip("\n").partition("=")
            if sep:
                env[key] = value
    return env


def step_records(path):
    """The step records of a zerodp metrics file (JSON Lines, docs/reference/metrics.md), in order."""
    return records(path, "step")


def last_json_line(path, objects_only=False):
    """The last line of a file parsed as JSON (what a peer prints last on its stdout), or None for a
    missing or empty file. `objects_only`: the last line that starts with '{', other output such as a
    library's warnings skipped."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read()
    lines = [l for l in text.splitlines() if l.startswith("{")] if objects_only else text.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def median(values):
    """The median, NaN for no values."""
    return statistics.median(values) if values else math.nan


def ratio(x):
    """A speed ratio as the tables print it: 1.23x."""
    return f"{x:.2f}x"


def table(header, rows, align=None):
    """A markdown table, one line a row: `header` the column names, `rows` lists of cells (text; an
    empty cell is written as one space), `align` one of '---' / '---:' a column (all '---' by default)."""
    def line(cells):
        return "|" + "|".join(f" {c} " if c != "" else " " for c in cells) + "|"
    lines = [line(header), "|" + "|".join(align or ["---"] * len(header)) + "|"]
    lines += [line(r) for r in rows]
    return "\n".join(lines)


def unique_commands(results, key=lambda name: name, keep=lambda name: True):
    """[command] of results/commands.txt (tab-separated run name and command, one a line), the first
    of each key(name) among the names `keep` accepts; None when there is no commands.txt."""
    path = os.path.join(results, "commands.txt")
    if not os.path.exists(path):
        return None
    seen, out = set(), []
    with open(path) as f:
        for line in f:
            name, _, cmd = line.rstrip("\n").partition("\t")
            k = key(name)
            if keep(name) and k not in seen:
                seen.add(k)
                out.append(cmd)
    return out


def replace_section(text, heading, body):
    """Replaces the section that starts at `heading` (up to the next '## ' heading) or appends it."""
    pattern = re.compile(r"^" + re.escape(heading) + r"[^\n]*\n.*?(?=^## |\Z)", re.S | re.M)
    new = body.rstrip() + "\n\n"
    if pattern.search(text):
        return pattern.sub(lambda _: new, text, count=1)
    if text and not text.endswith("\n\n"):
        text = text.rstrip("\n") + "\n\n"
    return text + new


def write_atomically(path, text):
    """`text` into `path` through a temporary file renamed over it: a reader never sees half of it."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def pyplot():
    """matplotlib.pyplot drawing into files (the Agg backend: no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig, path, dpi):
    """Writes `fig` to `path`, closes it and says so on stdout."""
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    print(f"wrote {path}")
