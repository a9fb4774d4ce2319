"""Every Part II helper in bookkit says, in its docstring, which chapter shows it, and
that chapter does: its source is on the page (`literalinclude` with `:pyobject:`, the
helper or, for a class, methods of it) and printed for Colab (`inspect.getsource` in a
code cell that names it); the code the issue asked to see is among it."""
from __future__ import annotations

import importlib
import inspect
import re

import pytest

from bookpaths import ROOT, cell_source, load_notebook

pytest.importorskip("torch")

MODULES = ["torchmem", "crosscheck", "losses", "torchmodels", "timing", "flops", "applications",
           "hfmodels"]

# (notebook prefix, file, pyobject): code a chapter shows in full.
ON_THE_PAGE = [
    ("ch09", "torchmem.py", "SavedTensorMeter._pack"),
    ("ch09", "torchmem.py", "SavedTensorMeter._unpack"),
    ("ch09", "torchmem.py", "AllocatorTrace.__exit__"),
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
