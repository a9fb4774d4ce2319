"""Every Part II helper in bookkit says, in its docstring, which chapter shows it, and
that chapter does: its source is on the page (`literalinclude` with `:pyobject:`, the
helper or, for a class, methods of it) and printed for Colab (`inspect.getsource` in a
code cell that names it). Listings are read from the source when the book is built:
every `literalinclude` resolves to existing lines or objects, and no library source is
stored as a cell output (an edit of a comment must not fail strict nbval)."""
from __future__ import annotations

import importlib
import inspect
import re

import pytest

from bookpaths import ROOT, cell_source, load_notebook, notebook_paths

pytest.importorskip("torch")

MODULES = ["torchmem", "crosscheck", "losses", "torchmodels", "timing", "flops", "step_memory",
           "step_trace", "segmentation", "budget_search", "hfmodels"]

# (notebook prefix, file, pyobject): code a chapter shows in full.
ON_THE_PAGE = [
    ("ch09b", "torchmem.py", "SavedTensorMeter._pack"),
    ("ch09b", "torchmem.py", "SavedTensorMeter._unpack"),
    ("ch09b", "torchmem.py", "AllocatorTrace.__exit__"),
    ("ch09", "crosscheck.py", "torch_step"),
    ("ch11", "torchmodels.py", "GPTBlock.forward"),
    ("ch11", "torchmodels.py", "GPTStack.forward"),
    ("ch12", "flops.py", "forward_backward_flops"),
    ("ch13", "losses.py", "ChunkedLinearCrossEntropy"),
    ("ch13", "losses.py", "logsumexp_"),
    ("ch14", "timing.py", "overhead_bound"),
]


def helpers():
    for mod in MODULES:
        module = importlib.import_module(f"bookkit.{mod}")
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod}.{name}", obj


def chapter_notebook(chapter: str):
    number, suffix = (chapter[:-1], "b") if chapter.endswith("b") else (chapter, "")
    found = list((ROOT / "notebooks").glob(f"ch{int(number):02d}{suffix}_*.ipynb"))
    return found[0] if found else None


@pytest.mark.parametrize("name,obj", list(helpers()), ids=lambda v: v if isinstance(v, str) else "")
def test_docstring_names_the_chapter_that_shows_it(name, obj):
    doc = inspect.getdoc(obj) or ""
    found = re.findall(r"[Ss]hown in\s+chapter\s+(\d+b?)", doc)
    assert found, f"{name}: its docstring does not say which chapter shows it"
    for chapter in found:
        notebook = chapter_notebook(chapter)
        assert notebook is not None, f"{name}: chapter {chapter} has no notebook"
        assert re.search(rf"\b{re.escape(name.split('.')[1])}\b", notebook.read_text()), \
            f"{name}: chapter {chapter} ({notebook.name}) never names it"


@pytest.mark.parametrize("prefix,source,pyobject", ON_THE_PAGE)
def test_code_is_on_the_page_and_printed_for_colab(prefix, source, pyobject):
    (notebook,) = (ROOT / "notebooks").glob(f"{prefix}_*.ipynb")
    text = notebook.read_text()
    assert f"../bookkit/{source}" in text and f":pyobject: {pyobject}" in text, \
        f"{notebook.name}: no literalinclude of {pyobject}"
    assert "inspect.getsource" in text, f"{notebook.name}: nothing prints the code for Colab"


def _included(notebook, module: str) -> list[str]:
    """The ``:pyobject:`` names a notebook's Markdown includes from ``bookkit/<module>.py``."""
    text = "\n".join(cell_source(c) for c in load_notebook(notebook)["cells"] if c["cell_type"] == "markdown")
    return re.findall(r"(?:```|~~~)\{literalinclude\}\s+\.\./bookkit/" + module
                      + r"\.py\s*\n(?::\w+:[^\n]*\n)*?:pyobject:\s*(\S+)", text)


@pytest.mark.parametrize("name,obj", list(helpers()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_helper_is_shown_in_its_chapter(name, obj):
    module, helper = name.split(".")
    (chapter,) = re.findall(r"[Ss]hown in\s+chapter\s+(\d+b?)", inspect.getdoc(obj) or "")[:1]
    notebook = chapter_notebook(chapter)
    shown = [p for p in _included(notebook, module) if p == helper or p.startswith(helper + ".")]
    assert shown, (f"bookkit.{name}: {notebook.name} does not show it (literalinclude "
                   f"../bookkit/{module}.py with :pyobject: {helper})")
    printed = [cell_source(c) for c in load_notebook(notebook)["cells"]
               if c["cell_type"] == "code" and "inspect.getsource" in cell_source(c)]
    assert any(re.search(rf"\b{re.escape(helper)}\b", src) for src in printed), \
        f"bookkit.{name}: {notebook.name} does not print its source for Colab (inspect.getsource)"


# --- Listings come from the files, never from stored outputs -------------------------------

LIBRARY = [ROOT / "minigrad", ROOT / "bookkit"]
INCLUDE = re.compile(r"^(`{3,}|~{3,})\{literalinclude\}\s*(\S+)\s*$")
OPTION = re.compile(r"^:([\w-]+):\s*(.*)$")


def library_definition_lines() -> set[str]:
    """The stripped ``def``/``class`` lines of every module of minigrad and bookkit."""
    lines = set()
    for folder in LIBRARY:
        for path in folder.rglob("*.py"):
            for line in path.read_text().splitlines():
                stripped = line.strip()
                if stripped.startswith(("def ", "class ", "async def ")) and len(stripped) > 12:
                    lines.add(stripped)
    return lines


def output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
        return "".join(text) if isinstance(text, list) else text
    parts = []
    for value in output.get("data", {}).values():
        if isinstance(value, str | list):
            parts.append("".join(value) if isinstance(value, list) else value)
    return "\n".join(parts)


def stored_source_cells(nb: dict, definitions: set[str]) -> list[int]:
    """Indexes of code cells whose stored outputs contain a library definition line."""
    bad = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        text = "\n".join(output_text(o) for o in cell.get("outputs", []))
        if any(line.strip() in definitions for line in text.splitlines()):
            bad.append(i)
    return bad


def test_stored_source_cells_finds_a_printed_listing():
    definitions = {"def run_backward(root, grad=None):"}
    printed = {"cell_type": "code", "source": "print(inspect.getsource(f))",
               "outputs": [{"output_type": "stream", "name": "stdout",
                            "text": ["def run_backward(root, grad=None):\n", "    ...\n"]}]}
    number = {"cell_type": "code", "source": "print(1)",
              "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}]}
    assert stored_source_cells({"cells": [number, printed]}, definitions) == [1]
    assert stored_source_cells({"cells": [number]}, definitions) == []


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_no_library_source_is_stored_as_an_output(path):
    nb = load_notebook(path)
    bad = stored_source_cells(nb, library_definition_lines())
    assert not bad, (f"{path.name}: cells {bad} store library source as outputs; run "
                     f"scripts/fold_listings.py --outputs-only on it")
    unmarked = [i for i, c in enumerate(nb["cells"])
                if c["cell_type"] == "code" and "inspect.getsource(" in cell_source(c)
                and (c.get("outputs") or "nbval-ignore-output" not in c["metadata"].get("tags", []))]
    assert not unmarked, (f"{path.name}: cells {unmarked} print source for Colab but keep "
                          f"outputs or lack the nbval-ignore-output tag")


def literalincludes(text: str) -> list[tuple[str, dict[str, str]]]:
    """(path, options) of every ``literalinclude`` directive in Markdown text."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = INCLUDE.match(line.strip())
        if not m:
            continue
        options = {}
        for option_line in lines[i + 1:]:
            o = OPTION.match(option_line.strip())
            if not o:
                break
            options[o.group(1)] = o.group(2).strip()
        found.append((m.group(2), options))
    return found


def include_problems(base, target: str, options: dict[str, str]) -> list[str]:
    """Why a ``literalinclude`` of ``target`` (relative to folder ``base``) would not
    resolve: a missing file, ``:pyobject:`` not defined there, ``:lines:`` past its end,
    ``:start-after:``/``:end-before:`` text it does not contain."""
    from sphinx.pycode import ModuleAnalyzer

    path = (base / target).resolve()
    if not path.is_file():
        return [f"{target}: no such file"]
    text = path.read_text()
    problems = []
    if "pyobject" in options:
        tags = ModuleAnalyzer.for_file(str(path), "").find_tags()
        if options["pyobject"] not in tags:
            problems.append(f"{target}: no object {options['pyobject']}")
    if "lines" in options:
        n_lines = len(text.splitlines())
        for part in options["lines"].split(","):
            bounds = [int(b) for b in part.strip().split("-") if b.strip()]
            if not bounds or max(bounds) > n_lines or min(bounds) < 1:
                problems.append(f"{target}: lines {part} outside 1-{n_lines}")
    for key in ("start-after", "end-before", "start-at", "end-at"):
        if key in options and options[key] not in text:
            problems.append(f"{target}: {key} text {options[key]!r} not found")
    return problems


def test_include_problems_names_what_does_not_resolve():
    base = ROOT / "notebooks"
    assert include_problems(base, "../minigrad/tensor.py", {"pyobject": "Tensor"}) == []
    assert include_problems(base, "../minigrad/tensor.py", {"pyobject": "Tensr"})
    assert include_problems(base, "../minigrad/tensor.py", {"lines": "1-3"}) == []
    assert include_problems(base, "../minigrad/tensor.py", {"lines": "1-999999"})
    assert include_problems(base, "../minigrad/tensr.py", {})
    assert include_problems(base, "../minigrad/tensor.py", {"start-after": "no such text"})


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_every_literalinclude_resolves(path):
    nb = load_notebook(path)
    text = "\n".join(cell_source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    problems = [p for target, options in literalincludes(text)
                for p in include_problems(path.parent, target, options)]
    assert not problems, f"{path.name}: {problems}"
