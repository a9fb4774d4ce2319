"""book/coverage.md lists every checklist id S1–S39 with a chapter that exists."""
from __future__ import annotations

import re

from bookpaths import DOC_ROLE, ROOT, source_for, toc_files

COVERAGE = ROOT / "book" / "coverage.md"
IDS = [f"S{i}" for i in range(1, 40)]
NOT_YET = "not yet covered"


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


def test_every_link_points_to_a_page_of_the_book():
    toc = set(toc_files())
    rows = coverage_rows()
    uncovered = []
    for sid, where in rows.items():
        targets = DOC_ROLE.findall(where)
        if not targets:
            assert where == NOT_YET, f"{sid}: neither a {{doc}} link nor '{NOT_YET}': {where!r}"
            uncovered.append(sid)
            continue
        for target in targets:
            doc = resolve(target)
            assert source_for(doc) is not None, f"{sid}: link to missing page {target}"
            assert doc in toc, f"{sid}: {target} exists but is not in _toc.yml"
    print(f"\n{len(uncovered)} of {len(IDS)} checklist ids not yet covered: {uncovered}")
