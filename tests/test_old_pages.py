"""book/_ext/old_pages.py: every old chapter address forwards to a page that exists."""
from __future__ import annotations

import re
import sys
from types import SimpleNamespace

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
