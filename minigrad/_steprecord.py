"""Record the forward pass of one training step op by op: what `plan.trace_graph` measures
and what `minigrad.remat.run` replays (one recorder, so that both see the same graph).

A `StepRecorder` is a pack hook plus an op observer (the engine's public hook points).
Every array an op saves for backward is packed into a `Slot` placeholder; when the op has
returned, the observer classifies each slot by the buffer it lives in (the ledger's rule:
a view and its base are one buffer):

* ``"node"``: a view of (or the very) output of an op recorded earlier, or of this op's
  own output: it can be rebuilt from that output;
* ``"const"``: a buffer that no recorded op produced (a user input, a parameter);
* ``"private"``: anything else (a dropout mask, a normalised input): only re-running this
  op's forward gives it back.
"""
from __future__ import annotations

import weakref

import numpy as np

from minigrad import memory
from minigrad import random as _random
from minigrad.autograd import saved_tensors_hooks
from minigrad.hooks import register_hooks
from minigrad.tensor import Tensor

__all__ = ["Slot", "OpRecord", "StepRecorder", "view_spec", "rebuild_view"]


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
    """One forward op: its Function, arguments (recorded tensors replaced by their node
    index), the RNG state before it ran, its saved slots and its output."""

    __slots__ = ("index", "fn", "name", "args", "arg_grad", "kwargs", "rng_state", "slots",
                 "recording", "ctx_id", "out_buffer_of", "out_bytes", "input_nodes",
                 "grad_bytes", "privates")

    def __init__(self, index, fn):
        self.index, self.fn, self.name = index, fn, fn.name()
        self.args, self.arg_grad, self.kwargs = [], [], {}
        self.rng_state = None
        self.slots = []
        self.recording = False
        self.ctx_id = None
        self.out_buffer_of = None  # node index whose output buffer this output shares
        self.out_bytes = 0
        self.input_nodes = []
        self.grad_bytes = 0
        self.privates = []


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
        for a in args:
            if isinstance(a, Tensor):
                q = self.node_of(a)
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
