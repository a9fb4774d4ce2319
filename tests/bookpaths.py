"""Paths and small parsers shared by the book-level tests."""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
HTML = ROOT / "_build" / "html"


def _toc_entries():
    """(_toc.yml as parsed, every dict entry under its parts in order, nested ones included)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries: list[dict] = []

    def walk(node):
        if isinstance(node, dict):
            entries.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc.get("parts", []))
    return toc, entries


def toc_files() -> list[str]:
    """Every `file:` entry of _toc.yml (plus the root), without suffix, in order."""
    toc, entries = _toc_entries()
    return [toc["root"]] + [e["file"] for e in entries if "file" in e]


CHAPTER_FILE = re.compile(r"^notebooks/ch(?P<number>\d\d)_(?P<slug>[a-z0-9_]+)$")
CONTINUATION_FILE = re.compile(r"^notebooks/ch(?P<number>\d\d)b_(?P<slug>[a-z0-9_]+)$")
"""A chapter too long for one page goes on on a second page, its *continuation*:
``notebooks/chNNb_<slug>``, listed under the chapter in _toc.yml (the ``sections:`` of
the chapter's entry). It is not a chapter (no number of its own, nothing renumbered):
its title reads ``NNb. ...``, its label and glue prefix are ``chNNb``, and its figures
and exercises go on with the chapter's numbers."""


def chapters() -> dict[str, Path]:
    """Every chapter notebook, by slug, in the order of _toc.yml (the one list of
    chapters): ``{"five_minutes": ROOT / "notebooks/ch00_five_minutes.ipynb", ...}``.
    Tests and scripts name a chapter by its slug and take its number from here, so a
    renumbering edits _toc.yml and the file names, nothing else."""
    found = {}
    for entry in toc_files():
        match = CHAPTER_FILE.match(entry)
        if match:
            found[match["slug"]] = ROOT / f"{entry}.ipynb"
    return found


def continuations() -> dict[str, Path]:
    """Every continuation page (``notebooks/chNNb_<slug>.ipynb``), by slug, in the order
    of _toc.yml: ``{"sqrt_rule": ROOT / "notebooks/ch04b_sqrt_rule.ipynb", ...}``."""
    found = {}
    for entry in toc_files():
        match = CONTINUATION_FILE.match(entry)
        if match:
            found[match["slug"]] = ROOT / f"{entry}.ipynb"
    return found


def chapter_pages() -> list[Path]:
    """Every page of a chapter, chapters and their continuations, in _toc.yml order
    (a continuation right after its chapter)."""
    return [ROOT / f"{entry}.ipynb" for entry in toc_files()
            if CHAPTER_FILE.match(entry) or CONTINUATION_FILE.match(entry)]


def page_id(path: Path) -> str:
    """The label and glue prefix of a chapter page: ``ch04`` for the chapter,
    ``ch04b`` for its continuation."""
    return Path(path).name.split("_", 1)[0]


def continued_chapter(path: Path) -> Path | None:
    """The chapter a continuation page goes on from (the chapter notebook of the same
    number), or None when ``path`` is not a continuation."""
    match = CONTINUATION_FILE.match(f"notebooks/{Path(path).stem}")
    if match is None:
        return None
    number = match["number"]
    for chapter_path in chapters().values():
        if chapter_path.name.startswith(f"ch{number}_"):
            return chapter_path
    raise KeyError(f"{Path(path).name}: no chapter {int(number)} in _toc.yml to continue")


def toc_sections(docname: str) -> list[str]:
    """The ``file:`` entries listed under ``docname``'s ``sections:`` in _toc.yml."""
    return [s["file"] for e in _toc_entries()[1] if e.get("file") == docname
            for s in e.get("sections", []) if "file" in s]


def chapter(slug: str) -> Path:
    """The notebook of the chapter ``slug`` (``chapter("sqrt_trick")`` is
    notebooks/ch04_sqrt_trick.ipynb); a clear error for a slug _toc.yml does not list."""
    listed = chapters()
    if slug not in listed:
        raise KeyError(f"no chapter {slug!r} in _toc.yml; chapters: {', '.join(listed)}")
    return listed[slug]


def chapter_id(slug: str) -> str:
    """The chapter's id, its label and glue prefix: ``chapter_id("sqrt_trick") == "ch04"``."""
    return chapter(slug).name[:4]


def chapter_number(slug: str) -> int:
    """The chapter's number as the book prints it: ``chapter_number("sqrt_trick") == 4``."""
    return int(chapter_id(slug)[2:])


def source_for(docname: str) -> Path | None:
    """The .md or .ipynb file behind a toc entry, or None if neither exists."""
    for suffix in (".md", ".ipynb"):
        path = ROOT / f"{docname}{suffix}"
        if path.is_file():
            return path
    return None


def notebook_paths() -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob("*.ipynb"))


def load_notebook(path: Path) -> dict:
    return json.loads(path.read_text())


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())


SETUP_TAG = "hide-input"
"""The setup cell's tag: the HTML collapses its source (the notebook shows it)."""

REQUIRE_LINE = re.compile(
    r'^bookkit\.require\((?P<args>"[a-z]+"(?:, "[a-z]+")*(?:, [a-z_]+="[0-9.]+")*)\)'
    r'  # stops with one line if this runtime is too old$')


def setup_cell_text(repository_url: str, packages=("numpy",), **minimums: str) -> str:
    """The canonical first code cell of every notebook (see CONTRIBUTING.md): import
    minigrad and bookkit (installing them from the repository in a fresh Colab runtime),
    then check the versions of the packages the chapter uses (bookkit.require)."""
    args = ", ".join([f'"{p}"' for p in packages] + [f'{k}="{v}"' for k, v in minimums.items()])
    return (
        "# Setup: works inside the book's repository and in a fresh Colab runtime.\n"
        "try:\n"
        "    import minigrad, bookkit\n"
        "except ImportError:  # Colab: install minigrad and the book's helpers from the repository\n"
        f'    %pip install --quiet "minigrad @ git+{repository_url}"\n'
        "    import minigrad, bookkit\n"
        f"bookkit.require({args})  # stops with one line if this runtime is too old"
    )


def setup_cell_requirements(source: str) -> tuple[list[str], dict[str, str]] | None:
    """(packages, minimums) named by a setup cell's last line, or None if it has none."""
    match = REQUIRE_LINE.match(source.strip().splitlines()[-1]) if source.strip() else None
    if match is None:
        return None
    packages, minimums = [], {}
    for arg in match["args"].split(", "):
        if "=" in arg:
            key, value = arg.split("=")
            minimums[key] = value.strip('"')
        else:
            packages.append(arg.strip('"'))
    return packages, minimums


DOC_ROLE = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`")


def load_module(path: Path, name: str | None = None):
    """Import a file that is not in a package (a script under scripts/, a Sphinx
    extension) as a module, registered in ``sys.modules`` (dataclasses look their module
    up there)."""
    import importlib.util
    import sys

    name = name or Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
