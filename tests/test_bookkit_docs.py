"""Every Part II helper in bookkit says, in its docstring, which chapter shows it."""
from __future__ import annotations

import importlib
import inspect
import re

import pytest

from bookpaths import ROOT

pytest.importorskip("torch")

MODULES = ["torchmem", "crosscheck", "losses", "torchmodels", "timing", "flops", "applications", "hfmodels"]


def helpers():
    for mod in MODULES:
        module = importlib.import_module(f"bookkit.{mod}")
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod}.{name}", obj


@pytest.mark.parametrize("name,obj", list(helpers()), ids=lambda v: v if isinstance(v, str) else "")
def test_docstring_names_an_existing_chapter(name, obj):
    doc = inspect.getdoc(obj) or ""
    found = re.findall(r"[Ss]hown in\s+chapter\s+(\d+b?)", doc)
    assert found, f"{name}: its docstring does not say which chapter shows it"
    for chapter in found:
        notebooks = list((ROOT / "notebooks").glob(f"ch{int(chapter[:-1] if chapter.endswith('b') else chapter):02d}"
                                                   f"{'b' if chapter.endswith('b') else ''}_*.ipynb"))
        assert notebooks, f"{name}: chapter {chapter} has no notebook"
