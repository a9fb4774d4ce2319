"""Power laws read off measurements: the slope of a log-log fit (shown in chapter 1, used
again in chapter 4)."""
from __future__ import annotations

import numpy as np

__all__ = ["loglog_slope"]


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of ``log(ys)`` against ``log(xs)``: the exponent ``p`` of
    ``ys ~ c * xs**p`` (shown in chapter 1, used in chapter 4). Both must be positive sequences of the
    same length >= 2. A fit (LAPACK) rounds differently on other CPUs: print it rounded."""
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1 or len(xs) < 2:
        raise ValueError(f"loglog_slope: need two 1-d sequences of equal length >= 2, "
                         f"got shapes {xs.shape} and {ys.shape}")
    if (xs <= 0).any() or (ys <= 0).any():
        raise ValueError("loglog_slope: all values must be positive (logarithms)")
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])
