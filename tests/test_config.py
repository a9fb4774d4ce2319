"""The book's wiring: one repository URL, a table of contents that matches the files,
and notebooks that start with the Colab-safe setup cell and store complete outputs."""
from __future__ import annotations

import pytest

import bookkit
import re

from bookkit.versions import MINIMUM
from bookpaths import (ROOT, SETUP_TAG, cell_source, chapter, chapter_id, chapters, config,
                       load_notebook, notebook_paths, setup_cell_requirements, setup_cell_text,
                       source_for, toc_files)


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


def test_chapters_are_numbered_in_the_order_of_the_toc():
    # _toc.yml is the one list of chapters: numbers follow it, 0, 1, 2, ... with no gap,
    # and every notebook is a chapter (chNN_slug), so a number is derived from the slug
    numbers = [int(path.name[2:4]) for path in chapters().values()]
    assert numbers == list(range(len(numbers))), numbers
    assert sorted(chapters().values()) == notebook_paths()
    assert chapter_id("sqrt_trick") == "ch04" and chapter("sqrt_trick").is_file()
    with pytest.raises(KeyError, match="no chapter 'no_such' in _toc.yml"):
        chapter("no_such")


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
    source = cell_source(first_code).strip()
    required = setup_cell_requirements(source)
    assert required is not None, (f"{path.name}: the setup cell must end with "
                                  f"`bookkit.require(...)` as in CONTRIBUTING.md")
    packages, minimums = required
    assert source == setup_cell_text(config()["repository"]["url"], packages, **minimums), \
        f"{path.name}: the first code cell must be the setup cell of CONTRIBUTING.md"
    assert SETUP_TAG in first_code.get("metadata", {}).get("tags", []), \
        f"{path.name}: the setup cell needs the {SETUP_TAG!r} tag (the HTML collapses it)"


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_setup_cell_requires_what_the_notebook_imports(path):
    """Every package with a declared minimum that the notebook imports is checked by its
    setup cell (numpy always: minigrad is built on it), and a chapter's own minimum
    is never below the book's."""
    cells = load_notebook(path)["cells"]
    code = [cell_source(c) for c in cells if c["cell_type"] == "code"]
    packages, minimums = setup_cell_requirements(code[0].strip()) or ([], {})
    imported = {name for name in MINIMUM
                if re.search(rf"^\s*(import|from)\s+{name}\b", "\n".join(code), re.M)}
    missing = sorted((imported | {"numpy"}) - set(packages))
    assert not missing, f"{path.name}: add {missing} to the setup cell's bookkit.require(...)"
    unknown = sorted(set(packages) - set(MINIMUM))
    assert not unknown, f"{path.name}: no declared minimum for {unknown} (bookkit/versions.py)"
    from bookkit.versions import _at_least
    lower = {k: v for k, v in minimums.items() if k in MINIMUM and not _at_least(v, MINIMUM[k])}
    assert not lower, f"{path.name}: {lower} is below the book's declared minimum {MINIMUM}"


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


NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve").split()


@pytest.mark.parametrize("page, phrase", [
    ("README.md", r"(\w+) otter-grader master notebooks"),
    ("book/intro.md", r"(\w+) autograded assignments"),
    ("book/assignments/instructors.md", r"(\w+) autograded assignments"),
])
def test_pages_count_the_assignments_there_are(page, phrase):
    # the maps say what the code does: one master notebook per assignment folder
    count = sum(1 for p in (ROOT / "assignments").glob("a[0-9]*_*") if p.is_dir())
    said = re.findall(phrase, (ROOT / page).read_text(), re.I)
    assert said and all(word.lower() == NUMBER_WORDS[count] for word in said), (page, said, count)
