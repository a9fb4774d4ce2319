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
    for plugin in ("nbval_figures.py", "nbval_stderr.py"):  # the root conftest loads both
        shutil.copy(ROOT / "tests" / plugin, tmp_path / "tests" / plugin)

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


# --- Figures a reader can read --------------------------------------------------------

def test_a_chapter_kernel_stores_figures_at_2x(tmp_path, monkeypatch):
    """In a real kernel, in a chapter's order (the setup cell imports bookkit, a later
    cell imports pyplot, which loads the inline backend), figures are stored at 2x with
    11 pt fonts: the backend must not reset bookkit.figures' retina format."""
    for key, value in figure_environment(str(tmp_path)).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import bookkit"),
        nbformat.v4.new_code_cell(
            "import matplotlib as mpl\nimport matplotlib.pyplot as plt\n"
            "print(mpl.rcParams['font.size'])\n" + PLOT.format(ys=[1, 3, 2]))])
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[1].outputs
    assert outputs[0]["text"].strip() == "11.0"
    image = next(o for o in outputs if "image/png" in o.get("data", {}))
    pixels = decode_png(image["data"]["image/png"])
    shown = image["metadata"]["image/png"]["width"]
    assert abs(pixels.shape[1] - 2 * shown) <= 1
    # ... and record their smallest text, which the browser test reads
    from PIL import Image

    from bookkit.figures import SMALLEST_TEXT_KEY

    png = Image.open(io.BytesIO(base64.b64decode(image["data"]["image/png"])))
    assert png.text[SMALLEST_TEXT_KEY] == "11"


def stored_figures(path) -> list[tuple[int, dict, dict]]:
    """(cell index, output, cell metadata) of every stored figure of a notebook."""
    nb = nbformat.read(path, as_version=4)
    return [(i, out, cell.metadata) for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code" for out in cell.get("outputs", [])
            if {"image/png", "image/svg+xml"} & set(out.get("data", {}))]


MAX_SHOWN_PX = 635
"""6.35 inches at 100 dpi: the widest figure whose 11 pt labels still show at 9 CSS px
when a 390 px window shows it 374 px wide. Figures are drawn `FIGURE_WIDTH_IN` (6 in)
wide; the tight bounding box adds up to 0.2 in (its padding, a label past the axes)."""


def figure_problems(index: int, output: dict, metadata: dict) -> list[str]:
    """Why a stored figure falls short of CONTRIBUTING.md's rules, if it does."""
    problems = []
    data = output["data"]
    if "image/svg+xml" not in data:
        shown = output.get("metadata", {}).get("image/png", {}).get("width")
        stored = decode_png(data["image/png"]).shape[1]
        if not shown or stored < 2 * shown - 1:
            problems.append(f"cell {index}: PNG of {stored} px not stored at 2x (import "
                            f"bookkit before pyplot: bookkit.figures sets the retina format)")
        elif shown > MAX_SHOWN_PX:
            problems.append(f"cell {index}: {shown} px wide (at most {MAX_SHOWN_PX} px: "
                            "draw with bookkit.figures.subplots, 6 in wide)")
    mystnb = metadata.get("mystnb", {})
    if not mystnb.get("figure", {}).get("caption") or not mystnb.get("figure", {}).get("name"):
        problems.append(f"cell {index}: no mystnb.figure caption and name (numbered figure)")
    if not mystnb.get("image", {}).get("alt"):
        problems.append(f"cell {index}: no mystnb.image alt text")
    return problems


def test_figure_problems_accepts_a_described_2x_figure():
    fig, ax = plt.subplots(figsize=(3, 2), dpi=200)
    ax.plot([1, 2])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    png = base64.b64encode(buffer.getvalue()).decode()
    good = {"data": {"image/png": png}, "metadata": {"image/png": {"width": 300}}}
    meta = {"mystnb": {"figure": {"caption": "A line.", "name": "fig-x"},
                       "image": {"alt": "A rising line."}}}
    assert figure_problems(0, good, meta) == []
    assert figure_problems(0, dict(good, metadata={}), meta)           # 1x
    assert len(figure_problems(0, good, {})) == 2                       # no caption, no alt


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")),
                         ids=lambda p: p.name)
def test_every_figure_is_2x_numbered_and_described(path):
    problems = [p for args in stored_figures(path) for p in figure_problems(*args)]
    assert not problems, f"{path.name}: " + "; ".join(problems)
