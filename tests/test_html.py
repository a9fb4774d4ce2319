"""The built HTML: every notebook page exists and has a working Colab launch link;
exercises and figures are numbered per chapter, no page loads thebe, glued numbers are
not bold, and assignment pages collapse their setup cell."""
from __future__ import annotations

import re

import pytest

from bookpaths import HTML, chapter, config, continued_chapter, notebook_paths

pytestmark = pytest.mark.book


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_notebook_page_has_colab_button(path):
    page = HTML / "notebooks" / (path.stem + ".html")
    assert page.is_file(), f"{page} was not built: run `make book`"
    html = page.read_text()
    repo = config()["repository"]["url"].removeprefix("https://github.com/")
    expected = (f"https://colab.research.google.com/github/{repo}/blob/main/"
                f"notebooks/{path.name}")
    links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', html)
    assert expected in links, f"{page.name}: Colab link {expected} not found; found {links}"


def test_no_page_loads_scripts_or_styles_from_another_host():
    offenders = {}
    for page in HTML.rglob("*.html"):
        html = page.read_text()
        remote = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="(https?://[^"]+)"', html)
        # <link rel="canonical"> style metadata is not loaded; scripts, styles, images are.
        remote = [u for u in remote if "127.0.0.1" not in u]
        if remote:
            offenders[str(page.relative_to(HTML))] = remote
    assert not offenders, f"pages that would load from another host: {offenders}"


# --- Reader-first pages, checked in the built HTML --------------------------------------

def _chapter_pages():
    import re as _re
    pages = []
    for path in notebook_paths():
        match = _re.match(r"ch(\d+)b?_", path.name)  # a chapter or its continuation
        if match:
            pages.append((path, int(match.group(1))))
    return pages


def _exercise_numbers(path) -> list[str]:
    html = (HTML / "notebooks" / (path.stem + ".html")).read_text()
    return re.findall(r"Exercise (\d+(?:\.\d+)*)", html)


@pytest.mark.parametrize("path, chapter", _chapter_pages(), ids=lambda v: getattr(v, "name", v))
def test_exercises_and_figures_are_numbered_per_chapter(path, chapter):
    html = (HTML / "notebooks" / (path.stem + ".html")).read_text()
    exercises = re.findall(r"Exercise (\d+(?:\.\d+)*)", html)
    figures = re.findall(r'<span class="caption-number">Fig\. (\d+(?:\.\d+)*)', html)
    for label, numbers in (("Exercise", exercises), ("Fig.", figures)):
        wrong = sorted({n for n in numbers if n.split(".")[0] != str(chapter)
                        or len(n.split(".")) != 2})
        assert not wrong, f"{path.name}: {label} numbers not of the form {chapter}.k: {wrong}"
    if exercises:
        # a continuation page (chNNb_) goes on from its chapter's last exercise
        first = 1
        if re.match(r"ch\d+b_", path.name):
            parent = continued_chapter(path)
            first += len({n for n in _exercise_numbers(parent)})
        firsts = sorted({int(n.split(".")[1]) for n in exercises})
        assert firsts[0] == first, \
            f"{path.name}: exercises start at {chapter}.{firsts[0]}, not {chapter}.{first}"


def test_no_page_loads_thebe():
    offenders = [str(p.relative_to(HTML)) for p in HTML.rglob("*.html")
                 if "THEBE_JS_URL" in p.read_text() or "sphinx-thebe.js" in p.read_text()]
    assert not offenders, f"pages that still load thebe: {offenders}"


def test_glued_numbers_are_not_bold():
    css = (HTML / "_static" / "reader.css").read_text()
    assert re.search(r"span\.pasted-text[^{]*\{[^}]*font-weight:\s*normal", css)
    page = (HTML / "notebooks" / f"{chapter('five_minutes').stem}.html").read_text()
    assert "reader.css" in page and 'class="pasted-text"' in page


def test_assignment_setup_cells_are_collapsed():
    pages = sorted((HTML / "book" / "assignments").glob("*/*.html"))
    assert pages, "no assignment page was built"
    for page in pages:
        html = page.read_text()
        first_cell = html[html.index('<div class="cell'):]
        first_cell = first_cell[:first_cell.index("</details>") + 10] \
            if "</details>" in first_cell[:2000] else first_cell[:2000]
        assert "tag_hide-input" in first_cell and "<details" in first_cell, \
            f"{page.name}: its first code cell (the setup) is not collapsed"


def test_no_figure_has_a_fixed_height_and_no_page_loads_the_icon_script():
    """A fixed inline height squashed figures narrowed on a phone; fontawesome.js was
    1.49 MB of every page (the theme's CSS draws the icons from its webfonts)."""
    fixed = re.compile(r'<img\b[^>]*style="[^"]*\bheight:\s*\d')
    squashed = [p.name for p in HTML.rglob("*.html") if fixed.search(p.read_text())]
    assert not squashed, f"images with a fixed inline height: {squashed}"
    heavy = [p.name for p in HTML.rglob("*.html") if "fontawesome.js" in p.read_text()]
    assert not heavy, f"pages that still load fontawesome.js: {heavy}"
