#!/usr/bin/env python3
"""Command line of the Hugging Face `transformers` reference of the Llama-family models
(tests/pylib/zdptest/llama_ref.py, whose docstring lists the subcommands and their flags).

    PYTHONPATH=tests/pylib python3 tests/reference/llama_ref.py config|make|logits|train|check-load ...

Any python3 with Debian's torch will do: a subcommand that needs transformers re-runs this script with
the python of scripts/setup/transformers_venv.sh (made on first use); `config` needs no transformers."""
import sys

from zdptest import transformers_env  # tests/pylib: on PYTHONPATH (ctest sets it), or pip install -e tests/pylib

if __name__ == "__main__":
    if sys.argv[1:2] != ["config"]:
        transformers_env.ensure_transformers()  # before importing torch: this process may be replaced
    from zdptest import llama_ref
    sys.exit(llama_ref.main())
