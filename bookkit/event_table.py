"""One training step, event by event, as minigrad's byte ledger saw it.

Chapter 2 introduces and shows this module (chapters 3 and 4 use it): `LayerTags` names
the layer behind every ledger event, `event_rows` turns a tracker's timeline into rows
(what each op kept or freed), `format_event_table` prints them.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from bookkit import fmt_bytes
from minigrad import memory
from minigrad.hooks import register_hooks
from minigrad.memory import BYTE_UNITS

__all__ = ["LayerTags", "EventRow", "event_rows", "format_event_table", "show_event_table"]


class LayerTags:
    """Names the layer behind every ledger event of a tracked step (shown in chapter 2).

    Wrap layers with ``tags.wrap(name, layer)`` and run the step inside ``with tags.track()
    as m:``, a ``minigrad.memory.track()`` that also records, for every event, the innermost
    wrapped layer running and whether the op recorded a graph node. A backward event gets
    the name of the layer whose forward created its node.

    Example:
        >>> import numpy as np
        >>> from minigrad import Tensor, nn
        >>> tags = LayerTags()
        >>> fc = tags.wrap("fc", nn.Linear(4, 2))
        >>> x = Tensor(np.ones((3, 4), np.float32), requires_grad=True)
        >>> with tags.track() as m:
        ...     fc(x).sum().backward()
        >>> tags.labels[0]
        ('fc', True)
    """

    def __init__(self):
        self.running: list[str] = []  # names of the wrapped layers running now, innermost last
        self.labels: list[tuple[str, bool]] = []  # one (layer, graph recorded) per ledger event

    def wrap(self, name: str, layer):
        """A function that runs ``layer(*args)`` with its events named ``name``."""
        if not callable(layer):
            raise TypeError(f"LayerTags.wrap: layer {name!r} is not callable ({type(layer).__name__})")

        def run(*args, **kwargs):
            self.running.append(name)
            try:
                return layer(*args, **kwargs)
            finally:
                self.running.pop()
        return run

    def _on_op(self, kind, fn, ctx, args, kwargs, out):
        # Called by the engine after every op ("forward") and every node's backward, like
        # the ledger, which records one timeline event per call.
        if kind == "forward":
            ctx.layer_name = self.running[-1] if self.running else ""
            self.labels.append((ctx.layer_name, ctx.recording))
        else:
            self.labels.append((getattr(ctx, "layer_name", ""), True))

    @contextmanager
    def track(self):
        """``minigrad.memory.track()`` (timeline on) that also labels every event."""
        self.labels = []
        handle = register_hooks(op=self._on_op)
        try:
            with memory.track() as m:
                yield m
        finally:
            handle.remove()


@dataclass
class EventRow:
    """One line of an event table (shown in chapter 2): the ``index``-th ledger event (from 1), its ``phase``
    ("forward", "recompute" or "backward"), ``layer`` and ``op``; ``saved_delta`` the
    change of saved-activation bytes it caused, ``saved_live`` and ``total_live`` the
    bytes live after it; ``note`` says in words what happened."""

    index: int
    phase: str
    layer: str
    op: str
    saved_delta: int
    saved_live: int
    total_live: int
    note: str


def _note(phase: str, recorded: bool, delta: int) -> str:
    """What an event did, in words (chapter 2's event table)."""
    if phase == "backward":
        return f"frees {fmt_bytes(-delta)}" if delta < 0 else "frees nothing"
    if not recorded:
        return "runs without a graph: nothing kept"
    if phase == "recompute":
        return f"rebuilds: keeps {fmt_bytes(delta)} again" if delta > 0 else "rebuilds (nothing new kept)"
    return f"keeps {fmt_bytes(delta)} for backward" if delta > 0 else "keeps nothing new"


def event_rows(m, tags: LayerTags | None = None) -> list[EventRow]:
    """The timeline of tracker ``m`` as `EventRow` s (shown in chapter 2), layers named by
    ``tags`` (the `LayerTags` that tracked the step) or left blank."""
    if not m.timeline:
        raise ValueError("event_rows: the tracker's timeline is empty (track with record_timeline=True)")
    labels = tags.labels if tags is not None else [("", True)] * len(m.timeline)
    if len(labels) != len(m.timeline):
        raise ValueError(f"event_rows: {len(labels)} labels for {len(m.timeline)} events; pass the "
                         f"LayerTags whose track() recorded this tracker")
    rows, before = [], int(m.start["activations"])
    for i, (ev, (layer, recorded)) in enumerate(zip(m.timeline, labels), start=1):
        live = int(ev.live["activations"])
        rows.append(EventRow(i, ev.phase, layer, ev.op, live - before, live, int(ev.live["total"]),
                             _note(ev.phase, recorded, live - before)))
        before = live
    return rows


def format_event_table(rows, unit: str = "KiB") -> str:
    """A fixed-width text table of `EventRow` s, bytes in ``unit`` ("B", "KiB" or "MiB"):
    the console form of `show_event_table`. Shown in chapter 2."""
    div = BYTE_UNITS.get(unit) if unit != "GiB" else None
    if div is None:
        raise ValueError(f"format_event_table: unit must be 'B', 'KiB' or 'MiB', got {unit!r}")
    head = (f"{'#':>3}  {'phase':<9}  {'layer':<6}  {'op':<15}  {'saved +/-':>9}  "
            f"{'saved':>7}  {'all':>7}  what happened")
    units = f"{'':>3}  {'':<9}  {'':<6}  {'':<15}  {'(' + unit + ')':>9}  {'(' + unit + ')':>7}  {'(' + unit + ')':>7}"
    lines = [head, units, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.index:>3}  {r.phase:<9}  {r.layer:<6}  {r.op:<15}  {r.saved_delta / div:>+9.1f}  "
                     f"{r.saved_live / div:>7.1f}  {r.total_live / div:>7.1f}  {r.note}")
    return "\n".join(lines)


def show_event_table(rows, unit: str = "KiB") -> None:
    """Display `EventRow` s as an HTML table (`bookkit.show_table`), bytes in ``unit``
    ("B", "KiB" or "MiB"). Shown in chapter 2; the HTML form fits any page width."""
    from bookkit.tables import show_table
    div = {"B": 1, "KiB": 1024, "MiB": 1024**2}.get(unit)
    if div is None:
        raise ValueError(f"show_event_table: unit must be 'B', 'KiB' or 'MiB', got {unit!r}")
    header = ["#", "phase", "layer", "op", f"saved +/- ({unit})", f"saved ({unit})",
              f"all ({unit})", "what happened"]
    show_table(header, [[r.index, r.phase, r.layer, r.op, f"{r.saved_delta / div:+.1f}",
                         f"{r.saved_live / div:.1f}", f"{r.total_live / div:.1f}", r.note]
                        for r in rows])
