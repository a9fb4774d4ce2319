"""book/coverage.md lists every checklist id S1–S39 with a chapter that exists."""
from __future__ import annotations

import re

from bookpaths import DOC_ROLE, ROOT, source_for, toc_files

COVERAGE = ROOT / "book" / "coverage.md"
IDS = [f"S{i}" for i in range(1, 40)]


def coverage_rows() -> dict[str, str]:
    """Map each id to the text of its 'Where' column."""
    rows = {}
    for line in COVERAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"S\d+", cells[0]):
            assert cells[0] not in rows, f"{cells[0]} appears twice in coverage.md"
            rows[cells[0]] = cells[-1]
    return rows


def resolve(target: str) -> str:
    """A {doc} target, relative to book/ unless absolute, as a docname."""
    if target.startswith("/"):
        return target.lstrip("/")
    parts = []
    for piece in ("book/" + target).split("/"):
        if piece == "..":
            parts.pop()
        elif piece and piece != ".":
            parts.append(piece)
    return "/".join(parts)


def test_every_id_has_a_row():
    rows = coverage_rows()
    missing = [i for i in IDS if i not in rows]
    assert not missing, f"coverage.md has no row for {missing}"
    extra = sorted(set(rows) - set(IDS))
    assert not extra, f"coverage.md has rows for unknown ids {extra}"


# Facts the book demonstrates with executed code and a measurement, not prose alone: the
# checklist's [measure] items, and S28 and S30, executed too.
MEASURED = {f"S{i}" for i in (2, 3, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23,
                              24, 25, 26, 27, 28, 29, 30, 33, 34, 35, 37)}


def test_every_link_points_to_a_page_of_the_book():
    toc = set(toc_files())
    rows = coverage_rows()
    uncovered = []
    for sid, where in rows.items():
        targets = DOC_ROLE.findall(where)
        if not targets:
            uncovered.append(sid)
            continue
        for target in targets:
            doc = resolve(target)
            assert source_for(doc) is not None, f"{sid}: link to missing page {target}"
            assert doc in toc, f"{sid}: {target} exists but is not in _toc.yml"
    assert not uncovered, f"{len(uncovered)} of {len(IDS)} checklist ids have no chapter: {uncovered}"


def test_measured_facts_link_an_executed_notebook():
    rows = coverage_rows()
    prose_only = [sid for sid in sorted(MEASURED, key=lambda s: int(s[1:]))
                  if not any(resolve(t).startswith("notebooks/") for t in DOC_ROLE.findall(rows[sid]))]
    assert not prose_only, f"these ids must be shown by an executed notebook, not prose only: {prose_only}"
