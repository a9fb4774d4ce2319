"""The engine: Tensor, Function/Context, backward by topological order, no_grad.

A `Tensor` wraps a NumPy array (``.data``) and, when it was computed from
tensors that require grad, the `Context` of the op that made it (``._ctx``).
Each op is a `Function` subclass with ``forward(ctx, *arrays)`` and
``backward(ctx, grad)``; ``forward`` keeps what backward needs with
``ctx.save_for_backward``, the engine's one saving point, where the memory
ledger observes every saved array (and where checkpointing saves its inputs).
``Tensor.backward`` visits the graph in reverse topological order, calls each
node's ``backward`` once, accumulates gradients with ``+=`` and, unless
``retain_graph=True``, releases each node's saved arrays as soon as it has run.
"""
from __future__ import annotations

import weakref
from contextlib import contextmanager

import numpy as np

from minigrad import memory as _mem

__all__ = ["Tensor", "Function", "Context", "no_grad", "enable_grad", "is_grad_enabled",
           "graph_nodes", "run_backward"]

_GRAD_ENABLED = True
# Hooks for minigrad.checkpoint (set there, None otherwise): a callable told about
# every op executed while a checkpointed function runs (probe and determinism check).
_OP_OBSERVERS: list = []


def is_grad_enabled() -> bool:
    return _GRAD_ENABLED


@contextmanager
def _grad_mode(enabled: bool):
    global _GRAD_ENABLED
    old, _GRAD_ENABLED = _GRAD_ENABLED, enabled
    try:
        yield
    finally:
        _GRAD_ENABLED = old


def no_grad():
    """Context manager: ops inside record no graph and save nothing (like torch.no_grad)."""
    return _grad_mode(False)


def enable_grad():
    """Context manager: re-enable graph recording inside a ``no_grad`` block."""
    return _grad_mode(True)


class Context:
    """Per-node scratchpad: what forward leaves for backward.

    ``save_for_backward(*arrays)`` is the only way an op keeps arrays for its
    backward; the ledger counts them as ``"activations"`` until the node is released."""

    __slots__ = ("fn", "inputs", "input_shapes", "saved", "released", "recording",
                 "needs_input_grad", "retained", "__dict__")

    def __init__(self, recording: bool):
        self.recording = recording
        self.saved = ()
        self.released = False
        self.fn = None
        # One edge per positional input: the input's node (a Context) if it was computed
        # from tensors that require grad, the tensor itself if it is a leaf that requires
        # grad, else None. Edges point at nodes, not at the input tensors, so an op output
        # that no backward saved is freed as soon as nobody else holds it (as in torch).
        self.inputs = ()
        self.input_shapes = ()
        self.retained = None  # weakref to the output tensor, set by Tensor.retain_grad()

    def save_for_backward(self, *arrays):
        if not self.recording:  # no graph (no_grad or no input needs grad): keep nothing
            return
        self.saved = arrays
        for a in arrays:
            if isinstance(a, np.ndarray):
                _mem.hold(a, "activations")

    @property
    def saved_tensors(self):
        if self.released:
            raise RuntimeError(
                f"Trying to backward through the graph a second time (or directly access saved "
                f"tensors after they have already been freed): the arrays {self.fn.__name__} saved "
                f"for backward were freed after the first backward(). Call "
                f".backward(retain_graph=True) the first time if you need to backward twice.")
        return self.saved

    def release(self):
        """Free the saved arrays (after backward, or when the graph is dropped)."""
        if not self.released:
            for a in self.saved:
                if isinstance(a, np.ndarray):
                    _mem.release(a, "activations")
            self.saved = ()
            self.released = True

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


class Function:
    """Base class of ops. Subclasses define ``forward(ctx, *args, **kwargs)`` on
    NumPy arrays (tensor arguments arrive as their ``.data``) returning one array,
    and ``backward(ctx, grad)`` returning one gradient (array or None) per
    positional argument of ``forward``. Tensor arguments must be positional;
    keyword arguments are constants (axes, flags) and are not differentiated."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = _GRAD_ENABLED and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = Context(needs)
        ctx.needs_input_grad = tuple(needs and isinstance(a, Tensor) and a.requires_grad for a in args)
        out = cls.forward(ctx, *[a.data if isinstance(a, Tensor) else a for a in args], **kwargs)
        if not isinstance(out, np.ndarray):  # NumPy returns scalars for 0-d results
            out = np.asarray(out)
        result = Tensor(out, requires_grad=needs)
        if needs:
            ctx.fn = cls
            ctx.inputs = tuple(_edge(a) for a in args)
            ctx.input_shapes = tuple(a.shape if isinstance(a, Tensor) else None for a in args)
            result._ctx = ctx
        for obs in _OP_OBSERVERS:
            obs(cls, args, result)
        _mem._LEDGER.event(cls.name())
        return result

    @classmethod
    def name(cls) -> str:
        return cls.__name__.lower()


def _edge(a):
    """The graph edge to input ``a`` (see ``Context.inputs``)."""
    if not (isinstance(a, Tensor) and a.requires_grad):
        return None
    return a if a._ctx is None else a._ctx


def _as_array(data, dtype=None):
    if isinstance(data, Tensor):
        data = data.data
    if isinstance(data, np.ndarray):
        return data if dtype is None or data.dtype == dtype else data.astype(dtype)
    arr = np.asarray(data, dtype=dtype)
    if dtype is None and arr.dtype == np.float64:
        arr = arr.astype(np.float32)  # like torch.tensor: Python floats default to float32
    return arr


class Tensor:
    """An n-dimensional array with an optional gradient.

    ``Tensor(data, requires_grad=False, dtype=None)``: ``data`` is a NumPy array
    (shared, not copied, like ``torch.from_numpy``), a Tensor, or nested Python
    numbers (copied; Python floats become float32 as in torch). Supported
    float dtypes: float32 and float64; integer tensors hold indices and targets."""

    __slots__ = ("_data", "requires_grad", "_grad", "_ctx", "_retains_grad", "__weakref__")
    __array_ufunc__ = None  # `ndarray + Tensor` defers to Tensor.__radd__ (a graph op)

    def __array__(self, dtype=None, copy=None):  # np.asarray(t): the data, no graph
        return self._data if dtype is None else self._data.astype(dtype)

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        self._data = _as_array(data, dtype)
        _mem.register(self._data)
        if requires_grad and self._data.dtype.kind != "f":
            raise ValueError(f"only floating-point tensors can require grad, got dtype {self._data.dtype}")
        self.requires_grad = bool(requires_grad)
        self._grad = None
        self._ctx = None
        self._retains_grad = False

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward (like torch)."""
        self._retains_grad = True
        if self._ctx is not None:
            self._ctx.retained = weakref.ref(self)

    # --- data and grad (properties so that the ledger sees every change) ----
    @property
    def data(self) -> np.ndarray:
        return self._data

    @data.setter
    def data(self, value):
        if value is self._data:  # `t.data -= x` updates in place and assigns the same array
            return
        value = _as_array(value)
        _mem.register(value)
        self._data = value

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if self._grad is not None:
            _mem.release(self._grad, "gradients")
        if value is not None:
            value = _as_array(value)
            _mem.hold(value, "gradients")
        self._grad = value

    # --- array-like attributes -------------------------------------------------
    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def size(self):
        return self._data.size

    @property
    def nbytes(self):
        return self._data.nbytes

    @property
    def is_leaf(self):
        return self._ctx is None

    @property
    def grad_fn(self):
        return None if self._ctx is None else self._ctx.fn

    def __len__(self):
        return len(self._data)

    def numpy(self):
        return self._data

    def item(self):
        return self._data.item()

    def detach(self):
        """A new leaf sharing this tensor's data (no copy, no graph)."""
        return Tensor(self._data)

    def zero_grad(self):
        self.grad = None

    def __repr__(self):
        grad = f", grad_fn={self._ctx.fn.name()}" if self._ctx is not None else (
            ", requires_grad=True" if self.requires_grad else "")
        return f"Tensor({np.array2string(self._data, precision=4, threshold=20)}, dtype={self.dtype}{grad})"

    # --- backward -----------------------------------------------------------------
    def backward(self, grad=None, retain_graph: bool = False):
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

        ``grad`` defaults to 1 for a one-element tensor. After it, every node's saved
        arrays are freed unless ``retain_graph=True``."""
        if not self.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        if grad is None:
            if self.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs, got shape {self.shape}")
            grad = np.ones(self.shape, dtype=self.dtype)
        else:
            grad = _as_array(grad, self.dtype)
            if grad.shape != self.shape:
                raise ValueError(f"backward: grad has shape {grad.shape} but the tensor has shape {self.shape}")
        run_backward(self, grad, retain_graph=retain_graph)

    # --- operators (defined in ops.py, attached at import) --------------------------


def graph_nodes(root):
    """The graph behind ``root``: its nodes (Contexts) and the leaves that require
    grad (Tensors), every input before the nodes that use it. A node's
    ``saved`` arrays, ``fn`` and ``inputs`` describe it."""
    start = root._ctx if isinstance(root, Tensor) and root._ctx is not None else root
    order, seen = [], set()
    stack = [(start, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if isinstance(node, Context):
            for e in reversed(node.inputs):
                if e is not None and id(e) not in seen:
                    stack.append((e, False))
    return order


def _owned(g, taken):
    # A gradient array may be written in place only if nothing else can see it:
    # it owns its buffer, is writeable, and was not handed to another tensor.
    return g.base is None and g.flags.writeable and id(g) not in taken


def run_backward(root, grad, retain_graph=False, inputs=None):
    """Back-propagate ``grad`` from ``root``. Leaves accumulate into ``.grad``.

    If ``inputs`` (a list of leaf tensors) is given, their gradients are returned
    instead of being accumulated into their ``.grad`` (like ``torch.autograd.grad``
    for those inputs; other leaves still accumulate). Used by checkpoint."""
    order = graph_nodes(root)
    wanted = {id(t): i for i, t in enumerate(inputs)} if inputs is not None else {}
    results = [None] * (len(inputs) if inputs is not None else 0)
    _mem.register(grad)
    grads = {id(order[-1]): [grad, False]}  # id(node or leaf) -> [array, owned?]
    with _mem.phase("backward"):
        for node in reversed(order):
            entry = grads.pop(id(node), None)
            if entry is None:
                continue
            g, owned = entry
            if isinstance(node, Tensor):  # a leaf
                if id(node) in wanted:
                    results[wanted[id(node)]] = g
                elif node._grad is None:
                    node.grad = g if owned else g.copy()
                else:
                    node._grad += g  # in place: no new gradient array
                continue
            ctx = node
            if ctx.retained is not None and ctx.retained() is not None:
                t = ctx.retained()
                t.grad = g.copy() if t._grad is None else t._grad + g
            if ctx.released:
                ctx.saved_tensors  # raises the "backward a second time" error
            pgrads = ctx.fn.backward(ctx, g)
            # A gradient passed straight through (add, sub) is owned only if g was.
            taken = set() if owned else {id(g)}
            del entry
            if not isinstance(pgrads, tuple):
                pgrads = (pgrads,)
            if not retain_graph:
                ctx.release()
            for edge, shape, pg in zip(ctx.inputs, ctx.input_shapes, pgrads):
                if pg is None or edge is None:
                    continue
                if not isinstance(pg, np.ndarray):
                    pg = np.asarray(pg)
                if pg.shape != shape:
                    raise RuntimeError(f"{ctx.fn.name()}.backward returned a gradient of shape "
                                       f"{pg.shape} for an input of shape {shape}")
                _mem.register(pg)
                prev = grads.get(id(edge))
                if prev is None:
                    grads[id(edge)] = [pg, _owned(pg, taken)]
                elif prev[1]:
                    prev[0] += pg
                else:
                    prev[0] = prev[0] + pg
                    _mem.register(prev[0])
                    prev[1] = True
                taken.add(id(pg))
            g = pgrads = pg = None  # drop references so the ledger sees the arrays freed
            _mem._LEDGER.event(ctx.fn.name(), "backward")
    return results
