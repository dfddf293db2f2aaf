#!/usr/bin/env python3
"""Every docs file with an anchor (`docs/<file>.md#<anchor>`, or just the file) that a source file, test or document names exists:
the file, and the anchor as an `<a id="...">` or a heading of that file. Exits 1 listing the broken ones."""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
ref = re.compile(r"docs/([A-Za-z0-9_./-]+\.md)(?:#([A-Za-z0-9_-]+))?")
files = subprocess.run(["git", "-C", str(root), "ls-files", "src", "apps", "tests", "bench", "scripts",
                        "docs", "README.md"], capture_output=True, text=True, check=True).stdout.split()


def anchors(doc):
    text = doc.read_text()
    ids = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+\s+(.*)$", text, re.M):  # GitHub's heading slugs
        ids.add(re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-"))
    return ids


bad, seen, cache = [], 0, {}
for name in files:
    path = root / name
    if path.suffix not in {".h", ".cpp", ".cu", ".cuh", ".py", ".sh", ".md", ".txt", ".cmake"}:
        continue
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        for doc_name, anchor in ref.findall(line):
            seen += 1
            doc = root / "docs" / doc_name
            if not doc.is_file():
                bad.append(f"{name}:{n}: docs/{doc_name} does not exist")
            elif anchor and anchor not in cache.setdefault(doc, anchors(doc)):
                bad.append(f"{name}:{n}: docs/{doc_name} has no anchor #{anchor}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"doc references: {seen} references to docs/ resolve")
