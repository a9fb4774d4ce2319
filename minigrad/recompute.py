"""The one recomputation core: what every executor that recomputes shares.

Four executors rebuild arrays a forward pass once made: a checkpoint's frame
(`minigrad.checkpoint.checkpoint`), the schedule executor (``run_schedule``), the graph
schedule executor (`minigrad.remat.run`) and DTR's pool (`minigrad.dtr.budget`). They
record the forward and enter the recompute phase the same way, here:

* `recomputing`: the one way into the recompute phase: grad enabled, the ledger's phase
  ``"recompute"`` (it counts those ops apart), `is_recomputing` True (``nn.BatchNorm1d``
  updates its running statistics once), and the random state of the first run replayed
  (`rng_state`), the caller's state put back after.
* `OpLog`: the `OpRecord` (op, output shape and dtype) of every op a forward ran, and
  whether an input required grad; `compare_ops` raises `CheckpointError` at the first op a
  recomputation ran differently (the determinism check of `Checkpoint` and ``run_schedule``).
* `OpRecord`: one forward op, enough to run it again (function, arguments, the random
  state before it, its FLOPs, the shapes of its output and saved arrays). `StepRecorder`
  records a whole step's forward with them (what `minigrad.plan.trace_graph` measures and
  `minigrad.remat.run` replays); DTR's pool records each op it may rebuild as one.
* `replay_op`: the one way to run a recorded op again (used by `minigrad.remat.run` and
  DTR's rebuilds): its arguments copied, inside `recomputing` with the op's own random
  state, its saved arrays handed back instead of kept, and checked against the record
  (same shapes and dtypes, same random draws); the callers compare the values with the
  checksum they took in the first forward (`values_digest`).

A recorder's saved arrays are packed into `Slot` placeholders; when the op has returned,
the observer classifies each slot by the buffer it lives in (the ledger's rule: a view and
its base are one buffer):

* ``"node"``: a view of (or the very) output of an op recorded earlier, or of this op's
  own output: it can be rebuilt from that output;
* ``"const"``: a buffer that no recorded op produced (a user input, a parameter);
* ``"private"``: anything else (a dropout mask, a normalised input): only re-running this
  op's forward gives it back.

Freeing is the engine's: what an executor keeps lives in a `minigrad.tensor.Context`
(the one saving point) and goes with ``Context.release``.
"""
from __future__ import annotations

import weakref
import zlib
from contextlib import contextmanager

import numpy as np

from minigrad import memory
from minigrad import random as _random
from minigrad.autograd import hooks_paused, saved_tensors_hooks
from minigrad.grad_mode import enable_grad
from minigrad.hooks import in_phase, register_hooks
from minigrad.tensor import Tensor

__all__ = ["CheckpointError", "is_recomputing", "recomputing", "rng_state", "TensorReads", "OpLog",
           "compare_ops", "check_flag", "determinism", "Slot", "OpRecord", "StepRecorder",
           "view_spec", "rebuild_view", "replay_op", "values_digest"]


class CheckpointError(RuntimeError):
    """A recomputation did not reproduce the original forward (torch's ``CheckpointError``)."""


_DEPTH = [0]  # how many recomputations are running (nested ones count)


def is_recomputing() -> bool:
    """True while an executor re-runs a forward during backward (a checkpoint, a schedule,
    a graph schedule, DTR's rebuild).

    Example:
        >>> from minigrad import Tensor
        >>> from minigrad.checkpoint import checkpoint
        >>> def f(h):
        ...     print("recomputing" if is_recomputing() else "first forward")
        ...     return h.tanh()
        >>> checkpoint(f, Tensor([1.0], requires_grad=True)).sum().backward()
        first forward
        recomputing
    """
    return _DEPTH[0] > 0


def rng_state(preserve: bool = True):
    """The random state to replay later (None when ``preserve`` is False: nothing replays)."""
    return _random.get_rng_state() if preserve else None


@contextmanager
def recomputing(replay_rng=None):
    """Run a recomputation: grad enabled, ledger phase ``"recompute"``, `is_recomputing`
    True, and the random state ``replay_rng`` of the first run (from `rng_state`; None:
    leave the state alone) replayed, then the caller's state put back.

    Example:
        >>> from minigrad import random
        >>> state = rng_state()
        >>> first = random.rand(2)
        >>> with recomputing(state):
        ...     again = random.rand(2)
        >>> bool((first == again).all()), is_recomputing()
        (True, False)
    """
    now = _random.get_rng_state() if replay_rng is not None else None
    if replay_rng is not None:
        _random.set_rng_state(replay_rng)
    _DEPTH[0] += 1
    try:
        with enable_grad(), in_phase("recompute"):  # the ledger counts it apart
            yield
    finally:
        _DEPTH[0] -= 1
        if now is not None:
            _random.set_rng_state(now)


def check_flag(name, value, where) -> bool:
    """``value`` as a bool, or a TypeError naming ``name`` if it is not True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{where}: {name} must be True or False, got {value!r}")
    return bool(value)


def determinism(value) -> bool:
    """Whether ``determinism_check`` (torch's ``"default"``/``"none"``, or a bool) checks."""
    if value in ("default", True):
        return True
    if value in ("none", False):
        return False
    raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none' (or True/False), "
                     f"got {value!r}")


class _OpWatcher:
    """An op hook (called as ``self(kind, fn, ctx, args, kwargs, out)``) that `watching`
    registers for the length of a ``with`` block."""

    @contextmanager
    def watching(self):
        handle = register_hooks(op=self)
        try:
            yield self
        finally:
            handle.remove()


class TensorReads(_OpWatcher):
    """The version (``Tensor._version``) of every tensor the ops read while `watching`,
    at its first reading: a recomputation must read the same values, so `check` raises if
    one that is still alive (an input, a parameter) was updated in place since (an
    optimizer's step between forward and backward). Identity and counters only.

    Example:
        >>> from minigrad import Tensor
        >>> w, reads = Tensor([1.0]), TensorReads()
        >>> with reads.watching():
        ...     y = (w * 2.0).exp()
        >>> w.data -= 1.0
        >>> reads.check("checkpoint")
        Traceback (most recent call last):
        ...
        minigrad.recompute.CheckpointError: checkpoint: the recomputation would read ...
    """

    def __init__(self):
        self.seen: dict = {}  # id(tensor) -> (weak ref, version, op name, argument k)

    def __call__(self, kind, fn, ctx, args, kwargs, out):
        if kind != "forward":
            return
        seen = self.seen
        for k, a in enumerate(args):
            if isinstance(a, Tensor) and id(a) not in seen:
                seen[id(a)] = (weakref.ref(a), a._version_counter, fn, k)
        seen[id(out)] = None  # made here: a recomputation makes it again

    def check(self, what: str) -> None:
        for entry in self.seen.values():
            if entry is None:
                continue
            ref, version, fn, k = entry
            t = ref()
            if t is not None and t._version_counter != version:
                raise CheckpointError(
                    f"{what}: the recomputation would read a tensor updated in place since the "
                    f"forward pass: argument {k} of op '{fn.name()}' ({t.dtype}, shape "
                    f"{t.shape}) was at version {version} and is at version "
                    f"{t._version_counter}; the gradients would mix old and new values. Update "
                    f"it after backward() (as an optimizer's step after loss.backward())")


class OpLog(_OpWatcher):
    """The `OpRecord` (op, output shape and dtype) of every op run while `watching`,
    whether any op's input required grad (a parameter inside the function), and the
    versions of the tensors they read (``reads``, a `TensorReads`): what a recomputation
    of a whole function is compared with (`compare_ops`, ``reads.check``).

    Example:
        >>> from minigrad import Tensor
        >>> log = OpLog()
        >>> with log.watching():
        ...     y = Tensor([1.0, 2.0]).exp().sum()
        >>> [(r.name, r.out_meta[0]) for r in log.ops]
        [('exp', (2,)), ('sum', ())]
    """

    def __init__(self):
        self.ops: list[OpRecord] = []
        self.saw_grad = False
        self.reads = TensorReads()  # what the ops read, at which version

    def __call__(self, kind, fn, ctx, args, kwargs, out):
        # A nested checkpoint's own node is left out: under no_grad (the first run of a
        # reentrant checkpoint) a nested checkpoint is a plain call and makes none.
        if kind != "forward" or fn.name() == "checkpoint":
            return
        self.reads(kind, fn, ctx, args, kwargs, out)
        rec = OpRecord(len(self.ops), fn)
        rec.out_meta = (out.shape, out.dtype)
        self.ops.append(rec)
        if not self.saw_grad:
            self.saw_grad = any(isinstance(a, Tensor) and a.requires_grad for a in args)


def compare_ops(first: list, again: list, what: str = "checkpoint") -> None:
    """Raise `CheckpointError` naming the first op (`OpRecord`s of two `OpLog`s) whose
    recomputed output differs."""
    first = [(r.name, *r.out_meta) for r in first]
    again = [(r.name, *r.out_meta) for r in again]
    for i, (x, y) in enumerate(zip(first, again)):
        if x != y:
            raise CheckpointError(
                f"{what}: the recomputation differs from the original forward at op #{i} "
                f"'{y[0]}' (original op '{x[0]}'): original output shape {x[1]} dtype {x[2]}, "
                f"recomputed shape {y[1]} dtype {y[2]}. The checkpointed function must run the "
                f"same ops on the same shapes each time (beware of state it reads or mutates).")
    if len(first) != len(again):
        i = min(len(first), len(again))
        extra = (again if len(again) > len(first) else first)[i]
        which = "recomputation ran an extra" if len(again) > len(first) else "recomputation skipped the"
        raise CheckpointError(
            f"{what}: the {which} op #{i} '{extra[0]}' (original forward ran {len(first)} ops, "
            f"recomputation {len(again)}).")


# --- the full record of a step's forward (trace_graph, remat.run) ---------------------------


def view_spec(a: np.ndarray):
    """Where ``a`` sits in its base buffer: (byte offset, shape, strides, dtype)."""
    base = memory.base_buffer(a)
    offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return (int(offset), a.shape, a.strides, a.dtype)


def rebuild_view(array: np.ndarray, spec) -> np.ndarray:
    """The view described by ``spec`` (from `view_spec`) over ``array``'s base buffer."""
    base = memory.base_buffer(array)
    offset, shape, strides, dtype = spec
    if (offset == 0 and base.shape == shape and base.strides == strides
            and base.dtype == dtype):
        return base
    return np.ndarray(shape, dtype=dtype, buffer=base, offset=offset, strides=strides)


class Slot:
    """One array an op saved: the array (until classified) and what it is."""

    __slots__ = ("array", "kind", "node", "spec", "index", "owner")

    def __init__(self, array):
        self.array = array
        self.owner = None  # the recorded op that saved it
        self.kind = None  # "node", "const" or "private"
        self.node = None  # for "node": the recorded op whose output buffer holds it
        self.spec = None  # for "node": view_spec of the array
        self.index = None  # for "private": its rank among the op's private arrays


class OpRecord:
    """One forward op, enough to run it again: its Function, arguments (recorded tensors
    replaced by a reference to the value they hold), keyword arguments, the random state
    before it ran, its saved slots and its output.

    ``rng_state`` is None for an op recorded as drawing nothing (DTR records the state
    only when it moved; ``rng_after`` is then the state after); ``flops``, ``out_meta``
    and ``saved_meta`` (``(shape, dtype)`` of the output and of each saved array) are
    filled by the executors that check a replay against them."""

    __slots__ = ("index", "fn", "name", "args", "arg_grad", "kwargs", "rng_state", "slots",
                 "recording", "ctx_id", "out_buffer_of", "out_bytes", "input_nodes",
                 "grad_bytes", "privates", "flops", "rng_after", "out_meta", "saved_meta",
                 "edited_args")

    def __init__(self, index, fn):
        self.index, self.fn, self.name = index, fn, fn.name()
        self.args, self.arg_grad, self.kwargs = [], [], {}
        self.rng_state = None
        self.rng_after = None
        self.slots = []
        self.recording = False
        self.ctx_id = None
        self.out_buffer_of = None  # node index whose output buffer this output shares
        self.out_bytes = 0
        self.input_nodes = []
        self.grad_bytes = 0
        self.privates = []
        self.flops = 0
        self.out_meta = None
        self.saved_meta = None
        self.edited_args = []  # (k, version): argument k, made by an op, updated in place since


class _Box:
    """What `replay_op`'s capture hook stores: not an array, so the ledger does not count it."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


def _copied(value):
    # a replay never writes into the step's arrays (BatchNorm's running statistics)
    return value.copy() if isinstance(value, np.ndarray) else value


def replay_op(rec: OpRecord, args, what: str):
    """Run the recorded op ``rec`` again on ``args`` (Tensors standing for its tensor
    arguments, other values as recorded), as it first ran.

    NumPy arguments and keyword arguments are copied; the op runs inside `recomputing`
    with ``rec.rng_state``; the arrays it saves for backward are handed back, not kept
    (the caller decides what stays, and tells the ledger). The replay is checked against
    the record where it holds one: the output's and saved arrays' shapes and dtypes
    (``out_meta``, ``saved_meta``) and, for an op that drew random numbers, the state
    after it (``rng_after``). A mismatch raises RuntimeError starting with ``what``.

    Returns:
        ``(output, saved)``: the output Tensor and the saved arrays, in saving order.

    Example:
        >>> from minigrad import Tensor
        >>> from minigrad.ops import Exp
        >>> out, saved = replay_op(OpRecord(0, Exp), [Tensor([0.0], requires_grad=True)],
        ...                        "replaying exp")
        >>> float(out.data[0]), [a.tolist() for a in saved]    # exp saves its output
        (1.0, [[1.0]])
    """
    captured = []

    def pack(a):
        captured.append(a)
        return _Box(a)

    args = [_copied(a) for a in args]
    kwargs = {k: _copied(v) for k, v in rec.kwargs.items()}
    with hooks_paused(), recomputing(rec.rng_state), \
            saved_tensors_hooks(pack, lambda box: box.array):
        out = rec.fn.apply(*args, **kwargs)
        after = rng_state() if rec.rng_after is not None else None
    # An op that draws nothing replays fine whatever the state; one that draws must end
    # where its first run ended, or it did not start where that run started.
    if after is not None and after != rec.rng_state and after != rec.rng_after:
        raise RuntimeError(
            f"{what} did not draw the same random numbers as its first run (something drew "
            f"from minigrad.random between ops, outside any op); its arrays cannot be "
            f"rebuilt bit-identically")
    meta = [(a.shape, a.dtype) for a in captured]
    if (rec.out_meta is not None and (out.shape, out.dtype) != rec.out_meta) or \
            (rec.saved_meta is not None and meta != rec.saved_meta):
        raise RuntimeError(
            f"{what} made different arrays than its first run (output {rec.out_meta} then "
            f"{(out.shape, out.dtype)}, saved {rec.saved_meta} then {meta}); ops must run "
            f"the same way each time")
    return out, captured


def values_digest(arrays) -> tuple:
    """A checksum of arrays' values, shapes and dtypes: a replay must give the same.

    Example:
        >>> values_digest([np.zeros(2)]) == values_digest([np.zeros(2)])
        True
        >>> values_digest([np.zeros(2)]) == values_digest([np.ones(2)])
        False
    """
    return tuple((a.shape, a.dtype.str, zlib.crc32(np.ascontiguousarray(a).view(np.uint8)))
                 for a in arrays)


class _NodeRef:
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node


class StepRecorder:
    """Records the forward ops of a step (use `hooks` around the forward).

    Attributes:
        ops: the `OpRecord` of every forward op, in execution order.
        outputs: for each op, the output array (kept only with ``keep_outputs=True``).
    """

    def __init__(self, keep_outputs: bool = False):
        self.ops: list[OpRecord] = []
        self.outputs: list = []
        self.keep_outputs = keep_outputs
        self.paused = False
        self._pending: list[Slot] = []
        self._tensor_node: dict[int, tuple] = {}  # id(tensor) -> (weakref, node)
        self._buffer_node: dict[int, tuple] = {}  # id(base buffer) -> (weakref, node)
        self._rng = _random.get_rng_state()
        self.on_op = None  # optional callback(record, output Tensor) after classification

    # --- hook points ----------------------------------------------------------
    def pack(self, a):
        slot = Slot(a)
        self._pending.append(slot)
        return slot

    def unpack(self, slot):
        """What backward gets back: the array itself (a recorder that drops arrays overrides it)."""
        return slot.array

    def node_of(self, t):
        entry = self._tensor_node.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        return None

    def op(self, kind, fn, ctx, args, kwargs, output):
        if kind != "forward" or self.paused:
            return
        rec = OpRecord(len(self.ops), fn)
        rec.rng_state, self._rng = self._rng, _random.get_rng_state()
        rec.recording = bool(ctx.recording)
        rec.ctx_id = id(ctx) if ctx.recording else None
        rec.kwargs = dict(kwargs)
        in_buffers = []  # (base buffer id, node or None) per tensor argument
        for k, a in enumerate(args):
            if isinstance(a, Tensor):
                q = self.node_of(a)
                if q is not None and a._version_counter:  # (every op's output starts at 0)
                    rec.edited_args.append((k, a._version_counter))
                rec.args.append(_NodeRef(q) if q is not None else a)
                rec.arg_grad.append(bool(a.requires_grad))
                if q is not None and q not in rec.input_nodes:
                    rec.input_nodes.append(q)
                in_buffers.append((id(memory.base_buffer(a.data)), q))
                if ctx.recording and a.requires_grad:
                    rec.grad_bytes += int(a.data.nbytes)
            else:
                rec.args.append(a)
                rec.arg_grad.append(False)
        out = output.data
        out_base = memory.base_buffer(out)
        owner = self._buffer_node.get(id(out_base))
        if owner is not None and owner[0]() is out_base:
            rec.out_buffer_of = owner[1]
        else:
            rec.out_buffer_of = rec.index
            rec.out_bytes = int(out_base.nbytes)
            self._buffer_node[id(out_base)] = (weakref.ref(out_base), rec.index)
        for slot in self._pending:
            slot.owner = rec.index
            a = slot.array
            b = id(memory.base_buffer(a))
            if b == id(out_base):
                slot.kind, slot.node = "node", rec.index
            else:
                hit = [q for k, q in in_buffers if k == b]
                if hit and hit[0] is not None:
                    slot.kind, slot.node = "node", hit[0]
                elif hit or memory.category(a) in ("parameters", "buffers"):
                    slot.kind = "const"
                else:
                    slot.kind, slot.index = "private", len(rec.privates)
                    rec.privates.append(a)
            if slot.kind == "node":
                slot.spec = view_spec(a)
        rec.slots, self._pending = self._pending, []
        self._tensor_node[id(output)] = (weakref.ref(output), rec.index)
        self.ops.append(rec)
        if self.keep_outputs:
            self.outputs.append(out)
        if self.on_op is not None:
            self.on_op(rec, output)

    def hooks(self):
        """Context manager installing the pack hook and the op observer."""
        return _Installed(self)


class _Installed:
    def __init__(self, rec):
        self.rec = rec

    def __enter__(self):
        self._handle = register_hooks(op=self.rec.op)
        self._saved = saved_tensors_hooks(self.rec.pack, self._unpack)
        self._saved.__enter__()
        return self.rec

    def _unpack(self, slot):
        return self.rec.unpack(slot)

    def __exit__(self, *exc):
        self._saved.__exit__(*exc)
        self._handle.remove()
        return False
