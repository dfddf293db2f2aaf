#!/usr/bin/env python3
"""Command line of the Hugging Face `transformers` reference of the Llama-family models
(tests/pylib/zdptest/llama_ref.py, whose docstring lists the subcommands and their flags).

    python3 tests/reference/llama_ref.py config|make|logits|train|check-load ...

Any python3 with Debian's torch will do: a subcommand that needs transformers re-runs this script with
the python of scripts/transformers_venv.sh (made on first use); `config` needs no transformers."""
import os
import sys

# The checkout's own zdptest, whatever PYTHONPATH says: this script and that package change together.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pylib"))

from zdptest import llama_ref  # noqa: E402

if __name__ == "__main__":
    if sys.argv[1:2] != ["config"]:
        llama_ref.ensure_transformers()
    sys.exit(llama_ref.main())
