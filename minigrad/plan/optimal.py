"""The optimal segment plan: a readable reference dynamic program and a fast solver; and
the optimal one-level schedule, which may also tape a layer and keep it.

Scope: `optimal_segments` is optimal among *segment plans* (contiguous segments, every
one checkpointed except the last, as ``checkpoint_sequential`` runs a list of starts). It
excludes keeping a costly layer taped between two checkpoints;
`minigrad.plan.nested.optimal_one_level` includes that branch (rotor's ``Taped`` at depth
1, returning a nested schedule) and is never worse.

Notation of `minigrad.plan.chain`: ``U(p, q)`` the bytes layers ``p .. q-1`` save (the
loss's bytes added when ``q = n``), ``V(p, q) = |{x_p} ∪ U(p, q)|``, ``a_b = |x_b|``,
``C(p, q)`` the forward cost of layers ``p .. q-1``. With ``K`` the bytes of checkpointed
inputs already kept when a segment starts at ``i``, a plan's peak obeys

    peak(i, K) = min( K + U(i, n),                                 (i is the last start)
                      min over i < j < n of max(K + V(i, j), peak(j, K + a_i)) )

and ``peak(0, 0)`` is the smallest peak of any one-level plan. Under a budget ``M`` the
least recomputation obeys

    work(i, K) = min( 0                                   if K + U(i, n) <= M,
                      min over j with K + V(i, j) <= M of C(i, j) + work(j, K + a_i) )

(a segment ``[i, j)`` whose output ``x_j`` needs no grad records nothing: no term, ``K``
unchanged, no cost). ``tests/plan_references.py`` evaluates these recurrences as written,
memoised on ``(i, K)``: short and obviously right, but ``K`` can take exponentially many
values. `optimal_segments` gets the same optimum fast: for a candidate peak ``M``, one
``O(n^2)`` pass computes, for every start ``i``, the smallest ``K`` with which a plan can
reach ``i`` with every finished term ``<= M`` (keeping the smallest ``K`` is best for every
continuation); a binary search over ``M`` (jumping to the next value at which the pass can
change) finds the smallest feasible peak, about 20 passes for 1000 layers. With a budget,
the least recomputation is the cheapest feasible last start (the recomputed layers are
those before it); among those plans the smallest peak wins. `tests/test_plan.py`
checks both against each other and against brute force on numbers,
`tests/test_exhaustive.py` against the ledger on real chains.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from minigrad._validation import check_int
from minigrad.plan.chain import ChainProfile, exact_fraction, predict_peak, recompute_cost, segment_peak
from minigrad.plan.profile import as_profile
from minigrad.plan.segments import SegmentPlan

__all__ = ["optimal_segments", "min_peak_for_each_last_start"]


def _plan(profile, starts, kind):
    return SegmentPlan(n=profile.n, starts=tuple(starts), predicted_peak_activations=predict_peak(profile, starts),
                       recompute_cost=recompute_cost(profile, starts), kind=kind)


# --- the fast solver -------------------------------------------------------------------------
_INF = np.iinfo(np.int64).max // 4


class _Pass:
    """The result of one DP pass for a candidate peak ``M`` (bytes).

    ``before[i]``: the least checkpointed-input bytes kept *before* a start at
    ``i`` over all partial plans whose finished terms are ``<= M`` (``_INF`` if
    none); ``pred[i]``: that plan's previous start; ``last_term[p]``: the
    end-of-forward term if the last segment starts at ``p``; ``next_value``:
    the smallest term that was rejected. The pass is identical for every
    candidate in ``[M, next_value)``, which lets the search jump over them."""

    __slots__ = ("before", "pred", "last_term", "next_value")


def _dp_pass(VT, Ulast, a, n, M, first=0, f=0):
    """One feasibility pass for the candidate peak ``M``.

    Plans start at ``first`` (``0``, or a start ``e* < f`` after which the
    segments before it made no node) and place further starts only at ``f`` or
    later, so every checkpointed segment counted here records a node."""
    r = _Pass()
    before = np.full(n, _INF, dtype=np.int64)
    pred = np.full(n, -1, dtype=np.int64)
    before[first] = 0
    g = np.full(n, _INF, dtype=np.int64)  # g[p] = before[p] + |x_p|: inputs kept once p is checkpointed
    g[first] = a[first]
    rejected = _INF
    for i in range(max(first + 1, f), n):
        # segment [p, i) checkpointed: its term is (inputs kept before p) + V[p, i]
        term = before[:i] + VT[i, :i]
        ok = term <= M
        if not ok.all():
            # (unreachable p have before = _INF: their terms are never the next value)
            rejected = min(rejected, int(np.where(before[:i] < _INF, term, _INF).min(initial=_INF,
                                                                                where=~ok)))
        cand = np.where(ok, g[:i], _INF)
        p = int(np.argmin(cand))
        if cand[p] < _INF:
            before[i] = cand[p]
            g[i] = cand[p] + a[i]
            pred[i] = p
    last_term = np.where(before < _INF, before + Ulast, _INF)
    over = last_term[(last_term > M) & (last_term < _INF)]
    if over.size:
        rejected = min(rejected, int(over.min()))
    r.before, r.pred, r.last_term, r.next_value = before, pred, last_term, rejected
    return r


def _path(pred, last, first=0):
    starts = [int(last)]
    while starts[-1] != first:
        starts.append(int(pred[starts[-1]]))
    if first != 0:
        starts.append(0)  # the leading segment [0, first): no node, nothing kept
    return tuple(reversed(starts))


class _Solver:
    """Binary search of the smallest feasible peak over DP passes."""

    def __init__(self, profile: ChainProfile):
        self.n = profile.n
        self.f = profile.first_grad
        self.U, self.V, self.a = profile.tables()
        self.VT = np.ascontiguousarray(self.V.T)  # row i = V[:, i], contiguous for the pass
        self.Ulast = np.ascontiguousarray(self.U[: self.n, self.n])
        # a bound no plan exceeds: every boundary kept plus everything saved
        self.ceiling = int(self.a.sum() + self.U[0, self.n])
        # every layer from f - 1 on is taped at some moment of every plan (its
        # segment ends at f or later: a node or the last segment), with its saved bytes
        taped = np.arange(max(self.f - 1, 0), self.n)
        self.floor = int(self.U[taped, taped + 1].max())
        # where the plan may start counting: 0, or any e* in [1, f-1] (see _dp_pass)
        self.firsts = [0] + list(range(1, min(self.f, self.n)))

    def run(self, M, first=0):
        return _dp_pass(self.VT, self.Ulast, self.a, self.n, M, first, self.f)

    def plan_at(self, M, last=None, first=0):
        """``(peak, starts)`` of the pass's plan at ``M`` (None if infeasible);
        with ``last`` the last start is fixed, otherwise the smallest last term wins."""
        r = self.run(M, first)
        if last is None:
            last = int(np.argmin(r.last_term))
        if r.last_term[last] > M:
            return None, r
        starts = _path(r.pred, last, first)
        return (segment_peak(self.U, self.V, self.a, self.n, starts, self.f), starts), r

    def min_peak(self, last=None, first=0, hi=None, lo=0):
        """``(peak, starts)``: the smallest peak (bytes) of the plans starting their
        nodes at ``first`` (and with last start ``last``), or None if there is none."""
        best = self.plan_at(self.ceiling if hi is None else hi, last, first)[0]
        if best is None:
            return None
        hi = best[0]
        lo = max(lo, self.floor)
        while lo < hi:
            mid = (lo + hi) // 2
            found, r = self.plan_at(mid, last, first)
            if found is None:
                # the pass is the same for every M below the next rejected term
                lo = max(mid + 1, min(r.next_value, hi))
            else:
                best = found
                hi = found[0]  # the plan found may beat mid
        return best

    def best(self):
        """The smallest peak over all plans, and a plan that attains it."""
        return min(self.min_peak(first=e) for e in self.firsts)


def min_peak_for_each_last_start(profile: ChainProfile) -> list[tuple]:
    """The memory–compute frontier's raw points: for each last start ``p`` (and, when the
    chain begins with layers whose outputs need no grad, each choice of the first
    checkpoint there), the plan with the smallest peak.

    Returns:
        ``[(recompute_cost, peak_bytes, starts), ...]`` sorted by cost.

    One binary search per ``p``: meant for chains of up to a few hundred layers.

    Example:
        >>> from minigrad.plan.chain import ChainProfile
        >>> profile = ChainProfile(input_bytes=(64, 8, 64, 8), output_bytes=8,
        ...                        saves_input=(True,) * 4, saves_output=(False,) * 4,
        ...                        own_bytes=(256, 32, 256, 32), cost=(10, 1, 10, 1))
        >>> min_peak_for_each_last_start(profile)[:2]
        [(0, 720, (0,)), (10, 464, (0, 1))]
    """
    solver = _Solver(profile)
    out = []
    for last in range(profile.n):
        for e in solver.firsts:
            found = solver.min_peak(last=last, first=e) if e <= last else None
            if found is not None:
                peak, starts = found
                out.append((recompute_cost(profile, starts), peak, starts))
    return sorted(set(out))


def optimal_segments(layers, x=None, budget_bytes: int | None = None, loss=None,
                     cost="flops") -> SegmentPlan:
    """The one-level segmentation with the smallest peak of saved activations over one
    step (forward, loss, backward: ``m.peak["activations"]``), or, with ``budget_bytes``,
    the least recomputed forward work among the plans whose peak fits the budget.

    Args:
        layers: a list of minigrad callables (profiled on ``x`` by `profile_chain`), or a
            `ChainProfile`.
        x: the chain's input Tensor (needed with layers).
        budget_bytes: optional peak budget in bytes.
        loss: optional callable (chain output -> scalar Tensor) that the step applies; its
            saved arrays count at the end of the forward pass.
        cost: the unit of forward work: ``"flops"`` (default), ``"ops"``, or a sequence of
            ``n`` numbers (ints or floats), which also replaces a given profile's costs.

    Returns:
        A `SegmentPlan` with ``predicted_peak_activations`` (bytes) and ``recompute_cost``.
        Ties: the smaller recomputation (no budget) or the smaller peak (budget).

    Raises:
        ValueError: ``budget_bytes`` below the smallest feasible peak (the message names
            it), ``x`` missing, or ``loss`` given with a profile (profile with it instead).

    Example:
        >>> import minigrad
        >>> from minigrad import Tensor, nn
        >>> from minigrad.checkpoint import checkpoint_sequential
        >>> _ = minigrad.random.manual_seed(0)
        >>> layers = [nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4), nn.Tanh()]
        >>> x = Tensor(minigrad.random.randn(2, 4), requires_grad=True)
        >>> plan = optimal_segments(layers, x)
        >>> plan.starts, plan.predicted_peak_activations
        ((0, 3), 160)
        >>> checkpoint_sequential(layers, plan, x).shape
        (2, 4)
    """
    profile = as_profile(layers, x, loss, cost, "optimal_segments")
    solver = _Solver(profile)
    floor = 0  # a known lower bound on every plan's peak
    if budget_bytes is None:
        budget = floor = solver.best()[0]
    else:
        budget = check_int("budget_bytes", budget_bytes, 0, where="optimal_segments")
    # Least recomputation under the budget. The recomputed layers are those from the first
    # node's start e* (0 in the usual case) to the last start, so the cost is
    # prefix[last] - prefix[e*]: find the cheapest feasible pair (exact even for float costs).
    prefix = [Fraction(0)]
    for c in profile.cost:
        prefix.append(prefix[-1] + exact_fraction(c))
    options = []  # (cost, e*, last)
    for e in solver.firsts:
        r = solver.run(budget, e)
        options += [(prefix[p] - prefix[e], e, int(p)) for p in np.nonzero(r.last_term <= budget)[0]]
    if not options:
        best = solver.best()[0]
        raise ValueError(
            f"optimal_segments: budget_bytes={budget} is infeasible: the smallest achievable peak "
            f"of saved activations for this chain is {best} bytes; allowed: budget_bytes >= {best}")
    cheapest = min(o[0] for o in options)
    # Among plans with that cost (several when some layers cost 0), the smallest
    # peak; remaining ties go to the earliest last start.
    candidates = []
    for c, e, p in options:
        if c == cheapest:
            peak, starts = solver.min_peak(last=p, first=e, hi=budget, lo=floor)
            candidates.append((peak, p, starts))
    peak, _, starts = min(candidates)
    plan = _plan(profile, starts, "optimal")
    assert plan.predicted_peak_activations == peak <= budget, (plan, peak, budget)
    return plan
