#!/usr/bin/env python3
"""Checks the layering of docs/design.md: a file under src/<layer>/ may include only headers of its
own layer and of the layers it links (the root CMakeLists.txt's ZERODP_DEPS_<layer>, the one place
the build reads), and design.md's table of layers says exactly what those lines say. Exits 1 listing
every include that breaks the rule and every row of the table that differs."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
deps = re.compile(r"^set\(ZERODP_DEPS_([a-z_]+)((?:\s+[a-z_]+)*)\s*\)", re.M)
ALLOWED = {layer: set(names.split()) for layer, names in deps.findall((root / "CMakeLists.txt").read_text())}
if not ALLOWED:
    sys.exit(f"layering: no set(ZERODP_DEPS_<layer> ...) lines in {root / 'CMakeLists.txt'}")
# design.md's table: "| layer | may include | why |", one row a layer ("apps" may include everything).
design = (root / "docs" / "design.md").read_text()
table = re.search(r"^\| layer \| may include \|.*\n\|[-|]+\|\n((?:\|.*\|\n)+)", design, re.M)
bad = []
if not table:
    bad.append("docs/design.md: no table with the header '| layer | may include | ...'")
else:
    rows = {}
    for row in table.group(1).splitlines():
        cells = [c.strip() for c in row.strip("|").split("|")]
        rows[cells[0]] = cells[1]
    for layer, allowed in ALLOWED.items():
        if layer not in rows:
            bad.append(f"docs/design.md: no row for the layer {layer}")
            continue
        said = {n.strip() for n in rows[layer].split(",") if n.strip()}
        if said != allowed:
            bad.append(f"docs/design.md: {layer} may include {sorted(said)} there, {sorted(allowed)} in CMakeLists.txt")
    for layer in rows:
        if layer not in ALLOWED and layer != "apps":
            bad.append(f"docs/design.md: a row for {layer}, which CMakeLists.txt does not have")
include = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
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
