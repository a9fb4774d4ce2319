"""Reader-first page mechanics for the book, in one small Sphinx extension.

- **Numbers per chapter.** Sphinx numbers figures, tables, code listings and
  sphinx-exercise's exercises across the whole book unless the toctree is numbered
  (ch22 had Exercise 60). Here every enumerable item of ``notebooks/chNN_*`` is
  renumbered ``NN.k`` in document order (Exercise 4.1, Figure 4.2, ...), and on any
  other page ``k`` (the intro's figure is Figure 1). A chapter's continuation page
  (``notebooks/chNNb_*``, listed under the chapter) goes on with the chapter's numbers:
  if chapter 4 ends at Figure 4.3, its continuation starts at Figure 4.4.
  ``{numref}`` and the exercise titles read the same numbers.
- **No thebe.** jupyter-book always loads sphinx-thebe, whose inline script declares
  ``THEBE_JS_URL`` on every page; declared twice it is a console error, and the book
  has no live kernels anyway (launch buttons open Colab). Its scripts are dropped.
- **One search box, no theme-mode console error.** The sidebar's search field is the
  one search box (pydata's header repeated it: ``navbar_persistent``), and the page's
  colour mode defaults to ``auto`` (an empty ``default_mode`` logs a console error on
  every first visit).
- **Figures keep their shape.** A notebook's PNG output carries its nominal width and
  height (IPython's retina metadata), which myst-nb writes as an inline
  ``style="width: 682px; height: 286px"``; narrowed by ``max-width: 100%`` on a phone,
  the fixed height squashed every figure to about half its aspect ratio. The height
  is dropped: the width still caps the figure at its nominal size and the browser
  derives the height from the image itself.
- **No 1.5 MB icon script.** pydata-sphinx-theme loads FontAwesome's SVG-with-JS
  bundle (``fontawesome.js``, 1.49 MB, most of a page's weight) although its own CSS
  already draws the same icons from the webfonts it ships (about 150 KB, cached).
  The script's ``<script>`` and preload tags are removed from every built page.
  The one brand icon (the header's GitHub link) is drawn inline from the same
  bundle's path, so no page loads the 0.11 MB brands webfont for one glyph.
  So are, on every page but the search page, the search index and Sphinx's search
  scripts (0.24 MB), which pydata loads everywhere for its search-as-you-type mode;
  the book leaves that mode off, and the search box sends the reader to the search
  page, which loads them itself.
- **Offline search snippets.** Opened from disk, the search page cannot fetch the
  pages it cuts its snippets from; every page's text goes into
  ``_static/search_text.js`` and ``_static/offline_search.js`` answers those fetches
  from it (over HTTP nothing changes).
- **Collapsed cells say what they hold.** myst-nb's toggle reads "Show code cell
  source" on every collapsed cell; here it reads "Show the setup code (12 lines)" or
  "Show the code (48 lines)", unless the cell sets its own ``code_prompt_show``.
- **Assignment pages' setup cell collapsed.** The first code cell of a page under
  ``book/assignments/`` (the setup cell, which otter-assign writes) gets the
  ``hide-input`` treatment without a tag in the notebook, so ``scripts/assignments.py``
  stays free to regenerate the notebooks.
"""
from __future__ import annotations

import re

from docutils import nodes

ICON_SCRIPT = re.compile(
    r'[ \t]*<(?:script|link)\b[^>]*_static/scripts/fontawesome\.js[^>]*>(?:</script>)?\n?')
SEARCH_SCRIPTS = re.compile(
    r'[ \t]*<script\b[^>]*src="[^"]*(?:searchindex\.js|_static/searchtools\.js|'
    r'_static/language_data\.js)[^"]*"[^>]*></script>\n?')
GITHUB_ICON = '<i class="fab fa-github"></i>'
GITHUB_PATH = re.compile(r'[{,]"?github"?:\[(\d+),(\d+),\[[^\]]*\],"[0-9a-f]+","([^"]+)"')
CHAPTER = re.compile(r"(?:^|/)ch(\d+)(b?)_[^/]*$")
ASSIGNMENTS = "book/assignments/"


def chapter_number(docname: str) -> int | None:
    """The chapter number of a notebook's docname (``notebooks/ch04_sqrt_trick`` -> 4)."""
    match = CHAPTER.search(docname)
    return int(match.group(1)) if match else None


def is_continuation(docname: str) -> bool:
    """True for a chapter's continuation page (``notebooks/ch04b_sqrt_rule``)."""
    match = CHAPTER.search(docname)
    return bool(match and match.group(2))


def renumber(fignumbers: dict[str, dict[str, tuple[int, ...]]], docname: str,
             after: dict[str, int] | None = None) -> dict[str, dict[str, tuple[int, ...]]]:
    """One document's ``{figtype: {id: number}}`` numbered from 1 per type, in the
    order Sphinx numbered them, prefixed by the chapter number when there is one;
    ``after`` (``{figtype: count}``) starts each type after that many (a continuation
    page goes on from its chapter's last figure and exercise)."""
    prefix = () if chapter_number(docname) is None else (chapter_number(docname),)
    after = after or {}
    renumbered = {}
    for figtype, numbers in fignumbers.items():
        ordered = sorted(numbers, key=lambda ident: numbers[ident])
        start = after.get(figtype, 0) + 1
        renumbered[figtype] = {ident: prefix + (k,)
                               for k, ident in enumerate(ordered, start)}
    return renumbered


def counts_before(all_fignumbers: dict[str, dict[str, dict]], docname: str) -> dict[str, int]:
    """``{figtype: count}`` of the chapter page that ``docname`` continues (its chapter
    notebook, the one of the same number without the ``b``); empty for any other page."""
    if not is_continuation(docname):
        return {}
    number = chapter_number(docname)
    for other, fignumbers in all_fignumbers.items():
        if chapter_number(other) == number and not is_continuation(other):
            return {figtype: len(numbers) for figtype, numbers in fignumbers.items()}
    return {}


def _number_per_chapter(app, env):
    original = dict(env.toc_fignumbers)
    for docname, fignumbers in original.items():
        env.toc_fignumbers[docname] = renumber(fignumbers, docname,
                                               counts_before(original, docname))
    return []


def _drop_thebe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    context["script_files"] = [
        js for js in scripts
        if "thebe" not in str(js).lower()
        and "THEBE" not in str(getattr(js, "attributes", {}).get("body", ""))]


def free_height(image: nodes.image) -> bool:
    """Drop a fixed height from an image that also has a width; True if dropped."""
    if "width" in image and "height" in image:
        del image["height"]
        return True
    return False


def _responsive_images(app, doctree, docname):
    for image in doctree.findall(nodes.image):
        free_height(image)


def drop_icon_script(html: str, search_page: bool = False) -> str:
    """A built page without fontawesome.js's ``<script>`` and ``<link rel=preload>``,
    and, unless it is the search page, without the search index and scripts."""
    html = ICON_SCRIPT.sub("", html)
    return html if search_page else SEARCH_SCRIPTS.sub("", html)


def page_text(doctree) -> str:
    """A page's prose and code as plain text, whitespace collapsed (for search snippets)."""
    return " ".join(doctree.astext().split())


def _keep_page_text(app, doctree, docname):
    if app.builder.format == "html":
        texts = app.env.__dict__.setdefault("_reader_page_texts", {})
        texts[app.builder.get_target_uri(docname)] = page_text(doctree)


def search_text_js(texts: dict[str, str]) -> str:
    """``_static/search_text.js``: each page's text, keyed by its path in the book."""
    import json

    return "window.BOOK_SEARCH_TEXT = " + json.dumps(texts, sort_keys=True) + ";\n"


def inline_github_icon(html: str, icons_js: str) -> str:
    """The page with FontAwesome's GitHub ``<i>`` drawn as an inline SVG, from the
    path in the theme's ``fontawesome.js`` (the page unchanged if it is not there)."""
    match = GITHUB_PATH.search(icons_js)
    if not match or GITHUB_ICON not in html:
        return html
    width, height, path = match.groups()
    svg = (f'<svg class="svg-inline--fa" viewBox="0 0 {width} {height}" width="1em" '
           f'height="1em" aria-hidden="true" focusable="false">'
           f'<path fill="currentColor" d="{path}"></path></svg>')
    return html.replace(GITHUB_ICON, svg)


def _drop_icon_script_everywhere(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    from pathlib import Path

    icons = Path(app.outdir) / "_static" / "scripts" / "fontawesome.js"
    icons_js = icons.read_text(encoding="utf-8") if icons.is_file() else ""
    texts = app.env.__dict__.get("_reader_page_texts", {})
    (Path(app.outdir) / "_static" / "search_text.js").write_text(
        search_text_js(texts), encoding="utf-8")
    for path in Path(app.outdir).rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        lighter = drop_icon_script(text, search_page=path.name == "search.html")
        lighter = inline_github_icon(lighter, icons_js)
        if lighter != text:
            path.write_text(lighter, encoding="utf-8")


def _collapse_assignment_setup(app, doctree):
    docname = app.env.docname
    if not docname.startswith(ASSIGNMENTS):
        return
    for node in doctree.findall(nodes.container):
        if node.get("nb_element") != "cell_code":
            continue
        if not node.get("hide_mode"):
            node["hide_mode"] = "input"
            node["prompt_show"] = "Show code cell {type}"
            node["prompt_hide"] = "Hide code cell {type}"
            node["classes"].append("tag_hide-input")
        return  # only the first code cell


DEFAULT_PROMPT = "Show code cell {type}"


def cell_prompt(source: str) -> str:
    """The toggle's label for a collapsed code cell of this source."""
    n = sum(1 for line in source.splitlines() if line.strip())
    what = "the setup code" if source.lstrip().startswith("# Setup") else "the code"
    return f"Show {what} ({n} line{'s' if n != 1 else ''})"


def _label_collapsed_cells(app, doctree):
    for node in doctree.findall(nodes.container):
        if (node.get("nb_element") != "cell_code" or not node.get("hide_mode")
                or node.get("prompt_show") != DEFAULT_PROMPT or not node.children
                or node.children[0].get("nb_element") != "cell_code_source"):
            continue
        node["prompt_show"] = cell_prompt(node.children[0].astext())


def _theme_defaults(app, config):
    config.html_theme_options["navbar_persistent"] = []
    config.html_context.setdefault("default_mode", "auto")


def setup(app):
    app.connect("config-inited", _theme_defaults, priority=900)
    # After sphinx's TocTreeCollector (priority 500) has assigned the book-wide numbers.
    app.connect("env-get-updated", _number_per_chapter, priority=900)
    app.connect("html-page-context", _drop_thebe)
    app.connect("doctree-read", _collapse_assignment_setup)
    app.connect("doctree-read", _label_collapsed_cells, priority=600)
    app.connect("doctree-resolved", _responsive_images)
    app.connect("doctree-resolved", _keep_page_text)
    app.connect("build-finished", _drop_icon_script_everywhere)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
