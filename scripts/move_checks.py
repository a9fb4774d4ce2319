"""Move a notebook's checks off the page: glue, asserts and GPU hooks into removed cells.

Usage: python scripts/move_checks.py notebooks/chNN_x.ipynb [...] [--dry-run]

The book's rule (CONTRIBUTING.md): a visible cell carries the idea; the statements that
*check* it (``glue(...)``, ``assert ...``, ``record(...)``, and loops or ifs made of
nothing else) run in a cell tagged ``remove-cell`` right after it, which the HTML does not
show and nbval still runs. ``# NBVAL_IGNORE_OUTPUT`` comment lines become the cell tag
``nbval-ignore-output``. A check is only moved when that cannot change what it checks:
no statement that stays visible after it assigns a name the check reads. Cells that
cannot be parsed (IPython magics) are left alone, but for ``%%solution`` cells, which
fold: Colab's ``#@title`` line first, the magic second (the layout before, magic first
and title second, is migrated). Idempotent: a second run changes nothing. Re-execute the notebook afterwards (scripts/execute_notebooks.py).
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat

CHECK_CALLS = {"glue", "record"}
REMOVED = "remove-cell"
IGNORE_TAG = "nbval-ignore-output"
HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
TITLE = "# @title Checks behind this page's numbers (not shown in the book)"
"""First line of a check cell: Colab shows a cell whose source starts with a @title, in a
form view, folded (``cellView: form``); JupyterLab folds it by ``source_hidden``."""


def fold(cell) -> None:
    """Make a removed cell fold in Colab and JupyterLab, as the book removes it."""
    if not cell.source.startswith("# @title"):
        cell.source = TITLE + "\n" + cell.source
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True


SOLUTION = "%%solution"
SOLUTION_TITLE = "#@title The book's solution {display-mode: \"form\"}"
FORM_LINE = re.compile(r"#\s*@(title|markdown)\b")
"""A Colab form comment line (``#@title``, ``#@markdown``, ``# @title``)."""
FORM_TITLE = re.compile(r"#\s*@title\b")


def solution_parts(source: str) -> tuple[list[str], str, list[str]] | None:
    """(form lines, magic line, body lines) of a ``%%solution`` cell, its form comments
    above the magic (the book's layout) or right below it (the layout before), or None
    for any other cell."""
    lines = source.split("\n")
    i = 0
    while i < len(lines) and FORM_LINE.match(lines[i]):
        i += 1
    if i == len(lines) or lines[i].split()[:1] != [SOLUTION]:
        return None
    forms, magic, body = lines[:i], lines[i], lines[i + 1:]
    while body and FORM_LINE.match(body[0]):
        forms.append(body.pop(0))
    return forms, magic, body


def fold_solution(cell) -> bool:
    """A ``%%solution`` cell folds too: Colab's form title on its first line, where
    Colab's documentation puts it, the cell magic on the second (``bookkit.yours``'s
    ``colab_form_first`` moves the magic back to the top before IPython reads the cell),
    Colab's form flag (``cellView: form``) and JupyterLab's ``source_hidden``. Returns
    whether the cell changed."""
    forms, magic, body = solution_parts(cell.source)
    before = (cell.source, dict(cell.metadata))
    if not any(FORM_TITLE.match(line) for line in forms):
        forms = [SOLUTION_TITLE] + forms
    cell.source = "\n".join(forms + [magic] + body)
    cell.metadata["cellView"] = "form"
    cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    return (cell.source, dict(cell.metadata)) != before


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id
        if isinstance(f, ast.Attribute):
            return f.attr
    return None


def _is_plain_check(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assert) or (
        isinstance(stmt, ast.Expr) and _call_name(stmt.value) in CHECK_CALLS)


def is_check(stmt: ast.stmt) -> bool:
    """An assert, a glue/record call, or a for/if/with made of checks (and the plain
    assignments that feed them)."""
    if _is_plain_check(stmt):
        return True
    if isinstance(stmt, (ast.For, ast.If, ast.With)):
        body = stmt.body + list(getattr(stmt, "orelse", []) or [])
        helpers = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Pass)
        return (all(is_check(s) or isinstance(s, helpers) for s in body)
                and any(is_check(s) for s in body))
    return False


def _names(node: ast.AST, ctx) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def split_source(source: str) -> tuple[str, str]:
    """(visible, checks): the cell's source without its movable checks, and the checks."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, ""
    lines = source.splitlines()
    body = tree.body
    moved: list[tuple[int, int]] = []
    for i, stmt in enumerate(body):
        if not is_check(stmt):
            continue
        reads, writes = _names(stmt, ast.Load), _names(stmt, (ast.Store, ast.Del))
        later = [s for s in body[i + 1:] if not is_check(s)]
        if any(isinstance(s, ast.Delete)  # frees memory a meter may be counting
               or _names(s, ast.Store) & (reads | writes)
               or _names(s, ast.Load) & writes for s in later):
            continue  # moving it after the visible statements could change a value
        start = stmt.lineno - 1
        while start > 0 and lines[start - 1].lstrip().startswith("#") \
                and "NBVAL_" not in lines[start - 1]:
            start -= 1  # the comment that explains the check goes with it
        moved.append((start, stmt.end_lineno))
    if not moved:
        return source, ""
    keep, checks = [], []
    taken = set()
    for a, b in moved:
        taken.update(range(a, b))
    for j, line in enumerate(lines):
        (checks if j in taken else keep).append(line)
    visible = "\n".join(keep).strip("\n")
    while "\n\n\n" in visible:
        visible = visible.replace("\n\n\n", "\n\n")
    return visible, "\n".join(l for l in checks).strip("\n")


def _take_nbval_marker(source: str) -> tuple[str, bool]:
    lines = source.splitlines()
    kept = [l for l in lines if l.strip() != "# NBVAL_IGNORE_OUTPUT"]
    return "\n".join(kept).strip("\n"), len(kept) != len(lines)


def convert(nb) -> int:
    """Convert a notebook in place; returns the number of cells changed."""
    cells, changed = [], 0
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        if cell.cell_type == "code" and solution_parts(cell.source):
            changed += fold_solution(cell)
            cells.append(cell)
            continue
        if cell.cell_type == "code" and REMOVED in tags and cell.source.strip() \
                and not cell.source.startswith("# @title"):
            fold(cell)  # an earlier removed cell: fold it in Colab too
            changed += 1
        if cell.cell_type != "code" or set(tags) & HIDDEN:
            cells.append(cell)
            continue
        source, ignored = _take_nbval_marker(cell.source)
        if ignored and IGNORE_TAG not in tags:
            tags.append(IGNORE_TAG)
        visible, checks = split_source(source)
        if not visible.strip() or all(l.lstrip().startswith("#") for l in
                                      visible.splitlines() if l.strip()):
            # nothing but checks: the whole cell leaves the page
            cell.source = source
            cell.metadata["tags"] = tags + [REMOVED]
            fold(cell)
            cells.append(cell)
            changed += 1
            continue
        if source != cell.source or checks:
            changed += 1
        cell.source = visible
        if tags:
            cell.metadata["tags"] = tags
        cells.append(cell)
        if checks:
            check_cell = nbformat.v4.new_code_cell(checks)
            check_cell.metadata["tags"] = [REMOVED] + ([IGNORE_TAG] if IGNORE_TAG in tags else [])
            check_cell["id"] = (cell.get("id", "cell") + "-checks")[-64:]  # stable ids
            fold(check_cell)
            cells.append(check_cell)
    nb.cells = cells
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    for name in args.notebooks:
        nb = nbformat.read(name, as_version=4)
        n = convert(nb)
        print(f"{n:3d} cells changed  {name}")
        if not args.dry_run and n:
            nbformat.write(nb, name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
