"""Activation checkpointing: keep a segment's inputs, recompute the rest in backward.

Names and behaviour follow ``torch.utils.checkpoint``. ``checkpoint(fn, *args, **kwargs)``
returns what ``fn`` returns, but keeps for backward only the tensors passed to ``fn``
(positional or keyword, also inside lists, tuples and dicts); what ``fn``'s ops would have
saved is rebuilt by running ``fn`` again during backward. Two implementations, chosen with
``use_reentrant`` exactly as in torch:

* ``use_reentrant=False`` (the default, and torch's recommendation): ``fn`` runs with grad
  enabled, so its graph is recorded as usual, but inside a `saved_tensors_hooks` block whose
  pack hook stores a small handle instead of each array. The first time backward unpacks
  one of those handles, the unpack hook re-runs ``fn`` on the kept inputs under a second
  pair of hooks that collects the arrays its ops save again, and hands each one to the node
  that asked for it. Backward runs through the *original* graph, so ``fn`` may take and
  return anything, call ``backward``/``grad`` itself, and ``minigrad.grad(out, inputs)``
  works through it. (torch: ``_checkpoint_without_reentrant_generator``.)
* ``use_reentrant=True``: `Checkpoint`, an ordinary `Function` (the chapter "Dropping
  and rebuilding" builds it by hand): its forward runs ``fn`` under ``no_grad`` and saves the inputs; its backward runs
  ``fn`` again with grad enabled and back-propagates through that new graph at once (a
  backward inside the backward: "reentrant"). ``fn`` must return one Tensor; gradients
  reach only the positional tensor inputs, and if none requires grad the output does not
  either (torch warns, and the parameters inside get no gradient).

Both replay the random-number state of the first forward (``preserve_rng_state``: dropout
draws the same masks) and check that the recomputation matches (``determinism_check``:
non-reentrant compares every saved array's op, shape and dtype, reentrant every op's
output), raising `CheckpointError` naming the first difference. The ledger counts the kept
inputs as activations; ops run while recomputing count in phase ``"recompute"``, during
which `is_recomputing` is True (``nn.BatchNorm1d`` uses it to update its running
statistics once). Checkpoints nest. An input updated in place between the forward and
the backward pass raises torch's "modified by an inplace operation" error (its
``_version`` moved on), and so does, as `CheckpointError`, a tensor ``fn``'s ops read (a
parameter) that the recomputation would read at another version.

The executors of plans are here too: `checkpoint_sequential` (segments, torch's
function) and `run_schedule` (a plan's actions: Revolve, nested schedules). What every
executor that recomputes shares (the recompute phase, RNG replay, the op log) is in
`minigrad.recompute`.
"""
from __future__ import annotations

import itertools
import warnings
import weakref
from collections import defaultdict
from contextlib import contextmanager, nullcontext

import numpy as np

from minigrad import tensor as _tensor
from minigrad._validation import check_int, check_segment_starts
from minigrad.autograd import backprop, saved_tensors_hooks
from minigrad.grad_mode import is_grad_enabled, no_grad, set_grad_enabled
from minigrad.hooks import register_hooks
from minigrad.recompute import (CheckpointError, OpLog, TensorReads, check_flag, compare_ops,
                                determinism, is_recomputing, recomputing, rng_state)
from minigrad.tensor import Context, Function, Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "run_schedule", "Checkpoint",
           "CheckpointError", "is_recomputing", "set_checkpoint_early_stop"]


# --- recomputation state: set_checkpoint_early_stop ------------------------------------------
_EARLY_STOP = [None]  # set by set_checkpoint_early_stop; None: each checkpoint's own setting


@contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Context manager: whether the non-reentrant checkpoints *created* inside stop their
    recomputation as soon as every array backward needs has been rebuilt (torch's
    ``set_checkpoint_early_stop``; it overrides each call's ``early_stop``).

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> with set_checkpoint_early_stop(False):
        ...     y = checkpoint(lambda h: h.exp().tanh(), x)   # recomputed to the end
        >>> y.sum().backward()
    """
    old, _EARLY_STOP[0] = _EARLY_STOP[0], bool(enable)
    try:
        yield
    finally:
        _EARLY_STOP[0] = old


# --- inputs of any structure ----------------------------------------------------------------------
class _Slot:
    """Where a tensor input sat in ``(args, kwargs)``: its index among the saved arrays."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _split_inputs(obj, tensors: list, seen: dict):
    """``obj`` with every Tensor (also inside lists, tuples and dicts) replaced by a `_Slot`;
    the tensors are appended to ``tensors`` (a tensor passed twice gets one slot)."""
    if isinstance(obj, Tensor):
        if id(obj) not in seen:
            seen[id(obj)] = _Slot(len(tensors))
            tensors.append(obj)
        return seen[id(obj)]
    if isinstance(obj, (list, tuple)):
        items = [_split_inputs(o, tensors, seen) for o in obj]
        if isinstance(obj, list):
            return items
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return type(obj)((k, _split_inputs(v, tensors, seen)) for k, v in obj.items())
    return obj


def _fill_inputs(obj, leaves: list):
    """The inverse of `_split_inputs`: each `_Slot` replaced by ``leaves[slot.index]``."""
    if isinstance(obj, _Slot):
        return leaves[obj.index]
    if isinstance(obj, (list, tuple)):
        items = [_fill_inputs(o, leaves) for o in obj]
        if isinstance(obj, list):
            return items
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return type(obj)((k, _fill_inputs(v, leaves)) for k, v in obj.items())
    return obj


# --- use_reentrant=False: saved-tensor hooks ------------------------------------------------------
class _Holder:
    """What a checkpointed op stores instead of an array (torch's ``_Holder``): one handle
    per backward pass, set when that pass has recomputed the array."""

    __slots__ = ("handles", "frame", "handed", "__weakref__")

    def __init__(self, frame):
        self.handles: dict[int, object] = {}
        self.frame = frame
        self.handed = None  # (task id, handle) of the array being handed to its node

    def unpacked(self):
        """Called by the engine once the node holds the array: the frame lets go of it."""
        tid, handle = self.handed
        self.handed = None
        self.frame.recomputed[tid].pop(handle, None)
        if tid < 0:  # unpacked outside backward: nothing else will ask for that recomputation
            self.frame.forget(tid)

    def kept_arrays(self):
        """What is kept for backward in this array's stead: its checkpoint's inputs
        (see ``minigrad.autograd.saved_arrays``)."""
        return self.frame.kept_arrays()


class _Handle:
    __slots__ = ("__weakref__",)


class _StopRecomputation(Exception):
    """Ends a recomputation early: raised once the op that saved the last needed array has
    run. torch raises inside that op's save, and its autograd saves an op's inputs before
    running it: when the last needed array is an op's *input* (a linear layer's), torch
    skips that op's work, while minigrad lets the op finish, so that the ledger's timeline
    has an event at the moment when every rebuilt array is alive (the recomputation's peak;
    `m.peak` has it either way). The recomputed FLOPs then exceed torch's by that op's
    forward (tested in ``tests/test_ledger_vs_torch.py``)."""


_OUTSIDE_BACKWARD_IDS = itertools.count(-1, -1)  # an unpack outside backward recomputes afresh


class _CheckpointInputs(Function):
    """The node that keeps a non-reentrant checkpoint's inputs (torch's ``_NoopSaveInputs``).

    Its forward saves the input arrays at the engine's saving point (so the ledger counts
    them as activations, and an enclosing checkpoint's hooks apply to them: that is how
    checkpoints nest) and returns an empty array. Its output is not part of the result's
    graph: the checkpoint's frame holds it until the last node that may recompute is gone.
    A zero-size input that requires grad makes the engine record it whatever the inputs."""

    @staticmethod
    def forward(ctx, dummy, *arrays):
        ctx.save_for_backward(*arrays)
        return np.empty(0, dtype=np.float32)

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("checkpoint: the inputs' keeper is not part of any graph")

    @classmethod
    def name(cls) -> str:
        return "checkpoint"


def _dummy() -> Tensor:
    return Tensor(np.empty(0, dtype=np.float32), requires_grad=True)


class _Frame:
    """One non-reentrant checkpoint call (torch's ``_CheckpointFrame``).

    Keeps ``fn``, its inputs (in a `_CheckpointInputs` node), the RNG state, and, for each
    array the forward saved, a weak reference to its holder and its (op, shape, dtype).
    ``recomputed[task][handle]`` holds the arrays one backward pass has rebuilt until the
    node that needs each one unpacks it."""

    def __init__(self, fn, args, kwargs, preserve_rng_state, check, early_stop):
        self.fn = fn
        tensors: list[Tensor] = []
        self.template = _split_inputs((args, kwargs), tensors, {})
        self.requires_grad = [t.requires_grad for t in tensors]
        self.keeper = _CheckpointInputs.apply(_dummy(), *[Tensor(t.data) for t in tensors])
        # it saved the inputs' own arrays: an in-place update of an input raises, as torch's
        self.keeper._ctx.versions = tuple((weakref.ref(t), t._version, k, t.shape)
                                          for k, t in enumerate(tensors))
        self.reads = TensorReads()  # what fn's ops read (the parameters), at which version
        self.rng_state = rng_state(preserve_rng_state)
        self.check = check
        self.early_stop = early_stop
        self.holders: list = []  # weakref.ref(_Holder), one per array the forward saved
        self.meta: list[tuple] = []  # (op name, shape, dtype) of each
        self.forward_done = False
        self.ignore_extra = False  # set when fn ran backward inside its own first forward
        self.recomputed = defaultdict(weakref.WeakKeyDictionary)  # task id -> {handle: Context}
        self.counter = defaultdict(int)  # task id -> arrays saved so far by its recomputation
        self.done: set[int] = set()  # task ids that have recomputed

    def kept_arrays(self):
        """The arrays this checkpoint keeps (its inputs, or what an enclosing hook stored)."""
        out = []
        for s in self.keeper._ctx.saved:
            value = getattr(s, "value", s)
            if isinstance(value, np.ndarray):
                out.append(value)
            elif hasattr(value, "kept_arrays"):
                out.extend(value.kept_arrays())
        return out

    # The hooks active while fn first runs.
    def pack(self, array):
        holder = _Holder(self)
        self.holders.append(weakref.ref(holder))
        op = _tensor.current_op()
        self.meta.append((op.name() if op is not None else "checkpoint input", array.shape, array.dtype))
        return holder

    def unpack(self, holder):
        task = _tensor.current_backward()
        tid = task.id if task is not None else next(_OUTSIDE_BACKWARD_IDS)
        if tid not in self.done:
            self._recompute(tid)
        if tid not in holder.handles:
            raise CheckpointError("checkpoint: an array was not rebuilt by the recomputation (its "
                                  "holder was created after the recomputation ran)")
        handle = holder.handles[tid]
        if handle is None:
            raise CheckpointError(
                "checkpoint: Unpack is being triggered for a tensor that was already unpacked once "
                "in this backward pass. If you are calling ctx.saved_tensors in backward, make sure "
                "to do so only once.")
        holder.handles[tid] = None
        holder.handed = (tid, handle)  # the box keeps the array until the node holds it
        return self.recomputed[tid][handle].saved[0]

    def _recompute(self, tid):
        # fresh leaves sharing the kept buffers, requiring grad as the inputs did (so that
        # every op saves what it saved the first time)
        leaves = [Tensor(a, requires_grad=rg)
                  for a, rg in zip(self.keeper._ctx.saved_tensors, self.requires_grad)]
        self.reads.check("checkpoint")  # a parameter updated in place since the forward
        args, kwargs = _fill_inputs(self.template, leaves)
        self.stop_after_op = False

        def stop(kind, *_):  # an op hook, called after the ledger's
            if kind == "forward" and self.stop_after_op:
                raise _StopRecomputation
        stopper = register_hooks(op=stop)
        try:
            with recomputing(self.rng_state), saved_tensors_hooks(
                    lambda a: self._pack_recomputed(tid, a), lambda a: a):
                self.fn(*args, **kwargs)
        except _StopRecomputation:
            pass
        finally:
            stopper.remove()
        self.done.add(tid)
        if self.forward_done and not self.ignore_extra and self.counter[tid] != len(self.holders):
            i = self.counter[tid]
            op, shape, dtype = self.meta[i]
            raise CheckpointError(
                f"checkpoint: the recomputation saved {i} arrays for backward but the original "
                f"forward saved {len(self.holders)}; the first one missing was saved by op '{op}' "
                f"(shape {shape}, dtype {dtype}). The checkpointed function must run the same ops "
                f"each time (beware of state it reads or mutates).")

    def _pack_recomputed(self, tid, array):
        i = self.counter[tid]
        self.counter[tid] += 1
        if i >= len(self.holders):
            if not self.forward_done:  # fn called backward inside its first forward (torch's rule 6)
                self.ignore_extra = True
                return array
            op = _tensor.current_op()
            raise CheckpointError(
                f"checkpoint: the recomputation saved more arrays for backward than the original "
                f"forward ({len(self.holders)}); the extra one is saved by op "
                f"'{op.name() if op is not None else '?'}' (shape {array.shape}, dtype {array.dtype}). "
                f"The checkpointed function must run the same ops each time.")
        if self.check:
            op = _tensor.current_op()
            again = (op.name() if op is not None else "checkpoint input", array.shape, array.dtype)
            if again != self.meta[i]:
                x = self.meta[i]
                raise CheckpointError(
                    f"checkpoint: the recomputation differs from the original forward at saved "
                    f"array #{i}: originally op '{x[0]}' saved shape {x[1]} dtype {x[2]}, "
                    f"recomputed op '{again[0]}' saved shape {again[1]} dtype {again[2]}. The "
                    f"checkpointed function must save the same arrays each time (beware of state "
                    f"it reads or mutates).")
        holder = self.holders[i]()
        if holder is not None:  # (None: its node was already released, nothing will ask)
            handle = _Handle()
            holder.handles[tid] = handle
            box = Context()
            box.save_for_backward(array)  # hooks are paused inside a hook: stored as is
            self.recomputed[tid][handle] = box
        if self.early_stop and self.counter[tid] == len(self.holders):
            self.stop_after_op = True  # every needed array exists once this op finishes
        return array  # the recomputed graph keeps it too, so fn may call backward inside

    def forget(self, tid):
        self.recomputed.pop(tid, None)
        for ref in self.holders:
            holder = ref()
            if holder is not None:
                holder.handles.pop(tid, None)


def _checkpoint_without_reentrant(fn, args, kwargs, preserve_rng_state, check, early_stop):
    frame = _Frame(fn, args, kwargs, preserve_rng_state, check,
                   early_stop if _EARLY_STOP[0] is None else _EARLY_STOP[0])
    with saved_tensors_hooks(frame.pack, frame.unpack), frame.reads.watching():
        out = fn(*args, **kwargs)
    frame.forward_done = True
    return out


# --- use_reentrant=True: a Function ---------------------------------------------------------------
class Checkpoint(Function):
    """The reentrant checkpoint (``use_reentrant=True``; torch's ``CheckpointFunction``).

    The ``HandCheckpoint`` of "Dropping and rebuilding" plus RNG replay and the determinism
    check. Apply as
    ``Checkpoint.apply(run_function, preserve_rng_state, determinism_check, is_tensor, *args)``
    where ``is_tensor[i]`` says whether ``args[i]`` is a Tensor; `checkpoint` does this for you.

    forward: run ``run_function`` under ``no_grad`` (nothing inside is saved), keep only the
    tensor inputs. backward: rebuild the inputs as fresh leaves sharing the kept buffers,
    re-run ``run_function`` with grad enabled (replaying the RNG), compare its ops with the
    first run, back-propagate through the new graph at once (parameters inside accumulate
    into ``.grad``) and hand on the inputs' gradients."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, determinism_check, is_tensor, *args):
        ctx.run_function, ctx.is_tensor = run_function, is_tensor
        ctx.constants = [None if t else a for a, t in zip(args, is_tensor)]
        ctx.rng_state = rng_state(preserve_rng_state)
        record = OpLog()
        with no_grad(), record.watching():
            out = run_function(*[Tensor(a) if t else a for a, t in zip(args, is_tensor)])
        if not isinstance(out, Tensor):
            raise TypeError(f"checkpoint: with use_reentrant=True the function must return one Tensor, "
                            f"got {type(out).__name__}; use_reentrant=False accepts any output")
        ctx.first_ops = record.ops if determinism_check else None
        ctx.first_reads = record.reads
        ctx.save_for_backward(*[a for a, t in zip(args, is_tensor) if t])
        return out.data

    @staticmethod
    def backward(ctx, g):
        task = _tensor.current_backward()
        if task is not None and not task.accumulates:
            raise RuntimeError(
                "checkpoint: use_reentrant=True is incompatible with grad() or with passing "
                "`inputs` to backward(); use use_reentrant=False, or call backward() without inputs")
        saved = iter(ctx.saved_tensors)  # raises if released, or if an input was updated
        ctx.first_reads.check("checkpoint")  # a parameter updated in place since
        needs = ctx.needs_input_grad[4:]
        inputs = [Tensor(next(saved), requires_grad=need) if t else c
                  for t, c, need in zip(ctx.is_tensor, ctx.constants, needs)]
        record = OpLog()
        with recomputing(ctx.rng_state), record.watching():
            out = ctx.run_function(*inputs)
        if ctx.first_ops is not None:
            compare_ops(ctx.first_ops, record.ops)
        if not isinstance(out, Tensor) or not out.requires_grad:
            raise RuntimeError("checkpoint: none of output has requires_grad=True, this checkpoint() "
                               "is not necessary")
        wanted = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
        grads = iter(backprop([out], [g], capture=wanted))
        return (None,) * 4 + tuple(next(grads) if isinstance(x, Tensor) and x.requires_grad else None
                                   for x in inputs)


def _checkpoint_reentrant(fn, args, kwargs, preserve_rng_state, check):
    if kwargs:
        raise ValueError(f"checkpoint: keyword arguments are not supported with use_reentrant=True "
                         f"(got {sorted(kwargs)}); use use_reentrant=False")
    is_tensor = tuple(isinstance(a, Tensor) for a in args)
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        warnings.warn("checkpoint: None of the inputs have requires_grad=True. Gradients will be None "
                      "(use_reentrant=True gives gradients only through the positional tensor "
                      "inputs; use_reentrant=False also reaches the parameters inside)",
                      UserWarning, stacklevel=3)
    out = Checkpoint.apply(fn, preserve_rng_state, check, is_tensor, *args)
    if out._ctx is not None:  # name the saved inputs by their place among fn's arguments
        out._ctx.versions = tuple((ref, v, k - 4, shape) for ref, v, k, shape in out._ctx.versions)
    return out


# --- the public function --------------------------------------------------------------------------
def checkpoint(function, *args, use_reentrant: bool = False, preserve_rng_state: bool = True,
               determinism_check="default", early_stop: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` keeping only its tensor inputs for backward.

    Args:
        function: what to run (a Module or any callable).
        *args, **kwargs: its arguments; every Tensor among them (also inside lists,
            tuples and dicts) is kept for the recomputation.
        use_reentrant: False (default): saved-tensor hooks, the original graph is
            back-propagated (see the module docstring). True: the `Checkpoint` Function.
        preserve_rng_state: replay ``minigrad.random``'s state in the recomputation
            (dropout draws the same masks).
        determinism_check: ``"default"`` (or True) raises `CheckpointError` naming the first
            saved array (non-reentrant) or op output (reentrant) whose op, shape or dtype
            differs in the recomputation; ``"none"`` (or False) skips the check.
        early_stop: non-reentrant only: stop recomputing once every array backward needs is
            rebuilt (torch's default; `set_checkpoint_early_stop` overrides it). The op that
            saves the last one runs to its end, so that the ledger's timeline shows the
            recomputation's peak; torch stops inside that op's save, which skips the op's
            work when the array is one of its inputs (a linear layer's).

    Returns:
        What ``function`` returns. Under ``no_grad`` it is simply called. The gradients equal
        those of calling ``function`` plainly, bit for bit, when it is deterministic given the
        random state.

    Raises:
        TypeError: ``function`` is not callable.
        CheckpointError: the recomputation differs (during backward).

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> block = lambda h: (h * h).tanh()
        >>> y = checkpoint(block, x)           # block's activations are not kept
        >>> y.sum().backward()                 # block runs again here
        >>> np.allclose(x.grad, 2 * x.data * (1 - np.tanh(x.data ** 2) ** 2))
        True
    """
    if not callable(function):
        hint = (" (for a list of layers use checkpoint_sequential(layers, segments, x))"
                if isinstance(function, (list, tuple)) else "")
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}{hint}")
    for name, value in (("use_reentrant", use_reentrant), ("preserve_rng_state", preserve_rng_state),
                        ("early_stop", early_stop)):
        check_flag(name, value, "checkpoint")
    check = determinism(determinism_check)
    if not is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant:
        return _checkpoint_reentrant(function, args, kwargs, preserve_rng_state, check)
    return _checkpoint_without_reentrant(function, args, kwargs, preserve_rng_state, check,
                                         bool(early_stop))


# --- segment plans ------------------------------------------------------------------------
def _layer_list(functions, where):
    if isinstance(functions, Tensor) or not hasattr(functions, "__iter__"):
        raise TypeError(f"{where}: functions must be a list of layers (callables) or an "
                        f"nn.Sequential, got {type(functions).__name__}")
    layers = list(functions)
    if not layers:
        raise ValueError(f"{where}: no layers given")
    for i, layer in enumerate(layers):
        if not callable(layer):
            raise TypeError(f"{where}: functions[{i}] is not callable ({type(layer).__name__})")
    return layers


def _segment_starts(segments, n):
    """Segment starts from what ``checkpoint_sequential`` accepts as ``segments``."""
    where = "checkpoint_sequential"
    if isinstance(segments, (int, np.integer)) and not isinstance(segments, (bool, np.bool_)):
        k = check_int("segments", segments, 1, n, where)
        size = n // k  # torch's split: k - 1 segments of n // k layers, the last takes the rest
        return [j * size for j in range(k)]
    starts = getattr(segments, "starts", segments)
    plan_n = getattr(segments, "n", None)
    if plan_n is not None and plan_n != n:
        raise ValueError(f"{where}: the plan is for n={plan_n} layers but {n} layers were given")
    if isinstance(starts, (str, bytes, dict, set)) or not hasattr(starts, "__iter__"):
        raise TypeError(f"{where}: segments must be an int, a sorted list of segment starts or a "
                        f"plan, got {type(segments).__name__}")
    return list(check_segment_starts(starts, n, where))


def checkpoint_sequential(functions, segments, input, use_reentrant: bool = False,
                          preserve_rng_state: bool = True, determinism_check="default"):
    """Run the chain ``h = f(h)`` over ``functions`` on ``input``, checkpointing segments.

    As in ``torch.utils.checkpoint.checkpoint_sequential``, every segment but the last is
    run through `checkpoint`; **the last segment is not checkpointed**: its activations are
    the first backward needs. Segments are recomputed whole (``early_stop=False``): a
    checkpointed layer runs its forward exactly once more, which is what the planners of
    `minigrad.plan` count.

    Args:
        functions: a list of callables (Tensor -> Tensor) or an ``nn.Sequential``.
        segments: an int ``k`` (``1 <= k <= n``: ``k - 1`` segments of ``n // k`` layers and
            a last one with the rest, torch's split; ``k = 1`` checkpoints nothing); a sorted
            list of segment starts beginning with 0 (``[0, 3, 7]`` on 10 layers: layers 0-2,
            3-6, 7-9); a plan with ``starts`` (``minigrad.plan.optimal_segments``); or a
            schedule with ``n`` and ``actions`` (``minigrad.plan.revolve``, a nested
            schedule), which `run_schedule` executes.
        input: the chain's input Tensor.
        use_reentrant, preserve_rng_state, determinism_check: passed to `checkpoint`.

    Returns:
        The chain's output Tensor.

    Raises:
        ValueError, TypeError: bad segments (out of range, not integers, not increasing),
            a plan for another number of layers, or layers that are not callable.

    Example:
        >>> from minigrad import Tensor, nn
        >>> layers = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(10)]
        >>> x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
        >>> y = checkpoint_sequential(layers, 4, x)          # 4 segments
        >>> y = checkpoint_sequential(layers, [0, 3, 7], x)  # explicit starts
        >>> y.sum().backward(); x.grad.shape
        (4, 8)
    """
    layers = _layer_list(functions, "checkpoint_sequential")
    n = len(layers)
    if not hasattr(segments, "starts") and hasattr(segments, "actions"):
        return run_schedule(layers, segments, input, preserve_rng_state=preserve_rng_state,
                            determinism_check=determinism_check)
    bounds = _segment_starts(segments, n) + [n]

    def run_segment(a, b):
        def run(h):
            for layer in layers[a:b]:
                h = layer(h)
            return h
        return run

    h = input
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = checkpoint(run_segment(a, b), h, use_reentrant=use_reentrant,
                       preserve_rng_state=preserve_rng_state, determinism_check=determinism_check,
                       early_stop=False)
    return run_segment(bounds[-2], n)(h)


# --- the schedule executor: a loop over a plan's actions ----------------------------------------
class _ScheduleRun:
    """The state of one execution of a schedule's actions on a chain of layers.

    ``pos`` and ``state``: the chain's position and the array of ``x_pos``; ``snapshots``:
    position -> a `Context` keeping that input (the engine's saving point, so the ledger
    counts it as an activation); ``tape``: layers run with taping whose backward is still to
    come, as ``(layer, input leaf, output node)``; ``grad``: the gradient of the position the
    backward has reached."""

    def __init__(self, layers, actions, x, preserve_rng_state, check):
        self.layers, self.actions = layers, list(actions)
        self.n = len(layers)
        self.preserve, self.check = preserve_rng_state, check
        self.pos, self.state = 0, x.data
        self.requires_grad = [bool(x.requires_grad)] + [None] * self.n  # of x_0 .. x_n
        self.first_rng: list = [None] * self.n
        self.first_ops: list = [None] * self.n
        self.first_reads: list = [None] * self.n  # TensorReads of each layer's first run
        self.snapshots: dict[int, Context] = {}
        self.tape: list = []
        self.step = 0  # next action
        self.grad = None
        self.output = None

    def _run(self, i, taped):
        """Run layer ``i`` on the current state; the first run records its RNG state, ops and
        whether its output needs grad, later runs replay and compare them."""
        if i != self.pos:
            raise ValueError(f"run_schedule: action runs layer {i} but the chain is at position "
                             f"{self.pos}; the schedule's actions are inconsistent")
        first = self.first_ops[i] is None
        if not first:
            self.first_reads[i].check(f"run_schedule (layer {i})")
        rng_before = rng_state(self.preserve) if first else None
        record = OpLog()
        leaf = Tensor(self.state, requires_grad=bool(self.requires_grad[i]) and taped)
        # a later run replays the first run's random state (all later runs are in backward)
        with (nullcontext() if first else recomputing(self.first_rng[i])), record.watching(), \
                set_grad_enabled(taped):
            out = self.layers[i](leaf)
        if not isinstance(out, Tensor):
            raise TypeError(f"run_schedule: layer {i} returned {type(out).__name__}, expected a Tensor")
        if first:
            self.first_ops[i] = record.ops
            self.first_reads[i] = record.reads
            self.requires_grad[i + 1] = bool(self.requires_grad[i]) or record.saw_grad
            # replay the random state only for layers that drew random numbers
            if rng_before is not None and rng_before != rng_state():
                self.first_rng[i] = rng_before
        elif self.check:
            compare_ops(self.first_ops[i], record.ops, f"run_schedule (layer {i})")
        self.pos, self.state = i + 1, out.data
        if taped:
            self.tape.append((i, leaf, out._ctx if out._ctx is not None else out))

    def _reverse(self, i):
        if not self.tape or self.tape[-1][0] != i:
            raise ValueError(f"run_schedule: action reverses layer {i}, but the last layer taped "
                             f"and not yet reversed is {self.tape[-1][0] if self.tape else None}")
        _, leaf, node = self.tape.pop()
        if self.grad is None or not (node.requires_grad if isinstance(node, Tensor) else True):
            self.grad = None  # nothing below needs a gradient
            return
        captured = backprop([node], [self.grad], capture=[leaf] if leaf.requires_grad else [])
        self.grad = captured[0] if captured else None

    def forward(self):
        """Run actions until the chain's output exists; the rest waits for the gradient."""
        while self.step < len(self.actions):
            act = self.actions[self.step]
            kind = act[0]
            if kind in ("reverse", "restore", "free"):
                break
            self.step += 1
            if kind == "taped":  # its forward now, its reverse first thing in backward
                self._run(act[1], taped=True)
                self.step -= 1
                self.actions[self.step] = ("reverse", act[1])
                break
            self._do(act)
        if self.pos != self.n:
            raise ValueError(f"run_schedule: the actions before the first reversal reach position "
                             f"{self.pos} of {self.n}; a schedule must run the whole chain before "
                             f"reversing")
        # (no layer taped is fine: the last layers are then checkpointed, and the backward
        # starts by restoring and recomputing them)
        return self.state

    def backward(self, grad):
        self.grad = grad
        try:
            while self.step < len(self.actions):
                act = self.actions[self.step]
                self.step += 1
                if act[0] in ("reverse", "taped", "free", "snapshot", "restore"):
                    self._do(act)
                else:
                    with recomputing():
                        self._do(act)
        finally:
            self.release()
        return self.grad

    def _do(self, act):
        kind = act[0]
        if kind == "snapshot":
            if act[1] != self.pos:
                raise ValueError(f"run_schedule: snapshot of position {act[1]} while the chain is at "
                                 f"{self.pos}")
            box = Context()
            box.save_for_backward(self.state)
            self.snapshots[act[1]] = box
        elif kind == "advance":
            for i in range(act[1], act[2]):
                self._run(i, taped=False)
        elif kind == "tape":
            self._run(act[1], taped=True)
        elif kind == "reverse":
            self._reverse(act[1])
        elif kind == "taped":
            with recomputing():
                self._run(act[1], taped=True)
            self._reverse(act[1])
        elif kind == "restore":
            box = self.snapshots.get(act[1])
            if box is None:
                raise ValueError(f"run_schedule: restore of position {act[1]}, which holds no snapshot")
            self.pos, self.state = act[1], box.saved[0]
        elif kind == "free":
            box = self.snapshots.pop(act[1], None)
            if box is not None:
                box.release()
        else:
            raise ValueError(f"run_schedule: unknown action {act!r}; allowed: snapshot, advance, "
                             f"tape, reverse, taped, restore, free")

    def release(self):
        for box in self.snapshots.values():
            box.release()
        self.snapshots.clear()
        self.tape.clear()
        self.state = None


class _Schedule(Function):
    """The graph node of one schedule execution: its forward runs the actions up to the
    chain's output, its backward the rest (a reentrant backward, like `Checkpoint`). The
    ledger counts it as one ``"checkpoint"`` event (it is bookkeeping, not forward work)."""

    @classmethod
    def name(cls) -> str:
        return "checkpoint"

    @staticmethod
    def forward(ctx, dummy, x, run):
        ctx.run = run
        return run.forward()

    @staticmethod
    def backward(ctx, g):
        task = _tensor.current_backward()
        if task is not None and not task.accumulates:
            raise RuntimeError("run_schedule: a schedule is back-propagated by a reentrant backward; "
                               "it does not support grad() or backward(inputs=...)")
        run = ctx.run
        ctx.saved_tensors  # raises if the chain's input was updated in place since
        if run.state is None:
            raise RuntimeError("run_schedule: this schedule was already back-propagated (it can be "
                               "back-propagated once; retain_graph=True is not supported)")
        gx = run.backward(g)
        return None, gx, None


def run_schedule(functions, plan, input, preserve_rng_state: bool = True, determinism_check="default"):
    """Execute a checkpointing schedule on a chain of layers, one action at a time.

    The actions (``plan.actions``; see `minigrad.plan.binomial.revolve_actions`):
    ``("snapshot", i)`` keep the chain's state before layer ``i``; ``("advance", i, j)`` run
    layers ``i .. j-1`` without taping; ``("tape", i)`` run layer ``i`` taping it (its saved
    arrays stay until it is reversed); ``("reverse", i)`` back-propagate through the last
    taped layer ``i``; ``("taped", i)`` tape and reverse at once; ``("restore", i)`` resume
    from the snapshot before layer ``i``; ``("free", i)`` drop that snapshot. Everything up to
    the first reversal runs in the forward pass (it must reach the chain's output); the rest
    runs when the gradient arrives. The loop is iterative: any depth, any nesting.

    Each layer's first run records its random state and ops; every later run replays the
    state (``preserve_rng_state``) and is compared with it (``determinism_check``). The
    backward is reentrant (each taped layer is back-propagated on its own, parameters
    accumulating into ``.grad``), so it does not support ``grad()``.

    Args:
        functions: the layers (callables Tensor -> Tensor), ``len == plan.n``.
        plan: an object with ``n`` and ``actions`` (``plan.revolve(n, slots)``, a
            ``SegmentPlan``, a nested schedule).
        input: the chain's input Tensor.

    Returns:
        The chain's output Tensor.

    Example:
        >>> from minigrad import Tensor, nn, plan
        >>> layers = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(10)]
        >>> x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
        >>> y = run_schedule(layers, plan.revolve(len(layers), 3), x)
        >>> y.sum().backward(); x.grad.shape
        (4, 8)
    """
    layers = _layer_list(functions, "run_schedule")
    n_plan, actions = getattr(plan, "n", None), getattr(plan, "actions", None)
    if n_plan is None or actions is None:
        raise TypeError(f"run_schedule: plan must have n and actions (a schedule from "
                        f"minigrad.plan), got {type(plan).__name__}")
    if n_plan != len(layers):
        raise ValueError(f"run_schedule: the plan is for n={n_plan} layers but {len(layers)} layers "
                         f"were given")
    if not isinstance(input, Tensor):
        raise TypeError(f"run_schedule: input must be a Tensor, got {type(input).__name__}")
    check = determinism(determinism_check)
    preserve_rng_state = check_flag("preserve_rng_state", preserve_rng_state, "run_schedule")
    if not is_grad_enabled():
        h = input
        for layer in layers:
            h = layer(h)
        return h
    run = _ScheduleRun(layers, actions, input, preserve_rng_state, check)
    # A zero-size input that requires grad makes the engine record the node even when `input`
    # does not require grad (the parameters inside still do; torch's _NoopSaveInputs trick).
    out = _Schedule.apply(_dummy(), input, run)
    if out._ctx is not None:  # the input's array is the chain's first state, kept as saved
        out._ctx.versions = ((weakref.ref(input), input._version, 0, input.shape),)
    if not run.requires_grad[run.n]:
        run.release()  # nothing to differentiate: an output that needs no gradient
        return out.detach()
    return out
