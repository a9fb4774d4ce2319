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
sys.path.insert(0, str(ROOT / "tests"))
from bookpaths import chapter_id as ch  # noqa: E402  the figure names chapters by slug

WIDTH = 660          # px; the book's text column shows it at about this size
MARGIN = 12
LINE = 18            # px between text lines
PAD = 9              # px of padding inside a box
FONT = "font-family:DejaVu Sans,Helvetica,Arial,sans-serif;font-size:13.5px"
COLORS = {           # fill, stroke: light fills, dark strokes, readable in print
    "measure": ("#e8f0fe", "#1a56b0"),
    "question": ("#fff4d6", "#a66a00"),
    "tool": ("#e9f6ec", "#1e7b34"),
    "note": ("#f3f3f3", "#555555"),
}

START = ["Measure one training step, changing nothing: peak",
         "allocated memory by category (weights, gradients,",
         "optimizer state, activations, logits), tokens per",
         "second, and whether the target length fits."]
FITS = ["Does it fit, with room to spare?"]
YES = ["Check the default: many", "recipes switch checkpointing",
       "on. If speed matters, try", f"it off ({ch('hugging_face')})."]
DOMINATES = ["What dominates the peak?"]
# (what dominates, the tools for it with the chapters that measure them)
BRANCHES = [
    ("Activations", [f"Checkpoint the largest repeated blocks ({ch('torch_checkpoint')}).",
                     f"Not enough: selective policies ({ch('selective_recomputation')}), nested",
                     f"schedules ({ch('beyond_one_level')}), offload to host or disk ({ch('offloading')})."]),
    ("Logits", [f"A chunked loss that never holds all logits ({ch('logits_wall')}).",
                "Checkpointing frees the room around them only."]),
    ("Weights", [f"Quantise the frozen base: 4-bit QLoRA ({ch('hugging_face')}).",
                 f"Shard them across devices: FSDP, ZeRO-3 ({ch('beyond_one_device')})."]),
    ("Optimizer state,", [f"Shard: ZeRO-1/2 or FSDP ({ch('beyond_one_device')}). Train fewer",
                          f"parameters: LoRA adapters ({ch('hugging_face')})."]),
    ("All of it, with", ["Smaller micro-batches with gradient accumulation,",
                         f"mixed precision ({ch('related_techniques')}). Never cut the length first."]),
]
# Second lines of the two-line left labels.
LABEL_SECOND = {"Optimizer state,": "gradients", "All of it, with": "the batch"}
AGAIN = ["Measure again: peak memory, tokens per second, the",
         "validation curve, the target length. Spend freed",
         f"memory on a larger batch or a longer sequence ({ch('cost_in_time')}).",
         "Still stuck: the troubleshooting table below."]


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
    y0 = box.y + box.h / 2 - (len(lines) - 1) * LINE / 2 + 5  # centred; 5 px: half a cap height
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
    start = Box(MARGIN, MARGIN, inner, _height(START))
    body += _box("measure", START, start)
    fits = Box(MARGIN + 20, start.bottom + 28, 300, _height(FITS) + 8)
    body += _arrow(fits.cx, start.bottom, fits.cx, fits.y)
    body += _box("question", FITS, fits, shape="diamond")
    yes = Box(fits.x + fits.w + 60, fits.y + fits.h / 2 - _height(YES) / 2,
              WIDTH - MARGIN - (fits.x + fits.w + 60), _height(YES))
    body += _arrow(fits.x + fits.w, fits.y + fits.h / 2, yes.x, fits.y + fits.h / 2, "yes", -12, -8)
    body += _box("note", YES, yes)
    dom = Box(fits.x + 30, max(fits.bottom, yes.bottom) + 26, 240, _height(DOMINATES) + 8)
    body += _arrow(fits.cx, fits.bottom, fits.cx, dom.y, "no")
    body += _box("question", DOMINATES, dom, shape="diamond")
    # One row per branch: what dominates (left), an arrow, the tools (right), hung off a
    # vertical spine that leaves the question on its left.
    spine_x, label_w, gap = MARGIN + 8, 150, 34
    y = dom.bottom + 16
    tool_x = spine_x + 14 + label_w + gap
    body.append(f'<line x1="{spine_x}" y1="{dom.y + dom.h / 2:.1f}" x2="{dom.x}" '
                f'y2="{dom.y + dom.h / 2:.1f}" stroke="#333" stroke-width="1.4"/>')
    rows = []
    for head, tools in BRANCHES:
        label_lines = [head] + ([LABEL_SECOND[head]] if head in LABEL_SECOND else [])
        h = max(_height(tools), _height(label_lines))
        label = Box(spine_x + 14, y, label_w, h)
        tool = Box(tool_x, y, WIDTH - MARGIN - 24 - tool_x, h)  # 24 px: room for the return line
        body += _arrow(spine_x, y + h / 2, label.x, y + h / 2)
        body += _box("question", label_lines, label)
        body += _arrow(label.x + label.w, y + h / 2, tool.x, y + h / 2)
        body += _box("tool", tools, tool)
        rows.append((label, tool))
        y += h + 10
    body.append(f'<line x1="{spine_x}" y1="{dom.y + dom.h / 2:.1f}" x2="{spine_x}" '
                f'y2="{rows[-1][0].y + rows[-1][0].h / 2:.1f}" stroke="#333" stroke-width="1.4"/>')
    again = Box(MARGIN, y + 24, inner, _height(AGAIN))
    right = WIDTH - MARGIN - 10  # every branch returns to "measure again"
    for _, tool in rows:
        body.append(f'<line x1="{tool.x + tool.w:.1f}" y1="{tool.y + tool.h / 2:.1f}" x2="{right}" '
                    f'y2="{tool.y + tool.h / 2:.1f}" stroke="#333" stroke-width="1.4"/>')
    body.append(f'<line x1="{right}" y1="{rows[0][1].y + rows[0][1].h / 2:.1f}" x2="{right}" '
                f'y2="{rows[-1][1].bottom:.1f}" stroke="#333" stroke-width="1.4"/>')
    body += _arrow(right, rows[-1][1].bottom, right, again.y)
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
    """Every chapter id (``ch09``) the figure's text refers to."""
    import re

    text = " ".join(START + FITS + YES + DOMINATES + AGAIN + list(LABEL_SECOND.values())
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
