"""The built HTML: every notebook page exists and has a working Colab launch link."""
from __future__ import annotations

import re

import pytest

from bookpaths import HTML, config, notebook_paths

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
