"""Draw the intro's hero figure (book/hero_memory.svg): the whole book in one picture.

Model (stated in the caption): a chain of N = 16 equal layers in which every layer keeps
its input, one unit `a`, for its backward pass. The script replays one training step
operation by operation and counts the units alive, for two schedules:

- store-all: every layer's input stays until its backward has run;
- checkpointed, 4 segments of 4 layers (torch's ``checkpoint`` on each segment): the
  forward keeps only each segment's input; the backward re-runs a segment's forward
  (keeping its inputs again) just before that segment's backward.

The counts are exact by construction (integers), so the SVG is deterministic for a
given matplotlib; tests/test_hero_figure.py checks the replay and that the stored file
is what this script draws.

Usage: python scripts/draw_hero.py            (writes book/hero_memory.svg)
       python scripts/draw_hero.py --check    (exit 1 if the stored file is stale)
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "book" / "hero_memory.svg"
N_LAYERS = 16
SEGMENTS = 4


def store_all(n: int) -> list[int]:
    """Units alive after each operation of a store-all step (n forwards, n backwards)."""
    forward = list(range(1, n + 1))                # layer i keeps its input: i alive
    backward = list(range(n - 1, -1, -1))          # each backward frees one input
    return forward + backward


def checkpointed(n: int, segments: int) -> tuple[list[int], int]:
    """Units alive after each operation with `segments` equal checkpointed segments,
    and the number of layer forwards run a second time."""
    if n % segments:
        raise ValueError(f"{n} layers do not split into {segments} equal segments")
    size = n // segments
    alive, timeline, recomputed = 0, [], 0
    for s in range(segments):                      # forward: keep each segment's input
        for i in range(size):
            alive += i == 0
            timeline.append(alive)
    for s in reversed(range(segments)):            # backward, last segment first
        for _ in range(size - 1):                  # re-run the segment, keeping inputs
            alive += 1
            recomputed += 1
            timeline.append(alive)
        for _ in range(size):                      # its backward frees them again
            alive -= 1
            timeline.append(alive)
    return timeline, recomputed


def draw() -> str:
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    plain = store_all(N_LAYERS)
    ckpt, recomputed = checkpointed(N_LAYERS, SEGMENTS)
    with plt.rc_context({"font.size": 11, "axes.titlesize": 12, "svg.hashsalt": "hero",
                         "svg.fonttype": "path", "font.family": "DejaVu Sans"}):
        fig, ax = plt.subplots(figsize=(7.0, 3.4))
        ax.step(range(1, len(plain) + 1), plain, where="post", lw=2.2, color="#b03a2e",
                label="store all activations")
        ax.step(range(1, len(ckpt) + 1), ckpt, where="post", lw=2.2, color="#1a56b0",
                label=f"checkpointed ({SEGMENTS} segments)")
        ax.axvline(N_LAYERS + 0.5, color="0.5", lw=1, ls=":")
        ax.text(N_LAYERS / 2, N_LAYERS + 1.6, "forward", ha="center", color="0.35")
        ax.text(N_LAYERS + 14, N_LAYERS + 1.6, "backward", ha="center", color="0.35")
        ax.annotate(f"peak {max(plain)} a", xy=(N_LAYERS, max(plain)),
                    xytext=(3, max(plain) - 1), color="#b03a2e",
                    arrowprops={"arrowstyle": "->", "color": "#b03a2e"})
        peak_at = ckpt.index(max(ckpt)) + 1
        ax.annotate(f"peak {max(ckpt)} a", xy=(peak_at, max(ckpt)),
                    xytext=(peak_at + 6, max(ckpt) + 3.5), color="#1a56b0",
                    arrowprops={"arrowstyle": "->", "color": "#1a56b0"})
        ax.text(len(ckpt), 6.2, f"+{recomputed} layer forwards re-run",
                ha="right", va="bottom", color="#1a56b0")
        ax.set_xlim(0, len(ckpt) + 1)
        ax.set_ylim(0, N_LAYERS + 3.5)
        ax.set_xlabel("operations run in one training step")
        ax.set_ylabel("activations kept (units of a)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.yaxis.set_major_locator(matplotlib.ticker.MultipleLocator(4))
        ax.legend(loc="upper right", frameon=False, bbox_to_anchor=(1.02, 0.84))
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(fig)
    return buffer.getvalue()


def main(argv: list[str]) -> int:
    svg = draw()
    if "--check" in argv:
        if not OUTPUT.is_file() or OUTPUT.read_text() != svg:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python scripts/draw_hero.py")
            return 1
        return 0
    OUTPUT.write_text(svg)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
