"""Fold a chapter's source listings into dropdowns, keeping its one key listing open,
and store no library source as a cell output.

Usage: python scripts/fold_listings.py notebooks/chNN_x.ipynb [...] [--keep-open N]
       python scripts/fold_listings.py --outputs-only notebooks/*.ipynb

The book's rule (CONTRIBUTING.md): a page shows the few lines that carry the idea; whole
sources sit in collapsed dropdowns. Every ``{literalinclude}`` of a notebook's Markdown
that is not already inside a dropdown is wrapped in a dropdown of its own, titled with
what it shows, except the first ``--keep-open`` of them (default 1: the chapter's key
listing, which its author trims to 5-20 lines with ``:lines:``). Listings inside a
dropdown are written with ``~~~`` fences, so that a dropdown's ``:::`` is the only
closing fence at its level.

The page reads every listing from the source at build time (``literalinclude``); a
removed cell prints the same source with ``inspect.getsource`` for Colab readers. That
cell's outputs are cleared and it is tagged ``nbval-ignore-output``: a stored copy of
the source would make strict nbval fail on any edit of a comment in the library until
the notebook ran again. ``scripts/execute_notebooks.py`` applies this after every
execution. Idempotent.
"""
from __future__ import annotations

import argparse
import re
import sys

import nbformat

OPEN_INCLUDE = re.compile(r"^(`{3,}|~{3,})\{literalinclude\}\s*(\S+)")
DROPDOWN = re.compile(r"^(:{3,})\{dropdown\}")
LISTING_CALL = "inspect.getsource("
IGNORE_OUTPUT = "nbval-ignore-output"


def _listing_title(block: list[str]) -> str:
    path = OPEN_INCLUDE.match(block[0]).group(2)
    module = path.split("/")[-1].removesuffix(".py")
    for line in block[1:]:
        m = re.match(r"^:pyobject:\s*(\S+)", line)
        if m:
            return f"Source: `{module}.{m.group(1)}`"
    return f"Source: `{module}`"


def fold_markdown(text: str, open_left: int) -> tuple[str, int, int]:
    """(new text, listings left open still allowed, listings folded)."""
    lines = text.split("\n")
    out: list[str] = []
    depth_fence: list[str] = []  # the colon fences of the dropdowns we are inside
    folded = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        m_drop = DROPDOWN.match(line)
        if m_drop:
            depth_fence.append(m_drop.group(1))
            out.append(line)
            i += 1
            continue
        if depth_fence and line.strip() == depth_fence[-1]:
            depth_fence.pop()
            out.append(line)
            i += 1
            continue
        m_inc = OPEN_INCLUDE.match(line)
        if m_inc:
            fence = m_inc.group(1)
            j = i + 1
            while j < len(lines) and lines[j].strip() != fence:
                j += 1
            block = lines[i:j + 1]
            if depth_fence or open_left <= 0:
                tilde = [re.sub(r"^`{3,}", "~~~", block[0])] + block[1:-1] + ["~~~"]
                if depth_fence:
                    out.extend(tilde)
                else:
                    out.extend([f":::{{dropdown}} {_listing_title(block)}"] + tilde + [":::"])
                    folded += 1
            else:
                out.extend(block)
                open_left -= 1
            i = j + 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out), open_left, folded


def fold_notebook(nb, keep_open: int = 1) -> int:
    left, total = keep_open, 0
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "{literalinclude}" in cell.source:
            cell.source, left, folded = fold_markdown(cell.source, left)
            total += folded
    return total


def is_listing_cell(cell) -> bool:
    """A code cell that prints library source for Colab (``inspect.getsource``)."""
    return cell.cell_type == "code" and LISTING_CALL in cell.source


def clear_listing_outputs(nb) -> int:
    """Clear the outputs of every listing cell and tag it ``nbval-ignore-output``.

    Args:
        nb: a notebook (``nbformat.NotebookNode``), changed in place.

    Returns:
        The characters of stored output removed.

    Example:
        >>> import nbformat
        >>> nb = nbformat.v4.new_notebook()
        >>> cell = nbformat.v4.new_code_cell("print(inspect.getsource(f))")
        >>> cell.outputs = [nbformat.v4.new_output("stream", text="def f(): ...")]
        >>> nb.cells.append(cell)
        >>> clear_listing_outputs(nb), cell.outputs, cell.metadata.tags
        (12, [], ['nbval-ignore-output'])
        >>> clear_listing_outputs(nb)
        0
    """
    removed = 0
    for cell in nb.cells:
        if not is_listing_cell(cell):
            continue
        removed += sum(len(_output_text(o)) for o in cell.outputs)
        cell.outputs = []
        tags = cell.metadata.setdefault("tags", [])
        if IGNORE_OUTPUT not in tags:
            tags.append(IGNORE_OUTPUT)
    return removed


def _output_text(output) -> str:
    if output.get("output_type") == "stream":
        return "".join(output.get("text", ""))
    return "".join("".join(v) if isinstance(v, list) else str(v)
                   for v in output.get("data", {}).values())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--keep-open", type=int, default=1)
    parser.add_argument("--outputs-only", action="store_true",
                        help="only clear stored listings; leave the Markdown as it is "
                             "(ch02 keeps two listings open on purpose)")
    args = parser.parse_args(argv)
    for name in args.notebooks:
        nb = nbformat.read(name, as_version=4)
        before = nbformat.writes(nb)
        n = 0 if args.outputs_only else fold_notebook(nb, args.keep_open)
        cleared = clear_listing_outputs(nb)
        if nbformat.writes(nb) != before:
            nbformat.write(nb, name)
        print(f"{n:3d} listings folded, {cleared:6d} characters of stored source cleared  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
