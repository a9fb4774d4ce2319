"""The engine: Tensor, Function/Context, backward in topological order, the hook points.

An op's forward keeps what its backward needs with ``ctx.save_for_backward`` (the one
saving point) and records a graph node; backward runs each node once, in reverse
topological order, and releases what it saved at once. Hook points: ``tell``
(observers in `minigrad.hooks`: the ledger), ``SAVED_HOOKS`` (`minigrad.autograd`'s pack
functions), `BackwardTask` (what a pass does at leaves, nodes, edges) and
``BACKWARD_TASKS`` (`minigrad.autograd` makes the task ``Tensor.backward`` runs, for
``backward(inputs=)`` and retained gradients; nothing replaces a method).

What a first reader needs (Context, Function, Tensor, the topological backward) is one
block between two marker comments (the engine a reader builds; end), which the book
includes by them; the plumbing (the running op and pass, the task class) follows it.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from minigrad import grad_mode
from minigrad._validation import as_array, check_saved_versions, saved_versions
from minigrad.hooks import BACKWARD_TASKS, NODE_EVENT, SAVED_HOOKS, audit, tell

__all__ = ["Tensor", "Function", "Context", "graph_nodes", "run_backward",
           "BackwardTask", "current_op", "current_backward"]

_PLAIN = (np.ndarray, type(None))  # a saved entry that is not a pack hook's
_FREED = ("Trying to backward through the graph a second time (or directly access "
          "saved tensors after they have already been freed); use retain_graph=True")


# -- the engine a reader builds --
class Context:
    """A graph node: its op ``fn``, the ``saved`` arrays, and one edge per input: the
    input's node (a leaf: itself) if it requires grad, else None. Edges never point at
    tensors."""

    def __init__(self, fn=None, recording: bool = True):
        self.fn, self.recording = fn, recording
        self.inputs, self.input_shapes, self.needs_input_grad = (), (), ()
        self.saved, self.released, self.versions = (), False, ()

    def save_for_backward(self, *arrays):
        """Keep ``arrays`` (NumPy arrays or None) for backward, if this node records."""
        if not self.recording:
            return
        arrays = [np.asarray(a) if isinstance(a, np.generic) else a
                  for a in arrays]  # (0-d)
        if SAVED_HOOKS:  # a saved_tensors_hooks block: store what its pack hook returns
            pack = SAVED_HOOKS[-1]
            if self.fn is not None:  # (Function.apply checks them, then lets go)
                self.raw_saved = arrays
            arrays = [pack(a) if isinstance(a, np.ndarray) else a for a in arrays]
        for a in arrays:
            if isinstance(a, np.ndarray):
                tell("hold", a, "activations")
        self.saved = tuple(arrays)
        audit(NODE_EVENT, "node-saved", self, self.saved)

    @property
    def saved_tensors(self) -> tuple:
        if self.released:
            raise RuntimeError(_FREED)
        if self.versions:  # a tensor whose array was saved was updated in place since
            check_saved_versions(self)
        return tuple(s if isinstance(s, _PLAIN) else s.unpack() for s in self.saved)

    def release(self):
        """Free the saved arrays (after backward, or when the graph is dropped)."""
        if not self.released:
            audit(NODE_EVENT, "node-release", self, self.saved)
            for s in self.saved:
                if isinstance(s, np.ndarray):
                    tell("release", s, "activations")
                elif s is not None:
                    s.release()  # a packed entry
            self.saved, self.released = (), True

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


class Function:
    """Base class of ops (``torch.autograd.Function``): a subclass defines
    ``forward(ctx, *arrays, **consts)`` returning one array and ``backward(ctx, grad)``
    returning one gradient (or None) per positional argument.

    Example:
        >>> class Square(Function):
        ...     @staticmethod
        ...     def forward(ctx, a):
        ...         ctx.save_for_backward(a)
        ...         return a * a
        ...     @staticmethod
        ...     def backward(ctx, grad):
        ...         (a,) = ctx.saved_tensors
        ...         return 2 * a * grad
        >>> x = Tensor([3.0], requires_grad=True)
        >>> Square.apply(x).sum().backward(); x.grad
        array([6.], dtype=float32)
    """

    flops = staticmethod(lambda ctx, out, *args, **kwargs: 0)  # FLOPs, for the ledger
    backward_flops = staticmethod(lambda ctx: 0)

    @classmethod
    def name(cls) -> str:
        return cls.__name__.lower()

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on the arrays; record a node if some input requires grad."""
        enabled = grad_mode._ENABLED[0]
        needs = tuple(enabled and isinstance(a, Tensor) and a.requires_grad
                      for a in args)
        ctx = Context(cls, recording=any(needs))
        ctx.needs_input_grad = needs
        outer, _CURRENT_OP[0] = _CURRENT_OP[0], cls
        try:
            arrays = [a.data if isinstance(a, Tensor) else a for a in args]
            out = cls.forward(ctx, *arrays, **kwargs)
        finally:
            _CURRENT_OP[0] = outer
        if isinstance(out, Tensor):
            raise TypeError(f"{cls.__name__}.forward returned a Tensor; it must return "
                            f"a NumPy array")
        result = Tensor(np.asarray(out), requires_grad=ctx.recording)  # (0-d scalars)
        if ctx.recording:
            ctx.inputs = tuple(  # the edges (see Context)
                node_of(a) if isinstance(a, Tensor) and a.requires_grad else None
                for a in args)
            ctx.input_shapes = tuple(a.shape if isinstance(a, Tensor) else None
                                     for a in args)
            ctx.output_shape = result.shape
            result._ctx = ctx
            if ctx.saved:  # (which saved arrays are tensors': checked in saved_tensors)
                ctx.versions = saved_versions(ctx, args, result)
        tell("op", "forward", cls, ctx, args, kwargs, result)
        return result


class Tensor:
    """An array (``data``: a NumPy array, shared; or nested numbers, Python floats
    becoming float32) with an optional gradient. `minigrad.ops` attaches the operators
    and array methods. ``_version`` counts the updates through the ``data`` setter
    (``t.data -= x``, ``t.data = y``), as torch's version counter; a write into the
    array itself (``t.data[0] = 1``) is not seen (torch does not see ``.data`` writes).

    Example:
        >>> x = Tensor([[1.0, 2.0]], requires_grad=True)
        >>> (x * x).sum().backward(); x.grad
        array([[2., 4.]], dtype=float32)
    """

    __slots__ = ("_data", "requires_grad", "_grad", "_ctx", "_version_counter",
                 "__weakref__")
    __array_ufunc__ = None  # `ndarray + Tensor` defers to Tensor.__radd__ (a graph op)

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        self._data = as_array(data, dtype)
        tell("array", self._data)
        if requires_grad and self._data.dtype.kind != "f":
            raise ValueError(f"only floating-point tensors can require grad, got "
                             f"{self._data.dtype}")
        self.requires_grad = bool(requires_grad)
        self._grad, self._ctx, self._version_counter = None, None, 0

    @property
    def data(self) -> np.ndarray:
        return self._data

    @data.setter
    def data(self, value):  # (`t.data -= x` assigns the same array back: nothing new)
        self._version_counter += 1  # in place or replaced: the arrays saved are stale
        if value is not self._data:
            self._data = as_array(value)
            tell("array", self._data)

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if self._grad is not None:
            tell("release", self._grad, "gradients")
        if value is not None:
            value = as_array(value)
            tell("hold", value, "gradients")
        self._grad = value

    _version = property(lambda self: self._version_counter)
    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)

    def backward(self, gradient=None, retain_graph: bool = False, inputs=None):
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires
        grad (only into ``inputs`` if given, see `minigrad.autograd.backward`)."""
        if BACKWARD_TASKS:  # the extras check the arguments and make the pass
            g, task = BACKWARD_TASKS[-1](self, gradient, inputs)
        else:
            g = np.ones_like(self._data) if gradient is None else np.asarray(gradient)
            task = None
        run_backward([self], [g], retain_graph, task)

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
        if self._ctx is not None:
            self._ctx.retained = weakref.ref(self)


# the backward pass
def graph_nodes(roots):
    """The nodes (Contexts) and leaves (Tensors that require grad) behind ``roots``,
    every input listed before the nodes that use it.

    Example:
        >>> x = Tensor([1.0], requires_grad=True)
        >>> nodes = graph_nodes((x.exp() * x).sum())
        >>> [n.fn.name() if isinstance(n, Context) else "x" for n in nodes]
        ['x', 'exp', 'mul', 'sum']
    """
    roots = roots if isinstance(roots, (list, tuple)) else [roots]
    order, seen, stack = [], set(), [(node_of(r), False) for r in reversed(roots)]
    while stack:  # depth first, iterative: a node is listed after all its inputs
        node, inputs_listed = stack.pop()
        if inputs_listed:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            for e in reversed(node.inputs if isinstance(node, Context) else ()):
                if e is not None and id(e) not in seen:
                    stack.append((e, False))
    return order


def node_of(t):
    """Where gradients for ``t`` gather: its node, or itself (a leaf, or a node)."""
    return t._ctx if isinstance(t, Tensor) and t._ctx is not None else t


def run_backward(roots, grads, retain_graph=False, task=None):
    """Back-propagate ``grads`` (one array per root) in reverse topological order;
    returns the `BackwardTask` that ran."""
    task = task or BackwardTask()
    pending: dict[int, list] = {}  # id(node/leaf) -> [gradient so far, ours to write?]
    for r, g in zip(roots, grads):
        _add_grad(pending, id(node_of(r)), np.asarray(g), False)
    _TASKS.append(task)
    try:
        for node in reversed(graph_nodes(list(roots))):
            entry = pending.pop(id(node), None)
            if entry is None:
                continue  # no gradient reaches it
            if isinstance(node, Tensor):
                task.leaf(node, *entry)
            elif task.enter(node, entry):
                _run_node(node, entry, pending, retain_graph, task)
            else:
                entry.clear()
    finally:
        _TASKS.pop()
    return task


def _add_grad(pending, key, g, owned):
    """Add gradient ``g`` into ``pending[key]``, in place when the sum is ours."""
    tell("array", g)
    prev = pending.get(key)
    if prev is None:
        pending[key] = [g, owned]
    elif prev[1]:
        prev[0] += g
    else:
        prev[0], prev[1] = np.asarray(prev[0] + g), True  # (0-d arrays add to scalars)
        tell("array", prev[0])


def _run_node(ctx, entry, pending, retain_graph, task):
    """One node's backward: release what it saved, hand its inputs their gradients."""
    g, owned = entry
    entry.clear()  # (the caller keeps no reference to g)
    audit(NODE_EVENT, "node-backward", ctx, ctx.released)
    if ctx.released:
        ctx.saved_tensors  # raises the "backward a second time" error
    grads = ctx.fn.backward(ctx, g)
    for packed in [s for s in ctx.saved if not isinstance(s, _PLAIN)]:
        packed.drop_unpacked()  # let go of what it unpacked, even with retain_graph
    if not retain_graph:
        ctx.release()
    # Sum into a gradient in place only if nobody else sees it: it owns its buffer and
    # is not g passed straight through (add, sub), unless g was ours.
    taken = set() if owned else {id(g)}
    grads = grads if isinstance(grads, tuple) else (grads,)
    for edge, shape, pg in zip(ctx.inputs, ctx.input_shapes, grads):
        if pg is None or edge is None or not task.follows(edge):
            continue
        pg = np.asarray(pg)
        if pg.shape != shape:
            raise RuntimeError(f"{ctx.fn.name()}.backward returned a gradient of shape "
                               f"{pg.shape} for an input of shape {shape}")
        ours = pg.base is None and pg.flags.writeable and id(pg) not in taken
        _add_grad(pending, id(edge), pg, ours)
        taken.add(id(pg))
    g = grads = pg = packed = None  # drop references: the observers see them freed
    tell("op", "backward", ctx.fn, ctx, None, None, None)
# -- end --


# --- plumbing: the running op and pass, what a pass does ---------------------------
_CURRENT_OP = [None]  # the Function whose forward is running (a pack hook may ask)
_TASKS: list = []  # the backward passes running, innermost last


def current_op():
    """The `Function` whose ``forward`` is running now, or None."""
    return _CURRENT_OP[0]


def current_backward():
    """The innermost `BackwardTask` running now, or None outside backward."""
    return _TASKS[-1] if _TASKS else None


class BackwardTask:
    """One backward pass: it accumulates into every leaf's ``.grad``, runs every node
    and follows every edge (``accumulates`` is False for ``grad()``-like passes)."""

    accumulates = True
    _ids = itertools.count(1)

    def __init__(self):
        self.id = next(BackwardTask._ids)

    def leaf(self, leaf, g, owned):
        if leaf._grad is None:
            leaf.grad = g if owned else g.copy()
        else:
            leaf._grad += g  # in place: no new gradient array

    enter = staticmethod(lambda node, entry: True)  # run this node's backward?
    follows = staticmethod(lambda edge: True)  # send a gradient along this edge?
