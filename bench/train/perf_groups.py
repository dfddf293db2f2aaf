#!/usr/bin/python3
"""Groups a `perf report --no-children --sort dso,symbol` listing into the parts of a training step, to say
where a step's CPU time goes (bench/train/profile.sh). Reads the report on stdin, prints a table of
groups and their share of the samples, then the largest symbols.
"""
import re
import sys

# (group, regular expression on the symbol), first match wins.
GROUPS = [
    ("BLAS sgemm compute", r"sgemm_kernel|sgemm_small_kernel|dgemm_kernel"),
    ("BLAS packing/copy/beta", r"sgemm_(i|o)[tn]copy|sgemm_beta|gemm_.*copy"),
    ("BLAS driver/threads", r"sgemm_(nn|nt|tn|tt)|blas_thread|exec_blas|gemm_thread|inner_thread|blas_memory"),
    ("AdamW", r"adamw"),
    ("grad norm (sum_squares)", r"sum_squares"),
    ("zero-fill / copy", r"memset|memmove|memcpy|__bzero"),
    ("attention softmax", r"attention|causal_softmax"),
    ("GELU", r"gelu"),
    ("LayerNorm", r"layernorm"),
    ("softmax + cross-entropy", r"crossentropy|cross_entropy"),
    ("matmul bias / residual / encoder", r"matmul_|residual|encoder"),
    ("MPI / comm", r"mca_|ompi_|opal_|MPI_|PMPI|mpi_|vader|zerodp::comm"),
    ("OpenMP runtime (threads waiting at barriers)", r"libgomp|GOMP|gomp_|omp_"),
    ("kernel: page faults / memory", r"page_fault|clear_page|do_anonymous|handle_mm|unmap|folio|memcg|alloc_pages|mmap|lru"),
    ("kernel: scheduling / syscalls", r"schedule|sched_|futex|syscall|spin_unlock|finish_task|irq|switch_to|yield"),
]


def main():
    rows = []
    for line in sys.stdin:
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[([.k])\]\s+(.*?)\s*(?:-\s+-\s*)?$", line)
        if m:  # percent, dso, kind, symbol: unresolved symbols are named by their library
            sym = m.group(4) if not m.group(4).startswith("0x") else f"{m.group(2)} {m.group(4)}"
            rows.append((float(m.group(1)), m.group(3), sym))
    totals = {}
    for pct, _, sym in rows:
        name = next((g for g, rx in GROUPS if re.search(rx, sym)), "other")
        totals[name] = totals.get(name, 0.0) + pct
    print("| part of the step | share of CPU samples |")
    print("|---|---|")
    for name, pct in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {pct:.1f}% |")
    print("\nlargest symbols:")
    for pct, kind, sym in sorted(rows, reverse=True)[:15]:
        print(f"  {pct:5.2f}%  {'kernel ' if kind == 'k' else ''}{sym[:100]}")


if __name__ == "__main__":
    main()
