"""The versions the book runs with, and the setup cells' check: one clear line, no traceback.

Readers run the notebooks on the torch and transformers their runtime carries (Colab,
course machines). Every notebook's setup cell calls :func:`require` with the packages
the chapter uses. A package below the book's declared minimum stops the notebook with
one line saying what to install. The Hugging Face libraries (pure Python, and missing
from Colab in part) are installed instead, at the versions the book's outputs were
stored with, by version, never merely because they are absent.

``MINIMUM`` is the declared minimum (``pyproject.toml``'s ``[project.optional-dependencies]``
says the same, checked by ``tests/test_versions.py``); ``make compat`` runs every notebook
under exactly these versions and under the newest available ones (``reports/compat.md``).
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from importlib import metadata

__all__ = ["MINIMUM", "TESTED", "RuntimeTooOld", "installed_version", "parse_version", "require"]

# The oldest versions every notebook runs with (make compat proves it).
MINIMUM = {
    "numpy": "1.26",
    "matplotlib": "3.8",
    "torch": "2.5",          # torch.distributed._tools.mem_tracker.MemTracker (chapter 9)
    "transformers": "4.57",  # chapter 16 (the cache is `past_key_values` before 5.24)
    "peft": "0.17",
    "accelerate": "1.3",      # transformers 4.57's Trainer calls unwrap_model(keep_torch_compile=)
    "scipy": "1.11",          # chapter 7: scipy.optimize.milp (HiGHS) solves the graph program
}
# Pure-Python packages a notebook installs itself when they are missing or older than
# MINIMUM: the versions its stored outputs were made with (= requirements.txt), together,
# because they are tested together. torch, NumPy and matplotlib are never installed by a
# notebook: a runtime's torch is a build for its own CUDA, and several GB.
TESTED = {
    "transformers": "5.24.0",
    "peft": "0.21.2",
    "accelerate": "1.15.0",
}


class RuntimeTooOld(RuntimeError):
    """This runtime cannot run the chapter as it is; the message says what to do."""

    def _render_traceback_(self):  # IPython shows this one line instead of a traceback
        return [f"{type(self).__name__}: {self}"]


def parse_version(text: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: ``"2.13.0+cpu"`` -> ``(2, 13, 0)``."""
    parts = []
    for piece in text.split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(piece):   # "0rc1", "0+cpu": the release ends here
            break
    if not parts:
        raise ValueError(f"parse_version: no version number in {text!r}")
    return tuple(parts)


def _at_least(have: str, minimum: str) -> bool:
    a, b = parse_version(have), parse_version(minimum)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) >= b + (0,) * (width - len(b))


def installed_version(name: str) -> str | None:
    """The installed distribution's version, without importing it; None when absent."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def require(*packages: str, **minimums: str) -> None:
    """Check that this runtime can run the chapter; print nothing when it can.

    Args:
        packages: distributions the chapter imports, each checked against ``MINIMUM``.
        minimums: ``name="2.6"`` for a chapter that needs more than ``MINIMUM`` says.

    Raises:
        RuntimeTooOld: one line naming every package below its minimum and the command
            that fixes it; or, after installing newer Hugging Face libraries over ones
            this process has already imported, the hint to restart the runtime. With
            ``BOOKKIT_NO_INSTALL`` set (``make compat``), nothing is installed: a Hugging
            Face library below its minimum raises like any other package.

    Example:
        >>> require("torch")              # in chapter 9's setup cell
    """
    unknown = [p for p in packages if p not in MINIMUM]
    if unknown:
        raise ValueError(f"require: no declared minimum for {unknown}; known: {sorted(MINIMUM)}")
    wanted = {name: MINIMUM[name] for name in packages}
    wanted.update(minimums)
    too_old, to_install = [], []
    for name, minimum in wanted.items():
        have = installed_version(name)
        if have is not None and _at_least(have, minimum):
            continue
        installable = name in TESTED and not os.environ.get("BOOKKIT_NO_INSTALL")
        (to_install if installable else too_old).append((name, minimum, have))
    if too_old:
        needs = ", ".join(f"{n} >= {m} (found {h or 'none'})" for n, m, h in too_old)
        command = " ".join(f"'{n}>={m}'" for n, m, _ in too_old)
        raise RuntimeTooOld(f"this chapter needs {needs}: run `pip install --upgrade {command}`, "
                            f"then restart the runtime")
    if to_install:
        pins = [f"{name}=={version}" for name, version in TESTED.items()]
        print(f"installing {' '.join(pins)} (needed: "
              + ", ".join(f"{n} >= {m}, found {h or 'none'}" for n, m, h in to_install) + ")")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *pins], check=True)
        importlib.invalidate_caches()
        stale = [n for n, _, h in to_install if h is not None and n in sys.modules]
        if stale:
            raise RuntimeTooOld(f"installed newer {', '.join(stale)}, but the old version is "
                                f"already imported: restart the runtime and run this notebook again")
