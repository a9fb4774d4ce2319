"""Ops: one small `Function` per op, plus the lowercase function that applies it.

Every ``forward(ctx, ...)`` works on NumPy arrays and keeps, with
``ctx.save_for_backward``, only what its ``backward`` needs (mirroring what
PyTorch saves, so the memory ledger's numbers mean what torch's would).
``backward(ctx, grad)`` returns one gradient per positional input (None for
inputs that need none). Shapes follow PyTorch: ``(batch, ..., features)``.
dtypes are preserved: float32 in, float32 out (constants are Python floats,
which NumPy does not let upcast an array).

FLOPs. Each op also says how many floating-point operations its forward
(``flops``) and its backward (``backward_flops``) perform, for the ledger's
``m.flops``. The convention, the same for every op so that counts add up:

* one FLOP per scalar arithmetic operation the formula performs: add, subtract,
  multiply, divide, compare (``max``, ``>``), and one per ``exp``, ``log``,
  ``tanh``, ``sqrt`` or power (a transcendental function counts as one);
* a dot product of length ``k`` counts ``2 k`` (``k`` multiplies and ``k`` adds),
  so a matrix product (..., n, k) @ (k, m) counts ``2 n k m`` per batch entry, as
  ``torch.utils.flop_counter.FlopCounterMode`` counts it; the gradient of an
  operand that was broadcast over batch dimensions is part of the same contraction;
* summing ``s`` numbers counts ``s - 1``; a mean adds one division per result;
* moving data counts nothing: reshape, transpose, permute, indexing, gathering an
  embedding, broadcasting, copying; nor does drawing random numbers;
* backward counts the gradient formulas of the inputs that need a gradient
  (``ctx.needs_input_grad``); summing a gradient over broadcast dimensions counts
  one add per summed element (``N - numel(input)``).

Each op's formula is written next to it; the counts are exact integers that depend
only on shapes (and on which inputs need gradients), never on the machine.
"""
from __future__ import annotations

import builtins  # this module defines its own sum
import math
import numbers

import numpy as np

from minigrad import random as _random
from minigrad.autograd import increment_version
from minigrad.hooks import is_dry_run
from minigrad.tensor import Function, Tensor

__all__ = [
    "add", "sub", "mul", "div", "neg", "pow", "matmul", "sum", "mean", "reshape", "transpose",
    "exp", "log", "tanh", "relu", "gelu", "softmax", "log_softmax", "layer_norm", "dropout",
    "batch_norm", "embedding", "scaled_dot_product_attention", "cross_entropy", "mse_loss",
    "linear", "permute", "getitem",
]


# --- helpers -------------------------------------------------------------------------
def _operand(x, op, which="input", like=None, number="tensor"):
    """The one operand coercer: ``x`` as what op ``op`` takes.

    A Tensor stays as it is. Without ``like`` (an op on one tensor), a NumPy array becomes
    a constant Tensor and anything else raises TypeError naming the op and the operand.
    With ``like`` (the other operand of an elementwise op or a loss), NumPy arrays and
    real numbers are accepted and take ``like``'s float dtype; with ``number="constant"``
    a real number next to a float tensor stays a Python float, a constant the op keeps
    without saving an array (torch saves none for the 2.0 of ``x * 2.0`` either). None, a
    list, a string, a bool or a complex number raise TypeError: never a silent NaN tensor."""
    if isinstance(x, Tensor):
        return x
    if like is None:
        if isinstance(x, np.ndarray):
            return Tensor(x)
        raise TypeError(f"{op}: {which} must be a Tensor, got {type(x).__name__} "
                        f"(wrap data with minigrad.Tensor(...))")
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.ndarray, np.generic)):
        raise TypeError(f"{op}: unsupported operand of type {type(x).__name__}; expected a Tensor, "
                        f"a NumPy array or a real number")
    float_like = isinstance(like, Tensor) and like.dtype.kind == "f"
    if number == "constant" and float_like and isinstance(x, numbers.Real):
        return float(x)
    return Tensor(np.asarray(x, dtype=like.dtype) if float_like else x)


def _numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape is not None else 0


def _reduce_flops(n_full, shape) -> int:
    """Adds to sum a broadcast gradient of ``n_full`` elements down to ``shape``."""
    return n_full - _numel(shape)


def _broadcast_shape(name, a, b):
    a, b = np.shape(a), np.shape(b)  # (a number operand has shape ())
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:  # NumPy's message prints "(3,4) (5,)" and not the op
        raise ValueError(f"{name}: shapes {a} and {b} cannot be broadcast together") from None


def _unbroadcast(g, shape):
    """Sum ``g`` down to ``shape`` (the reverse of NumPy broadcasting)."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if ones:
        g = g.sum(axis=ones, keepdims=True)
    return g  # a fresh array (never a view), so the engine may accumulate into it


def _norm_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % ndim for a in axes)


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _check_dim(op, name, dim, shape) -> int:
    """``dim`` as an int if it names a dimension of ``shape`` (negative counts from the
    end); else a TypeError or ValueError naming ``op``, the shape and the allowed range."""
    ndim = len(shape)
    if not _is_int(dim):
        raise TypeError(f"{op}: {name} must be an int, got {dim!r} ({type(dim).__name__})")
    if not -ndim <= dim < ndim:
        allowed = f"-{ndim} .. {ndim - 1}" if ndim else "none: the tensor is 0-d"
        raise ValueError(f"{op}: {name}={dim} is out of range for a tensor of shape {tuple(shape)} "
                         f"(allowed: {allowed})")
    return int(dim)


def _check_axis(op, axis, shape):
    """``axis`` for a reduction: None (every dimension), an int or a tuple of distinct ints,
    each naming a dimension of ``shape`` (see `_check_dim`)."""
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        axes = tuple(_check_dim(op, "axis", a, shape) for a in axis)
        if len({a % len(shape) for a in axes}) != len(axes):
            raise ValueError(f"{op}: axis {tuple(axis)} names a dimension twice (shape {tuple(shape)})")
        return axes
    return _check_dim(op, "axis", axis, shape)


# --- elementwise arithmetic ----------------------------------------------------------
class _Binary(Function):
    """FLOPs shared by the four arithmetic ops: forward, one per output element; backward,
    ``GRAD_FLOPS[i]`` per output element for input ``i``'s gradient formula, then the adds
    that sum it over the dimensions the input was broadcast along."""

    GRAD_FLOPS = (0, 0)

    @staticmethod
    def flops(ctx, out, a, b):
        return out.size

    @classmethod
    def backward_flops(cls, ctx):
        n = _numel(ctx.output_shape)
        return builtins.sum(per * n + _reduce_flops(n, shape) for per, shape, need
                            in zip(cls.GRAD_FLOPS, ctx.shapes, ctx.needs_input_grad) if need)


class Add(_Binary):
    GRAD_FLOPS = (0, 0)  # the gradient passes through
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return a + b

    @staticmethod
    def backward(ctx, g):
        need = ctx.needs_input_grad
        return (_unbroadcast(g, ctx.shapes[0]) if need[0] else None,
                _unbroadcast(g, ctx.shapes[1]) if need[1] else None)


class Sub(_Binary):
    GRAD_FLOPS = (0, 1)  # b's gradient is -g
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (np.shape(a), np.shape(b))
        return a - b

    @staticmethod
    def backward(ctx, g):
        gb = _unbroadcast(-g, ctx.shapes[1]) if ctx.needs_input_grad[1] else None
        return _unbroadcast(g, ctx.shapes[0]) if ctx.needs_input_grad[0] else None, gb


def _save_operands(ctx, first, second):
    """Save the arrays among two operands (None: not needed); a number operand is a
    constant kept on ``ctx``, no array saved for it (torch saves none for ``x * 2.0``)."""
    ctx.constants = tuple(None if v is None or isinstance(v, np.ndarray) else v for v in (first, second))
    ctx.save_for_backward(*(v if isinstance(v, np.ndarray) else None for v in (first, second)))


def _saved_operands(ctx):
    """The two operands `_save_operands` kept, in its order."""
    return tuple(s if c is None else c for s, c in zip(ctx.saved_tensors, ctx.constants))


class Mul(_Binary):
    GRAD_FLOPS = (1, 1)  # g * b, g * a
    @staticmethod
    def forward(ctx, a, b):
        # Keep only what the gradients need: d/da needs b, d/db needs a.
        _save_operands(ctx, b if ctx.needs_input_grad[0] else None, a if ctx.needs_input_grad[1] else None)
        ctx.shapes = (np.shape(a), np.shape(b))
        return a * b

    @staticmethod
    def backward(ctx, g):
        b, a = _saved_operands(ctx)
        ga = _unbroadcast(g * b, ctx.shapes[0]) if b is not None else None
        gb = _unbroadcast(g * a, ctx.shapes[1]) if a is not None else None
        return ga, gb


class Div(_Binary):
    GRAD_FLOPS = (1, 4)  # g / b; -g * a / (b * b)
    @staticmethod
    def forward(ctx, a, b):
        _save_operands(ctx, a if ctx.needs_input_grad[1] else None, b)
        ctx.shapes = (np.shape(a), np.shape(b))
        return a / b

    @staticmethod
    def backward(ctx, g):
        a, b = _saved_operands(ctx)
        ga = _unbroadcast(g / b, ctx.shapes[0]) if ctx.needs_input_grad[0] else None
        gb = _unbroadcast(-g * a / (b * b), ctx.shapes[1]) if ctx.needs_input_grad[1] else None
        return ga, gb


class Neg(Function):
    @staticmethod
    def forward(ctx, a):
        return -a

    @staticmethod
    def backward(ctx, g):
        return -g

    @staticmethod
    def flops(ctx, out, a):
        return out.size

    @staticmethod
    def backward_flops(ctx):
        return _numel(ctx.output_shape)


class Pow(Function):
    @staticmethod
    def forward(ctx, a, exponent: float):
        ctx.save_for_backward(a)
        ctx.exponent = exponent
        return a ** exponent

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        p = ctx.exponent
        return g * (p * a ** (p - 1)), None

    @staticmethod
    def flops(ctx, out, a, exponent):
        return out.size  # one power per element

    @staticmethod
    def backward_flops(ctx):
        return 3 * _numel(ctx.output_shape)  # a ** (p - 1), p * ., g * .


def _binary(fn, name, a, b):
    """Apply the elementwise ``fn`` to ``a`` and ``b`` after the checks all four share."""
    a, b = _operand(a, name, like=b, number="constant"), _operand(b, name, like=a, number="constant")
    _broadcast_shape(name, a, b)
    return fn.apply(a, b)


def add(a, b):
    """``a + b`` elementwise, with NumPy/torch broadcasting.

    Args:
        a, b: Tensors, NumPy arrays or Python numbers (a number takes the other operand's
            float dtype).

    Returns:
        A Tensor of the broadcast shape.

    Raises:
        ValueError: the shapes do not broadcast (both are named).
        TypeError: an operand is not a tensor, array or number (None, a list...).

    Example:
        >>> add(Tensor([1.0, 2.0]), 3.0)
        Tensor([4. 5.], dtype=float32)
    """
    return _binary(Add, "add", a, b)


def sub(a, b):
    """``a - b`` elementwise; arguments, broadcasting and errors as in `add`.

    Example:
        >>> sub(Tensor([1.0, 2.0]), 3.0)
        Tensor([-2. -1.], dtype=float32)
    """
    return _binary(Sub, "sub", a, b)


def mul(a, b):
    """``a * b`` elementwise; arguments, broadcasting and errors as in `add`.

    Example:
        >>> mul(Tensor([1.0, 2.0]), 3.0)
        Tensor([3. 6.], dtype=float32)
    """
    return _binary(Mul, "mul", a, b)


def div(a, b):
    """``a / b`` elementwise; arguments, broadcasting and errors as in `add`.

    Example:
        >>> div(Tensor([1.0, 2.0]), 4.0)
        Tensor([0.25 0.5 ], dtype=float32)
    """
    return _binary(Div, "div", a, b)


def neg(a):
    """``-a``.

    Example:
        >>> neg(Tensor([1.0, -2.0]))
        Tensor([-1.  2.], dtype=float32)
    """
    return Neg.apply(_operand(a, "neg"))


def pow(a, exponent: float):
    """``a ** exponent`` elementwise, for a Python number ``exponent``.

    Args:
        a: a Tensor.
        exponent: a Python number (not a Tensor).

    Example:
        >>> pow(Tensor([2.0, 3.0]), 2)        # [4, 9]
        Tensor([4. 9.], dtype=float32)
    """
    if isinstance(exponent, (bool, np.bool_)) or not isinstance(exponent, numbers.Real):
        raise TypeError(f"pow: the exponent must be a Python number, got {type(exponent).__name__}")
    return Pow.apply(_operand(a, "pow"), float(exponent))


# --- matmul -----------------------------------------------------------------------------
class MatMul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(b if ctx.needs_input_grad[0] else None,
                              a if ctx.needs_input_grad[1] else None)
        return np.matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        b, a = ctx.saved_tensors
        ga = gb = None
        if b is not None:
            ga = np.matmul(g, np.swapaxes(b, -1, -2))
            if ga.shape != ctx.input_shapes[0]:
                ga = _unbroadcast(ga, ctx.input_shapes[0])
        if a is not None:
            bshape = ctx.input_shapes[1]
            if len(bshape) == 2 and a.ndim > 2:
                # (..., k) @ (k, n): fold the batch dims into one matmul (no batched sum).
                gb = np.matmul(a.reshape(-1, a.shape[-1]).T, g.reshape(-1, g.shape[-1]))
            else:
                gb = _unbroadcast(np.matmul(np.swapaxes(a, -1, -2), g), bshape)
        return ga, gb

    @staticmethod
    def flops(ctx, out, a, b):
        return 2 * out.size * a.shape[-1]  # 2 n k m per batch entry

    @staticmethod
    def backward_flops(ctx):
        # g @ b^T and a^T @ g: each a contraction of the same size as the forward
        return 2 * _numel(ctx.output_shape) * ctx.input_shapes[0][-1] * builtins.sum(ctx.needs_input_grad)


def matmul(a, b):
    """Matrix product ``a @ b`` of (..., n, k) and (..., k, m) tensors (batch dims broadcast).

    Args:
        a, b: Tensors (or NumPy arrays) with at least two dimensions.

    Returns:
        A Tensor (..., n, m). FLOPs: ``2 n k m`` per batch entry.

    Raises:
        ValueError: the inner dimensions differ, or the batch dimensions do not broadcast
            (both shapes are named).
        TypeError: an operand is not a Tensor (a list, say).

    Example:
        >>> matmul(Tensor(np.ones((2, 3))), Tensor(np.ones((3, 4)))).shape
        (2, 4)
    """
    a, b = _operand(a, "matmul", "the first operand"), _operand(b, "matmul", "the second operand")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: both operands need at least 2 dimensions, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} are not aligned "
                         f"({a.shape[-1]} != {b.shape[-2]})")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dimensions of shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)} cannot be broadcast together") from None
    return MatMul.apply(a, b)


class Linear(Function):
    @staticmethod
    def forward(ctx, x, weight, bias=None):
        # Like torch's addmm: saves the input and the weight (a parameter, not an activation).
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None,
                              weight if ctx.needs_input_grad[0] else None)
        # Fold the batch dims into one 2-D product: a (B, T, in) input as (B*T, in).
        # NumPy's batched matmul calls BLAS once per batch entry, which is far slower
        # (and scales badly with threads) than one large GEMM.
        y = np.matmul(x.reshape(-1, x.shape[-1]), weight.T).reshape(x.shape[:-1] + (weight.shape[0],))
        if bias is not None:
            y += bias
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = None
        if w is not None:
            gx = np.matmul(g.reshape(-1, g.shape[-1]), w).reshape(g.shape[:-1] + (w.shape[1],))
        gw = gb = None
        if x is not None:
            # (..., out)^T @ (..., in) with the batch dims folded: one (out, in) matmul.
            gw = np.matmul(g.reshape(-1, g.shape[-1]).T, x.reshape(-1, x.shape[-1]))
        if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
            gb = g.reshape(-1, g.shape[-1]).sum(axis=0)
        return gx, gw, gb

    @staticmethod
    def flops(ctx, out, x, weight, bias=None):
        # (M, in) @ (in, out): 2 M in out, plus one add per output for the bias
        return 2 * out.size * x.shape[-1] + (out.size if bias is not None else 0)

    @staticmethod
    def backward_flops(ctx):
        n, d_in = _numel(ctx.output_shape), ctx.input_shapes[1][-1]
        need = ctx.needs_input_grad
        total = 2 * n * d_in * (int(need[0]) + int(need[1]))  # g @ W and g^T @ x
        if len(need) > 2 and need[2]:
            total += n - ctx.output_shape[-1]  # the bias gradient sums M rows
        return total


def linear(x, weight, bias=None):
    """``x @ weight.T + bias``, like ``torch.nn.functional.linear``: one op (torch's addmm).

    Args:
        x: (..., in).
        weight: (out, in).
        bias: optional (out,).

    Returns:
        A Tensor (..., out).

    Raises:
        ValueError: the shapes do not match (all are named).

    Example:
        >>> linear(Tensor(np.ones((4, 3))), Tensor(np.ones((2, 3)))).shape
        (4, 2)
    """
    x, weight = _operand(x, "linear", "input"), _operand(weight, "linear", "weight")
    if bias is not None:
        bias = _operand(bias, "linear", "bias")
    if weight.ndim != 2 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input of shape {tuple(x.shape)} does not match weight of shape "
                         f"{tuple(weight.shape)} (expected last dim {weight.shape[-1]})")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"linear: bias has shape {tuple(bias.shape)}, expected ({weight.shape[0]},)")
    return Linear.apply(x, weight, bias) if bias is not None else Linear.apply(x, weight)


# --- reductions and shapes ----------------------------------------------------------
class Sum(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        return np.sum(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        if not ctx.keepdims and ctx.axis is not None:
            g = np.expand_dims(g, _norm_axis(ctx.axis, len(ctx.shape)))
        return np.broadcast_to(g, ctx.shape)

    @staticmethod
    def flops(ctx, out, a, axis=None, keepdims=False):
        return a.size - out.size  # summing s numbers: s - 1 adds per result

    @staticmethod
    def backward_flops(ctx):
        return 0  # broadcast


class Mean(Function):
    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        ctx.count = int(np.prod([a.shape[i] for i in _norm_axis(axis, a.ndim)]))
        return np.mean(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, g):
        g = g / ctx.count
        if not ctx.keepdims and ctx.axis is not None:
            g = np.expand_dims(g, _norm_axis(ctx.axis, len(ctx.shape)))
        return np.broadcast_to(g, ctx.shape)

    @staticmethod
    def flops(ctx, out, a, axis=None, keepdims=False):
        return a.size - out.size + out.size  # the sum, then one division per result

    @staticmethod
    def backward_flops(ctx):
        return _numel(ctx.output_shape)  # g / count, then broadcast


class Reshape(Function):
    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape)


class Transpose(Function):
    @staticmethod
    def forward(ctx, a, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return np.swapaxes(a, dim0, dim1)

    @staticmethod
    def backward(ctx, g):
        return np.swapaxes(g, *ctx.dims)


class Permute(Function):
    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims = dims
        return np.transpose(a, dims)

    @staticmethod
    def backward(ctx, g):
        return np.transpose(g, np.argsort(ctx.dims))


class GetItem(Function):
    @staticmethod
    def forward(ctx, a, index):
        ctx.shape, ctx.index = a.shape, index
        return a[index]

    @staticmethod
    def backward(ctx, g):
        gx = np.zeros(ctx.shape, dtype=g.dtype)
        np.add.at(gx, ctx.index, g) if _advanced(ctx.index) else gx.__setitem__(ctx.index, g)
        return gx

    @staticmethod
    def backward_flops(ctx):
        # integer-array indexing may pick an element twice: its gradients are added up
        return _numel(ctx.output_shape) if _advanced(ctx.index) else 0


def _advanced(index):
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, (list, np.ndarray, Tensor)) for i in items)


def permute(a, *dims):
    """Reorder dimensions (a view, like ``torch.permute``).

    Args:
        a: a Tensor.
        *dims: a permutation of ``range(a.ndim)`` (or one tuple of it).

    Example:
        >>> permute(Tensor(np.ones((2, 3, 4))), 2, 0, 1).shape
        (4, 2, 3)
    """
    a = _operand(a, "permute")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if len(dims) != a.ndim:
        raise ValueError(f"permute: dims {dims} are not a permutation of the {a.ndim} dims of "
                         f"shape {tuple(a.shape)}")
    dims = tuple(_check_dim("permute", "dim", d, a.shape) for d in dims)
    if sorted(d % a.ndim for d in dims) != list(range(a.ndim)):
        raise ValueError(f"permute: dims {dims} are not a permutation of the {a.ndim} dims of "
                         f"shape {tuple(a.shape)}")
    return Permute.apply(a, dims=tuple(d % a.ndim for d in dims))


def getitem(a, index):
    """``a[index]``: basic indexing gives a view; integer-array indexing a copy.

    Example:
        >>> getitem(Tensor(np.arange(6.0)), slice(1, 3))
        Tensor([1. 2.], dtype=float64)
    """
    a = _operand(a, "getitem")
    if isinstance(index, Tensor):
        index = index.data
    try:
        return GetItem.apply(a, index=index)
    except IndexError as e:
        raise IndexError(f"getitem: index {index!r} is not valid for a tensor of shape "
                         f"{tuple(a.shape)}: {e}") from None


def sum(a, axis=None, keepdims=False):
    """Sum over ``axis`` (an int, a tuple, or None for all); ``keepdims`` as in NumPy.

    Example:
        >>> sum(Tensor(np.ones((2, 3))), axis=1)          # [3, 3]
        Tensor([3. 3.], dtype=float64)
    """
    a = _operand(a, "sum")
    return Sum.apply(a, axis=_check_axis("sum", axis, a.shape), keepdims=bool(keepdims))


def mean(a, axis=None, keepdims=False):
    """Mean over ``axis`` (an int, a tuple, or None for all); ``keepdims`` as in NumPy.

    Example:
        >>> mean(Tensor(np.ones((2, 3))), axis=0)         # [1, 1, 1]
        Tensor([1. 1. 1.], dtype=float64)
    """
    a = _operand(a, "mean")
    return Mean.apply(a, axis=_check_axis("mean", axis, a.shape), keepdims=bool(keepdims))


def reshape(a, *shape):
    """A tensor with the same data and a new shape (a view when NumPy can make one).

    Args:
        a: a Tensor.
        *shape: the new shape (one entry may be -1), or one tuple of it.

    Raises:
        ValueError: the sizes do not match (both shapes are named).

    Example:
        >>> reshape(Tensor(np.ones((2, 3))), -1).shape
        (6,)
    """
    a = _operand(a, "reshape")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if not all(_is_int(n) for n in shape):
        raise TypeError(f"reshape: the new shape must be integers, got {shape} (a size like 2.5 is "
                        f"refused, not rounded)")
    shape = tuple(int(n) for n in shape)
    try:
        return Reshape.apply(a, shape=shape)
    except ValueError as e:  # NumPy's message names the size, not the tensor's shape
        raise ValueError(f"reshape: cannot reshape a tensor of shape {tuple(a.shape)} "
                         f"(size {a.size}) into shape {shape}: {e}") from None


def transpose(a, dim0, dim1):
    """Swap dimensions ``dim0`` and ``dim1`` (a view, like ``torch.transpose``).

    Example:
        >>> transpose(Tensor(np.ones((2, 3))), 0, 1).shape
        (3, 2)
    """
    a = _operand(a, "transpose")
    return Transpose.apply(a, dim0=_check_dim("transpose", "dim0", dim0, a.shape),
                           dim1=_check_dim("transpose", "dim1", dim1, a.shape))


# --- elementwise functions ------------------------------------------------------------
class Exp(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out

    @staticmethod
    def flops(ctx, out, a):
        return out.size

    @staticmethod
    def backward_flops(ctx):
        return _numel(ctx.output_shape)  # g * exp(a)


class Log(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g / a

    @staticmethod
    def flops(ctx, out, a):
        return out.size

    @staticmethod
    def backward_flops(ctx):
        return _numel(ctx.output_shape)  # g / a


class Tanh(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (1.0 - out * out)

    @staticmethod
    def flops(ctx, out, a):
        return out.size

    @staticmethod
    def backward_flops(ctx):
        return 3 * _numel(ctx.output_shape)  # out * out, 1 - ., g * .


class ReLU(Function):
    @staticmethod
    def forward(ctx, a):
        out = np.maximum(a, 0)
        ctx.save_for_backward(out)  # torch saves the result too
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * (out > 0)

    @staticmethod
    def flops(ctx, out, a):
        return out.size  # one max per element

    @staticmethod
    def backward_flops(ctx):
        return 2 * _numel(ctx.output_shape)  # out > 0, g * .


_GELU_C = math.sqrt(2.0 / math.pi)


class GELU(Function):
    """The tanh approximation, ``torch.nn.functional.gelu(x, approximate="tanh")``
    (NumPy has no erf; the curves differ by < 1e-3)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        # 0.5 * a * (1 + tanh(c * (a + 0.044715 a^3))), computed in place in one buffer
        t = a * a
        t *= 0.044715
        t += 1.0
        t *= a
        t *= _GELU_C
        np.tanh(t, out=t)
        t += 1.0
        t *= a
        t *= 0.5
        return t

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        a2 = a * a
        t = a2 * 0.044715
        t += 1.0
        t *= a
        t *= _GELU_C
        np.tanh(t, out=t)                 # t = tanh(u)
        dt = t * t
        np.subtract(1.0, dt, out=dt)      # 1 - t^2
        a2 *= 3 * 0.044715
        a2 += 1.0
        a2 *= _GELU_C                     # du/da
        dt *= a2
        dt *= a
        dt *= 0.5                         # 0.5 a (1 - t^2) du/da
        t += 1.0
        t *= 0.5
        t += dt                           # d gelu / da
        t *= g
        return t

    @staticmethod
    def flops(ctx, out, a):
        # a*a, *0.044715, +1, *a, *c, tanh, +1, *a, *0.5: the nine steps of forward
        return 9 * out.size

    @staticmethod
    def backward_flops(ctx):
        return 18 * _numel(ctx.output_shape)  # the eighteen in-place steps of backward


def exp(a):
    """``exp(a)`` elementwise (saves its output for backward).

    Example:
        >>> exp(Tensor([0.0, 1.0]))
        Tensor([1.     2.7183], dtype=float32)
    """
    return Exp.apply(_operand(a, "exp"))


def log(a):
    """Natural logarithm, elementwise (saves its input for backward).

    Example:
        >>> log(Tensor([1.0, 2.0]))
        Tensor([0.     0.6931], dtype=float32)
    """
    return Log.apply(_operand(a, "log"))


def tanh(a):
    """``tanh(a)`` elementwise (saves its output for backward).

    Example:
        >>> tanh(Tensor([0.0, 1.0]))
        Tensor([0.     0.7616], dtype=float32)
    """
    return Tanh.apply(_operand(a, "tanh"))


def relu(a):
    """``max(a, 0)`` elementwise (saves its output for backward, as torch does).

    Example:
        >>> relu(Tensor([-1.0, 2.0]))         # [0, 2]
        Tensor([0. 2.], dtype=float32)
    """
    return ReLU.apply(_operand(a, "relu"))


def gelu(a):
    """GELU, tanh approximation (= torch's ``gelu(x, approximate="tanh")``); saves its input.

    Example:
        >>> gelu(Tensor([-1.0, 0.0, 1.0]))
        Tensor([-0.1588  0.      0.8412], dtype=float32)
    """
    return GELU.apply(_operand(a, "gelu"))


# --- softmax family -------------------------------------------------------------------
class Softmax(Function):
    @staticmethod
    def forward(ctx, a, dim=-1):
        e = np.exp(a - a.max(axis=dim, keepdims=True))
        e /= e.sum(axis=dim, keepdims=True)
        ctx.save_for_backward(e)
        ctx.dim = dim
        return e

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return out * (g - (g * out).sum(axis=ctx.dim, keepdims=True))

    @staticmethod
    def flops(ctx, out, a, dim=-1):
        n, rows = out.size, out.size // max(out.shape[dim], 1) if out.size else 0
        return 5 * n - 2 * rows  # max, subtract, exp, sum, divide

    @staticmethod
    def backward_flops(ctx):
        n = _numel(ctx.output_shape)
        rows = n // max(ctx.output_shape[ctx.dim], 1) if n else 0
        return 4 * n - rows  # g * out, sum, g - s, out * .


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, a, dim=-1):
        shifted = a - a.max(axis=dim, keepdims=True)
        out = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g - np.exp(out) * g.sum(axis=ctx.dim, keepdims=True)

    @staticmethod
    def flops(ctx, out, a, dim=-1):
        n, rows = out.size, out.size // max(out.shape[dim], 1) if out.size else 0
        return 5 * n - rows  # max, subtract, exp, sum, log (one per row), subtract

    @staticmethod
    def backward_flops(ctx):
        n = _numel(ctx.output_shape)
        rows = n // max(ctx.output_shape[ctx.dim], 1) if n else 0
        return 4 * n - rows  # exp(out), sum of g, product, g - .


def softmax(a, dim=-1):
    """``exp(a) / sum(exp(a))`` along ``dim`` (computed with the maximum subtracted).

    Example:
        >>> softmax(Tensor([[1.0, 2.0, 3.0]]), dim=-1)
        Tensor([[0.09   0.2447 0.6652]], dtype=float32)
    """
    a = _operand(a, "softmax")
    return Softmax.apply(a, dim=_check_dim("softmax", "dim", dim, a.shape))


def log_softmax(a, dim=-1):
    """``log(softmax(a, dim))``, computed stably.

    Example:
        >>> log_softmax(Tensor([[1.0, 2.0, 3.0]]), dim=-1)
        Tensor([[-2.4076 -1.4076 -0.4076]], dtype=float32)
    """
    a = _operand(a, "log_softmax")
    return LogSoftmax.apply(a, dim=_check_dim("log_softmax", "dim", dim, a.shape))


# --- normalisation --------------------------------------------------------------------
def _norm_backward(g, x, w, mean, rstd, axes):
    """Shared backward of layer and batch norm: ``y = (x - mean) * rstd * w + b``
    with statistics over ``axes``. Returns ``(gx, xhat)``; the callers reduce
    ``g * xhat`` and ``g`` to the weight's and bias's gradients."""
    xhat = (x - mean) * rstd
    gxhat = g if w is None else g * w
    gx = rstd * (gxhat - gxhat.mean(axis=axes, keepdims=True)
                 - xhat * (gxhat * xhat).mean(axis=axes, keepdims=True))
    return gx, xhat


def _norm_backward_flops(n, stats, weighted, training, need_w, need_b):
    """FLOPs of `_norm_backward` and of the weight and bias gradients.

    ``n``: elements of x; ``stats``: number of (mean, rstd) pairs (rows of a layer norm,
    channels of a batch norm)."""
    if training:  # xhat (2n), [g * w], two means (2n), two products (2n), two subtractions, * rstd
        total = 9 * n
    else:  # xhat (2n), [g * w], * rstd
        total = 3 * n
    total += n if weighted else 0
    total += 2 * n - stats if need_w else 0  # (g * xhat).sum over the statistics' axes
    total += n - stats if need_b else 0
    return total


class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        mean = x.mean(axis=-1, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(var + eps)
        y = xc * rstd
        if weight is not None:
            y *= weight
        if bias is not None:
            y += bias
        ctx.save_for_backward(x, weight, mean, rstd)  # torch saves input, weight, mean, rstd
        return y

    @staticmethod
    def flops(ctx, out, x, weight, bias, eps=1e-5):
        n, rows = x.size, x.size // max(x.shape[-1], 1) if x.size else 0
        # mean (n), x - mean, xc * xc, mean (n), + eps, sqrt, 1 / . (3 per row), xc * rstd
        total = 5 * n + 3 * rows
        return total + (n if weight is not None else 0) + (n if bias is not None else 0)

    @staticmethod
    def backward(ctx, g):
        x, w, mean, rstd = ctx.saved_tensors
        gx, xhat = _norm_backward(g, x, w, mean, rstd, (-1,))
        lead = tuple(range(g.ndim - 1))
        gw = (g * xhat).sum(axis=lead) if ctx.needs_input_grad[1] else None
        gb = g.sum(axis=lead) if ctx.needs_input_grad[2] else None
        return gx, gw, gb

    @staticmethod
    def backward_flops(ctx):
        n, d = _numel(ctx.input_shapes[0]), ctx.input_shapes[0][-1]
        need = ctx.needs_input_grad
        return _norm_backward_flops(n, n // d if d else 0, ctx.input_shapes[1] is not None, True,
                                    need[1], need[2])


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last dimension, then scale and shift (torch's ``layer_norm``).

    Args:
        x: (..., d).
        normalized_shape: ``d`` (or ``(d,)``; only the last dimension is supported).
        weight, bias: optional (d,).
        eps: added to the variance.

    Raises:
        ValueError: the shapes do not match (named).

    Example:
        >>> layer_norm(Tensor(np.random.rand(4, 8)), 8).shape
        (4, 8)
    """
    x = _operand(x, "layer_norm")
    d = normalized_shape if isinstance(normalized_shape, int) else tuple(normalized_shape)[-1]
    if isinstance(normalized_shape, (tuple, list)) and len(normalized_shape) != 1:
        raise ValueError("layer_norm: only normalisation over the last dimension is supported")
    if x.shape[-1] != d:
        raise ValueError(f"layer_norm: input of shape {tuple(x.shape)} does not end with "
                         f"normalized_shape ({d},)")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (d,):
            raise ValueError(f"layer_norm: {name} has shape {tuple(p.shape)}, expected ({d},)")
    return LayerNorm.apply(x, weight, bias, eps=eps)


class BatchNorm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps,
                update_stats):
        axes = (0,) if x.ndim == 2 else (0, 2)
        shape = (1, -1) if x.ndim == 2 else (1, -1, 1)
        if training:
            mean = x.mean(axis=axes, keepdims=True)
            xc = x - mean
            var = (xc * xc).mean(axis=axes, keepdims=True)
            if update_stats and running_mean is not None and not is_dry_run():
                n = x.size // x.shape[1]
                # In place: the buffers stay the same arrays (the ledger's "buffers").
                running_mean *= 1.0 - momentum
                running_mean += momentum * mean.reshape(-1)
                running_var *= 1.0 - momentum
                running_var += (momentum * n / max(n - 1, 1)) * var.reshape(-1)
        else:
            mean = running_mean.reshape(shape).copy()
            var = running_var.reshape(shape)
            xc = x - mean
        rstd = 1.0 / np.sqrt(var + eps)
        y = xc * rstd
        w = None if weight is None else weight.reshape(shape)
        if w is not None:
            y *= w
        if bias is not None:
            y += bias.reshape(shape)
        ctx.save_for_backward(x, w, mean, rstd)
        ctx.axes, ctx.training = axes, training
        return y

    @staticmethod
    def flops(ctx, out, x, weight, bias, running_mean, running_var, training, momentum, eps,
              update_stats):
        n, c = x.size, x.shape[1]
        # training: mean (n), x - mean, xc * xc, mean (n); both: + eps, sqrt, 1 / . (3 per
        # channel), xc * rstd, [* w], [+ b]. The running statistics' update is not counted.
        total = (4 * n if training else n) + 3 * c + n
        return total + (n if weight is not None else 0) + (n if bias is not None else 0)

    @staticmethod
    def backward(ctx, g):
        x, w, mean, rstd = ctx.saved_tensors
        axes = ctx.axes
        if ctx.training:
            gx, xhat = _norm_backward(g, x, w, mean, rstd, axes)
        else:  # statistics are constants
            xhat = (x - mean) * rstd
            gx = (g if w is None else g * w) * rstd
        gw = (g * xhat).sum(axis=axes) if ctx.needs_input_grad[1] else None
        gb = g.sum(axis=axes) if ctx.needs_input_grad[2] else None
        return gx, gw, gb, None, None

    @staticmethod
    def backward_flops(ctx):
        shape = ctx.input_shapes[0]
        need = ctx.needs_input_grad
        return _norm_backward_flops(_numel(shape), shape[1], ctx.input_shapes[1] is not None,
                                    ctx.training, need[1], need[2])


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, update_stats=True):
    """Batch normalisation of x (N, C) or (N, C, L) over the batch (and length) axes.

    Args:
        x: the input.
        running_mean, running_var: NumPy arrays (C,) (or None in training), updated *in
            place* when ``training`` and ``update_stats`` (unbiased variance, like torch).
        weight, bias: optional (C,).
        training: normalise with the batch's statistics (True) or the running ones.
        momentum, eps: as in torch.
        update_stats: whether training updates the running statistics.

    Raises:
        ValueError: wrong shapes, or eval mode without running statistics.

    Example:
        >>> rm, rv = np.zeros(3), np.ones(3)
        >>> batch_norm(Tensor(np.random.rand(8, 3)), rm, rv, training=True).shape
        (8, 3)
    """
    x = _operand(x, "batch_norm")
    if x.ndim not in (2, 3):
        raise ValueError(f"batch_norm: expected input of shape (N, C) or (N, C, L), got {tuple(x.shape)}")
    c = x.shape[1]
    for name, p in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if p is not None and tuple(p.shape) != (c,):
            raise ValueError(f"batch_norm: {name} has shape {tuple(p.shape)}, expected ({c},) "
                             f"for input of shape {tuple(x.shape)}")
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm: eval mode needs running_mean and running_var")
    buffers = [t for t in (running_mean, running_var) if isinstance(t, Tensor)]
    if isinstance(running_mean, Tensor):
        running_mean = running_mean.data
    if isinstance(running_var, Tensor):
        running_var = running_var.data
    if training and update_stats and not is_dry_run():
        for t in buffers:  # updated in place below, by NumPy: the setter does not see it
            increment_version(t)
    return BatchNorm.apply(x, weight, bias, running_mean, running_var, training=training,
                           momentum=momentum, eps=eps, update_stats=update_stats)


# --- dropout ----------------------------------------------------------------------------
class Dropout(Function):
    @staticmethod
    def forward(ctx, x, p, generator):
        gen = generator or _random.default_generator
        mask = gen.random(x.shape) >= p  # keep with probability 1 - p
        ctx.save_for_backward(mask)  # a bool array, like torch's saved mask
        ctx.scale = 1.0 / (1.0 - p)
        out = x * mask
        out *= ctx.scale
        return out

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        out = g * mask
        out *= ctx.scale
        return out

    @staticmethod
    def flops(ctx, out, x, p, generator):
        return 3 * out.size  # draw >= p (a compare), x * mask, * scale

    @staticmethod
    def backward_flops(ctx):
        return 2 * _numel(ctx.output_shape)  # g * mask, * scale


def dropout(x, p=0.5, training=True, generator=None):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from ``minigrad.random`` (or ``generator``), so
    ``minigrad.random.manual_seed`` makes it reproducible and checkpoint can replay it.
    Identity (no op recorded) when not training or ``p == 0``.

    Args:
        x: a Tensor.
        p: drop probability in [0, 1).
        training: apply the mask (False: return ``x``).
        generator: a ``minigrad.random.Generator`` (default: the global one).

    Raises:
        ValueError: ``p`` outside [0, 1).

    Example:
        >>> y = dropout(Tensor(np.ones(1000)), p=0.5)   # kept entries scaled by 1 / (1 - p)
        >>> sorted(set(y.data.tolist()))
        [0.0, 2.0]
    """
    x = _operand(x, "dropout")
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real) or not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be a number in [0, 1), got {p!r}")
    if not training or p == 0.0:
        return x
    return Dropout.apply(x, p, generator)


# --- embedding and attention ---------------------------------------------------------
class Embedding(Function):
    @staticmethod
    def forward(ctx, idx, weight):
        ctx.save_for_backward(idx)  # torch saves the indices too
        ctx.num = weight.shape[0]
        return weight[idx]

    @staticmethod
    def backward(ctx, g):
        (idx,) = ctx.saved_tensors
        gw = np.zeros((ctx.num, g.shape[-1]), dtype=g.dtype)
        np.add.at(gw, idx.reshape(-1), g.reshape(-1, g.shape[-1]))
        return None, gw

    @staticmethod
    def backward_flops(ctx):
        return _numel(ctx.output_shape)  # rows of g added into the table (a gather moves data)


def embedding(idx, weight):
    """Rows of ``weight`` (num, d) picked by the integer tensor ``idx`` (...) -> (..., d).

    Raises:
        ValueError: indices that are not integers or are out of range (the range is named).

    Example:
        >>> embedding(np.array([[0, 2]]), Tensor(np.eye(3))).shape
        (1, 2, 3)
    """
    weight = _operand(weight, "embedding", "weight")
    ia = idx.data if isinstance(idx, Tensor) else np.asarray(idx)
    if ia.dtype.kind not in "iu":
        raise ValueError(f"embedding: indices must be integers, got dtype {ia.dtype}")
    if ia.size and (ia.min() < 0 or ia.max() >= weight.shape[0]):
        raise ValueError(f"embedding: indices must be in [0, {weight.shape[0]}), got range "
                         f"[{ia.min()}, {ia.max()}]")
    return Embedding.apply(idx if isinstance(idx, Tensor) else Tensor(ia), weight)


_CAUSAL_BIAS: dict = {}


def _causal_bias(t, u, dtype):
    """(t, u) array: 0 where query i may attend to key j (j <= i), -inf above: torch's
    ``is_causal`` mask, aligned at the top left when ``t != u``."""
    key = (t, u, np.dtype(dtype).str)
    if key not in _CAUSAL_BIAS:
        bias = np.zeros((t, u), dtype=dtype)
        bias[np.triu(np.ones((t, u), dtype=bool), k=1)] = -np.inf
        bias.flags.writeable = False
        _CAUSAL_BIAS[key] = bias  # a constant shared by every call, not a per-step array
    return _CAUSAL_BIAS[key]


class ScaledDotProductAttention(Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, scale=None):
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        s = np.matmul(q, np.swapaxes(k, -1, -2))
        s *= scale
        if is_causal:
            s += _causal_bias(s.shape[-2], s.shape[-1], s.dtype)
        s -= s.max(axis=-1, keepdims=True)
        p = np.exp(s, out=s)
        p /= p.sum(axis=-1, keepdims=True)
        # Like torch's math path: q, k, v and the (..., T, T) probabilities are saved.
        ctx.save_for_backward(q, k, v, p)
        ctx.scale = scale
        return np.matmul(p, v)

    @staticmethod
    def backward(ctx, g):
        q, k, v, p = ctx.saved_tensors
        dv = np.matmul(np.swapaxes(p, -1, -2), g)
        dp = np.matmul(g, np.swapaxes(v, -1, -2))
        # softmax backward in place on dp: ds = p * (dp - rowsum(dp * p))
        rowsum = np.einsum("...ij,...ij->...i", dp, p)[..., None]
        dp -= rowsum
        dp *= p
        dp *= ctx.scale
        dq = np.matmul(dp, k)
        dk = np.matmul(np.swapaxes(dp, -1, -2), q)
        return dq, dk, dv

    @staticmethod
    def flops(ctx, out, q, k, v, is_causal=False, scale=None):
        b = _numel(q.shape[:-2])
        t, s, e, ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
        scores = b * t * s
        # q k^T (2 b t s e), * scale, [+ causal mask], max, - max, exp, sum, / sum, p v (2 b t s ev)
        rows = b * t
        return (2 * scores * e + scores + (scores if is_causal else 0) + (scores - rows)
                + 2 * scores + (scores - rows) + scores + 2 * scores * ev)

    @staticmethod
    def backward_flops(ctx):
        qs, ks, vs = ctx.input_shapes
        b = _numel(qs[:-2])
        t, s, e, ev = qs[-2], ks[-2], qs[-1], vs[-1]
        scores, rows = b * t * s, b * t
        # p^T g and g v^T (2 b t s ev each), rowsum(dp * p) (2 scores - rows), - rowsum, * p,
        # * scale, dp k and dp^T q (2 b t s e each)
        return 4 * scores * ev + (2 * scores - rows) + 3 * scores + 4 * scores * e


def scaled_dot_product_attention(q, k, v, is_causal=False, scale=None):
    """``softmax(q @ k^T * scale [+ causal mask]) @ v``, the math of
    ``torch.nn.functional.scaled_dot_product_attention``.

    Args:
        q: (..., T, E); k: (..., S, E); v: (..., S, Ev).
        is_causal: query ``i`` attends to keys ``j <= i`` only (torch's mask: aligned at the
            top left when ``T != S``).
        scale: defaults to ``1 / sqrt(E)``.

    Returns:
        (..., T, Ev). Saves q, k, v and the (..., T, S) probabilities, like torch's math path.

    Raises:
        ValueError: incompatible shapes (all three named).

    Example:
        >>> q = Tensor(np.random.rand(1, 2, 5, 4))
        >>> scaled_dot_product_attention(q, q, q, is_causal=True).shape
        (1, 2, 5, 4)
    """
    q, k, v = (_operand(t, "scaled_dot_product_attention", n) for t, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.shape[:-2] != k.shape[:-2]:
        raise ValueError(f"scaled_dot_product_attention: incompatible shapes q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    return ScaledDotProductAttention.apply(q, k, v, is_causal=is_causal, scale=scale)


# --- losses -------------------------------------------------------------------------------
class CrossEntropy(Function):
    @staticmethod
    def forward(ctx, logits, target):
        shifted = logits - logits.max(axis=-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        n = logits.shape[0]
        ctx.save_for_backward(logp, target)
        return -logp[np.arange(n), target].sum() / n

    @staticmethod
    def backward(ctx, g):
        logp, target = ctx.saved_tensors
        n = logp.shape[0]
        grad = np.exp(logp)
        grad[np.arange(n), target] -= 1.0
        grad *= g / n
        return grad, None

    @staticmethod
    def flops(ctx, out, logits, target):
        n = logits.size
        # log-softmax (max, subtract, exp, sum, one log per row, subtract: 5 n - rows),
        # sum of the picked rows (rows - 1), / rows, negate
        return 5 * n + 1

    @staticmethod
    def backward_flops(ctx):
        n, rows = _numel(ctx.input_shapes[0]), ctx.input_shapes[0][0]
        return 2 * n + rows + 1  # exp, - 1 at the targets, g / rows, * .


def cross_entropy(logits, target):
    """Mean cross-entropy of logits (N, C) and integer class targets (N,).

    Logits (..., C) with targets (...) are flattened first (as for a GPT's (B, T, V)).

    Raises:
        ValueError: targets that are not integers, of the wrong shape, or out of range.

    Example:
        >>> cross_entropy(Tensor(np.zeros((2, 3))), np.array([0, 2]))   # log(3)
        Tensor(1.0986, dtype=float64)
    """
    logits = _operand(logits, "cross_entropy", "logits")
    ta = target.data if isinstance(target, Tensor) else np.asarray(target)
    if ta.dtype.kind not in "iu":
        raise ValueError(f"cross_entropy: targets must be integer class indices, got dtype {ta.dtype}")
    if logits.shape[:-1] != ta.shape:
        raise ValueError(f"cross_entropy: logits of shape {tuple(logits.shape)} need targets of "
                         f"shape {tuple(logits.shape[:-1])}, got {tuple(ta.shape)}")
    if logits.ndim != 2:
        logits = reshape(logits, -1, logits.shape[-1])
        ta = ta.reshape(-1)
    if ta.size and (ta.min() < 0 or ta.max() >= logits.shape[-1]):
        raise ValueError(f"cross_entropy: targets must be in [0, {logits.shape[-1]}), got range "
                         f"[{ta.min()}, {ta.max()}]")
    return CrossEntropy.apply(logits, ta)


class MSELoss(Function):
    @staticmethod
    def forward(ctx, a, b):
        diff = a - b
        ctx.save_for_backward(diff)
        return np.mean(diff * diff)

    @staticmethod
    def backward(ctx, g):
        (diff,) = ctx.saved_tensors
        ga = diff * (2.0 * g / diff.size)
        return ga, (-ga if ctx.needs_input_grad[1] else None)

    @staticmethod
    def flops(ctx, out, a, b):
        return 3 * a.size  # a - b, diff * diff, mean (sum and one division)

    @staticmethod
    def backward_flops(ctx):
        n = _numel(ctx.input_shapes[0])
        return 2 + n + (n if ctx.needs_input_grad[1] else 0)  # 2 g / size, diff * ., [- ga]


def mse_loss(input, target):
    """Mean squared error of two tensors of the same shape.

    Raises:
        ValueError: the shapes differ (both named).

    Example:
        >>> mse_loss(Tensor([1.0, 2.0]), Tensor([1.0, 4.0]))   # 2.0
        Tensor(2., dtype=float32)
    """
    input = _operand(input, "mse_loss", "input")
    target = _operand(target, "mse_loss", "target", like=input)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"mse_loss: input shape {tuple(input.shape)} and target shape "
                         f"{tuple(target.shape)} differ")
    return MSELoss.apply(input, target)


# --- Tensor methods and operators ------------------------------------------------------
def _repr(t):
    grad = f", grad_fn={t._ctx.fn.name()}" if t._ctx is not None else (
        ", requires_grad=True" if t.requires_grad else "")
    return f"Tensor({np.array2string(t.data, precision=4, threshold=20)}, dtype={t.dtype}{grad})"


def _attach():
    T = Tensor
    T.ndim = property(lambda a: a.data.ndim)
    T.size = property(lambda a: a.data.size)
    T.nbytes = property(lambda a: a.data.nbytes)
    T.is_leaf = property(lambda a: a._ctx is None)
    T.grad_fn = property(lambda a: None if a._ctx is None else a._ctx.fn)
    T.__array__ = lambda a, dtype=None, copy=None: a.data if dtype is None else a.data.astype(dtype)
    T.__len__ = lambda a: len(a.data)
    T.numpy = lambda a: a.data
    T.item = lambda a: a.data.item()
    T.detach = lambda a: Tensor(a.data)  # a new leaf sharing the data: no copy, no graph
    T.zero_grad = lambda a: setattr(a, "grad", None)
    T.__repr__ = _repr
    T.__add__ = lambda a, b: add(a, b)
    T.__radd__ = lambda a, b: add(b, a)
    T.__sub__ = lambda a, b: sub(a, b)
    T.__rsub__ = lambda a, b: sub(b, a)
    T.__mul__ = lambda a, b: mul(a, b)
    T.__rmul__ = lambda a, b: mul(b, a)
    T.__truediv__ = lambda a, b: div(a, b)
    T.__rtruediv__ = lambda a, b: div(b, a)
    T.__neg__ = lambda a: neg(a)
    T.__pow__ = lambda a, e: pow(a, e)
    T.__matmul__ = lambda a, b: matmul(a, b)
    T.__rmatmul__ = lambda a, b: matmul(_operand(b, "matmul", like=a), a)
    T.sum = lambda a, axis=None, keepdims=False: sum(a, axis, keepdims)
    T.mean = lambda a, axis=None, keepdims=False: mean(a, axis, keepdims)
    T.reshape = lambda a, *shape: reshape(a, *shape)
    T.view = T.reshape
    T.transpose = lambda a, d0, d1: transpose(a, d0, d1)
    T.permute = lambda a, *dims: permute(a, *dims)
    T.__getitem__ = lambda a, i: getitem(a, i)
    T.__iter__ = lambda a: (getitem(a, i) for i in range(len(a)))
    T.T = property(lambda a: a if a.ndim < 2 else transpose(a, -1, -2))
    T.exp = lambda a: exp(a)
    T.log = lambda a: log(a)
    T.tanh = lambda a: tanh(a)
    T.relu = lambda a: relu(a)
    T.softmax = lambda a, dim=-1: softmax(a, dim)
    T.log_softmax = lambda a, dim=-1: log_softmax(a, dim)


_attach()
