"""Part I's build-it pieces: the reader's own, saved to ``yours.py``, or the book's.

"Dropping and rebuilding" has the reader write `HandCheckpoint`; "The square-root trick"
passes it to the reader's `my_checkpoint_sequential`; "Choosing where to checkpoint" runs
its plans with that; "Beyond one level" nests it. A
stub cell that starts with ``%%yours`` runs as usual and remembers its source; when the
chapter's check (`bookkit.build_it`) then agrees with minigrad on the object that cell
defined, its definitions are written to ``yours.py`` in the working folder (the notebook's
folder; in Colab ``/content``, which lasts as long as the runtime: download it, or point
``BOOK_YOURS`` at a file on a mounted Drive). A later chapter calls `load`: the reader's
version when ``yours.py`` has it, the book's otherwise, with one line saying whose ran.
``%%solution`` runs the book's solution in a namespace of its own, so it never replaces
the reader's definitions. A solution cell opens with Colab's form title, where Colab's
documentation puts it, and the magic after it::

    #@title The book's solution {display-mode: "form"}
    %%solution
    def my_saved_bytes(batch, widths): ...

IPython wants a cell magic on the cell's first line; `register_magics` also installs
`colab_form_first`, which moves such leading form comments below the magic line before
IPython reads the cell. Without it IPython, Colab's kernel included (colabtools' kernel
class on IPython 7.34 was run), answers ``UsageError: Line magic function `%%solution`
not found``.

Example:
    >>> from bookkit.yours import load
    >>> hand_cls = load("HandCheckpoint", path="/nonexistent/yours.py")
    HandCheckpoint: the book's (pass chapter 3's check to use yours)
    >>> hand_cls.__name__
    'HandCheckpoint'
"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from minigrad import Function, Tensor, enable_grad, memory, no_grad

__all__ = ["HandCheckpoint", "my_checkpoint_sequential", "load", "save_source",
           "register_magics", "colab_form_first", "yours_path", "CHAPTER"]

#: the chapter whose check a piece passes before it is saved
CHAPTER = {"my_saved_bytes": 1, "my_backward": 2, "HandCheckpoint": 3,
           "my_sqrt_starts": 4, "my_checkpoint_sequential": 4,
           "my_optimal_segments": 5, "my_rotor": 6, "my_run_schedule": 6,
           "my_hook_checkpoint": 8}

#: what every saved piece may use without importing it (the chapters' setup cells)
PRELUDE = """\
import math
from functools import lru_cache

import numpy as np

import minigrad
import minigrad.ops as F
from minigrad import (Function, Tensor, enable_grad, memory, no_grad, plan,
                      saved_tensors_hooks)
from minigrad.plan import Checkpointed, NestedSchedule, Taped
from minigrad.tensor import Context, node_of

INF = float("inf")
"""

# name -> (source, namespace) of the %%yours cells run in this session
_CELLS: dict = {}
# name -> the reader's object whose check agreed in this session
_PASSED: dict = {}
# name -> the book's solution defined by a %%solution cell in this session
_SOLUTIONS: dict = {}


def yours_path(path=None) -> Path:
    """``path``, else ``$BOOK_YOURS``, else ``yours.py`` in the working folder."""
    return Path(path or os.environ.get("BOOK_YOURS") or "yours.py")


def _definitions(source):
    """The top-level definitions, imports and assignments of a cell (its check calls
    and prints dropped), and the names it defines."""
    tree = ast.parse(source)
    keep, names = [], []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif not isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign)):
            continue
        keep.append(ast.get_source_segment(source, node, padded=True))
    return "\n\n\n".join(keep), names


def _sections(text):
    """``{name: source}`` of the sections of a yours.py."""
    parts = re.split(r"^# --- yours: (\w+) .*$\n", text, flags=re.M)
    return dict(zip(parts[1::2], (p.strip() + "\n" for p in parts[2::2])))


def save_source(name, obj, path=None):
    """Write the ``%%yours`` cell that defined ``obj`` (as ``name``) to yours.py, replacing
    an older section of that name. Called by `bookkit.build_it`'s checks when they agree;
    does nothing for an object no ``%%yours`` cell defined (the book's solution, a
    function defined elsewhere). Returns the path written, or None."""
    cell = _CELLS.get(name)
    if cell is None or cell[1].get(name) is not obj:
        return None
    _PASSED[name] = obj
    target = yours_path(path)
    sections = _sections(target.read_text()) if target.exists() else {}
    sections[name] = _definitions(cell[0])[0] + "\n"
    text = "".join(f"# --- yours: {k} (chapter {CHAPTER.get(k, '?')}) ---\n{v}\n"
                   for k, v in sections.items())
    target.write_text('"""Your Part I pieces, written by the book\'s checks."""\n'
                      f"{PRELUDE}\n\n{text}")
    return target


def load(name, path=None):
    """The reader's ``name`` when there is one that passed its check, else the book's;
    prints one line saying whose version runs.

    In order: the reader's object whose check agreed in this session (a ``%%yours``
    cell); the reader's from yours.py (its pieces run together: a saved
    ``my_run_schedule`` uses the saved ``HandCheckpoint``); the book's solution from a
    ``%%solution`` cell of this session; the book's copy in this module.

    Args:
        name: a Part I piece (``"HandCheckpoint"``, ``"my_checkpoint_sequential"``...).
        path: yours.py (default: `yours_path`).

    Returns:
        The function or class.

    Example:
        >>> from bookkit.yours import load
        >>> f = load("my_checkpoint_sequential", path="/nonexistent/yours.py")
        my_checkpoint_sequential: the book's (pass chapter 4's check to use yours)
    """
    if name in _PASSED:
        print(f"{name}: yours (checked above)")
        return _PASSED[name]
    target = yours_path(path)
    sections = _sections(target.read_text()) if target.exists() else {}
    if name in sections:
        ns = {"__name__": "yours"}
        exec(compile(PRELUDE, str(target), "exec"), ns)
        for piece, source in sections.items():  # chapter order: earlier pieces first
            exec(compile(source, f"{target}:{piece}", "exec"), ns)
        print(f"{name}: yours (from {target})")
        return ns[name]
    how = f"pass chapter {CHAPTER.get(name, '?')}'s check to use yours"
    if name in _SOLUTIONS:
        print(f"{name}: the book's solution ({how})")
        return _SOLUTIONS[name]
    if name not in __all__:
        raise KeyError(f"load: no piece named {name!r} in {target} or in the book; "
                       f"known: {sorted(CHAPTER)}")
    print(f"{name}: the book's ({how})")
    return globals()[name]


# a Colab form comment line: "#@title ...", "#@markdown ...", "# @title ..."
_FORM_LINE = re.compile(r"#\s*@(title|markdown)\b")


def colab_form_first(lines):
    """IPython cleanup transform: a cell whose first non-blank lines are Colab form
    comments (``#@title``, ``#@markdown``) directly followed by a cell magic (``%%...``)
    gets the magic line first and the comments right after it, in the magic's body.
    Any other cell is returned as it is.

    Colab's documentation writes a form's ``#@title`` on the cell's first line; IPython
    runs a cell magic only from the first line. With this transform a cell can have both.

    Args:
        lines: the cell's lines, each with its line ending (what IPython passes to the
            transforms in ``input_transformers_cleanup``).

    Returns:
        The lines, reordered or not.

    Example:
        >>> from bookkit.yours import colab_form_first
        >>> colab_form_first(["#@title Solution\\n", "%%solution\\n", "x = 1\\n"])
        ['%%solution\\n', '#@title Solution\\n', 'x = 1\\n']
        >>> colab_form_first(["#@title Setup\\n", "x = 1\\n"])
        ['#@title Setup\\n', 'x = 1\\n']
    """
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and _FORM_LINE.match(lines[end]):
        end += 1
    if end == start or end == len(lines) or not lines[end].startswith("%%"):
        return lines
    magic = lines[end] if lines[end].endswith("\n") else lines[end] + "\n"
    return [magic] + lines[start:end] + lines[end + 1:]


def register_magics(ip=None):
    """Register ``%%yours`` and ``%%solution`` in IPython (the setup cells call it), and
    `colab_form_first`, so that a cell may open with Colab's ``#@title`` line and have its
    cell magic on the next one. Calling it again (a setup cell run twice) registers
    nothing twice.

    ``%%yours``: run the cell in the notebook's namespace and remember its source, so that
    a passing check saves it. ``%%solution``: run the cell in a copy of the namespace (the
    book's solution never replaces the reader's definitions)."""
    if ip is None:
        from IPython import get_ipython
        ip = get_ipython()
    if ip is None:
        return
    cleanup = ip.input_transformers_cleanup
    # by name, not identity: a reloaded bookkit.yours must not add a second copy
    cleanup[:] = [t for t in cleanup
                  if getattr(t, "__qualname__", None) != colab_form_first.__qualname__
                  or getattr(t, "__module__", None) != __name__]
    cleanup.append(colab_form_first)

    def yours(line, cell):
        try:
            names = _definitions(cell)[1]
        except SyntaxError:  # the run below reports it
            names = []
        for name in names:  # before the run: the check inside the cell saves it
            _CELLS[name] = (cell, ip.user_ns)
        ip.run_cell(cell)

    def solution(line, cell):
        ns = dict(ip.user_ns)
        exec(compile(cell, "<solution>", "exec"), ns)
        for name in _definitions(cell)[1]:
            _SOLUTIONS[name] = ns[name]

    ip.register_magic_function(yours, "cell", "yours")
    ip.register_magic_function(solution, "cell", "solution")


class HandCheckpoint(Function):
    """The checkpoint of "Dropping and rebuilding" by hand: run ``fn`` on ``x`` keeping only
    ``x``; rebuild ``fn``'s graph in backward. Apply as ``HandCheckpoint.apply(x, fn)``."""

    @staticmethod
    def forward(ctx, x, fn):
        # no graph inside: nothing is saved, intermediate outputs die at once
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)  # the checkpoint: the segment's input only
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xr = Tensor(x, requires_grad=True)  # shares the checkpoint's memory
        with enable_grad(), memory.phase("recompute"):
            y = ctx.run(xr)  # rebuild: the segment's ops save again
        y.backward(g)
        gx, xr.grad = xr.grad, None
        return gx, None


def my_checkpoint_sequential(layers, starts, x, checkpoint_fn):
    """The ``checkpoint_sequential`` of "The square-root trick": run ``layers`` on ``x``,
    every segment but the last through ``checkpoint_fn(segment, h)``; ``starts``: the
    segments' first layers, from 0."""
    bounds = list(starts) + [len(layers)]

    def segment(a, b):  # layers a .. b-1 as one function
        def run(h):
            for layer in layers[a:b]:
                h = layer(h)
            return h

        return run

    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = checkpoint_fn(segment(a, b), h)  # keeps h, drops the inside
    return segment(bounds[-2], bounds[-1])(h)  # the last segment: kept
