#!/usr/bin/env python3
"""Checks the layering of docs/design.md: a file under src/<layer>/ may include only headers of its
own layer and of the layers below it. Exits 1 listing every include that breaks the rule."""
import pathlib
import re
import sys

ALLOWED = {
    "core": set(),
    "kernels": {"core"},
    "cuda": {"core", "optim"},
    "device": {"core", "kernels", "cuda", "optim"},
    "comm": {"core", "cuda"},
    "io": {"core"},
    "model": {"core", "device"},
    "optim": {"core"},
    "data": {"core"},
    "zero": {"core", "device", "comm", "io", "model", "optim"},
    "ckpt": {"core", "model"},
    "plan": {"core", "model"},
    "train": {"core", "device", "comm", "io", "model", "zero", "optim", "data", "ckpt", "plan"},
}

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
bad = []
checked = 0
for layer, allowed in ALLOWED.items():
    for f in sorted((root / "src" / layer).glob("*")):
        if f.suffix not in {".h", ".cpp", ".cu", ".cuh"}:
            continue
        checked += 1
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = include.match(line)
            if m and m.group(1) != layer and m.group(1) not in allowed:
                bad.append(f"{f.relative_to(root)}:{n}: {layer}/ may not include {m.group(1)}/")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"layering: {checked} files follow the rule")
