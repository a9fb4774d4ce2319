"""torch-parity extras on the engine of `minigrad.tensor`, in torch's names.

* `saved_tensors_hooks` (``torch.autograd.graph.saved_tensors_hooks``): a pack hook sees
  every array an op saves and returns what the node stores instead; the unpack hook gives
  the array back when backward reads ``ctx.saved_tensors``. Non-reentrant checkpointing
  stores a small handle this way and recomputes on unpack.
* `grad` (``torch.autograd.grad``), ``Tensor.backward(inputs=...)`` and
  ``Tensor.retain_grad()``: a backward pass that returns ("captures") the gradients of
  some tensors, accumulates into only some leaves, keeps non-leaf gradients, and prunes
  the nodes that lead to none of the tensors it serves.
* `saved_arrays`: every array the graph behind a tensor keeps for backward.

They plug into the engine's hook points (`minigrad.hooks`): the pack function on
``SAVED_HOOKS``, and on ``BACKWARD_TASKS`` the maker of `_Pass`, a
`minigrad.tensor.BackwardTask` that ``Tensor.backward`` (the engine's one backward loop)
runs. No method of `Tensor` is replaced.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import numpy as np

from minigrad import tensor as _tensor
from minigrad._validation import as_array
from minigrad.hooks import BACKWARD_TASKS, SAVED_HOOKS, hold_role, release_role
from minigrad.tensor import BackwardTask, Context, Tensor, graph_nodes, node_of

__all__ = ["saved_tensors_hooks", "grad", "backward", "backprop", "saved_arrays",
           "increment_version"]


# --- saved-tensor hooks ------------------------------------------------------------------
class saved_tensors_hooks:
    """Context manager: pack/unpack hooks for the arrays saved for backward inside it.

    Mirrors ``torch.autograd.graph.saved_tensors_hooks``. Every array an op passes to
    ``ctx.save_for_backward`` inside the block goes through ``pack_hook(array)``; the node
    stores what it returns. When backward reads ``ctx.saved_tensors``,
    ``unpack_hook(packed)`` must return the array. When blocks nest, only the innermost
    pair applies; hooks do not apply to arrays saved while a hook runs. A packed value
    that is an array is counted by the ledger as stored (``"activations"``); anything else
    (a handle, a file name) is not. Unlike torch, which cannot see through hooks, the
    engine still checks the versions of the tensors whose arrays were packed
    (``Tensor._version``): an in-place update before backward raises even if the pack
    hook kept a copy (the executors that recompute rely on it).

    Args:
        pack_hook: callable ``array -> anything``.
        unpack_hook: callable ``anything -> array``.

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> with saved_tensors_hooks(lambda a: a.copy(), lambda a: a):
        ...     y = (x * x).sum()     # mul stores copies of x
        >>> y.backward(); x.grad
        array([2., 4.], dtype=float32)
    """

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError(f"saved_tensors_hooks: pack_hook and unpack_hook must be callable, got "
                            f"{type(pack_hook).__name__} and {type(unpack_hook).__name__}")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def _pack(self, array):
        with hooks_paused():
            value = self.pack_hook(array)
        if isinstance(value, np.ndarray):
            hold_role(value, "activations")
        return _Packed(value, self.unpack_hook)

    def __enter__(self):
        SAVED_HOOKS.append(self._pack)
        return self

    def __exit__(self, *exc):
        SAVED_HOOKS.pop()
        return False


@contextmanager
def hooks_paused():
    """No saved-tensor hooks inside: while a hook runs (torch does the same), and while a
    checkpoint recomputes ("as if no checkpoint were active", torch's rule 3)."""
    paused = SAVED_HOOKS[:]
    SAVED_HOOKS.clear()
    try:
        yield
    finally:
        SAVED_HOOKS[:] = paused


class _Packed:
    """A saved entry that went through a pack hook: the packed ``value``, its unpack hook,
    and the arrays unpacked from it, held (as activations) until the node's backward ends."""

    __slots__ = ("value", "unpack_hook", "unpacked")

    def __init__(self, value, unpack_hook):
        self.value, self.unpack_hook, self.unpacked = value, unpack_hook, []

    def unpack(self):
        with hooks_paused():
            a = self.unpack_hook(self.value)
        if not isinstance(a, np.ndarray):
            raise TypeError(f"saved_tensors_hooks: unpack_hook must return a NumPy array, "
                            f"got {type(a).__name__}")
        hold_role(a, "activations")  # held by the node until its backward has run
        self.unpacked.append(a)
        # The handover: a packed object may keep the array elsewhere until the node holds
        # it (a checkpoint's rebuilt arrays); now it can let go, with no gap.
        handed_over = getattr(self.value, "unpacked", None)
        if handed_over is not None:
            handed_over()
        return a

    def drop_unpacked(self):
        """Let go of the unpacked arrays (even with ``retain_graph=True`` they are rebuilt
        for each backward, as in torch)."""
        for a in self.unpacked:
            release_role(a, "activations")
        self.unpacked = []

    def release(self):
        if isinstance(self.value, np.ndarray):
            release_role(self.value, "activations")
        self.drop_unpacked()


def increment_version(tensor) -> None:
    """Count an in-place write into ``tensor``'s array that its ``data`` setter did not see
    (``t.data[...] = v``, an op that updates an argument), as
    ``torch.autograd.graph.increment_version``: a node that saved the array then refuses
    to run backward (see ``Tensor._version``).

    Example:
        >>> t = Tensor([1.0, 2.0])
        >>> t.data[0] = 5.0                 # NumPy's write: the setter does not see it
        >>> increment_version(t); t._version
        1
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"increment_version: expected a Tensor, got {type(tensor).__name__}")
    tensor._version_counter += 1


def saved_arrays(root) -> list:
    """Every array kept for backward by the graph behind ``root``, each array object once.

    What its nodes saved (after a pack hook, as stored), plus what a packed object declares
    it keeps instead (``kept_arrays()``: a non-reentrant checkpoint's handle answers with
    the checkpoint's inputs). Arrays a checkpoint will only recompute do not exist yet.

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> [a.shape for a in saved_arrays((x.exp() * 3.0).sum())]   # exp saves its output
        [(2,)]
    """
    out, seen = [], set()
    for node in graph_nodes(root):
        for s in node.saved if isinstance(node, Context) else ():
            value = s.value if isinstance(s, _Packed) else s
            arrays = [value] if isinstance(value, np.ndarray) else (
                value.kept_arrays() if hasattr(value, "kept_arrays") else [])
            for a in arrays:
                if id(a) not in seen:
                    seen.add(id(a))
                    out.append(a)
    return out


# --- grad(), backward(inputs=), retain_grad ----------------------------------------------
class _Pass(BackwardTask):
    """A backward pass that may capture gradients, accumulate into only some tensors, keep
    retained gradients, and skip what leads to none of its targets.

    ``capture``: tensors whose gradients are returned (``results``) instead of being
    accumulated; ``accumulate``: None: every other leaf accumulates (``backward()``), else
    only these tensors (``backward(inputs=...)``; ``()`` for ``grad()``)."""

    def __init__(self, roots, capture=(), accumulate=None):
        super().__init__()
        self.accumulates = accumulate is None
        self.captured_at: dict[int, list[int]] = {}
        for i, t in enumerate(capture):
            self.captured_at.setdefault(id(node_of(t)), []).append(i)
        self.results = [None] * len(capture)
        self.accum_ids = None if accumulate is None else {id(node_of(t)) for t in accumulate}
        # backward(inputs=[h]) with h an intermediate: h.grad gets what reaches its node
        self.accum_nodes = {id(t._ctx): t for t in accumulate or () if t._ctx is not None}
        self.reach = None if accumulate is None else _reaching(
            graph_nodes(roots), set(self.captured_at) | self.accum_ids)

    def _capture(self, node, entry):
        for i in self.captured_at.get(id(node), ()):
            self.results[i] = entry[0]
            entry[1] = False  # the caller holds it: never accumulate into it in place

    def leaf(self, leaf, g, owned):
        entry = [g, owned]
        self._capture(leaf, entry)
        if id(leaf) not in self.captured_at and (self.accum_ids is None or id(leaf) in self.accum_ids):
            super().leaf(leaf, *entry)

    def enter(self, node, entry) -> bool:
        self._capture(node, entry)
        if id(node) in self.accum_nodes:
            super().leaf(self.accum_nodes[id(node)], entry[0], False)
        retained = getattr(node, "retained", None)
        if (self.accum_ids is None or id(node) in self.accum_ids) and retained and retained():
            t = retained()
            t.grad = entry[0].copy() if t._grad is None else t._grad + entry[0]
        # a captured intermediate whose own inputs lead to nothing wanted is not run
        return self.reach is None or any(self.follows(e) for e in node.inputs if e is not None)

    def follows(self, edge) -> bool:
        return self.reach is None or id(edge) in self.reach


def _reaching(order, targets):
    """Ids of the nodes and leaves from which a target is reachable (targets included)."""
    reach = set()
    for node in order:  # inputs come before the nodes that use them
        if id(node) in targets or (isinstance(node, Context)
                                   and any(e is not None and id(e) in reach for e in node.inputs)):
            reach.add(id(node))
    return reach


def backprop(roots, grads, retain_graph=False, capture=(), accumulate=None, inputs=None):
    """Back-propagate ``grads`` (arrays, one per root) through the graph.

    Args:
        roots: Tensors or graph nodes (Contexts); a single Tensor is accepted too.
        grads: their gradients (a single array with a single root).
        retain_graph: keep every node's saved arrays.
        capture: tensors (leaves or not) whose gradients are returned instead of being
            accumulated into their ``.grad``.
        accumulate: None: every other leaf that requires grad accumulates into ``.grad``
            (``backward()``); a sequence of tensors: only those (``backward(inputs=...)``);
            ``()``: nothing (``grad()``). Nodes that lead to none of them are not run.
        inputs: the older name of ``capture``.

    Returns:
        The captured gradients (arrays, or None where nothing flowed), in ``capture`` order.

    Example:
        >>> a = Tensor([1.0, 2.0], requires_grad=True)
        >>> backprop([(a * a).sum()], [np.float32(1.0)], capture=[a])
        [array([2., 4.], dtype=float32)]
    """
    if isinstance(roots, Tensor):
        roots, grads = [roots], [grads]
    roots = list(roots)
    task = _Pass(roots, list(capture) + list(inputs or ()), accumulate)
    return _tensor.run_backward(roots, grads, retain_graph, task).results


def root_grad(t, gradient=None, where="backward"):
    """The gradient a backward from ``t`` starts with: ``gradient`` checked against
    ``t``'s shape, or 1 for a one-element tensor."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: outputs must be Tensors, got {type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if t.size != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs, got shape {t.shape}")
        return np.ones(t.shape, dtype=t.dtype)
    g = as_array(gradient, t.dtype)
    if g.shape != t.shape:
        raise ValueError(f"{where}: gradient has shape {g.shape} but the tensor has shape {t.shape}")
    return g


def _tensor_list(x, where, what):
    items = [x] if isinstance(x, Tensor) else list(x)
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: {what} must be Tensors, got {type(t).__name__}")
    return items


def backward(tensor, gradient=None, retain_graph: bool = False, inputs=None):
    """``tensor.backward(...)`` (as ``torch.autograd.backward``): accumulate
    d(tensor)/d(leaf) into ``leaf.grad`` for every leaf that requires grad (or only into
    ``inputs``), and into retained non-leaf gradients.

    Args:
        gradient: d(loss)/d(tensor), an array of the tensor's shape; defaults to 1 for a
            one-element tensor.
        retain_graph: keep every node's saved arrays (to call backward again).
        inputs: optional tensors: accumulate only into these tensors' ``.grad`` (as
            torch's ``backward(inputs=...)``).

    Raises:
        RuntimeError: the tensor does not require grad, or ``gradient`` is missing for
            a tensor of several elements.

    Example:
        >>> from minigrad import Tensor
        >>> w, x = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0])
        >>> backward((w * x).sum()); w.grad
        array([3., 4.], dtype=float32)
    """
    tensor.backward(gradient, retain_graph, inputs)


def _backward_task(tensor, gradient, inputs):
    """The hook ``Tensor.backward`` calls: the checked root gradient, and the pass that
    accumulates into every leaf (or only ``inputs``) and keeps retained gradients."""
    accumulate = None
    if inputs is not None:
        accumulate = _tensor_list(inputs, "backward", "inputs")
        if not all(t.requires_grad for t in accumulate):
            raise RuntimeError("backward: every tensor in inputs must require grad")
    return root_grad(tensor, gradient), _Pass([tensor], (), accumulate)


BACKWARD_TASKS.append(_backward_task)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool = False, allow_unused: bool = False):
    """Gradients of ``outputs`` with respect to ``inputs``, like ``torch.autograd.grad``.

    No ``.grad`` is written, and only the part of the graph between the inputs and the
    outputs is run.

    Args:
        outputs: a Tensor or a sequence of Tensors that require grad.
        inputs: a Tensor or a sequence of Tensors (leaves or intermediate results).
        grad_outputs: d(loss)/d(output) for each output (None: ones, for one-element outputs).
        retain_graph: keep the saved arrays of the nodes that ran.
        allow_unused: return None for an input the outputs do not depend on, instead of raising.

    Returns:
        A tuple with one array (or None) per input.

    Example:
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> grad((x * x).sum(), [x])     # 2 * x; x.grad stays None
        (array([2., 4.], dtype=float32),)
    """
    outs = _tensor_list(outputs, "grad", "outputs")
    ins = _tensor_list(inputs, "grad", "inputs")
    if grad_outputs is None:
        grad_outputs = [None] * len(outs)
    elif isinstance(grad_outputs, (np.ndarray, Tensor)) or np.isscalar(grad_outputs):
        grad_outputs = [grad_outputs]
    grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outs):
        raise ValueError(f"grad: got {len(grad_outputs)} grad_outputs for {len(outs)} outputs")
    if not all(t.requires_grad for t in ins):
        raise RuntimeError("grad: one of the inputs does not require grad")
    roots = [root_grad(o, g, "grad") for o, g in zip(outs, grad_outputs)]
    results = backprop(outs, roots, retain_graph=retain_graph, capture=ins, accumulate=())
    if not allow_unused and any(r is None for r in results):
        i = next(i for i, r in enumerate(results) if r is None)
        raise RuntimeError(f"grad: input {i} (shape {ins[i].shape}) was not used to compute the "
                           f"outputs; pass allow_unused=True to get None for it")
    return tuple(results)
