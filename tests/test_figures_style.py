"""bookkit.figures: the style applied inside IPython, nothing outside it."""
import base64
import struct

import matplotlib as mpl

import pytest

from bookkit.figures import (BOOK_RC, FIGURE_WIDTH_IN, SMALLEST_TEXT_KEY, add_legend,
                             bars, plot, smallest_text_pt, subplots, use_book_style,
                             xy_plot)


def test_outside_ipython_nothing_changes():
    before = dict(mpl.rcParams)
    assert use_book_style() is False
    assert dict(mpl.rcParams) == before


def test_style_meets_the_books_rules():
    assert all(BOOK_RC[k] >= 11 for k in BOOK_RC if k.endswith("size") and k != "figure.figsize")
    assert BOOK_RC["figure.figsize"][0] == FIGURE_WIDTH_IN


def test_book_width_keeps_11pt_labels_at_9px_in_a_phone_column():
    # In a 390 px window a chapter figure is shown 374 px wide (measured in Chromium);
    # a label of s pt in a figure w inches wide, saved with bbox_inches="tight" (up to
    # 0.1 in of padding each side), shows at s * 100/72 * 374 / (100 (w + 0.2)) CSS px.
    def px(width_in):
        return 11 * 100 / 72 * 374 / (100 * (width_in + 0.2))

    assert px(FIGURE_WIDTH_IN) >= 9
    assert px(7.0) < 9  # the old 7 inches did not


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
        ax.set_xlabel("x", fontsize=9.5)
        formatter = shell.display_formatter.formatters["image/png"]
        formatter.enabled = True  # the test shell formats text only by default
        png = formatter(fig)
        plt.close(fig)
        assert mpl.rcParams["font.size"] == 11
    raw, meta = png  # retina: the PNG, and the size to show it at
    raw = raw if isinstance(raw, bytes) else base64.b64decode(raw)
    width = struct.unpack(">I", raw[16:20])[0]
    assert abs(width - 2 * meta["width"]) <= 1  # halved, rounded down
    from PIL import Image
    import io

    # the smallest text drawn is recorded in the PNG, for the browser test to read
    assert Image.open(io.BytesIO(raw)).text[SMALLEST_TEXT_KEY] == "9.5"


def test_smallest_text_counts_what_is_drawn():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.set_title("title", fontsize=14)
    ax.tick_params(labelsize=12)
    assert smallest_text_pt(fig) == 12
    ax.annotate("note", (0.5, 0.5), fontsize="x-small")  # 0.694 x font.size
    assert smallest_text_pt(fig) == pytest.approx(0.694 * mpl.rcParams["font.size"], abs=0.01)
    ax.texts[0].set_visible(False)
    ax.plot([0, 1], label="a line")
    ax.legend(fontsize=7)
    assert smallest_text_pt(fig) == 7
    ax.get_legend().remove()
    ax.axis("off")  # hidden ticks are not drawn
    assert smallest_text_pt(fig) == 14
    plt.close(fig)
    fig = plt.figure()
    assert smallest_text_pt(fig) is None
    plt.close(fig)


def test_subplots_draws_at_the_books_width_only():
    import matplotlib.pyplot as plt

    fig, axes = subplots(2, 1, height=5, sharex=True)
    assert fig.get_size_inches().tolist() == [FIGURE_WIDTH_IN, 5.0] and len(axes) == 2
    plt.close(fig)
    with pytest.raises(ValueError, match="height="):
        subplots(figsize=(7, 4))
    with pytest.raises(ValueError, match="positive"):
        subplots(height=0)


def test_plot_labels_scales_and_styles_each_curve():
    import matplotlib.pyplot as plt

    ax = plot([1, 2, 4], {"a": [1, 2, 3], "b": [3, 2, 1]}, xlabel="n", ylabel="bytes",
              title="t", xscale="log", ylim=(0, 4), styles={"b": {"ls": "--"}})
    assert [line.get_label() for line in ax.get_lines()] == ["a", "b"]
    assert ax.get_lines()[1].get_linestyle() == "--"
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("n", "bytes", "t")
    assert ax.get_xscale() == "log" and ax.get_ylim() == (0, 4)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]
    assert ax.figure.get_size_inches()[0] == FIGURE_WIDTH_IN
    plt.close(ax.figure)
    ax = plot([0, 1], [2, 3], legend="best")  # one unnamed curve: no legend
    assert ax.get_legend() is None
    with pytest.raises(ValueError, match="2 values for 3"):
        plot([1, 2, 3], {"a": [1, 2]})
    ax = plot([1, 2], {"a": [1, 2], "b": [2, 1]}, styles=["o-", {"ls": ":"}])
    assert [ln.get_marker() for ln in ax.get_lines()] == ["o", "None"]
    assert ax.get_lines()[1].get_linestyle() == ":"
    with pytest.raises(ValueError, match="1 styles for 2 curves"):
        plot([1, 2], {"a": [1, 2], "b": [2, 1]}, styles=["o-"])
    with pytest.raises(ValueError, match="not plotted"):
        plot([1, 2], {"a": [1, 2]}, styles={"c": {}})
    plt.close("all")


def test_xy_plot_draws_each_series_on_its_own_x_values():
    import matplotlib.pyplot as plt

    ax = xy_plot({"rotor": [(5, 0), (3, 7, 4096)], "plain": [(6, 0)]},
                 xlabel="bytes", ylabel="FLOPs", styles={"plain": {"marker": "s"}})
    rotor, plain = ax.get_lines()
    assert list(rotor.get_xdata()) == [5, 3] and list(rotor.get_ydata()) == [0, 7]
    assert (rotor.get_marker(), rotor.get_linestyle()) == ("o", "-")
    assert (plain.get_marker(), plain.get_linestyle()) == ("s", "None")
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("bytes", "FLOPs")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["rotor", "plain"]
    assert ax.figure.get_size_inches()[0] == FIGURE_WIDTH_IN
    with pytest.raises(ValueError, match="not plotted"):
        xy_plot({"a": [(0, 1)]}, styles={"b": {}})
    with pytest.raises(ValueError, match="no points"):
        xy_plot({"a": []})
    plt.close("all")


def test_bars_stack_each_part_on_the_last():
    import matplotlib.pyplot as plt

    ax = bars(["a", "b"], {"x": [1, 2], "y": [3, 1]}, colors={"y": "red"}, totals="{:g}")
    rects = ax.patches
    assert [(r.get_y(), r.get_height()) for r in rects] == [(0, 1), (0, 2), (1, 3), (2, 1)]
    assert rects[2].get_facecolor()[:3] == (1.0, 0.0, 0.0)
    assert [t.get_text() for t in ax.texts] == ["4", "3"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    plt.close(ax.figure)
    ax = bars(["top", "bottom"], {"x": [1, 2]}, horizontal=True, legend=None)
    assert [r.get_width() for r in ax.patches] == [1, 2] and ax.yaxis_inverted()
    assert ax.get_legend() is None
    plt.close(ax.figure)
    ax = bars(["a", "b"], {"x": [1, 2], "y": [3, 1]}, stacked=False)
    assert [(round(r.get_x(), 2), r.get_y(), r.get_height()) for r in ax.patches] == [
        (-0.4, 0, 1), (0.6, 0, 2), (0.0, 0, 3), (1.0, 0, 1)]  # side by side, from 0
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="1 values for 2 bars"):
        bars(["a", "b"], {"x": [1]})
    with pytest.raises(ValueError, match="not drawn"):
        bars(["a"], {"x": [1]}, colors={"z": "k"})
    plt.close("all")


# --- The stored figures of every chapter ------------------------------------------

PHONE_FIGURE_PX = 374
"""Width a chapter figure is shown at in a 390 px window (measured in Chromium; the
browser test checks the rendered size itself on the built book)."""


def stored_label_px(png: bytes) -> tuple[float | None, float | None]:
    """(smallest text in pt recorded in a stored PNG, its CSS px at `PHONE_FIGURE_PX`)."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png))
    pt = image.text.get(SMALLEST_TEXT_KEY)
    if pt is None:
        return None, None
    return float(pt), float(pt) * 100 / 72 * PHONE_FIGURE_PX / (image.size[0] / 2)


def test_stored_label_px_reads_the_mark():
    import io

    import matplotlib.pyplot as plt

    def stored(width_in, mark=True):
        fig, ax = plt.subplots(figsize=(width_in, 3))
        ax.set_xlabel("x", fontsize=11)
        ax.tick_params(labelsize=11)
        metadata = {SMALLEST_TEXT_KEY: f"{smallest_text_pt(fig):g}"} if mark else {}
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=200, metadata=metadata)
        plt.close(fig)
        return stored_label_px(buf.getvalue())

    assert stored(6.0) == (11.0, pytest.approx(11 * 100 / 72 * 374 / 600))  # 9.5 px
    assert stored(7.0)[1] < 9
    assert stored(6.0, mark=False) == (None, None)


def chapter_figures():
    import base64
    import json

    from bookpaths import NOTEBOOKS

    for path in sorted(NOTEBOOKS.glob("ch*.ipynb")):
        nb = json.loads(path.read_text())
        for i, cell in enumerate(nb["cells"]):
            for out in cell.get("outputs", []):
                data = out.get("data", {}).get("image/png")
                if data:
                    yield f"{path.stem} cell {i}", base64.b64decode(data)


def test_every_stored_chapter_figure_keeps_9px_labels_on_a_phone():
    figs = list(chapter_figures())
    assert len(figs) >= 30
    problems = []
    for where, png in figs:
        pt, px = stored_label_px(png)
        if pt is None:
            problems.append(f"{where}: no smallest-text mark (re-execute the notebook)")
        elif px < 9:
            problems.append(f"{where}: {pt:g} pt text shows at {px:.1f} px at 390 px")
    assert not problems, "\n".join(problems)


def test_legend_below_sits_under_the_x_label_and_hides_no_data():
    import matplotlib.pyplot as plt

    ax = plot([1, 2, 3], {"a": [1, 2, 3], "b": [3, 2, 1]}, xlabel="a long x label",
              legend="below")
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = ax.get_legend().get_window_extent(renderer)
    xlabel = ax.xaxis.label.get_window_extent(renderer)
    assert box.y1 <= xlabel.y0 + 1  # under the x label, not over the data
    assert ax.get_legend().get_frame_on() is False
    plt.close(fig)
    fig, ax = subplots()
    ax.plot([0, 1], label="line")
    assert add_legend(ax, "upper left") is ax.get_legend()
    assert add_legend(ax, "below", ncols=1)._ncols == 1
    plt.close("all")
