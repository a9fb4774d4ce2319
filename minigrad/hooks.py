"""The engine's hook registry: how the other modules plug into `minigrad.tensor`.

The engine calls `tell` at its hook points (an array held, a role taken or ended, an op
run); observers registered with `register_hooks` hear them. The byte ledger
(`minigrad.memory`) is the observer; no other module calls the ledger. The saved-tensor
hook point, ``SAVED_HOOKS``, holds the pack functions that
`minigrad.autograd.saved_tensors_hooks` pushes (innermost last); ``BACKWARD_TASKS`` holds
the function that makes the task ``Tensor.backward`` runs (`minigrad.autograd` installs
it: ``backward(inputs=)``, retained gradients, argument checks).
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager

__all__ = ["register_hooks", "RemovableHandle", "tell", "hold_role", "release_role", "in_phase",
           "dry_run", "is_dry_run", "SAVED_HOOKS", "BACKWARD_TASKS"]

_HOOKS: dict[str, list] = {"array": [], "hold": [], "release": [], "op": [], "phase": []}
SAVED_HOOKS: list = []  # pack functions of the saved_tensors_hooks blocks, innermost last
BACKWARD_TASKS: list = []  # (tensor, gradient, inputs) -> (root gradient, task); last wins
_DRY_RUNS = [0]  # how many dry_run blocks are open


class RemovableHandle:
    """What `register_hooks` returns: ``handle.remove()`` unregisters (as in torch)."""

    def __init__(self, entries):
        self._entries = entries

    def remove(self) -> None:
        for event, fn in self._entries:
            if fn in _HOOKS[event]:
                _HOOKS[event].remove(fn)
        self._entries = []


def register_hooks(**hooks) -> RemovableHandle:
    """Observe the engine; each keyword names an event, its value is a callable (or None).

    Args:
        array: ``array(a)``: the engine starts holding array ``a`` (a tensor's data, a
            gradient in flight).
        hold: ``hold(a, role)``: ``a`` takes a role: ``"activations"`` while stored for
            backward, ``"gradients"`` while some ``.grad``; ``"parameters"``,
            ``"buffers"``, ``"optimizer"`` when `minigrad.nn`/`minigrad.optim` declare
            them (`hold_role`).
        release: ``release(a, role)``: that role ends.
        op: ``op(kind, fn, ctx, args, kwargs, output)`` after every op, ``kind``
            ``"forward"`` or ``"backward"`` (then ``args``, ``kwargs``, ``output`` are None).
        phase: ``phase(name)``, a context manager entered around the ops of `in_phase`.

    Returns:
        A `RemovableHandle`.

    Example:
        >>> from minigrad import Tensor
        >>> names = []
        >>> h = register_hooks(op=lambda kind, fn, *rest: names.append((kind, fn.name())))
        >>> (Tensor([1.0], requires_grad=True) * 2.0).sum().backward()
        >>> h.remove(); names
        [('forward', 'mul'), ('forward', 'sum'), ('backward', 'sum'), ('backward', 'mul')]
    """
    hooks = {event: fn for event, fn in hooks.items() if fn is not None}
    for event, fn in hooks.items():
        if event not in _HOOKS:
            raise TypeError(f"register_hooks: unknown event {event!r}; allowed: {list(_HOOKS)}")
        if not callable(fn):
            raise TypeError(f"register_hooks: hooks must be callable, got {type(fn).__name__}")
    for event, fn in hooks.items():
        _HOOKS[event].append(fn)
    return RemovableHandle(list(hooks.items()))


# A grader's audit hook (the ledger's event, `minigrad.memory.LEDGER_EVENT`) learns
# which node saved which arrays, released them, runs backward (`audit(NODE_EVENT, ...)`
# in `minigrad.tensor`): it takes a node's release in only from the node that saved
# them, once. Without a hook an event costs one C call.
NODE_EVENT = "minigrad.memory.ledger"
audit = sys.audit


def tell(event: str, *args) -> None:
    """Call every observer of ``event`` with ``args`` (the engine's hook points)."""
    for hook in _HOOKS[event]:
        hook(*args)


def hold_role(array, role: str) -> None:
    """Tell the observers that ``array`` takes ``role`` once more (``"parameters"``,
    ``"buffers"``, ``"optimizer"``): how `minigrad.nn` and `minigrad.optim` declare the
    arrays they own. The ledger (an observer) refuses unknown roles.

    Example:
        >>> import numpy as np
        >>> state = np.zeros(3); hold_role(state, "optimizer"); release_role(state, "optimizer")
    """
    tell("hold", array, role)


def release_role(array, role: str) -> None:
    """Tell the observers that one ``role`` hold on ``array`` ends (see `hold_role`)."""
    tell("release", array, role)


@contextmanager
def in_phase(name: str):
    """Run the block inside every ``phase`` observer's context for ``name``: checkpointing
    says ``"recompute"`` this way, and the ledger counts those ops apart."""
    with ExitStack() as stack:
        for hook in list(_HOOKS["phase"]):
            stack.enter_context(hook(name))
        yield


def is_dry_run() -> bool:
    """True inside `dry_run`: a step runs only to be measured."""
    return _DRY_RUNS[0] > 0


@contextmanager
def dry_run():
    """Run a step only to measure it (as `minigrad.plan.trace_graph` does): inside, ops and
    modules leave the state they would update as they found it (BatchNorm's running
    statistics and ``num_batches_tracked``); the arrays they compute are the same.

    Example:
        >>> import numpy as np
        >>> from minigrad import Tensor, nn
        >>> bn = nn.BatchNorm1d(2)
        >>> with dry_run():
        ...     _ = bn(Tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2)))
        >>> bn.running_mean.data.tolist(), bn.num_batches_tracked
        ([0.0, 0.0], 0)
    """
    _DRY_RUNS[0] += 1
    try:
        yield
    finally:
        _DRY_RUNS[0] -= 1
