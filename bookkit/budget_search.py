"""Choosing a setting that fits a memory budget, from measurements (chapter 20).

``largest_fitting``
    Binary search for the largest setting (resolution, sequence length, batch) whose
    *measured* memory stays within a budget.

``autobatch``
    An AutoBatch-style choice of batch size: measure memory at a few batch sizes, fit a
    straight line, and take the largest batch whose predicted memory is a given fraction
    of the budget (the approach of Ultralytics' AutoBatch, which does this with the free
    GPU memory).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["largest_fitting", "AutoBatch", "autobatch"]


def largest_fitting(measure: Callable[[int], int], low: int, high: int, budget: int,
                    step: int = 1) -> tuple[int | None, dict[int, int]]:
    """Largest ``v`` in ``low, low + step, ..., <= high`` with ``measure(v) <= budget``.

    ``measure`` maps a setting (a resolution, a sequence length, a batch size) to the
    bytes it needs, measured; it must not decrease as the setting grows (memory does
    not shrink with more pixels or tokens), which is what makes binary search valid.
    Returns ``(v, probes)``: ``v`` is ``None`` when even ``low`` does not fit;
    ``probes`` maps every setting measured to its bytes (about log2 of the number of
    candidates, plus one).

    Shown in chapter 20.
    """
    for name, v in (("low", low), ("high", high), ("step", step), ("budget", budget)):
        if isinstance(v, bool) or int(v) != v:
            raise ValueError(f"{name} must be an integer, got {v!r}")
    if step < 1 or low > high:
        raise ValueError(f"need step >= 1 and low <= high, got low={low}, high={high}, step={step}")
    probes: dict[int, int] = {}

    def fits(i: int) -> bool:
        v = low + i * step
        if v not in probes:
            probes[v] = int(measure(v))
        return probes[v] <= budget

    lo, hi = 0, (high - low) // step          # candidate indices
    if not fits(lo):
        return None, probes
    while lo < hi:                            # invariant: index lo fits
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return low + lo * step, probes


@dataclass
class AutoBatch:
    """Result of ``autobatch``: the chosen ``batch``; the fitted line
    ``bytes ≈ fixed + per_sample · batch``; ``target`` = fraction · budget (bytes);
    ``measured`` = {batch size: bytes} of the profiling runs. Shown in chapter 20."""

    batch: int
    fixed: float
    per_sample: float
    target: float
    measured: dict[int, int] = field(default_factory=dict)

    def predict(self, batch: int) -> float:
        """Bytes the fitted line predicts for ``batch`` samples."""
        return self.fixed + self.per_sample * batch


def autobatch(measure: Callable[[int], int], budget: int, fraction: float = 0.6,
              batch_sizes: Sequence[int] = (1, 2, 4, 8, 16), max_batch: int = 1024) -> AutoBatch:
    """Choose a batch size from measured memory, in the manner of Ultralytics' AutoBatch.

    ``measure(b)`` returns the bytes one training step with ``b`` samples needs. It is
    called for each of ``batch_sizes``; a least-squares line through the results gives
    the fixed bytes (weights, gradients, workspaces) and the bytes per sample; the
    chosen batch is the largest whole number whose predicted bytes are at most
    ``fraction · budget``, capped at ``max_batch``. (Ultralytics measures free CUDA memory
    for the budget, profiles 1, 2, 4, 8, 16 images at the training image size and uses
    60 % by default; it fits in log-log space, a power law, which for memory that grows
    linearly with the batch is the same line.) The fraction leaves room for what
    the profile did not see: fragmentation, larger temporaries, other processes.

    Raises ``ValueError`` when the measurements do not grow with the batch or when not
    even one sample fits.

    Shown in chapter 20.
    """
    sizes = sorted({int(b) for b in batch_sizes})
    if len(sizes) < 2 or sizes[0] < 1:
        raise ValueError(f"need at least two distinct positive batch sizes, got {batch_sizes!r}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if budget <= 0:
        raise ValueError(f"budget must be positive (bytes), got {budget}")
    measured = {b: int(measure(b)) for b in sizes}
    n = len(sizes)
    mean_b = sum(sizes) / n
    mean_m = sum(measured.values()) / n
    sxx = sum((b - mean_b) ** 2 for b in sizes)
    per_sample = sum((b - mean_b) * (measured[b] - mean_m) for b in sizes) / sxx
    fixed = mean_m - per_sample * mean_b
    if per_sample <= 0:
        raise ValueError(f"memory does not grow with the batch (slope {per_sample:.1f} bytes "
                         f"per sample); measured {measured}")
    target = fraction * budget
    batch = min(int((target - fixed) // per_sample), max_batch)
    if batch < 1:
        raise ValueError(f"not even one sample fits: {fraction:.0%} of the budget is "
                         f"{target:,.0f} bytes, one sample needs about {fixed + per_sample:,.0f}")
    return AutoBatch(batch=batch, fixed=fixed, per_sample=per_sample, target=target,
                     measured=measured)
