"""The built HTML book in headless Chromium.

- Equations are typeset by the MathJax copy served from the book itself, and no request
  leaves localhost.
- Every page of the table of contents, at 1280 px and at 390 px: no console
  error; one search box; at 1280 px no code cell, output, table or display equation
  scrolls sideways or is cut off; every figure is SVG or stored at 2x or more and has alt
  text; at 390 px the page itself never scrolls sideways.
- On the calculator's page the total comes before its term table.

`make screens` (scripts/screens.py) takes the screenshots contributors review.
"""
from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from bookpaths import HTML, ROOT, toc_files

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


# --- Every page, at a desktop and a phone width ---------------------------------------

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}

LAYOUT_JS = """() => {
  const article = document.querySelector('.bd-article') || document.body;
  // Closed <details> keep layout boxes in Chromium; what they hide is not on the page.
  const shown = (e) => e.getClientRects().length > 0 && e.clientWidth > 0 &&
                       !e.closest('details:not([open])');
  const describe = (e) => {
    const cls = (e.className && e.className.baseVal === undefined) ? e.className : '';
    const text = (e.innerText || e.textContent || '').trim().split('\\n')[0].slice(0, 60);
    return `${e.tagName.toLowerCase()}.${String(cls).split(' ').slice(0, 2).join('.')}` +
           ` (${e.scrollWidth} > ${e.clientWidth} px): ${JSON.stringify(text)}`;
  };
  // Anything in the article that clips or scrolls its content sideways.
  const clipped = [];
  for (const e of article.querySelectorAll('*')) {
    if (!shown(e)) continue;
    const ox = getComputedStyle(e).overflowX;
    if (!['auto', 'scroll', 'hidden', 'clip'].includes(ox)) continue;
    if (e.scrollWidth > e.clientWidth + 1) clipped.push(describe(e));
  }
  // A table (or wide block) wider than the article column.
  const column = article.clientWidth;
  for (const e of article.querySelectorAll('table, pre, mjx-container[display="true"]')) {
    if (shown(e) && e.getBoundingClientRect().width > column + 1) clipped.push(describe(e));
  }
  const figures = [];
  for (const img of article.querySelectorAll('img')) {
    const src = img.currentSrc || img.src || '';
    const alt = (img.getAttribute('alt') || '').trim();
    const svg = /\\.svg($|\\?)/i.test(src) || src.startsWith('data:image/svg');
    const rect = img.getBoundingClientRect();
    figures.push({src: src.split('/').pop().slice(0, 60), alt, svg,
                  natural: img.naturalWidth, shown: Math.round(rect.width)});
  }
  const searches = Array.from(document.querySelectorAll(
      '.search-button-field, .search-button, form.bd-search'))
    .filter(e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden'
                 && e.getBoundingClientRect().width > 0).length;
  const doc = document.documentElement;
  return {clipped, figures, searches, pageWidth: doc.scrollWidth, viewport: window.innerWidth};
}"""

CALCULATOR_JS = """() => {
  const root = document.querySelector('.memcalc');
  if (!root) return null;
  const shown = (e) => e && e.getClientRects().length > 0;
  const total = Array.from(root.querySelectorAll(
      '[data-memcalc-total], .memcalc-headline, .memcalc-summary, tr.memcalc-total')).find(shown);
  const term = Array.from(root.querySelectorAll('tr.memcalc-term')).find(shown);
  return {total: total ? total.getBoundingClientRect().top + window.scrollY : null,
          term: term ? term.getBoundingClientRect().top + window.scrollY : null};
}"""


def toc_pages() -> list[str]:
    """Every page of the table of contents, as its path under _build/html."""
    return [f"{docname}.html" for docname in toc_files()]


def visit(browser, server, page_path: str, width: str):
    """Open a page at one width, wait for MathJax; (page, console errors)."""
    w, h = WIDTHS[width]
    page = browser.new_page(viewport={"width": w, "height": h})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # "load": the page and its images and scripts are in (every file is local; waiting
    # for the network to stay idle half a second per page bought nothing).
    response = page.goto(f"{server}/{page_path}", wait_until="load")
    assert response is not None and response.ok, f"{page_path}: not built ({response})"
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.wait_for_timeout(100)
    return page, errors


def figure_problems(figures: list[dict]) -> list[str]:
    """Figures without alt text, or raster figures stored at less than 2x their size."""
    problems = []
    for f in figures:
        if not f["alt"]:
            problems.append(f"{f['src']}: no alt text")
        if not f["svg"] and f["shown"] > 0 and f["natural"] < 2 * f["shown"] - 1:
            problems.append(f"{f['src']}: {f['natural']} px stored for {f['shown']} px "
                            f"shown (less than 2x: store PNG at 2x or SVG)")
    return problems


def test_figure_problems_finds_blurry_and_undescribed_figures():
    sharp = {"src": "a.png", "alt": "bars", "svg": False, "natural": 1400, "shown": 700}
    assert figure_problems([sharp]) == []
    assert figure_problems([dict(sharp, natural=700)])
    assert figure_problems([dict(sharp, alt="")])
    assert figure_problems([dict(sharp, svg=True, natural=0)]) == []


def test_every_toc_page_is_checked():
    assert len(toc_pages()) >= 25 and "book/intro.html" in toc_pages()


@pytest.mark.parametrize("page_path", toc_pages())
def test_page_reads_at_1280_and_390_px(page_path, server, browser):
    """One load per page: read at 1280 px, then the window narrowed to 390 px (the
    theme's layout is CSS media queries, which apply on resize as on load)."""
    page, errors = visit(browser, server, page_path, "desktop")
    layout = page.evaluate(LAYOUT_JS)
    calculator = page.evaluate(CALCULATOR_JS)
    problems = [f"console error: {e[:200]}" for e in errors]
    problems += [f"scrolls sideways or is cut off: {c}" for c in layout["clipped"]]
    problems += figure_problems(layout["figures"])
    if layout["searches"] != 1:
        problems.append(f"{layout['searches']} search boxes shown (one expected)")
    if calculator and calculator["term"] is not None:
        if calculator["total"] is None or calculator["total"] > calculator["term"]:
            problems.append("the calculator's total comes after its term table (show the "
                            "total first, the term table in a dropdown)")
    seen = len(errors)
    w, h = WIDTHS["phone"]
    page.set_viewport_size({"width": w, "height": h})
    page.wait_for_timeout(100)
    phone = page.evaluate(LAYOUT_JS)
    page.close()
    if phone["viewport"] != w:
        problems.append(f"at 390 px: the window did not narrow ({phone['viewport']} px)")
    if phone["pageWidth"] > phone["viewport"] + 1:
        problems.append(f"at 390 px: the page scrolls sideways: {phone['pageWidth']} px wide "
                        f"in a {phone['viewport']} px viewport")
    if phone["searches"] != 1:
        problems.append(f"at 390 px: {phone['searches']} search boxes shown (one expected)")
    problems += [f"at 390 px, console error: {e[:200]}" for e in errors[seen:]]
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)
