"""Small helpers shared by the book's notebooks (not part of minigrad proper).

Everything here works in a fresh Colab runtime as well as in the repository:
optional dependencies (myst-nb, torch) are imported lazily and have fallbacks.
"""
from __future__ import annotations

__all__ = ["glue", "rounded", "bound", "require", "device", "fmt_bytes", "show_table",
           "REPOSITORY_URL"]

from bookkit.versions import require  # the setup cells' version check (see versions.py)
from bookkit.quiet import quiet_import_logs as _quiet_import_logs
from bookkit.tables import show_table  # tables as HTML on the page (see tables.py)
from minigrad.memory import fmt_bytes  # the one byte formatter (bookkit.fmt_bytes)

_quiet_import_logs()  # before any notebook imports transformers (see quiet.py)

from bookkit.figures import use_book_style as _use_book_style

_use_book_style()  # inside Jupyter/Colab: 11 pt fonts, figures at 2x (see figures.py)

# The one place a notebook learns where the book lives (kept equal to
# `repository.url` in _config.yml by tests/test_config.py).
REPOSITORY_URL = "https://github.com/minigrad-book/gradient-checkpointing"


def glue(name: str, value, display: bool = False) -> None:
    """Store `value` under `name` for the book's prose (myst-nb's ``glue``).

    NumPy scalars are converted to Python numbers so that format specs such as
    ``{glue:text}`name:.1f``` work. Returns None, so that a glue call ending a cell
    adds no output of its own. Outside a Jupyter Book build (Colab, plain Jupyter)
    myst-nb may be missing; then nothing is stored (the value is shown when
    ``display`` is true).
    """
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()  # np.float64 -> float: format specs need a Python number
    try:
        from myst_nb import glue as _glue
    except ImportError:  # Colab: no book build, nothing to glue into
        if display:
            from IPython.display import display as _show
            _show(value)
        return None
    _glue(name, value, display=display)
    return None


def rounded(value, spec: str = ".4g", *, rel_err: float = 1e-5, abs_err: float = 0.0) -> str:
    """``format(value, spec)``, checked to read the same on every CPU.

    A float computed in float32, or through BLAS, threads or SIMD maths, carries a
    rounding error that differs from CPU to CPU (see CONTRIBUTING.md, "Numbers and
    outputs"). Print and glue it at a precision that error cannot change: this
    returns the formatted string after checking that every value within
    ``max(abs_err, rel_err * |value|)`` of ``value`` formats the same, and raises
    ``ValueError`` (print fewer digits) when ``value`` lies that close to a rounding
    boundary of ``spec``.

    Args:
        value: a Python, NumPy or 0-d torch number.
        spec: a format spec, e.g. ``".4g"`` (4 significant digits), ``".2f"``, ``".1e"``.
        rel_err, abs_err: how far another CPU's result may lie from this one.

    Returns:
        The formatted string, e.g. ``"0.05986"``; glue this string, not ``value``.

    Example:
        >>> rounded(0.059860832989, ".4g")
        '0.05986'
    """
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"rounded: expected a real number, got {type(value).__name__}")
    value = float(value) + 0.0  # + 0.0: -0.0 would print as "-0"
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"rounded: {value} has no digits to show")
    if rel_err < 0 or abs_err < 0:
        raise ValueError(f"rounded: errors must be >= 0, got rel_err={rel_err}, abs_err={abs_err}")
    err = max(abs_err, rel_err * abs(value))
    shown, low, high = (_format_no_minus_zero(v, spec) for v in (value, value - err, value + err))
    if low != shown or high != shown:
        raise ValueError(
            f"rounded: {value!r} is within {err:.1e} of a rounding boundary of {spec!r} "
            f"({low} .. {high}): another CPU may print other digits; show fewer digits")
    return shown


def _format_no_minus_zero(value: float, spec: str) -> str:
    """``format`` without the sign of a value that rounds to zero ("-0.00" -> "0.00")."""
    text = format(value, spec)
    if text.startswith("-") and not any(d in "123456789" for d in text.partition("e")[0]):
        text = text[1:]
    return text


def bound(value, limit: float) -> str:
    """The text of ``limit`` ("1e-6"), after asserting ``|value| < limit``.

    A rounding gap (the largest difference between two float computations that
    agree in exact arithmetic) has digits that change from CPU to CPU: show it as a
    bound, ``f"< {bound(gap, 1e-6)}"``, and glue the bound, never the gap.

    Example:
        >>> bound(8.2e-07, 1e-6)
        '1e-6'
    """
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if not limit > 0:
        raise ValueError(f"bound: the limit must be positive, got {limit!r}")
    if not abs(value) < limit:
        raise AssertionError(f"bound: |{value!r}| is not below {limit!r}")
    mantissa, _, exponent = f"{limit:g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"`` (also when torch is absent)."""
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


