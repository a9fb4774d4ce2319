"""bookkit.figures: the style applied inside IPython, nothing outside it."""
import base64
import struct

import matplotlib as mpl

from bookkit.figures import BOOK_RC, use_book_style


def test_outside_ipython_nothing_changes():
    before = dict(mpl.rcParams)
    assert use_book_style() is False
    assert dict(mpl.rcParams) == before


def test_style_meets_the_books_rules():
    assert all(BOOK_RC[k] >= 11 for k in BOOK_RC if k.endswith("size") and k != "figure.figsize")
    assert BOOK_RC["figure.figsize"][0] <= 7


def test_inside_ipython_png_is_drawn_at_2x():
    from IPython.testing.globalipapp import start_ipython
    import matplotlib.pyplot as plt

    shell = start_ipython()
    with mpl.rc_context():
        assert use_book_style(shell) is True
        from matplotlib_inline.config import InlineBackend
        # what the inline backend re-applies when pyplot activates it
        assert InlineBackend.instance().figure_formats == {"retina"}
        fig, ax = plt.subplots(figsize=(4, 2))
        ax.plot([0, 1], [0, 1])
        formatter = shell.display_formatter.formatters["image/png"]
        formatter.enabled = True  # the test shell formats text only by default
        png = formatter(fig)
        plt.close(fig)
        assert mpl.rcParams["font.size"] == 11
    raw, meta = png  # retina: the PNG, and the size to show it at
    raw = raw if isinstance(raw, bytes) else base64.b64decode(raw)
    width = struct.unpack(">I", raw[16:20])[0]
    assert abs(width - 2 * meta["width"]) <= 1  # halved, rounded down
