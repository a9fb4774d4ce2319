"""Every Part I helper in bookkit says which chapter shows it, and that chapter shows it:
its notebook includes the helper's source (``literalinclude`` with ``:pyobject:``)."""
from __future__ import annotations

import importlib
import inspect
import re

import pytest

from bookpaths import ROOT, cell_source, load_notebook

MODULES = ["step_anatomy", "event_table", "timelines", "chains", "fitting", "gradcheck", "blas",
           "schedule_comparison"]


def helpers():
    for mod in MODULES:
        module = importlib.import_module(f"bookkit.{mod}")
        for name in module.__all__:
            yield mod, name, getattr(module, name)


@pytest.mark.parametrize("mod,name,obj", list(helpers()), ids=lambda v: v if isinstance(v, str) else "")
def test_docstring_names_the_chapter_that_shows_it(mod, name, obj):
    doc = inspect.getdoc(obj) or ""
    found = re.findall(r"[Ss]hown in\s+chapter\s+(\d+b?)", doc)
    assert found, f"bookkit.{mod}.{name}: its docstring does not say which chapter shows it"
    chapter = found[0]
    digits = chapter.rstrip("b")
    notebooks = list((ROOT / "notebooks").glob(f"ch{int(digits):02d}{chapter[len(digits):]}_*.ipynb"))
    assert len(notebooks) == 1, f"bookkit.{mod}.{name}: chapter {chapter} has no notebook"
    text = "\n".join(cell_source(c) for c in load_notebook(notebooks[0])["cells"] if c["cell_type"] == "markdown")
    included = re.findall(r"literalinclude\}\s+\.\./bookkit/" + mod + r"\.py\s*\n:pyobject:\s*(\S+)", text)
    assert name in included, (f"bookkit.{mod}.{name}: {notebooks[0].name} does not show it "
                              f"(literalinclude ../bookkit/{mod}.py with :pyobject: {name})")
