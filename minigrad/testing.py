"""Answers checked as data: what the assignments' tests call instead of ``assert``.

A test states each answer it checks with :func:`assert_answer`. Run in a notebook (by
otter's ``grader.check``) it is an assertion: the answer is compared with the expected value
the test computed and an ``AssertionError`` says what differs. Run by the course grader, the
same call only *records* the answer as plain data (numbers, strings, lists, arrays;
:func:`canonical`), and the grader compares the record with the one the reference solution
produced in a process of its own (:func:`judge`). So the verdict is never decided where the
student's code runs, and an object that claims to equal everything is no answer at all.
"""
from __future__ import annotations

import base64
import binascii
import math
import sys

import numpy as np

__all__ = [
    "REFERENCE",
    "AnswerError",
    "assert_answer",
    "canonical",
    "compare",
    "judge",
    "recording",
]

COMPARES = ("equal", "close")
MAX_DEPTH = 16
MAX_ITEMS = 1 << 20  # numbers in one answer (an array's elements count one each)

_recorder = [None]  # the answers of the `recording` block that runs (a list, never rebound)


class _Reference:
    def __repr__(self):
        return "REFERENCE"


REFERENCE = _Reference()
"""``expected`` of an answer only the reference solution can give (a hidden test): in a
notebook nothing is compared; the grader compares with the reference's answer."""


class AnswerError(TypeError):
    """Raised when a value cannot be graded: not a number, string, list, dict or array."""


# Exactly these types (never a subclass) are NumPy scalars to `canonical`.
_NUMPY_INTEGERS = tuple(sorted({np.dtype(c).type for c in np.typecodes["AllInteger"]}, key=str))
_NUMPY_FLOATS = tuple(sorted({np.dtype(c).type for c in np.typecodes["Float"]}, key=str))


def _make_canonical():
    # The course grader calls `canonical` inside its audit hook, where every event passes:
    # no code of a notebook's may run there. So it looks nothing up when it runs (a builtin,
    # base64's or binascii's function, each of which a notebook could replace for a moment);
    # everything is bound here, at import, and a class's name is read through ``type``'s own
    # descriptor (a metaclass's ``__name__`` property would run).
    _type, _int, _float, _bool, _str, _list, _tuple, _dict = (
        type, int, float, bool, str, list, tuple, dict)
    _bool_, _ndarray, _contiguous = np.bool_, np.ndarray, np.ascontiguousarray
    _b2a, _name = binascii.b2a_base64, type.__dict__["__name__"].__get__
    _ints, _floats, _error = _NUMPY_INTEGERS, _NUMPY_FLOATS, AnswerError
    max_depth, max_items = MAX_DEPTH, MAX_ITEMS

    def canonical(value, _depth=0, _budget=None):
        """``value`` as plain JSON-ready data, with exact types.

        ``bool``, ``int``, ``float`` (NumPy scalars become these), ``str`` and ``None`` stay as
        they are; tuples become lists; a ``dict`` with ``str`` keys becomes
        ``{"__dict__": [[key, value], ...]}``; a NumPy array (exactly ``np.ndarray``, numeric or
        boolean) becomes ``{"__ndarray__": [dtype, shape, base64 bytes]}``. Anything else (a
        subclass included) raises :class:`AnswerError`.

        Example:
            >>> canonical((1, np.float32(0.5), "a"))
            [1, 0.5, 'a']
            >>> canonical(np.array([1, 2], dtype=np.int8))
            {'__ndarray__': ['|i1', [2], 'AQI=']}
            >>> class Always:
            ...     def __eq__(self, other): return True
            >>> canonical(Always())
            Traceback (most recent call last):
            ...
            minigrad.testing.AnswerError: an answer of type Always cannot be graded (expected a number, a string, a list, a dict or a NumPy array)
        """
        budget = [max_items] if _budget is None else _budget
        if _depth > max_depth:
            raise _error(f"an answer nested deeper than {max_depth} levels cannot be graded")
        kind = _type(value)
        budget[0] -= 1
        if budget[0] < 0:
            raise _error(f"an answer with more than {max_items} items cannot be graded")
        if value is None or kind is _bool or kind is _str:
            return value
        if kind is _int:
            return _int(value)
        if kind is _float:
            return _float(value)
        if kind is _bool_:
            return _bool(value)
        # NumPy's own scalar types, by identity: a subclass (whatever ``__module__`` it
        # claims) would have its own ``__int__``/``__float__`` run here
        for scalar in _ints:
            if kind is scalar:
                return _int(value)
        for scalar in _floats:
            if kind is scalar:
                return _float(value)
        if kind is _list or kind is _tuple:
            return [canonical(v, _depth + 1, budget) for v in value]
        if kind is _dict:
            items = []
            for k, v in value.items():
                if _type(k) is not _str:
                    raise _error(f"a dict answer needs str keys, not {_name(_type(k))}")
                items.append([k, canonical(v, _depth + 1, budget)])
            return {"__dict__": items}
        if kind is _ndarray:
            if value.dtype.kind not in "biuf":
                raise _error(f"an array of dtype {value.dtype.str} cannot be graded")
            budget[0] -= value.size
            if budget[0] < 0:
                raise _error(f"an answer with more than {max_items} items cannot be graded")
            data = _contiguous(value)
            return {"__ndarray__": [data.dtype.str, _list(data.shape),
                                    _b2a(data.tobytes(), newline=False).decode("ascii")]}
        raise _error(f"an answer of type {_name(kind)} cannot be graded (expected a number, "
                     "a string, a list, a dict or a NumPy array)")

    return canonical


canonical = _make_canonical()


def _array(data):
    dtype, shape, raw = data
    return np.frombuffer(base64.b64decode(raw), dtype=np.dtype(dtype)).reshape(shape)


def summary(value, width: int = 120) -> str:
    """A short text for a canonical value, for messages."""
    if type(value) is dict and "__ndarray__" in value:
        arr = _array(value["__ndarray__"])
        if arr.size <= 6:
            return f"array({arr.tolist()}, dtype={arr.dtype})"
        return f"an array of shape {arr.shape} and dtype {arr.dtype}"
    if type(value) is dict and "__dict__" in value:
        value = {k: _plain(v) for k, v in value["__dict__"]}
    text = repr(_plain(value))
    return text if len(text) <= width else text[:width - 3] + "..."


def _plain(value):
    if type(value) is list:
        return [_plain(v) for v in value]
    if type(value) is dict and "__ndarray__" in value:
        return _array(value["__ndarray__"]).tolist()
    if type(value) is dict and "__dict__" in value:
        return {k: _plain(v) for k, v in value["__dict__"]}
    return value


def compare(got, want, how: str = "equal", rtol: float = 0.0, atol: float = 0.0) -> str:
    """Why canonical ``got`` differs from canonical ``want`` ("" when it does not).

    ``how="equal"``: the same structure, types, dtypes, shapes and values (floats and arrays
    bit for bit, NaN equal to NaN). ``how="close"``: floats and float arrays within
    ``atol + rtol * |want|`` (shapes equal; integers and everything else still equal).

    Example:
        >>> compare(canonical([1, 2.0]), canonical([1, 2.0]))
        ''
        >>> compare(canonical(np.ones(3)), canonical(np.ones(2)))
        'shape (3,) instead of (2,)'
        >>> compare(canonical(1.0 + 1e-9), canonical(1.0), "close", rtol=1e-6)
        ''
        >>> compare(canonical(True), canonical(1))
        'bool instead of int'
    """
    if how not in COMPARES:
        raise ValueError(f"compare must be one of {COMPARES}, got {how!r}")
    tg, tw = type(got), type(want)
    if tw is dict and "__ndarray__" in want:
        if not (tg is dict and "__ndarray__" in got):
            return f"{_kind(got)} instead of an array"
        g, w = _array(got["__ndarray__"]), _array(want["__ndarray__"])
        if g.shape != w.shape:
            return f"shape {g.shape} instead of {w.shape}"
        if how == "close" and w.dtype.kind == "f":
            if g.dtype.kind not in "fiu":
                return f"dtype {g.dtype} instead of {w.dtype}"
            gf, wf = g.astype(np.float64), w.astype(np.float64)
            bad = ~(np.isclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True))
            if bad.any():
                i = tuple(int(j) for j in np.argwhere(bad)[0])
                return (f"{int(bad.sum())} of {bad.size} values differ by more than the tolerance "
                        f"(at index {i}: {gf[i].item()!r} instead of {wf[i].item()!r})")
            return ""
        if g.dtype != w.dtype:
            return f"dtype {g.dtype} instead of {w.dtype}"
        if g.tobytes() != w.tobytes() and not _equal_nan(g, w):
            bad = ~((g == w) | ((g != g) & (w != w))) if w.dtype.kind == "f" else g != w
            i = tuple(int(j) for j in np.argwhere(bad)[0]) if bad.any() else ()
            detail = f" (at index {i}: {g[i].item()!r} instead of {w[i].item()!r})" if i else ""
            return f"{int(bad.sum())} of {bad.size} values differ{detail}"
        return ""
    if tw is dict and "__dict__" in want:
        if not (tg is dict and "__dict__" in got):
            return f"{_kind(got)} instead of a dict"
        gk, wk = [k for k, _ in got["__dict__"]], [k for k, _ in want["__dict__"]]
        if sorted(gk) != sorted(wk):
            return f"keys {sorted(gk)} instead of {sorted(wk)}"
        g = dict(got["__dict__"])
        for k, v in want["__dict__"]:
            why = compare(g[k], v, how, rtol, atol)
            if why:
                return f"[{k!r}]: {why}"
        return ""
    if tw is list:
        if tg is not list:
            return f"{_kind(got)} instead of a list"
        if len(got) != len(want):
            return f"{len(got)} items instead of {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w, how, rtol, atol)
            if why:
                return f"item {i}: {why}"
        return ""
    if tg is not tw and not (tw is float and tg is int and how == "close"):
        return f"{_kind(got)} instead of {_kind(want)}"
    if tw is float:
        g, w = float(got), want
        if math.isnan(w):
            return "" if math.isnan(g) else f"{g!r} instead of nan"
        if how == "close":
            return "" if abs(g - w) <= atol + rtol * abs(w) else f"{g!r} instead of {w!r}"
        return "" if g == w else f"{g!r} instead of {w!r}"
    return "" if got == want else f"{summary(got)} instead of {summary(want)}"


def _equal_nan(g, w) -> bool:
    return w.dtype.kind == "f" and bool(np.all((g == w) | ((g != g) & (w != w))))


def _kind(value) -> str:
    if type(value) is dict and "__ndarray__" in value:
        return "an array"
    if type(value) is dict:
        return "a dict"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "a list",
            type(None): "None"}.get(type(value), type(value).__name__)


ANSWER_EVENT = "minigrad.testing.answer"


def assert_answer(key: str, actual, expected, _audit=sys.audit, *, compare: str = "equal",
                  rtol: float = 0.0, atol: float = 0.0, msg: str = "") -> None:
    """Check one answer: ``actual`` (what the code under test gave) against ``expected``.

    In a notebook this raises ``AssertionError`` (``msg``, then what differs) unless the two
    agree by ``compare`` (see :func:`compare`). Under :func:`recording` it records
    ``actual`` as data under ``key`` and returns: the grader compares the record with the
    reference solution's, whatever ``expected`` this process computed.

    Args:
        key: the answer's name, unique within a test (e.g. ``"grads[2]"``).
        actual: the answer; see :func:`canonical` for what can be graded.
        expected: what it should be, computed by the test; :data:`REFERENCE` where only
            the reference solution can say (the notebook then checks nothing).
        compare: ``"equal"`` (exact) or ``"close"`` (``rtol``/``atol`` on floats).
        msg: what the answer is, for the message (the inputs it was computed on).

    The course grader does not read this module's state: the first thing this function
    does is raise the audit event ``ANSWER_EVENT`` with its arguments, which the grader's
    runner (an audit hook installed before a notebook runs) records itself.

    Example:
        >>> assert_answer("peak", 3 * 4, 12, msg="peak of 3 activations of 4 bytes")
        >>> assert_answer("peak", 13, 12, msg="peak of 3 activations of 4 bytes")
        Traceback (most recent call last):
        ...
        AssertionError: peak of 3 activations of 4 bytes: 13 instead of 12
    """
    # First, before this function reads anything a notebook could have replaced: the answer
    # as it is, to whoever listens (the course grader's audit hook, which canonicalises it
    # itself; ``_audit`` is bound when this module loads).
    _audit(ANSWER_EVENT, key, actual, expected, compare, rtol, atol, msg)
    if compare not in COMPARES:
        raise ValueError(f"compare must be one of {COMPARES}, got {compare!r}")
    entry = {"key": str(key), "compare": compare, "rtol": float(rtol), "atol": float(atol),
             "msg": str(msg)}
    try:
        got = canonical(actual)
    except AnswerError as e:
        got, entry["error"] = None, str(e)
    recorder = _recorder[0]
    if recorder is not None:
        entry["value"] = got
        if expected is REFERENCE:
            entry["ok"] = "error" not in entry
            recorder.append(entry)
            return
        try:
            want = canonical(expected)
            entry["ok"] = "error" not in entry and not _compare(got, want, compare, rtol, atol)
        except AnswerError:
            entry["ok"] = False
        recorder.append(entry)
        return
    if "error" in entry:
        raise AssertionError(f"{msg}: {entry['error']}" if msg else entry["error"])
    if expected is REFERENCE:
        return
    why = _compare(got, canonical(expected), compare, rtol, atol)
    if why:
        raise AssertionError(f"{msg}: {why}" if msg else why)


_compare = compare


class recording:
    """Within this block, :func:`assert_answer` records answers into ``self.answers``
    instead of asserting (the course grader's mode).

    Example:
        >>> with recording() as r:
        ...     assert_answer("n", 2, 3)
        >>> [(a["key"], a["value"], a["ok"]) for a in r.answers]
        [('n', 2, False)]
    """

    def __init__(self):
        self.answers = []

    def __enter__(self):
        self._saved, _recorder[0] = _recorder[0], self.answers
        return self

    def __exit__(self, *exc):
        _recorder[0] = self._saved
        return False


def judge(got: list, want: list) -> str:
    """Why a test's recorded answers ``got`` fail against the reference's ``want`` ("" if
    they pass). Everything that decides comes from ``want``: the keys and their order, the
    comparison and its tolerances, the message; ``got`` contributes only values.

    Example:
        >>> with recording() as ref:
        ...     assert_answer("peak", 12, 12, msg="3 activations of 4 bytes")
        >>> with recording() as student:
        ...     assert_answer("peak", 13, 13, msg="(anything)")
        >>> judge(student.answers, ref.answers)
        '3 activations of 4 bytes: 13 instead of 12'
    """
    by_key = {}
    for entry in got:
        if type(entry) is dict and type(entry.get("key")) is str:
            by_key.setdefault(entry["key"], entry)
    for w in want:
        msg = w["msg"]
        g = by_key.get(w["key"])
        if g is None:
            return f"{msg}: no answer was given" if msg else f"no answer for {w['key']}"
        if g.get("error"):
            return f"{msg}: {g['error']}" if msg else str(g["error"])
        why = compare(g.get("value"), w["value"], w["compare"], w["rtol"], w["atol"])
        if why:
            return f"{msg}: {why}" if msg else why
    extra = [k for k in by_key if k not in {w["key"] for w in want}]
    if extra:
        return f"answers the reference does not give: {', '.join(sorted(extra)[:5])}"
    return ""
