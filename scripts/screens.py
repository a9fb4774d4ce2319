"""A screenshot tour of the built book, for reviewing layout: `make screens`.

For every page of the table of contents it writes, under _build/screens/ (not committed):

- ``<page>-1280-top.png``: the first screen at 1280 x 900 px (what a reader sees first);
- ``<page>-1280-mid.png``: one screen from the middle of the page at 1280 px;
- ``<page>-390-top.png``: the first screen on a phone, 390 x 844 px;

and ``index.html``, a contact sheet of all of them in reading order.

``--metrics`` takes no screenshots: it prints, per page and in total, what
tests/test_browser.py measures at 1280 px and 390 px (squashed figures, words split in
table cells, wrapped code blocks, visible code lines and cells over 25 lines, page
height, bytes a first visit loads), and with ``--json FILE`` writes them there. The book must be
built first (`make book`, or `python scripts/build_book.py --stored-outputs`); the
pages are served from _build/html on localhost and opened in Debian's headless Chromium
(scripts/ensure_chromium.sh), the same browser tests/test_browser.py uses.

Usage: python scripts/screens.py [--html DIR] [--out DIR] [PAGE ...]
       (PAGE: a toc entry such as notebooks/ch04_sqrt_trick; default: every page)
"""
from __future__ import annotations

import argparse
import functools
import html
import json
import http.server
import shutil
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from bookpaths import toc_files  # noqa: E402

SHOTS = (("1280-top", 1280, 900, "top"), ("1280-mid", 1280, 900, "mid"),
         ("390-top", 390, 844, "top"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def shot_name(docname: str, label: str) -> str:
    return f"{docname.replace('/', '__')}-{label}.png"


def take(browser, url: str, docname: str, out: Path) -> list[str]:
    """The three screenshots of one page; their file names."""
    names = []
    for label, width, height, where in SHOTS:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{url}/{docname}.html", wait_until="networkidle")
        if where == "mid":
            page.evaluate("() => window.scrollTo(0, Math.max(0, "
                          "(document.documentElement.scrollHeight - innerHeight) / 2))")
        page.wait_for_timeout(150)
        name = shot_name(docname, label)
        page.screenshot(path=str(out / name))
        page.close()
        names.append(name)
    return names


WEIGHT_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  return (nav ? nav.encodedBodySize : 0) + res.reduce((t, r) => t + (r.encodedBodySize || 0), 0);
}"""


def measure(browser, url: str, docname: str) -> dict:
    """READING_JS at 1280 px and 390 px, and the bytes the page loaded."""
    from test_browser import LABELS_JS, READING_JS, WIDTHS

    from bookkit.figures import SMALLEST_TEXT_KEY

    row = {"page": docname}
    for label, (width, height) in (("1280", WIDTHS["desktop"]), ("390", WIDTHS["phone"])):
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{url}/{docname}.html", wait_until="load")
        page.wait_for_timeout(150)
        m = page.evaluate(READING_JS)
        if label == "1280":
            row.update(weight_kb=round(page.evaluate(WEIGHT_JS) / 1024),
                       code_lines=m["visibleCodeLines"], cells_over_25=len(m["longCells"]))
        px = [f["px"] for f in page.evaluate(LABELS_JS, SMALLEST_TEXT_KEY) if f["px"]]
        row[f"label_px_{label}"] = round(min(px), 1) if px else None
        row.update({f"height_{label}": m["pageHeight"], f"squashed_{label}": len(m["squashed"]),
                    f"splits_{label}": m["nSplits"], f"wrapped_{label}": len(m["wrapped"])})
        page.close()
    return row


TOTALS = ("code_lines", "cells_over_25", "squashed_1280", "squashed_390", "splits_1280",
          "splits_390", "wrapped_1280", "wrapped_390")


def print_metrics(rows: list[dict]) -> None:
    keys = [k for k in rows[0] if k != "page"]
    print("page".ljust(44) + " ".join(k.rjust(13) for k in keys))
    for row in rows:
        print(row["page"][-44:].ljust(44) + " ".join(str(row[k]).rjust(13) for k in keys))
    print("total: " + ", ".join(f"{k} {sum(r[k] for r in rows)}" for k in TOTALS))
    heights = sorted(r["height_1280"] for r in rows)
    weights = sorted(r["weight_kb"] for r in rows)
    labels = [r["label_px_390"] for r in rows if r["label_px_390"]]
    if labels:
        print(f"smallest figure label at 390 px: {min(labels)} px (median page "
              f"{sorted(labels)[len(labels) // 2]} px)")
    print(f"height at 1280 px: median {heights[len(heights) // 2]} px, max {heights[-1]} px; "
          f"weight: median {weights[len(weights) // 2]} KB, max {weights[-1]} KB")


def contact_sheet(rows: list[tuple[str, list[str]]]) -> str:
    cells = "\n".join(
        f"<h2>{html.escape(doc)}</h2><div class='row'>" +
        "".join(f"<a href='{n}'><img src='{n}' alt='{html.escape(doc)} {n}'></a>"
                for n in names) + "</div>"
        for doc, names in rows)
    return ("<!doctype html><meta charset='utf-8'><title>Screens</title><style>"
            "body{font-family:sans-serif;margin:1em}.row{display:flex;gap:8px;"
            "align-items:flex-start}.row img{height:300px;border:1px solid #ccc}"
            f"</style><h1>Screenshot tour ({len(rows)} pages)</h1>{cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", help="toc entries (default: all)")
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "screens")
    parser.add_argument("--metrics", action="store_true",
                        help="print the browser test's measurements, take no screenshots")
    parser.add_argument("--json", type=Path, help="with --metrics: also write them here")
    args = parser.parse_args(argv)
    if not (args.html / "index.html").is_file():
        print(f"screens: {args.html} has no built book; run `make book` first", file=sys.stderr)
        return 2
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screens: chromium is missing (scripts/ensure_chromium.sh installs it)",
              file=sys.stderr)
        return 2
    docnames = args.pages or toc_files()
    missing = [d for d in docnames if not (args.html / f"{d}.html").is_file()]
    if missing:
        print(f"screens: not built: {missing}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    httpd, url = serve(args.html)
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            for docname in docnames:
                if args.metrics:
                    rows.append(measure(browser, url, docname))
                    continue
                rows.append((docname, take(browser, url, docname, args.out)))
                print(f"screens: {docname}", flush=True)
            browser.close()
    finally:
        httpd.shutdown()
    if args.metrics:
        print_metrics(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
        return 0
    (args.out / "index.html").write_text(contact_sheet(rows))
    print(f"screens: {3 * len(rows)} screenshots of {len(rows)} pages in "
          f"{args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}/"
          f" (open index.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
