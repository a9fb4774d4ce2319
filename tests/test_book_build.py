"""`make book` (scripts/build_book.py) on a tiny book with the real configuration: a change
to the library invalidates the cached notebook runs, and a broken reference fails every
build, not only the first."""
from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest
import yaml

from bookpaths import ROOT

pytestmark = pytest.mark.book

BUILD = [sys.executable, str(ROOT / "scripts" / "build_book.py")]


@pytest.fixture
def tiny_book(tmp_path):
    """The book's _config.yml and extensions, a two-page toc, a library `mylib` the
    notebook imports (watched like minigrad/ and bookkit/)."""
    book = tmp_path / "book"
    shutil.copytree(ROOT / "book" / "_ext", book / "book" / "_ext")
    shutil.copy(ROOT / "book" / "references.bib", book / "book" / "references.bib")
    shutil.copy(ROOT / "book" / "favicon.svg", book / "book" / "favicon.svg")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] = "tiny"
    (book / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n- file: page\n")
    (book / "intro.md").write_text("(intro)=\n# Tiny\n\nSee {ref}`page`.\n")
    (book / "mylib").mkdir()
    (book / "mylib" / "__init__.py").write_text("VALUE = 1\n")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("(page)=\n# Page\n\nThe value is {glue:text}`tiny_value`."),
        nbformat.v4.new_code_cell("import sys; sys.path.insert(0, '.')\nimport mylib\n"
                                  "from myst_nb import glue\nglue('tiny_value', mylib.VALUE * 1000)"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, book / "page.ipynb")
    return book


def build(book, *extra):
    return subprocess.run(BUILD + ["--source", str(book), "--watch", "mylib", *extra],
                          capture_output=True, text=True, timeout=600)


def shown_value(book) -> str:
    html = (book / "_build" / "html" / "page.html").read_text()
    return html.split("The value is", 1)[1][:200]


def test_a_library_change_invalidates_cached_notebook_runs(tiny_book):
    first = build(tiny_book)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "1000" in shown_value(tiny_book)
    (tiny_book / "mylib" / "__init__.py").write_text("VALUE = 2\n")   # notebook unchanged
    second = build(tiny_book)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "emptying" in second.stdout
    assert "2000" in shown_value(tiny_book), "the HTML shows the output of the old library"
    third = build(tiny_book)                                          # nothing changed
    assert third.returncode == 0 and "emptying" not in third.stdout
    assert "Executing notebook" not in third.stdout + third.stderr, "the cache was not used"


def test_a_broken_reference_fails_every_build(tiny_book):
    (tiny_book / "intro.md").write_text("(intro)=\n# Tiny\n\nSee {ref}`no-such-label`.\n")
    for attempt, extra in ((1, ()), (2, ()), (3, ("--stored-outputs",))):
        result = build(tiny_book, *extra)
        output = result.stdout + result.stderr
        assert result.returncode != 0, f"build {attempt} passed with a broken reference"
        assert "no-such-label" in output, output[-3000:]
