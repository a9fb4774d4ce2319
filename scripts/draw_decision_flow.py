"""Draw the playbook's decision flow (book/decision_flow.svg) from the data below.

The figure is plain SVG written by this script, so it renders offline in every browser
(no Mermaid, no JavaScript) and its text stays selectable. The playbook includes it;
tests/test_decision_flow.py checks that the stored file is what this script draws and
that every chapter it names exists.

Usage: python scripts/draw_decision_flow.py            (writes book/decision_flow.svg)
       python scripts/draw_decision_flow.py --check    (exit 1 if the stored file is stale)
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "book" / "decision_flow.svg"

WIDTH = 960
MARGIN = 16
LINE = 16            # px between text lines
PAD = 10             # px of padding inside a box
FONT = "font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:12px"
COLORS = {           # fill, stroke: light fills, dark strokes, readable in print
    "measure": ("#e8f0fe", "#1a56b0"),
    "question": ("#fff4d6", "#a66a00"),
    "tool": ("#e9f6ec", "#1e7b34"),
    "note": ("#f3f3f3", "#555555"),
}

START = ["Measure one training step without changing anything:",
         "peak allocated memory by category (weights, gradients, optimizer state,",
         "activations, logits), tokens or examples per second, does the target length fit?"]
FITS = ["Does it fit, with room to spare?"]
YES = ["Check the default: many recipes",
       "switch checkpointing on. If speed",
       "matters and memory is comfortable,",
       "try it off (ch13)."]
DOMINATES = ["What dominates the peak?"]
# (what dominates, the tools for it with the chapters that measure them)
BRANCHES = [
    ("Activations", ["Checkpoint the largest", "repeated blocks (ch07).", "Not enough: selective",
                     "policies (ch10), multi-", "level schedules (ch05),", "offload to host or",
                     "disk (ch14)."]),
    ("Logits", ["A chunked loss that", "never holds all logits", "(ch11). Checkpointing",
                "frees the room around", "them; it does not", "shrink them."]),
    ("Weights", ["Quantise the frozen", "base: 4-bit QLoRA", "(ch13). Shard them", "across devices: FSDP,",
                 "ZeRO-3 (ch14)."]),
    ("Optimizer state", ["and gradients: shard", "them with ZeRO-1/2 or", "FSDP (ch14), or train",
                         "fewer parameters with", "LoRA adapters (ch13)."]),
    ("All of it, with batch", ["Smaller micro-batches", "and gradient accumu-", "lation, mixed precision",
                               "(ch15). Never cut the", "sequence length first."]),
]
AGAIN = ["Measure again: peak memory, tokens per second, the validation curve, whether the",
         "target length fits. Spend freed memory on a larger batch or a longer sequence (ch12).",
         "If it still does not fit, the chapters of the troubleshooting table reproduce each cause."]


@dataclass
class Box:
    x: float
    y: float
    w: float
    h: float

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def bottom(self) -> float:
        return self.y + self.h


def _height(lines: list[str]) -> float:
    return 2 * PAD + LINE * len(lines) - 3


def _text(lines: list[str], box: Box, bold_first: bool = False) -> list[str]:
    out = []
    y0 = box.y + PAD + 11
    for i, line in enumerate(lines):
        weight = "font-weight:bold;" if bold_first and i == 0 else ""
        out.append(f'<text x="{box.cx:.1f}" y="{y0 + i * LINE:.1f}" text-anchor="middle" '
                   f'style="{weight}{FONT}">{escape(line)}</text>')
    return out


def _box(kind: str, lines: list[str], box: Box, bold_first: bool = False,
         shape: str = "rect") -> list[str]:
    fill, stroke = COLORS[kind]
    if shape == "diamond":  # a flattened hexagon: a decision that still holds a line of text
        x, y, w, h, k = box.x, box.y, box.w, box.h, 18
        pts = f"{x},{y + h / 2} {x + k},{y} {x + w - k},{y} {x + w},{y + h / 2} {x + w - k},{y + h} {x + k},{y + h}"
        shape_svg = f'<polygon points="{pts}" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>'
    else:
        shape_svg = (f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
                     f'rx="6" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')
    return [shape_svg] + _text(lines, box, bold_first)


def _arrow(x1, y1, x2, y2, label: str | None = None, label_dx: float = 6,
           label_dy: float = 4) -> list[str]:
    out = [f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#333" '
           f'stroke-width="1.4" marker-end="url(#arrow)"/>']
    if label:
        out.append(f'<text x="{(x1 + x2) / 2 + label_dx:.1f}" y="{(y1 + y2) / 2 + label_dy:.1f}" '
                   f'style="font-style:italic;{FONT}">{escape(label)}</text>')
    return out


def draw() -> str:
    """The SVG document, as text (deterministic: the same data gives the same bytes)."""
    body: list[str] = []
    inner = WIDTH - 2 * MARGIN
    y = MARGIN
    start = Box(MARGIN + 90, y, inner - 180, _height(START))
    body += _box("measure", START, start)
    y = start.bottom + 26
    fits = Box(WIDTH / 2 - 130, y, 260, _height(FITS) + 6)
    body += _arrow(start.cx, start.bottom, fits.cx, fits.y)
    body += _box("question", FITS, fits, shape="diamond")
    yes = Box(fits.x + fits.w + 50, fits.y + fits.h / 2 - _height(YES) / 2,
              WIDTH - MARGIN - (fits.x + fits.w + 50), _height(YES))
    body += _arrow(fits.x + fits.w, fits.y + fits.h / 2, yes.x, fits.y + fits.h / 2, "yes", -12, -8)
    body += _box("note", YES, yes)
    y = max(fits.bottom, yes.bottom) + 24
    dom = Box(WIDTH / 2 - 120, y, 240, _height(DOMINATES) + 6)
    body += _arrow(fits.cx, fits.bottom, dom.cx, dom.y, "no")
    body += _box("question", DOMINATES, dom, shape="diamond")
    gap = 12
    col_w = (inner - gap * (len(BRANCHES) - 1)) / len(BRANCHES)
    top = dom.bottom + 40
    tallest = max(_height([head] + tools) for head, tools in BRANCHES)
    branch_boxes = []
    for i, (head, tools) in enumerate(BRANCHES):
        b = Box(MARGIN + i * (col_w + gap), top, col_w, tallest)
        body += _arrow(dom.cx, dom.bottom, b.cx, b.y)
        body += _box("tool", [head] + tools, b, bold_first=True)
        branch_boxes.append(b)
    again = Box(MARGIN + 40, top + tallest + 36, inner - 80, _height(AGAIN))
    for b in branch_boxes:
        body += _arrow(b.cx, b.bottom, b.cx if MARGIN + 40 < b.cx < again.x + again.w else again.cx, again.y)
    body += _box("measure", AGAIN, again)
    height = again.bottom + MARGIN
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-labelledby="title desc">',
        "<title id=\"title\">Decision flow: what dominates memory, and which tool to reach for</title>",
        "<desc id=\"desc\">Measure a step; if it fits, check whether checkpointing is on; if not, "
        "find what dominates the peak (activations, logits, weights, optimizer state and "
        "gradients, or everything with the batch) and use the tools listed for it; then measure "
        "again.</desc>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/>'
        "</marker></defs>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height:.0f}" fill="white"/>',
    ]
    return "\n".join(head + body + ["</svg>"]) + "\n"


def chapters_named() -> set[str]:
    """Every chapter id (``ch07``) the figure's text refers to."""
    import re

    text = " ".join(START + FITS + YES + DOMINATES + AGAIN
                    + [line for head, tools in BRANCHES for line in [head] + tools])
    return set(re.findall(r"\bch\d\d[a-z]?\b", text))


def main(argv: list[str]) -> int:
    svg = draw()
    if argv == ["--check"]:
        stale = not OUTPUT.exists() or OUTPUT.read_text() != svg
        if stale:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python scripts/draw_decision_flow.py")
        return 1 if stale else 0
    if argv:
        print(__doc__)
        return 2
    OUTPUT.write_text(svg)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
