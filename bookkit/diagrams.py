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
    memory didn't go down"."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    n = len(CHECKLIST)
    fig, ax = plt.subplots(figsize=(7.0, 1.1 * n + 0.5))
    ax.set_xlim(-0.1, 10.1)
    ax.set_ylim(-0.45, n + 0.35)
    ax.axis("off")

    def box(x, y, w, face):
        ax.add_patch(FancyBboxPatch((x, y - 0.38), w, 0.76,
                                    boxstyle="round,pad=0.04", fc=face, ec="0.3"))

    ax.text(1.5, n + 0.05, "check, in this order", ha="center", va="bottom",
            fontsize=11, style="italic")
    ax.text(6.75, n + 0.05, "if not: the cause, and its fix", ha="center",
            va="bottom", fontsize=11, style="italic")
    for i, (question, cause, fix) in enumerate(CHECKLIST):
        y = n - 1 - i + 0.4
        box(0.0, y, 3.0, "#e8eef7")
        ax.text(1.5, y, question, ha="center", va="center", fontsize=11,
                linespacing=1.15)
        box(3.5, y, 6.5, "#fbe9e7")
        ax.text(3.65, y + 0.17, cause, ha="left", va="center", fontsize=11)
        ax.text(3.65, y - 0.17, "fix: " + fix, ha="left", va="center", fontsize=11,
                color="#1b5e20", fontweight="bold")
        ax.annotate("", (3.45, y), (3.05, y),
                    arrowprops=dict(arrowstyle="->", color="0.3", lw=1.2))
        ax.text(3.25, y + 0.08, "no", fontsize=11, ha="center", va="bottom",
                color="0.3")
        if i < n - 1:
            ax.annotate("", (1.5, y - 0.64), (1.5, y - 0.43),
                        arrowprops=dict(arrowstyle="->", color="0.3", lw=1.2))
            ax.text(1.62, y - 0.53, "yes", fontsize=11, va="center", color="0.3")
    fig.tight_layout()
    return fig
