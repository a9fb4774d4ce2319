"""`scripts/move_checks.py` (the first step of `make fix`): the book's notebooks are as it
leaves them, and the cells it folds fold in Colab (``cellView: form`` with a ``#@title``)
and in JupyterLab (``source_hidden``), the ``%%solution`` cells included."""
import copy

import nbformat
import pytest

from bookpaths import NOTEBOOKS, ROOT, load_module

move_checks = load_module(ROOT / "scripts" / "move_checks.py", "move_checks")
BOOK = sorted(NOTEBOOKS.glob("ch*.ipynb"))


@pytest.mark.parametrize("path", BOOK, ids=lambda p: p.stem)
def test_every_notebook_is_as_make_fix_leaves_it(path):
    nb = nbformat.read(path, as_version=4)
    before = copy.deepcopy(nb)
    assert move_checks.convert(nb) == 0, f"{path.name}: run make fix NB={path}"
    assert nb == before


def test_solution_cells_fold_in_colab_and_jupyterlab():
    solutions = [c for p in BOOK for c in nbformat.read(p, as_version=4).cells
                 if c.cell_type == "code" and c.source.startswith("%%solution")]
    assert len(solutions) >= 8
    for cell in solutions:
        lines = cell.source.splitlines()
        assert lines[1].startswith("#@title"), lines[:2]  # the cell magic must stay first
        assert cell.metadata["cellView"] == "form"
        assert cell.metadata["jupyter"]["source_hidden"] is True


def test_fold_solution_adds_what_is_missing_and_changes_nothing_twice():
    cell = nbformat.v4.new_code_cell("%%solution\ndef f():\n    return 1")
    assert move_checks.fold_solution(cell)
    assert cell.source.splitlines()[:2] == ["%%solution", move_checks.SOLUTION_TITLE]
    assert cell.metadata["cellView"] == "form" and cell.metadata["jupyter"]["source_hidden"]
    assert not move_checks.fold_solution(cell)
