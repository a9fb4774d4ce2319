"""Several training steps' ledger timelines on one pair of axes (shown in chapter 3; chapter 4
uses it too)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from minigrad import memory
from minigrad.viz import byte_unit

__all__ = ["overlay_timelines"]


def overlay_timelines(trackers: dict, category: str = "activations", ax=None, title=None):
    """Live bytes of one ledger ``category`` (or ``"total"``) after every event, one step
    line per tracker, on the same axes (x: event index; y: KiB or MiB). Shown in chapter 3.

    ``trackers``: ``{label: tracker}``. A dotted vertical line marks where each tracker's
    backward pass begins (its first event that is not a forward op)."""
    if not trackers:
        raise ValueError("overlay_timelines: no trackers given")
    allowed = list(memory.CATEGORIES) + ["total"]
    if category not in allowed:
        raise ValueError(f"overlay_timelines: unknown category {category!r}; allowed: {allowed}")
    for label, m in trackers.items():
        if not m.timeline:
            raise ValueError(f"overlay_timelines: the timeline of {label!r} is empty")
    series = {label: np.array([m.start[category]] + [ev.live[category] for ev in m.timeline])
              for label, m in trackers.items()}
    unit, div = byte_unit(max(int(s.max()) for s in series.values()) or 1)
    if ax is None:
        from bookkit.figures import subplots

        _, ax = subplots(height=3.5)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, ys) in enumerate(series.items()):
        color = colors[k % len(colors)]
        ax.step(np.arange(len(ys)), ys / div, where="post", color=color, lw=1.8, label=label)
        phases = [ev.phase for ev in trackers[label].timeline] + ["backward"]
        ax.axvline(next(i for i, p in enumerate(phases) if p != "forward") + 0.5, color=color, ls=":", lw=1)
    ax.set_xlabel("ledger event (0 = start of the step)")
    ax.set_ylabel(f"{'saved activations' if category == 'activations' else category} ({unit})")
    ax.set_title(title or f"Live {category} over one step")
    ax.legend(loc="upper left")
    return ax
