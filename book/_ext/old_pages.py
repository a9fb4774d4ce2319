"""Keep the book's old page addresses working after the chapters were renumbered.

Chapters were numbered 05b and 12b before they were numbered consecutively, and every
chapter from the old 5b on moved. A link to an old page (a bookmark, a citation, a
Colab notebook's "view in the book") lands on a small page that forwards the reader to
the chapter's new address. tests/test_old_pages.py checks that every target is a page of
the book, so a later rename cannot strand a link.

A chapter split in two keeps its old anchors the same way: when a chapter goes on on a
continuation page (``notebooks/ch04b_*`` after ``notebooks/ch04_*``), every id that moved
there (its sections, labels, figures, exercises) is listed, at build time, in a small
script at the end of the chapter's page: opened at ``ch04_sqrt_trick.html#the-theorem``,
whose id is no longer on that page, it goes on to ``ch04b_....html#the-theorem``.
Links inside the book need none of this (``{ref}`` labels move with their text).
"""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

from docutils import nodes

OLD_PAGES = {
    "notebooks/ch05b_beyond_one_level": "notebooks/ch06_beyond_one_level",
    "notebooks/ch06_when_recomputation_lies": "notebooks/ch08_when_recomputation_lies",
    "notebooks/ch07_torch_checkpoint": "notebooks/ch09_torch_checkpoint",
    "notebooks/ch08_api_in_depth": "notebooks/ch10_api_in_depth",
    "notebooks/ch09_transformer_activations": "notebooks/ch11_transformer_activations",
    "notebooks/ch10_selective_recomputation": "notebooks/ch12_selective_recomputation",
    "notebooks/ch11_logits_wall": "notebooks/ch13_logits_wall",
    "notebooks/ch12_cost_in_time": "notebooks/ch14_cost_in_time",
    "notebooks/ch12b_memory_did_not_go_down": "notebooks/ch15_memory_did_not_go_down",
    "notebooks/ch13_hugging_face": "notebooks/ch16_hugging_face",
    "notebooks/ch14_beyond_one_device": "notebooks/ch17_beyond_one_device",
    "notebooks/ch15_related_techniques": "notebooks/ch19_related_techniques",
    "notebooks/ch16_applications": "notebooks/ch20_applications",
    "notebooks/ch17_jax": "notebooks/ch21_jax",
    "notebooks/ch18_memory_calculator": "notebooks/ch22_memory_formula",
    "notebooks/ch22_memory_calculator": "notebooks/ch22_memory_formula",
}
"""Old page (docname) -> the page that holds its content now."""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Moved: {title}</title>
<meta http-equiv="refresh" content="0; url={url}">
<link rel="canonical" href="{url}">
</head><body>
<p>This chapter has a new number and address: <a href="{url}">{title}</a>.</p>
</body></html>
"""


def redirect_page(old: str, new: str, title: str) -> str:
    """The HTML of the forwarding page written at ``old``.html, pointing at ``new``.html
    by a path relative to the old page (the book works offline, from files)."""
    url = os.path.relpath(f"{new}.html", os.path.dirname(old) or ".")
    return PAGE.format(url=html.escape(url), title=html.escape(title))


def write_old_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for old, new in OLD_PAGES.items():
        if new not in app.env.all_docs:
            continue  # a partial book (tests build one): tests/test_old_pages.py checks
            # that every target is in the real book's table of contents
        if old in app.env.all_docs:
            continue  # the old name is a page again: never overwrite it
        title = app.env.titles[new].astext() if new in app.env.titles else new
        target = outdir / f"{old}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redirect_page(old, new, title))


CONTINUATION = re.compile(r"^(?P<folder>.*/)?ch(?P<number>\d+)b_[^/]*$")


def continuations_of(docname: str, docnames) -> list[str]:
    """The continuation pages (``chNNb_*``, same folder and number) of the chapter page
    ``docname`` (``notebooks/chNN_*``), sorted; empty for any other page."""
    match = re.match(r"^(?P<folder>.*/)?ch(?P<number>\d+)_[^/]*$", docname)
    if match is None:
        return []
    found = []
    for other in docnames:
        cont = CONTINUATION.match(other)
        if cont and cont["number"] == match["number"] and cont["folder"] == match["folder"]:
            found.append(other)
    return sorted(found)


def element_ids(doctree) -> set[str]:
    """Every HTML id a page's doctree gives its elements."""
    return {ident for node in doctree.findall(nodes.Element) for ident in node.get("ids", [])}


def moved_ids(here: set[str], moved_to: dict[str, set[str]]) -> dict[str, str]:
    """``{id: page}`` for every id on a continuation page that this page no longer has:
    ``moved_to`` maps each continuation page's file name (``ch04b_x.html``) to its ids.
    An id on this page stays here; one on two continuations goes to the first."""
    forward = {}
    for page in sorted(moved_to):
        for ident in sorted(moved_to[page] - here):
            forward.setdefault(ident, page)
    return forward


FORWARD_JS = """<script>/* ids that moved to this chapter's continuation page */
(function () {{
  var moved = {moved};
  function go() {{
    var id = decodeURIComponent(location.hash.slice(1));
    if (id && !document.getElementById(id) && moved.hasOwnProperty(id)) {{
      location.replace(moved[id] + "#" + encodeURIComponent(id));
    }}
  }}
  go();
  window.addEventListener("hashchange", go);
}})();
</script>
"""


def forward_script(forward: dict[str, str]) -> str:
    """The ``<script>`` that sends an old anchor on to the page its id moved to ("" when
    nothing moved). ``</`` cannot occur in it: ids and file names are escaped by json."""
    if not forward:
        return ""
    return FORWARD_JS.format(moved=json.dumps(forward, sort_keys=True).replace("</", "<\\/"))


def _forward_moved_anchors(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context:
        return
    pages = continuations_of(pagename, app.env.all_docs)
    if not pages:
        return
    moved_to = {os.path.relpath(f"{page}.html", os.path.dirname(pagename) or "."):
                element_ids(app.env.get_doctree(page)) for page in pages}
    context["body"] += forward_script(moved_ids(element_ids(doctree), moved_to))


def setup(app):
    app.connect("build-finished", write_old_pages)
    app.connect("html-page-context", _forward_moved_anchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
