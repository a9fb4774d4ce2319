"""The built HTML book in headless Chromium: equations are typeset by the MathJax copy
served from the book itself, and no request leaves localhost."""
from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from bookpaths import HTML, ROOT

pytestmark = pytest.mark.book

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INTRO = "book/intro.html"
SCREENSHOTS = ROOT / "_build" / "screenshots"


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").is_file():
        pytest.fail("_build/html is missing: run `make book` first (make test does)")
    handler = functools.partial(QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM, "Chromium not found: install Debian's `chromium` (.ci/run does)"
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        yield browser
        browser.close()


def pages_to_check() -> list[str]:
    """The intro and the first built notebook page that holds equations."""
    with_math = [p.relative_to(HTML).as_posix() for p in sorted(HTML.glob("notebooks/*.html"))
                 if 'class="math' in p.read_text()]
    return [INTRO] + with_math[:1]


def test_a_notebook_page_with_equations_is_checked():
    assert len(pages_to_check()) == 2, "no built notebook page holds equations to check"


@pytest.mark.parametrize("page_path", pages_to_check())
def test_page_typesets_math_offline(page_path, server, browser):
    requests: list[str] = []
    page = browser.new_page()
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{server}/{page_path}", wait_until="networkidle")
    # MathJax 3 replaces each $...$ / $$...$$ by an <mjx-container> element.
    page.wait_for_selector("mjx-container", timeout=20_000)
    n_typeset = page.locator("mjx-container").count()
    leftover = page.evaluate(
        "() => Array.from(document.querySelectorAll('.math')).filter("
        "e => !e.querySelector('mjx-container')).length")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / (Path(page_path).stem + ".png")), full_page=False)
    page.close()

    assert n_typeset > 0
    assert leftover == 0, f"{leftover} math elements on {page_path} were not typeset"
    hosts = {urlparse(u).hostname for u in requests if not u.startswith(("data:", "blob:"))}
    assert hosts == {"127.0.0.1"}, f"{page_path} requested other hosts: {sorted(hosts)}"
    assert any("/_static/mathjax/" in u for u in requests), "MathJax was not loaded locally"
