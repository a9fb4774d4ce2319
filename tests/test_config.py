"""The book's wiring: one repository URL, a table of contents that matches the files,
and notebooks that start with the Colab-safe setup cell and store complete outputs."""
from __future__ import annotations

import pytest

import bookkit
from bookpaths import (ROOT, cell_source, config, load_notebook, notebook_paths,
                       setup_cell_text, source_for, toc_files)


def test_repository_url_is_set_once_and_used_consistently():
    cfg = config()
    url = cfg["repository"]["url"]
    assert url.startswith("https://github.com/"), url
    assert bookkit.REPOSITORY_URL == url
    assert cfg["launch_buttons"]["colab_url"] == "https://colab.research.google.com"


def test_every_toc_entry_exists_and_every_notebook_is_listed():
    entries = toc_files()
    missing = [e for e in entries if source_for(e) is None]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"
    listed = {e for e in entries}
    unlisted = [p.relative_to(ROOT).with_suffix("").as_posix() for p in notebook_paths()
                if p.relative_to(ROOT).with_suffix("").as_posix() not in listed]
    assert not unlisted, f"notebooks missing from _toc.yml: {unlisted}"


def test_there_are_notebooks():
    assert notebook_paths(), "no notebooks found under notebooks/"


def _outside_fences(markdown: str) -> list[str]:
    """Lines of Markdown that are not inside ``` or ::: fenced blocks of code."""
    lines, in_code = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code:
            lines.append(line)
    return lines


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_notebook_starts_with_title_and_setup_cell(path):
    nb = load_notebook(path)
    cells = nb["cells"]
    first_md = cell_source(cells[0])
    assert cells[0]["cell_type"] == "markdown" and "\n# " in "\n" + first_md, \
        f"{path.name}: the first cell must be Markdown holding the chapter's title"
    titles = [line for c in cells if c["cell_type"] == "markdown"
              for line in _outside_fences(cell_source(c)) if line.startswith("# ")]
    assert len(titles) == 1, f"{path.name}: exactly one level-1 title expected, found {titles}"
    first_code = next(c for c in cells if c["cell_type"] == "code")
    expected = setup_cell_text(config()["repository"]["url"])
    assert cell_source(first_code).strip() == expected, \
        f"{path.name}: the first code cell must be the setup cell of CONTRIBUTING.md"


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_notebook_outputs_are_stored_in_order_without_errors(path):
    nb = load_notebook(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and cell_source(c).strip()]
    counts = [c.get("execution_count") for c in code]
    assert None not in counts, f"{path.name}: some code cells were never executed"
    assert counts == list(range(1, len(code) + 1)), \
        f"{path.name}: cells were not run top to bottom in one kernel: {counts}"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: stored error outputs"
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3"
