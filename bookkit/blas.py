"""NumPy's BLAS thread count, set for the duration of a block (shown in chapter 1; chapters 1
and 4 use it through `bookkit.step_anatomy` and `bookkit.chains`; it changes timings, never
bytes or FLOPs)."""
from __future__ import annotations

import ctypes
import re
from contextlib import contextmanager

__all__ = ["blas_threads"]


def _openblas():
    """``(set, get)`` for the number of threads of the OpenBLAS NumPy loaded, or None."""
    try:
        maps = open("/proc/self/maps").read()
    except OSError:  # not Linux
        return None
    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps))):
        lib = ctypes.CDLL(path)
        for prefix in ("scipy_openblas", "openblas"):
            for suffix in ("64_", ""):
                try:
                    return (getattr(lib, f"{prefix}_set_num_threads{suffix}"),
                            getattr(lib, f"{prefix}_get_num_threads{suffix}"))
                except AttributeError:
                    continue
    return None


@contextmanager
def blas_threads(n: int):
    """Run the block with NumPy's OpenBLAS limited to ``n`` threads (no-op elsewhere).
    Shown in chapter 1, next to `bookkit.step_anatomy.measure_step`, which uses it.

    On a small shared machine a multi-threaded BLAS whose threads compete with other
    processes for the cores stalls erratically (a 0.3 s step can take seconds)."""
    found = _openblas()
    if found is None:
        yield
        return
    set_threads, get_threads = found
    old = get_threads()
    set_threads(int(n))
    try:
        yield
    finally:
        set_threads(old)
