"""The byte ledger: every array minigrad holds, by category, exact by construction.

Usage::

    with minigrad.memory.track() as m:
        loss = model(x).sum()
        loss.backward()
    m.peak["activations"]        # bytes, int
    m.timeline[-1]               # Event(phase, op, live={category: bytes})
    m.counts["forward"]["matmul"], m.counts["recompute"]["matmul"]

The rules (PLAN's dynamic program and the book's chapters rely on them)
------------------------------------------------------------------------
1. **What is counted.** A NumPy array is counted from the moment minigrad
   *registers* it until Python frees it. minigrad registers: the ``.data`` of
   every Tensor (user inputs, parameters and every op output), every gradient
   array an op's ``backward`` returns, every ``.grad``, every buffer and every
   piece of optimizer state. Scratch arrays that NumPy creates *inside* one op's
   ``forward``/``backward`` and drops before the op returns are not counted.
2. **Each distinct array once.** Arrays are identified by their underlying
   buffer: a view (``reshape``, ``transpose``, ``x.T``, ``broadcast_to``) and
   its base are one array, counted with the base's ``nbytes``. The buffer stays
   counted while any registered view of it is alive.
3. **Categories by role, highest role wins.** An array's category is the first
   of these roles it currently has, otherwise ``"temporaries"``:

   ``parameters``  the ``.data`` of an ``nn.Parameter`` (held for the Parameter's life);
   ``buffers``     arrays a Module registered with ``register_buffer`` (BatchNorm running stats);
   ``optimizer``   optimizer state (AdamW ``exp_avg``/``exp_avg_sq``, SGD momentum);
   ``gradients``   the array that is currently some tensor's ``.grad``;
   ``activations`` arrays *saved for backward*: everything passed to
                   ``ctx.save_for_backward`` by a node of a graph being recorded.
                   That is the engine's one saving point; a checkpoint node saves its
                   inputs there too, so checkpoint inputs are activations. The role is
                   taken when the op's forward saves the array and dropped right after
                   that node's backward has run (kept with ``retain_graph=True``), or
                   when the graph is freed without a backward;
   ``temporaries`` everything else registered: op outputs alive only as tensor values
                   (the graph links nodes, not tensors, so an output that no node saved
                   is freed as soon as the code drops the tensor, as in torch)
                   (e.g. under ``no_grad``, the logits you still hold, a checkpoint's
                   output), user inputs, and gradient arrays flowing during backward
                   before they are consumed or become a ``.grad``.

   So an array saved by two nodes (layer ``i``'s output that layer ``i+1`` saves
   as its input and that layer ``i`` saves as its output) counts once; a
   saved view of a parameter (``W.T`` in ``matmul``) counts as a parameter.
4. **Under ``no_grad``** nothing is saved, so a forward run there (the first
   forward of a checkpointed segment) adds no activations; its intermediate
   outputs are temporaries that die as soon as the next op no longer needs them.
5. **Checkpointing and recomputation.** ``checkpoint(fn, x)`` saves ``x`` (one
   activation, shared with anything else that saves the same buffer). In
   backward the node re-runs ``fn`` on a detached tensor that *shares* ``x``'s
   buffer (no new bytes), with grad enabled: the recomputed nodes save their
   arrays as in a normal forward (activations again), the recomputed segment is
   back-propagated at once, its saved arrays are released node by node, and
   finally the checkpoint node releases ``x``.
6. **Peaks.** The ledger updates live bytes on every registration, role change
   and free, and a tracker updates its per-category peaks at each change, so
   ``m.peak[c]`` is the true maximum over the region of category ``c``, and
   ``m.peak["total"]`` the maximum of the sum (not the sum of the maxima).
   Peaks start from the bytes live when ``track()`` is entered.
7. **No stray garbage collection.** Python's cyclic garbage collector runs at
   moments that depend on the whole history of the process; if it freed an old,
   unreachable graph in the middle of a tracked region, that region's figures
   would depend on what ran before it. ``track()`` therefore pauses the cyclic
   collector for the region (reference counting still frees everything the
   region's own code drops, which is all that minigrad's graphs need) and
   restores it on exit.

Timeline and counts
-------------------
``m.timeline`` holds one `Event` after every op execution (phase ``"forward"``
or ``"recompute"``, op name) and after every node's backward (phase
``"backward"``), with the live bytes per category (and ``"total"``) *after*
the event. ``m.counts`` is ``{"forward": Counter, "recompute": Counter,
"backward": Counter}`` mapping op name (``"matmul"``, ``"relu"``, ...,
``"checkpoint"`` for the checkpoint node itself) to executions. Ops run in a
checkpointed segment's first (no-grad) forward count as ``"forward"``; ops run
while a checkpoint recomputes (including nested checkpoints inside it) count as
``"recompute"``.
"""
from __future__ import annotations

import gc
import weakref
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

__all__ = ["CATEGORIES", "Event", "Tracker", "track", "live_bytes", "register", "hold", "release"]

#: Role categories, highest priority first; "temporaries" is the fallback.
ROLES = ("parameters", "buffers", "optimizer", "gradients", "activations")
CATEGORIES = ("parameters", "buffers", "gradients", "activations", "optimizer", "temporaries")
_PRIO = {c: i for i, c in enumerate(ROLES + ("temporaries",))}


@dataclass
class Event:
    """One timeline entry: ``phase`` ("forward", "backward" or "recompute"),
    ``op`` name, and ``live`` bytes per category plus ``"total"`` after the event."""

    phase: str
    op: str
    live: dict


class _Entry:
    __slots__ = ("nbytes", "cat", "roles", "refs")

    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.cat = "temporaries"
        self.roles = {}  # role -> number of holds
        self.refs = 0  # registered array objects (base or views) still alive


class _Ledger:
    """Process-wide live bytes per category. Always on (a few dict operations per
    array); `track` only adds peaks, a timeline and counts on top."""

    def __init__(self):
        self.entries: dict[int, _Entry] = {}
        self.live = dict.fromkeys(CATEGORIES, 0)
        self.trackers: list[Tracker] = []
        self.phase = "forward"

    # --- helpers ---------------------------------------------------------
    @staticmethod
    def _base(a):
        b = a
        while isinstance(b.base, np.ndarray):
            b = b.base
        return b

    def _changed(self):
        for t in self.trackers:
            t._observe(self.live)

    def _recategorize(self, e):
        new = "temporaries"
        for r in ROLES:
            if e.roles.get(r):
                new = r
                break
        if new != e.cat:
            self.live[e.cat] -= e.nbytes
            self.live[new] += e.nbytes
            e.cat = new

    def _entry(self, a):
        base = self._base(a)
        key = id(base)
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = _Entry(base.nbytes)
            self.live["temporaries"] += e.nbytes
        return key, e

    # --- the three primitives --------------------------------------------
    def register(self, a):
        """Count array ``a`` (its buffer) until the object ``a`` is freed."""
        key, e = self._entry(a)
        e.refs += 1
        weakref.finalize(a, self._dead, key).atexit = False
        if self.trackers:
            self._changed()

    def _dead(self, key):
        e = self.entries.get(key)
        if e is None:
            return
        e.refs -= 1
        if e.refs <= 0:
            del self.entries[key]
            self.live[e.cat] -= e.nbytes
            if self.trackers:
                self._changed()

    def hold(self, a, role):
        """Give the (registered) array ``a`` the role ``role`` once more."""
        key, e = self._entry(a)
        # Also count the buffer for as long as this object lives: ``a`` may be a view
        # that outlives every registered object of the same buffer.
        e.refs += 1
        weakref.finalize(a, self._dead, key).atexit = False
        e.roles[role] = e.roles.get(role, 0) + 1
        if _PRIO[role] < _PRIO[e.cat]:
            self._recategorize(e)
        if self.trackers:
            self._changed()

    def release(self, a, role):
        """Drop one ``role`` hold on ``a`` (no-op if ``a`` is no longer counted)."""
        e = self.entries.get(id(self._base(a)))
        if e is None or not e.roles.get(role):
            return
        e.roles[role] -= 1
        if e.roles[role] == 0:
            del e.roles[role]
            if e.cat == role:
                self._recategorize(e)
                if self.trackers:
                    self._changed()

    # --- events ----------------------------------------------------------
    def event(self, op, phase=None):
        if not self.trackers:
            return
        phase = phase or self.phase
        for t in self.trackers:
            t._event(phase, op, self.live)


_LEDGER = _Ledger()
register = _LEDGER.register
hold = _LEDGER.hold
release = _LEDGER.release


def live_bytes() -> dict:
    """Live bytes per category right now, plus ``"total"``."""
    d = dict(_LEDGER.live)
    d["total"] = sum(d.values())
    return d


@contextmanager
def phase(name: str):
    """Set the ledger's phase ("forward", "backward", "recompute") inside the block."""
    old = _LEDGER.phase
    _LEDGER.phase = name
    try:
        yield
    finally:
        _LEDGER.phase = old


class Tracker:
    """What ``track()`` yields. ``peak`` (bytes by category and ``"total"``),
    ``start`` (bytes live when tracking began), ``end`` (bytes live when it ended),
    ``peak_increase`` (peak minus start), ``timeline`` (list of `Event`),
    ``counts`` (``{"forward"|"recompute"|"backward": Counter(op -> executions)}``)."""

    def __init__(self, record_timeline: bool = True):
        self.start = live_bytes()
        self.peak = dict(self.start)
        self.end: dict | None = None
        self.timeline: list[Event] = []
        self.counts = {"forward": Counter(), "recompute": Counter(), "backward": Counter()}
        self._record = record_timeline

    def _observe(self, live):
        total = 0
        peak = self.peak
        for c, v in live.items():
            total += v
            if v > peak[c]:
                peak[c] = v
        if total > peak["total"]:
            peak["total"] = total

    def _event(self, phase, op, live):
        self.counts[phase][op] += 1
        if self._record:
            d = dict(live)
            d["total"] = sum(live.values())
            self.timeline.append(Event(phase, op, d))

    @property
    def peak_increase(self) -> dict:
        """``peak[c] - start[c]`` for every key: what the tracked region added at its peak."""
        return {c: self.peak[c] - self.start[c] for c in self.peak}

    def ops(self, phase: str) -> int:
        """Total op executions in ``phase``."""
        return sum(self.counts[phase].values())

    def __repr__(self):
        from_ = ", ".join(f"{k}={v}" for k, v in self.peak.items())
        return f"Tracker(peak: {from_})"


@contextmanager
def track(record_timeline: bool = True):
    """Track peaks, a timeline and op counts over the ``with`` block.

    ``record_timeline=False`` keeps only peaks and counts (for long loops).
    The cyclic garbage collector is paused inside the block (rule 7)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    t = Tracker(record_timeline)
    _LEDGER.trackers.append(t)
    try:
        yield t
    finally:
        _LEDGER.trackers.remove(t)
        t.end = live_bytes()
        if gc_was_enabled:
            gc.enable()
