"""Format the notebooks' code cells with ruff (line length 79), or check that they are.

Usage: python scripts/format_notebooks.py [--check] [notebooks/*.ipynb ...]

Each code cell is passed to ``ruff format --line-length 79`` on its own, with
``skip-magic-trailing-comma``: a call that fits on one line is written on one line even
if a trailing comma once spread it over many (a page of one-argument lines and lone
closing brackets reads worse than the call). Cells holding
IPython magics or shell escapes (the setup cell's ``%pip``) are left as written: ruff
reads them as plain Python and would rewrap the setup cell, whose text
tests/test_config.py keeps verbatim. ``--check`` changes nothing and exits 1, naming
each cell that ruff would change. Without paths: every notebook in notebooks/.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

LINE_LENGTH = 79
RUFF_OPTIONS = ["--line-length", str(LINE_LENGTH),
                "--config", "format.skip-magic-trailing-comma = true"]
MAGIC = re.compile(r"^\s*[%!]", re.M)


def ruff_binary() -> str:
    here = Path(sys.executable).with_name("ruff")
    found = str(here) if here.exists() else shutil.which("ruff")
    if not found:
        raise SystemExit("ruff is missing: run `pip install ruff` (requirements.txt pins it)")
    return found


def format_cells(sources: list[str], ruff: str) -> list[str]:
    """The cells' sources as ruff formats them, in one ruff run (magic cells as they are)."""
    with tempfile.TemporaryDirectory(prefix="format-notebooks-") as folder:
        paths = {}
        for i, source in enumerate(sources):
            if source.strip() and not MAGIC.search(source):
                paths[i] = Path(folder) / f"cell{i:05d}.py"
                paths[i].write_text(source + "\n")
        if paths:
            done = subprocess.run([ruff, "format", "--quiet", "--no-cache", "--isolated",
                                   *RUFF_OPTIONS, folder],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"ruff could not format a cell:\n{done.stderr}")
        return [paths[i].read_text().rstrip("\n") if i in paths else source
                for i, source in enumerate(sources)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    paths = args.notebooks or sorted(str(p) for p in (root / "notebooks").glob("*.ipynb"))
    ruff = ruff_binary()
    unformatted = []
    notebooks = {name: nbformat.read(name, as_version=4) for name in paths}
    cells = [(name, i, cell) for name, nb in notebooks.items()
             for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    formatted = format_cells([cell.source for _, _, cell in cells], ruff)
    changed_in: dict[str, int] = {}
    for (name, i, cell), new in zip(cells, formatted):
        if new != cell.source:
            changed_in[name] = changed_in.get(name, 0) + 1
            unformatted.append(f"{name}: cell {i}")
            cell.source = new
    for name, nb in notebooks.items():
        changed = changed_in.get(name, 0)
        if changed and not args.check:
            nbformat.write(nb, name)
            print(f"{changed:3d} cells formatted  {name}")
    if args.check and unformatted:
        print("not formatted with ruff (run scripts/format_notebooks.py):")
        print("\n".join("  " + u for u in unformatted))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
