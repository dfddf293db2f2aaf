#!/usr/bin/env python3
"""Checks the layering of docs/design.md: a file under src/<layer>/ may include only headers of its
own layer and of the layers it links (the root CMakeLists.txt's ZERODP_DEPS_<layer>, the one place
the layering is written down). Exits 1 listing every include that breaks the rule."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
deps = re.compile(r"^set\(ZERODP_DEPS_([a-z_]+)((?:\s+[a-z_]+)*)\s*\)", re.M)
ALLOWED = {layer: set(names.split()) for layer, names in deps.findall((root / "CMakeLists.txt").read_text())}
if not ALLOWED:
    sys.exit(f"layering: no set(ZERODP_DEPS_<layer> ...) lines in {root / 'CMakeLists.txt'}")
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
