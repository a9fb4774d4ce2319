"""The executors of plans: walk a plan and run it with checkpoint's pieces.

A plan is plain data (`minigrad.plan` makes them; nothing here imports a planner):

* a number of segments, a list of segment starts, or an object with ``starts`` (a
  ``SegmentPlan``): `checkpoint_sequential` runs one `minigrad.checkpoint.checkpoint` per
  segment but the last, as ``torch.utils.checkpoint.checkpoint_sequential`` does;
* an object with ``n`` and ``actions`` (Revolve's binomial schedule, a nested schedule of
  `minigrad.plan.rotor`): `run_schedule` walks its actions one by one (snapshot, advance,
  tape, reverse, restore, free), at any depth of nesting.

``checkpoint_sequential`` dispatches on the plan's shape (``starts`` or ``actions``), so
one call runs any plan. (Importing this module also keeps the older import path
``minigrad.checkpoint.checkpoint_sequential`` / ``run_schedule`` working.)
"""
from __future__ import annotations

import numpy as np

from minigrad import checkpoint as _checkpoint
from minigrad import random as _random
from minigrad import tensor as _tensor
from minigrad._validation import check_int, check_segment_starts
from minigrad.autograd import run_backward
from minigrad.checkpoint import (_check_flag, _compare_ops, _determinism, _dummy, _OpRecord,
                                 _recomputing, checkpoint)
from minigrad.grad_mode import is_grad_enabled, set_grad_enabled
from minigrad.tensor import Context, Function, Tensor

__all__ = ["checkpoint_sequential", "run_schedule"]


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
            schedule with ``n`` and ``actions`` (``minigrad.plan.revolve``, a multi-level
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
        if first:
            rng_before = _random.get_rng_state() if self.preserve else None
        elif self.first_rng[i] is not None:
            _random.set_rng_state(self.first_rng[i])
        record = _OpRecord()
        leaf = Tensor(self.state, requires_grad=bool(self.requires_grad[i]) and taped)
        with record.watching(), set_grad_enabled(taped):
            out = self.layers[i](leaf)
        if not isinstance(out, Tensor):
            raise TypeError(f"run_schedule: layer {i} returned {type(out).__name__}, expected a Tensor")
        if first:
            self.first_ops[i] = record.ops
            self.requires_grad[i + 1] = bool(self.requires_grad[i]) or record.saw_grad
            # replay the random state only for layers that drew random numbers
            if rng_before is not None and rng_before != _random.get_rng_state():
                self.first_rng[i] = rng_before
        elif self.check:
            _compare_ops(self.first_ops[i], record.ops, f"run_schedule (layer {i})")
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
        captured = run_backward([node], [self.grad], capture=[leaf] if leaf.requires_grad else [])
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
        rng = _random.get_rng_state()
        try:
            while self.step < len(self.actions):
                act = self.actions[self.step]
                self.step += 1
                if act[0] in ("reverse", "taped", "free", "snapshot", "restore"):
                    self._do(act)
                else:
                    with _recomputing(None):
                        self._do(act)
        finally:
            _random.set_rng_state(rng)
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
            with _recomputing(None):
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
        if run.state is None:
            raise RuntimeError("run_schedule: this schedule was already back-propagated (it can be "
                               "back-propagated once; retain_graph=True is not supported)")
        gx = run.backward(g)
        return None, gx, None


def run_schedule(functions, plan, input, preserve_rng_state: bool = True, determinism_check="default"):
    """Execute a checkpointing schedule on a chain of layers, one action at a time.

    The actions (``plan.actions``; see `minigrad.plan.revolve.revolve_actions`):
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
            ``SegmentPlan``, a multi-level schedule).
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
    check = _determinism(determinism_check)
    preserve_rng_state = _check_flag("preserve_rng_state", preserve_rng_state, "run_schedule")
    if not is_grad_enabled():
        h = input
        for layer in layers:
            h = layer(h)
        return h
    run = _ScheduleRun(layers, actions, input, preserve_rng_state, check)
    # A zero-size input that requires grad makes the engine record the node even when `input`
    # does not require grad (the parameters inside still do; torch's _NoopSaveInputs trick).
    out = _Schedule.apply(_dummy(), input, run)
    if not run.requires_grad[run.n]:
        run.release()  # nothing to differentiate: an output that needs no gradient
        return out.detach()
    return out


# The older import path (minigrad.checkpoint.checkpoint_sequential) keeps working.
_checkpoint.checkpoint_sequential = checkpoint_sequential
_checkpoint.run_schedule = run_schedule
