"""Every ``>>>`` example in minigrad's docstrings runs and shows what it says.

Each module's examples run with the module's own names only, as under plain
``pytest --doctest-modules minigrad`` (an example imports what it uses, as in PyTorch's
docs), with NumPy's printing fixed to its 1.21 legacy style so that scalars print the same
on every NumPy version; `test_plain_doctest_modules_pass` runs the standard way too.
"""
import doctest
import importlib
import pathlib

import numpy as np
import pytest

import minigrad

ROOT = pathlib.Path(minigrad.__file__).resolve().parent
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_names():
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts)


def examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, name, globs=dict(vars(module)))
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
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see above)"


def test_the_examples_are_counted():
    """The count the book reports: every example of every module."""
    n = sum(len(t.examples) for name in module_names() for t in examples(name))
    assert n >= 100, n


def test_plain_doctest_modules_pass():
    """The standard way: ``pytest --doctest-modules minigrad bookkit``, no project runner
    (the book's helpers, whose examples are shown in the chapters, too)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", "-n", "0", "--doctest-modules", str(ROOT),
                          str(ROOT.parent / "bookkit")],
                         capture_output=True, text=True, cwd=ROOT.parent)
    assert out.returncode == 0, out.stdout[-3000:]
