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
5. **Checkpointing and recomputation.** A checkpoint keeps its inputs at the
   engine's one saving point (activations, shared with anything else that saves
   the same buffer); what the checkpointed function's ops would have saved is not
   kept (non-reentrant: a saved-tensor hook stores a handle instead; reentrant:
   the function runs under ``no_grad``). In backward the function is run again on
   the same input buffers (no new bytes for the inputs), with grad enabled: the
   recomputed arrays are activations again, each released right after the node
   that needs it has run backward; the inputs are released after the segment's
   last node.
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

Timeline, counts and FLOPs
--------------------------
``m.timeline`` holds one `Event` after every op execution (phase ``"forward"``
or ``"recompute"``, op name) and after every node's backward (phase
``"backward"``), with the live bytes per category (and ``"total"``) *after*
the event and the FLOPs of that event. ``m.counts`` is ``{"forward": Counter,
"recompute": Counter, "backward": Counter}`` mapping op name (``"matmul"``,
``"relu"``, ...) to executions. ``m.flops`` is ``{"forward": int, "recompute":
int, "backward": int}``, the floating-point operations of each phase, and
``m.flops_by_op[phase][op]`` splits them by op; each op's count follows the
formula written next to it in `minigrad.ops` (matmul ``2 m n k``, elementwise one
per element, ...): exact, deterministic and the same on every machine. Ops run
while a checkpoint recomputes (including nested checkpoints inside it) count as
``"recompute"``; ops run during a backward pass outside a recomputation (inside a
custom backward) count as ``"backward"``; all others as ``"forward"``.
"""
from __future__ import annotations

import gc
import sys
import weakref
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from minigrad import hooks as _hooks
from minigrad import tensor as _tensor

__all__ = ["CATEGORIES", "ROLES", "PHASES", "Event", "Tracker", "track", "live_bytes", "register",
           "hold", "release", "phase", "base_buffer", "category", "gc_paused", "BYTE_UNITS",
           "byte_unit", "fmt_bytes"]

#: Role categories, highest priority first; "temporaries" is the fallback.
ROLES = ("parameters", "buffers", "optimizer", "gradients", "activations")
CATEGORIES = ("parameters", "buffers", "gradients", "activations", "optimizer", "temporaries")
#: The phases of a training step that the ledger tells apart.
PHASES = ("forward", "recompute", "backward")
_PRIO = {c: i for i, c in enumerate(ROLES + ("temporaries",))}


@dataclass
class Event:
    """One timeline entry: ``phase`` ("forward", "backward" or "recompute"), ``op`` name,
    ``live`` bytes per category plus ``"total"`` after the event, and the event's ``flops``."""

    phase: str
    op: str
    live: dict
    flops: int = 0


def base_buffer(a: np.ndarray) -> np.ndarray:
    """The array that owns ``a``'s memory: ``a`` itself, or the base of a view (of a view...).

    The ledger identifies arrays by this buffer (rule 2): a view and its base are one array.

    Example:
        >>> a = np.zeros((4, 4)); base_buffer(a.T[1:]) is a
        True
    """
    b = a
    while isinstance(b.base, np.ndarray):
        b = b.base
    return b


@contextmanager
def gc_paused():
    """Context manager: pause Python's cyclic garbage collector inside the block (rule 7),
    restoring its previous state on exit: frees then happen only where the code drops
    references. ``track()`` uses it; so does anything that reads the ledger's figures.

    Example:
        >>> with gc_paused():
        ...     before = live_bytes()
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# A grader's audit hook keeps its own copy of the ledger's live bytes (from LEDGER_EVENT,
# raised by the ledger's own methods: a buffer counted, an array object watched, a buffer
# moved to another category, freed) and of each tracker's start, peaks, end, timeline, op
# counts and FLOPs (TRACKER_EVENT: `track` entered and left, each op), so that a ledger or
# a tracker edited while a test measures is seen. With no audit hook installed an event
# costs one C call.
LEDGER_EVENT = "minigrad.memory.ledger"
TRACKER_EVENT = "minigrad.memory.tracker"
_audit = sys.audit


class _Entry:
    __slots__ = ("nbytes", "cat", "roles", "refs")

    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.cat = "temporaries"
        self.roles = {}  # role -> number of holds
        self.refs = 0  # registered array objects (base or views) still alive


class _Ledger:
    """Process-wide live bytes per category. Always on (a few dict operations per
    array); `track` only adds peaks, a timeline, counts and FLOPs on top."""

    def __init__(self):
        self.entries: dict[int, _Entry] = {}
        self.live = dict.fromkeys(CATEGORIES, 0)
        self.trackers: list[Tracker] = []
        self.phase = None  # set by `phase`; None: inferred (see `current_phase`)
        # id(weak reference) -> (the reference, buffer key): one per counted array object.
        # A plain weakref with a callback costs a fraction of weakref.finalize, and the
        # ledger runs at every array event.
        self._watch: dict[int, tuple] = {}

    # --- helpers ---------------------------------------------------------
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
            _audit(LEDGER_EVENT, "cat", e, new)

    def _entry(self, a):
        base = base_buffer(a)
        key = id(base)
        e = self.entries.get(key)
        if e is None:
            e = self.entries[key] = _Entry(base.nbytes)
            self.live["temporaries"] += e.nbytes
            _audit(LEDGER_EVENT, "new", e, e.nbytes)
        return key, e

    # --- the three primitives --------------------------------------------
    def register(self, a):
        """Count array ``a`` (its buffer) until the object ``a`` is freed."""
        key, e = self._entry(a)
        e.refs += 1
        self._watch_until_freed(a, key, e)
        if self.trackers:
            self._changed()

    def _watch_until_freed(self, a, key, e):
        r = weakref.ref(a, self._freed)
        self._watch[id(r)] = (r, key)
        _audit(LEDGER_EVENT, "watch", e, r)

    def _freed(self, r):
        entry = self._watch.pop(id(r), None)
        if entry is not None:
            self._dead(entry[1])

    def _dead(self, key):
        e = self.entries.get(key)
        if e is None:
            return
        e.refs -= 1
        if e.refs <= 0:
            del self.entries[key]
            self.live[e.cat] -= e.nbytes
            _audit(LEDGER_EVENT, "dead", e)
            if self.trackers:
                self._changed()

    def hold(self, a, role):
        """Give the array ``a`` the role ``role`` once more."""
        if role not in _PRIO or role == "temporaries":
            raise ValueError(f"memory.hold: unknown role {role!r}; allowed: {list(ROLES)}")
        key, e = self._entry(a)
        # Also count the buffer for as long as this object lives: ``a`` may be a view
        # that outlives every registered object of the same buffer.
        e.refs += 1
        self._watch_until_freed(a, key, e)
        e.roles[role] = e.roles.get(role, 0) + 1
        if _PRIO[role] < _PRIO[e.cat]:
            self._recategorize(e)
        if self.trackers:
            self._changed()

    def release(self, a, role):
        """Drop one ``role`` hold on ``a`` (no-op if ``a`` is no longer counted)."""
        e = self.entries.get(id(base_buffer(a)))
        if e is None or not e.roles.get(role):
            return
        e.roles[role] -= 1
        if e.roles[role] == 0:
            del e.roles[role]
            if e.cat == role:
                self._recategorize(e)
                if self.trackers:
                    self._changed()

    # --- op events (the engine's op hook) ------------------------------------
    def current_phase(self) -> str:
        """The phase new forward ops belong to: the one set by `phase`, otherwise
        "backward" while a backward pass runs (ops inside a custom backward), else "forward"."""
        if self.phase is not None:
            return self.phase
        return "backward" if _tensor.current_backward() is not None else "forward"

    def op(self, kind, fn, ctx, args, kwargs, output):
        if not self.trackers:
            return
        if kind == "backward":
            phase_name, flops = "backward", fn.backward_flops(ctx)
        else:
            arrays = [a.data if isinstance(a, _tensor.Tensor) else a for a in args]
            phase_name, flops = self.current_phase(), fn.flops(ctx, output.data, *arrays, **kwargs)
        flops = int(flops)
        name = fn.name()
        for t in self.trackers:
            t._event(phase_name, name, self.live, flops)


_LEDGER = _Ledger()
register = _LEDGER.register
hold = _LEDGER.hold
release = _LEDGER.release
# The ledger observes the engine through its one hook registry.
_hooks.register_hooks(array=_LEDGER.register, hold=_LEDGER.hold, release=_LEDGER.release,
                       op=_LEDGER.op, phase=lambda name: phase(name))


BYTE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}  # binary units, as the book prints


def byte_unit(max_bytes: float) -> tuple[str, float]:
    """``(unit, divisor)`` for values up to ``max_bytes``: ``"bytes"`` below 1 KiB, then
    KiB, MiB, GiB (powers of 1024): the unit of a plot's axis.

    Example:
        >>> byte_unit(5 * 1024 ** 2)
        ('MiB', 1048576.0)
    """
    for unit in ("GiB", "MiB", "KiB"):
        if max_bytes >= BYTE_UNITS[unit]:
            return unit, float(BYTE_UNITS[unit])
    return "bytes", 1.0


def fmt_bytes(n_bytes: float, digits: int = 1) -> str:
    """Human-readable binary size, the one byte formatter of minigrad and bookkit.

    Example:
        >>> fmt_bytes(1536), fmt_bytes(512), fmt_bytes(-3 * 2**20, 2)
        ('1.5 KiB', '512 B', '-3.00 MiB')
    """
    if n_bytes < 0:
        return "-" + fmt_bytes(-n_bytes, digits)
    unit, div = byte_unit(n_bytes)
    return f"{n_bytes:.0f} B" if div == 1 else f"{n_bytes / div:.{digits}f} {unit}"


def live_bytes() -> dict:
    """Live bytes per category right now, plus ``"total"``.

    Example:
        >>> live_bytes()["activations"]
        0
    """
    d = dict(_LEDGER.live)
    d["total"] = sum(d.values())
    return d


def category(a: np.ndarray) -> str | None:
    """The ledger category of ``a``'s buffer right now (``"activations"``,
    ``"parameters"``, ...), or None if minigrad does not count it.

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> w = minigrad.nn.Parameter(np.ones(3)); category(w.data)
        'parameters'
    """
    e = _LEDGER.entries.get(id(base_buffer(a)))
    return None if e is None else e.cat


def phase(name: str):
    """Set the ledger's phase inside the block: ``"forward"``, ``"recompute"`` or
    ``"backward"`` (checkpointing sets ``"recompute"`` while it re-runs a segment).

    Args:
        name: one of `PHASES`; checked at the call, before the block is entered.

    Returns:
        A context manager; the previous phase is restored when the block exits.

    Raises:
        ValueError: ``name`` is not one of `PHASES`.

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> x = minigrad.Tensor(np.ones(4, np.float32), requires_grad=True)
        >>> with track() as m, phase("recompute"):
        ...     y = x.tanh()          # its ops count as recomputation
        >>> dict(m.counts["recompute"])
        {'tanh': 1}
    """
    if name not in PHASES:
        raise ValueError(f"memory.phase: unknown phase {name!r}; allowed: {list(PHASES)}")
    return _phase(name)


@contextmanager
def _phase(name: str):
    old = _LEDGER.phase
    _LEDGER.phase = name
    try:
        yield
    finally:
        _LEDGER.phase = old


class Tracker:
    """What ``track()`` yields.

    Attributes:
        peak: bytes by category and ``"total"``, each the maximum over the region.
        start, end: bytes live when tracking began and ended.
        peak_increase: ``peak - start`` per key.
        timeline: list of `Event` (empty with ``record_timeline=False``).
        counts: ``{"forward"|"recompute"|"backward": Counter(op -> executions)}``.
        flops: ``{"forward"|"recompute"|"backward": int}`` floating-point operations.
        flops_by_op: ``{phase: Counter(op -> flops)}``.
    """

    def __init__(self, record_timeline: bool = True):
        self.start = live_bytes()
        self.peak = dict(self.start)
        self.end: dict | None = None
        self.timeline: list[Event] = []
        self.counts = {p: Counter() for p in PHASES}
        self.flops = dict.fromkeys(PHASES, 0)
        self.flops_by_op = {p: Counter() for p in PHASES}
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

    def _event(self, phase_name, op, live, flops):
        _audit(TRACKER_EVENT, "event", self, phase_name, op, flops)
        self.counts[phase_name][op] += 1
        if flops:
            self.flops[phase_name] += flops
            self.flops_by_op[phase_name][op] += flops
        if self._record:
            d = dict(live)
            d["total"] = sum(live.values())
            self.timeline.append(Event(phase_name, op, d, flops))

    @property
    def peak_increase(self) -> dict:
        """``peak[c] - start[c]`` for every key: what the tracked region added at its peak."""
        return {c: self.peak[c] - self.start[c] for c in self.peak}

    def ops(self, phase_name: str) -> int:
        """Total op executions in ``phase_name`` ("forward", "recompute" or "backward")."""
        if phase_name not in PHASES:
            raise ValueError(f"Tracker.ops: unknown phase {phase_name!r}; allowed: {list(PHASES)}")
        return sum(self.counts[phase_name].values())

    def __repr__(self):
        from_ = ", ".join(f"{k}={v}" for k, v in self.peak.items())
        return f"Tracker(peak: {from_}; flops: {self.flops})"


@contextmanager
def track(record_timeline: bool = True):
    """Track peaks, a timeline, op counts and FLOPs over the ``with`` block.

    Args:
        record_timeline: keep one `Event` per op (False keeps only peaks, counts and
            FLOPs, for long loops).

    Yields:
        A `Tracker`, complete (``end`` set) once the block exits.

    The cyclic garbage collector is paused inside the block (rule 7).

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> x = minigrad.Tensor(np.ones(1024, np.float32), requires_grad=True)
        >>> with track() as m:
        ...     loss = x.exp().sum()       # exp saves its 4 KiB output
        ...     loss.backward()
        >>> m.peak["activations"], m.counts["forward"]["exp"]
        (4096, 1)
    """
    with gc_paused():
        t = Tracker(record_timeline)
        _LEDGER.trackers.append(t)
        _audit(TRACKER_EVENT, "enter", t)
        try:
            yield t
        finally:
            _LEDGER.trackers.remove(t)
            t.end = live_bytes()
            _audit(TRACKER_EVENT, "exit", t)
