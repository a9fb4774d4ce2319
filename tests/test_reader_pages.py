"""What a reader of the HTML book sees of each notebook, checked from its JSON
(CONTRIBUTING.md "A chapter is one notebook"):

- visible code lines fit 79 columns and visible text-output lines 88 (the 1280 px
  column shows about 88 characters of code font);
- no visible cell calls ``glue(`` or ``record(``: the checks and the glue live in cells
  tagged ``remove-cell`` (nbval still runs them);
- at most two visible ``assert`` lines per chapter, where they teach.

A code cell's *source* is visible unless it is tagged ``remove-cell``, ``remove-input``,
``hide-input`` or ``hide-cell`` (collapsed: the reader opens it on purpose). Its
*outputs* are visible unless it is tagged ``remove-cell``, ``remove-output``,
``hide-output`` or ``hide-cell``. ``/work/shared``'s reading_metrics counts the same way
(``scripts/reading_metrics.py`` prints the totals).
"""
from __future__ import annotations

import re

import pytest

from bookpaths import cell_source, load_notebook, notebook_paths

CODE_COLUMNS = 79
OUTPUT_COLUMNS = 88
MAX_VISIBLE_ASSERTS = 2
SOURCE_HIDDEN = {"remove-cell", "remove_cell", "remove-input", "remove_input",
                 "hide-input", "hide_input", "hide-cell", "hide_cell"}
OUTPUT_HIDDEN = {"remove-cell", "remove_cell", "remove-output", "remove_output",
                 "hide-output", "hide_output", "hide-cell", "hide_cell"}
PLUMBING_CALL = re.compile(r"\b(glue|record)\(")
RICH = ("text/html", "image/png", "image/svg+xml", "text/markdown", "text/latex")


def tags(cell: dict) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def visible_code_lines(nb: dict) -> list[tuple[int, str]]:
    """(cell index, line) of every non-blank source line the HTML shows open."""
    return [(i, line) for i, cell in enumerate(nb["cells"])
            if cell["cell_type"] == "code" and not tags(cell) & SOURCE_HIDDEN
            for line in cell_source(cell).splitlines() if line.strip()]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def visible_output_lines(nb: dict) -> list[tuple[int, str]]:
    """(cell index, line) of every text line a cell's outputs show on the page: streams,
    and text/plain results that have no richer form (an HTML table, a figure). Glued
    values (scrapbook outputs) are not shown where they are computed."""
    lines = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or tags(cell) & OUTPUT_HIDDEN:
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = _text(out.get("text"))
            elif out.get("output_type") in ("execute_result", "display_data"):
                data = out.get("data", {})
                if "scrapbook" in out.get("metadata", {}) or any(k in data for k in RICH):
                    continue
                text = _text(data.get("text/plain"))
            else:
                continue
            lines += [(i, line) for line in text.splitlines()]
    return lines


def test_counters_see_what_the_page_shows():
    cell = {"cell_type": "code", "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["x" * 90 + "\n", "ok\n"]},
        {"output_type": "display_data", "metadata": {"scrapbook": {"name": "n"}},
         "data": {"application/papermill.record/text/plain": "1"}},
        {"output_type": "execute_result", "metadata": {},
         "data": {"text/plain": "y" * 100, "text/html": "<table></table>"}}],
        "source": "glue('a', 1)\nassert True\n"}
    hidden = dict(cell, metadata={"tags": ["remove-cell"]})
    collapsed = dict(cell, metadata={"tags": ["hide-input"]})
    nb = {"cells": [cell, hidden, collapsed]}
    assert [i for i, _ in visible_code_lines(nb)] == [0, 0]
    assert [(i, len(line)) for i, line in visible_output_lines(nb)] == [(0, 90), (0, 2),
                                                                      (2, 90), (2, 2)]


def _where(found: list[tuple[int, str]], limit: int = 8) -> str:
    shown = "; ".join(f"cell {i}: {line.strip()[:60]!r} ({len(line)} cols)"
                      for i, line in found[:limit])
    return shown + (f"; ... {len(found) - limit} more" if len(found) > limit else "")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_visible_code_fits_79_columns(path):
    long = [(i, line) for i, line in visible_code_lines(load_notebook(path))
            if len(line) > CODE_COLUMNS]
    assert not long, (f"{path.name}: {len(long)} visible code lines are longer than "
                      f"{CODE_COLUMNS} columns (ruff format --line-length {CODE_COLUMNS} "
                      f"{path.name}, then shorten comments and strings): {_where(long)}")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_visible_text_output_fits_88_columns(path):
    long = [(i, line) for i, line in visible_output_lines(load_notebook(path))
            if len(line) > OUTPUT_COLUMNS]
    assert not long, (f"{path.name}: {len(long)} visible output lines are longer than "
                      f"{OUTPUT_COLUMNS} columns (show tables with bookkit.show_table): "
                      f"{_where(long)}")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_no_visible_cell_glues_or_records(path):
    calls = [(i, line) for i, line in visible_code_lines(load_notebook(path))
             if PLUMBING_CALL.search(line)]
    assert not calls, (f"{path.name}: move glue(...)/record(...) into a cell tagged "
                       f"remove-cell right after the cell it checks: {_where(calls)}")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_at_most_two_visible_asserts(path):
    asserts = [(i, line) for i, line in visible_code_lines(load_notebook(path))
               if line.strip().startswith("assert ")]
    assert len(asserts) <= MAX_VISIBLE_ASSERTS, (
        f"{path.name}: {len(asserts)} visible assert lines (at most "
        f"{MAX_VISIBLE_ASSERTS}, where they teach; move the others into remove-cell "
        f"cells): {_where(asserts)}")


def _reader_pages_extension():

    from bookpaths import ROOT, load_module

    return load_module(ROOT / "book" / "_ext" / "reader_pages.py")


def test_numbers_restart_per_chapter_in_document_order():
    ext = _reader_pages_extension()
    book_wide = {"exercise": {"ex-b": (61,), "ex-a": (60,), "ex-c": (62,)},
                 "figure": {"fig-x": (27,)}}
    assert ext.renumber(book_wide, "notebooks/ch22_memory_calculator") == {
        "exercise": {"ex-a": (22, 1), "ex-b": (22, 2), "ex-c": (22, 3)},
        "figure": {"fig-x": (22, 1)}}
    assert ext.renumber({"figure": {"hero": (1,)}}, "book/intro") == {
        "figure": {"hero": (1,)}}
    assert ext.chapter_number("notebooks/ch04_sqrt_trick") == 4
    assert ext.chapter_number("notebooks/ch00_five_minutes") == 0
    assert ext.chapter_number("book/playbook") is None


def test_a_continuation_page_goes_on_with_its_chapters_numbers():
    ext = _reader_pages_extension()
    book = {"notebooks/ch04_sqrt_trick": {"exercise": {"a": (10,), "b": (11,)},
                                          "figure": {"f": (7,), "g": (8,), "h": (9,)}},
            "notebooks/ch04b_sqrt_rule": {"exercise": {"c": (12,)}, "figure": {"i": (10,)},
                                          "table": {"t": (3,)}},
            "notebooks/ch05_choosing": {"figure": {"j": (11,)}}}
    assert ext.is_continuation("notebooks/ch04b_sqrt_rule")
    assert not ext.is_continuation("notebooks/ch04_sqrt_trick")
    assert ext.chapter_number("notebooks/ch04b_sqrt_rule") == 4
    after = ext.counts_before(book, "notebooks/ch04b_sqrt_rule")
    assert after == {"exercise": 2, "figure": 3}
    assert ext.renumber(book["notebooks/ch04b_sqrt_rule"], "notebooks/ch04b_sqrt_rule",
                        after) == {"exercise": {"c": (4, 3)}, "figure": {"i": (4, 4)},
                                   "table": {"t": (4, 1)}}
    assert ext.counts_before(book, "notebooks/ch05_choosing") == {}
    assert ext.counts_before(book, "notebooks/ch04_sqrt_trick") == {}


def test_images_lose_a_fixed_height_but_keep_their_width():
    from docutils import nodes

    ext = _reader_pages_extension()
    sized = nodes.image(uri="a.png", width="682px", height="286px")
    assert ext.free_height(sized) and "height" not in sized and sized["width"] == "682px"
    only_height = nodes.image(uri="b.png", height="100px")  # an author's own choice
    assert not ext.free_height(only_height) and only_height["height"] == "100px"


def test_icon_script_is_dropped_and_nothing_else():
    ext = _reader_pages_extension()
    page = ('<head>\n  <link rel="preload" as="script" '
            'href="../_static/scripts/fontawesome.js?digest=1" />\n'
            '  <script defer src="../_static/scripts/fontawesome.js?digest=1"></script>\n'
            '  <script defer src="../_static/scripts/pydata-sphinx-theme.js"></script>\n'
            '</head>')
    lighter = ext.drop_icon_script(page)
    assert "fontawesome" not in lighter and "pydata-sphinx-theme.js" in lighter
    assert ext.drop_icon_script(lighter) == lighter
    search = ('<script src="../_static/searchtools.js"></script>\n'
              '<script src="../_static/language_data.js"></script>\n'
              '<script src="../searchindex.js"></script>\n<script src="../_static/doctools.js">'
              '</script>')
    assert ext.drop_icon_script(search) == '<script src="../_static/doctools.js"></script>'
    assert ext.drop_icon_script(search, search_page=True) == search


def test_search_text_is_a_script_keyed_by_page():
    import json

    from docutils import nodes

    ext = _reader_pages_extension()
    doc = nodes.paragraph(text="Keep  a few\n segment inputs.")
    assert ext.page_text(doc) == "Keep a few segment inputs."
    script = ext.search_text_js({"book/glossary.html": "a </script> b"})
    assert script.startswith("window.BOOK_SEARCH_TEXT = ") and script.endswith(";\n")
    assert json.loads(script[len("window.BOOK_SEARCH_TEXT = "):-2]) == {
        "book/glossary.html": "a </script> b"}


def test_collapsed_cells_say_what_they_hold():
    ext = _reader_pages_extension()
    assert ext.cell_prompt("# Setup: works inside\ntry:\n\n    import x") == \
        "Show the setup code (3 lines)"
    assert ext.cell_prompt("def f():\n    return 1") == "Show the code (2 lines)"
    assert ext.cell_prompt("x = 1") == "Show the code (1 line)"


def test_github_icon_is_drawn_inline_from_the_bundle_path():
    ext = _reader_pages_extension()
    bundle = 'x={"github-alt":[480,512,[],"f113","M1 1"],github:[496,512,[],"f09b","M165.9 397z"]}'
    page = '<a><i class="fab fa-github"></i></a>'
    drawn = ext.inline_github_icon(page, bundle)
    assert 'viewBox="0 0 496 512"' in drawn and 'd="M165.9 397z"' in drawn
    assert "fa-github" not in drawn
    assert ext.inline_github_icon(page, "no icons here") == page
