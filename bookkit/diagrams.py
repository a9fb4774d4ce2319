"""Explanatory diagrams drawn with matplotlib (no measurements in them).

Each function draws one figure of the book and returns the matplotlib Figure; the
chapter that shows it names it in its docstring. The text is part of the figure's
meaning, so it is set at the book's 11 pt (bookkit.figures) and every box is sized
to hold it.
"""
from __future__ import annotations

__all__ = ["memory_did_not_go_down"]

# (question asked in the checklist's order, the cause when the answer is "no", the fix)
CHECKLIST = [
    ("Does a module run twice\nper training step?",
     "eval mode, no_grad, or fresh from_pretrained", "model.train(), gradients on"),
    ("Does the forward keep\nless for backward?",
     "sequential's last segment, layers outside", "a checkpoint on every block"),
    ("Is the peak in the\nlayers' backward?",
     "optimizer.step() or the logits peak higher",
     "less optimizer state, a chunked loss"),
    ("Are the gradients\nthere?",
     "reentrant, no input requires a gradient", "use_reentrant=False"),
    ("Reading allocated\nmemory?",
     "nvidia-smi shows the allocator's cache", "max_memory_allocated()"),
    ("Out of memory with\nmemory free?",
     "the CUDA allocator is fragmented", "expandable_segments:True"),
]


def memory_did_not_go_down():
    """The checklist of "I enabled checkpointing and memory didn't go down" as a flow: each
    question, the cause behind a "no" and its fix. Shown in "I enabled checkpointing and
    memory didn't go down".

    Laid out in inches on a figure of the book's width, so every text (wrapped to fit
    its box) stays at 11 pt and the figure is never wider than a phone keeps readable.
    """
    import textwrap

    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    from bookkit.figures import FIGURE_WIDTH_IN

    line = 11 * 1.3 / 72  # inches per 11 pt line
    rows = [(textwrap.wrap(q.replace("\n", " "), 18), textwrap.wrap(cause, 32),
             textwrap.wrap("fix: " + fix, 32)) for q, cause, fix in CHECKLIST]
    heights = [max(len(q), len(c) + len(f)) * line + 0.22 for q, c, f in rows]
    gap, head = 0.32, 0.4  # room for a "yes" arrow; the column titles
    total = head + sum(heights) + gap * (len(rows) - 1) + 0.06  # + the bottom frame
    fig = plt.figure(figsize=(FIGURE_WIDTH_IN, total))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, FIGURE_WIDTH_IN)
    ax.set_ylim(0, total)
    ax.axis("off")
    q_left, q_width, c_left = 0.05, 1.9, 2.4
    c_width = FIGURE_WIDTH_IN - 0.05 - c_left

    def box(x, top, w, h, face):
        ax.add_patch(FancyBboxPatch((x, top - h), w, h, boxstyle="round,pad=0.02",
                                    fc=face, ec="0.3"))

    ax.text(q_left + q_width / 2, total - 0.08, "check, in this order", ha="center",
            va="top", fontsize=11, style="italic")
    ax.text(c_left + c_width / 2, total - 0.08, "if not: the cause, and its fix",
            ha="center", va="top", fontsize=11, style="italic")
    top = total - head
    for i, ((question, cause, fix), h) in enumerate(zip(rows, heights)):
        mid = top - h / 2
        box(q_left, top, q_width, h, "#e8eef7")
        ax.text(q_left + q_width / 2, mid, "\n".join(question), ha="center",
                va="center", fontsize=11, linespacing=1.15)
        box(c_left, top, c_width, h, "#fbe9e7")
        ax.text(c_left + 0.1, top - 0.11, "\n".join(cause), ha="left", va="top",
                fontsize=11, linespacing=1.15)
        ax.text(c_left + 0.1, top - 0.11 - len(cause) * line, "\n".join(fix),
                ha="left", va="top", fontsize=11, color="#1b5e20", fontweight="bold",
                linespacing=1.15)
        ax.annotate("", (c_left - 0.03, mid), (q_left + q_width + 0.03, mid),
                    arrowprops=dict(arrowstyle="->", color="0.3", lw=1.2))
        ax.text((q_left + q_width + c_left) / 2, mid + 0.05, "no", fontsize=11,
                ha="center", va="bottom", color="0.3")
        if i < len(rows) - 1:
            x = q_left + q_width / 2
            ax.annotate("", (x, top - h - gap + 0.02), (x, top - h - 0.02),
                        arrowprops=dict(arrowstyle="->", color="0.3", lw=1.2))
            ax.text(x + 0.1, top - h - gap / 2, "yes", fontsize=11, va="center",
                    color="0.3")
        top -= h + gap
    return fig
