"""pytest items for the Python drivers ctest runs, one per ctest test: `pytest tests/cli/cli_tests.py`
lists test_budget, test_ds_config, ...; `pytest tests/cli/cli_tests.py::test_budget` (or `-k budget`)
runs that one case.

ctest stays the one list of cases: a file that a ctest test runs with arguments (a driver and its
case, compare.py --case NAME, test_bench_train.py PART) is collected here from `ctest --show-only=json-v1`
of the build (ZERODP_BUILD, by default build/ at the repository root), and its items run ctest's own
command in ctest's environment, working directory and timeout, so that a case passes under pytest
exactly when it does under ctest. Files ctest runs without arguments (unittest modules such as
test_ref_train.py) are left to pytest's own collection, a test method at a time, and need no build.
A shell script ctest runs with arguments (tests/tokenizer/run.sh, which runs reference_test.py in its
venv) is collected the same way when named on the command line: `pytest tests/tokenizer/run.sh -k gpt2`.

The item is named test_<case>, the case being the command's last argument where the ctest name ends
with it (cli_budget runs `cli_tests.py ZERODP budget`), the ctest name otherwise.
"""
import json
import os
import subprocess

import pytest

# The repository root (this file is tests/pylib/zdptest/ctest.py).
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def build_dir():
    return os.path.abspath(os.environ.get("ZERODP_BUILD") or os.path.join(SRC, "build"))


def _script_of(command):
    """The Python file a ctest command runs, or None (a shell command, a C++ binary)."""
    for arg in command[1:2]:
        if arg.endswith((".py", ".sh")) and os.path.isfile(arg):
            return os.path.realpath(arg)
    return None


def _ctest_listing(build):
    """[test] of `ctest --show-only=json-v1` in `build`; a UsageError when it cannot be read."""
    try:
        p = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise pytest.UsageError(f"ctest could not list the tests of {build}: {e}")
    if p.returncode != 0:
        raise pytest.UsageError(f"ctest could not list the tests of {build} (configure it first, or set "
                                f"ZERODP_BUILD to a configured build): {p.stderr.strip()}")
    return json.loads(p.stdout)["tests"]


def driver_tests(config):
    """{realpath of a driver: [ctest test, ...]} for the files ctest runs with arguments (cached)."""
    cached = getattr(config, "_zerodp_driver_tests", None)
    if cached is None:
        try:
            cached = {}
            for test in _ctest_listing(build_dir()):
                command = test.get("command") or []
                script = _script_of(command)
                if script and len(command) > 2:
                    cached.setdefault(script, []).append(test)
        except pytest.UsageError as e:
            cached = e
        config._zerodp_driver_tests = cached
    if isinstance(cached, pytest.UsageError):
        raise cached
    return cached


def case_name(test):
    last = test["command"][-1]
    return last if test["name"].endswith("_" + last) else test["name"]


def environment(test):
    """This process's environment with the test's ENVIRONMENT and ENVIRONMENT_MODIFICATION applied."""
    props = {p["name"]: p["value"] for p in test.get("properties", [])}
    env = dict(os.environ)
    for entry in props.get("ENVIRONMENT", []):
        name, _, value = entry.partition("=")
        env[name] = value
    for entry in props.get("ENVIRONMENT_MODIFICATION", []):
        name, _, rest = entry.partition("=")
        op, _, value = rest.partition(":")
        old = env.get(name, "")
        if op == "set":
            env[name] = value
        elif op == "unset":
            env.pop(name, None)
        elif op == "reset":
            if name in os.environ:
                env[name] = os.environ[name]
            else:
                env.pop(name, None)
        elif op in ("path_list_prepend", "path_list_append"):
            parts = [p for p in old.split(os.pathsep) if p]
            parts = [value] + parts if op == "path_list_prepend" else parts + [value]
            env[name] = os.pathsep.join(parts)
        elif op == "string_prepend":
            env[name] = value + old
        elif op == "string_append":
            env[name] = old + value
        else:
            raise pytest.UsageError(f"{test['name']}: ENVIRONMENT_MODIFICATION operation '{op}' is not handled here")
    return env


class CtestCase(pytest.Item):
    def __init__(self, *, test, **kwargs):
        super().__init__(**kwargs)
        self.test = test

    def runtest(self):
        props = {p["name"]: p["value"] for p in self.test.get("properties", [])}
        cwd = props.get("WORKING_DIRECTORY") or build_dir()
        try:
            p = subprocess.run(self.test["command"], env=environment(self.test), cwd=cwd, capture_output=True,
                               text=True, errors="replace", timeout=props.get("TIMEOUT"))
        except subprocess.TimeoutExpired as e:
            raise CaseFailed(self.test["name"], None, (e.stdout or b"").decode(errors="replace")
                             + (e.stderr or b"").decode(errors="replace"))
        if "SKIP_RETURN_CODE" in props and p.returncode == int(props["SKIP_RETURN_CODE"]):
            lines = (p.stdout + p.stderr).strip().splitlines()
            said = [l for l in lines if "SKIP" in l.upper()] or lines
            pytest.skip(said[-1].strip() if said else f"exit {p.returncode}")
        if p.returncode != 0:
            raise CaseFailed(self.test["name"], p.returncode, p.stdout + p.stderr)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseFailed):
            name, code, output = excinfo.value.args
            why = "timed out" if code is None else f"exit {code}"
            return f"{name}: {why}: {' '.join(self.test['command'])}\n{output[-6000:]}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"ctest {self.test['name']}"


class CaseFailed(Exception):
    """A case's command failed: (ctest name, exit code or None on a timeout, its output)."""


class DriverFile(pytest.File):
    def collect(self):
        for test in driver_tests(self.config).get(os.path.realpath(self.path), []):
            yield CtestCase.from_parent(self, name="test_" + case_name(test), test=test)


def pytest_pycollect_makemodule(module_path, parent):
    """A driver becomes its ctest cases instead of being imported (importing it would run it). A
    unittest module (test_*.py) is looked up only where the build's tests can be listed."""
    if module_path.name.startswith("test_"):
        try:
            drivers = driver_tests(parent.config)
        except pytest.UsageError:
            return None
    else:
        drivers = driver_tests(parent.config)
    if os.path.realpath(module_path) in drivers:
        return DriverFile.from_parent(parent, path=module_path)
    return None


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".sh" and parent.session.isinitpath(file_path):
        if os.path.realpath(file_path) in driver_tests(parent.config):
            return DriverFile.from_parent(parent, path=file_path)
    return None
