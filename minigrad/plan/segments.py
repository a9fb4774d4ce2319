"""One-level plans: where the segments of a chain start (uniform, balanced, sqrt(n), explicit).

A one-level plan for a chain of ``n`` layers is the list of segment starts
``0 = s_0 < s_1 < ... < s_{k-1} < n``: segment ``j`` is layers ``s_j .. s_{j+1} - 1``
(``s_k = n``). As in ``torch.utils.checkpoint.checkpoint_sequential``, every segment but
the last is checkpointed: it runs untaped in the forward pass, keeps only its input, and
runs again, taped, when backward reaches it. Plans are plain data: ``checkpoint_sequential``
executes them, `minigrad.plan.chain` predicts their peak memory and recomputation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from minigrad._validation import check_int, check_segment_starts

__all__ = ["SegmentPlan", "uniform", "balanced", "sqrt_segments", "explicit"]


@dataclass(frozen=True)
class SegmentPlan:
    """A one-level checkpointing plan for ``n`` layers.

    Attributes:
        n: number of layers.
        starts: first layer of every segment (sorted, starting at 0); all segments but the
            last are checkpointed.
        predicted_peak_activations: bytes, when the plan was computed from a profile.
        recompute_cost: the forward work redone in backward (profile cost units, FLOPs by
            default), when the plan was computed from a profile.
        kind: how the plan was made ("segments", "optimal"); a label, not used to dispatch.

    Accepted by ``checkpoint_sequential`` (it reads ``starts``).

    Example:
        >>> plan = explicit(10, [0, 3, 7])
        >>> plan.segments
        [(0, 3), (3, 7), (7, 10)]
    """

    n: int
    starts: tuple[int, ...]
    predicted_peak_activations: int | None = None
    recompute_cost: float | None = None
    kind: str = "segments"

    def __post_init__(self):
        n = check_int("n", self.n, 1, where="SegmentPlan")
        object.__setattr__(self, "starts", check_segment_starts(self.starts, n, "SegmentPlan"))

    @property
    def segments(self) -> list[tuple[int, int]]:
        """``[(start, stop), ...]`` half-open layer ranges, one per segment."""
        bounds = list(self.starts) + [self.n]
        return [(bounds[j], bounds[j + 1]) for j in range(len(self.starts))]

    @property
    def n_layer_calls(self) -> int:
        """Layer calls over one forward and backward: ``n`` plus one recomputation of
        every checkpointed layer (all layers before the last start)."""
        return self.n + self.starts[-1]

    @property
    def actions(self) -> tuple:
        """What ``checkpoint_sequential`` does, in order, in the action vocabulary of
        ``minigrad.checkpoint.run_schedule``: ``("snapshot", i)``, ``("advance", i, j)``,
        ``("tape", i)`` (run layer ``i`` taped, keeping its saved arrays), ``("reverse", i)``
        (back-propagate through it, freeing them), ``("restore", i)``, ``("free", i)``."""
        out = []
        segs = self.segments
        for a, b in segs[:-1]:
            out += [("snapshot", a), ("advance", a, b)]
        a, b = segs[-1]
        out += [("tape", i) for i in range(a, b)]
        out += [("reverse", i) for i in reversed(range(a, b))]
        for a, b in reversed(segs[:-1]):
            out.append(("restore", a))
            out += [("tape", i) for i in range(a, b)]
            out += [("reverse", i) for i in reversed(range(a, b))]
            out.append(("free", a))
        return tuple(out)


def _n_and_segments(n, segments, where):
    n = check_int("n", n, 1, where=where)
    return n, check_int("segments", segments, 1, n, where=where)


def uniform(n: int, segments: int) -> SegmentPlan:
    """``segments`` segments of ``n // segments`` layers, the last taking the rest.

    The same split as ``torch.utils.checkpoint.checkpoint_sequential(functions, segments,
    input)``.

    Args:
        n: number of layers (>= 1).
        segments: number of segments, ``1 <= segments <= n``.

    Returns:
        A `SegmentPlan`.

    Example:
        >>> uniform(10, 3).starts
        (0, 3, 6)
    """
    n, segments = _n_and_segments(n, segments, "uniform")
    size = n // segments
    return SegmentPlan(n=n, starts=tuple(j * size for j in range(segments)))


def balanced(n: int, segments: int) -> SegmentPlan:
    """``segments`` segments whose lengths differ by at most one, the longer ones first.

    With ``n = q * segments + r``, the first ``r`` segments have ``q + 1`` layers and the
    others ``q``. Longer segments go first because the last segments are rebuilt (or, for
    the very last one, taped) while more checkpoints are held. Arguments as in `uniform`.

    Example:
        >>> balanced(10, 3).starts
        (0, 4, 7)
    """
    n, segments = _n_and_segments(n, segments, "balanced")
    q, r = divmod(n, segments)
    starts, s = [], 0
    for j in range(segments):
        starts.append(s)
        s += q + (1 if j < r else 0)
    return SegmentPlan(n=n, starts=tuple(starts))


def sqrt_segments(n: int) -> SegmentPlan:
    """Chen et al.'s rule, in the form "The square-root trick"'s theorem analyses: ``k = ceil(sqrt(n))``
    `balanced` segments (lengths ``ceil(n / k)`` or ``floor(n / k)``, so at most
    ``ceil(sqrt(n))`` layers each).

    Args:
        n: number of layers (>= 1).

    Returns:
        A `SegmentPlan`.

    Example:
        >>> sqrt_segments(8).starts
        (0, 3, 6)
    """
    n = check_int("n", n, 1, where="sqrt_segments")
    return balanced(n, math.isqrt(n - 1) + 1)  # ceil(sqrt(n)), exact for every n >= 1


def explicit(n: int, starts: Sequence[int]) -> SegmentPlan:
    """A plan with the given segment starts (validated: integers from 0, increasing, < n).

    Example:
        >>> explicit(10, [0, 3, 7]).n_layer_calls
        17
    """
    n = check_int("n", n, 1, where="explicit")
    return SegmentPlan(n=n, starts=check_segment_starts(starts, n, "explicit"))
