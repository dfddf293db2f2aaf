"""Getting a script into a python that imports `transformers`: the venv of scripts/setup/transformers_venv.sh.

Nothing here imports torch: a driver that ends up re-running itself in the venv should not pay for
importing it twice (about 1.3 s), nor for the venv script's probe (about 2.6 s, a full import of torch
and transformers) when the venv is already there. Forty reference tests start this way, one process each.
"""
import importlib.util
import os
import subprocess
import sys

# Set when a process re-ran itself in the venv, so that a venv that cannot import transformers is made
# again (once) or reported instead of looping: "venv" after going straight to an existing venv, "1" after
# the venv script made or checked it.
REEXEC_ENV = "ZERODP_LLAMA_REF_REEXEC"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VENV_SCRIPT = os.path.join(REPO, "scripts", "setup", "transformers_venv.sh")
# What the references import from the venv (jinja2: transformers' chat templates).
NEEDED = ("transformers", "safetensors", "jinja2")


def venv_python():
    """The python the venv script makes: its VENV default, or ZERODP_TRANSFORMERS_VENV (keep in step)."""
    venv = os.environ.get("ZERODP_TRANSFORMERS_VENV") or os.path.join(os.path.expanduser("~"), ".cache", "zerodp",
                                                                        "venv-transformers")
    return os.path.join(venv, "bin", "python")


def _missing():
    """The first module of NEEDED this python cannot import (an ImportError), or None."""
    for name in NEEDED:
        if importlib.util.find_spec(name) is None:
            return ImportError(f"No module named '{name}'")
    try:
        import safetensors.torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        return e
    return None


def _rerun_in(python, stage):
    os.environ[REEXEC_ENV] = stage
    os.execv(python, [python] + sys.argv)


def ensure_transformers():
    """Makes sure this process can import transformers: when it cannot, re-runs the current script
    (sys.argv) with the venv's python, straight away when the venv exists, else after
    scripts/setup/transformers_venv.sh made it (or repaired it, when the existing one could not import
    what is needed). Only for scripts' main: it replaces the process; exits with a message when even the
    venv the script vouched for cannot import transformers."""
    missing = _missing()
    if missing is None:
        return
    stage = os.environ.get(REEXEC_ENV)
    if stage == "1":
        sys.exit(f"{os.path.basename(sys.argv[0])}: {sys.executable} (the venv of {VENV_SCRIPT}) cannot import "
                 f"transformers: {missing}")
    python = venv_python()
    if not stage and os.access(python, os.X_OK):
        _rerun_in(python, "venv")
    made = subprocess.run(["bash", VENV_SCRIPT], stdout=subprocess.PIPE, text=True)
    lines = made.stdout.strip().splitlines()
    if made.returncode != 0 or not lines:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {sys.executable} cannot import transformers ({missing}) and "
                 f"{VENV_SCRIPT} could not make a venv that can (see its message above)")
    _rerun_in(lines[-1], "1")
