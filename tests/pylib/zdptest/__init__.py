"""The helpers the Python test drivers and benchmarks share. tests/pylib is on PYTHONPATH where they run:
ctest sets it for every Python driver, pytest.ini for pytest, the bench run.sh scripts for theirs; by hand,
`PYTHONPATH=tests/pylib`, or `pip install tests/pylib` (`-e` to follow the checkout; pyproject.toml, no
dependencies) into the Python that runs them, as bench/peers/run.sh does in its venv.

  harness    launching zerodp (alone or through mpirun), checks, readers of its outputs
  hosts      test hosts on one machine (network namespaces) for multi-host runs
  wire       the user-space wire hosts uses where the kernel has no netem (run as a script)
  ref_train  the independent PyTorch reference of docs/reference/ (numpy, torch)
  flops      FLOPs of a GPT-2 training step, matmul by matmul (the benchmarks' GFLOP/s and MFU)
  gpu_peak   dense bf16 peak of an NVIDIA GPU by name (bench/gpu's MFU)
  torch_gpt2 the PyTorch GPT-2, its weights, batches and AdamW groups, as zerodp's (numpy, torch;
             the PyTorch runners of bench/train, bench/peers and bench/gpu)
  bench_report  what the three benchmark reports share: results read, medians, tables, docs, plots
  train_tokenizers  Hugging Face BPE trainers of the two shapes zerodp reads (tokenizers; the
             tokenizer tests, bench/tokenize, scripts/make_tokenizer.py)
  ctest      pytest items for the cases ctest runs (the plugin conftest.py loads)
  case_driver  the flags and case loop of the drivers of named cases (tests/reference/compare_*.py)
  llama_ref, llama_ref_cli  the transformers reference of the Llama family and its command line
"""
