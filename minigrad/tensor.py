"""The engine: Tensor, Function/Context, backward by topological order, grad modes, hooks.

A `Tensor` wraps a NumPy array (``.data``) and, when it was computed from tensors that
require grad, the `Context` of the op that made it (``._ctx``). Each op is a `Function`
subclass with ``forward(ctx, *arrays)`` and ``backward(ctx, grad)``; ``forward`` keeps
what backward needs with ``ctx.save_for_backward``, **the engine's one saving point**.
``Tensor.backward`` visits the graph in reverse topological order, calls each node's
``backward`` once, accumulates gradients with ``+=`` and, unless ``retain_graph=True``,
releases each node's saved arrays as soon as it has run.

The hook registry (the only way other modules plug into the engine):

* `saved_tensors_hooks` (torch's ``torch.autograd.graph.saved_tensors_hooks``): a pack
  hook sees every array an op saves and returns what is stored instead; the unpack hook
  gets it back when backward reads ``ctx.saved_tensors``. Non-reentrant checkpointing
  (`minigrad.checkpoint`) stores a small handle here and recomputes on unpack.
* `register_hooks`: observers told about every array the engine holds (tensor data,
  gradients in flight), every array *stored* for backward and released again, every
  ``.grad`` set, every array `minigrad.nn` and `minigrad.optim` own (`hold_role`), and
  every op run forward or backward. The byte ledger and FLOP counter
  (`minigrad.memory`) is the observer; nothing else calls the ledger from here.
"""
from __future__ import annotations

import itertools
import weakref
from contextlib import contextmanager

import numpy as np

__all__ = ["Tensor", "Function", "Context", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "grad", "graph_nodes", "saved_arrays", "run_backward", "saved_tensors_hooks",
           "register_hooks", "hold_role", "release_role", "current_op", "current_backward"]

_GRAD_ENABLED = True


# --- grad mode --------------------------------------------------------------------------
def is_grad_enabled() -> bool:
    """True unless inside ``no_grad()`` (like ``torch.is_grad_enabled``)."""
    return _GRAD_ENABLED


@contextmanager
def set_grad_enabled(mode: bool):
    """Context manager: record graphs inside the block iff ``mode`` (``torch.set_grad_enabled``)."""
    global _GRAD_ENABLED
    old, _GRAD_ENABLED = _GRAD_ENABLED, bool(mode)
    try:
        yield
    finally:
        _GRAD_ENABLED = old


def no_grad():
    """Context manager: ops inside record no graph and save nothing (like ``torch.no_grad``).

    Example:
        >>> with no_grad():
        ...     y = model(x)          # no graph, nothing saved for backward
    """
    return set_grad_enabled(False)


def enable_grad():
    """Context manager: re-enable graph recording inside a ``no_grad`` block."""
    return set_grad_enabled(True)


# --- the hook registry ----------------------------------------------------------------------
# Observers (see register_hooks): one list per event, so the engine calls bound methods directly.
_ARRAY_HOOKS: list = []
_HOLD_HOOKS: list = []
_RELEASE_HOOKS: list = []
_OP_HOOKS: list = []
# saved_tensors_hooks pairs (pack, unpack), innermost last; only the innermost applies.
_SAVED_HOOKS: list = []


class RemovableHandle:
    """What `register_hooks` returns: ``handle.remove()`` unregisters (like torch's handles)."""

    def __init__(self, entries):
        self._entries = entries  # (list, callable) pairs

    def remove(self) -> None:
        for lst, fn in self._entries:
            if fn in lst:
                lst.remove(fn)
        self._entries = []


def register_hooks(array=None, hold=None, release=None, op=None) -> RemovableHandle:
    """Observe the engine. Each argument is an optional callable:

    Args:
        array: ``array(a)``, for every NumPy array the engine starts holding: a tensor's
            data and every gradient array flowing through backward.
        hold: ``hold(a, role)``, when an array takes a role: ``"activations"`` when it is
            *stored* for backward (after packing), ``"gradients"`` when it becomes a
            tensor's ``.grad``; ``"parameters"``, ``"buffers"`` and ``"optimizer"`` when
            `minigrad.nn` / `minigrad.optim` declare them (`hold_role`).
        release: ``release(a, role)``, when that role ends (a node released, a ``.grad``
            replaced or cleared).
        op: ``op(kind, fn, ctx, args, kwargs, output)`` after every op: ``kind`` is
            ``"forward"`` (``fn.forward`` ran; ``args`` as passed to ``apply``, ``output``
            the new Tensor) or ``"backward"`` (a node's backward ran; ``args``, ``kwargs``
            and ``output`` are None).

    Returns:
        A `RemovableHandle`.

    Example:
        >>> names = []
        >>> h = register_hooks(op=lambda kind, fn, *rest: names.append((kind, fn.name())))
        >>> (Tensor([1.0], requires_grad=True) * 2.0).sum().backward()
        >>> h.remove()
    """
    entries = []
    for lst, fn in ((_ARRAY_HOOKS, array), (_HOLD_HOOKS, hold), (_RELEASE_HOOKS, release),
                    (_OP_HOOKS, op)):
        if fn is not None:
            if not callable(fn):
                raise TypeError(f"register_hooks: hooks must be callable, got {type(fn).__name__}")
            lst.append(fn)
            entries.append((lst, fn))
    return RemovableHandle(entries)


def hold_role(array, role: str) -> None:
    """Tell the observers that ``array`` takes ``role`` once more (``"parameters"``,
    ``"buffers"``, ``"optimizer"``): how `minigrad.nn` and `minigrad.optim` declare the
    arrays they own; the engine itself declares ``"activations"`` and ``"gradients"``.
    The ledger (an observer) refuses unknown roles.

    Example:
        >>> state = np.zeros(3); hold_role(state, "optimizer")
    """
    _tell_hold(array, role)


def release_role(array, role: str) -> None:
    """Tell the observers that one ``role`` hold on ``array`` ends (see `hold_role`)."""
    _tell_release(array, role)


def _tell_array(a):
    for h in _ARRAY_HOOKS:
        h(a)


def _tell_hold(a, role):
    for h in _HOLD_HOOKS:
        h(a, role)


def _tell_release(a, role):
    for h in _RELEASE_HOOKS:
        h(a, role)


class saved_tensors_hooks:
    """Context manager: pack/unpack hooks for the arrays saved for backward inside it.

    Mirrors ``torch.autograd.graph.saved_tensors_hooks``. Inside the block, every array an
    op passes to ``ctx.save_for_backward`` goes through ``pack_hook(array)``; the node stores
    what it returns. When backward reads ``ctx.saved_tensors``, ``unpack_hook(packed)``
    must return the array (a NumPy array of the same shape and dtype). When blocks nest,
    only the innermost pair applies; hooks do not apply to the arrays saved while a hook
    itself runs. An array the pack hook returns is counted by the ledger as stored
    (``"activations"``); anything else (a handle, a file name) is not.

    Args:
        pack_hook: callable ``array -> anything``.
        unpack_hook: callable ``anything -> array``.

    Example:
        >>> with saved_tensors_hooks(lambda a: a.copy(), lambda a: a):
        ...     y = (x * x).sum()     # mul stores a copy of x
        >>> y.backward()
    """

    def __init__(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError(f"saved_tensors_hooks: pack_hook and unpack_hook must be callable, got "
                            f"{type(pack_hook).__name__} and {type(unpack_hook).__name__}")
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        _SAVED_HOOKS.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _SAVED_HOOKS.pop()
        return False


@contextmanager
def _saved_hooks_paused():
    """No saved-tensor hooks inside: while a hook runs (torch does the same), and while a
    checkpoint recomputes ("as if no checkpoint were active", torch's rule 3)."""
    paused = _SAVED_HOOKS[:]
    _SAVED_HOOKS.clear()
    try:
        yield
    finally:
        _SAVED_HOOKS[:] = paused


class _Packed:
    """A saved entry that went through a pack hook: the packed value and its unpack hook."""

    __slots__ = ("value", "unpack")

    def __init__(self, value, unpack):
        self.value, self.unpack = value, unpack


# --- Context and Function -------------------------------------------------------------------
_CURRENT_OP = None  # the Function class whose forward is running (innermost)


def current_op():
    """The `Function` subclass whose ``forward`` is running right now, or None.

    Lets a pack hook name the op that saves an array (checkpoint's determinism check does)."""
    return _CURRENT_OP


class Context:
    """Per-node scratchpad: what forward leaves for backward.

    ``save_for_backward(*arrays)`` is the only way an op keeps arrays for its backward
    (the ledger counts the stored arrays as ``"activations"`` until the node is released);
    ``saved_tensors`` gives them back (through the unpack hook if one packed them).
    Other attributes (``ctx.dim = dim``) hold constants."""

    __slots__ = ("fn", "inputs", "input_shapes", "output_shape", "saved", "released", "recording",
                 "needs_input_grad", "retained", "_unpacked", "__dict__")

    def __init__(self, recording: bool = True):
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
        self.output_shape = None
        self.needs_input_grad = ()
        self.retained = None  # weakref to the output tensor, set by Tensor.retain_grad()
        self._unpacked = None  # arrays handed out by unpack hooks, held until release

    def save_for_backward(self, *arrays):
        """Keep ``arrays`` (NumPy arrays or None) for this node's backward.

        Nothing is kept when the node is not recording (under ``no_grad``, or when no
        input requires grad). Inside `saved_tensors_hooks` each array is packed."""
        if not self.recording:
            return
        # NumPy turns 0-d results into scalars (np.float64): saved, they are 0-d arrays
        arrays = tuple(np.asarray(a) if isinstance(a, np.generic) else a for a in arrays)
        if not _SAVED_HOOKS:
            self.saved = arrays
            for a in arrays:
                if isinstance(a, np.ndarray):
                    _tell_hold(a, "activations")
            return
        pack, unpack = _SAVED_HOOKS[-1]
        stored = []
        for a in arrays:
            if isinstance(a, np.ndarray):
                with _saved_hooks_paused():
                    value = pack(a)
                if isinstance(value, np.ndarray):
                    _tell_hold(value, "activations")
                a = _Packed(value, unpack)
            stored.append(a)
        self.saved = tuple(stored)

    @property
    def saved_tensors(self) -> tuple:
        """The saved arrays, in the order they were saved (unpacked if they were packed)."""
        if self.released:
            name = self.fn.__name__ if self.fn is not None else "this node"
            raise RuntimeError(
                f"Trying to backward through the graph a second time (or directly access saved "
                f"tensors after they have already been freed): the arrays {name} saved "
                f"for backward were freed after the first backward(). Call "
                f".backward(retain_graph=True) the first time if you need to backward twice.")
        if not any(isinstance(s, _Packed) for s in self.saved):
            return self.saved
        out = []
        for s in self.saved:
            if isinstance(s, _Packed):
                with _saved_hooks_paused():
                    a = s.unpack(s.value)
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"saved_tensors_hooks: unpack_hook must return a NumPy array, "
                                    f"got {type(a).__name__}")
                _tell_hold(a, "activations")  # held by this node until its backward has run
                if self._unpacked is None:
                    self._unpacked = []
                self._unpacked.append(a)
                # A packed object may keep the array elsewhere until this node holds it
                # (a checkpoint's rebuilt arrays): now it can let go, with no gap.
                handed_over = getattr(s.value, "unpacked", None)
                if handed_over is not None:
                    handed_over()
                s = a
            out.append(s)
        return tuple(out)

    def drop_unpacked(self):
        """Let go of the arrays unpack hooks handed out (after this node's backward; even
        with ``retain_graph=True`` they are rebuilt for each backward, as in torch)."""
        for a in self._unpacked or ():
            _tell_release(a, "activations")
        self._unpacked = None

    def release(self):
        """Free the saved arrays (after backward, or when the graph is dropped)."""
        if self.released:
            return
        for s in self.saved:
            if isinstance(s, _Packed):
                s = s.value
            if isinstance(s, np.ndarray):
                _tell_release(s, "activations")
        self.drop_unpacked()
        self.saved = ()
        self.released = True

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


class Function:
    """Base class of ops (like ``torch.autograd.Function``).

    Subclasses define ``forward(ctx, *args, **kwargs)`` on NumPy arrays (tensor arguments
    arrive as their ``.data``) returning one array, and ``backward(ctx, grad)`` returning
    one gradient (array or None) per positional argument of ``forward``. Tensor arguments
    must be positional; keyword arguments are constants (axes, flags), not differentiated.
    Optionally ``flops(ctx, out, *args, **kwargs)`` and ``backward_flops(ctx)`` give the
    op's floating-point operations for the ledger (both 0 by default; see `minigrad.ops`
    for the convention).

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
        >>> y = Square.apply(Tensor([3.0], requires_grad=True))
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError

    @staticmethod
    def flops(ctx, out, *args, **kwargs) -> int:
        """Floating-point operations of ``forward`` (0 unless the op defines it)."""
        return 0

    @staticmethod
    def backward_flops(ctx) -> int:
        """Floating-point operations of ``backward`` (0 unless the op defines it)."""
        return 0

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` on the arrays of ``args`` and return the output Tensor, recording
        a graph node when grad is enabled and some tensor argument requires grad."""
        global _CURRENT_OP
        needs = _GRAD_ENABLED and any(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = Context(needs)
        ctx.fn = cls
        ctx.needs_input_grad = tuple(needs and isinstance(a, Tensor) and a.requires_grad for a in args)
        outer, _CURRENT_OP = _CURRENT_OP, cls
        try:
            out = cls.forward(ctx, *[a.data if isinstance(a, Tensor) else a for a in args], **kwargs)
        finally:
            _CURRENT_OP = outer
        if not isinstance(out, np.ndarray):  # NumPy returns scalars for 0-d results
            if isinstance(out, Tensor):
                raise TypeError(f"{cls.__name__}.forward returned a Tensor; forward works on NumPy "
                                f"arrays and must return one (use .data inside forward)")
            out = np.asarray(out)
        result = Tensor(out, requires_grad=needs)
        if needs:
            ctx.inputs = tuple(_edge(a) for a in args)
            ctx.input_shapes = tuple(a.shape if isinstance(a, Tensor) else None for a in args)
            ctx.output_shape = out.shape
            result._ctx = ctx
        for hook in _OP_HOOKS:
            hook("forward", cls, ctx, args, kwargs, result)
        return result

    @classmethod
    def name(cls) -> str:
        return cls.__name__.lower()


def _edge(a):
    """The graph edge to input ``a`` (see ``Context.inputs``)."""
    if not (isinstance(a, Tensor) and a.requires_grad):
        return None
    return a if a._ctx is None else a._ctx


_NUMERIC_KINDS = "biuf"  # bool, integers, floats: what a tensor may hold


def _as_array(data, dtype=None):
    if isinstance(data, Tensor):
        data = data.data
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in _NUMERIC_KINDS:
            raise TypeError(f"Tensor: cannot make a tensor from an array of dtype {data.dtype}; "
                            f"tensors hold booleans, integers or floats")
        return data if dtype is None or data.dtype == dtype else data.astype(dtype)
    try:
        arr = np.asarray(data, dtype=dtype)
    except ValueError as e:  # ragged nested lists, strings that are not numbers, ...
        raise ValueError(f"Tensor: cannot make a tensor from {type(data).__name__}: {e}") from None
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__} (got an array of "
                        f"dtype {arr.dtype}); pass numbers, nested lists of numbers or a NumPy array")
    if dtype is None and arr.dtype == np.float64:
        arr = arr.astype(np.float32)  # like torch.tensor: Python floats default to float32
    return arr


# --- Tensor -----------------------------------------------------------------------------------
class Tensor:
    """An n-dimensional array with an optional gradient.

    Args:
        data: a NumPy array (shared, not copied, like ``torch.from_numpy``), a Tensor, or
            nested Python numbers (copied; Python floats become float32 as in torch).
        requires_grad: record the ops applied to it so that backward reaches it.
        dtype: optional NumPy dtype to convert to.

    Supported float dtypes: float32 and float64; integer tensors hold indices and targets.

    Example:
        >>> x = Tensor([[1.0, 2.0]], requires_grad=True)
        >>> (x * x).sum().backward()
        >>> x.grad
        array([[2., 4.]], dtype=float32)
    """

    __slots__ = ("_data", "requires_grad", "_grad", "_ctx", "_retains_grad", "__weakref__")
    __array_ufunc__ = None  # `ndarray + Tensor` defers to Tensor.__radd__ (a graph op)

    def __array__(self, dtype=None, copy=None):  # np.asarray(t): the data, no graph
        return self._data if dtype is None else self._data.astype(dtype)

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        self._data = _as_array(data, dtype)
        _tell_array(self._data)
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
        _tell_array(value)
        self._data = value

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value):
        if self._grad is not None:
            _tell_release(self._grad, "gradients")
        if value is not None:
            value = _as_array(value)
            _tell_hold(value, "gradients")
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
    def backward(self, gradient=None, retain_graph: bool = False, inputs=None):
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf that requires grad.

        Args:
            gradient: d(loss)/d(self), an array of this tensor's shape; defaults to 1 for a
                one-element tensor.
            retain_graph: keep every node's saved arrays (to call backward again).
            inputs: optional tensors: accumulate only into these tensors' ``.grad`` (as
                torch's ``backward(inputs=...)``).

        Raises:
            RuntimeError: the tensor does not require grad, or ``gradient`` is missing for
                a tensor of several elements.

        Example:
            >>> loss = (w * x).sum()
            >>> loss.backward()       # w.grad == x
        """
        root_grad = _root_grad(self, gradient, "backward")
        accumulate = None
        if inputs is not None:
            accumulate = _tensor_list(inputs, "backward", "inputs")
            for t in accumulate:
                if not t.requires_grad:
                    raise RuntimeError("backward: every tensor in inputs must require grad")
        run_backward([self], [root_grad], retain_graph=retain_graph, accumulate=accumulate)

    # --- operators (defined in ops.py, attached at import) --------------------------


def _tensor_list(x, where, what):
    items = [x] if isinstance(x, Tensor) else list(x)
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: {what} must be Tensors, got {type(t).__name__}")
    return items


def _root_grad(t, gradient, where):
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: outputs must be Tensors, got {type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if t.size != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs, got shape {t.shape}")
        return np.ones(t.shape, dtype=t.dtype)
    g = _as_array(gradient, t.dtype)
    if g.shape != t.shape:
        raise ValueError(f"{where}: gradient has shape {g.shape} but the tensor has shape {t.shape}")
    return g


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
        >>> (gx,) = grad((x * x).sum(), [x])     # 2 * x; x.grad stays None
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
    for t in ins:
        if not t.requires_grad:
            raise RuntimeError("grad: one of the inputs does not require grad")
    roots = [_root_grad(o, g, "grad") for o, g in zip(outs, grad_outputs)]
    results = run_backward(outs, roots, retain_graph=retain_graph, capture=ins, accumulate=())
    if not allow_unused and any(r is None for r in results):
        i = next(i for i, r in enumerate(results) if r is None)
        raise RuntimeError(f"grad: input {i} (shape {ins[i].shape}) was not used to compute the "
                           f"outputs; pass allow_unused=True to get None for it")
    return tuple(results)


# --- the backward pass -------------------------------------------------------------------------
def graph_nodes(root):
    """The graph behind ``root`` (a Tensor, a node, or a list of them): its nodes
    (Contexts) and the leaves that require grad (Tensors), every input before the nodes
    that use it. A node's ``saved`` arrays, ``fn`` and ``inputs`` describe it.

    Example:
        >>> [getattr(n.fn, "__name__", "leaf") for n in graph_nodes((x.exp() * x).sum())]
    """
    roots = root if isinstance(root, (list, tuple)) else [root]
    order, seen = [], set()
    stack = []
    for r in reversed(roots):
        start = r._ctx if isinstance(r, Tensor) and r._ctx is not None else r
        stack.append((start, False))
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


def saved_arrays(root) -> list:
    """Every array kept for backward by the graph behind ``root``, each array object once.

    What its nodes saved (as stored: after a pack hook, if any), plus what a pack hook's
    stored object declares it keeps instead (an object with a ``kept_arrays()`` method:
    a non-reentrant checkpoint's handle answers with the checkpoint's inputs). Arrays that
    a checkpoint will only recompute later are not included: they do not exist yet.

    Example:
        >>> y = (x.exp() * w).sum()
        >>> [a.shape for a in saved_arrays(y)]
    """
    out, seen = [], set()
    for node in graph_nodes(root):
        if not isinstance(node, Context):
            continue
        for s in node.saved:
            value = s.value if isinstance(s, _Packed) else s
            arrays = [value] if isinstance(value, np.ndarray) else (
                value.kept_arrays() if hasattr(value, "kept_arrays") else [])
            for a in arrays:
                if id(a) not in seen:
                    seen.add(id(a))
                    out.append(a)
    return out


def _owned(g, taken):
    # A gradient array may be written in place only if nothing else can see it:
    # it owns its buffer, is writeable, and was not handed to another tensor.
    return g.base is None and g.flags.writeable and id(g) not in taken


class BackwardTask:
    """One backward pass in progress (see `current_backward`).

    ``id``: a number unique to this pass; ``accumulates``: True for a plain ``backward()``
    (every leaf accumulates into ``.grad``), False for ``grad()`` or ``backward(inputs=...)``
    (torch's reentrant checkpoint refuses those)."""

    __slots__ = ("id", "accumulates")

    def __init__(self, task_id, accumulates):
        self.id, self.accumulates = task_id, accumulates


_TASKS: list = []
_TASK_IDS = itertools.count(1)


def current_backward():
    """The innermost `BackwardTask` running now, or None outside backward."""
    return _TASKS[-1] if _TASKS else None


def _key(t):
    """The graph key of a root or captured tensor: its node, or itself for a leaf (a node
    given directly is its own key)."""
    return t if isinstance(t, Context) or t._ctx is None else t._ctx


def run_backward(roots, grads, retain_graph=False, capture=(), accumulate=None, inputs=None):
    """Back-propagate ``grads`` (arrays, one per root Tensor) through the graph.

    Args:
        roots: Tensors (a single Tensor is accepted too), or graph nodes (Contexts).
        grads: their gradients (a single array with a single root).
        retain_graph: keep every node's saved arrays.
        capture: tensors (leaves or not) whose gradients are returned instead of being
            accumulated into their ``.grad``.
        accumulate: None: every other leaf that requires grad accumulates into ``.grad``
            (``backward()``); a sequence of tensors: only those accumulate
            (``backward(inputs=...)``); ``()``: nothing accumulates (``grad()``).
            Nodes that lead to no captured or accumulated tensor are then not run.
        inputs: the older name of ``capture`` (kept for callers of the first API).

    Returns:
        The captured gradients (arrays, or None where nothing flowed), in ``capture`` order.
    """
    if isinstance(roots, Tensor):
        roots, grads = [roots], [grads]
    order = graph_nodes(list(roots))
    capture = list(capture) + list(inputs or ())
    captured_at: dict[int, list[int]] = {}
    for i, t in enumerate(capture):
        captured_at.setdefault(id(_key(t)), []).append(i)
    results = [None] * len(capture)
    accum_ids = None if accumulate is None else {id(_key(t)) for t in accumulate}
    # backward(inputs=[h]) with h an intermediate tensor: h.grad gets what reaches its node
    accum_nodes = {} if accumulate is None else {id(t._ctx): t for t in accumulate if t._ctx is not None}
    reach = _reaching(order, set(captured_at) | accum_ids) if accumulate is not None else None
    pending: dict[int, list] = {}  # id(node or leaf) -> [gradient array, owned?]
    for r, g in zip(roots, grads):
        g = np.asarray(g)
        _tell_array(g)
        _add_grad(pending, id(_key(r)), g, False)
    _TASKS.append(BackwardTask(next(_TASK_IDS), accumulate is None))
    try:
        for node in reversed(order):
            entry = pending.pop(id(node), None)  # [gradient, owned?]
            if entry is None:
                continue
            if id(node) in captured_at:
                for i in captured_at[id(node)]:
                    results[i] = entry[0]
                entry[1] = False  # the caller holds it: never accumulate into it in place
            if isinstance(node, Tensor):  # a leaf
                if id(node) not in captured_at and (accum_ids is None or id(node) in accum_ids):
                    _accumulate_leaf(node, *entry)
                continue
            if id(node) in accum_nodes:
                _accumulate_leaf(accum_nodes[id(node)], entry[0], False)
            _run_node(node, entry, pending, retain_graph, reach,
                      keep_retained=accum_ids is None or id(node) in accum_ids)
    finally:
        _TASKS.pop()
    return results


def _reaching(order, targets):
    """Ids of the nodes and leaves from which a target is reachable (targets included)."""
    reach = set()
    for node in order:  # inputs come before the nodes that use them
        if id(node) in targets or (isinstance(node, Context)
                                   and any(e is not None and id(e) in reach for e in node.inputs)):
            reach.add(id(node))
    return reach


def _accumulate_leaf(leaf, g, owned):
    if leaf._grad is None:
        leaf.grad = g if owned else g.copy()
    else:
        leaf._grad += g  # in place: no new gradient array


def _add_grad(pending, key, pg, owned):
    prev = pending.get(key)
    if prev is None:
        pending[key] = [pg, owned]
    elif prev[1]:
        prev[0] += pg
    else:
        prev[0] = np.asarray(prev[0] + pg)  # (0-d arrays add up to NumPy scalars)
        _tell_array(prev[0])
        prev[1] = True


def _run_node(ctx, entry, pending, retain_graph, reach, keep_retained):
    """Call one node's backward with the gradient in ``entry`` (``[array, owned?]``, emptied
    here so that no caller keeps the array alive) and hand the results to its inputs."""
    g, owned = entry
    entry.clear()
    if keep_retained and ctx.retained is not None and ctx.retained() is not None:
        t = ctx.retained()
        t.grad = g.copy() if t._grad is None else t._grad + g
    if reach is not None and not any(e is not None and id(e) in reach for e in ctx.inputs):
        return  # a captured intermediate whose own inputs lead nowhere wanted
    if ctx.released:
        ctx.saved_tensors  # raises the "backward a second time" error
    pgrads = ctx.fn.backward(ctx, g)
    ctx.drop_unpacked()
    # A gradient passed straight through (add, sub) is owned only if g was.
    taken = set() if owned else {id(g)}
    if not isinstance(pgrads, tuple):
        pgrads = (pgrads,)
    if not retain_graph:
        ctx.release()
    for edge, shape, pg in zip(ctx.inputs, ctx.input_shapes, pgrads):
        if pg is None or edge is None or (reach is not None and id(edge) not in reach):
            continue
        if not isinstance(pg, np.ndarray):
            pg = np.asarray(pg)
        if pg.shape != shape:
            raise RuntimeError(f"{ctx.fn.name()}.backward returned a gradient of shape "
                               f"{pg.shape} for an input of shape {shape}")
        _tell_array(pg)
        _add_grad(pending, id(edge), pg, _owned(pg, taken))
        taken.add(id(pg))
    g = pgrads = pg = None  # drop references so the ledger sees the arrays freed
    for hook in _OP_HOOKS:
        hook("backward", ctx.fn, ctx, None, None, None)
