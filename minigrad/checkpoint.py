"""Activation checkpointing: keep a segment's inputs, recompute the rest in backward.

``checkpoint(fn, *args)`` runs ``fn`` under ``no_grad`` (nothing inside is saved
for backward) and records one node that saves only ``fn``'s tensor inputs, at
the engine's one saving point (so the ledger counts them as activations). When
backward reaches the node it

1. restores the random-number state of the first forward (``preserve_rng_state``),
   so dropout draws the same masks,
2. re-runs ``fn`` with grad enabled on tensors that share the saved inputs'
   buffers (the ledger's phase ``"recompute"``),
3. compares every recomputed op's output shape and dtype with the first forward's
   (``determinism_check``) and raises `CheckpointError` naming the first op that differs,
4. back-propagates through the recomputed graph at once (parameters inside ``fn``
   accumulate into ``.grad`` as usual) and hands the inputs' gradients on,
5. frees the recomputed graph and, when the engine releases the node, the inputs.

Checkpoints nest: ``fn`` may call ``checkpoint`` itself (`minigrad.multilevel`
builds Revolve schedules that way); under ``no_grad`` a checkpoint simply calls ``fn``.

Unlike torch's ``use_reentrant=True``, a checkpoint whose inputs do not require
grad still gives the parameters inside ``fn`` their gradients (the first
forward notices them); it warns, because in torch's reentrant mode this is the
classic "gradients are None" trap.

Mutable state: a module that updates state in its forward (BatchNorm's running
statistics) would update it twice, once in the forward and once in the
recomputation. `is_recomputing` lets it tell the two apart;
``minigrad.nn.BatchNorm1d`` skips the update during recomputation unless built
with ``update_stats_on_recompute=True`` (torch's behaviour, shown in chapter 6).
"""
from __future__ import annotations

import warnings

import numpy as np

from minigrad import memory as _mem
from minigrad import random as _random
from minigrad import tensor as _tensor
from minigrad.tensor import Context, Tensor, enable_grad, is_grad_enabled, no_grad, run_backward

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "is_recomputing"]


class CheckpointError(RuntimeError):
    """A recomputation did not reproduce the original forward (shape or dtype of an op's output)."""


_DEPTH = 0  # how many checkpoint recomputations are running (nested ones count)


def is_recomputing() -> bool:
    """True while a checkpoint re-runs its function during backward."""
    return _DEPTH > 0


class _Recorder:
    """Watches the ops executed while a checkpointed function runs: whether any
    input requires grad (a parameter), and each output's (op, shape, dtype)."""

    def __init__(self, record: bool):
        self.record = record
        self.ops: list[tuple[str, tuple, np.dtype]] = []
        self.saw_grad = False

    def __call__(self, fn, args, result):
        if fn is _Checkpoint:
            return
        if not self.saw_grad:
            self.saw_grad = any(isinstance(a, Tensor) and a.requires_grad for a in args)
        if self.record:
            self.ops.append((fn.name(), result.shape, result.dtype))


def _run_recorded(fn, args, kwargs, record):
    rec = _Recorder(record)
    _tensor._OP_OBSERVERS.append(rec)
    try:
        out = fn(*args, **kwargs)
    finally:
        _tensor._OP_OBSERVERS.remove(rec)
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: fn must return one Tensor, got {type(out).__name__}")
    return out, rec


def _compare(first: _Recorder, again: _Recorder, out0, out1):
    a, b = first.ops, again.ops
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            raise CheckpointError(
                f"checkpoint: the recomputation differs from the original forward at op #{i} "
                f"'{y[0]}' (original op '{x[0]}'): original output shape {x[1]} dtype {x[2]}, "
                f"recomputed shape {y[1]} dtype {y[2]}. The checkpointed function must run the "
                f"same ops on the same shapes each time (beware of state it reads or mutates).")
    if len(a) != len(b):
        i = min(len(a), len(b))
        extra = (b if len(b) > len(a) else a)[i]
        which = "recomputation ran an extra" if len(b) > len(a) else "recomputation skipped the"
        raise CheckpointError(
            f"checkpoint: the {which} op #{i} '{extra[0]}' (original forward ran {len(a)} ops, "
            f"recomputation {len(b)}).")
    if out0 != out1:
        raise CheckpointError(
            f"checkpoint: the recomputed output has shape {out1[0]} dtype {out1[1]}, the original "
            f"had shape {out0[0]} dtype {out0[1]}")


class _Checkpoint:
    """The graph node of one checkpoint (not a Function: its forward is ``fn``)."""

    @staticmethod
    def name():
        return "checkpoint"

    @staticmethod
    def backward(ctx, g):
        global _DEPTH
        saved = iter(ctx.saved_tensors)  # raises if this node was already released
        args = []
        for is_tensor, value in ctx.args:
            # Shares the saved buffer: recomputing adds no bytes for the inputs.
            args.append(Tensor(next(saved), requires_grad=value) if is_tensor else value)
        now = _random.get_rng_state() if ctx.rng_state is not None else None
        if ctx.rng_state is not None:
            _random.set_rng_state(ctx.rng_state)
        _DEPTH += 1
        try:
            with enable_grad(), _mem.phase("recompute"):
                out, rec = _run_recorded(ctx.run, args, ctx.kwargs, ctx.first is not None)
        finally:
            _DEPTH -= 1
            if now is not None:
                _random.set_rng_state(now)
        if ctx.first is not None:
            _compare(ctx.first, rec, ctx.out_meta, (out.shape, out.dtype))
        if not out.requires_grad:
            return tuple(None for _ in args)
        wanted = [a for a in args if isinstance(a, Tensor) and a.requires_grad]
        grads = iter(run_backward(out, g, inputs=wanted))
        return tuple(next(grads) if isinstance(a, Tensor) and a.requires_grad else None for a in args)


def _checkpoint(fn, args, kwargs, preserve_rng_state, determinism_check, warn):
    if not is_grad_enabled():
        return fn(*args, **kwargs)
    if determinism_check in ("default", True):
        determinism_check = True
    elif determinism_check in ("none", False, None):
        determinism_check = False
    else:
        raise ValueError(f"checkpoint: determinism_check must be True/False or 'default'/'none', "
                         f"got {determinism_check!r}")
    inputs_need_grad = any(isinstance(a, Tensor) and a.requires_grad for a in args)
    if warn and not inputs_need_grad:
        warnings.warn(
            "checkpoint: none of the inputs requires grad. minigrad still recomputes fn and gives "
            "the parameters inside it their gradients (torch's use_reentrant=True would leave "
            "them None); make an input require grad, or use use_reentrant=False in torch.",
            UserWarning, stacklevel=3)
    rng_state = _random.get_rng_state() if preserve_rng_state else None
    with no_grad():
        out, rec = _run_recorded(fn, args, kwargs, determinism_check)
    if not (inputs_need_grad or rec.saw_grad):
        return out  # nothing to differentiate: no node, nothing kept
    ctx = Context(True)
    ctx.fn = _Checkpoint
    ctx.inputs = tuple(_tensor._edge(a) for a in args)
    ctx.input_shapes = tuple(a.shape if isinstance(a, Tensor) else None for a in args)
    ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
    # (is_tensor, requires_grad or the value): the node keeps no Tensor, only the saved arrays.
    ctx.args = tuple((True, a.requires_grad) if isinstance(a, Tensor) else (False, a) for a in args)
    ctx.kwargs, ctx.run = kwargs, fn
    ctx.rng_state = rng_state
    ctx.first = rec if determinism_check else None
    ctx.out_meta = (out.shape, out.dtype)
    # The engine's one saving point: the inputs become this node's activations.
    ctx.save_for_backward(*[a.data for a in args if isinstance(a, Tensor)])
    result = Tensor(out.data, requires_grad=True)
    result._ctx = ctx
    for obs in _tensor._OP_OBSERVERS:  # an enclosing checkpoint's probe
        obs(_Checkpoint, args, result)
    _mem._LEDGER.event("checkpoint")
    return result


def checkpoint(fn, *args, preserve_rng_state: bool = True, determinism_check=True, **kwargs):
    """Run ``fn(*args, **kwargs)`` keeping only its tensor inputs for backward.

    ``fn`` must return one Tensor. Returns a tensor equal to ``fn(*args)``; in
    backward, ``fn`` is re-run (see the module docstring) and the gradients equal
    those of running ``fn`` plainly, bit for bit, when ``fn`` is deterministic
    given the random state. ``preserve_rng_state``: replay ``minigrad.random``'s
    state in the recomputation (dropout masks match). ``determinism_check``
    (True/"default" or False/"none"): raise `CheckpointError` naming the first op
    whose recomputed output differs in shape or dtype."""
    if not callable(fn):
        raise TypeError(f"checkpoint: fn must be callable, got {type(fn).__name__}")
    return _checkpoint(fn, args, kwargs, preserve_rng_state, determinism_check, warn=True)


def _segment_starts(segments, n):
    if isinstance(segments, bool):
        raise TypeError("checkpoint_sequential: segments must be an int, a list of starts or a plan")
    if isinstance(segments, (int, np.integer)):
        k = int(segments)
        if not 1 <= k <= n:
            raise ValueError(f"checkpoint_sequential: segments={k} is out of range for {n} layers; "
                             f"allowed: 1 <= segments <= {n}")
        size = n // k  # torch's split: k - 1 segments of n // k layers, the last takes the rest
        return [j * size for j in range(k)]
    starts = getattr(segments, "starts", segments)
    plan_n = getattr(segments, "n", None)
    if plan_n is not None and plan_n != n:
        raise ValueError(f"checkpoint_sequential: the plan is for n={plan_n} layers but {n} layers were given")
    try:
        starts = [int(s) for s in starts]
    except TypeError:
        raise TypeError(f"checkpoint_sequential: segments must be an int, a sorted list of segment "
                        f"starts or a plan, got {type(segments).__name__}") from None
    if not starts or starts[0] != 0:
        raise ValueError(f"checkpoint_sequential: segment starts must begin with 0, got {starts}")
    if any(b <= a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"checkpoint_sequential: segment starts must be strictly increasing, got {starts}")
    if starts[-1] >= n:
        raise ValueError(f"checkpoint_sequential: segment starts must be in 0 .. {n - 1} for {n} "
                         f"layers, got {starts}")
    return starts


def checkpoint_sequential(layers, segments, x, preserve_rng_state: bool = True,
                          determinism_check=True):
    """Run the chain ``h = layer(h)`` over ``layers`` on ``x`` with checkpointed segments.

    ``segments`` is an int ``k`` (``1 <= k <= len(layers)``: ``k - 1`` segments of
    ``n // k`` layers and a last one with the rest, as in torch), a sorted list of
    segment start indices beginning with 0 (``[0, 3, 7]`` on 10 layers: layers
    0-2, 3-6, 7-9), a plan from `minigrad.plan` (anything with ``.starts``), or a
    Revolve plan (``kind == "revolve"``, run by `minigrad.multilevel.run_revolve`).

    As in ``torch.utils.checkpoint.checkpoint_sequential``, **the last segment is
    not checkpointed**: it runs normally and keeps its activations (they are
    needed first in backward anyway). ``segments=1`` therefore checkpoints nothing.
    The first segment's input need not require grad (no warning here)."""
    layers = list(layers)
    n = len(layers)
    if n == 0:
        raise ValueError("checkpoint_sequential: no layers given")
    if getattr(segments, "kind", None) == "revolve":
        from minigrad.multilevel import run_revolve  # lazy: written alongside the planners
        return run_revolve(layers, segments, x)
    starts = _segment_starts(segments, n)
    bounds = starts + [n]

    def run_segment(a, b):
        def run(h):
            for layer in layers[a:b]:
                h = layer(h)
            return h
        return run

    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = _checkpoint(run_segment(a, b), (h,), {}, preserve_rng_state, determinism_check, warn=False)
    return run_segment(bounds[-2], n)(h)
