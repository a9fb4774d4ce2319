"""The built HTML book in headless Chromium.

- Every formula is MathML typeset when the book was built (book/_ext/typeset_math.py):
  on every page each one is a drawn <math> element (a non-zero box), no TeX is left,
  no page requests MathJax or anything from another host, and at 390 px every display
  equation fits its column (a long one scrolls inside its own box).
- Every page of the table of contents, at 1280 px and at 390 px: no console
  error; one search box; at 1280 px no code cell, output, table or display equation
  scrolls sideways or is cut off; every figure is SVG or stored at 2x or more and has alt
  text; at 390 px the page itself never scrolls sideways.
- On the calculator's page the total comes before its term table.
- Every page at 1280 px and 390 px reads on a phone (READING_JS measures it): every
  image within 2 % of its natural aspect ratio; no table cell breaks inside a word or a
  number; no code cell, output or listing wraps (``white-space`` and its measured line
  count) or scrolls the page; no visible code cell over ``MAX_CELL_LINES`` (25) lines
  (one idea a cell; longer goes into a helper); a search control on
  the first screen; on a chapter, its question and "What you will see" (or a figure)
  on the first screen; no display equation or box wider than its column or cut off;
  no console error, over HTTP and from ``file://``; at 390 px, the smallest text of
  every chapter figure shows at 9 CSS px or more (LABELS_JS reads its size in points
  from the PNG); a chapter page (a continuation included) is at most about 12 desktop
  screens tall at 1280 px (``MAX_SCREENS``; a longer one goes on on a continuation page,
  CONTRIBUTING.md).

`make screens` (scripts/screens.py) takes the screenshots contributors review.
"""
from __future__ import annotations

import functools
import re
import http.server
import shutil
import threading
from urllib.parse import urlparse

import pytest

from bookkit.figures import SMALLEST_TEXT_KEY
from bookpaths import HTML, toc_files

pytestmark = pytest.mark.book

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


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


def math_pages() -> list[str]:
    """The built pages of the table of contents that hold formulas."""
    return [p for p in toc_pages() if 'class="math' in (HTML / p).read_text()]


def test_pages_with_formulas_are_checked():
    assert len(math_pages()) >= 5, f"only {math_pages()} hold formulas"
    html = "".join((HTML / p).read_text() for p in math_pages())
    assert html.count("<math") >= 100, "the formulas were not typeset as MathML"


# Every formula of the article: Sphinx writes each into span.math (inline) or div.math
# (display), which book/_ext/typeset_math.py fills with <math> elements.
MATH_JS = """() => {
  const article = document.querySelector('.bd-article') || document.body;
  const hidden = (e) => !!e.closest('details:not([open])') || e.getClientRects().length == 0;
  const text = (e) => (e.textContent || '').trim().slice(0, 60);
  const problems = [];
  let formulas = 0;
  for (const f of article.querySelectorAll('span.math, div.math')) {
    formulas += 1;
    const maths = f.querySelectorAll('math');
    if (maths.length == 0) { problems.push(`not typeset: ${JSON.stringify(text(f))}`); continue; }
    if (hidden(f)) continue;            // in a closed dropdown: drawn when opened
    for (const m of maths) {
      const r = m.getBoundingClientRect();
      if (!(r.width > 0 && r.height > 0))
        problems.push(`a <math> with an empty box (${r.width} x ${r.height} px): ` +
                      JSON.stringify(text(f)));
    }
    if (f.tagName == 'DIV') {
      // A display fits its column; a line wider than that scrolls inside the box.
      const box = f.getBoundingClientRect(), column = f.parentElement.getBoundingClientRect();
      if (box.left < column.left - 1 || box.right > column.right + 1)
        problems.push(`display wider than its column (${Math.round(box.width)} > ` +
                      `${Math.round(column.width)} px): ${JSON.stringify(text(f))}`);
      const ox = getComputedStyle(f).overflowX;
      if (f.scrollWidth > f.clientWidth + 1 && !['auto', 'scroll'].includes(ox))
        problems.push(`display cut off (${f.scrollWidth} > ${f.clientWidth} px, overflow ` +
                      `${ox}): ${JSON.stringify(text(f))}`);
    }
  }
  // TeX a browser would have left as text: delimiters outside any formula.
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement.closest('pre, code, .math, math, script, style')) continue;
    const m = /\\\\\\(|\\\\\\[|\\$\\$|\\\\begin\\{|\\\\frac\\{/.exec(n.textContent);
    if (m) problems.push(`TeX left as text: ${JSON.stringify(n.textContent.trim().slice(0, 60))}`);
  }
  return {formulas, typeset: article.querySelectorAll('math').length, problems,
          mathjax: typeof window.MathJax !== 'undefined'};
}"""


def math_problems(m: dict) -> list[str]:
    """What MATH_JS measured on one page, as a list of problems."""
    problems = list(m["problems"])
    if m["mathjax"]:
        problems.append("MathJax is loaded (the math is typeset when the book is built)")
    return problems


def request_problems(urls: list[str]) -> list[str]:
    """Requests a page must not make: another host, or MathJax."""
    problems = []
    for url in urls:
        if url.startswith(("data:", "blob:")):
            continue
        if urlparse(url).hostname not in ("127.0.0.1", None):
            problems.append(f"requested another host: {url[:120]}")
        elif "mathjax" in url.lower():
            problems.append(f"requested MathJax: {url[:120]}")
    return problems


def test_request_problems_names_other_hosts_and_mathjax():
    assert request_problems(["http://127.0.0.1:8000/book/intro.html", "data:image/png,x",
                             "file:///book/_static/reader.css"]) == []
    assert request_problems(["https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"])
    assert request_problems(["http://127.0.0.1:8000/_static/mathjax/startup.js"])


GOOD_MATH = ('<p>A <span class="math notranslate nohighlight"><math><msqrt><mi>n</mi>'
             '</msqrt></math></span> rule.</p><div class="math notranslate nohighlight">'
             '<math display="block"><mfrac><mi>a</mi><mi>b</mi></mfrac></math></div>')


@pytest.mark.parametrize("body, words", [
    (GOOD_MATH, None),
    (('<details><summary>s</summary><span class="math"><math><mi>x</mi></math></span>'
      '</details>'), None),
    ('<p><span class="math notranslate nohighlight">\\(\\sqrt{n}\\)</span></p>',
     "not typeset"),
    ('<p>costs \\(\\sqrt{n}\\) bytes</p>', "TeX left as text"),
    ('<span class="math"><math style="display:inline-block;width:0"></math></span>',
     "empty box"),
    ('<div class="math" style="width:900px"><math display="block"><mi>x</mi></math></div>',
     "wider than its column"),
    (('<div class="math" style="overflow:hidden"><math display="block" style="width:900px">'
      '<mi>x</mi></math></div>'), "cut off"),
    (GOOD_MATH + '<script>window.MathJax = {};</script>', "MathJax is loaded"),
])
def test_math_js_finds_untypeset_empty_and_too_wide_formulas(body, words, browser):
    """MATH_JS itself: a correct page passes, each kind of failure is named."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.set_content(f'<!doctype html><main class="bd-article" style="width:300px">'
                     f'{body}</main>')
    problems = math_problems(page.evaluate(MATH_JS))
    page.close()
    if words is None:
        assert problems == []
    else:
        assert len(problems) == 1 and words in problems[0], problems


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
  for (const e of article.querySelectorAll('table, pre, div.math')) {
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


# A visible code cell carries one idea: at most this many lines (longer goes into a helper).
MAX_CELL_LINES = 25

READING_JS = """() => {
  const MAX_CELL_LINES = @MAX_CELL_LINES@;
  window.scrollTo(0, 0);
  const article = document.querySelector('.bd-article') || document.body;
  // A closed dropdown hides its content with a closed <details> or, for sphinx-design's
  // and the solution dropdowns, with visibility: hidden: neither is on the page.
  const shown = (e) => e.getClientRects().length > 0 && !e.closest('details:not([open])') &&
                       getComputedStyle(e).visibility !== 'hidden';
  const vh = window.innerHeight;
  const onFirstScreen = (e) => {
    if (!e || !shown(e)) return false;
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.top >= 0 && r.top < vh - 20 &&
           getComputedStyle(e).visibility !== 'hidden';
  };
  const name = (e) => (e.innerText || e.textContent || '').trim().split('\\n')[0].slice(0, 50);
  const squashed = [];
  for (const img of article.querySelectorAll('img')) {
    if (!shown(img) || !img.naturalWidth || !img.naturalHeight) continue;
    const r = img.getBoundingClientRect();
    if (r.width < 2 || r.height < 2) continue;
    const ratio = (r.width / r.height) / (img.naturalWidth / img.naturalHeight);
    if (Math.abs(ratio - 1) > 0.02)
      squashed.push(`${(img.src || '').split('/').pop().slice(0, 24)}: ` +
                    `${ratio.toFixed(2)} of its aspect ratio`);
  }
  // A word (or number) of a table cell whose letters lie on two lines.
  const splits = [];
  let nSplits = 0;
  for (const cell of article.querySelectorAll('td, th')) {
    if (!shown(cell)) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const word = /[^\\s\\-\\/\u2013\u2014]{2,}/g;
      for (let m = word.exec(node.textContent); m; m = word.exec(node.textContent)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set(Array.from(range.getClientRects())
          .filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) { nSplits += 1; if (splits.length < 6) splits.push(m[0]); }
      }
    }
  }
  // Code: every <pre> keeps its lines (white-space: pre, one rendered line per line).
  const wrapped = [], longCells = [];
  let visibleCodeLines = 0;
  for (const pre of article.querySelectorAll('pre')) {
    if (!shown(pre)) continue;
    const cs = getComputedStyle(pre);
    const lines = pre.textContent.replace(/\\n$/, '').split('\\n').length;
    const lh = parseFloat(cs.lineHeight) || 1.2 * parseFloat(cs.fontSize);
    const pad = parseFloat(cs.paddingTop) + parseFloat(cs.paddingBottom);
    const rendered = Math.round((pre.scrollHeight - pad) / lh);
    if (!['pre', 'nowrap'].includes(cs.whiteSpace) || rendered > lines)
      wrapped.push(`${name(pre)} (white-space: ${cs.whiteSpace}; ${lines} lines ` +
                   `shown as ${rendered})`);
    if (pre.closest('div.cell_input')) {
      visibleCodeLines += pre.textContent.split('\\n').filter(l => l.trim()).length;
      if (lines > MAX_CELL_LINES) longCells.push(`${name(pre)} (${lines} lines)`);
    }
  }
  // Boxes wider than the column, or cutting their content off.
  const column = article.clientWidth;
  const tooWide = [];
  for (const e of article.querySelectorAll(
      'table, pre, div.math, div.admonition, div.proof, ' +
      'figure, img, div.cell_output, div.highlight')) {
    if (!shown(e)) continue;
    const r = e.getBoundingClientRect();
    const box = article.getBoundingClientRect();
    const inScroller = e.parentElement && e.parentElement.closest(
      '.table-wrapper, .pst-scrollable-table-container, .output.text_html, ' +
      'div.admonition, div.proof, div.math, pre');
    if (!inScroller && (r.left < box.left - 20 || r.right > box.right + 20))
      tooWide.push(`${e.tagName.toLowerCase()} ${Math.round(r.width)} px: ${name(e)}`);
  }
  for (const e of article.querySelectorAll('*')) {
    if (!shown(e)) continue;
    const ox = getComputedStyle(e).overflowX;
    if (['hidden', 'clip'].includes(ox) && e.scrollWidth > e.clientWidth + 1 &&
        !e.closest('math'))
      tooWide.push(`cut off: ${e.tagName.toLowerCase()}.${String(e.className).split(' ')[0]}` +
                   ` (${e.scrollWidth} > ${e.clientWidth} px): ${name(e)}`);
  }
  const searchOnFirstScreen = Array.from(document.querySelectorAll(
      '.search-button, .search-button-field, form.bd-search')).some(onFirstScreen);
  const question = Array.from(article.querySelectorAll('strong'))
    .find(e => /\\?\\s*$/.test(e.textContent));
  const willSee = Array.from(article.querySelectorAll('.admonition-title'))
    .find(e => /What you will see/i.test(e.textContent));
  const figure = Array.from(article.querySelectorAll('img, figure, svg')).find(onFirstScreen);
  return {squashed, splits, nSplits, wrapped, longCells, visibleCodeLines, tooWide,
          searchOnFirstScreen, question: onFirstScreen(question), hasQuestion: !!question,
          willSee: onFirstScreen(willSee), figure: !!figure,
          pageHeight: document.documentElement.scrollHeight,
          pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth};
}""".replace("@MAX_CELL_LINES@", str(MAX_CELL_LINES))


LABELS_JS = """async (key) => {
  // Each chapter figure is a PNG at 2x whose tEXt chunk `key` holds the size (pt) of
  // the smallest text it draws (bookkit.figures.book_png). At 100 dpi a label of s pt
  // is s * 100/72 px at the figure's nominal width (half the PNG's): on screen it
  // scales with the width the browser gives the image.
  const article = document.querySelector('.bd-article') || document.body;
  const shown = (e) => e.getClientRects().length > 0 && !e.closest('details:not([open])');
  const smallestPt = (bytes) => {
    let pt = null;
    for (let i = 8; i + 12 <= bytes.length;) {  // after the signature: chunks
      const len = ((bytes[i] << 24) | (bytes[i + 1] << 16) | (bytes[i + 2] << 8) |
                   bytes[i + 3]) >>> 0;
      const type = String.fromCharCode(...bytes.subarray(i + 4, i + 8));
      if (type === 'tEXt') {
        const [k, v] = new TextDecoder('latin1').decode(
          bytes.subarray(i + 8, i + 8 + len)).split('\\0');
        if (k === key) pt = parseFloat(v);
      }
      if (type === 'IEND') break;
      i += 12 + len;
    }
    return pt;
  };
  const figures = [];
  for (const img of article.querySelectorAll('div.cell_output img')) {
    if (!shown(img) || !img.naturalWidth || /\\.svg/i.test(img.src)) continue;
    const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    const pt = smallestPt(bytes);
    const shownPx = img.getBoundingClientRect().width;
    figures.push({src: (img.src || '').split('/').pop().slice(0, 24), pt,
                  px: pt === null ? null : pt * 100 / 72 * shownPx / (img.naturalWidth / 2)});
  }
  return figures;
}"""

MIN_LABEL_PX = 9.0
"""Smallest text of a chapter figure, in CSS px, in a 390 px window."""


def label_problems(figures: list[dict]) -> list[str]:
    """Chapter figures (LABELS_JS) whose smallest text shows under `MIN_LABEL_PX`, or
    that carry no record of it (drawn outside the book's style)."""
    problems = []
    for f in figures:
        if f["pt"] is None:
            problems.append(f"{f['src']}: the PNG records no smallest text (draw it "
                            "with bookkit imported, so the book's style applies)")
        elif f["px"] < MIN_LABEL_PX:
            problems.append(f"{f['src']}: smallest text {f['pt']:g} pt shows at "
                            f"{f['px']:.1f} px (under {MIN_LABEL_PX:g}: larger labels or "
                            "a narrower figure)")
    return problems


def test_label_problems_finds_small_and_unrecorded_labels():
    good = {"src": "a.png", "pt": 11.0, "px": 9.2}
    assert label_problems([good]) == []
    assert "8.3 px" in label_problems([dict(good, px=8.3)])[0]
    assert "records no" in label_problems([dict(good, pt=None, px=None)])[0]


def reading_problems(m: dict, chapter: bool) -> list[str]:
    """What READING_JS measured on one page at one width, as a list of problems."""
    problems = [f"squashed figure: {s}" for s in m["squashed"]]
    if m["nSplits"]:
        problems.append(f"{m['nSplits']} words or numbers split across lines in table "
                        f"cells: {m['splits']}")
    problems += [f"code wraps: {w}" for w in m["wrapped"]]
    problems += [f"visible code cell over {MAX_CELL_LINES} lines: {c}" for c in m["longCells"]]
    problems += [f"wider than its column: {w}" for w in m["tooWide"]]
    if m["pageWidth"] > m["viewport"] + 1:
        problems.append(f"the page scrolls sideways: {m['pageWidth']} px wide in a "
                        f"{m['viewport']} px window")
    if not m["searchOnFirstScreen"]:
        problems.append("no search control on the first screen")
    if chapter and not m["question"]:
        problems.append("the chapter's question (in bold, ending in '?') is not on the "
                        "first screen")
    if chapter and not (m["willSee"] or m["figure"]):
        problems.append('neither "What you will see" nor a figure on the first screen')
    return problems


# A chapter page at 1280 px: at most about 12 screens of WIDTHS["desktop"] (the half screen
# is slack, so that a one-line edit to a page at 12 screens does not fail the build).
MAX_SCREENS = 12.5


def length_problems(page_height: int, screen_height: int) -> list[str]:
    """A chapter page taller than ``MAX_SCREENS`` screens, as a problem."""
    screens = page_height / screen_height
    if screens <= MAX_SCREENS:
        return []
    return [f"the page is {screens:.1f} screens tall at 1280 px ({page_height} px; at most "
            f"{MAX_SCREENS:g}): tighten it or go on on a continuation page (CONTRIBUTING.md)"]


def test_length_problems_names_a_long_page():
    assert length_problems(10_800, 900) == []
    assert length_problems(11_250, 900) == []
    assert "13.0 screens" in length_problems(11_700, 900)[0]


def test_reading_problems_names_each_failure():
    good = {"squashed": [], "splits": [], "nSplits": 0, "wrapped": [], "longCells": [],
            "tooWide": [], "pageWidth": 390, "viewport": 390, "searchOnFirstScreen": True,
            "question": True, "willSee": False, "figure": True}
    assert reading_problems(good, chapter=True) == []
    for key, bad, words in [("squashed", ["a.png: 0.52"], "squashed"),
                            ("nSplits", 3, "split"), ("wrapped", ["x"], "wraps"),
                            ("longCells", ["y (26 lines)"], "25 lines"),
                            ("tooWide", ["pre"], "wider"), ("pageWidth", 500, "sideways"),
                            ("searchOnFirstScreen", False, "search"),
                            ("question", False, "question"), ("figure", False, "neither")]:
        problems = reading_problems(dict(good, **{key: bad}), chapter=True)
        assert len(problems) == 1 and words in problems[0], (key, problems)
    assert reading_problems(dict(good, question=False, figure=False), chapter=False) == []


def is_chapter(page_path: str) -> bool:
    """A chapter's page: the chapter (chNN_) or its continuation page (chNNb_), which
    opens the same way (question, "What you will see" on the first screen)."""
    return re.search(r"notebooks/ch\d+b?_", page_path) is not None


def test_is_chapter_counts_continuation_pages():
    assert is_chapter("notebooks/ch04_sqrt_trick.html")
    assert is_chapter("notebooks/ch04b_sqrt_rule.html")
    assert not is_chapter("book/playbook.html")
    assert not is_chapter("book/assignments/a3_checkpoint/a3_checkpoint.html")


def toc_pages() -> list[str]:
    """Every page of the table of contents, as its path under _build/html."""
    return [f"{docname}.html" for docname in toc_files()]


def visit(browser, server, page_path: str, width: str, requests: list[str] | None = None):
    """Open a page at one width; (page, console errors). The URLs it requests are
    appended to ``requests``."""
    w, h = WIDTHS[width]
    page = browser.new_page(viewport={"width": w, "height": h})
    errors: list[str] = []
    if requests is not None:
        page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    # "load": the page and its images and scripts are in (every file is local; waiting
    # for the network to stay idle half a second per page bought nothing).
    response = page.goto(f"{server}/{page_path}", wait_until="load")
    assert response is not None and response.ok, f"{page_path}: not built ({response})"
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
    requests: list[str] = []
    page, errors = visit(browser, server, page_path, "desktop", requests)
    layout = page.evaluate(LAYOUT_JS)
    calculator = page.evaluate(CALCULATOR_JS)
    problems = [f"console error: {e[:200]}" for e in errors]
    problems += math_problems(page.evaluate(MATH_JS))
    problems += figure_problems(layout["figures"])
    if layout["searches"] != 1:
        problems.append(f"{layout['searches']} search boxes shown (one expected)")
    if calculator and calculator["term"] is not None:
        if calculator["total"] is None or calculator["total"] > calculator["term"]:
            problems.append("the calculator's total comes after its term table (show the "
                            "total first, the term table in a dropdown)")
    desktop = page.evaluate(READING_JS)
    problems += reading_problems(desktop, is_chapter(page_path))
    if is_chapter(page_path):
        problems += length_problems(desktop["pageHeight"], WIDTHS["desktop"][1])
    seen = len(errors)
    w, h = WIDTHS["phone"]
    page.set_viewport_size({"width": w, "height": h})
    page.wait_for_timeout(100)
    phone = page.evaluate(LAYOUT_JS)
    problems += [f"at 390 px: {p}" for p in
                 reading_problems(page.evaluate(READING_JS), is_chapter(page_path))]
    problems += [f"at 390 px, figure label: {p}" for p in
                 label_problems(page.evaluate(LABELS_JS, SMALLEST_TEXT_KEY))]
    problems += [f"at 390 px: {p}" for p in math_problems(page.evaluate(MATH_JS))]
    page.close()
    problems += request_problems(requests)
    if phone["viewport"] != w:
        problems.append(f"at 390 px: the window did not narrow ({phone['viewport']} px)")
    if phone["pageWidth"] > phone["viewport"] + 1:
        problems.append(f"at 390 px: the page scrolls sideways: {phone['pageWidth']} px wide "
                        f"in a {phone['viewport']} px viewport")
    if phone["searches"] != 1:
        problems.append(f"at 390 px: {phone['searches']} search boxes shown (one expected)")
    problems += [f"at 390 px, console error: {e[:200]}" for e in errors[seen:]]
    assert not problems, f"{page_path}:\n  " + "\n  ".join(problems)


# --- Opened from disk (file://), as a reader who downloaded the built book does ----

def file_url(page_path: str) -> str:
    return (HTML / page_path).resolve().as_uri()


@pytest.mark.parametrize("page_path", toc_pages())
def test_page_opened_from_disk_logs_no_error(page_path, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(file_url(page_path), wait_until="load")
    page.wait_for_timeout(100)
    problems = [f"console error: {e[:200]}" for e in errors]
    problems += math_problems(page.evaluate(MATH_JS)) + request_problems(requests)
    page.close()
    assert not problems, f"{page_path} from file://:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("how", ["http", "file"])
def test_search_results_have_snippets_and_no_console_error(how, server, browser):
    """Sphinx's search page fetches each result's page for its snippet; from file:// a
    browser refuses (a CORS error per result) unless offline_search.js answers."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    url = f"{server}/search.html" if how == "http" else file_url("search.html")
    page.goto(url + "?q=checkpoint", wait_until="load")
    page.wait_for_function(
        "() => document.querySelectorAll('#search-results li p.context').length >= 5",
        timeout=20_000)
    snippets = page.evaluate("() => Array.from(document.querySelectorAll("
                             "'#search-results li p.context')).map(p => p.innerText)")
    page.wait_for_timeout(500)
    page.close()
    assert sum("checkpoint" in s.lower() for s in snippets) >= 5, snippets[:5]
    assert not errors, f"search from {how}: {len(errors)} console errors: {errors[:3]}"


# --- A chapter split in two: an old link to a moved section lands on the new page --------

def moved_anchors() -> list[tuple[str, str, str]]:
    """(chapter page, a label that moved to its continuation, the continuation page) for
    each continuation page of the book."""
    from bookpaths import continuations, continued_chapter

    found = []
    for cont in continuations().values():
        labels = re.findall(r"\(([a-z0-9-]+)\)=", cont.read_text())
        moved = [label for label in labels if label != cont.name.split("_")[0]]
        if moved:
            found.append((f"notebooks/{continued_chapter(cont).stem}.html", moved[-1],
                          f"notebooks/{cont.stem}.html"))
    return found


@pytest.mark.parametrize("how", ["http", "file"])
def test_an_old_anchor_follows_its_section_to_the_continuation(how, server, browser):
    cases = moved_anchors()
    if not cases:
        pytest.skip("no chapter has a continuation page")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    for old_page, label, new_page in cases:
        base = f"{server}/{old_page}" if how == "http" else file_url(old_page)
        page.goto(f"{base}#{label}", wait_until="load")
        page.wait_for_url(f"**/{new_page}#{label}", timeout=10_000)
        assert page.evaluate(f"() => !!document.getElementById({label!r})"), (old_page, label)
        # an id the chapter page still has stays there
        page.goto(f"{base}#{old_page.split('/')[-1].split('_')[0]}", wait_until="load")
        page.wait_for_timeout(200)
        assert page.url.split("#")[0].endswith(old_page), page.url
    page.close()
