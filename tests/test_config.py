"""The book's wiring: one repository URL, a table of contents that matches the files,
and notebooks that start with the Colab-safe setup cell and store complete outputs."""
from __future__ import annotations

import pytest

import bookkit
import re

from bookkit.versions import MINIMUM
from bookpaths import (CONTINUATION_FILE, ROOT, SETUP_TAG, cell_source, chapter, chapter_id,
                       chapter_pages, chapters, config, continuations, continued_chapter,
                       load_notebook, notebook_paths, page_id, setup_cell_requirements,
                       setup_cell_text, source_for, toc_files, toc_sections)


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
    # and every notebook is a chapter (chNN_slug) or a chapter's continuation page
    # (chNNb_slug, not numbered), so a number is derived from the slug
    numbers = [int(path.name[2:4]) for path in chapters().values()]
    assert numbers == list(range(len(numbers))), numbers
    assert sorted(chapter_pages()) == notebook_paths()
    assert set(chapter_pages()) == set(chapters().values()) | set(continuations().values())
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


# --- Continuation pages: a long chapter goes on on a second page -------------------------

QUESTION = re.compile(r"\*\*[^*]+\?\*\*")


def continuation_problems(docname: str, cells: list[dict], chapter_docname: str,
                          chapter_cells: list[dict], sections: list[str]) -> list[str]:
    """What is wrong with the continuation page ``docname`` (``notebooks/chNNb_slug``) of
    the chapter ``chapter_docname``: it must be listed under the chapter in _toc.yml, be
    titled ``NNb. ...`` under its own label ``(chNNb)=``, say on its first screen which
    chapter it continues (a link to it), its question in bold and "What you will see";
    the chapter must send the reader on to it at its end; and the prose glues only names
    of its own (``chNNb_...``: glue is per notebook)."""
    problems = []
    ident = docname.split("/")[-1].split("_")[0]
    number = int(ident[2:4])
    parent = chapter_docname.split("/")[-1].split("_")[0]
    if docname not in sections:
        problems.append(f"not listed under {chapter_docname} (sections:) in _toc.yml")
    opening = cell_source(cells[0]) if cells else ""
    if not opening.startswith(f"({ident})=\n# {number}b. "):
        problems.append(f"the first cell must open with ({ident})= and the title "
                        f"'# {number}b. ...'")
    if f"{{ref}}`{parent}`" not in opening:
        problems.append(f"the opening does not link the chapter it continues ({{ref}}`{parent}`)")
    if not QUESTION.search(opening):
        problems.append("the opening has no question in bold")
    if "What you will see" not in opening:
        problems.append('the opening has no "What you will see"')
    markdown = [cell_source(c) for c in chapter_cells if c["cell_type"] == "markdown"]
    if not markdown or f"{{ref}}`{ident}`" not in "\n".join(markdown[-3:]):
        problems.append(f"{chapter_docname} does not send the reader on to {{ref}}`{ident}` "
                        f"at its end")
    glued = set(re.findall(r"\{glue(?::text)?\}`([^`:]+)",
                           "\n".join(cell_source(c) for c in cells
                                     if c["cell_type"] == "markdown")))
    foreign = sorted(g for g in glued if not g.startswith(f"{ident}_"))
    if foreign:
        problems.append(f"glue names not prefixed {ident}_: {foreign}")
    return problems


def _markdown(text: str) -> dict:
    return {"cell_type": "markdown", "source": text}


def test_continuation_problems_finds_each_fault():
    doc, parent = "notebooks/ch04b_more", "notebooks/ch04_sqrt"
    good = [_markdown("(ch04b)=\n# 4b. More\n\nChapter {ref}`ch04`, continued. "
                      "**Why?**\n:::{admonition} What you will see\n:::\n"),
            _markdown("Worth {glue:text}`ch04b_x` KiB.")]
    chapter_cells = [_markdown("(ch04)=\n# 4. Sqrt"), _markdown("On to {ref}`ch04b`.")]
    assert continuation_problems(doc, good, parent, chapter_cells, [doc]) == []
    for cells, chap, sections, words in [
        (good, chapter_cells, [], "not listed"),
        ([_markdown(cell_source(good[0]).replace("4b.", "4."))] + good[1:],
         chapter_cells, [doc], "title"),
        ([_markdown(cell_source(good[0]).replace("{ref}`ch04`", "chapter 4"))] + good[1:],
         chapter_cells, [doc], "link"),
        ([_markdown(cell_source(good[0]).replace("**Why?**", "Why?"))] + good[1:],
         chapter_cells, [doc], "question"),
        ([_markdown(cell_source(good[0]).replace("What you will see", "Tip"))] + good[1:],
         chapter_cells, [doc], "What you will see"),
        (good, chapter_cells[:1], [doc], "send the reader on"),
        (good[:1] + [_markdown("Worth {glue:text}`ch04_x` KiB.")], chapter_cells, [doc],
         "ch04_x"),
    ]:
        problems = continuation_problems(doc, cells, parent, chap, sections)
        assert len(problems) == 1 and words in problems[0], (words, problems)


def test_continuations_are_named_after_a_chapter():
    assert CONTINUATION_FILE.match("notebooks/ch04b_sqrt_rule")
    assert not CONTINUATION_FILE.match("notebooks/ch04_sqrt_trick")
    assert page_id(ROOT / "notebooks/ch04b_sqrt_rule.ipynb") == "ch04b"
    assert continued_chapter(ROOT / "notebooks/ch04b_anything.ipynb") == chapter("sqrt_trick")
    assert continued_chapter(chapter("sqrt_trick")) is None
    with pytest.raises(KeyError, match="no chapter 99"):
        continued_chapter(ROOT / "notebooks/ch99b_nothing.ipynb")


@pytest.mark.parametrize("path", list(continuations().values()), ids=lambda p: p.name)
def test_continuation_page_is_wired_to_its_chapter(path):
    parent = continued_chapter(path)
    docname = path.relative_to(ROOT).with_suffix("").as_posix()
    parent_doc = parent.relative_to(ROOT).with_suffix("").as_posix()
    problems = continuation_problems(docname, load_notebook(path)["cells"], parent_doc,
                                     load_notebook(parent)["cells"], toc_sections(parent_doc))
    assert not problems, f"{path.name}: " + "; ".join(problems)
