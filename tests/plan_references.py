"""Reference restatements of minigrad's planners, for tests only: each evaluates its
planner's recurrence as written (memoised, exponential in the worst case), so that the
fast solvers in `minigrad.plan` are checked against the readable form.

* `optimal_segments_reference`: the recurrences of `minigrad.plan.optimal`'s docstring.
* `rotor_reference`: the recurrence of `minigrad.plan.nested`'s docstring (rotor's
  least recomputed work at a budget).
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from minigrad._validation import check_int
from minigrad.plan import ChainProfile, SegmentPlan, predict_peak, recompute_cost
from minigrad.plan.nested import _INF, _chain_arrays, _costs, _number


def optimal_segments_reference(profile: ChainProfile, budget_bytes: int | None = None) -> SegmentPlan:
    """The optimum of `optimal_segments`, straight from the recurrences of the module
    docstring (exponential in the worst case: for small chains and for checking).

    Args:
        profile: a `ChainProfile`.
        budget_bytes: optional peak budget (bytes).

    Returns:
        A `SegmentPlan` with the same peak and recomputation as `optimal_segments` (ties
        may pick other starts).

    Raises:
        ValueError: an infeasible budget (the smallest feasible one is named).

    Example:
        >>> from minigrad.plan import ChainProfile, optimal_segments
        >>> profile = ChainProfile(input_bytes=(64, 8, 64, 8), output_bytes=8,
        ...                        saves_input=(True,) * 4, saves_output=(False,) * 4,
        ...                        own_bytes=(256, 32, 256, 32), cost=(10, 1, 10, 1))
        >>> ref = optimal_segments_reference(profile)
        >>> fast = optimal_segments(profile)
        >>> (ref.predicted_peak_activations, ref.recompute_cost) == (
        ...     fast.predicted_peak_activations, fast.recompute_cost)
        True
    """
    U, V, a = profile.tables()
    n = profile.n
    rg = profile.requires_grad or (True,) * (n + 1)
    cost = [Fraction(c) for c in profile.cost]

    @lru_cache(maxsize=None)
    def peak(i, K):
        best = K + int(U[i, n])
        for j in range(i + 1, n):
            rest = peak(j, K) if not rg[j] else max(K + int(V[i, j]), peak(j, K + int(a[i])))
            best = min(best, rest)
        return best

    M = peak(0, 0) if budget_bytes is None else check_int("budget_bytes", budget_bytes, 0,
                                                          where="optimal_segments_reference")

    @lru_cache(maxsize=None)
    def work(i, K):  # (recomputation, peak, starts): the cheapest, then lowest, feasible suffix
        options = [(Fraction(0), K + int(U[i, n]), (i,))] if K + int(U[i, n]) <= M else []
        for j in range(i + 1, n):
            term, c, kept = (0, 0, K) if not rg[j] else (K + int(V[i, j]), sum(cost[i:j]), K + int(a[i]))
            rest = work(j, kept) if term <= M else None
            if rest is not None:
                options.append((c + rest[0], max(term, rest[1]), (i,) + rest[2]))
        return min(options, key=lambda o: o[:2]) if options else None

    best = work(0, 0)
    if best is None:
        raise ValueError(f"optimal_segments_reference: budget_bytes={M} is infeasible; allowed: "
                         f"budget_bytes >= {peak(0, 0)}")
    starts = best[2]
    return SegmentPlan(n=profile.n, starts=tuple(starts),
                       predicted_peak_activations=predict_peak(profile, starts),
                       recompute_cost=recompute_cost(profile, starts), kind="reference")


def rotor_reference(profile: ChainProfile, budget_bytes: int, cost=None):
    """The least recomputed work of a nested schedule whose peak fits ``budget_bytes``:
    the recurrence of `minigrad.plan.nested`'s docstring, word for word (``inf`` if
    nothing fits).

    A memoised recursion on exact bytes, meant for reading and for small chains;
    `rotor` finds the same optimum (and the schedule) from Pareto fronts.

    Example:
        >>> from minigrad.plan import ChainProfile, rotor
        >>> profile = ChainProfile(input_bytes=(64,) * 6, output_bytes=64, saves_input=(True,) * 6,
        ...                        saves_output=(False,) * 6, own_bytes=(128,) * 6, cost=(10,) * 6)
        >>> rotor_reference(profile, 640) == rotor(profile, budget_bytes=640).recompute_cost
        True
    """
    a, si, so, own = _chain_arrays(profile)
    work = _costs(profile, cost) + [0]  # the loss: layer n, never recomputed

    @lru_cache(maxsize=None)
    def C(s, e, h, m):  # least work for layers s .. e-1 with m bytes left; h: x_s already held
        if m < 0:
            return _INF
        if s == e:
            return 0
        best = C(s + 1, e, so[s], m - (own[s] + so[s] * a[s + 1] + si[s] * (1 - h) * a[s]))  # Taped(s)
        m_ck = m - (1 - h) * a[s]                                     # a checkpoint keeps x_s
        for j in range(s + 1, e):                                     # Checkpointed(s, j, inner)
            best = min(best, sum(work[s:j]) + C(s, j, 1, m_ck) + C(j, e, 0, m_ck))
        return best
    best = C(0, profile.n + 1, 0, check_int("budget_bytes", budget_bytes, 0, where="rotor_reference"))
    return best if best == _INF else _number(best)
