"""nbval, strict on figures too: a stored PNG must be what the current code draws.

nbval skips ``image/png`` outputs, so a figure that no longer matches its code (a
changed label, colour or data) would pass unnoticed. This plugin (loaded by the root
conftest.py) compares every stored PNG of a checked cell with the one the fresh run
draws, as decoded pixels: same size, and no pixel differing by more than
``TOLERANCE`` levels in any channel. Figures are drawn under fixed settings (the
inline backend, matplotlib's defaults, its bundled fonts: ``figure_environment``),
the same ones ``scripts/execute_notebooks.py`` stores outputs with, so on any CPU the
same code draws the same pixels (measured: every checked figure of the book is
byte-identical natively and under scripts/simulated_cpu.py). The tolerance only
absorbs anti-aliasing levels that a last-bit difference in the plotted data could
flip; a moved line, a changed glyph or colour differs by far more.

Like every output, a figure in a cell marked ``# NBVAL_IGNORE_OUTPUT`` (a timing
plot) is not compared.
"""
from __future__ import annotations

import base64
import io
import os
import shutil
import tempfile

import numpy as np

TOLERANCE = 32
"""Largest per-channel difference (0-255) a pixel may show between stored and fresh."""


def figure_environment(config_dir: str) -> dict[str, str]:
    """Environment under which notebook kernels draw their figures: the inline backend,
    an empty matplotlib configuration folder (no user matplotlibrc, a fresh font cache)."""
    return {"MPLBACKEND": "module://matplotlib_inline.backend_inline",
            "MPLCONFIGDIR": config_dir, "MATPLOTLIBRC": config_dir}


def decode_png(data: str | bytes) -> np.ndarray:
    """An (H, W, 4) uint8 array from a notebook's base64 ``image/png`` string."""
    from PIL import Image

    raw = base64.b64decode(data) if isinstance(data, str) else data
    with Image.open(io.BytesIO(raw)) as image:
        return np.asarray(image.convert("RGBA"))


def png_difference(stored: str, fresh: str, tolerance: int = TOLERANCE) -> str | None:
    """None when the two PNGs show the same picture, else what differs."""
    if stored == fresh:
        return None
    a, b = decode_png(stored), decode_png(fresh)
    if a.shape != b.shape:
        return f"size {a.shape[1]}x{a.shape[0]} px stored, {b.shape[1]}x{b.shape[0]} px drawn now"
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=2)
    changed = int(np.count_nonzero(diff > tolerance))
    if changed:
        ys, xs = np.nonzero(diff > tolerance)
        return (f"{changed} of {diff.size} pixels differ by more than {tolerance} levels "
                f"(largest {int(diff.max())}), within x {xs.min()}..{xs.max()}, "
                f"y {ys.min()}..{ys.max()}")
    return None


def _pngs(outputs) -> list[str]:
    return [o["data"]["image/png"] for o in outputs
            if isinstance(o.get("data"), dict) and "image/png" in o["data"]]


def pytest_configure(config):
    if not getattr(config.option, "nbval", False):
        return
    config_dir = tempfile.mkdtemp(prefix="nbval-mpl-")
    config.add_cleanup(lambda: shutil.rmtree(config_dir, ignore_errors=True))
    os.environ.update(figure_environment(config_dir))  # inherited by the kernels

    from nbval.plugin import IPyNbCell

    if getattr(IPyNbCell.compare_outputs, "_compares_figures", False):
        return
    original = IPyNbCell.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        if not original(self, test, ref, skip_compare):
            return False
        skipped = skip_compare or self.parent.skip_compare
        if "image/png" not in skipped:        # nbval compares PNGs itself (--nbdime)
            return True
        stored, fresh = _pngs(ref), _pngs(test)
        problem = (f"{len(stored)} figures stored, {len(fresh)} drawn now"
                   if len(stored) != len(fresh) else
                   next((p for p in map(png_difference, stored, fresh) if p), None))
        if problem:
            self.comparison_traceback.append(
                f"{self.colors.FAIL}stored figure differs from what the code draws now: "
                f"{problem} (re-execute the notebook with scripts/execute_notebooks.py)"
                f"{self.colors.ENDC}")
            return False
        return True

    compare_outputs._compares_figures = True
    IPyNbCell.compare_outputs = compare_outputs
