#!/usr/bin/env bash
# Fetches oneMKL's runtime libraries from PyPI (the `mkl` wheel, pinned) into a cache directory
# outside the source tree, for zerodp's 16-bit GEMMs (src/kernels/gemm16.cpp loads them at run time
# with dlopen; docs/design.md says why oneMKL). Only the libraries are taken from the wheel: no
# Python package is installed and none is needed at run time. Idempotent; prints the directory.
#   ZERODP_MKL_DIR   where to put them (default ~/.cache/zerodp/mkl-$MKL_VERSION)
#   MKL_VERSION      the wheel's version (default 2026.2.0, the one docs/gemm_library.md measured)
set -euo pipefail
MKL_VERSION=${MKL_VERSION:-2026.2.0}
dir=${ZERODP_MKL_DIR:-$HOME/.cache/zerodp/mkl-$MKL_VERSION}
if [[ -f "$dir/lib/.complete" ]]; then
  echo "$dir"
  exit 0
fi
py=$(command -v python3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "install_mkl: downloading mkl==$MKL_VERSION from PyPI" >&2
"$py" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "mkl==$MKL_VERSION" >&2
whl=$(ls "$tmp"/mkl-*.whl | head -1)
mkdir -p "$dir/lib.part"
# The runtime (libmkl_rt), the LP64 interface, the GNU OpenMP and sequential threading layers, the
# core and its per-ISA kernel libraries; ScaLAPACK, BLACS and SYCL parts are left out.
"$py" - "$whl" "$dir/lib.part" <<'PY'
import os, re, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
keep = re.compile(r"/lib/(libmkl_(rt|core|intel_lp64|gnu_thread|sequential|def|mc3|avx2|avx512|avx10)\.so\.\d+)$")
n = 0
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        m = keep.search(info.filename)
        if not m:
            continue
        dst = os.path.join(out, m.group(1))
        with z.open(info) as src, open(dst + ".tmp", "wb") as f:
            while chunk := src.read(1 << 20):
                f.write(chunk)
        os.chmod(dst + ".tmp", 0o755)
        os.replace(dst + ".tmp", dst)
        n += 1
if not any(f.startswith("libmkl_rt.so.") for f in os.listdir(out)):
    sys.exit(f"install_mkl: no libmkl_rt in {whl}")
print(f"install_mkl: {n} libraries", file=sys.stderr)
PY
rm -rf "$dir/lib"
mv "$dir/lib.part" "$dir/lib"
echo "$MKL_VERSION" > "$dir/lib/.complete"
echo "$dir"
