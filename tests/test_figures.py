"""Stored figures are checked: tests/nbval_figures.py compares every stored PNG of a
checked cell with the one the current code draws (nbval alone skips image/png)."""
from __future__ import annotations

import base64
import io
import shutil
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from bookpaths import ROOT  # noqa: E402
from nbval_figures import TOLERANCE, decode_png, figure_environment, png_difference  # noqa: E402


def draw(ys, title="loss", color="tab:blue") -> str:
    fig, ax = plt.subplots(figsize=(3, 2), dpi=100)
    ax.plot(ys, color=color)
    ax.set_title(title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def test_the_same_drawing_is_the_same_figure():
    assert png_difference(draw([1, 2, 3]), draw([1, 2, 3])) is None


def test_last_bit_differences_in_the_data_draw_the_same_pixels():
    ys = np.array([0.3, 0.1, 0.7], dtype=np.float32)
    assert png_difference(draw(ys), draw(ys + np.float32(1e-7))) is None


def test_faint_antialiasing_noise_is_tolerated():
    pixels = decode_png(draw([1, 2, 3])).copy()
    pixels[10, 10, :3] = np.clip(pixels[10, 10, :3].astype(int) - TOLERANCE, 0, 255)
    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    assert png_difference(draw([1, 2, 3]), base64.b64encode(buffer.getvalue()).decode()) is None


@pytest.mark.parametrize("changed", [
    dict(ys=[1, 2, 4]), dict(ys=[1, 2, 3], title="loss (MSE)"), dict(ys=[1, 2, 3], color="tab:red"),
])
def test_a_changed_figure_is_caught(changed):
    problem = png_difference(draw([1, 2, 3]), draw(**changed))
    assert problem is not None and "pixels differ" in problem


def test_a_resized_figure_is_caught():
    fig, ax = plt.subplots(figsize=(3.1, 2), dpi=100)
    ax.plot([1, 2, 3])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    assert "size" in png_difference(draw([1, 2, 3]), base64.b64encode(buffer.getvalue()).decode())


PLOT = "import matplotlib.pyplot as plt\nplt.plot({ys})\nplt.title('a figure')\nplt.show()"


@pytest.mark.book
def test_nbval_fails_on_a_stale_figure(tmp_path, monkeypatch):
    """A notebook whose stored figure was drawn by other code fails strict nbval; the
    same notebook re-executed passes, under the simulated CPU too."""
    with monkeypatch.context() as m:
        for key, value in figure_environment(str(tmp_path)).items():
            m.setenv(key, value)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PLOT.format(ys=[1, 3, 2]))])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    fresh = tmp_path / "fresh.ipynb"
    nbformat.write(nb, fresh)
    nb.cells[0].source = PLOT.format(ys=[1, 3, 3])       # the code changed, the output did not
    stale = tmp_path / "stale.ipynb"
    nbformat.write(nb, stale)
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "nbval_figures.py", tmp_path / "tests" / "nbval_figures.py")

    def nbval(path, simulated=False):
        command = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-q",
                   "-p", "no:cacheprovider", "-p", "no:xdist", str(path)]
        if simulated:
            command = [sys.executable, str(ROOT / "scripts" / "simulated_cpu.py"), *command]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    result = nbval(stale)
    assert result.returncode == 1, result.stdout[-2000:]
    assert "stored figure differs from what the code draws now" in result.stdout
    for simulated in (False, True):
        result = nbval(fresh, simulated)
        assert result.returncode == 0, result.stdout[-2000:]
