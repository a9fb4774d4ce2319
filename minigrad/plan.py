"""Where to checkpoint a chain of layers: uniform, sqrt(n), optimal and binomial plans.

The planners here know nothing about arrays or modules. They work on a
`ChainProfile`: for a chain ``x_0 -> layer_0 -> x_1 -> ... -> layer_{n-1} -> x_n``
it lists, per layer, the bytes of its input ``x_i``, which of its input and
output it saves for backward, the bytes of the other arrays it saves, and a
forward cost. `profile_chain` measures such a profile from real minigrad
layers with one taped dry run under the byte ledger; everything else is
arithmetic that can be tested on numbers alone.

The memory model (what `minigrad.checkpoint.checkpoint_sequential` does and the
ledger's ``m.peak["activations"]`` measures). A one-level plan has segment
starts ``0 = s_0 < s_1 < ... < s_{k-1} < n``; segment ``j`` is layers
``s_j .. s_{j+1} - 1`` (``s_k = n``). Like torch, every segment but the last is
checkpointed: its forward runs untaped and only its input ``x_{s_j}`` is kept;
the last segment runs taped. Writing ``U(p, q)`` for the bytes of the union of
the arrays that layers ``p .. q-1`` save (an array saved by two layers, such as
layer ``i``'s output that is layer ``i+1``'s input, counts once), the saved
activations peak at one of these moments:

* end of the forward pass:
  ``B_{k-2} + U(s_{k-1}, n)``, where ``B_j = |x_{s_0}| + ... + |x_{s_j}|`` is the
  checkpointed inputs' bytes (``B_{-1} = 0``);
* end of segment ``j``'s recomputation during backward (later segments are
  already done and freed): ``B_{j-1} + |{x_{s_j}} ∪ U(s_j, s_{j+1})|``.

``peak = max`` of those ``k`` terms; `predict_peak` evaluates it. One
refinement: when the chain's input needs no grad and its first layers have no
parameters, a checkpointed segment whose output needs no grad records no
checkpoint at all (nothing kept, nothing recomputed, no term), exactly as
`minigrad.checkpoint` behaves.

Forward work. Each checkpointed layer runs its forward exactly once more
during backward, so a plan's recomputed work is the summed cost of the layers
before the last start ``s_{k-1}``. The cost `profile_chain` records is the
number of op executions (``Function.apply`` calls) the layer's forward makes in
the dry run, a deterministic count that equals what the ledger reports as
recomputed ops; pass your own ``cost`` (FLOPs, measured seconds) to a
`ChainProfile` for other units.

`optimal_segments` minimises the peak by dynamic programming (Chen et al.
2016 analyse uniform segments; for heterogeneous layers the best boundaries
must be searched): for a candidate peak ``M``, ``g(i)`` is the smallest ``B`` with which a
plan can place a start at ``i`` while every finished term stays ``<= M``;
keeping the smallest ``B`` is optimal for every continuation, so feasibility of
``M`` is one ``O(n^2)`` pass, and a binary search over integer bytes finds the
smallest feasible ``M`` (jumping straight to the next value at which a pass can
change: about 20 passes for 1000 layers, well under a second). With a budget,
the least recomputation is simply the cheapest feasible last start (its cost
is a prefix sum); among plans with that last start the one with the smallest
peak is returned. `tests/test_plan.py` checks all of this against brute force
on numbers, `tests/test_exhaustive.py` against the ledger on real chains.

Revolve plans (`revolve`, multi-level) are predicted too: `predict_peak` and
`recompute_cost` accept them, replaying the action list (the snapshots held
plus the one taped layer), so one frontier can show both kinds of plan.
"""
from __future__ import annotations

import gc
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from minigrad.multilevel import RevolvePlan, _check_int, revolve  # noqa: F401  (re-exported: plan.revolve)

__all__ = [
    "SegmentPlan",
    "ChainProfile",
    "uniform",
    "sqrt_segments",
    "explicit",
    "predict_peak",
    "recompute_cost",
    "optimal_segments",
    "optimal_segments_from_profile",
    "min_peak_for_each_last_start",
    "profile_chain",
    "revolve",
    "RevolvePlan",
]


@dataclass(frozen=True)
class SegmentPlan:
    """A one-level checkpointing plan for ``n`` layers.

    ``starts``: first layer of every segment (sorted, starting at 0); all
    segments but the last are checkpointed. ``predicted_peak_activations``
    (bytes) and ``recompute_cost`` (profile cost units, see the module
    docstring) are filled in when the plan was computed from a profile.
    Accepted by ``checkpoint_sequential`` through ``.starts``."""

    n: int
    starts: tuple[int, ...]
    predicted_peak_activations: int | None = None
    recompute_cost: int | None = None
    kind: str = "segments"

    @property
    def segments(self) -> list[tuple[int, int]]:
        """``[(start, stop), ...]`` half-open layer ranges, one per segment."""
        bounds = list(self.starts) + [self.n]
        return [(bounds[j], bounds[j + 1]) for j in range(len(self.starts))]

    @property
    def checkpointed_layers(self) -> int:
        """Layers that are recomputed (all but the last segment's)."""
        return self.starts[-1]

    @property
    def n_layer_calls(self) -> int:
        """Layer calls over one forward and backward: ``n`` plus one recomputation
        of every checkpointed layer."""
        return self.n + self.starts[-1]

    @property
    def actions(self) -> tuple:
        """What ``checkpoint_sequential`` does, in order, in the vocabulary of
        `minigrad.multilevel.revolve_actions` plus ``("tape", i)`` (run layer
        ``i`` with taping, keeping its saved arrays) and ``("reverse", i)``
        (back-propagate through it, freeing them)."""
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


def _check_starts(starts: Sequence[int], n: int) -> tuple[int, ...]:
    starts = tuple(int(s) for s in starts)
    if not starts or starts[0] != 0:
        raise ValueError(f"segment starts must begin with 0, got {list(starts)}")
    if any(b <= a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"segment starts must be strictly increasing, got {list(starts)}")
    if starts[-1] >= n:
        raise ValueError(f"segment starts must be < n={n} (allowed 0 .. {n - 1}), got {list(starts)}")
    return starts


def uniform(n: int, segments: int) -> SegmentPlan:
    """``segments`` segments of ``n // segments`` layers, the last taking the rest.

    The same split as ``torch.utils.checkpoint.checkpoint_sequential(functions,
    segments, input)``. ``1 <= segments <= n``."""
    n = _check_int("n", n, 1)
    segments = _check_int("segments", segments, 1, n)
    size = n // segments
    return SegmentPlan(n=n, starts=tuple(j * size for j in range(segments)))


def sqrt_segments(n: int) -> SegmentPlan:
    """Chen et al.'s rule: about ``sqrt(n)`` segments of about ``sqrt(n)`` layers
    (``round(sqrt(n))`` segments, split as in `uniform`)."""
    n = _check_int("n", n, 1)
    return uniform(n, max(1, min(n, round(math.sqrt(n)))))


def explicit(n: int, starts: Sequence[int]) -> SegmentPlan:
    """A plan with the given segment starts (validated)."""
    n = _check_int("n", n, 1)
    return SegmentPlan(n=n, starts=_check_starts(starts, n))


@dataclass(frozen=True)
class ChainProfile:
    """Sizes and costs of a chain ``x_0 -> layer_0 -> ... -> layer_{n-1} -> x_n``.

    All sizes in bytes (ints), lists of length ``n`` unless noted:
    ``input_bytes[i]`` = ``|x_i|``; ``output_bytes`` = ``|x_n|`` (one int);
    ``saves_input[i]`` / ``saves_output[i]``: layer ``i`` saves ``x_i`` / ``x_{i+1}``
    for backward; ``own_bytes[i]``: bytes of the other arrays it saves (each
    counted once); ``cost[i]``: forward work of layer ``i`` (any non-negative unit);
    ``requires_grad`` (optional, length ``n + 1``): whether ``x_0 .. x_n`` require
    grad (default: all do). A checkpointed segment whose output does not require
    grad (a parameter-free prefix on an input that needs no grad) records no
    node: it keeps nothing and is never recomputed.
    """

    input_bytes: tuple[int, ...]
    output_bytes: int
    saves_input: tuple[bool, ...]
    saves_output: tuple[bool, ...]
    own_bytes: tuple[int, ...]
    cost: tuple[int, ...]
    requires_grad: tuple[bool, ...] | None = None

    def __post_init__(self):
        n = len(self.input_bytes)
        if n < 1:
            raise ValueError("a chain needs at least one layer")
        for name in ("saves_input", "saves_output", "own_bytes", "cost"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, expected n={n}")
        if min(self.input_bytes) < 0 or min(self.own_bytes) < 0 or self.output_bytes < 0:
            raise ValueError("byte counts must be non-negative")
        if min(self.cost) < 0:
            raise ValueError("costs must be non-negative")
        if self.requires_grad is not None:
            rg = list(self.requires_grad)
            if len(rg) != n + 1:
                raise ValueError(f"requires_grad has {len(rg)} entries, expected n + 1 = {n + 1}")
            if not rg[-1]:
                raise ValueError("the chain's output does not require grad: there is no backward to plan")
            if any(a and not b for a, b in zip(rg, rg[1:])):
                raise ValueError(f"requires_grad must stay True once True along the chain, got {rg}")

    @property
    def first_grad(self) -> int:
        """``f``: the first boundary ``x_f`` that requires grad (0 unless the chain's
        input does not and its first layers have no parameters)."""
        if self.requires_grad is None:
            return 0
        return list(self.requires_grad).index(True)

    @property
    def n(self) -> int:
        return len(self.input_bytes)

    # --- the two quantities of the model, as (n+1) x (n+1) integer tables -----
    def _tables(self):
        """``V[p, q] = |{x_p} ∪ U(p, q)|`` and ``U[p, q]`` for ``0 <= p < q <= n``."""
        n = self.n
        a = np.array(list(self.input_bytes) + [self.output_bytes], dtype=np.int64)  # |x_0..x_n|
        ki = np.array(self.saves_input, dtype=bool)
        ko = np.array(self.saves_output, dtype=bool)
        own = np.concatenate([[0], np.cumsum(np.array(self.own_bytes, dtype=np.int64))])
        # x_b (0 < b < n) is saved by layer b (as input) and/or layer b-1 (as output).
        # Inside a segment [p, q) an interior boundary b (p < b < q) has both
        # candidate savers in the segment, so it counts when either saves it.
        e = np.zeros(n + 1, dtype=np.int64)
        e[1:n] = a[1:n] * (ki[1:] | ko[:-1])
        ecum = np.concatenate([[0], np.cumsum(e)])  # ecum[b] = sum e[0..b-1]
        p = np.arange(n + 1)[:, None]
        q = np.arange(n + 1)[None, :]
        valid = q > p
        qm1 = np.clip(q - 1, 0, n - 1)
        pc = np.clip(p, 0, n - 1)
        interior = ecum[np.maximum(q, p + 1)] - ecum[np.minimum(p + 1, n + 1)]  # sum e[p+1 .. q-1]
        interior = np.where(q > p + 1, interior, 0)
        tail = a[q] * ko[qm1]  # x_q saved by layer q-1 as its output
        body = own[q] - own[p] + interior + tail
        U = np.where(valid, body + a[p] * ki[pc], 0)
        V = np.where(valid, body + a[p], 0)
        return U.astype(np.int64), V.astype(np.int64), a


def predict_peak(profile: ChainProfile, plan) -> int:
    """Peak saved-activation bytes of running the chain under ``plan`` (then its
    backward), by the model in the module docstring.

    ``plan``: segment starts (a sequence), a `SegmentPlan`, or a revolve plan
    (`minigrad.multilevel.RevolvePlan`, see `_revolve_peak`)."""
    if getattr(plan, "kind", None) == "revolve":
        return _revolve_peak(profile, plan)
    starts = _check_starts(getattr(plan, "starts", plan), profile.n)
    U, V, a = profile._tables()
    return _peak_of(U, V, a, profile.n, starts, profile.first_grad)


def recompute_cost(profile: ChainProfile, plan) -> int:
    """Forward work redone in backward: the cost of every layer of a checkpointed
    segment (every layer before the last start, except a leading run of
    segments whose outputs need no grad: those record no checkpoint). For a
    revolve plan: every layer execution beyond the first forward of each layer."""
    if getattr(plan, "kind", None) == "revolve":
        _check_revolve(profile, plan)
        runs = [0] * profile.n  # executions of each layer over forward and backward
        for act in plan.actions:
            if act[0] == "advance":
                for i in range(act[1], act[2]):
                    runs[i] += 1
            elif act[0] == "taped":
                runs[act[1]] += 1
        return int(sum(c * (r - 1) for c, r in zip(profile.cost, runs)))
    starts = _check_starts(getattr(plan, "starts", plan), profile.n)
    f = profile.first_grad
    bounds = list(starts) + [profile.n]
    return int(sum(sum(profile.cost[bounds[j]:bounds[j + 1]])
                   for j in range(len(starts) - 1) if bounds[j + 1] >= f))


def _check_revolve(profile, plan):
    if plan.n != profile.n:
        raise ValueError(f"the revolve plan is for n={plan.n} layers, the profile has {profile.n}")
    if profile.first_grad > 1:
        raise ValueError("revolve predictions assume every checkpoint records a node: the chain's "
                         "input must require grad or its first layer have parameters "
                         f"(first_grad <= 1, got {profile.first_grad})")


def _revolve_peak(profile: ChainProfile, plan) -> int:
    """Peak of a binomial schedule: at every taped step, the snapshots held (each
    a layer input ``x_b``, kept by a checkpoint node) together with what the one
    taped layer saves; an array that is both counts once."""
    _check_revolve(profile, plan)
    a = list(profile.input_bytes) + [profile.output_bytes]
    held: set[int] = set()
    peak = 0
    for act in plan.actions:
        if act[0] == "snapshot":
            held.add(act[1])
        elif act[0] == "free":
            held.discard(act[1])
        elif act[0] == "taped":
            i = act[1]
            live = sum(a[b] for b in held) + profile.own_bytes[i]
            if profile.saves_input[i] and i not in held:
                live += a[i]
            if profile.saves_output[i] and i + 1 not in held:
                live += a[i + 1]
            peak = max(peak, live)
        peak = max(peak, sum(a[b] for b in held))
    return int(peak)


def _peak_of(U, V, a, n, starts, f=0):
    """The model's peak for ``starts`` (see the module docstring); a checkpointed
    segment ending before ``f`` makes no node (no term, nothing kept)."""
    bounds = list(starts) + [n]
    kept, peak = 0, 0  # kept: B_{j-1}, checkpointed inputs held while segment j is live
    for j in range(len(starts) - 1):
        if bounds[j + 1] < f:
            continue
        peak = max(peak, kept + int(V[bounds[j], bounds[j + 1]]))
        kept += int(a[bounds[j]])
    return max(peak, kept + int(U[starts[-1], n]))  # end of forward: last segment taped


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
        self.U, self.V, self.a = profile._tables()
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
        return (_peak_of(self.U, self.V, self.a, self.n, starts, self.f), starts), r

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


def optimal_segments_from_profile(profile: ChainProfile, budget_bytes: int | None = None) -> SegmentPlan:
    """The optimal one-level plan for ``profile`` (see `optimal_segments`)."""
    n = profile.n
    solver = _Solver(profile)
    floor = 0  # a known lower bound on every plan's peak
    if budget_bytes is None:
        budget = floor = solver.best()[0]
    else:
        budget = _check_int("budget_bytes", budget_bytes, 0)
    # Least recomputation under the budget. The recomputed layers are those from
    # the first node's start e* (0 in the usual case) to the last start, so the
    # cost is prefix[last] - prefix[e*]: find the cheapest feasible pair.
    prefix = np.concatenate([[0], np.cumsum(np.array(profile.cost, dtype=np.int64))])
    options = []  # (cost, e*, last)
    for e in solver.firsts:
        r = solver.run(budget, e)
        options += [(int(prefix[p] - prefix[e]), e, int(p)) for p in np.nonzero(r.last_term <= budget)[0]]
    if not options:
        best = solver.best()[0]
        raise ValueError(
            f"budget_bytes={budget} is infeasible: the smallest achievable peak of saved "
            f"activations for this chain is {best} bytes; allowed: budget_bytes >= {best}")
    cheapest = min(o[0] for o in options)
    # Among plans with that cost (several when some layers cost 0), the smallest
    # peak; remaining ties go to the earliest last start.
    candidates = []
    for c, e, p in options:
        if c == cheapest:
            peak, starts = solver.min_peak(last=p, first=e, hi=budget, lo=floor)
            candidates.append((peak, p, starts))
    peak, _, starts = min(candidates)
    predicted = predict_peak(profile, starts)
    assert predicted == peak <= budget, (predicted, peak, budget)
    return SegmentPlan(n=n, starts=starts, predicted_peak_activations=predicted,
                       recompute_cost=recompute_cost(profile, starts), kind="optimal")


def min_peak_for_each_last_start(profile: ChainProfile) -> list[tuple[int, int, tuple[int, ...]]]:
    """The memory–compute frontier's raw points: for each last start ``p`` (and,
    when the chain begins with layers whose outputs need no grad, each choice of
    the first checkpoint there), the plan with the smallest peak, as
    ``(recompute_cost, peak_bytes, starts)`` sorted by cost.

    One binary search per ``p``: meant for chains of up to a few hundred layers."""
    solver = _Solver(profile)
    out = []
    for last in range(profile.n):
        for e in solver.firsts:
            found = solver.min_peak(last=last, first=e) if e <= last else None
            if found is not None:
                peak, starts = found
                out.append((recompute_cost(profile, starts), peak, starts))
    return sorted(set(out))


def optimal_segments(layers, x=None, budget_bytes: int | None = None) -> SegmentPlan:
    """The one-level segmentation of ``layers`` with the smallest peak of saved
    activations (``m.peak["activations"]`` of forward + backward), or, with
    ``budget_bytes``, the least recomputed forward work among plans whose peak
    is within the budget (ties: the smaller peak).

    ``layers``: a list of minigrad callables (profiled on ``x`` by
    `profile_chain`) or a `ChainProfile`. Returns a `SegmentPlan` with
    ``predicted_peak_activations`` (bytes) and ``recompute_cost`` (op executions).
    Raises ValueError naming the smallest feasible budget if ``budget_bytes``
    is below it."""
    if isinstance(layers, ChainProfile):
        profile = layers
    else:
        if x is None:
            raise ValueError("optimal_segments(layers, x): x (the chain's input Tensor) is required")
        profile = profile_chain(layers, x)
    return optimal_segments_from_profile(profile, budget_bytes)


def _saved_activation_holds(ledger):
    """``{buffer key: (activation holds, category, nbytes)}`` of every counted array.

    The cyclic garbage collector is paused while the ledger is read: a collection
    triggered mid-read would run finalizers that remove entries from the dict."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        entries = list(ledger.entries.items())
    finally:
        if was_enabled:
            gc.enable()
    return {k: (e.roles.get("activations", 0), e.cat, e.nbytes) for k, e in entries}


def profile_chain(layers, x) -> ChainProfile:
    """Measure a `ChainProfile` of ``layers`` on input ``x`` by one taped dry run.

    ``layers``: callables Tensor -> Tensor (minigrad modules); ``x``: the chain's
    input Tensor, as it will be passed to ``checkpoint_sequential`` (whether it
    requires grad matters: a first layer without parameters saves nothing for an
    input that does not). The run is taped layer by layer; which buffers each
    layer saved for backward is read from the byte ledger (rule 2 and 3 of
    `minigrad.memory`: a buffer counts once; saved views of parameters are
    parameters, not activations). The RNG state is restored afterwards, so the
    dry run does not shift the dropout masks of the real run; layers with other
    mutable state (BatchNorm running statistics) are updated once more, as in
    any extra forward pass. ``cost[i]`` is the number of ops layer ``i``'s forward
    executes.

    Raises ValueError if the chain is not a plain chain the model covers: a
    layer whose output shares its input's buffer (``x_{i+1}`` a view of ``x_i``),
    or an array saved by two layers that is not the boundary between them."""
    from minigrad import memory
    from minigrad.tensor import Tensor, enable_grad

    layers = list(layers)
    if not layers:
        raise ValueError("profile_chain needs at least one layer")
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a minigrad Tensor, got {type(x).__name__}")
    ledger = memory._LEDGER
    key = lambda arr: id(ledger._base(arr))  # noqa: E731  (the ledger's buffer identity)
    rng_state = _get_rng_state()
    input_bytes, saves_in, saves_out, own_bytes, cost = [], [], [], [], []
    requires_grad = [bool(x.requires_grad)]
    owner: dict[int, int] = {}  # private saved buffer -> layer that saved it
    boundaries: dict[int, int] = {}  # buffer of x_i -> i
    outputs = []  # keep every boundary alive so buffer ids stay unique during the run
    h = x
    try:
        with enable_grad(), memory.track(record_timeline=False) as m:
            for i, layer in enumerate(layers):
                before = _saved_activation_holds(ledger)
                ops0 = m.ops("forward")
                out = layer(h)
                if not isinstance(out, Tensor):
                    raise TypeError(f"layer {i} returned {type(out).__name__}, expected a Tensor")
                cost.append(m.ops("forward") - ops0)
                after = _saved_activation_holds(ledger)
                k_in, k_out = key(h.data), key(out.data)
                if k_in == k_out:
                    raise ValueError(
                        f"layer {i} ({type(layer).__name__}) returns a tensor sharing its input's "
                        f"buffer; the planner's chain model needs a new array per layer")
                s_in = s_out = False
                own = 0
                for k, (holds, cat, nbytes) in after.items():
                    if holds <= before.get(k, (0,))[0]:
                        continue  # not saved (again) by this layer
                    if cat != "activations":
                        continue  # a parameter, buffer, ... (not counted as activations)
                    if k == k_in:
                        s_in = True
                    elif k == k_out:
                        s_out = True
                    else:
                        if k in boundaries:
                            raise ValueError(
                                f"layer {i} saves the input of layer {boundaries[k]}; the planner's "
                                f"chain model covers layers that save only their own input, output "
                                f"and private arrays")
                        if k in owner:
                            raise ValueError(
                                f"layers {owner[k]} and {i} both save the same {nbytes}-byte array, "
                                f"which is not the boundary between them; the planner's chain model "
                                f"cannot account for it")
                        owner[k] = i
                        own += nbytes
                boundaries[k_in] = i
                input_bytes.append(int(ledger._base(h.data).nbytes))
                saves_in.append(s_in)
                saves_out.append(s_out)
                own_bytes.append(int(own))
                requires_grad.append(bool(out.requires_grad))
                outputs.append(out)
                h = out
            output_bytes = int(ledger._base(h.data).nbytes)
    finally:
        outputs.clear()
        h = out = None
        _set_rng_state(rng_state)
    return ChainProfile(input_bytes=tuple(input_bytes), output_bytes=output_bytes,
                        saves_input=tuple(saves_in), saves_output=tuple(saves_out),
                        own_bytes=tuple(own_bytes), cost=tuple(cost),
                        requires_grad=tuple(requires_grad))


def _get_rng_state():
    try:
        from minigrad import random as mrandom
    except ImportError:
        return None
    return mrandom.get_rng_state()


def _set_rng_state(state):
    if state is not None:
        from minigrad import random as mrandom
        mrandom.set_rng_state(state)
