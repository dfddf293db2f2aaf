"""The helpers the Python test drivers and benchmarks share (tests/pylib is on PYTHONPATH: ctest sets
it for every Python test, pytest.ini for pytest; elsewhere `PYTHONPATH=tests/pylib`).

  harness    launching zerodp (alone or through mpirun), checks, readers of its outputs
  hosts      test hosts on one machine (network namespaces) for multi-host runs
  wire       the user-space wire hosts uses where the kernel has no netem (run as a script)
  ref_train  the independent PyTorch reference of the training contract (numpy, torch)
  flops      FLOPs of a GPT-2 training step, matmul by matmul (the benchmarks' GFLOP/s and MFU)
  bench_report  what the three benchmark reports share: results read, medians, tables, docs, plots
  ctest      pytest items for the cases ctest runs (the plugin conftest.py loads)
"""
