"""Small helpers shared by the book's notebooks (not part of minigrad proper).

Everything here works in a fresh Colab runtime as well as in the repository:
optional dependencies (myst-nb, torch) are imported lazily and have fallbacks.
"""
from __future__ import annotations

__all__ = ["glue", "device", "fmt_bytes", "REPOSITORY_URL"]

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


def device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"`` (also when torch is absent)."""
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def fmt_bytes(n_bytes: float, digits: int = 1) -> str:
    """Human-readable binary size: 1536 -> '1.5 KiB'. Units are powers of 1024."""
    if n_bytes < 0:
        return "-" + fmt_bytes(-n_bytes, digits)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n_bytes < 1024 or unit == "GiB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.{digits}f} {unit}"
        n_bytes /= 1024
    raise AssertionError("unreachable")
