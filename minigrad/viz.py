"""Drawings of ledgers and plans (matplotlib, imported only when you draw).

* `timeline` — live bytes by category over a training step (the sawtooth of
  saved activations growing in forward and shrinking in backward);
* `schedule_diagram` — which activations are alive at each step of a plan
  (one-level segments or the binomial "revolve" schedule);
* `frontier` — the memory–compute trade-off: peak bytes against recomputed work;
* `nested_schedule_diagram` — a nested schedule (`minigrad.plan.rotor`) against
  time, each checkpoint's recomputation framed by nesting level;
* `frontier_families` — several families of plans (store all, sqrt(n), one-level,
  Revolve, rotor) on one memory–compute plane, with their Pareto front.

Every function takes an optional matplotlib ``ax`` and returns the Axes it drew
on; bytes are shown in KiB or MiB (whichever suits the largest value).
``import minigrad`` never imports this module or matplotlib.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from minigrad import memory
from minigrad.memory import byte_unit  # (viz.byte_unit: the name the chapters use)
from minigrad.plan.nested import Taped

__all__ = ["timeline", "schedule_diagram", "schedule_steps", "frontier", "byte_unit", "pareto_front",
           "nested_intervals", "nested_schedule_diagram", "frontier_families"]

# One colour per ledger category, stable across figures of the book.
CATEGORY_COLORS = {
    "parameters": "#4c72b0",
    "buffers": "#8172b2",
    "gradients": "#dd8452",
    "optimizer": "#937860",
    "activations": "#c44e52",
    "temporaries": "#8c8c8c",
}
def _axes(ax, figsize):
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")  # room for labels and legend
    return ax


def _timeline_rows(m):
    """``(phases, categories, matrix)`` from a ledger: one row per timeline event,
    one column per category, live bytes (ints) after the event."""
    events = list(m.timeline)
    if not events:
        raise ValueError("the ledger's timeline is empty: run ops inside "
                         "`with minigrad.memory.track() as m:` (with record_timeline=True)")
    cats = list(memory.CATEGORIES)
    rows = np.array([[int(ev.live.get(c, 0)) for c in cats] for ev in events], dtype=np.int64)
    return [ev.phase for ev in events], cats, rows


PHASE_SHADES = {"forward": "#ffffff", "recompute": "#fdf0d5", "backward": "#e8eef7"}


def timeline(m, ax=None, categories=None, title="Live memory over one step", shade_phases=True):
    """Stacked live bytes per category after every ledger event (the sawtooth).

    Args:
        m: the tracker from ``with minigrad.memory.track() as m:``.
        ax: optional matplotlib Axes.
        categories: which to stack, bottom first (default: all of ``memory.CATEGORIES``).
        title: the title.
        shade_phases: shade the background of recompute (orange) and backward (blue) events.

    Returns:
        The Axes (x: event index, one per op or node back-propagated; y: KiB/MiB).

    Raises:
        ValueError: an empty timeline, or an unknown category (named).

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> x = minigrad.Tensor(np.ones(256, np.float32), requires_grad=True)
        >>> with memory.track() as m:
        ...     x.exp().tanh().sum().backward()
        >>> ax = timeline(m)
    """
    phases, cats, rows = _timeline_rows(m)
    if categories is not None:
        unknown = [c for c in categories if c not in cats]
        if unknown:
            raise ValueError(f"unknown categories {unknown}; allowed: {cats}")
        idx = [cats.index(c) for c in categories]
        cats, rows = list(categories), rows[:, idx]
    ax = _axes(ax, (6, 3.5))  # 6 in: 11 pt labels stay 9 px on a phone
    unit, div = byte_unit(max(int(rows.sum(axis=1).max()), 1))
    x = np.arange(len(rows))
    if shade_phases:
        start = 0
        for t in range(1, len(phases) + 1):
            if t == len(phases) or phases[t] != phases[start]:
                if phases[start] != "forward":
                    ax.axvspan(start - 0.5, t - 0.5, color=PHASE_SHADES.get(phases[start], "#eeeeee"),
                               zorder=0, lw=0)
                start = t
    ax.stackplot(x, (rows / div).T, labels=cats, step="post",
                 colors=[CATEGORY_COLORS.get(c, None) for c in cats], alpha=0.9, zorder=1)
    ax.set_xlim(0, max(len(rows) - 1, 1))
    ax.set_xlabel("ledger event (ops in time order)")
    ax.set_ylabel(f"live memory ({unit})")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    if shade_phases:
        for ph in ("recompute", "backward"):
            if ph in phases:
                handles.append(Patch(color=PHASE_SHADES[ph], label=f"{ph} phase"))
                labels.append(f"{ph} phase")
    ax.legend(handles, labels, loc="upper left", ncol=2)
    return ax


def schedule_steps(plan):
    """The per-step state of a plan, for drawing and testing.

    Args:
        plan: an object with ``n`` and ``actions`` (a ``SegmentPlan``, ``plan.revolve(...)``).

    Returns:
        ``(kinds, layers, states)``: ``kinds[t]`` is ``"forward"`` (untaped), ``"taped"``
        (forward with taping) or ``"backward"``; ``layers[t]`` the layer run; ``states`` an
        int array ``(steps, n)`` where entry ``[t, i]`` is 2 if layer ``i``'s saved
        activations are alive during step ``t``, 1 if its input is held as a
        checkpoint/snapshot, else 0.

    Example:
        >>> from minigrad import plan
        >>> kinds, layers, states = schedule_steps(plan.revolve(10, 3))
        >>> len(kinds) == len(layers) == len(states)
        True
    """
    n = plan.n
    snap: set[int] = set()
    taped: set[int] = set()
    kinds, layers, states = [], [], []

    def step(kind, layer):
        row = np.zeros(n, dtype=np.int8)
        row[list(snap)] = 1
        row[list(taped)] = 2
        kinds.append(kind)
        layers.append(layer)
        states.append(row)

    for act in plan.actions:
        op = act[0]
        if op == "snapshot":
            snap.add(act[1])
        elif op == "free":
            snap.discard(act[1])
        elif op == "advance":
            for i in range(act[1], act[2]):
                step("forward", i)
        elif op == "tape":
            taped.add(act[1])
            step("taped", act[1])
        elif op == "reverse":
            step("backward", act[1])
            taped.discard(act[1])
        elif op == "taped":  # revolve: run taped, then reverse at once
            taped.add(act[1])
            step("taped", act[1])
            step("backward", act[1])
            taped.discard(act[1])
        elif op == "restore":
            pass  # no layer runs; the next advance/tape starts from the snapshot
        else:
            raise ValueError(f"unknown action {act!r}")
    return kinds, layers, np.array(states, dtype=np.int8).reshape(len(states), n)


def schedule_diagram(plan, ax=None, title=None):
    """Grid of layers (rows) by steps (columns): red where a layer's saved
    activations are alive, blue where its input is held as a checkpoint; a marker shows
    the layer that runs at each step (dot: untaped forward, triangle: taped forward,
    cross: backward).

    Args:
        plan: an object with ``n`` and ``actions``.
        ax: optional matplotlib Axes.
        title: optional title (default: from the plan).

    Returns:
        The Axes.

    Example:
        >>> from minigrad import plan
        >>> ax = schedule_diagram(plan.sqrt_segments(9))
    """
    kinds, layers, states = schedule_steps(plan)
    ax = _axes(ax, (6, max(2.5, min(8, plan.n * 0.3))))
    cmap = ListedColormap(["#f4f4f4", "#4c72b0", "#c44e52"])
    ax.imshow(states.T, aspect="auto", cmap=cmap, vmin=0, vmax=2, origin="lower",
              interpolation="nearest")
    marks = {"forward": ("o", "black"), "taped": ("^", "black"), "backward": ("x", "white")}
    t = np.arange(len(kinds))
    for kind, (marker, color) in marks.items():
        sel = [i for i, k in enumerate(kinds) if k == kind]
        ax.scatter(t[sel], np.array(layers)[sel], marker=marker, s=10, c=color, linewidths=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("layer")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole numbers
    if title is None:
        if hasattr(plan, "starts"):
            title = f"{plan.n} layers, segments start at {list(plan.starts)}"
        elif hasattr(plan, "slots"):
            title = f"Binomial schedule: {plan.n} layers, {plan.slots} slots"
        else:
            title = f"{plan.n} layers, nested schedule"
    ax.set_title(title)
    handles = [Patch(color="#c44e52", label="saved activations"),
               Patch(color="#4c72b0", label="checkpointed input"),
               Line2D([], [], marker="o", ls="", c="black", ms=4, label="forward (untaped)"),
               Line2D([], [], marker="^", ls="", c="black", ms=4, label="forward (taped)"),
               Line2D([], [], marker="x", ls="", c="gray", ms=4, label="backward")]
    # below the axes, past the tick labels and x label: the plot keeps the width
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0), borderaxespad=3.2,
              ncol=2, frameon=False)
    return ax


def frontier(points, ax=None, labels=None, xlabel="recomputed forward work (FLOPs)",
             title="Memory–compute frontier"):
    """Peak memory against recomputation for a set of plans, with the Pareto front.

    Args:
        points: iterable of ``(recompute_cost, peak_bytes)`` (extra items in each tuple,
            such as the plan's starts, are ignored).
        ax: optional Axes; labels: optional text per point; xlabel, title: axis texts.

    Returns:
        The Axes. The front (no other point is both cheaper and smaller) is a step line.

    Raises:
        ValueError: no points.

    Example:
        >>> ax = frontier([(1000, 4096), (2000, 2048), (3000, 2048)])   # (FLOPs, bytes)
    """
    pts = [(float(p[0]), float(p[1])) for p in points]
    if not pts:
        raise ValueError("frontier needs at least one (recompute_cost, peak_bytes) point")
    ax = _axes(ax, (6, 4))
    unit, div = byte_unit(max(y for _, y in pts))
    xs = np.array([p[0] for p in pts])
    ys = np.array([p[1] for p in pts]) / div
    ax.scatter(xs, ys, s=14, color="#8c8c8c", label="plans")
    front = pareto_front(pts)
    fx = [p[0] for p in front]
    fy = [p[1] / div for p in front]
    ax.step(fx, fy, where="post", color="#c44e52", lw=1.5, label="Pareto front")
    ax.scatter(fx, fy, s=22, color="#c44e52", zorder=3)
    if labels is not None:
        for x, y, text in zip(xs, ys, labels):
            ax.annotate(str(text), (x, y), textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"peak saved activations ({unit})")
    ax.set_title(title)
    ax.legend()
    return ax


def pareto_front(points):
    """The points not dominated by any other (cheaper or equal cost and smaller or
    equal peak, one of them strictly), sorted by cost.

    Example:
        >>> pareto_front([(0, 10), (1, 5), (2, 7)])
        [(0.0, 10.0), (1.0, 5.0)]
    """
    pts = sorted({(float(p[0]), float(p[1])) for p in points})
    front, best = [], float("inf")
    for x, y in pts:
        if y < best:
            front.append((x, y))
            best = y
    return front


# --- nested (nested) schedules ---------------------------------------------------
LEVEL_COLORS = ("#2a6f97", "#e07a1f", "#6a994e", "#9c4f96", "#bc4749", "#577590")


def nested_intervals(schedule):
    """Where each checkpoint of a `minigrad.plan.NestedSchedule` is recomputed, in
    the step numbering of `schedule_steps` (one step per layer run or reversed).

    Returns a list of ``(first_step, last_step, start, stop, level)``: the
    recomputation of layers ``start .. stop-1`` (the re-run and the backward
    through them) occupies steps ``first_step .. last_step``; ``level`` 1 is a
    top-level checkpoint, 2 one inside its recomputation, and so on."""
    out = []
    step = 0

    def forward(items):
        nonlocal step
        for it in items:
            step += 1 if isinstance(it, Taped) else it.stop - it.start

    forward(schedule.items)
    # backward on an explicit stack (a schedule may nest ~n levels): each entry
    # is a level's items still to reverse, its checkpoint and where it began
    stack = [(reversed(schedule.items), None, 0, 0)]
    while stack:
        rest, owner, first, level = stack[-1]
        it = next(rest, None)
        if it is None:
            stack.pop()
            if owner is not None:
                out.append((first, step - 1, owner.start, owner.stop, level))
        elif isinstance(it, Taped):
            step += 1
        else:
            start_step = step
            forward(it.inner)
            stack.append((reversed(it.inner), it, start_step, level + 1))
    return sorted(out)


def nested_schedule_diagram(schedule, ax=None, title=None):
    """A nested checkpointing schedule against time, its levels visible.

    The grid is `schedule_diagram`'s (layers as rows, steps as columns; red:
    saved activations alive, blue: checkpointed input held; markers: the layer
    that runs). On top, each checkpoint's recomputation is framed, the frame's
    colour and the label ``L1``, ``L2``, ... giving its nesting level: a frame
    inside another frame is a checkpoint taken again while its parent is rebuilt.
    ``schedule``: a `minigrad.plan.NestedSchedule`. Returns the Axes."""
    if title is None:
        title = (f"Nested schedule: {schedule.n} layers, {len(schedule.checkpoints)} checkpoints, "
                 f"depth {schedule.depth}")
    ax = schedule_diagram(schedule, ax=ax, title=title)
    for first, last, start, stop, level in nested_intervals(schedule):
        color = LEVEL_COLORS[(level - 1) % len(LEVEL_COLORS)]
        pad = 0.08 * level
        ax.add_patch(Rectangle((first - 0.5 + pad, start - 0.5 + pad), last - first + 1 - 2 * pad,
                               stop - start - 2 * pad, fill=False, edgecolor=color, lw=1.6, zorder=4))
        # (no "L1" tag in the frame: at a readable size it hides the steps; the colour
        # and the legend name the level)
    levels = sorted({lv for *_, lv in nested_intervals(schedule)})
    handles, labels = ax.get_legend_handles_labels()
    legend = ax.get_legend()
    handles = list(legend.legend_handles) if legend is not None else handles
    handles += [Line2D([], [], color=LEVEL_COLORS[(lv - 1) % len(LEVEL_COLORS)], lw=1.6,
                       label=f"recomputation, level {lv}") for lv in levels]
    # below the axes, past the tick labels and x label: the plot keeps the width
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0), borderaxespad=3.2,
              ncol=2, frameon=False)
    return ax


FAMILY_STYLES = {
    "store all": ("D", "#2f2f2f"),
    "sqrt(n)": ("s", "#8c8c8c"),
    "segment plans": ("o", "#4c72b0"),
    "Revolve": ("^", "#dd8452"),
    "rotor": ("*", "#55a868"),
}


def frontier_families(families, ax=None, xlabel="recomputed work (FLOPs)",
                      title="Memory–compute frontier", front=True):
    """Several families of plans on one memory–compute plane, and their Pareto front.

    ``families``: ``{name: [(recompute_cost, peak_bytes, ...), ...]}``, for example
    `minigrad.plan.nested.frontier_families` (store all, sqrt(n), one-level DP, Revolve,
    rotor); names in ``FAMILY_STYLES`` get their marker and colour. With
    ``front``, the plans no other plan beats on both axes are joined by a step
    line. Returns the Axes."""
    families = {k: [(float(p[0]), float(p[1])) for p in v] for k, v in families.items()}
    every = [p for pts in families.values() for p in pts]
    if not every:
        raise ValueError("frontier_families needs at least one (recompute_cost, peak_bytes) point")
    ax = _axes(ax, (6, 4.5))
    unit, div = byte_unit(max(y for _, y in every))
    cycle = iter(("v", "P", "X", "h", "<", ">"))
    for name, pts in families.items():
        marker, color = FAMILY_STYLES.get(name, (next(cycle, "o"), None))
        ax.scatter([p[0] for p in pts], [p[1] / div for p in pts], marker=marker, color=color,
                   s=60 if marker == "*" else 28, label=name, zorder=3)
    if front:
        f = pareto_front(every)
        ax.step([p[0] for p in f], [p[1] / div for p in f], where="post", color="#c44e52", lw=1.2,
                label="Pareto front (all plans)", zorder=2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"peak saved activations ({unit})")
    ax.set_title(title)
    ax.legend()
    return ax
