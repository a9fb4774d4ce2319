"""What JAX keeps for the backward pass, and what it computes ("The same idea in JAX").

JAX has no saved-tensor hooks: a gradient is a program transformation, and the arrays
the forward pass hands to the backward pass (JAX calls them *residuals*) are known
before anything runs. Two public tools show them, and this module turns their output
into numbers that can be compared with torch's and minigrad's:

``saved_residuals(f, *args)``
    Runs ``jax.ad_checkpoint.print_saved_residuals(f, *args)``, which prints one line
    per residual (``f32[8,4096] output of max from <file>:<line> (block)``), and parses
    it into `Residual` records: shape, dtype, bytes, and what the array is, without the
    source location (which names a temporary file in a notebook).
``activation_residuals(residuals, params="params")`` / ``totals(residuals)``
    The residuals that are activations (not the parameters passed as the argument
    named ``params``), and their count and bytes.
``dot_flops(jaxpr)``
    FLOPs of every matrix product (``dot_general``, 2 FLOPs per multiply-add) in a
    jaxpr, nested ones included; ``jax.make_jaxpr(jax.grad(f))(...)`` gives the
    gradient's program, recomputation included.
"""
from __future__ import annotations

import contextlib
import io
import math
import re
from dataclasses import dataclass

__all__ = ["Residual", "saved_residuals", "activation_residuals", "totals", "dot_flops"]

# print_saved_residuals writes dtypes in their short form: f32, bf16, i32, u8, bool, ...
_LINE = re.compile(r"^(?P<dtype>bool|[a-z]+\d+)\[(?P<shape>[\d,]*)\] (?P<what>.*)$")
_KIND_BITS = re.compile(r"^([a-z]+)(\d+)$")


@dataclass(frozen=True)
class Residual:
    """One array the forward pass keeps for the backward pass.

    shape, dtype (short form: ``"f32"``), nbytes (exact), and ``what``: JAX's
    description without the source location, e.g. ``"output of max"``,
    ``"from the argument x"``, ``"named 'pre'"``.
    """

    shape: tuple[int, ...]
    dtype: str
    nbytes: int
    what: str


def _itemsize(dtype: str) -> int:
    if dtype == "bool":
        return 1
    m = _KIND_BITS.match(dtype)
    if not m or int(m.group(2)) % 8:
        raise ValueError(f"unknown dtype {dtype!r} in print_saved_residuals' output")
    return int(m.group(2)) // 8


def _parse(line: str) -> Residual:
    m = _LINE.match(line.strip())
    if m is None:
        raise ValueError(f"cannot parse print_saved_residuals line: {line!r}")
    shape = tuple(int(s) for s in m.group("shape").split(",") if s)
    what = re.sub(r" from (?!the argument).*$", "", m.group("what"))  # drop "from <file>:..."
    dtype = m.group("dtype")
    return Residual(shape, dtype, math.prod(shape) * _itemsize(dtype), what)


def saved_residuals(f, *args, **kwargs) -> list[Residual]:
    """The residuals of ``f(*args, **kwargs)``'s gradient, parsed from JAX's printout.

    Args:
        f: a function of JAX arrays (pytrees allowed) returning a scalar or arrays.
        *args, **kwargs: example arguments (only shapes and dtypes matter).

    Returns:
        One `Residual` per line of ``jax.ad_checkpoint.print_saved_residuals``, in its
        order (arguments first).
    """
    from jax.ad_checkpoint import print_saved_residuals

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(f, *args, **kwargs)
    return [_parse(line) for line in out.getvalue().splitlines() if line.strip()]


def activation_residuals(residuals: list[Residual], params: str = "params") -> list[Residual]:
    """Residuals that are not the parameters: drops ``from the argument <params>...``.

    The parameters live anyway (torch's and minigrad's meters leave them out too); the
    input and everything computed in the forward pass stay.
    """
    return [r for r in residuals if not re.fullmatch(rf"from the argument {re.escape(params)}\b.*", r.what)]


def totals(residuals: list[Residual]) -> tuple[int, int]:
    """``(number of arrays, bytes)`` of ``residuals``."""
    return len(residuals), sum(r.nbytes for r in residuals)


def dot_flops(jaxpr) -> int:
    """FLOPs of the matrix products in ``jaxpr`` (a Jaxpr or ClosedJaxpr), recursively.

    Each ``dot_general`` costs ``2 * prod(output shape) * prod(contracted sizes)``;
    sub-programs (``jax.checkpoint``'s ``remat``, ``pjit``, control flow) are entered,
    each counted once per appearance. Elementwise operations are not counted.
    """
    from jax.extend import core

    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval
            k = math.prod(lhs.shape[i] for i in lhs_contract)
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * k
        for sub in _sub_jaxprs(eqn.params, core):
            total += dot_flops(sub)
    return total


def _sub_jaxprs(params: dict, core):
    """The programs nested in an equation's parameters (a remat's body, a pjit's callee,
    the branches of a cond): the values that are Jaxprs, alone or in tuples and lists."""
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, core.Jaxpr):
                yield item
