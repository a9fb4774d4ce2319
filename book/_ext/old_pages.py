"""Keep the book's old page addresses working after the chapters were renumbered.

Chapters were numbered 05b and 12b before they were numbered consecutively, and every
chapter from the old 5b on moved. A link to an old page (a bookmark, a citation, a
Colab notebook's "view in the book") lands on a small page that forwards the reader to
the chapter's new address. tests/test_old_pages.py checks that every target is a page of
the book, so a later rename cannot strand a link.
"""
from __future__ import annotations

import html
import os
from pathlib import Path

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


def setup(app):
    app.connect("build-finished", write_old_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
