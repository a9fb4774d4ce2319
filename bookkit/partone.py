"""Helpers shared by Part I of the book (chapters 1-6, minigrad).

Chapters 1-3 and 4-6 add their functions here; the notebooks import them instead of
copying code from one another. Everything works on minigrad alone (NumPy).
"""
from __future__ import annotations

import ctypes
import gc
import re
import time
import weakref
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import numpy as np

import minigrad
from bookkit import fmt_bytes
from minigrad import Tensor, memory, nn, no_grad, random
from minigrad.checkpoint import checkpoint_sequential
from minigrad.viz import byte_unit

__all__ = [
    "block_chain",
    "run_chain",
    "ChainStep",
    "measure_chain_step",
    "time_chain_steps",
    "ChainTimes",
    "blas_threads",
    "loglog_slope",
    "gradient_check",
    "gradcheck",
    "GradcheckError",
]


# --- chapters 4-5: chains of blocks, measured -----------------------------------------

def block_chain(widths, hidden, seed: int = 0, activation: str = "tanh", dtype=np.float32) -> list:
    """A chain of ``n`` MLP blocks ``Linear(widths[i], hidden[i]) -> act -> Linear(hidden[i], widths[i+1])``.

    ``widths``: ``n + 1`` boundary widths (the chain's input is ``(batch, widths[0])``,
    block ``i`` maps ``(batch, widths[i])`` to ``(batch, widths[i+1])``); ``hidden``:
    ``n`` inner widths, or one int for all blocks. For a batch ``b`` in float32,
    block ``i`` saves for backward its input (``4 b widths[i]`` bytes) and its
    activation's output (``4 b hidden[i]`` bytes; ``activation`` is ``"tanh"`` or
    ``"relu"``, both save their output); its output is saved by the next block.
    Parameters are drawn from ``minigrad.random`` seeded with ``seed``."""
    widths = [int(w) for w in widths]
    n = len(widths) - 1
    if n < 1:
        raise ValueError(f"block_chain: widths needs at least 2 entries (n + 1 boundaries), got {widths}")
    hidden = [int(hidden)] * n if np.ndim(hidden) == 0 else [int(h) for h in hidden]
    if len(hidden) != n:
        raise ValueError(f"block_chain: hidden has {len(hidden)} entries, expected n={n} "
                         f"(one per block, len(widths) - 1)")
    if min(widths) < 1 or min(hidden) < 1:
        raise ValueError(f"block_chain: widths and hidden sizes must be >= 1, got {widths}, {hidden}")
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
    if activation not in acts:
        raise ValueError(f"block_chain: activation must be one of {sorted(acts)}, got {activation!r}")
    random.manual_seed(seed)
    return [nn.Sequential(nn.Linear(widths[i], hidden[i], dtype=dtype), acts[activation](),
                          nn.Linear(hidden[i], widths[i + 1], dtype=dtype)) for i in range(n)]


def run_chain(layers, x, plan=None):
    """Output of ``layers`` applied in turn to ``x``: plainly (``plan=None``) or through
    ``minigrad.checkpoint.checkpoint_sequential(layers, plan, x)`` (``plan``: a number
    of segments, a list of segment starts, a `minigrad.plan` plan or a schedule such as
    ``minigrad.plan.revolve(n, slots)``)."""
    if plan is None:
        h = x
        for layer in layers:
            h = layer(h)
        return h
    return checkpoint_sequential(layers, plan, x)


@dataclass
class ChainStep:
    """One forward + backward of ``run_chain(...).sum()``, as the byte ledger saw it.

    ``peak_activations``: peak bytes of saved activations during the step;
    ``peak_total``: peak bytes of everything the step holds for this chain: its
    parameters and input, gradients, saved activations and temporaries (both
    measured by ``minigrad.memory.track`` relative to what was live before, so other
    objects alive in the process do not count);
    ``forward_ops``: op executions of the forward pass (checkpoint nodes not
    counted); ``recompute_ops``: op executions repeated in backward (likewise);
    ``forward_flops``, ``recompute_flops``, ``backward_flops``: the ledger's FLOPs of each
    phase (``m.flops``; exact, the same on every machine); ``grads``: copies of the
    parameters' gradients after the step (a list of arrays)."""

    peak_activations: int
    peak_total: int
    forward_ops: int
    recompute_ops: int
    grads: list = field(repr=False)
    forward_flops: int = 0
    recompute_flops: int = 0
    backward_flops: int = 0

    @property
    def extra_forwards(self) -> float:
        """Recomputed op executions as a fraction of one forward pass."""
        return self.recompute_ops / self.forward_ops

    @property
    def extra_forward_flops(self) -> float:
        """Recomputed FLOPs as a fraction of the forward pass's FLOPs."""
        return self.recompute_flops / self.forward_flops


def _params(layers):
    return [p for layer in layers for p in layer.parameters()]


def measure_chain_step(layers, x, plan=None, seed: int = 0) -> ChainStep:
    """Run one forward and backward of ``run_chain(layers, x, plan).sum()`` under
    ``minigrad.memory.track`` and report bytes and op counts (see `ChainStep`).

    ``x``: a minigrad Tensor ``(batch, widths[0])``. Gradients are reset first;
    ``minigrad.random`` is seeded with ``seed`` (dropout masks are reproducible)."""
    for p in _params(layers):
        p.grad = None
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        y = run_chain(layers, x, plan)
        y.sum().backward()
        del y
    grads = [p.grad.copy() for p in _params(layers)]
    for p in _params(layers):
        p.grad = None
    # Checkpoint nodes are bookkeeping events, not forward work (nested ones are created
    # again during recomputation).
    fwd = m.ops("forward") - m.counts["forward"].get("checkpoint", 0)
    recomputed = m.ops("recompute") - m.counts["recompute"].get("checkpoint", 0)
    # The ledger counts every array alive in the process, so subtract what was live
    # before the step (other models in the notebook) and add back this chain's own
    # parameters and input, which were live before it too.
    own = sum(p.nbytes for p in _params(layers)) + x.nbytes
    peak_total = m.peak["total"] - m.start["total"] + own
    peak_act = m.peak["activations"] - m.start["activations"]
    return ChainStep(peak_activations=int(peak_act), peak_total=int(peak_total),
                     forward_ops=int(fwd), recompute_ops=int(recomputed), grads=grads,
                     forward_flops=m.flops["forward"], recompute_flops=m.flops["recompute"],
                     backward_flops=m.flops["backward"])


def _openblas():
    """``(set, get)`` for the number of threads of the OpenBLAS NumPy loaded, or None."""
    try:
        maps = open("/proc/self/maps").read()
    except OSError:  # not Linux
        return None
    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps))):
        lib = ctypes.CDLL(path)
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                try:
                    return (getattr(lib, f"{prefix}_set_num_threads{suffix}"),
                            getattr(lib, f"{prefix}_get_num_threads{suffix}"))
                except AttributeError:
                    continue
    return None


@contextmanager
def blas_threads(n: int):
    """Run the block with NumPy's OpenBLAS limited to ``n`` threads (no-op elsewhere).

    Timing on a small shared machine: a multi-threaded BLAS whose threads compete with
    other processes for the cores stalls erratically (a 0.3 s step can take seconds),
    which would swamp the differences being measured."""
    found = _openblas()
    if found is None:
        yield
        return
    set_threads, get_threads = found
    old = get_threads()
    set_threads(int(n))
    try:
        yield
    finally:
        set_threads(old)


@dataclass(frozen=True)
class ChainTimes:
    """Wall-clock seconds of one step's ``forward`` (building the graph, checkpointed
    segments run untaped) and ``backward`` (including every recomputation)."""

    forward: float
    backward: float

    @property
    def step(self) -> float:
        return self.forward + self.backward


def time_chain_steps(layers, x, plans: dict, repeat: int = 5) -> dict:
    """Time one forward + backward of ``run_chain(layers, x, plan).sum()`` for each
    ``name: plan`` of ``plans`` (``None`` = no checkpointing).

    The plans take turns (round robin, ``repeat`` rounds) so that a slow spell of the
    machine hits all of them; each keeps its fastest step, the least disturbed one.
    NumPy's BLAS runs single-threaded meanwhile (see `blas_threads`).
    Returns ``{name: ChainTimes}``."""
    if repeat < 1:
        raise ValueError(f"time_chain_steps: repeat must be >= 1, got {repeat}")
    best = {}
    with blas_threads(1):
        for _ in range(repeat):
            for name, plan in plans.items():
                for p in _params(layers):
                    p.grad = None
                t0 = time.perf_counter()
                loss = run_chain(layers, x, plan).sum()
                t1 = time.perf_counter()
                loss.backward()
                t2 = time.perf_counter()
                del loss
                if name not in best or t2 - t0 < best[name].step:
                    best[name] = ChainTimes(forward=t1 - t0, backward=t2 - t1)
    for p in _params(layers):
        p.grad = None
    return best


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of ``log(ys)`` against ``log(xs)``: the exponent ``p`` of
    ``ys ~ c * xs**p``. Both must be positive sequences of the same length >= 2."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1 or len(xs) < 2:
        raise ValueError(f"loglog_slope: need two 1-d sequences of equal length >= 2, "
                         f"got shapes {xs.shape} and {ys.shape}")
    if (xs <= 0).any() or (ys <= 0).any():
        raise ValueError("loglog_slope: all values must be positive (logarithms)")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


# --- chapter 6: gradient checks ---------------------------------------------------------

class GradcheckError(RuntimeError):
    """Analytical and numerical gradients disagree (raised by `gradcheck`)."""


def gradient_check(fn, inputs, eps: float = 1e-6):
    """Analytical and central-difference gradients of ``fn(*inputs).sum()``.

    ``inputs``: minigrad Tensors with ``requires_grad=True`` and dtype float64 (float32
    differences are too coarse to judge a gradient); ``fn`` returns one Tensor.
    Returns a list with one ``(analytical, numerical)`` pair of arrays (each of the
    input's shape) per input. Costs two calls of ``fn`` per input element: for small
    inputs only."""
    inputs = list(inputs)
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor) or not t.requires_grad:
            raise ValueError(f"gradient_check: input {i} must be a Tensor with requires_grad=True")
        if t.dtype != np.float64:
            raise ValueError(f"gradient_check: input {i} has dtype {t.dtype}; use float64 "
                             f"(central differences in float32 are too inaccurate)")
        t.grad = None
    fn(*inputs).sum().backward()
    analytical = [np.zeros(t.shape) if t.grad is None else t.grad.copy() for t in inputs]
    out = []
    with no_grad():
        for t, ga in zip(inputs, analytical):
            gn = np.zeros(t.shape)
            flat = t.data.reshape(-1)  # a view: perturbing it perturbs the input
            for j in range(flat.size):
                old = flat[j]
                flat[j] = old + eps
                up = float(fn(*inputs).data.sum())
                flat[j] = old - eps
                down = float(fn(*inputs).data.sum())
                flat[j] = old
                gn.reshape(-1)[j] = (up - down) / (2 * eps)
            out.append((ga, gn))
    for t in inputs:
        t.grad = None
    return out


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """Like ``torch.autograd.gradcheck``: True if ``fn``'s backward agrees with central
    differences (``|analytical - numerical| <= atol + rtol * |numerical|`` everywhere).

    Otherwise raises `GradcheckError` naming the input, the element and both values
    (or returns False with ``raise_exception=False``). See `gradient_check`."""
    for i, (ga, gn) in enumerate(gradient_check(fn, inputs, eps)):
        bad = np.abs(ga - gn) > atol + rtol * np.abs(gn)
        if bad.any():
            if not raise_exception:
                return False
            j = np.unravel_index(int(np.argmax(np.abs(ga - gn))), ga.shape)
            raise GradcheckError(
                f"gradcheck: Jacobian mismatch for input {i} at element {tuple(int(k) for k in j)}: "
                f"analytical {ga[j]:.6g}, numerical {gn[j]:.6g} ({int(bad.sum())} of {bad.size} "
                f"elements differ beyond atol={atol}, rtol={rtol})")
    return True


# --- chapters 1-3: one training step as the byte ledger sees it ------------------------
#
# Chapter 1 splits a step's memory into the ledger's categories (plus the logits),
# chapter 2 follows one step event by event, chapter 3 compares a step with and
# without a checkpointed segment. The functions below take what the ledger records
# (`minigrad.memory.track`) and turn it into rows, bars and overlaid curves.

__all__ += [
    "LayerTags",
    "EventRow",
    "event_rows",
    "format_event_table",
    "StepAnatomy",
    "measure_step",
    "overlay_timelines",
]


class LayerTags:
    """Names the layer behind every event of a tracked step, for `event_rows`.

    Wrap each layer with ``tags.wrap(name, layer)`` and run the step inside
    ``with tags.track() as m:`` (a `minigrad.memory.track` that also records which
    wrapped layer was running). An event that happens while a wrapped layer runs,
    in the forward pass or in a recomputation, gets that layer's name (the
    innermost one when wrapped layers nest); `event_rows` names the backward
    events by matching each one with the node it undoes."""

    def __init__(self):
        self._m = None
        self.spans: list[tuple[int, int, str, bool]] = []  # (first, end, name, grad recorded)

    def wrap(self, name: str, layer):
        """A callable running ``layer(*args)`` whose ledger events are named ``name``."""
        if not callable(layer):
            raise TypeError(f"LayerTags.wrap: layer {name!r} is not callable ({type(layer).__name__})")

        def run(*args, **kwargs):
            if self._m is None:  # not tracking: run plainly
                return layer(*args, **kwargs)
            first, grad = len(self._m.timeline), minigrad.is_grad_enabled()
            try:
                return layer(*args, **kwargs)
            finally:
                # Inner layers finish first, so their spans come first (innermost wins).
                self.spans.append((first, len(self._m.timeline), name, grad))

        run.__name__ = f"tagged_{name}"
        return run

    def track(self):
        """``minigrad.memory.track()`` (timeline on) that also records the layer spans."""
        @contextmanager
        def _track():
            self.spans = []
            with memory.track() as m:
                self._m = m
                try:
                    yield m
                finally:
                    self._m = None
        return _track()

    def labels(self, n_events: int) -> tuple[list[str], list[bool]]:
        """Per event: the innermost wrapped layer's name ("" if none) and whether
        grad was recorded when it ran (True outside any wrapped layer)."""
        names, grads = [""] * n_events, [True] * n_events
        named = [False] * n_events
        for first, end, name, grad in self.spans:
            for i in range(first, min(end, n_events)):
                if not named[i]:
                    names[i], grads[i], named[i] = name, grad, True
        return names, grads


@dataclass
class EventRow:
    """One line of an event table: the ``index``-th ledger event (1-based), its
    ``phase`` ("forward", "recompute" or "backward"), the ``layer`` (from
    `LayerTags`, "" when unknown) and ``op``; ``saved_delta`` the change of the
    saved-activation bytes the event caused, ``saved_live`` and ``total_live``
    the bytes live after it; ``note`` says in words what happened."""

    index: int
    phase: str
    layer: str
    op: str
    saved_delta: int
    saved_live: int
    total_live: int
    note: str


def event_rows(m, tags: LayerTags | None = None) -> list[EventRow]:
    """The ledger's timeline of ``m`` (a `minigrad.memory.track` tracker) as `EventRow`s.

    Saved-activation bytes before the first event are ``m.start["activations"]``.
    Backward events are matched with the node they undo: the graph of a chain is
    undone last-in first-out, so each backward event takes the most recent
    still-open forward or recompute event of the same op (events run without a
    graph, under ``no_grad``, open nothing). Notes: "keeps" (bytes saved for
    backward), "nothing kept" (no graph), "rebuilds" (a recomputation saves them
    again), "frees" (a backward node releases what its op saved)."""
    events = list(m.timeline)
    if not events:
        raise ValueError("event_rows: the tracker's timeline is empty (track with record_timeline=True)")
    names, grads = tags.labels(len(events)) if tags is not None else ([""] * len(events), [True] * len(events))
    rows, open_nodes = [], []  # open_nodes: (op, layer) of recorded nodes not yet undone
    unclaimed = Counter()  # forward nodes per (op, layer) that no recomputation rebuilt yet
    prev = int(m.start["activations"])
    for i, ev in enumerate(events):
        live = int(ev.live["activations"])
        delta, prev = live - prev, live
        layer = names[i]
        if ev.phase in ("forward", "recompute"):
            # A recomputation rebuilds a node: the one its first forward recorded if there is
            # one (non-reentrant checkpoints record their graph in the first forward), else a
            # new one (reentrant checkpoints ran the first forward without a graph).
            rebuilt = ev.phase == "recompute" and unclaimed[(ev.op, layer)] > 0
            if rebuilt:
                unclaimed[(ev.op, layer)] -= 1
            elif grads[i]:
                open_nodes.append((ev.op, layer))
                if ev.phase == "forward":
                    unclaimed[(ev.op, layer)] += 1
            if not grads[i]:
                note = "runs without a graph: nothing kept"
            elif ev.phase == "recompute":
                note = f"rebuilds: keeps {fmt_bytes(delta)} again" if delta > 0 else "rebuilds (nothing new kept)"
            else:
                note = f"keeps {fmt_bytes(delta)} for backward" if delta > 0 else "keeps nothing new"
        else:
            # The node this backward event undoes: the latest open one of the same op.
            for j in range(len(open_nodes) - 1, -1, -1):
                if open_nodes[j][0] == ev.op:
                    layer = layer or open_nodes[j][1]
                    del open_nodes[j:]
                    break
            note = f"frees {fmt_bytes(-delta)}" if delta < 0 else "frees nothing"
        rows.append(EventRow(i + 1, ev.phase, layer, ev.op, delta, live, int(ev.live["total"]), note))
    return rows


def format_event_table(rows, unit: str = "KiB") -> str:
    """A fixed-width text table of `EventRow`s, bytes in ``unit`` ("B", "KiB" or "MiB")."""
    div = {"B": 1, "KiB": 1024, "MiB": 1024**2}.get(unit)
    if div is None:
        raise ValueError(f"format_event_table: unit must be 'B', 'KiB' or 'MiB', got {unit!r}")
    head = (f"{'#':>3}  {'phase':<9}  {'layer':<8}  {'op':<15}  {'saved +/-':>10}  "
            f"{'saved live':>10}  {'all live':>9}  what happened")
    lines = [head, f"{'':>3}  {'':<9}  {'':<8}  {'':<15}  {'(' + unit + ')':>10}  "
                   f"{'(' + unit + ')':>10}  {'(' + unit + ')':>9}", "-" * len(head)]
    for r in rows:
        lines.append(f"{r.index:>3}  {r.phase:<9}  {r.layer:<8}  {r.op:<15}  "
                     f"{r.saved_delta / div:>+10.1f}  {r.saved_live / div:>10.1f}  "
                     f"{r.total_live / div:>9.1f}  {r.note}")
    return "\n".join(lines)


@dataclass
class StepAnatomy:
    """Where one training step's memory goes, in bytes, each category at its own
    peak over the step (sampled at the start, after every ledger event and at the end).

    ``parameters``, ``buffers``, ``gradients``, ``optimizer`` (AdamW's two moments),
    ``activations`` (saved for backward, without the loss's own saved arrays when
    the logits are split out), ``logits`` (the logits array plus what the loss saves
    from it; 0 if not split), ``temporaries`` (everything else minigrad holds:
    op outputs kept alive by the graph, inputs, gradients in flight; without the
    logits array when split). ``peak_total``: the largest simultaneous total, which
    is below the sum of the bars since the categories do not all peak at once.
    ``tracker``: the `minigrad.memory` tracker of the measured step."""

    parameters: int
    buffers: int
    gradients: int
    optimizer: int
    activations: int
    logits: int
    temporaries: int
    peak_total: int
    tracker: object = field(repr=False, default=None)

    #: The bar order used by the book's figures (bottom first).
    ORDER = ("parameters", "gradients", "optimizer", "activations", "logits", "temporaries")

    def bars(self) -> dict:
        """``{category: bytes}`` in `ORDER` (buffers join parameters: both are model state)."""
        d = {c: getattr(self, c) for c in self.ORDER}
        d["parameters"] += self.buffers
        return d

    @property
    def sum_of_peaks(self) -> int:
        return sum(self.bars().values())


def measure_step(forward, loss_of, optimizer, split_logits: bool = False, warmup: int = 1) -> StepAnatomy:
    """Measure one training step: ``out = forward()``, ``loss = loss_of(out)``,
    ``loss.backward()``, ``optimizer.step()``, with the gradients set to None before.

    ``warmup`` full steps run first, so that the optimizer's state already exists
    (as in any step after the first). ``out`` is dropped as soon as the loss is
    computed, as in ``loss = loss_of(forward())``. With ``split_logits``, ``out`` is
    the logits tensor: its array, while it lives, and the arrays the loss saves for
    backward, until the loss's backward node (the first one) has run, are reported
    as ``logits`` and taken out of ``temporaries`` and ``activations``. (The
    gradient of the logits, created in backward, stays in ``temporaries``.)

    Counts everything live in the process (parameters exist before the step), so
    measure with nothing else alive. NumPy's BLAS runs single-threaded meanwhile
    (`blas_threads`): bytes do not depend on it, and on a shared CPU it keeps the
    small batched matrix products of a GPT from stalling."""
    with blas_threads(1):
        return _measure_step(forward, loss_of, optimizer, split_logits, warmup)


def _measure_step(forward, loss_of, optimizer, split_logits, warmup):
    if warmup < 0:
        raise ValueError(f"measure_step: warmup must be >= 0, got {warmup}")

    def step():
        optimizer.zero_grad()
        loss = loss_of(forward())
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    optimizer.zero_grad()
    # The figures are absolute (everything alive in the process), so unreachable
    # graphs left by earlier code must be gone first; track() then keeps the
    # collector paused during the step (minigrad.memory, rule 7).
    gc.collect()
    died = []  # number of timeline events recorded when the logits' buffer was freed
    with memory.track() as m:
        out = forward()
        if split_logits and not isinstance(out, Tensor):
            raise TypeError(f"measure_step: with split_logits, forward() must return the logits "
                            f"Tensor, got {type(out).__name__}")
        born = len(m.timeline)  # event born - 1 produced the logits
        act_before_loss = int(m.timeline[-1].live["activations"]) if born else int(m.start["activations"])
        logits_bytes = out.nbytes if split_logits else 0
        if split_logits:
            buf = memory.base_buffer(out.data)
            weakref.finalize(buf, lambda: died.append(len(m.timeline)))
            del buf  # only the caller's code may keep the logits alive
        loss = loss_of(out)
        del out
        after_loss = len(m.timeline)
        loss.backward()
        del loss
        optimizer.step()
    loss_saved = int(m.timeline[after_loss - 1].live["activations"]) - act_before_loss if split_logits else 0
    logits_end = died[0] if died else len(m.timeline) + 1  # first state index without the logits
    first_backward = next((i for i, ev in enumerate(m.timeline) if ev.phase == "backward"), len(m.timeline))
    # The start, after every event, and the end (after the optimizer step: the last
    # leaves' gradients are stored after the last backward event).
    states = [(-1, m.start)] + list(enumerate(ev.live for ev in m.timeline)) + [(len(m.timeline), m.end)]
    peak = {c: 0 for c in ("parameters", "buffers", "gradients", "optimizer", "activations",
                           "logits", "temporaries", "total")}
    for i, live in states:
        lg_alive = split_logits and born - 1 <= i < logits_end
        saved_alive = split_logits and after_loss - 1 <= i < first_backward
        vals = {c: int(live[c]) for c in ("parameters", "buffers", "gradients", "optimizer")}
        vals["activations"] = int(live["activations"]) - (loss_saved if saved_alive else 0)
        vals["temporaries"] = int(live["temporaries"]) - (logits_bytes if lg_alive else 0)
        vals["logits"] = (logits_bytes if lg_alive else 0) + (loss_saved if saved_alive else 0)
        vals["total"] = sum(int(live[c]) for c in memory.CATEGORIES)
        for c, v in vals.items():
            peak[c] = max(peak[c], v)
    return StepAnatomy(parameters=peak["parameters"], buffers=peak["buffers"],
                       gradients=peak["gradients"], optimizer=peak["optimizer"],
                       activations=peak["activations"], logits=peak["logits"],
                       temporaries=peak["temporaries"], peak_total=peak["total"], tracker=m)


def overlay_timelines(trackers: dict, category: str = "activations", ax=None, title=None):
    """Live bytes of one ledger ``category`` (or ``"total"``) after every event, one
    step line per tracker, on the same axes (x: event index; y: KiB or MiB).

    ``trackers``: ``{label: tracker}``. A vertical dotted line marks where each
    tracker's backward pass begins (its first backward or recompute event)."""
    if not trackers:
        raise ValueError("overlay_timelines: no trackers given")
    allowed = list(memory.CATEGORIES) + ["total"]
    if category not in allowed:
        raise ValueError(f"overlay_timelines: unknown category {category!r}; allowed: {allowed}")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.5))
    series = {}
    for label, m in trackers.items():
        if not m.timeline:
            raise ValueError(f"overlay_timelines: the timeline of {label!r} is empty")
        series[label] = np.array([m.start[category]] + [ev.live[category] for ev in m.timeline])
    unit, div = byte_unit(max(int(s.max()) for s in series.values()) or 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, ys) in enumerate(series.items()):
        color = colors[k % len(colors)]
        ax.step(np.arange(len(ys)), ys / div, where="post", color=color, lw=1.8, label=label)
        phases = [ev.phase for ev in trackers[label].timeline]
        back = next(i for i, p in enumerate(phases + ["backward"]) if p != "forward")
        ax.axvline(back + 0.5, color=color, ls=":", lw=1)
    ax.set_xlabel("ledger event (0 = start of the step)")
    ax.set_ylabel(f"{'saved activations' if category == 'activations' else category} ({unit})")
    ax.set_title(title or f"Live {category} over one step")
    ax.legend(loc="upper left", fontsize="small")
    return ax
