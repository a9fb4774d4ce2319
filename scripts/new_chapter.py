"""Start a chapter: write its notebook and list it in _toc.yml, the one list of chapters.

Usage: python scripts/new_chapter.py SLUG "Title" [--packages numpy torch ...]

Writes ``notebooks/chNN_SLUG.ipynb``, numbered after the last chapter (numbers follow
_toc.yml's order; tests/bookpaths.py derives them, nothing else types them), with the
opening cell (label, the only level-1 title, a question to replace) and the setup cell of
CONTRIBUTING.md tagged ``hide-input``, and adds the notebook to _toc.yml right after the
last chapter. Then write the chapter and run ``make fix NB=notebooks/chNN_SLUG.ipynb``.
Refuses a slug that is not lowercase words joined by ``_`` or that a chapter already has.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from bookpaths import SETUP_TAG, chapters, config, setup_cell_text  # noqa: E402

SLUG = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def new_chapter(slug: str, title: str, packages=("numpy",)) -> Path:
    """Write the notebook of a new last chapter and list it in _toc.yml.

    Args:
        slug: the chapter's name in its file, ``my_topic`` (lowercase, ``_``-joined).
        title: the title the page shows after its number.
        packages: what the setup cell's ``bookkit.require`` checks (``numpy`` first).

    Returns:
        The new notebook's path.
    """
    if not SLUG.match(slug):
        raise ValueError(f"slug must be lowercase words joined by '_', got {slug!r}")
    listed = chapters()
    if slug in listed:
        raise ValueError(f"chapter {slug!r} exists: {listed[slug].relative_to(ROOT)}")
    number = len(listed)
    chapter_id = f"ch{number:02d}"
    path = ROOT / "notebooks" / f"{chapter_id}_{slug}.ipynb"
    setup = nbformat.v4.new_code_cell(
        setup_cell_text(config()["repository"]["url"], tuple(packages)))
    setup.metadata["tags"] = [SETUP_TAG]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(
            f"({chapter_id})=\n# {number}. {title}\n\n"
            "**The practitioner's question this chapter answers?** Its payoff in a "
            "sentence."),
        setup,
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)   # nbformat 4.5 with cell ids, as every chapter
    _add_to_toc(f"notebooks/{path.stem}", listed)
    return path


def _add_to_toc(entry: str, listed: dict[str, Path]) -> None:
    toc = ROOT / "_toc.yml"
    lines = toc.read_text().splitlines(keepends=True)
    last = (f"notebooks/{list(listed.values())[-1].stem}" if listed else None)
    at = next(i for i, line in enumerate(lines) if last and line.strip() == f"- file: {last}")
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    at += 1  # past the last chapter's own lines (its `sections:`: a continuation page)
    while at < len(lines) and lines[at].strip() and len(lines[at]) - len(lines[at].lstrip()) > len(indent):
        at += 1
    lines.insert(at, f"{indent}- file: {entry}\n")
    toc.write_text("".join(lines))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slug")
    parser.add_argument("title")
    parser.add_argument("--packages", nargs="+", default=["numpy"])
    args = parser.parse_args(argv)
    try:
        path = new_chapter(args.slug, args.title, args.packages)
    except ValueError as error:
        print(f"new_chapter: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path.relative_to(ROOT)} and listed it in _toc.yml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
