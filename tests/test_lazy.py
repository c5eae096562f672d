"""SciPy is imported when blocklab first computes with it, not when a command starts (lazy.py)."""

from __future__ import annotations

import subprocess
import sys

from blocklab.lazy import LazyModule


def test_starting_the_cli_imports_no_scipy():
    code = "import sys, blocklab.cli; print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"imported at start: {out}"


def test_the_first_use_imports_it_and_gives_the_module_itself():
    code = ("import sys; import blocklab.analysis.stats, blocklab.analysis.family; from blocklab.lazy import scipy_stats; "
            "before = 'scipy.stats' in sys.modules; q = scipy_stats.t.ppf(0.975, 3); "
            "import scipy.stats; print(before, round(q, 4), scipy_stats.t is scipy.stats.t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "3.1824", "True"]


def test_a_name_the_module_lacks_is_its_attribute_error():
    lazy = LazyModule("json")
    assert lazy.dumps([1]) == "[1]"
    try:
        lazy.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("no AttributeError")


def test_it_copies_and_pickles_as_its_name():
    import copy
    import pickle

    lazy = LazyModule("json")
    for twin in (copy.copy(lazy), pickle.loads(pickle.dumps(lazy))):
        assert isinstance(twin, LazyModule) and twin.dumps({}) == "{}"


def test_a_run_imports_it_before_its_first_cell():
    """An interrupt inside SciPy's first import leaves it half-imported (a fleet run stopped by SIGTERM
    then failed to write the summary of what it had kept): runs, tunes and fleets import it first."""
    code = ("import sys, inspect; from blocklab import runner; from blocklab.lazy import import_now; "
            "import_now(); print('scipy.stats' in sys.modules, 'import_now()' in inspect.getsource(runner.run))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True"]
