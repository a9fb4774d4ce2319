"""tests/nbval_stderr.py: strict nbval fails a cell that writes to stderr, whether
through Python (``sys.stderr``, a warning) or natively on fd 2 (as torch's C++ code
does), even when the cell's outputs are not compared; a quiet notebook still passes."""
from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from bookpaths import ROOT
from nbval_stderr import kernel_environment, stderr_text

pytestmark = pytest.mark.book          # starts notebook kernels


def test_kernel_environment_drops_only_the_pytest_variable():
    env = kernel_environment({"PYTEST_CURRENT_TEST": "t.py::x (call)", "HOME": "/h"})
    assert env == {"HOME": "/h"}


def test_stderr_text_reads_only_stderr_streams():
    outputs = [{"output_type": "stream", "name": "stdout", "text": "out\n"},
               {"output_type": "stream", "name": "stderr", "text": "warn\n"},
               {"output_type": "display_data", "data": {"text/plain": "x"}}]
    assert stderr_text(outputs) == "warn\n"
    assert stderr_text(outputs[:1]) == ""


def scratch_notebook(path, source, tags=()):
    """A one-cell notebook whose stored outputs are what the cell prints to stdout."""
    cell = nbformat.v4.new_code_cell(source, execution_count=1)
    cell.metadata["tags"] = list(tags)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ok\n")]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)
    return path


def nbval(paths, *plugins):
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-n", "0", "--rootdir", str(paths[0].parent), "--nbval", "--nbval-current-env"]
    for plugin in plugins:
        args += ["-p", plugin]
    env = {**kernel_environment(), "PYTHONPATH": str(ROOT / "tests")}
    return subprocess.run(args + [str(p) for p in paths], capture_output=True, text=True,
                          timeout=300, cwd=paths[0].parent, env=env)


def test_a_cell_that_writes_to_stderr_fails(tmp_path):
    quiet = scratch_notebook(tmp_path / "quiet.ipynb", "print('ok')")
    python = scratch_notebook(tmp_path / "python_stderr.ipynb",
                              "import sys\nprint('ok')\nsys.stderr.write('careful\\n')",
                              tags=["nbval-ignore-output"])
    native = scratch_notebook(tmp_path / "native_stderr.ipynb",
                              "import os\nprint('ok')\nos.write(2, b'native warning\\n')",
                              tags=["nbval-ignore-output"])
    paths = [quiet, python, native]

    without = nbval(paths)                            # nbval alone: all three pass
    assert without.returncode == 0, without.stdout[-3000:]

    run = nbval(paths, "nbval_stderr")
    report = run.stdout
    assert run.returncode == 1, report[-3000:]
    assert "2 failed, 1 passed" in report, report[-3000:]
    assert "FAILED python_stderr.ipynb::Cell 0" in report
    assert "FAILED native_stderr.ipynb::Cell 0" in report
    assert "careful" in report and "native warning" in report
