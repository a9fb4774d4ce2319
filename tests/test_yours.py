"""bookkit.yours: a %%yours cell whose check passes is saved to yours.py and loaded by
later chapters; a stub or the book's solution is never saved; %%solution keeps the
reader's definitions; a solution cell that opens with Colab's ``#@title`` line, its
magic on the next line, runs the magic (and no other cell is rewritten)."""
from __future__ import annotations

import pytest

from bookkit import build_it as B
from bookkit import yours

IPython = pytest.importorskip("IPython")


@pytest.fixture
def ip(tmp_path, monkeypatch):
    from IPython.testing.globalipapp import start_ipython
    shell = start_ipython() or IPython.get_ipython()
    monkeypatch.setenv("BOOK_YOURS", str(tmp_path / "yours.py"))
    for table in ("_CELLS", "_PASSED", "_SOLUTIONS"):
        monkeypatch.setattr(yours, table, {})
    yours.register_magics(shell)
    shell.user_ns.update(check_sqrt_starts=B.check_sqrt_starts,
                         check_checkpoint_sequential=B.check_checkpoint_sequential)
    return shell


SQRT = '''
import math
def my_sqrt_starts(n):
    k = math.isqrt(n - 1) + 1
    q, r = divmod(n, k)
    lengths = [q + 1] * r + [q] * (k - r)
    return [sum(lengths[:j]) for j in range(k)]

check_sqrt_starts(my_sqrt_starts)
'''


def test_passing_cell_is_saved_and_loaded(ip, tmp_path, capsys):
    ip.run_cell_magic("yours", "", SQRT)
    out = capsys.readouterr().out
    assert "agree" in out and "saved to" in out
    text = (tmp_path / "yours.py").read_text()
    assert "# --- yours: my_sqrt_starts (chapter 4) ---" in text
    assert "check_sqrt_starts" not in text.split("---", 2)[-1]  # the check call dropped
    f = yours.load("my_sqrt_starts")
    assert "my_sqrt_starts: yours (checked above)" in capsys.readouterr().out
    yours._PASSED.clear()  # a later chapter, another session: from the file
    f = yours.load("my_sqrt_starts")
    assert "my_sqrt_starts: yours (from" in capsys.readouterr().out
    assert f(10) == [0, 3, 6, 8]


def test_stub_and_solution_are_not_saved(ip, tmp_path, capsys):
    ip.run_cell_magic("yours", "", "def my_sqrt_starts(n):\n    raise NotImplementedError\n"
                      "\ncheck_sqrt_starts(my_sqrt_starts)\n")
    ip.run_cell_magic("solution", "", SQRT)
    out = capsys.readouterr().out
    assert "not written yet" in out and "agree" in out and "saved" not in out
    assert not (tmp_path / "yours.py").exists()
    # the reader's stub is still the one in the notebook
    with pytest.raises(NotImplementedError):
        ip.user_ns["my_sqrt_starts"](4)
    yours.load("HandCheckpoint")
    assert "HandCheckpoint: the book's" in capsys.readouterr().out
    assert yours.load("my_sqrt_starts")(10) == [0, 3, 6, 8]
    assert "my_sqrt_starts: the book's solution" in capsys.readouterr().out


def test_pieces_compose(ip, tmp_path, capsys):
    """The reader's my_checkpoint_sequential, loaded, runs with the reader's
    HandCheckpoint, both from yours.py."""
    from bookkit.yours import HandCheckpoint
    import inspect
    hand_src = inspect.getsource(HandCheckpoint)
    ip.run_cell("from minigrad import Function, Tensor, enable_grad, memory, no_grad")
    ip.run_cell_magic("yours", "", hand_src + "\nfrom bookkit.build_it import "
                      "check_hand_checkpoint\ncheck_hand_checkpoint(HandCheckpoint)\n")
    assert "HandCheckpoint: saved" in capsys.readouterr().out
    yours._PASSED.clear()
    cls = yours.load("HandCheckpoint")
    assert cls is not HandCheckpoint and cls.__name__ == "HandCheckpoint"
    B.check_hand_checkpoint(cls)
    assert "agree" in capsys.readouterr().out


def test_unknown_piece():
    with pytest.raises(KeyError, match="no piece named"):
        yours.load("my_nothing", path="/nonexistent/yours.py")


TITLE = "#@title The book's solution {display-mode: \"form\"}"


@pytest.mark.parametrize("head", [
    TITLE + "\n%%solution\n",
    "# @title The book's solution\n%%solution\n",  # the spacing Colab writes now
    "\n#@title The book's solution\n#@markdown Run it to compare.\n%%solution\n",
])
def test_form_title_above_the_magic_runs_the_magic(ip, capsys, head):
    ip.run_cell_magic("yours", "", "def my_sqrt_starts(n):\n    raise NotImplementedError\n")
    result = ip.run_cell(head + SQRT)
    assert result.success, result.error_in_exec or result.error_before_exec
    assert "agree" in capsys.readouterr().out
    assert yours._SOLUTIONS["my_sqrt_starts"](10) == [0, 3, 6, 8]
    with pytest.raises(NotImplementedError):  # %%solution ran, not a plain cell
        ip.user_ns["my_sqrt_starts"](4)


def test_the_magic_line_moves_first_and_the_title_stays_in_its_body():
    lines = [TITLE + "\n", "%%solution\n", "x = 1\n"]
    assert yours.colab_form_first(lines) == ["%%solution\n", TITLE + "\n", "x = 1\n"]
    assert yours.colab_form_first(["#@title t\n", "%%solution"]) == \
        ["%%solution\n", "#@title t\n"]
    moved = yours.colab_form_first(lines)
    assert yours.colab_form_first(moved) == moved  # already first: nothing to do


@pytest.mark.parametrize("cell", [
    "#@title Setup\nx = 1\n",                        # a form with no magic
    "%%solution\n#@title t\nx = 1\n",                # the magic already first
    "# a plain comment\n%%solution\nx = 1\n",        # not a form comment
    "x = 1\n#@title t\n%%solution\nx = 2\n",         # code before the title
    "#@title t\n\n%%solution\nx = 1\n",              # not directly followed
    "#@title t\n%solution x\n",                      # a line magic
    "#@param t\n%%solution\nx = 1\n",               # not a title or markdown line
    "",
])
def test_other_cells_are_left_alone(cell):
    lines = cell.splitlines(keepends=True)
    assert yours.colab_form_first(lines) == lines


def test_a_title_cell_without_a_magic_runs_as_written(ip):
    result = ip.run_cell("#@title Setup\nform_x = 41\nform_x += 1\n")
    assert result.success and ip.user_ns["form_x"] == 42
    assert ip.transform_cell("#@title Setup\nform_x = 1\n") == "#@title Setup\nform_x = 1\n"


def test_registering_twice_installs_the_transform_once(ip):
    def colab_form_first(lines):  # a copy from a reloaded bookkit.yours
        return lines
    colab_form_first.__module__ = yours.__name__
    colab_form_first.__qualname__ = "colab_form_first"
    ip.input_transformers_cleanup.append(colab_form_first)
    yours.register_magics(ip)
    yours.register_magics(ip)
    mine = [t for t in ip.input_transformers_cleanup
            if getattr(t, "__name__", "") == "colab_form_first"]
    assert mine == [yours.colab_form_first]
    assert len(ip.input_transformers_cleanup) == len(set(ip.input_transformers_cleanup))
