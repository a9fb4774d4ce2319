"""Static checks of the portability convention (CONTRIBUTING.md, "Numbers and outputs:
they must hold on every CPU") on every notebook in notebooks/, chapters added later
included. The dynamic check is `make test` itself: strict nbval natively against outputs
stored under a simulated different CPU (scripts/execute_notebooks.py runs the kernel under
scripts/simulated_cpu.py)."""
from __future__ import annotations

import ast
import re

import pytest

from bookpaths import cell_source, load_notebook, notebook_paths

NBVAL_COMMENTS = {"NBVAL_IGNORE_OUTPUT", "NBVAL_CHECK_OUTPUT", "NBVAL_RAISES_EXCEPTION",
                  "NBVAL_SKIP"}
NBVAL_TAGS = {m.lower().replace("_", "-") for m in NBVAL_COMMENTS} | {"raises-exception"}
GLUE_ROLE = re.compile(r"\{glue(?::text)?\}`([^`]+)`")
NUMERIC_SPEC = re.compile(r"[bcdoxXeEfFgGn%]$")


def code_cells(nb: dict) -> list[tuple[int, dict]]:
    return [(i, c) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]


def nbval_problems(source: str, tags: list[str]) -> list[str]:
    """NBVAL markers written as comments, and tags that mention nbval but that nbval
    0.11 would not recognise.

    The book marks cells with tags only (``nbval-ignore-output``): a tag is invisible
    on the page and in Colab, where a ``# NBVAL_IGNORE_OUTPUT`` comment is plumbing on
    the reader's path (and nbval silently ignores a comment with anything after it)."""
    problems = []
    for line in source.splitlines():
        if "NBVAL" in line.upper():
            stripped = line.strip()
            marker = stripped.lstrip("#").strip()
            hint = (f" (use the tag {marker.lower().replace('_', '-')!r})"
                    if marker in NBVAL_COMMENTS else "")
            problems.append(f"line {stripped!r}{hint}")
    for tag in tags:
        if "nbval" in tag.lower() and tag not in NBVAL_TAGS:
            problems.append(f"tag {tag!r}")
    return problems


def test_nbval_problems_finds_comments_and_unknown_tags():
    assert nbval_problems("x = 1", ["nbval-ignore-output"]) == []
    assert nbval_problems("x = 1", ["nbval-skip", "raises-exception"]) == []
    assert "use the tag 'nbval-ignore-output'" in nbval_problems("# NBVAL_IGNORE_OUTPUT", [])[0]
    assert nbval_problems("# NBVAL_IGNORE_OUTPUT (timings)", [])
    assert nbval_problems("x = 1  # NBVAL_IGNORE_OUTPUT", [])
    assert nbval_problems("# nbval_ignore_output", [])
    assert nbval_problems("", ["nbval-ignore"])


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_every_nbval_marker_is_a_tag_nbval_recognises(path):
    nb = load_notebook(path)
    bad = [f"cell {i}: {p}" for i, c in code_cells(nb)
           for p in nbval_problems(cell_source(c), c.get("metadata", {}).get("tags", []))]
    assert not bad, (f"{path.name}: mark cells with nbval's tags, never with comments "
                     f"(nbval-ignore-output for timings and GPU-only cells): {bad}")


def stored_glue(nb: dict) -> dict[str, str]:
    """Every glued name of a notebook and the text/plain stored for it."""
    values = {}
    for _, cell in code_cells(nb):
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is None:
                continue
            data = out.get("data", {})
            text = next((v for k, v in data.items() if k.endswith("text/plain")), None)
            values[name] = "".join(text) if isinstance(text, list) else text
    return values


def glue_references(nb: dict) -> list[tuple[str, str]]:
    """(name, format spec) of every {glue} / {glue:text} role in the notebook's Markdown."""
    refs = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for target in GLUE_ROLE.findall(cell_source(cell)):
            if "::" in target:                 # a value glued in another document
                continue
            name, _, spec = target.partition(":")
            refs.append((name, spec))
    return refs


def is_string(text: str | None) -> bool:
    try:
        return isinstance(ast.literal_eval(text), str)
    except (ValueError, SyntaxError, TypeError):
        return False


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_prose_shows_rounded_glue_as_printed(path):
    """A value glued as the string a cell printed (``bookkit.rounded``, ``bookkit.bound``)
    appears in the prose as it is: a numeric format spec would turn it back into a
    float and show digits the cell decided not to claim (myst-nb formats "0.0599" with
    ``:.6f`` as 0.059900)."""
    nb = load_notebook(path)
    glued = stored_glue(nb)
    missing = sorted({name for name, _ in glue_references(nb) if name not in glued})
    assert not missing, f"{path.name}: the prose uses glue names no cell stores: {missing}"
    respecified = sorted({f"{name}:{spec}" for name, spec in glue_references(nb)
                          if spec and NUMERIC_SPEC.search(spec) and is_string(glued[name])})
    assert not respecified, (f"{path.name}: these glued strings are re-formatted as numbers "
                             f"in the prose; drop the format spec: {respecified}")


GLUE_CALL = re.compile(r"\bglue\(")
IGNORED = {"nbval-ignore-output", "nbval-skip"}


def output_unchecked(cell: dict) -> bool:
    """True when nbval does not compare the cell's outputs (tag, or a legacy comment)."""
    tags = set(cell.get("metadata", {}).get("tags", []))
    source = cell_source(cell)
    return bool(tags & IGNORED) or "NBVAL_IGNORE_OUTPUT" in source or "NBVAL_SKIP" in source


def test_output_unchecked_reads_tags_and_comments():
    assert output_unchecked({"metadata": {"tags": ["nbval-ignore-output"]}, "source": ""})
    assert output_unchecked({"metadata": {}, "source": "# NBVAL_IGNORE_OUTPUT\nx"})
    assert not output_unchecked({"metadata": {"tags": ["remove-cell"]}, "source": "x"})


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_ignored_cells_glue_nothing(path):
    """nbval does not check an ignored cell's outputs, so a value glued there (a timing)
    would reach the prose unchecked, different on every machine."""
    nb = load_notebook(path)
    bad = [i for i, c in code_cells(nb)
           if output_unchecked(c) and GLUE_CALL.search(cell_source(c))]
    assert not bad, (f"{path.name}: cells {bad} are tagged nbval-ignore-output (or skipped) "
                     f"and glue values; glue only checked (exact or rounded) values")


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_no_float_is_glued_at_full_precision(path):
    """Glue the string the prose shows (``bookkit.rounded(value, spec)``), never a raw
    float: its last digits are whatever this CPU's arithmetic made them, and a numeric
    format spec in the prose would hide from the reader which digits are claimed."""
    floats = sorted(name for name, text in stored_glue(load_notebook(path)).items()
                    if text is not None and isinstance(_literal(text), float))
    assert not floats, (f"{path.name}: these glued values are raw floats; glue "
                        f"bookkit.rounded(value, spec) and drop the spec in the prose: {floats}")


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError):
        return None
