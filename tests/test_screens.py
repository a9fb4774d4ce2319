"""`make screens` (scripts/screens.py): three screenshots per page, at the stated sizes,
and a contact sheet that links them."""
from __future__ import annotations

import shutil

import pytest

from bookpaths import HTML, ROOT, load_module

pytestmark = pytest.mark.book

screens = load_module(ROOT / "scripts" / "screens.py")


def test_tour_of_one_page(tmp_path):
    if not (HTML / "index.html").is_file():
        pytest.fail("_build/html is missing: run `make book` first (make test does)")
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.fail("Chromium not found: install Debian's `chromium`")
    assert screens.main(["--out", str(tmp_path), "book/intro"]) == 0
    from PIL import Image

    sizes = {}
    for label, width, height, _ in screens.SHOTS:
        with Image.open(tmp_path / screens.shot_name("book/intro", label)) as image:
            sizes[label] = image.size
    assert sizes == {"1280-top": (1280, 900), "1280-mid": (1280, 900), "390-top": (390, 844)}
    sheet = (tmp_path / "index.html").read_text()
    assert all(screens.shot_name("book/intro", s[0]) in sheet for s in screens.SHOTS)


def test_missing_pages_are_refused(tmp_path, capsys):
    assert screens.main(["--out", str(tmp_path), "notebooks/ch99_nowhere"]) == 2
    assert "not built" in capsys.readouterr().err


def test_metrics_of_one_page(tmp_path, capsys):
    """--metrics: the browser test's measurements for a page, printed and as JSON."""
    if not (HTML / "index.html").is_file():
        pytest.fail("_build/html is missing: run `make book` first (make test does)")
    out = tmp_path / "m.json"
    assert screens.main(["--metrics", "--json", str(out), "notebooks/ch04_sqrt_trick"]) == 0
    import json

    (row,) = json.loads(out.read_text())
    assert row["page"] == "notebooks/ch04_sqrt_trick" and row["weight_kb"] > 0
    assert row["height_390"] > row["height_1280"] > 900 and row["code_lines"] > 0
    assert {"squashed_390", "splits_390", "wrapped_390", "cells_over_25"} <= set(row)
    assert "total: code_lines" in capsys.readouterr().out
