"""nbval, strict on stderr: a cell that writes to stderr fails, ignored outputs included.

``make book`` runs each notebook in a fresh kernel (nbclient) whose ipykernel forwards
the process's file descriptor 2 to the notebook, and the strict build turns any stderr
output into a warning that stops it (a torch profiler line printed by C++ code did, on a
fresh clone only). nbval would not see that: its kernels inherit
``PYTEST_CURRENT_TEST``, and ipykernel does not capture fd 1 and 2 under pytest, so
native output went to ``/dev/null``; and a cell tagged ``nbval-ignore-output`` is never
compared. This plugin (loaded by the root conftest.py) starts nbval's kernels without
that variable, so they capture fd 2 as ``make book``'s do, and fails every cell whose
fresh run wrote to stderr (Python warnings, ``sys.stderr``, native libraries).
"""
from __future__ import annotations

import os

LEAKED = "PYTEST_CURRENT_TEST"


def kernel_environment(environ=None) -> dict[str, str]:
    """The environment for a notebook kernel: this process's, less ``PYTEST_CURRENT_TEST``
    (under which ipykernel leaves fd 1 and 2 uncaptured)."""
    env = dict(os.environ if environ is None else environ)
    env.pop(LEAKED, None)
    return env


def stderr_text(outputs) -> str:
    """Everything a cell's outputs wrote to stderr."""
    return "".join(o.get("text", "") for o in outputs
                   if o.get("output_type") == "stream" and o.get("name") == "stderr")


def pytest_configure(config):
    if not getattr(config.option, "nbval", False):
        return
    import nbval.kernel
    from nbval.plugin import IPyNbCell

    if getattr(nbval.kernel.start_new_kernel, "_captures_stderr", False):
        return
    original_start = nbval.kernel.start_new_kernel

    def start_new_kernel(*args, **kwargs):
        kwargs.setdefault("env", kernel_environment())
        return original_start(*args, **kwargs)

    start_new_kernel._captures_stderr = True
    nbval.kernel.start_new_kernel = start_new_kernel

    original_runtest = IPyNbCell.runtest

    def runtest(self):
        original_runtest(self)
        written = stderr_text(getattr(self, "test_outputs", None) or [])
        if written:
            self.raise_cell_error(
                "Cell wrote to stderr (make book's strict build fails on it)",
                written.rstrip()[-2000:])

    IPyNbCell.runtest = runtest
