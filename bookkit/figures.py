"""The book's figure style: readable labels, drawn at twice the resolution.

Applied when bookkit is imported inside Jupyter or Colab (the setup cell of every
chapter), so a figure reads the same in the HTML book, in Jupyter and in Colab:
fonts of 11 pt or more, 7 inches wide at most, stored as PNG at 2x (IPython's
"retina" format, 200 dpi). Scripts and tests that import bookkit are left alone.
"""
from __future__ import annotations

BOOK_RC = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 11,
    "ytick.labelsize": 11,
    "legend.fontsize": 11,
    "figure.titlesize": 12,
    "figure.figsize": (7.0, 4.0),
    "figure.dpi": 100,
}
"""matplotlib settings every chapter draws with (checked by tests/test_figures_style.py)."""

FIGURE_FORMAT = "retina"
"""IPython's inline format: PNG at twice ``figure.dpi``, shown at its nominal size."""


def use_book_style(shell=None) -> bool:
    """Apply `BOOK_RC` and the 2x inline format when running under IPython.

    Args:
        shell: the IPython shell; by default the running one, if any.

    Returns:
        True when the style was applied (an IPython shell is running), else False.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    import matplotlib as mpl
    from IPython.core.pylabtools import select_figure_formats

    mpl.rcParams.update(BOOK_RC)
    try:  # the inline backend re-selects its own formats when pyplot activates it
        from matplotlib_inline.config import InlineBackend

        InlineBackend.instance(parent=shell).figure_formats = {FIGURE_FORMAT}
    except ImportError:  # an IPython without the inline backend: formats below only
        pass
    select_figure_formats(shell, {FIGURE_FORMAT}, bbox_inches="tight")
    return True
