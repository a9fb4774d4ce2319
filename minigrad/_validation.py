"""Argument checks shared by minigrad's modules: one place, one style of message.

Every message names the function, the argument, the value received and what is allowed,
like ``ops.matmul``'s shape errors: ``"uniform: segments=11 is out of range; allowed:
1 <= segments <= 10"``.
"""
from __future__ import annotations

import math
import numbers
import weakref

import numpy as np

__all__ = ["as_array", "check_int", "check_number", "check_segment_starts", "saved_versions",
           "check_saved_versions"]


def _prefix(where: str) -> str:
    return f"{where}: " if where else ""


def check_int(name: str, value, lo: int | None = None, hi: int | None = None, where: str = "") -> int:
    """``value`` as an ``int`` if it is an integer in ``[lo, hi]``; else a named error.

    Args:
        name: the argument's name, used in the message.
        value: what was passed (Python or NumPy integers; ``bool`` and floats are refused,
            even ``2.0``, so that ``1.7`` never silently becomes ``1``).
        lo, hi: inclusive bounds (``None``: unbounded).
        where: the calling function's name, prefixed to the message.

    Returns:
        ``int(value)``.

    Raises:
        TypeError: ``value`` is not an integer.
        ValueError: it is out of range (the message states the allowed range).

    Example:
        >>> check_int("segments", 3, 1, 10)
        3
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{_prefix(where)}{name} must be an integer, got {value!r} "
                        f"({type(value).__name__})")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        allowed = " <= ".join(str(x) for x in (lo, name, hi) if x is not None)
        raise ValueError(f"{_prefix(where)}{name}={value} is out of range; allowed: {allowed}")
    return value


def check_number(name: str, value, lo: float | None = None, hi: float | None = None,
                 where: str = "", lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a ``float`` if it is a finite real number within the bounds.

    Args:
        name: the argument's name, used in the message.
        value: a Python or NumPy real number (``bool`` is refused).
        lo, hi: bounds (``None``: unbounded); inclusive unless ``lo_open``/``hi_open``.
        where: the calling function's name, prefixed to the message.

    Returns:
        ``float(value)``.

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite, or out of range.

    Example:
        >>> check_number("lr", 1e-3, lo=0)
        0.001
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{_prefix(where)}{name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{_prefix(where)}{name} must be a finite number, got {value}")
    too_low = lo is not None and (value <= lo if lo_open else value < lo)
    too_high = hi is not None and (value >= hi if hi_open else value > hi)
    if too_low or too_high:
        left = "" if lo is None else f"{lo} {'<' if lo_open else '<='} "
        right = "" if hi is None else f" {'<' if hi_open else '<='} {hi}"
        raise ValueError(f"{_prefix(where)}{name}={value} is out of range; allowed: {left}{name}{right}")
    return value


def check_segment_starts(starts, n: int, where: str = "") -> tuple[int, ...]:
    """Validate one-level segment starts for a chain of ``n`` layers.

    Args:
        starts: the first layer of every segment: integers, beginning with 0, strictly
            increasing, each below ``n`` (``[0, 3, 7]`` on 10 layers: layers 0-2, 3-6, 7-9).
        n: the number of layers.
        where: the calling function's name, prefixed to the message.

    Returns:
        The starts as a tuple of ints.

    Raises:
        TypeError: ``starts`` is not a sequence of integers (``1.7`` is refused, not rounded).
        ValueError: it is empty, does not begin with 0, is not strictly increasing or
            reaches ``n``.

    Example:
        >>> check_segment_starts([0, 3, 7], 10)
        (0, 3, 7)
    """
    try:
        items = list(starts)
    except TypeError:
        raise TypeError(f"{_prefix(where)}segment starts must be a sequence of integers, got "
                        f"{type(starts).__name__}") from None
    for s in items:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, numbers.Integral):
            raise TypeError(f"{_prefix(where)}segment starts must be integers, got {s!r} in {items}")
    out = tuple(int(s) for s in items)
    if not out or out[0] != 0:
        raise ValueError(f"{_prefix(where)}segment starts must begin with 0, got {list(out)}")
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"{_prefix(where)}segment starts must be strictly increasing, got {list(out)}")
    if out[-1] >= n:
        raise ValueError(f"{_prefix(where)}segment starts must be < n={n} (allowed 0 .. {n - 1}), "
                         f"got {list(out)}")
    return out


def as_array(data, dtype=None) -> np.ndarray:
    """``data`` (a NumPy array, a Tensor, nested numbers) as a NumPy array of booleans,
    integers or floats; an array is shared, not copied, and Python floats become float32
    (as ``torch.tensor`` does)."""
    arr = getattr(data, "_data", data)  # a Tensor's array
    if not isinstance(arr, np.ndarray):
        try:
            arr = np.asarray(arr, dtype=dtype)
        except ValueError as e:  # ragged nested lists, strings that are not numbers, ...
            raise ValueError(f"Tensor: cannot make a tensor from {type(data).__name__}: {e}") from None
        if dtype is None and arr.dtype == np.float64:
            arr = arr.astype(np.float32)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"Tensor: cannot make a tensor from {type(data).__name__} (got an array of "
                        f"dtype {arr.dtype}); tensors hold booleans, integers or floats")
    return arr if dtype is None or arr.dtype == dtype else arr.astype(dtype)


# --- saved arrays and in-place updates (the engine's version check) ----------------------
def saved_versions(ctx, args, result) -> tuple:
    """What `check_saved_versions` checks for a node ``ctx`` that ``args`` made ``result``:
    ``(weak reference to the tensor, version, k, shape)`` for each saved array that is (a
    direct view of) tensor input ``k``'s array, or the output's (``k`` -1). Weak: a node
    must not keep a tensor, hence its array, alive (a pack hook may have let it go).
    Identity tests only: no copy, no checksum; arrays an op made itself (intermediates)
    need nothing."""
    found = []
    shapes, out = ctx.input_shapes, result._data
    for s in ctx.__dict__.pop("raw_saved", ctx.saved):  # (before any pack hook)
        if s is None:
            continue
        base = getattr(s, "base", None)
        if s is out or base is out:
            found.append((weakref.ref(result), 0, -1, result.shape))
        k = 0
        for t in args:  # (a plain loop: this runs for every op that saves)
            if shapes[k] is not None and (t._data is s or t._data is base):
                found.append((weakref.ref(t), t._version_counter, k, shapes[k]))
            k += 1
    return tuple(found)


def check_saved_versions(ctx) -> None:
    """Raise torch's error if a tensor whose array node ``ctx`` saved (`saved_versions`)
    was updated in place since (its ``_version`` moved on).

    Example:
        >>> from minigrad import Tensor
        >>> w = Tensor([1.0, 2.0], requires_grad=True)
        >>> y = (w.exp() * w).sum()          # mul saves w (its input 1)
        >>> w.data *= 2                       # an update before backward
        >>> y.backward()
        Traceback (most recent call last):
        ...
        RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: the float32 tensor of shape (2,) that mul saved as its input 1 is at version 1; expected version 0 instead. ...
    """
    for ref, version, k, shape in ctx.versions:
        t = ref()
        if t is not None and t._version_counter != version:
            what = "output" if k < 0 else f"input {k}"
            op = ctx.fn.name() if ctx.fn is not None else "a node"
            raise RuntimeError(
                f"one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: the {t.dtype} tensor of shape {shape} that {op} saved "
                f"as its {what} is at version {t._version_counter}; expected version {version} "
                f"instead. Hint: it was updated in place (t.data -= ..., t.data = ..., an "
                f"optimizer's step) after the forward pass saved it; update it after "
                f"backward(), or give the op a copy")
