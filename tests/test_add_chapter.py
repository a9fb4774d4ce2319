"""CONTRIBUTING.md's "Add a chapter", followed as written in a scratch copy of the
repository: the commands of its steps 1-5 run there (step 2, the writing, is a cell
added here), and the book built with the new chapter shows it."""
from __future__ import annotations

import os
import re
import subprocess

import nbformat
import pytest

from bookpaths import ROOT, chapters

SECTION = re.compile(r"^## Add a chapter\n(?P<body>.*?)(?=^## )", re.S | re.M)
STEP = re.compile(r"^(?P<number>\d+)\. (?:`(?P<command>[^`]+)`)?", re.M)


def steps() -> dict[int, str | None]:
    """The numbered steps of "Add a chapter": number -> its command (None: no command)."""
    body = SECTION.search((ROOT / "CONTRIBUTING.md").read_text())["body"]
    return {int(m["number"]): m["command"] for m in STEP.finditer(body)}


def test_add_a_chapter_has_at_most_eight_numbered_steps():
    numbered = steps()
    assert list(numbered) == list(range(1, len(numbered) + 1)) and len(numbered) <= 8
    assert numbered[2] is None                       # the writing: done below by hand
    assert numbered[1].startswith(".venv/bin/python scripts/new_chapter.py my_topic ")
    assert [numbered[i].split()[:2] for i in (3, 4)] == [["make", "fix"], ["make", "check"]]
    assert numbered[5] == "make html"


def run(command: str, cwd) -> str:
    # -o: the scratch shares the venv, whose stamp make must not rebuild
    command = re.sub(r"^make ", "make -o .venv/.installed ", command)
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    result = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, f"{command}\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
    return result.stdout


@pytest.mark.book
def test_a_new_chapter_is_built_by_following_the_steps(scratch):
    numbered = steps()
    number = len(chapters())
    name = f"ch{number:02d}_my_topic"
    out = run(numbered[1], scratch)
    assert f"notebooks/{name}.ipynb" in out
    path = scratch / "notebooks" / f"{name}.ipynb"
    # step 2: a visible cell and a check that move_checks will move off the page
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("answer = 6 * 7\nprint('the answer is', answer)\n"
                                              "assert answer == 42"))
    nbformat.write(nb, path)
    for step in (3, 4, 5):
        run(numbered[step].replace("chNN", f"ch{number:02d}"), scratch)
    nb = nbformat.read(path, as_version=4)
    tags = [cell.metadata.get("tags", []) for cell in nb.cells]
    assert tags[-1] == ["remove-cell"] and nb.cells[-1].source.endswith("\nassert answer == 42")
    assert nb.cells[-2].outputs[0]["text"] == "the answer is 42\n"
    page = (scratch / "_build" / "html" / "notebooks" / f"{name}.html").read_text()
    assert f"{number}. My topic" in page and "the answer is 42" in page
    assert f"{name}.html" in (scratch / "_build" / "html" / "book" / "intro.html").read_text()


def test_a_new_chapter_goes_after_the_last_chapters_continuation(tmp_path):
    """A new chapter is listed after the last chapter's whole entry, its `sections:`
    (a continuation page) included, not between the chapter and its continuation."""
    from bookpaths import load_module

    new_chapter = load_module(ROOT / "scripts" / "new_chapter.py", "new_chapter_for_test")
    (tmp_path / "_toc.yml").write_text(
        "parts:\n  - caption: A\n    chapters:\n"
        "      - file: notebooks/ch00_a\n"
        "      - file: notebooks/ch01_b\n"
        "        sections:\n"
        "          - file: notebooks/ch01b_c\n"
        "      - file: book/playbook\n")
    new_chapter.ROOT = tmp_path
    listed = {"a": tmp_path / "notebooks/ch00_a.ipynb", "b": tmp_path / "notebooks/ch01_b.ipynb"}
    new_chapter._add_to_toc("notebooks/ch02_new", listed)
    lines = (tmp_path / "_toc.yml").read_text().splitlines()
    assert lines[-3:] == ["          - file: notebooks/ch01b_c",
                          "      - file: notebooks/ch02_new", "      - file: book/playbook"]
