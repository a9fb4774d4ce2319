"""Every ``>>>`` example in minigrad's docstrings runs and shows what it says.

Each module's examples run with the module's own names plus ``np`` and ``minigrad`` (as a
reader who has done ``import numpy as np; import minigrad`` would), with NumPy's printing
fixed to its 1.21 legacy style so that scalars print the same on every NumPy version.
"""
import doctest
import importlib
import pathlib

import numpy as np
import pytest

import minigrad

ROOT = pathlib.Path(minigrad.__file__).resolve().parent
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# Modules whose examples were being rewritten on other branches while this test was added
# (issue 18: the DP's taped branch in plan/optimal.py, rotor's DP in plan/rotor.py). Their
# failures are reported as xfail, not hidden; remove a name once its examples run.
PENDING = {"minigrad.plan.optimal"}


def module_names():
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts)


def examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, name, globs={"np": np, "minigrad": minigrad, **vars(module)})
            if t.examples]


@pytest.mark.parametrize("name", list(module_names()))
def test_docstring_examples_run(name):
    if name == "minigrad.viz":
        matplotlib = pytest.importorskip("matplotlib")
        matplotlib.use("Agg")
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    old = np.get_printoptions()
    np.set_printoptions(legacy="1.21")
    try:
        for test in examples(name):
            runner.run(test)
    finally:
        np.set_printoptions(**old)
        if name == "minigrad.viz":
            import matplotlib.pyplot as plt
            plt.close("all")
    result = runner.summarize(verbose=False)
    if result.failed and name in PENDING:
        pytest.xfail(f"{result.failed} of {result.attempted} examples in {name} fail (pending, see PENDING)")
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see above)"


def test_the_examples_are_counted():
    """The count the book reports: every example of every module."""
    n = sum(len(t.examples) for name in module_names() for t in examples(name))
    assert n >= 100, n
