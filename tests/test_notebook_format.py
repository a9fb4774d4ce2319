"""Every notebook's code cells are as ruff formats them (79 columns), and the formatter
itself leaves magic cells alone and reports what it would change."""
from __future__ import annotations

import subprocess
import sys

import nbformat

from bookpaths import ROOT, notebook_paths

SCRIPT = ROOT / "scripts" / "format_notebooks.py"


def test_every_notebook_is_formatted():
    done = subprocess.run([sys.executable, str(SCRIPT), "--check",
                           *map(str, notebook_paths())], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_names_the_cell_and_formatting_fixes_it(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('%pip install "x"\nimport  os'),
                nbformat.v4.new_code_cell("x=dict( a = 1 )")]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    check = subprocess.run([sys.executable, str(SCRIPT), "--check", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 1 and f"{path}: cell 1" in check.stdout
    assert "cell 0" not in check.stdout  # a magic cell is left as written
    subprocess.run([sys.executable, str(SCRIPT), str(path)], check=True,
                   capture_output=True)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].source == "x = dict(a=1)" and cells[0].source.endswith("import  os")


def test_a_call_that_fits_goes_back_on_one_line(tmp_path):
    """skip-magic-trailing-comma: a trailing comma does not keep a short call spread out."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("plot(\n    x,\n    y,\n)"),
                nbformat.v4.new_code_cell("f(" + ", ".join(f"arg{i}" for i in range(20)) + ")")]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    subprocess.run([sys.executable, str(SCRIPT), str(path)], check=True,
                   capture_output=True)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[0].source == "plot(x, y)"
    assert len(cells[1].source.splitlines()) > 1  # too long for 79 columns: still split
    assert max(map(len, cells[1].source.splitlines())) <= 79
