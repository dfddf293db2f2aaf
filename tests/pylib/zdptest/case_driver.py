"""The driver of a script of named cases (tests/reference/compare_llama.py, compare_gpt2_hf.py): its
flags, the cases --case selects, and the loop that runs each in a working directory of its own and
reports every failed check."""
import argparse
import shutil
import sys
import tempfile
import time

from zdptest import harness as zt
from zdptest.harness import Checks


def argument_parser(doc):
    """The flags of a driver of transformers cases (this one, compare_gpt2_hf.py)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--zerodp", help="the zerodp executable")
    ap.add_argument("--zerodp-testing", help="the zerodp-testing executable (logits cases)")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--case", action="append", default=[], help="case name (repeatable); 'all' for every one")
    ap.add_argument("--list", action="store_true", help="print the case names and exit")
    ap.add_argument("--ranks", action="store_true",
                    help="with --list: NAME:RANKS, as tests/reference/CMakeLists.txt lists them")
    ap.add_argument("--keep", action="store_true", help="keep the working directories")
    return ap


def selected_cases(args, names, ranks_of_case, script):
    """The cases --case names (None after --list printed `names`, with their ranks when --ranks); exits 1
    saying FAIL for an unknown one or none."""
    if args.list:
        print("\n".join(f"{n}:{ranks_of_case(n)}" if args.ranks else n for n in names))
        return None
    cases = names if args.case == ["all"] else args.case
    unknown = [n for n in cases if n not in names]
    if unknown or not cases:
        print(f"{script}: FAIL: unknown or no cases {unknown}; --list shows them")
        sys.exit(1)
    return cases


def run_cases(cases, run_case, prefix, keep):
    """Runs run_case(name, work) for each name, in a working directory of its own (removed unless `keep`),
    a case's crash or zt.Failed counted as its failure; prints each verdict and at the end every failed
    check. Returns the exit code: 0 when every case passed, else 1."""
    import torch
    torch.set_num_threads(1)
    failed = []
    for name in cases:
        print(f"=== {name}", flush=True)
        work = tempfile.mkdtemp(prefix=f"{prefix}_{name}_")
        start = time.monotonic()
        try:
            c = run_case(name, work)
        except zt.Failed:  # a step the rest depends on failed (making the model, the reference run), saying why above
            c = Checks()
            c.check(False, "a step the case depends on failed (see FAIL above)")
        except Exception as e:  # a crash of the checker is a failure too, reported as such
            import traceback
            traceback.print_exc()
            c = Checks()
            c.check(False, f"{type(e).__name__}: {e}")
        finally:
            if keep:
                print(f"  kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
        verdict = "PASS" if not c.failures else f"FAIL ({len(c.failures)} checks)"
        print(f"=== {name}: {verdict} in {time.monotonic() - start:.1f} s", flush=True)
        if c.failures:
            failed.append((name, c.failures))
    for name, failures in failed:
        print(f"\n{name} failed:")
        for f in failures:
            print(f"  - {f.splitlines()[0]}")
    return 1 if failed else 0
