"""book/_ext/old_pages.py: every old chapter address forwards to a page that exists."""
from __future__ import annotations

import re
import sys
from types import SimpleNamespace

import pytest

from bookpaths import ROOT, toc_files

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import old_pages  # noqa: E402


def test_every_target_is_in_the_table_of_contents():
    pages = set(toc_files())
    missing = {old: new for old, new in old_pages.OLD_PAGES.items() if new not in pages}
    assert not missing, f"old addresses forward to pages the book does not have: {missing}"
    assert not set(old_pages.OLD_PAGES) & pages, "an old address is a page again"


def test_forwarding_page_is_relative_and_escaped():
    page = old_pages.redirect_page("notebooks/ch05b_x", "notebooks/ch06_y", "6. A & B")
    assert 'url=ch06_y.html"' in page and "6. A &amp; B" in page


def test_build_writes_the_pages(tmp_path):
    env = SimpleNamespace(all_docs={new: 0 for new in old_pages.OLD_PAGES.values()},
                          titles={})
    app = SimpleNamespace(outdir=str(tmp_path), builder=SimpleNamespace(format="html"),
                          env=env)
    old_pages.write_old_pages(app, None)
    for old, new in old_pages.OLD_PAGES.items():
        text = (tmp_path / f"{old}.html").read_text()
        target = re.search(r'url=([^"]+)"', text).group(1)
        assert (tmp_path / old).parent.joinpath(target) == tmp_path / f"{new}.html"


# --- A chapter split in two: old anchors follow their text to the continuation page --------

def test_continuations_of_a_chapter_page():
    docs = ["notebooks/ch04_sqrt_trick", "notebooks/ch04b_sqrt_rule", "notebooks/ch05_x",
            "notebooks/ch14b_other", "book/intro"]
    assert old_pages.continuations_of("notebooks/ch04_sqrt_trick", docs) == [
        "notebooks/ch04b_sqrt_rule"]
    assert old_pages.continuations_of("notebooks/ch05_x", docs) == []
    assert old_pages.continuations_of("notebooks/ch04b_sqrt_rule", docs) == []
    assert old_pages.continuations_of("book/intro", docs) == []


def test_moved_ids_are_those_the_chapter_page_lost():
    here = {"ch04", "the-idea", "ch04-idea", "exercises"}
    moved_to = {"ch04b_sqrt_rule.html": {"ch04b", "the-theorem", "ch04-theorem", "exercises"}}
    assert old_pages.moved_ids(here, moved_to) == {
        "ch04b": "ch04b_sqrt_rule.html", "ch04-theorem": "ch04b_sqrt_rule.html",
        "the-theorem": "ch04b_sqrt_rule.html"}
    assert old_pages.moved_ids(here, {}) == {}


def test_forward_script_carries_the_map_and_cannot_close_its_tag():
    assert old_pages.forward_script({}) == ""
    script = old_pages.forward_script({"the-theorem": "ch04b_sqrt_rule.html",
                                       "x</script>": "y.html"})
    body = script.removeprefix("<script>").removesuffix("</script>\n")
    assert "</" not in body
    assert '"the-theorem": "ch04b_sqrt_rule.html"' in script
    assert "location.replace" in script and "getElementById" in script


@pytest.mark.book  # runs after the build (make test's phase 5)
def test_every_moved_anchor_of_the_built_book_is_forwarded():
    """In the built book, each chapter page with a continuation forwards every id its
    continuation has and it lacks, and no id it still has."""
    import json

    from bookpaths import HTML, continued_chapter, continuations

    pages = list(continuations().values())
    if not pages:
        pytest.skip("no chapter goes on on a continuation page")
    assert (HTML / "notebooks").is_dir(), "the book is not built (make html)"
    for cont in pages:
        parent = continued_chapter(cont)
        html = (HTML / "notebooks" / f"{parent.stem}.html").read_text()
        cont_html = (HTML / "notebooks" / f"{cont.stem}.html").read_text()
        match = re.search(r"var moved = (\{.*?\});", html)
        assert match, f"{parent.stem}.html has no forwarding script for {cont.stem}"
        moved = json.loads(match.group(1))
        here = set(re.findall(r'\sid="([^"]+)"', html))
        there = set(re.findall(r'\sid="([^"]+)"', cont_html))
        assert not set(moved) & here, f"forwards ids still on the page: {set(moved) & here}"
        labels = set(re.findall(r"\(([a-z0-9-]+)\)=", cont.read_text()))
        assert labels and labels <= there, f"{cont.stem}: labels missing from its page"
        missing = sorted((there - here) - set(moved))
        assert not missing, f"{parent.stem}.html does not forward {missing}"
        assert set(moved.values()) == {f"{cont.stem}.html"}
