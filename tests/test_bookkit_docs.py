"""Every Part II helper in bookkit says, in its docstring, which chapter shows it, and
that chapter does: it names the helper, and the code the issue asked to see is on the
page (`literalinclude`) and printed for Colab (`inspect.getsource`)."""
from __future__ import annotations

import importlib
import inspect
import re

import pytest

from bookpaths import ROOT

pytest.importorskip("torch")

MODULES = ["torchmem", "crosscheck", "losses", "torchmodels", "timing", "flops", "applications",
           "hfmodels"]

# (notebook prefix, file, pyobject): code a chapter shows in full.
ON_THE_PAGE = [
    ("ch07", "torchmem.py", "SavedTensorMeter._pack"),
    ("ch07", "torchmem.py", "SavedTensorMeter._unpack"),
    ("ch07", "torchmem.py", "AllocatorTrace.__exit__"),
    ("ch07", "crosscheck.py", "torch_step"),
    ("ch09", "torchmodels.py", "GPTBlock.forward"),
    ("ch09", "torchmodels.py", "GPTStack.forward"),
    ("ch10", "flops.py", "forward_backward_flops"),
    ("ch11", "losses.py", "ChunkedLinearCrossEntropy"),
    ("ch11", "losses.py", "logsumexp_"),
    ("ch12", "timing.py", "overhead_bound"),
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
