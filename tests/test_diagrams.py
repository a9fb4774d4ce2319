"""bookkit.diagrams: every label fits inside its box at the book's font size."""
import matplotlib

matplotlib.use("agg")
import matplotlib as mpl  # noqa: E402
import pytest  # noqa: E402

from bookkit import diagrams  # noqa: E402
from bookkit.figures import BOOK_RC  # noqa: E402


@pytest.mark.parametrize("name", diagrams.__all__)
def test_labels_fit_their_boxes(name):
    with mpl.rc_context(BOOK_RC):
        fig = getattr(diagrams, name)()
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        boxes = [p.get_window_extent(renderer) for p in ax.patches]
        assert boxes, "a diagram draws boxes"
        inside = 0
        for text in ax.texts:
            t = text.get_window_extent(renderer)
            holder = [b for b in boxes if b.contains(t.x0 + t.width / 2, t.y0 + t.height / 2)]
            if holder:
                b = holder[0]
                assert b.x0 <= t.x0 and t.x1 <= b.x1, f"{text.get_text()!r} overflows its box"
                inside += 1
        assert inside >= len(boxes)  # every box holds its text
        fig_box = fig.bbox
        assert all(fig_box.x0 <= b.x0 and b.x1 <= fig_box.x1 for b in boxes)
