"""`scripts/move_checks.py` (the first step of `make fix`): the book's notebooks are as it
leaves them, and the cells it folds fold in Colab (``cellView: form`` with a ``#@title``)
and in JupyterLab (``source_hidden``), the ``%%solution`` cells included: their
``#@title`` line first, where Colab's documentation puts it, and the magic second
(``bookkit.yours.colab_form_first`` puts the magic back on top for IPython)."""
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
                 if c.cell_type == "code" and move_checks.solution_parts(c.source)]
    assert len(solutions) >= 8
    for cell in solutions:
        lines = cell.source.splitlines()
        assert lines[0] == move_checks.SOLUTION_TITLE, lines[:2]  # Colab: title first
        assert lines[1] == "%%solution", lines[:2]
        assert "%%solution" not in lines[2:]
        assert cell.metadata["cellView"] == "form"
        assert cell.metadata["jupyter"]["source_hidden"] is True


BODY = "def f():\n    return 1"
FOLDED = f"{move_checks.SOLUTION_TITLE}\n%%solution\n{BODY}"


@pytest.mark.parametrize("source", [
    f"%%solution\n{BODY}",                                   # no title yet
    f"%%solution\n{move_checks.SOLUTION_TITLE}\n{BODY}",     # the layout before
])
def test_fold_solution_puts_the_title_first_and_changes_nothing_twice(source):
    cell = nbformat.v4.new_code_cell(source)
    assert move_checks.fold_solution(cell)
    assert cell.source == FOLDED
    assert cell.metadata["cellView"] == "form" and cell.metadata["jupyter"]["source_hidden"]
    assert not move_checks.fold_solution(cell)
    assert cell.source == FOLDED


def test_fold_solution_keeps_a_title_of_its_own_and_its_markdown():
    for source in ("# @title Mine\n#@markdown Run me.\n%%solution\nx = 1",
                   "%%solution\n# @title Mine\n#@markdown Run me.\nx = 1"):
        cell = nbformat.v4.new_code_cell(source)
        move_checks.fold_solution(cell)
        assert cell.source == "# @title Mine\n#@markdown Run me.\n%%solution\nx = 1"


@pytest.mark.parametrize("source", [
    "x = 1\n%%solution\nx = 2",       # the magic after code: not a solution cell
    "#@title Setup\nx = 1",
    "%%solutions\nx = 1",
    "# a comment\n%%solution\nx = 1",
])
def test_other_cells_are_not_solution_cells(source):
    assert move_checks.solution_parts(source) is None


def test_convert_migrates_a_notebook_in_the_layout_before():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"%%solution\n{move_checks.SOLUTION_TITLE}\n{BODY}"),
        nbformat.v4.new_code_cell("#@title Setup\nx = 1")])
    assert move_checks.convert(nb) == 1
    assert nb.cells[0].source == FOLDED
    assert nb.cells[1].source == "#@title Setup\nx = 1"
    assert move_checks.convert(nb) == 0
