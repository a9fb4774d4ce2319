"""The book's figure style and its figure helpers: readable labels, drawn at 2x.

Applied when bookkit is imported inside Jupyter or Colab (the setup cell of every
chapter), so a figure reads the same in the HTML book, in Jupyter and in Colab:
fonts of 11 pt or more, `FIGURE_WIDTH_IN` (6 inches) wide, stored as PNG at 2x
(IPython's "retina" format, 200 dpi). The browser scales a figure to the text
column, so a label shows at its size in points times the shown width over the
figure's: in a 390 px window a figure is shown 374 px wide, where 6 inches keep an
11 pt label at 9.2 CSS px or more (7 inches gave 8 px); on a desktop it is shown at
its own size (15 px). Each PNG records the smallest text it draws
(`SMALLEST_TEXT_KEY`), which tests/test_browser.py reads to check that size on every
page. Scripts and tests that import bookkit are left alone.

Chapters draw through `subplots`, `plot` (as d2l's ``d2l.plot``), `bars`, `scatter`
and `add_legend` where the plot is not the lesson, so a visible cell holds what is
plotted, not how.
"""
from __future__ import annotations

FIGURE_WIDTH_IN = 6.0
"""Width of a book figure (inches): 11 pt labels stay at 9 CSS px or more at 390 px."""

BOOK_RC = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "figure.titlesize": 12,
    "figure.figsize": (FIGURE_WIDTH_IN, 3.6),
    "figure.dpi": 100,
}
"""matplotlib settings every chapter draws with (checked by tests/test_figures_style.py)."""

FIGURE_FORMAT = "retina"
"""IPython's inline format: PNG at twice ``figure.dpi``, shown at its nominal size."""

SMALLEST_TEXT_KEY = "Smallest text pt"
"""PNG text key holding the size (points) of the smallest text a book figure draws."""


def smallest_text_pt(fig) -> float | None:
    """Size in points of the smallest text a figure draws.

    The figure is drawn once on an off-screen renderer that notes the size of every
    string it draws (tick labels, titles, legends, annotations): hidden texts and
    ticks of a hidden axis do not count, as they are not drawn.

    Args:
        fig: a matplotlib Figure.

    Returns:
        The smallest font size in points, or None when the figure draws no text.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> import matplotlib.pyplot as plt
        >>> from bookkit.figures import smallest_text_pt
        >>> fig, ax = plt.subplots()
        >>> _ = ax.set_title("t", fontsize=14); _ = ax.set_xlabel("x", fontsize=9)
        >>> ax.tick_params(labelsize=12); smallest_text_pt(fig)
        9.0
    """
    from matplotlib.backends.backend_agg import RendererAgg

    width, height = fig.get_size_inches() * fig.dpi
    renderer = RendererAgg(int(width), int(height), fig.dpi)
    sizes = []
    draw_text = renderer.draw_text

    def noting(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if str(s).strip():
            sizes.append(prop.get_size_in_points())
        return draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = noting
    fig.draw(renderer)
    return min(sizes) if sizes else None


def book_png(fig, **kwargs):
    """IPython's retina PNG of a figure, recording its smallest text in the PNG.

    Args:
        fig: the matplotlib Figure.
        **kwargs: passed to IPython's ``retina_figure`` (``bbox_inches``...).

    Returns:
        ``(base64 PNG, {"width": w, "height": h})`` as IPython's formatter expects,
        or None for an empty figure.
    """
    from IPython.core.pylabtools import retina_figure

    pt = smallest_text_pt(fig)
    metadata = {SMALLEST_TEXT_KEY: f"{pt:g}"} if pt is not None else {}
    return retina_figure(fig, base64=True, metadata=metadata, **kwargs)


def use_book_style(shell=None) -> bool:
    """Apply `BOOK_RC` and the 2x inline format when running under IPython.

    Args:
        shell: the IPython shell; by default the running one, if any.

    Returns:
        True when the style was applied (an IPython shell is running), else False.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    import matplotlib as mpl
    from IPython.core.pylabtools import select_figure_formats

    mpl.rcParams.update(BOOK_RC)
    try:  # the inline backend re-selects its own formats when pyplot activates it
        from matplotlib_inline.config import InlineBackend

        InlineBackend.instance(parent=shell).figure_formats = {FIGURE_FORMAT}
    except ImportError:  # an IPython without the inline backend: formats below only
        pass
    import matplotlib.pyplot  # noqa: F401  (activates the inline backend now, once)
    from matplotlib.figure import Figure

    select_figure_formats(shell, {FIGURE_FORMAT}, bbox_inches="tight")
    png = shell.display_formatter.formatters["image/png"]
    png.for_type(Figure, lambda fig: book_png(fig, bbox_inches="tight"))
    return True


# ---------------------------------------------------------------------------------
# The figure helpers chapters draw with
# ---------------------------------------------------------------------------------
def subplots(nrows: int = 1, ncols: int = 1, *, height: float = 3.6, **kwargs):
    """``plt.subplots`` at the book's width, `FIGURE_WIDTH_IN`, ``height`` inches tall.

    Args:
        nrows, ncols: the grid of axes.
        height: the figure's height in inches.
        **kwargs: passed to ``plt.subplots`` (``sharex``, ``gridspec_kw``...), not
            ``figsize``: a wider figure shrinks its labels on a phone.

    Returns:
        ``(fig, ax)`` or ``(fig, axes)``, as ``plt.subplots`` returns them.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import subplots
        >>> fig, ax = subplots(height=3)
        >>> fig.get_size_inches().tolist()
        [6.0, 3.0]
    """
    import matplotlib.pyplot as plt

    if "figsize" in kwargs:
        raise ValueError("subplots takes height=, not figsize=: the width is the "
                         f"book's, {FIGURE_WIDTH_IN} inches")
    if not height > 0:
        raise ValueError(f"height must be positive inches, got {height!r}")
    return plt.subplots(nrows, ncols, figsize=(FIGURE_WIDTH_IN, height), **kwargs)


def add_legend(ax, loc: str = "best", **kwargs):
    """The book's legend: no frame; ``loc="below"`` puts it under the axes' tick
    labels and x label, in two columns, where it hides no data.

    Args:
        ax: the matplotlib Axes.
        loc: a matplotlib ``loc`` or ``"below"``.
        **kwargs: passed to ``ax.legend`` (``handles``, ``ncols``...).

    Returns:
        The matplotlib Legend.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import add_legend, subplots
        >>> fig, ax = subplots()
        >>> _ = ax.plot([0, 1], label="a"); _ = ax.set_xlabel("x")
        >>> add_legend(ax, "below").get_texts()[0].get_text()
        'a'
    """
    from matplotlib.transforms import ScaledTranslation

    kwargs.setdefault("frameon", False)
    if loc != "below":
        return ax.legend(loc=loc, **kwargs)
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    below_in = (ax.get_window_extent(renderer).y0
                - ax.get_tightbbox(renderer).y0) / fig.dpi  # tick labels, x label
    kwargs.setdefault("ncols", 2)
    shift = ScaledTranslation(0, -below_in - 0.05, fig.dpi_scale_trans)
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0),
                     bbox_transform=ax.transAxes + shift, borderaxespad=0, **kwargs)


def plot(x, ys, *, ax=None, xlabel: str | None = None, ylabel: str | None = None,
         title: str | None = None, xscale: str | None = None,
         yscale: str | None = None, xlim=None, ylim=None, styles=None,
         legend: str | None = "best", height: float = 3.6, grid: bool = False):
    """Curves sharing one x axis, labelled, on a book-sized figure (as ``d2l.plot``).

    Args:
        x: the x values, shared by every curve.
        ys: ``{label: y values}`` (one curve each, in order) or one sequence.
        ax: draw into these axes; by default a new figure from `subplots`.
        xlabel, ylabel, title: the axes' texts.
        xscale, yscale: ``"log"``, ``"symlog"``... (default linear).
        xlim, ylim: the axes' limits, ``(low, high)``.
        styles: the curves' looks: ``{label: keyword dict}`` (``marker``, ``ls``,
            ``color``...; curves not named take matplotlib's cycle), or one entry
            per curve, in order, each a keyword dict or a format string (``"o-"``).
        legend: the legend's ``loc`` (``"below"``: under the axes, see `add_legend`),
            or None for no legend.
        height: the new figure's height (inches), when ``ax`` is None.
        grid: draw a light grid.

    Returns:
        The matplotlib Axes.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import plot
        >>> ax = plot([1, 2, 4], {"linear": [1, 2, 4], "flat": [1, 1, 1]},
        ...           xlabel="n", yscale="log")
        >>> [line.get_label() for line in ax.get_lines()], ax.get_yscale()
        (['linear', 'flat'], 'log')
    """
    import numpy as np

    if ax is None:
        _, ax = subplots(height=height)
    if not isinstance(ys, dict):
        ys = {None: ys}
    if styles is None:
        styles = {}
    elif not isinstance(styles, dict):
        styles = list(styles)
        if len(styles) != len(ys):
            raise ValueError(f"{len(styles)} styles for {len(ys)} curves")
        styles = dict(zip(ys, styles))
    unknown = set(styles) - set(ys)
    if unknown:
        raise ValueError(f"styles names curves that are not plotted: {sorted(unknown)}")
    n = len(np.asarray(x))
    for label, y in ys.items():
        if len(np.asarray(y)) != n:
            raise ValueError(f"curve {label!r} has {len(np.asarray(y))} values for "
                             f"{n} x values")
        style = styles.get(label, {})
        fmt = (style,) if isinstance(style, str) else ()
        ax.plot(x, y, *fmt, label=label, **({} if fmt else style))
    for setter, value in ((ax.set_xlabel, xlabel), (ax.set_ylabel, ylabel),
                          (ax.set_title, title), (ax.set_xscale, xscale),
                          (ax.set_yscale, yscale), (ax.set_xlim, xlim),
                          (ax.set_ylim, ylim)):
        if value is not None:
            setter(*value) if setter in (ax.set_xlim, ax.set_ylim) else setter(value)
    if grid:
        ax.grid(True, which="both", alpha=0.3)
    ax.figure.tight_layout()
    if legend is not None and any(label is not None for label in ys):
        add_legend(ax, legend)
        ax.figure.tight_layout()
    return ax


def xy_plot(series, *, ax=None, xlabel: str | None = None,
            ylabel: str | None = None, title: str | None = None, styles=None,
            legend: str | None = "best", height: float = 3.6, grid: bool = True):
    """Series of measured points, each with x values of its own, book-sized.

    Where `plot` shares one x axis, here every series is its own list of
    ``(x, y)`` points (a frontier of peak bytes against recomputed FLOPs, one per
    approach): a series of several points is drawn as markers joined by a line,
    a series of one point as a lone marker. Extra items in a point (a budget,
    a flag) are ignored.

    Args:
        series: ``{label: [(x, y, ...), ...]}``, drawn in order.
        ax: draw into these axes; by default a new figure from `subplots`.
        xlabel, ylabel, title: the axes' texts.
        styles: ``{label: keyword dict}`` for ``ax.plot`` (``marker``,
            ``color``...); series not named take matplotlib's cycle and ``"o"``.
        legend: the legend's ``loc`` (``"below"``: see `add_legend`), or None.
        height: the new figure's height (inches), when ``ax`` is None.
        grid: draw a light grid.

    Returns:
        The matplotlib Axes.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import xy_plot
        >>> ax = xy_plot({"plans": [(4, 0), (3, 5, "extra")], "plain": [(5, 0)]},
        ...              xlabel="bytes", ylabel="FLOPs")
        >>> [(ln.get_label(), ln.get_linestyle()) for ln in ax.get_lines()]
        [('plans', '-'), ('plain', 'None')]
    """
    if ax is None:
        _, ax = subplots(height=height)
    styles = dict(styles or {})
    unknown = set(styles) - set(series)
    if unknown:
        raise ValueError(f"styles names series that are not plotted: {sorted(unknown)}")
    for label, pts in series.items():
        pts = list(pts)
        if not pts:
            raise ValueError(f"series {label!r} has no points")
        style = {"marker": "o", **styles.get(label, {})}
        style.setdefault("linestyle", "-" if len(pts) > 1 else "none")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style)
    for setter, value in ((ax.set_xlabel, xlabel), (ax.set_ylabel, ylabel),
                          (ax.set_title, title)):
        if value is not None:
            setter(value)
    if grid:
        ax.grid(True, alpha=0.3)
    ax.figure.tight_layout()
    if legend is not None:
        add_legend(ax, legend)
        ax.figure.tight_layout()
    return ax


def bars(labels, parts, *, ax=None, colors=None, horizontal: bool = False,
         stacked: bool = True, xlabel: str | None = None, ylabel: str | None = None,
         title: str | None = None, legend: str | None = "best",
         height: float = 3.6, totals: str | None = None):
    """Bars, one group per label, one bar (or segment) per part, book-sized.

    Args:
        labels: a name per bar (tick labels).
        parts: ``{part: one value per bar}``, stacked in order from the axis out,
            or side by side when ``stacked`` is False.
        stacked: stack the parts (default), or draw them side by side.
        ax: draw into these axes; by default a new figure from `subplots`.
        colors: ``{part: colour}``; parts not named take matplotlib's cycle.
        horizontal: bars along x, the first label on top.
        xlabel, ylabel, title: the axes' texts.
        legend: the legend's ``loc`` (``"below"``: under the axes, see `add_legend`),
            or None for no legend.
        height: the new figure's height (inches), when ``ax`` is None.
        totals: a format such as ``"{:.0f}"`` to write each bar's total (stacked)
            or its tallest part (side by side) at its end.

    Returns:
        The matplotlib Axes.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import bars
        >>> ax = bars(["plain", "checkpointed"], {"weights": [4, 4], "saved": [6, 2]},
        ...           ylabel="MiB", totals="{:g}")
        >>> len(ax.patches), [t.get_text() for t in ax.texts]
        (4, ['10', '6'])
    """
    import numpy as np

    if ax is None:
        _, ax = subplots(height=height)
    labels = list(labels)
    colors = dict(colors or {})
    unknown = set(colors) - set(parts)
    if unknown:
        raise ValueError(f"colors names parts that are not drawn: {sorted(unknown)}")
    base = np.zeros(len(labels))
    pos = np.arange(len(labels))
    width = 0.8 if stacked else 0.8 / max(len(parts), 1)
    for k, (part, values) in enumerate(parts.items()):
        values = np.asarray(values, dtype=float)
        if values.shape != base.shape:
            raise ValueError(f"part {part!r} has {values.size} values for "
                             f"{len(labels)} bars")
        draw = ax.barh if horizontal else ax.bar
        offset = {"left": base} if horizontal else {"bottom": base}
        at = pos if stacked else pos - 0.4 + width * (k + 0.5)
        draw(at, values, width, label=part, color=colors.get(part),
             **(offset if stacked else {}))
        base = base + values if stacked else np.maximum(base, values)
    if horizontal:
        ax.set_yticks(pos, labels)
        ax.invert_yaxis()
    else:
        ax.set_xticks(pos, labels)
    if totals is not None:
        pad = 0.01 * base.max()
        for p, total in zip(pos, base):
            if horizontal:
                ax.text(total + pad, p, totals.format(total), va="center")
            else:
                ax.text(p, total + pad, totals.format(total), ha="center",
                        va="bottom")
    for setter, value in ((ax.set_xlabel, xlabel), (ax.set_ylabel, ylabel),
                          (ax.set_title, title)):
        if value is not None:
            setter(value)
    ax.figure.tight_layout()
    if legend is not None:
        add_legend(ax, legend)
        ax.figure.tight_layout()
    return ax


def scatter(points, *, ax=None, xlabel: str | None = None,
            ylabel: str | None = None, title: str | None = None, xlim=None,
            ylim=None, legend: str | None = "best", legend_cols: int = 1,
            height: float = 3.6, size: float = 10):
    """Points named by two keys: one colour per member, one marker per group.

    For a trade-off of several options (members) measured under a few settings
    (groups): each point is ``(group, member): (x, y)``. Every member keeps its colour
    in every group; the first group draws filled circles, the next ones open squares,
    triangles, diamonds. The legend lists the members (coloured circles), then the
    groups (grey markers), so a reader matches a point by colour and by shape.

    Args:
        points: ``{(group, member): (x, y)}``, in drawing order.
        ax: draw into these axes; by default a new figure from `subplots`.
        xlabel, ylabel, title: the axes' texts.
        xlim, ylim: the axes' limits, ``(low, high)``.
        legend: the legend's ``loc`` (``"below"``: under the axes, see `add_legend`),
            or None for no legend.
        legend_cols: the legend's columns.
        height: the new figure's height (inches), when ``ax`` is None.
        size: the markers' size (points).

    Returns:
        The matplotlib Axes.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import scatter
        >>> ax = scatter({("naive", "none"): (0, 60), ("naive", "full"): (30, 4),
        ...               ("fused", "none"): (0, 40), ("fused", "full"): (25, 4)},
        ...              xlabel="extra FLOPs (%)", ylabel="held (·sbh)")
        >>> len(ax.get_lines()), [t.get_text() for t in ax.get_legend().get_texts()]
        (4, ['none', 'full', 'naive', 'fused'])
    """
    from matplotlib.lines import Line2D

    shapes = "osD^v"
    groups, members = [], []
    for key in points:
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"points are keyed (group, member), got {key!r}")
        for seen, name in ((groups, key[0]), (members, key[1])):
            if name not in seen:
                seen.append(name)
    if len(groups) > len(shapes):
        raise ValueError(f"{len(groups)} groups; at most {len(shapes)} marker shapes")
    if ax is None:
        _, ax = subplots(height=height)

    def style(g, m):
        color = "0.3" if m is None else f"C{members.index(m)}"
        filled = g is None or groups.index(g) == 0
        return dict(ls="", marker="o" if g is None else shapes[groups.index(g)],
                    ms=size, color=color, mfc=color if filled else "none", mew=2)

    for (g, m), (x, y) in points.items():
        ax.plot([x], [y], **style(g, m))
    for setter, value in ((ax.set_xlabel, xlabel), (ax.set_ylabel, ylabel),
                          (ax.set_title, title), (ax.set_xlim, xlim),
                          (ax.set_ylim, ylim)):
        if value is not None:
            setter(*value) if setter in (ax.set_xlim, ax.set_ylim) else setter(value)
    ax.figure.tight_layout()
    if legend is not None:
        keys = ([Line2D([], [], label=m, **style(None, m)) for m in members]
                + [Line2D([], [], label=g, **style(g, None)) for g in groups])
        add_legend(ax, legend, handles=keys, ncols=legend_cols)
        ax.figure.tight_layout()
    return ax


# ---------------------------------------------------------------------------------
# Figures that carry a chapter's idea (drawn from counts, never from timings)
# ---------------------------------------------------------------------------------
def saved_bytes_timelines(n_layers: int = 8, segments: int = 3) -> dict[str, dict]:
    """Where a chain's saved activations are, step by step, three ways (chapter 18).

    A chain of ``n_layers`` equal layers, each saving one unit for backward. Each
    strategy is a list of layer steps (a forward, a recomputed forward or a backward
    of one layer) with, after each, the units held on the accelerator and on the host:

    - ``"keep"``: every activation stays on the accelerator until its backward;
    - ``"offload"``: each activation moves to host memory once its layer's forward is
      done and comes back just before its backward (one unit on the accelerator at a
      time; the host holds the rest);
    - ``"checkpoint"``: ``segments`` segments; only segment inputs stay (the first
      is the chain's input, not a saved activation), each segment is recomputed
      before its backward, so the step is longer by the recomputed forwards.

    Args:
        n_layers: layers of the chain, at least 2.
        segments: checkpointed segments, between 1 and ``n_layers``.

    Returns:
        ``{name: {"device": [...], "host": [...], "recomputed": int}}``, the lists
        one entry per layer step.

    Example:
        >>> from bookkit.figures import saved_bytes_timelines
        >>> t = saved_bytes_timelines(4, 2)
        >>> max(t["keep"]["device"]), max(t["offload"]["device"]), t["checkpoint"]["recomputed"]
        (4, 1, 2)
    """
    if not isinstance(n_layers, int) or n_layers < 2:
        raise ValueError(f"n_layers must be an integer of at least 2, got {n_layers!r}")
    if not isinstance(segments, int) or not 1 <= segments <= n_layers:
        raise ValueError(f"segments must be an integer from 1 to n_layers={n_layers}, "
                         f"got {segments!r}")
    n = n_layers
    keep = {"device": list(range(1, n + 1)) + list(range(n - 1, -1, -1)),
            "host": [0] * (2 * n), "recomputed": 0}
    offload = {"device": [1] * n + [1] * (n - 1) + [0],
               "host": [i - 1 for i in range(1, n + 1)] + list(range(n - 2, -1, -1)) + [0],
               "recomputed": 0}
    # Segments as equal as they go (sizes differ by at most one layer). As in chapter
    # 4, the last segment runs normally; the others keep only their input and are
    # recomputed, their activations kept, just before their backward.
    sizes = [n // segments + (1 if i < n % segments else 0) for i in range(segments)]
    device, recomputed, held = [], 0, 0  # held: checkpoints (inputs of segments 2..k)
    for i, size in enumerate(sizes):
        last = i == segments - 1
        device += [held + (j if last else 1) for j in range(1, size + 1)]
        held += 0 if last else 1
    for i in reversed(range(segments)):
        size = sizes[i]
        if i < segments - 1:
            device += [held + j for j in range(1, size + 1)]
            recomputed += size
        device += [held + j for j in range(size - 1, -1, -1)]
        held -= 1 if i > 0 else 0
    checkpoint = {"device": device, "host": [0] * len(device), "recomputed": recomputed}
    return {"keep": keep, "offload": offload, "checkpoint": checkpoint}


STRATEGY_STYLE = {"keep": ("keep everything", "#616161", "-"),
                  "offload": ("offload to host", "#1565c0", "-"),
                  "checkpoint": ("checkpoint", "#c62828", "--")}


def offload_vs_checkpoint(n_layers: int = 8, segments: int = 3):
    """Chapter 18's idea in one figure: offloading keeps the accelerator as empty as
    checkpointing without recomputing anything; the saved bytes move to host memory
    (and back) instead.

    Two panels stacked (they stay readable on a phone): saved units on the
    accelerator, and on the host, after each layer step of `saved_bytes_timelines`.

    Args:
        n_layers: layers of the chain.
        segments: the checkpointed segments.

    Returns:
        The matplotlib Figure.

    Example:
        >>> from bookkit.figures import offload_vs_checkpoint
        >>> len(offload_vs_checkpoint().axes)
        2
    """
    import matplotlib.pyplot as plt

    lines = saved_bytes_timelines(n_layers, segments)
    fig, (dev, host) = plt.subplots(2, 1, figsize=(FIGURE_WIDTH_IN, 5.0), sharex=True,
                                    gridspec_kw={"height_ratios": [3, 2]})
    for name, line in lines.items():
        label, color, style = STRATEGY_STYLE[name]
        steps = range(1, len(line["device"]) + 1)
        extra = f" (+{line['recomputed']} forwards)" if line["recomputed"] else ""
        dev.step(steps, line["device"], where="post", color=color, ls=style, lw=2,
                 label=label + extra)
        if any(line["host"]):
            host.step(steps, line["host"], where="post", color=color, ls=style, lw=2)
    dev.set_ylabel("on the accelerator")
    host.set_ylabel("on the host")
    host.set_xlabel("layer steps (forward, recomputation, backward)")
    dev.set_title(f"Saved activations of a chain of {n_layers} layers, in layers' worth")
    dev.legend(loc="upper right", frameon=False)
    from matplotlib.ticker import MaxNLocator

    for ax in (dev, host):
        ax.set_ylim(0, n_layers + 0.5)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


TIMELINE_COLORS = {"all-gather": "tab:blue", "recompute": "tab:green",
                   "backward": "0.75", "reduce-scatter": "tab:orange"}
"""Colours of `collective_timelines`' events."""


def collective_timelines(timelines: dict, height: float = 3.6):
    """Chapter 17's timeline figure: one strip per backward pass, one tick per event in
    the order it ran; collectives drawn tall, recomputation and backward operations
    short (`TIMELINE_COLORS`).

    Args:
        timelines: ``{label: [event, ...]}``, events from ``TIMELINE_COLORS``, as
            `bookkit.distributed.sharding.backward_timelines` records them; a label's
            ``", "`` becomes a line break.
        height: the figure's height (inches).

    Returns:
        The matplotlib Figure.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from bookkit.figures import collective_timelines
        >>> fig = collective_timelines({"FSDP1, integration": ["all-gather", "recompute",
        ...                                                    "backward"],
        ...                             "DDP": ["backward", "backward"]})
        >>> ax = fig.axes[0]
        >>> len(ax.patches), ax.get_yticklabels()[0].get_text().splitlines()
        (5, ['FSDP1', 'integration'])
    """
    import matplotlib.pyplot as plt

    fig, ax = subplots(height=height)
    for row, events in enumerate(timelines.values()):
        for i, kind in enumerate(events):
            tall = kind in ("all-gather", "reduce-scatter")
            ax.bar(i, 0.8 if tall else 0.5, bottom=-row - (0.4 if tall else 0.25),
                   width=1.0, color=TIMELINE_COLORS[kind], linewidth=0)
    ax.set_yticks([-r for r in range(len(timelines))],
                  [label.replace(", ", "\n") for label in timelines])
    ax.set_xlabel("operations of one backward pass, in order")
    ax.set_xlim(-1, max(len(e) for e in timelines.values()) + 1)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in TIMELINE_COLORS.values()]
    ax.legend(handles, list(TIMELINE_COLORS), ncols=2, loc="lower center",
              bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.spines[["top", "right", "left"]].set_visible(False)
    fig.tight_layout()  # the row labels inside the book's width
    return fig

RESIDUAL_KINDS = {  # what print_saved_residuals says -> a label, a colour
    "from the argument x": ("model input", "tab:gray"),
    "output of add": ("block outputs", "0.75"),
    "output of mul": ("loss's 2y", "0.45"),
    "output of max": ("ReLU output", "tab:blue"),
    "output of div": ("ReLU derivative", "tab:red"),
    "output of dot_general": ("h @ w1", "tab:green"),
    "named 'pre'": ("pre (named)", "tab:olive"),
}
"""Chapter 21's kinds of residual (`bookkit.jaxmem.Residual.what`): label, colour."""


def residuals_by_kind(kept: dict, flops: dict, *, kinds: dict | None = None,
                      xlabel: str = "KiB kept for the backward pass",
                      xmax: float | None = None, height: float = 4.2):
    """Chapter 21's policy figure: one stacked bar per policy, the KiB of each kind of
    residual it keeps, and the FLOPs of its gradient written at the bar's end.

    Args:
        kept: ``{policy: [residual, ...]}`` (records with ``what`` and ``nbytes``, as
            `bookkit.jaxmem.activation_residuals` returns), drawn top to bottom.
        flops: ``{policy: FLOPs of the gradient}``, written in GFLOP.
        kinds: ``{what: (label, colour)}``, in stacking order; `RESIDUAL_KINDS` by
            default. A residual of another kind is not drawn.
        xlabel: the x axis' label.
        xmax: the x axis' right end (room for the FLOP labels); matplotlib's if None.
        height: the figure's height (inches).

    Returns:
        The matplotlib Figure.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from types import SimpleNamespace as R
        >>> from bookkit.figures import residuals_by_kind
        >>> kept = {"plain": [R(what="output of max", nbytes=2048),
        ...                   R(what="output of add", nbytes=1024)],
        ...         "nothing": [R(what="output of add", nbytes=1024)]}
        >>> ax = residuals_by_kind(kept, {"plain": 2e9, "nothing": 3e9}).axes[0]
        >>> len(ax.patches), [t.get_text() for t in ax.texts]
        (3, ['3.000 GFLOP', '2.000 GFLOP'])
    """
    kinds = RESIDUAL_KINDS if kinds is None else kinds
    fig, ax = subplots(height=height)
    names = list(kept)[::-1]
    seen = set()
    for y, name in enumerate(names):
        left = 0
        for what, (label, color) in kinds.items():
            kib = sum(r.nbytes for r in kept[name] if r.what == what) / 1024
            if kib:
                ax.barh(y, kib, left=left, color=color,
                        label=None if label in seen else label)
                seen.add(label)
                left += kib
        ax.text(left + 15, y, f"{flops[name] / 1e9:.3f} GFLOP", va="center")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel(xlabel)
    if xmax is not None:
        ax.set_xlim(0, xmax)
    ax.legend(ncols=2, loc="lower center", bbox_to_anchor=(0.4, 1.0), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig

MEMORY_KINDS = (("parameters", "#90a4ae"), ("gradients", "#607d8b"),
                ("optimizer", "#37474f"), ("activations", "#ef6c00"))
RECIPES = (("float32", "fp32", "none"), ("float32, checkpointed", "fp32", "full"),
           ("bfloat16", "bf16", "none"), ("bf16=True (autocast)", "bf16-autocast", "none"),
           ("bf16=True, checkpointed", "bf16-autocast", "full"))


def memory_by_kind(model: str = "GPT-2 (124M)", batch_size: int = 8, seq_len: int = 1024):
    """Chapter 22's idea in one figure: a training step's bytes in four kinds, for
    each recipe, from `bookkit.calculator`'s formula; checkpointing shrinks only the
    activations, the precision all four.

    Args:
        model: a key of `bookkit.calculator.PRESETS`.
        batch_size, seq_len: the batch, ``batch_size`` sequences of ``seq_len`` tokens.

    Returns:
        The matplotlib Figure (one horizontal bar per recipe, in GiB).

    Example:
        >>> from bookkit.figures import memory_by_kind
        >>> len(memory_by_kind().axes[0].patches)
        20
    """
    import matplotlib.pyplot as plt

    from bookkit import calculator

    if model not in calculator.PRESETS:
        raise ValueError(f"unknown model {model!r}; one of {sorted(calculator.PRESETS)}")
    config = calculator.PRESETS[model]()
    gib = 2 ** 30
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 4.4))
    for row, (label, precision, recompute) in enumerate(RECIPES):
        est = calculator.estimate_training_memory(
            config, batch_size=batch_size, seq_len=seq_len, precision=precision,
            recompute=recompute)
        left = 0.0
        for kind, color in MEMORY_KINDS:
            width = est[kind] / gib
            ax.barh(row, width, left=left, color=color,
                    label=kind if row == 0 else None)
            left += width
        ax.text(left + 0.15, row, f"{est['total'] / gib:.1f}", va="center")
    ax.set_yticks(range(len(RECIPES)), [r[0] for r in RECIPES])
    ax.invert_yaxis()
    ax.set_xlabel("GiB of one training step")
    ax.set_title(f"{model}, batch {batch_size} \u00d7 {seq_len} tokens, AdamW")
    # below the axes (past the tick labels and x label): no bar is hidden behind it
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), borderaxespad=3.2, ncols=2,
              frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


PHASE_SHADES = ("#eceff1", "#ffffff", "#eceff1", "#ffffff")


def phase_positions(phases: dict) -> list[float]:
    """The x of each allocator event when every phase is drawn one unit wide: event
    ``j`` of phase ``i`` (events ``first`` to ``last``) at ``i + (j - first) / (last -
    first)``, so a phase of ten events is as legible as one of a thousand.

    Args:
        phases: ``{phase: (first, last)}`` event ranges in order, each starting where
            the previous ends (``measure_step_trace``'s ``phases``).

    Returns:
        One x per event, from 0 to ``len(phases)``.

    Example:
        >>> from bookkit.figures import phase_positions
        >>> phase_positions({"a": (0, 2), "b": (2, 3)})
        [0.0, 0.5, 1.0, 2.0]
    """
    xs, expected = [], 0
    for i, (name, (first, last)) in enumerate(phases.items()):
        if first != expected or last < first:
            raise ValueError(f"phase {name!r} spans events {first}..{last}; phases must "
                             f"follow each other from event 0")
        width = max(last - first, 1)
        # An event at a boundary belongs to the phase it ends.
        xs += [i + (j - first) / width for j in range(first + (i > 0), last + 1)]
        expected = last
    return xs


def step_memory_trace(trace, estimate, title: str | None = None):
    """Chapter 23's step, like PyTorch's memory snapshot: the CPU allocator's bytes
    after every allocation and release of one training step, with the calculator's
    predicted points and peak drawn on it and each phase's measured peak marked.
    Each phase is drawn one unit wide (`phase_positions`): the loss takes a few
    events, the optimizer's step a thousand.

    Args:
        trace: ``bookkit.step_trace.measure_step_trace``'s result.
        estimate: ``bookkit.calculator.estimate_training_memory``'s result for the
            same step; each ``timeline`` entry whose name is one of the trace's marks
            (``"start"`` at the first event) is drawn there, and ``peak`` as a line.
        title: the axes' title (none by default).

    Returns:
        The matplotlib Figure (MiB against the step's phases).

    Example:
        >>> from bookkit.figures import step_memory_trace
        >>> trace = {"bytes": [0, 2 ** 20, 3 * 2 ** 20, 2 ** 20, 2 ** 20, 0],
        ...          "marks": {"forward": 2, "backward": 4, "optimizer": 5},
        ...          "phases": {"forward": (0, 1), "loss": (1, 2),
        ...                     "backward": (2, 4), "optimizer": (4, 5)},
        ...          "phase_peaks": {"forward": (1, 2 ** 20),
        ...                          "loss": (2, 3 * 2 ** 20),
        ...                          "backward": (2, 3 * 2 ** 20),
        ...                          "optimizer": (4, 2 ** 20)},
        ...          "peak": 3 * 2 ** 20}
        >>> est = {"timeline": {"start": 0, "forward": 3 * 2 ** 20},
        ...        "peak": 3 * 2 ** 20}
        >>> len(step_memory_trace(trace, est).axes[0].lines)
        4
    """
    import matplotlib.pyplot as plt

    for key in ("bytes", "marks", "phases", "phase_peaks", "peak"):
        if key not in trace:
            raise ValueError(f"trace has no {key!r}: pass measure_step_trace's result")
    for key in ("timeline", "peak"):
        if key not in estimate:
            raise ValueError(f"estimate has no {key!r}: pass estimate_training_memory's "
                             "result")
    mib = 2 ** 20
    xs = phase_positions(trace["phases"])
    if len(xs) != len(trace["bytes"]):
        raise ValueError(f"the phases cover {len(xs)} events, the trace has "
                         f"{len(trace['bytes'])}")
    series = [b / mib for b in trace["bytes"]]
    at = {"start": 0, **trace["marks"]}
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH_IN, 5.2))
    top = max(trace["peak"], estimate["peak"]) / mib
    for i, (shade, phase) in enumerate(zip(PHASE_SHADES, trace["phases"])):
        ax.axvspan(i, i + 1, color=shade, zorder=0, lw=0)
        ax.text(i + 0.5, top * 1.17, phase, ha="center", va="top")
    ax.plot(xs, series, color="#37474f", lw=1.2, label="measured (CPU allocator)")
    named = [(xs[at[k]], v / mib) for k, v in estimate["timeline"].items() if k in at]
    ax.plot([x for x, _ in named], [y for _, y in named], "o", ms=6, mfc="none",
            mec="#ef6c00", mew=1.8, label="predicted, at the same marks")
    ax.axhline(estimate["peak"] / mib, color="#ef6c00", ls="--", lw=1.2,
               label="predicted peak")
    peaks = [trace["phase_peaks"][p] for p in trace["phases"]]
    ax.plot([xs[j] for j, _ in peaks], [b / mib for _, b in peaks], "v",
            color="#c62828", ms=7, label="measured peak of each phase")
    for j, b in peaks:
        right = xs[j] > len(peaks) - 0.25      # near the right edge: label to the left
        ax.annotate(f"{b / mib:.1f}", (xs[j], b / mib), xytext=(-5 if right else 4, 3),
                    textcoords="offset points", color="#c62828",
                    ha="right" if right else "left")
    ax.set_ylim(0, top * 1.2)
    ax.set_xlim(0, len(trace["phases"]))
    ax.set_xticks([])
    ax.set_xlabel("the step's allocator events in order, each phase one unit wide")
    ax.set_ylabel("MiB allocated")
    if title:
        ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    add_legend(ax, "below")
    fig.tight_layout()
    return fig
