"""Tables the book shows as HTML, with a plain-text fallback for terminals and nbval.

A printed fixed-width table scrolls sideways on a phone and cannot wrap; an HTML table
reflows. `show_table` renders rows as an HTML table (what the book and Jupyter show)
and keeps a short text form (``text/plain``) for consoles. Cells are shown as given:
format numbers before passing them (``bookkit.rounded``, ``bookkit.fmt_bytes``), so
the table holds on every CPU like any other printed value.
"""
from __future__ import annotations

import html
import textwrap
from collections.abc import Sequence


TEXT_WIDTH = 88
"""Widest line of the text form (the book's limit for outputs)."""


class Table:
    """A table that Jupyter displays as HTML (``_repr_html_``) and consoles as text.

    Args:
        header: the column titles.
        rows: one sequence per row, each as long as ``header``.
        caption: an optional caption shown above the table.
        align: one of "l"/"r"/"c" per column; by default text columns are left-aligned
            and columns whose cells all look numeric are right-aligned.

    Raises:
        ValueError: when a row's length differs from the header's.

    Example:
        >>> Table(["layer", "bytes"], [["fc1", "4,096"]])
        layer  bytes
        fc1    4,096
    """

    def __init__(self, header: Sequence, rows: Sequence[Sequence], *,
                 caption: str | None = None, align: Sequence[str] | None = None):
        self.header = [str(h) for h in header]
        self.rows = [[str(c) for c in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(f"row {i} has {len(row)} cells, the header has "
                                 f"{len(self.header)}: {row!r}")
        if align is not None and (len(align) != len(self.header)
                                  or any(a not in "lrc" for a in align)):
            raise ValueError(f"align needs one of 'l', 'r', 'c' per column "
                             f"({len(self.header)}), got {align!r}")
        self.caption = caption
        self.align = list(align) if align is not None else [
            "r" if self.rows and all(_numeric(r[j]) for r in self.rows) else "l"
            for j in range(len(self.header))]

    def _repr_html_(self) -> str:
        css = {"l": "left", "r": "right", "c": "center"}
        head = "".join(f'<th style="text-align:{css[a]}">{html.escape(h)}</th>'
                       for h, a in zip(self.header, self.align))
        body = "".join(
            "<tr>" + "".join(f'<td style="text-align:{css[a]}">{html.escape(c)}</td>'
                             for c, a in zip(row, self.align)) + "</tr>"
            for row in self.rows)
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        return (f'<table class="bookkit-table">{cap}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        widths = [max(len(r[j]) for r in [self.header] + self.rows)
                  for j in range(len(self.header))]

        def line(cells):
            return "  ".join(c.rjust(w) if a == "r" else c.ljust(w)
                             for c, w, a in zip(cells, widths, self.align)).rstrip()

        lines = [line(self.header)] + [line(r) for r in self.rows]
        if max(len(l) for l in lines) > TEXT_WIDTH:  # too wide for a console: one block a row
            lines = []
            for row in self.rows:
                pairs = "; ".join(f"{h}: {c}" for h, c in zip(self.header, row))
                lines += textwrap.wrap(pairs, TEXT_WIDTH, subsequent_indent="    ")
        caption = textwrap.wrap(self.caption, TEXT_WIDTH) if self.caption else []
        return "\n".join(caption + lines)


def _numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("%", "").replace("×", "").strip()
    for unit in ("KiB", "MiB", "GiB", "B", "x", "s"):
        stripped = stripped.removesuffix(unit).strip()
    try:
        float(stripped.lstrip("<>~≈+-"))
    except ValueError:
        return False
    return True


def show_table(header: Sequence, rows: Sequence[Sequence], *, caption: str | None = None,
               align: Sequence[str] | None = None) -> None:
    """Display rows as an HTML table (as text in a plain console).

    Args and Raises: as `Table`. It displays the table itself and returns None, so a
    cell can show several tables and none is shown twice.

    Example:
        >>> t = show_table(["plan", "peak"], [["store all", "1.0 MiB"]])  # doctest: +SKIP
    """
    table = Table(header, rows, caption=caption, align=align)
    try:
        from IPython.display import display
    except ImportError:  # plain Python: print the text form
        print(repr(table))
    else:
        display(table)
    return None
