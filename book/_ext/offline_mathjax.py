"""Serve MathJax 3 from the built book instead of a CDN.

The MathJax files come from a registry package (`django-static-mathjax` on PyPI,
which ships MathJax 3.2.2 as plain static files) pinned in requirements.txt. At
build time they are copied into `_build/html/_static/mathjax/`, and Sphinx's
`mathjax_path` points there, so a page never fetches anything from another host.

The entry is MathJax's small ``startup.js`` and the loader fetches only what the book
uses (TeX input with its autoloaded extensions, CommonHTML output, the hidden MathML
that screen readers read): about 0.76 MB instead of the combined ``tex-chtml.js``'s
1.13 MB, whose largest part is the right-click menu (``ui/menu``, 0.43 MB).
"""
from __future__ import annotations

import shutil
from pathlib import Path

MATHJAX_ENTRY = "mathjax/startup.js"  # relative to _static/
MATHJAX_COMPONENTS = ["input/tex", "output/chtml", "a11y/assistive-mml"]


def _mathjax_es5() -> Path:
    import mathjax  # the package installed by django-static-mathjax

    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax files not found under {es5}; reinstall requirements.txt")
    return es5


def _configure(app, config):
    _mathjax_es5()  # fail early, with a clear message, if the package is missing
    config.mathjax_path = MATHJAX_ENTRY


def _load_only_what_is_used(app):
    # After myst-nb and jupyter-book have set their options: only the loader is added.
    config = dict(app.config.mathjax3_config or {})
    loader = dict(config.get("loader") or {})
    loader.setdefault("load", list(MATHJAX_COMPONENTS))
    config["loader"] = loader
    app.config.mathjax3_config = config


def _copy(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "mathjax"
    # The speech-rule engine (sre) is only for screen-reader output; skip its 10+ MB.
    shutil.copytree(_mathjax_es5(), target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("sre", "*.map"))


def setup(app):
    app.connect("config-inited", _configure, priority=900)
    app.connect("builder-inited", _load_only_what_is_used, priority=900)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
