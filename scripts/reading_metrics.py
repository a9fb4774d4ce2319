"""What a reader of the HTML book sees of each notebook, counted from the notebooks' JSON
(the numbers to compare before and after a change to the pages). `make metrics` runs it.

Per notebook and in total:

- ``code``: visible code lines (non-blank source lines of cells not tagged remove-cell,
  remove-input, hide-input or hide-cell; collapsed cells are opened on purpose);
- ``plumbing``: of those, lines that call ``glue(`` or ``record(``, start with
  ``assert``, or carry an ``NBVAL_`` marker (also counted one by one: ``glue``,
  ``asserts``, ``record``, ``nbval``);
- ``long_code``: visible code lines over 79 columns; ``long_out``: visible text-output
  lines over 88 columns (streams, and text/plain results without an HTML or image form);
- ``clipped_cells``: cells with a long visible code line or a long output line (they
  scroll sideways at 1280 px);
- figures by format: ``png_1x`` (PNG not stored at 2x its shown width), ``png_2x``,
  ``svg``; ``described``: figures whose cell has a caption and alt text;
- ``open_includes``: ``literalinclude`` directives outside a dropdown;
- ``words``: words of prose (Markdown outside code fences and directive options).

Usage: python scripts/reading_metrics.py [--json] [--goals] [NOTEBOOK ...]
       (default: notebooks/*.ipynb; --goals exits 1 unless plumbing, long lines, clipped
       cells and 1x PNGs are all zero and every figure is described)
"""
from __future__ import annotations

import argparse
import base64
import json
import re
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE_HIDDEN = {"remove-cell", "remove_cell", "remove-input", "remove_input",
                 "hide-input", "hide_input", "hide-cell", "hide_cell"}
OUTPUT_HIDDEN = {"remove-cell", "remove_cell", "remove-output", "remove_output",
                 "hide-output", "hide_output", "hide-cell", "hide_cell"}
RICH = ("text/html", "image/png", "image/svg+xml", "text/markdown", "text/latex")
KEYS = ["code", "plumbing", "glue", "asserts", "record", "nbval", "long_code", "long_out",
        "clipped_cells", "png_1x", "png_2x", "svg", "described", "open_includes", "words"]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def png_width(data) -> int:
    raw = base64.b64decode(_text(data)[:200] + "=" * (-len(_text(data)[:200]) % 4))
    return struct.unpack(">I", raw[16:20])[0] if raw[:8] == b"\x89PNG\r\n\x1a\n" else 0


def output_lines(cell: dict) -> list[str]:
    lines = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            lines += _text(out.get("text")).splitlines()
        elif out.get("output_type") in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "scrapbook" in out.get("metadata", {}) or any(k in data for k in RICH):
                continue
            lines += _text(data.get("text/plain")).splitlines()
    return lines


def prose_words(markdown: str) -> int:
    words, fence = 0, None
    for line in markdown.splitlines():
        stripped = line.strip()
        marker = re.match(r"^(`{3,}|~{3,})", stripped)
        if fence:
            if marker and stripped.startswith(fence):
                fence = None
            continue
        if marker and not stripped.startswith(("```{exercise", "```{solution", "```{note",
                                                "```{admonition", "```{dropdown")):
            fence = marker.group(1)
            continue
        if stripped.startswith((":", "(")) and (stripped.startswith(":") or
                                                 stripped.endswith(")=")):
            continue
        words += len(re.findall(r"[A-Za-z0-9][\w'’.-]*", re.sub(r"`[^`]*`", "", line)))
    return words


def open_includes(markdown: str) -> int:
    count, depth = 0, 0
    for line in markdown.splitlines():
        s = line.strip()
        if re.match(r"^(:{3,}|`{3,})\{(dropdown|toggle)", s):
            depth += 1
        elif re.match(r"^(:{3,}|`{3,})\s*$", s) and depth:
            depth -= 1
        elif "{literalinclude}" in s and not depth:
            count += 1
    return count


def measure(path: Path) -> dict[str, int]:
    nb = json.loads(path.read_text())
    m = dict.fromkeys(KEYS, 0)
    for cell in nb["cells"]:
        source = _text(cell.get("source"))
        if cell["cell_type"] == "markdown":
            m["words"] += prose_words(source)
            m["open_includes"] += open_includes(source)
            continue
        if cell["cell_type"] != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        clipped = False
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/svg+xml" in data:
                m["svg"] += 1
            elif "image/png" in data:
                shown = out.get("metadata", {}).get("image/png", {}).get("width")
                m["png_2x" if shown and png_width(data["image/png"]) >= 2 * shown - 1
                  else "png_1x"] += 1
            else:
                continue
            mystnb = cell.get("metadata", {}).get("mystnb", {})
            m["described"] += bool(mystnb.get("figure", {}).get("caption")
                                   and mystnb.get("image", {}).get("alt"))
        if not tags & OUTPUT_HIDDEN:
            long_out = sum(len(line) > 88 for line in output_lines(cell))
            m["long_out"] += long_out
            clipped |= bool(long_out)
        if not tags & SOURCE_HIDDEN:
            for line in source.splitlines():
                s = line.strip()
                if not s:
                    continue
                m["code"] += 1
                glue = bool(re.search(r"\bglue\(", s))
                record = bool(re.search(r"\brecord\(", s))
                asserts = s.startswith("assert ")
                nbval = "NBVAL_" in s
                m["glue"] += glue
                m["record"] += record
                m["asserts"] += asserts
                m["nbval"] += nbval
                m["plumbing"] += glue or record or asserts or nbval
                if len(line) > 79:
                    m["long_code"] += 1
                    clipped = True
        m["clipped_cells"] += clipped
    return m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--goals", action="store_true",
                        help="exit 1 unless the issue's goals are met")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    rows = {p.name: measure(p) for p in paths}
    total = {k: sum(r[k] for r in rows.values()) for k in KEYS}
    if args.json:
        print(json.dumps({"notebooks": rows, "total": total}, indent=1))
    else:
        width = max(len(n) for n in rows) if rows else 10
        print("notebook".ljust(width), *(k.rjust(len(k)) for k in KEYS))
        for name, r in list(rows.items()) + [("total", total)]:
            print(name.ljust(width), *(str(r[k]).rjust(len(k)) for k in KEYS))
        no_figure = [n.split("_")[0] for n, r in rows.items()
                     if r["png_1x"] + r["png_2x"] + r["svg"] == 0]
        print(f"chapters without a figure: {' '.join(no_figure) or 'none'}")
    if args.goals:
        figures = total["png_1x"] + total["png_2x"] + total["svg"]
        over = [k for k in ("glue", "record", "nbval", "long_code", "long_out",
                            "clipped_cells", "png_1x") if total[k]]
        over += ["asserts"] * (any(r["asserts"] > 2 for r in rows.values()))
        over += ["undescribed figures"] * (total["described"] < figures)
        if over:
            print(f"goals not met: {', '.join(over)}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
