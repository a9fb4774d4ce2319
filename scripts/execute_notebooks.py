"""Execute notebooks in place, top to bottom, so stored outputs are what the code prints.

Usage: python scripts/execute_notebooks.py notebooks/ch01_*.ipynb [...]

Each notebook runs in a fresh kernel with its own folder as working directory
(as nbval and the book build do), and draws its figures under the settings nbval
compares them with (tests/nbval_figures.py: the inline backend, matplotlib's
defaults and bundled fonts). The kernel runs on the simulated different CPU of
scripts/simulated_cpu.py (generic x86-64 kernels, one thread), so the outputs it
stores are another CPU's than the one `make test` then checks them on natively:
a printed number that holds on one CPU only fails there. Cells that print library source for Colab are then
cleared (scripts/fold_listings.py), so no listing is stored as an output. Prints the wall time of each notebook: the book
promises under 60 s per notebook on a 2-core CPU.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fold_listings import clear_listing_outputs  # noqa: E402
from nbval_figures import figure_environment  # noqa: E402
from simulated_cpu import settings as simulated_cpu_settings  # noqa: E402

BUDGET_S = 60.0


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:  # no per-cell timestamps: they would churn every diff
        cell.metadata.pop("execution", None)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    clear_listing_outputs(nb)
    nbformat.write(nb, path)
    return elapsed


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    slow = []
    with tempfile.TemporaryDirectory(prefix="execute-mpl-") as config_dir:
        os.environ.update(figure_environment(config_dir))
        os.environ.update(simulated_cpu_settings())  # the kernels inherit them
        for name in paths:
            elapsed = execute(Path(name))
            flag = "" if elapsed <= BUDGET_S else f"  (over the {BUDGET_S:.0f} s budget)"
            print(f"{elapsed:6.1f} s  {name}{flag}", flush=True)
            if elapsed > BUDGET_S:
                slow.append(name)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
