"""A maintainer's one-line edit: a comment or a docstring changed in minigrad/ or bookkit/
leaves the notebook phases green without executing any notebook again, because no
notebook stores library source as an output (listings are read from the source when the
book is built). Run on a scratch copy: the engine's comments (minigrad/tensor.py) and a
bookkit module that a chapter lists (bookkit/event_table.py), then strict nbval, with
`make test`'s flags, on the chapter that shows both."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from bookpaths import ROOT

NOTEBOOK = "notebooks/ch02_tiny_autograd.ipynb"
EDITED = ("minigrad/tensor.py", "bookkit/event_table.py")


def nbval_flags() -> list[str]:
    """The Makefile's NBVAL line: the same flags as `make test`'s notebook phases."""
    line = re.search(r"^NBVAL\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.M)
    return line.group(1).split()


def edit_comments(path) -> int:
    """Append a word to every comment line and to the first line of every docstring."""
    lines = path.read_text().splitlines(keepends=True)
    edited = 0
    for i, line in enumerate(lines):
        body = line.rstrip("\n")
        if re.match(r"^\s*# ", body) or re.match(r'^\s*"""\S', body):
            lines[i] = body + " (edited)\n" if body.lstrip().startswith("#") else \
                body.replace('"""', '"""Edited: ', 1) + "\n"
            edited += 1
    path.write_text("".join(lines))
    return edited


@pytest.mark.book
def test_a_comment_edit_needs_no_notebook_reexecution(scratch):
    shown = (ROOT / NOTEBOOK).read_text()
    for name in EDITED:  # the chapter really shows these files
        assert name.split("/")[-1] in shown, f"{NOTEBOOK} no longer shows {name}"
        assert edit_comments(scratch / name) > 5
    env = {**os.environ, "PYTHONPATH": str(scratch)}
    env.pop("PYTEST_CURRENT_TEST", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *nbval_flags(),
         NOTEBOOK], cwd=scratch, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # the edit reached the kernel: the scratch library is the one imported
    assert "passed" in done.stdout
