#!/usr/bin/env python3
"""The portable build's code outside the kernels' AVX-512 copies has no AVX-512 instruction.

Usage: check_baseline_isa.py BINARY [COPY_MARKER]

Disassembles BINARY (objdump -d -w) and looks at every instruction's bytes: in 64-bit mode an
instruction whose opcode starts with 0x62 (after legacy prefixes) is EVEX-encoded, i.e. AVX-512 (zmm,
mask registers, or the AVX-512VL forms on xmm/ymm). Those may appear only in the kernels' x86-64-v4
copy, namespace zerodp::kernels::v4 (its symbols, and those of its lambdas and OpenMP regions, hold
COPY_MARKER, "6zerodp7kernels2v4", in their mangled names), which runs only where the CPU has AVX-512
and ZERODP_MAX_CPU_ISA allows it (src/kernels/dispatch.h). Anywhere else they would stop the binary
with SIGILL on an AVX2 node.

Also fails when there is no such copy with AVX-512 code at all: the dispatch is then gone (or the build
is native, where this check does not apply).
Exit 0: clean; 1: AVX-512 outside the copies, or no copies; 77 (skipped): objdump is missing.
"""
import re
import shutil
import subprocess
import sys

LEGACY_PREFIXES = {"66", "67", "f2", "f3", "f0", "2e", "36", "3e", "26", "64", "65"}
FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")
INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t([0-9a-f]{2}(?: [0-9a-f]{2})*)\s*\t(.*)$")


def is_evex(byte_text: str) -> bool:
    for b in byte_text.split():
        if b in LEGACY_PREFIXES:
            continue
        return b == "62"
    return False


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary = sys.argv[1]
    marker = sys.argv[2] if len(sys.argv) == 3 else "6zerodp7kernels2v4"
    if shutil.which("objdump") is None:
        print("check_baseline_isa: SKIPPED: objdump (binutils) is not installed")
        return 77
    proc = subprocess.run(["objdump", "-d", "-w", binary],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"check_baseline_isa: objdump -d {binary} failed: {proc.stderr.strip()}")
        return 1
    function = "?"
    outside = {}    # function -> (count, first instruction)
    in_clones = 0
    clones = set()
    for line in proc.stdout.splitlines():
        m = FUNCTION.match(line)
        if m:
            function = m.group(1)
            continue
        m = INSTRUCTION.match(line)
        if not m or not is_evex(m.group(1)):
            continue
        if marker in function:
            in_clones += 1
            clones.add(function)
        else:
            count, first = outside.get(function, (0, m.group(2).strip()))
            outside[function] = (count + 1, first)
    if outside:
        print(f"check_baseline_isa: {binary}: AVX-512 (EVEX) instructions outside the x86-64-v4 copies, "
              f"in {len(outside)} functions:")
        for name, (count, first) in sorted(outside.items(), key=lambda kv: -kv[1][0])[:20]:
            print(f"  {count:6d}  {name}   (first: {first})")
        return 1
    if in_clones == 0:
        print(f"check_baseline_isa: {binary}: no AVX-512 code in functions holding {marker}: the kernels' "
              "run-time dispatch is missing (or this is a native build)")
        return 1
    print(f"check_baseline_isa: {binary}: AVX-512 only in the {len(clones)} x86-64-v4 copies "
          f"({in_clones} instructions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
