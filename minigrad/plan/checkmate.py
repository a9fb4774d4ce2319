"""Optimal rematerialization of a DAG: Checkmate's integer program, solved with HiGHS
(or, optionally, the same program with OR-Tools' CP-SAT: ``remat(..., solver="cp-sat")``).

The model (Jain et al., "Checkmate", MLSys 2020), restricted to the schedules minigrad's
engine can run. Nodes ``0 .. N-1`` of a `GraphProfile` are in execution order: the forward
ops, then the backward nodes in the order the engine runs them. Stage ``t`` computes node
``t``; before it, the stage may *recompute* earlier forward values. Binary variables:

* ``R[t, i]``: node ``i`` is computed in stage ``t`` (``R[t, t] = 1``);
* ``S[t, i]``: node ``i``'s value is kept in memory from stage ``t - 1`` into stage ``t``;
* ``FREE[t, i, k]``: value ``i`` is freed in stage ``t`` right after computing node ``k``.

Constraints: a node reads only values present (``R[t, j] <= R[t, i] + S[t, i]`` for each
dependency ``i`` of ``j``); a value kept must have been present (``S[t+1, i] <= S[t, i] +
R[t, i]``); and the memory ``U[t, k]`` while node ``k`` of stage ``t`` is computed — the
values kept plus those computed so far in the stage, minus those freed — stays within the
budget. Objective: the recomputed FLOPs ``sum C_i R[t, i]``.

The restriction (stated once): the forward pass runs once, as the user's code writes it,
and gradients are never recomputed, so ``R[t, i]`` can be 1 off the diagonal only for a
backward stage ``t`` and a forward node ``i``. The memory is Checkmate's: every live
value counts (outputs, private saved arrays, gradients in flight, the step's saved
inputs), which is at least what the ledger's ``activations`` counts (saved arrays only).

Improvements over the published program, each leaving the optimum unchanged (tested):

* ``"prune"``: ``S[t, i] = R[t, i] = 0`` for stages after the last one that can use ``i``
  (no later user, directly or through a recomputable descendant): setting them to 0 keeps
  every constraint satisfied and lowers neither memory nor cost;
* ``"forced"``: ``S[t, i] = 1`` where a later node reads ``i`` and ``i`` cannot be
  recomputed before then (a gradient; a forward value read later in the forward pass):
  the constraints already force it, so the feasible set is the same;
* ``"tight_free"``: ``FREE <= R[t, k]``, ``FREE <= 1 - S[t+1, i]``, ``FREE <= 1 - R[t, j]``
  for each later user ``j``, with ``FREE`` continuous: FREE appears only where it lowers
  the memory, so at an optimum it equals the product the published big-M linearisation
  forces, with no binary variable;
* ``"dominance"``: ``R[t, i] <= S[t+1, i] + sum R[t, j]`` and ``S[t, i] <= S[t+1, i] +
  sum R[t, j]`` over the readers ``j`` of ``i`` computed in stage ``t`` (a value is
  recomputed, or kept into a stage, only if that stage reads it or keeps it), and
  ``R[t, i] + S[t, i] <= 1`` (a value held is not recomputed); not for a buffer a view
  aliases. Proof: in any feasible schedule, clear such an ``R`` or ``S`` (nothing in
  the stage reads the value and the next stage does not keep it, so no dependency or
  keeping row needs it) and repeat; each step clears a 1, so it ends, at a schedule no
  costlier that meets the rows. There, with FREE as large as its rows allow, each value
  present in a stage lives from its computation (or the stage's start) to its last
  reader in the stage (or into the next stage): within the interval it had before, as
  its readers are a subset of the old ones; so no memory row rises and the optimum is
  unchanged (tested against the exhaustive search);
* the lower bound is checked before any solve: an impossible budget is refused at once.
"""
from __future__ import annotations

import os
import time
import weakref
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from minigrad.plan.graph import GraphProfile

__all__ = [
    "IMPROVEMENTS",
    "GraphSchedule",
    "NoScheduleFound",
    "activation_peak",
    "build_program",
    "keeping",
    "lower_bound",
    "remat",
    "simulate",
    "stage_bound",
    "store_all",
]

#: The improvements `remat` applies by default (see the module docstring).
IMPROVEMENTS = ("prune", "forced", "tight_free", "dominance")


@dataclass(frozen=True)
class GraphSchedule:
    """A plan for a `GraphProfile` (plain data).

    Attributes:
        recompute: for each stage ``t``, the forward nodes recomputed before node ``t``
            runs (in execution order).
        keep: for each stage ``t``, the nodes whose values are kept into stage ``t``.
        budget_bytes: the budget it was planned for (Checkmate's model).
        predicted_peak_bytes: the peak of Checkmate's model (every live value).
        predicted_activation_bytes: the peak of the ledger's ``activations`` when
            `minigrad.remat.run` executes it (saved arrays only; at most the former).
        recompute_flops: forward FLOPs recomputed.
        optimal: True only when the optimum is proven: the solver's lower bound on the
            cost, rounded up to whole FLOPs, reaches ``recompute_flops`` (``gap == 0``).
        gap: relative gap ``(recompute_flops - lower_bound_flops) / recompute_flops``
            between the cost found and the solver's proven lower bound on it (0 when
            proven optimal; never rounded to 0 by a solver tolerance).
        lower_bound_flops: the solver's proven lower bound on ``recompute_flops``.
        lower_bound_bytes: the budget below which no schedule exists (see `lower_bound`).
        n_variables, n_binaries, n_constraints: the program's size.
        solve_time_s: seconds the solver ran (varies by machine).
        method: ``"milp"``, ``"lp-rounded"``, ``"store-all"`` (it fits: no solve),
            ``"keeping"`` (`keeping`) or ``"fallback"`` (the time limit came before the
            solver found a schedule: the cheaper of store-all and keeping nothing
            recomputable, with the gap to the solver's proven bound), or ``"start"``
            (the feasible start passed in, e.g. a tighter budget's plan, was cheaper than
            anything the solver found in time). With CP-SAT, ``"greedy"``,
            ``"fallback"``, ``"lp-rounded"`` or ``"stage-rounded"`` (keep all but what
            a stage's optimum in `stage_bound` recomputes) also name a simple schedule
            it started from that was cheaper than what it found in time (``note`` says
            so).
        solver: which solver produced it: ``"highs"`` (SciPy's ``milp``), ``"cp-sat"``
            (OR-Tools' CP-SAT), or ``""`` (no solve).
        note: what the caller should know about how it was found (empty when proven
            optimal by the solver).
    """

    graph: GraphProfile = field(repr=False)
    recompute: tuple
    keep: tuple
    budget_bytes: int | None
    predicted_peak_bytes: int
    predicted_activation_bytes: int
    recompute_flops: int
    optimal: bool
    gap: float
    lower_bound_flops: float
    lower_bound_bytes: int
    n_variables: int = 0
    n_binaries: int = 0
    n_constraints: int = 0
    solve_time_s: float = 0.0
    method: str = "milp"
    solver: str = ""
    note: str = ""

    def __repr__(self) -> str:
        """Numbers first, then the recomputed ops by name (not the stage sets)."""
        names = self.graph.names
        rec = ", ".join(f"{names[i]}" + (f" x{c}" if c > 1 else "")
                        for i, c in self.recomputed_nodes[:8])
        more = len(self.recomputed_nodes) - 8
        rec += f", ... ({more} more)" if more > 0 else ""
        budget = "none" if self.budget_bytes is None else f"{self.budget_bytes:,} B"
        status = "optimal" if self.optimal else f"gap {self.gap:.2%}"
        return (f"GraphSchedule(peak {self.predicted_peak_bytes:,} B of budget {budget}, "
                f"activations {self.predicted_activation_bytes:,} B, recompute "
                f"{self.recompute_flops:,} FLOPs, {status}, {self.method}"
                f"{' ' + self.solver if self.solver else ''}, {self.graph.n_nodes} nodes; "
                f"recomputes [{rec}])")

    @property
    def recomputed_nodes(self) -> list:
        """The forward nodes recomputed at least once, with how many times."""
        counts = {}
        for r in self.recompute:
            for i in r:
                counts[i] = counts.get(i, 0) + 1
        return sorted(counts.items())


# --- the model's arithmetic ----------------------------------------------------------------
def _last_use(g: GraphProfile, users) -> list:
    """The last stage at which node ``i``'s value can still be read: its last user, or a
    later stage where a recomputable (forward) user can be recomputed."""
    nf, last = g.n_forward, list(range(g.n_nodes))
    for i in reversed(range(g.n_nodes)):
        for j in users[i]:
            last[i] = max(last[i], last[j] if j < nf else j)
    return last


def _forced(g, users) -> set:
    """The pairs ``(t, i)`` where value ``i`` must be kept into stage ``t``: a later node
    reads it and it cannot be recomputed before then (a gradient, or a forward value read
    later in the forward pass)."""
    nf, out = g.n_forward, set()
    for i in range(g.n_nodes):
        stop = max([j for j in users[i] if i >= nf or j < nf], default=i)
        out.update((t, i) for t in range(i + 1, stop + 1))
    return out


def _recomputable(g, t, i):
    return t >= g.n_forward and i < g.n_forward and i < t


def _check_graph(g, where: str) -> None:
    """A clear error for anything but a `GraphProfile` (a chain's `ChainProfile`
    goes to the chain planners)."""
    if not isinstance(g, GraphProfile):
        hint = (": a chain's profile goes to plan.optimal_segments or plan.rotor"
                if type(g).__name__ == "ChainProfile" else "")
        raise TypeError(f"{where}: graph must be a GraphProfile (plan.trace_graph), "
                        f"got {type(g).__name__}{hint}")


def lower_bound(g: GraphProfile) -> int:
    """A lower bound on the budget any schedule of the model can meet (Checkmate's bytes).

    At stage ``t``, node ``t``'s inputs and its output are live, and so is every earlier
    value that a later node reads and that cannot be recomputed before then (forward values
    read later in the forward pass, gradients read later): the maximum over stages of that
    sum, plus the step's saved inputs. It is a bound, not always reachable: recomputing a
    value in backward needs its own inputs live at that moment.

    Example:
        >>> from minigrad.plan import chain_graph
        >>> lower_bound(chain_graph([4, 8, 4], [1, 1, 1]))
        24
    """
    _check_graph(g, "lower_bound")
    users, nf, M = g.users(), g.n_forward, g.value_bytes
    best = 0
    for t in range(g.n_nodes):
        live = set(g.deps[t])
        for i in range(t):
            if any(j > t and (i >= nf or j < nf) for j in users[i]):
                live.add(i)
        best = max(best, sum(M[i] for i in live) + M[t])
    return int(best + g.const_bytes)


def simulate(g: GraphProfile, recompute, keep) -> tuple:
    """Replay a schedule in Checkmate's model: ``(peak bytes, recomputed FLOPs)``.

    Each stage starts with the kept values, computes its recomputations then its node, and
    frees a value right after its last reader in the stage unless it is kept into the next
    stage (FREE's meaning). Raises ValueError if a node reads a value that is not there.
    """
    _check_graph(g, "simulate")
    users, M, N = g.users(), g.value_bytes, g.n_nodes
    peak, cost = 0, 0
    for t in range(N):
        live = set(keep[t])
        nxt = set(keep[t + 1]) if t + 1 < N else set()
        order = list(recompute[t]) + [t]
        if any(i not in live for i in nxt if i not in order):
            raise ValueError(f"simulate: stage {t + 1} keeps a value stage {t} did not have")
        if any(i < len(g.out_buffer) and g.out_buffer[i] not in keep[t] for i in keep[t]):
            raise ValueError(f"simulate: stage {t} keeps a view without the buffer it views")
        mem = g.const_bytes + sum(M[i] for i in live)
        for pos, k in enumerate(order):
            missing = [i for i in g.deps[k] if i not in live]
            if missing:
                raise ValueError(f"simulate: stage {t} computes node {k} ({g.names[k]}) without "
                                 f"the values of nodes {missing}")
            if k in live:
                raise ValueError(f"simulate: stage {t} recomputes node {k}, which it holds")
            if k != t and not _recomputable(g, t, k):
                raise ValueError(f"simulate: stage {t} recomputes node {k} ({g.names[k]}); "
                                 f"only forward values are recomputed, in backward stages")
            live.add(k)
            mem += M[k]
            peak = max(peak, mem)
            if k != t:
                cost += g.flops[k]
            later = set(order[pos + 1:])
            for i in set(g.deps[k]) | {k}:
                if i not in nxt and not any(j in later for j in users[i]):
                    live.discard(i)
                    mem -= M[i]
    return int(peak), int(cost)


def activation_peak(g: GraphProfile, recompute, keep) -> int:
    """The ledger's ``activations`` peak when `minigrad.remat.run` executes the schedule.

    The executor holds, as activations, each forward value it keeps or recomputes (the
    output's buffer and its private arrays, a buffer shared by views once) and each input
    an op saved, from that op's forward to its backward; gradients are not activations.
    """
    _check_graph(g, "activation_peak")
    nf, N = g.n_forward, g.n_nodes
    users = g.users()
    held_values: set = set()
    consts: dict = {}  # const buffer -> number of holds
    const_bytes = {cid: b for cid, b, _ in g.const_slots}
    const_by_node: dict = {}
    for cid, _, j in g.const_slots:
        const_by_node.setdefault(j, []).append(cid)

    def total():
        roots = {g.out_buffer[i] for i in held_values}
        return (sum(g.buffer_bytes[r] for r in roots)
                + sum(g.private_bytes[i] for i in held_values)
                + sum(const_bytes[c] for c, n in consts.items() if n))

    peak = 0
    kept_through = set(keep[nf]) if nf < N else set()
    for i in range(nf):  # the forward pass: keep what stage nf keeps, hold saved inputs
        for c in const_by_node.get(i, ()):
            consts[c] = consts.get(c, 0) + 1
        if i in kept_through:
            held_values.add(i)
        peak = max(peak, total())
    bwd_of = {nf + k: j for k, j in enumerate(g.backward_of)}
    for t in range(nf, N):
        nxt = set(keep[t + 1]) if t + 1 < N else set()
        order = list(recompute[t]) + [t]
        for pos, k in enumerate(order[:-1]):
            held_values.add(k)
            peak = max(peak, total())
            later = set(order[pos + 1:])
            for i in set(g.deps[k]) | {k}:
                if i not in nxt and not any(j in later for j in users[i]):
                    held_values.discard(i)
        peak = max(peak, total())
        for c in const_by_node.get(bwd_of.get(t), ()):
            consts[c] -= 1
        held_values &= nxt
    return int(peak)


def store_all(g: GraphProfile) -> GraphSchedule:
    """The schedule that keeps every value until its last reader (no recomputation)."""
    _check_graph(g, "store_all")
    users, N = g.users(), g.n_nodes
    keep = tuple(frozenset(i for i in range(t) if any(j >= t for j in users[i]))
                 for t in range(N))
    recompute = tuple(() for _ in range(N))
    peak, cost = simulate(g, recompute, keep)
    return GraphSchedule(g, recompute, keep, None, peak, activation_peak(g, recompute, keep), cost,
                         True, 0.0, 0.0, lower_bound(g), method="store-all")


def keeping(g: GraphProfile, kept) -> GraphSchedule:
    """The schedule that keeps the forward values ``kept`` (node indices) into the backward
    pass, as long as a later node reads them, and recomputes every other forward value a
    backward node needs, in that node's stage, from what is held (the plan a checkpointing
    API gives when you choose what to save: torch's non-reentrant checkpoint, op by op).
    Values that cannot be recomputed in time (gradients, forward values read later in the
    forward pass) are always kept.

    Example:
        >>> from minigrad.plan import chain_graph
        >>> g = chain_graph([4, 8, 4], [1, 2, 3])
        >>> s = keeping(g, [])      # keep nothing that can be recomputed
        >>> s.recompute_flops, s.predicted_peak_bytes
        (10, 24)
    """
    _check_graph(g, "keeping")
    kept = {int(i) for i in kept}
    bad = [i for i in kept if not 0 <= i < g.n_forward]
    if bad:
        raise ValueError(f"keeping: {bad} are not forward nodes (0 .. {g.n_forward - 1})")
    users, nf, N = g.users(), g.n_forward, g.n_nodes

    def keep_fn(t):
        out = {i for i in range(min(t, N)) if any(
            j >= t and ((i >= nf or j < nf) or i in kept) for j in users[i])}
        return out | {g.out_buffer[i] for i in out if i < nf}
    recompute, keep = _complete(g, keep_fn)
    peak, cost = simulate(g, recompute, keep)
    return GraphSchedule(g, recompute, keep, None, peak, activation_peak(g, recompute, keep), cost,
                         False, 0.0, 0.0, lower_bound(g), method="keeping")


# --- the integer program ------------------------------------------------------------------
class _Program:
    """Variables by name, rows of a sparse matrix: ``lb <= A x <= ub``."""

    def __init__(self):
        self.index: dict = {}
        self.binary: list = []
        self.upper: list = []
        self.cost: list = []
        self.rows, self.cols, self.vals, self.lb, self.ub = [], [], [], [], []

    def var(self, key, binary=True, upper=1.0, cost=0.0):
        self.index[key] = len(self.binary)
        self.binary.append(binary)
        self.upper.append(upper)
        self.cost.append(cost)
        return self.index[key]

    def row(self, terms, lb=-np.inf, ub=np.inf):
        """Add ``lb <= sum(coef * x[key]) + const <= ub``; ``terms`` maps a key (or the
        number 1 for a constant) to its coefficient."""
        const, r = 0.0, len(self.lb)
        for key, coef in terms:
            if isinstance(key, (int, float)):
                const += key * coef
            else:
                self.rows.append(r)
                self.cols.append(self.index[key])
                self.vals.append(coef)
        self.lb.append(lb - const)
        self.ub.append(ub - const)


def build_program(g: GraphProfile, budget_bytes: int, improvements=IMPROVEMENTS):
    """Checkmate's program for ``g`` under ``budget_bytes``, as a `_Program`.

    ``R(t, i)`` and ``S(t, i)`` return a variable key, or the constant 0 or 1 where the
    model (or the ``"prune"`` improvement) fixes it.
    """
    _check_graph(g, "build_program")
    N, M, C = g.n_nodes, g.value_bytes, g.flops
    users = g.users()
    last = _last_use(g, users) if "prune" in improvements else [N] * N
    tight = "tight_free" in improvements
    forced = _forced(g, users) if "forced" in improvements else set()
    P = _Program()

    def R(t, i):  # node i computed in stage t
        if i == t:
            return 1
        return ("R", t, i) if _recomputable(g, t, i) and t <= last[i] else 0

    def S(t, i):  # value i kept into stage t
        if not (i < t < N and t <= last[i]):
            return 0
        return 1 if (t, i) in forced else ("S", t, i)

    for t in range(N):
        for i in range(t):
            if isinstance(R(t, i), tuple):
                P.var(R(t, i), cost=float(C[i]))
            if isinstance(S(t, i), tuple):
                P.var(S(t, i))
    for i, r in enumerate(g.out_buffer):  # a kept view keeps the buffer it views
        if r != i:
            for t in range(N):
                if S(t, i) != 0:
                    P.row([(S(t, i), 1), (S(t, r), -1)], ub=0)
    room = float(budget_bytes - g.const_bytes)
    for t in range(N):
        computed = [k for k in range(t + 1) if R(t, k) != 0]
        for j in computed:  # a node reads only values present in its stage
            for i in g.deps[j]:
                P.row([(R(t, j), 1), (R(t, i), -1), (S(t, i), -1)], ub=0)
        if t + 1 < N:  # a value kept must have been present
            for i in range(t + 1):
                if S(t + 1, i) != 0:
                    P.row([(S(t + 1, i), 1), (S(t, i), -1), (R(t, i), -1)], ub=0)
        # memory while each computed node of the stage runs, freeing after each
        U_prev = None
        for pos, k in enumerate(computed):
            P.var(("U", t, k), binary=False, upper=max(room, 0.0))
            terms = [(("U", t, k), 1), (R(t, k), -M[k])]
            if U_prev is None:
                terms += [(S(t, i), -M[i]) for i in range(t) if S(t, i) != 0]
            else:
                kp = computed[pos - 1]
                terms += [(U_prev, -1)]
                terms += [(("F", t, i, kp), M[i]) for i in set(g.deps[kp]) | {kp}
                          if ("F", t, i, kp) in P.index]
            P.row(terms, lb=0, ub=0)
            U_prev = ("U", t, k)
            if k == t:
                break
            for i in set(g.deps[k]) | {k}:  # FREE[t, i, k]
                if M[i] == 0:
                    continue
                later = [R(t, j) for j in users[i] if k < j <= t and R(t, j) != 0]
                if tight:
                    if 1 in later or S(t + 1, i) == 1:
                        continue
                    F = ("F", t, i, k)
                    P.var(F, binary=False)
                    if R(t, k) != 1:
                        P.row([(F, 1), (R(t, k), -1)], ub=0)
                    if S(t + 1, i) != 0:
                        P.row([(F, 1), (S(t + 1, i), 1)], ub=1)
                    for r in later:
                        P.row([(F, 1), (r, 1)], ub=1)
                else:  # the published big-M form: FREE = 1 iff no hazard
                    F = ("F", t, i, k)
                    P.var(F)
                    hazards = [(R(t, k), -1), (1, 1)] + [(r, 1) for r in later]
                    if t + 1 < N and S(t + 1, i) != 0:
                        hazards.append((S(t + 1, i), 1))
                    kappa = len(hazards) - 1
                    P.row([(F, 1)] + hazards, lb=1)
                    P.row([(F, kappa)] + hazards, ub=kappa)
    if "dominance" in improvements:
        _add_dominance(g, P, R, S, users)
    return P, R, S


def _add_dominance(g, P, R, S, users):
    """The ``"dominance"`` rows (see the module docstring): a value is recomputed, or
    kept into a stage, only if that stage reads it or keeps it into the next; a value
    held is not recomputed. Not for a buffer that views alias (a view kept keeps it)."""
    N = g.n_nodes
    buffers = {r for i, r in enumerate(g.out_buffer) if r != i}

    def var(key):
        return isinstance(key, tuple)
    for t in range(N):
        for i in range(t):
            if i in buffers:
                continue
            r, s = R(t, i), S(t, i)
            nxt = S(t + 1, i) if t + 1 < N else 0
            if nxt == 1:
                continue
            readers = [R(t, j) for j in users[i] if j <= t and R(t, j) != 0]
            if 1 in readers:
                continue
            why = [(k, -1) for k in readers + [nxt] if var(k)]
            for x in (r, s):
                if var(x):
                    P.row([(x, 1)] + why, ub=0)
            if var(r) and var(s):
                P.row([(r, 1), (s, 1)], ub=1)


def _schedule_from(g, x, P, R, S):
    N = g.n_nodes

    def val(key):
        return key if not isinstance(key, tuple) else x[P.index[key]] > 0.5
    keep = tuple(frozenset(i for i in range(t) if S(t, i) != 0 and val(S(t, i)))
                 for t in range(N))
    recompute = tuple(tuple(i for i in range(t) if R(t, i) != 0 and val(R(t, i))
                            and i not in keep[t]) for t in range(N))
    return _cleanup(g, recompute, keep)


_SOLVER_NAMES = {"highs": "HiGHS", "cp-sat": "CP-SAT"}


def _solve_highs(P, time_limit_s, relax):
    """``P`` solved with SciPy's ``milp`` (HiGHS, relative gap tolerance 0): SciPy's
    result (``x``, ``fun``, ``status``, ``mip_dual_bound``, ``message``)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    n = len(P.binary)
    A = coo_matrix((P.vals, (P.rows, P.cols)), shape=(len(P.lb), n)).tocsr()
    integrality = np.zeros(n) if relax else np.asarray(P.binary, dtype=float)
    return milp(np.asarray(P.cost), integrality=integrality,
                bounds=Bounds(np.zeros(n), np.asarray(P.upper)),
                constraints=LinearConstraint(A, np.asarray(P.lb), np.asarray(P.ub)),
                options={"time_limit": float(time_limit_s), "disp": False,
                         "mip_rel_gap": 0.0})


def _hint_values(g, P, R, S, recompute, keep):
    """Values of every variable of ``P`` for a feasible schedule (a solver's start):
    R and S from the schedule, FREE as large as its bounds allow, U from its row."""
    N, users = g.n_nodes, g.users()
    x = [0] * len(P.binary)
    keep = [set(k) for k in keep]
    rec = [set(r) for r in recompute]
    for key, j in P.index.items():
        if key[0] == "R":
            x[j] = int(key[2] in rec[key[1]])
        elif key[0] == "S":
            x[j] = int(key[2] in keep[key[1]])

    def val(key):
        return key if not isinstance(key, tuple) else x[P.index[key]]
    for key, j in P.index.items():
        if key[0] == "F":
            _, t, i, k = key
            nxt = val(S(t + 1, i)) if t + 1 < N else 0
            later = any(val(R(t, u)) for u in users[i] if k < u <= t and R(t, u) != 0)
            x[j] = int(val(R(t, k)) == 1 and not nxt and not later)
    # U's rows: ``U - sum(...) = 0``, in the order they were added (U_prev first)
    rows = {}
    for r, c, v in zip(P.rows, P.cols, P.vals):
        rows.setdefault(r, []).append((c, v))
    u_cols = {j for key, j in P.index.items() if key[0] == "U"}
    for r in sorted(rows):
        terms = rows[r]
        us = [c for c, v in terms if c in u_cols and v == 1]
        if len(us) == 1 and P.lb[r] == P.ub[r]:
            u = us[0]
            x[u] = int(round(P.ub[r] - sum(v * x[c] for c, v in terms if c != u)))
    return x


def stage_bound(g: GraphProfile, budget_bytes: int, time_limit_s: float = 30) -> int:
    """A proven lower bound on the recomputed FLOPs of every schedule within
    ``budget_bytes`` (Checkmate's model): the largest, over backward stages ``t``, of a
    small integer program that looks at stage ``t`` alone.

    When node ``t`` runs, every value kept into stage ``t + 1`` is live, with node ``t``,
    its inputs, the step's saved inputs and every gradient read after ``t`` (those cannot
    be recomputed): all within the budget. So choose ``k_i`` (forward value ``i`` kept
    into ``t + 1``; free for ``t``'s inputs) within the room left; a forward value read
    after ``t`` and not kept must be recomputed in a later stage (``x_i >= 1 - k_i``), and
    a value recomputed later needs each forward input ``d`` present then, so kept or
    recomputed too (``x_d >= x_i - k_d``). Each ``x_i = 1`` is a distinct later
    recomputation of cost ``C_i``: ``min sum C_i x_i`` bounds every schedule's cost from
    below (the stage's program is a relaxation of the whole one; its optimum is
    rounded up, as every cost is a whole number of FLOPs). On the GPT step it is far
    tighter than the LP relaxation (4 blocks at 80 % of store-all: 6,080 FLOPs, the
    optimum, where the LP gives 2,218). Each stage is solved with HiGHS; stages left
    when ``time_limit_s`` runs out are skipped (the bound stays valid, only weaker).
    Returns -1 if a stage's room is negative (no schedule fits).

    Example:
        >>> from minigrad.plan import chain_graph
        >>> g = chain_graph([4, 8, 4, 8], [1, 2, 3, 4])
        >>> stage_bound(g, 24) <= remat(g, 24).recompute_flops
        True
    """
    _check_graph(g, "stage_bound")
    return _stage_bound(g, budget_bytes, time_limit_s)[0]


def _stage_bound(g, budget_bytes, time_limit_s):
    """`stage_bound`, and for each stage solved, the forward values its optimum
    recomputes (``x_i = 1``), largest bound first: hints for a schedule."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    N, nf, M, C = g.n_nodes, g.n_forward, g.value_bytes, g.flops
    users, best, t0 = g.users(), 0, time.perf_counter()
    drops = []
    for t in range(nf, N):
        if time.perf_counter() - t0 > time_limit_s:
            break
        live = set(g.deps[t]) | {t}
        used = g.const_bytes + sum(M[i] for i in live)
        need = []
        for i in range(t):
            if i not in live and any(j > t for j in users[i]):
                if i >= nf:
                    used += M[i]  # a gradient read later: kept
                else:
                    need.append(i)
        room = budget_bytes - used
        if room < 0:
            return -1, []
        if not need:
            continue
        kv = [i for i in range(nf) if i not in live]
        col = {("x", i): i for i in range(nf)}
        col.update({("k", i): nf + n for n, i in enumerate(kv)})
        rows, cols, vals, lb = [], [], [], []

        def row(terms, lo, rows=rows, cols=cols, vals=vals, lb=lb, col=col):
            r = len(lb)
            for key, v in terms:
                rows.append(r)
                cols.append(col[key])
                vals.append(v)
            lb.append(lo)
        for i in need:
            row([(("x", i), 1), (("k", i), 1)], 1)
        for i in range(nf):
            for d in g.deps[i]:
                if d not in live:
                    row([(("x", d), 1), (("x", i), -1), (("k", d), 1)], 0)
        ub = [np.inf] * len(lb)
        row([(("k", i), M[i]) for i in kv], -np.inf)
        ub.append(room)
        n = nf + len(kv)
        A = coo_matrix((vals, (rows, cols)), shape=(len(lb), n)).tocsr()
        cost = np.zeros(n)
        cost[:nf] = C[:nf]
        left = max(0.05, time_limit_s - (time.perf_counter() - t0))
        res = milp(cost, integrality=np.ones(n), bounds=Bounds(0, 1),
                   constraints=LinearConstraint(A, lb, ub),
                   options={"time_limit": left, "mip_rel_gap": 0.0})
        dual = getattr(res, "mip_dual_bound", None)
        if res.status == 0 and (dual is None or not np.isfinite(dual)):
            dual = res.fun
        if res.status == 2:  # nothing fits this stage: no schedule at all
            return -1, []
        if dual is not None and np.isfinite(dual):
            best = max(best, int(np.ceil(dual - 1e-6)))
        if res.x is not None:
            drops.append((float(res.fun), frozenset(
                i for i in range(nf) if res.x[i] > 0.5)))
    drops.sort(key=lambda d: -d[0])
    return int(best), [d for _, d in drops]


def _keeping_drops(g, budget, drops, tries=20):
    """Schedules from `stage_bound`'s stage optima: keep every forward value but those
    a stage's optimum recomputes (and, cumulatively, the stages before it in the list);
    the cheapest that fits, as ``[("stage-rounded", schedule)]`` (or ``[]``)."""
    everything, acc, best = set(range(g.n_forward)), set(), None
    for d in drops[:tries]:
        acc |= d
        for dropped in (d, acc):
            try:
                s = keeping(g, everything - dropped)
            except ValueError:
                continue
            if s.predicted_peak_bytes <= budget and (
                    best is None or s.recompute_flops < best.recompute_flops):
                best = s
    return [] if best is None else [("stage-rounded", best)]


def _cp_sat_with_lp(g, P, R, S, budget, starts, time_limit_s, workers, t0):
    """CP-SAT on ``P``, helped by the LP relaxation (HiGHS, within the same time limit):
    its value, a proven lower bound on the cost, bounds the objective from below (CP-SAT's
    own LP may not finish in time on a large graph), and its rounding joins the feasible
    schedules CP-SAT starts from (the cheapest one)."""
    lp = _solve_highs(P, time_limit_s, True)
    if lp.status == 2:  # the relaxation is infeasible, so is the program
        return lp
    floor, simple = 0, _simple(g, budget)
    if lp.x is not None:
        # rounded down with room for the LP's tolerances: a bound, never above the optimum
        floor = max(0, int(np.floor(lp.fun - 1e-6 * max(1.0, abs(lp.fun)))))
        try:
            recompute, keep = _round(g, lp.x, P, S, budget)
            peak, cost = simulate(g, recompute, keep)
            if peak <= budget:
                simple.append(("lp-rounded", SimpleNamespace(
                    recompute=recompute, keep=keep, recompute_flops=cost,
                    predicted_peak_bytes=peak)))
        except ValueError:
            pass
    left = max(0.05, time_limit_s - (time.perf_counter() - t0))
    bound, drops = _stage_bound(g, budget, left / 4)
    floor = max(floor, bound)
    simple += _keeping_drops(g, budget, drops)
    known = list(starts) + [s for _, s in simple]
    best = min(known, key=lambda s: s.recompute_flops, default=None)
    hint = None if best is None else _hint_values(g, P, R, S, best.recompute, best.keep)
    left = max(0.05, time_limit_s - (time.perf_counter() - t0))
    res = _solve_cp_sat(P, left, workers, hint, floor=floor)
    bound = res.mip_dual_bound if np.isfinite(res.mip_dual_bound) else 0.0
    res.mip_dual_bound = max(bound, float(floor))
    res.simple = simple  # candidates too: CP-SAT may not return its start in time
    return res


def _solve_cp_sat(P, time_limit_s, workers, hint, floor=0, **parameters):
    """Checkmate's program ``P`` solved with OR-Tools' CP-SAT: the same variables and
    rows, every coefficient an integer (bytes, FLOPs, 0/1); FREE, continuous for HiGHS,
    is boolean here, which changes nothing (at an optimum it is 0 or 1 already, see the
    module docstring). Returns what `_solve_highs` returns."""
    try:
        from ortools.sat.python import cp_model
    except ImportError as e:  # optional: the book's default solver is HiGHS
        raise ImportError("remat(solver='cp-sat') needs OR-Tools (pip install ortools)") from e
    m = cp_model.CpModel()
    xs = []
    for j, (binary, upper) in enumerate(zip(P.binary, P.upper)):
        if binary or upper == 1.0:
            xs.append(m.NewBoolVar(f"x{j}"))
        else:
            xs.append(m.NewIntVar(0, int(np.floor(upper)), f"x{j}"))
    rows = [[] for _ in P.lb]
    for r, c, v in zip(P.rows, P.cols, P.vals):
        rows[r].append((c, v))
    for r, terms in enumerate(rows):
        if any(not float(v).is_integer() for _, v in terms):
            raise ValueError("remat(solver='cp-sat'): a non-integer coefficient")
        expr = sum(int(v) * xs[c] for c, v in terms)
        lb, ub = P.lb[r], P.ub[r]
        lo = int(np.ceil(lb - 1e-9)) if np.isfinite(lb) else None
        hi = int(np.floor(ub + 1e-9)) if np.isfinite(ub) else None
        if lo is not None and hi is not None and lo == hi:
            m.Add(expr == lo)
        else:
            if lo is not None:
                m.Add(expr >= lo)
            if hi is not None:
                m.Add(expr <= hi)
    objective = sum(int(c) * xs[j] for j, c in enumerate(P.cost) if c)
    if floor > 0:  # a proven lower bound (the LP relaxation's, `stage_bound`)
        m.Add(objective >= int(floor))
    m.Minimize(objective)
    if hint is not None:
        for j, v in enumerate(hint):
            m.AddHint(xs[j], int(v))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    workers = int(workers or _cpus())
    solver.parameters.num_search_workers = workers
    solver.parameters.random_seed = 0
    # the bound comes from the LP relaxation with CP-SAT's cuts: with few workers, give
    # them the searches that raise it (max_lp) and that raise the objective's lower bound
    # (core); CP-SAT's default pair proved no bound at 2 GPT blocks in 60 s, these prove
    # the optimum (measured; see the commit)
    if workers == 1:
        solver.parameters.linearization_level = 2
    elif workers == 2:
        solver.parameters.subsolvers.extend(["max_lp", "core"])
    for key, value in parameters.items():  # tuning experiments only
        if isinstance(value, list):
            getattr(solver.parameters, key).extend(value)
        else:
            setattr(solver.parameters, key, value)
    status = solver.Solve(m)
    name = solver.StatusName(status)
    x = fun = None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        x = np.array([solver.Value(v) for v in xs], dtype=float)
        fun = float(solver.ObjectiveValue())
    code = {cp_model.OPTIMAL: 0, cp_model.INFEASIBLE: 2}.get(status, 1)
    bound = float(solver.BestObjectiveBound()) if x is not None else np.nan
    return SimpleNamespace(x=x, fun=fun, status=code, mip_dual_bound=bound,
                           message=f"CP-SAT: {name}")


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _cleanup(g, recompute, keep):
    """Drop kept values nothing reads before they are freed anyway, and recomputations no
    later node of the stage reads: neither changes a feasible schedule's validity, and each
    lowers its memory or cost."""
    N = g.n_nodes
    keep = [set(k) for k in keep]
    recompute = [list(r) for r in recompute]
    changed = True
    while changed:
        changed = False
        for t in reversed(range(N)):
            needed = set(g.deps[t])
            for k in reversed(recompute[t]):
                if k in needed or (t + 1 < N and k in keep[t + 1]):
                    needed |= set(g.deps[k])
                else:
                    recompute[t].remove(k)
                    changed = True
            carry = set(keep[t + 1]) if t + 1 < N else set()
            for i in list(keep[t]):
                if i not in needed and i not in carry:
                    keep[t].discard(i)
                    changed = True
    return (tuple(tuple(r) for r in recompute), tuple(frozenset(k) for k in keep))


class NoScheduleFound(ValueError):
    """`remat` found no schedule in time (the budget may still admit one): the message
    names the budget, the lower bound, the time limit and what to try."""


def remat(graph: GraphProfile, budget_bytes: int, *, time_limit_s: float = 60, relax: bool = False,
          improvements=IMPROVEMENTS, start: GraphSchedule | None = None,
          solver: str = "highs", workers: int | None = None) -> GraphSchedule:
    """The schedule of least recomputed FLOPs whose memory stays within ``budget_bytes``.

    Model and scope: Checkmate's integer program on the step's DAG, in Checkmate's memory
    model (every live value counts), over the schedules minigrad's engine runs (forward
    once, backward in the engine's order, forward values recomputed in backward); within
    that model the answer is optimal when ``optimal`` is True, which means proven: the
    solver (SciPy's ``milp``, HiGHS, run with a relative gap tolerance of 0) closed the gap
    to whole FLOPs. SciPy is imported here, only when a graph is planned.

    Monotone in the budget: a plan that fits a tighter budget fits this one, so the
    cheapest plan this function has already returned for the same graph and a budget it
    fits (and ``start``, if given) is a feasible start; a time-limited solve never
    returns a costlier plan than it (``method="start"`` and ``note`` say so when the
    start wins).

    Args:
        graph: a `GraphProfile` (`trace_graph`).
        budget_bytes: the memory budget in Checkmate's model; the ledger's
            ``m.peak["activations"]`` of the run is at most the schedule's
            ``predicted_activation_bytes``, itself at most ``predicted_peak_bytes``.
        time_limit_s: stop the solver after this many seconds; the best schedule found is
            returned with ``optimal=False`` and its proven ``gap`` (if it found none: the
            feasible start, or the cheapest of store-all, keeping nothing recomputable
            and a greedy choice of values to keep that fits).
        relax: solve the LP relaxation and round it (keep a value where ``S`` is at least
            a threshold, recompute what is then missing; the cheapest threshold that fits,
            else store-all or keeping nothing recomputable): fast, not optimal;
            ``lower_bound_flops`` is then the LP's value, a lower bound on the optimum's
            cost, and ``gap`` the distance to it.
        improvements: the improvements to apply (`IMPROVEMENTS`; ``()`` gives the
            published program).
        start: a schedule of the same graph known to fit (e.g. a tighter budget's plan).
        solver: ``"highs"`` (SciPy's ``milp``, the default) or ``"cp-sat"`` (OR-Tools'
            CP-SAT, an optional dependency, on the same program with every coefficient
            an integer; HiGHS first solves the LP relaxation, whose value bounds the
            cost from below, and CP-SAT starts from the cheapest feasible schedule
            known: the starts above, store-all, keeping nothing recomputable, the
            greedy choice, the LP rounded). Both prove the same optimum; ``gap`` is
            measured from the larger of CP-SAT's proven bound and the LP's value.
        workers: CP-SAT's search workers (default: the CPUs this process may use).

    Returns:
        A `GraphSchedule`.

    Raises:
        ValueError: the budget is below `lower_bound` (the message names it in bytes), or
            no schedule fits (infeasible, proven).
        NoScheduleFound: the solver found none in time and no simple schedule fits.

    Example:
        >>> from minigrad.plan import chain_graph
        >>> g = chain_graph([4, 8, 4, 8], [1, 2, 3, 4])   # or trace_graph(step, x)
        >>> store_all(g).predicted_peak_bytes, lower_bound(g)
        (32, 24)
        >>> s = remat(g, budget_bytes=24)
        >>> s.recompute_flops, s.optimal
        (3, True)
    """
    _check_graph(graph, "remat")
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, (int, np.integer)):
        raise TypeError(f"remat: budget_bytes must be an integer number of bytes, got "
                        f"{budget_bytes!r}")
    unknown = set(improvements) - set(IMPROVEMENTS)
    if unknown:
        raise ValueError(f"remat: unknown improvements {sorted(unknown)}; known: {list(IMPROVEMENTS)}")
    if start is not None and (not isinstance(start, GraphSchedule) or start.graph != graph):
        raise ValueError("remat: start must be a GraphSchedule of the same graph")
    bound = lower_bound(graph)
    if budget_bytes < bound:
        raise ValueError(f"remat: budget_bytes={int(budget_bytes)} is below the lower bound "
                         f"{bound} bytes (the largest op's inputs and output plus what must stay "
                         f"live then); no schedule fits")
    everything = store_all(graph)
    if everything.predicted_peak_bytes <= budget_bytes and not relax:
        # nothing to recompute: the optimum, proven without a solver
        return GraphSchedule(graph, everything.recompute, everything.keep, int(budget_bytes),
                             everything.predicted_peak_bytes,
                             everything.predicted_activation_bytes, 0, True, 0.0, 0.0, bound,
                             method="store-all")
    if solver not in ("highs", "cp-sat"):
        raise ValueError(f"remat: solver must be 'highs' or 'cp-sat', got {solver!r}")
    if relax and solver != "highs":
        raise ValueError("remat: relax=True solves the LP relaxation, with HiGHS only")
    budget = int(budget_bytes)
    starts = [s for s in _returned(graph) + ([start] if start is not None else [])
              if s.predicted_peak_bytes <= budget]
    t0 = time.perf_counter()
    P, R, S = build_program(graph, budget, improvements)
    n = len(P.binary)
    if solver == "cp-sat":
        res = _cp_sat_with_lp(graph, P, R, S, budget, starts, time_limit_s, workers, t0)
    elif relax:
        res = _solve_highs(P, time_limit_s, relax)
    else:  # `stage_bound` as a row: HiGHS stops once a schedule meets it
        floor = stage_bound(graph, budget, time_limit_s / 4)
        if floor > 0:
            P.row([(key, c) for key, c in zip(P.index, P.cost) if c], lb=floor)
        left = max(0.05, time_limit_s - (time.perf_counter() - t0))
        res = _solve_highs(P, left, relax)
        if res.status != 2:
            dual = getattr(res, "mip_dual_bound", None)
            dual = 0.0 if dual is None or not np.isfinite(dual) else dual
            res.mip_dual_bound = max(float(dual), float(floor))
    seconds = time.perf_counter() - t0
    sizes = {"n_variables": n, "n_binaries": int(sum(P.binary)), "n_constraints": len(P.lb),
             "solve_time_s": seconds, "solver": solver}
    if relax:
        if res.x is None:
            raise ValueError(f"remat(relax=True): the LP relaxation has no solution "
                             f"({res.message})")
        recompute, keep = _round(graph, res.x, P, S, budget)
        peak, cost = simulate(graph, recompute, keep)
        lp = float(res.fun)
        gap = 0.0 if cost == 0 else (cost - lp) / cost
        return GraphSchedule(graph, recompute, keep, budget, peak,
                             activation_peak(graph, recompute, keep), cost, False, gap, lp, bound,
                             method="lp-rounded", note="the LP relaxation, rounded", **sizes)
    if res.status == 2:
        raise ValueError(f"remat: no schedule fits budget_bytes={budget} (the "
                         f"program is infeasible; the lower bound is {bound} bytes, and "
                         f"recomputing a value needs its inputs live too)")
    dual = getattr(res, "mip_dual_bound", None)
    if res.status == 0 and res.x is not None:
        dual = float(res.fun) if dual is None or not np.isfinite(dual) else float(dual)
    dual = 0.0 if dual is None or not np.isfinite(dual) else max(0.0, float(dual))
    # candidates: the solver's schedule, the feasible starts, the simple schedules
    found = []
    if res.x is not None:
        recompute, keep = _schedule_from(graph, res.x, P, R, S)
        peak, cost = simulate(graph, recompute, keep)
        if peak > budget:  # the program's memory bounds the replay's: a bug if violated
            raise RuntimeError(f"remat: the schedule's replayed peak {peak} exceeds the "
                               f"budget {budget}")
        found.append((cost, 0, "milp", recompute, keep, peak))
    for s in starts:
        found.append((s.recompute_flops, 1, "start", s.recompute, s.keep,
                      s.predicted_peak_bytes))
    simple = getattr(res, "simple", None)
    if simple is None and res.x is None:
        simple = _simple(graph, budget)
    for name, s in simple or ():
        found.append((s.recompute_flops, 2, name, s.recompute, s.keep,
                      s.predicted_peak_bytes))
    if not found:
        raise NoScheduleFound(
            f"remat: the solver ({_SOLVER_NAMES[solver]}) found no schedule for "
            f"budget_bytes={budget} within time_limit_s={time_limit_s} ({res.message}), "
            f"and neither store-all, keeping nothing recomputable nor a greedy choice "
            f"fits. The budget is {budget - bound:,} B above the lower bound {bound:,} B, "
            f"so a schedule may exist: give the solver more time, or raise the budget "
            f"(store-all needs "
            f"{everything.predicted_peak_bytes:,} B)")
    cost, _, method, recompute, keep, peak = min(found, key=lambda f: (f[0], f[1]))
    # proven optimal: the bound, rounded up to whole FLOPs, reaches the cost
    optimal = cost == 0 or (cost <= int(np.ceil(dual - 1e-6)) and all(
        float(c).is_integer() for c in P.cost))
    gap = 0.0 if optimal else max(0.0, (cost - dual) / cost)
    note = ""
    if method == "start":
        note = (f"a plan for a tighter budget (or the start given) costs {cost:,} FLOPs, less "
                f"than the solver found in {time_limit_s} s; returned instead")
    elif method != "milp" and res.x is not None:
        note = (f"the solver's schedule in {time_limit_s} s costs more than a simple "
                f"schedule it started from ({method}); returned instead")
    elif method != "milp":
        note = (f"the solver found no schedule in {time_limit_s} s; this is the cheapest "
                f"simple schedule that fits ({method})")
    elif not optimal:
        note = f"time limit: the solver's proven gap is {gap:.2%}"
    schedule = GraphSchedule(graph, recompute, keep, budget, peak,
                             activation_peak(graph, recompute, keep), cost, optimal, gap,
                             float(cost) if optimal else dual, bound, method=method, note=note,
                             **sizes)
    _returned(graph).append(schedule)
    return schedule


#: the schedules `remat` returned, per graph: feasible starts for looser budgets
_RETURNED = {}


def _returned(graph) -> list:
    key = id(graph)
    entry = _RETURNED.get(key)
    if entry is None or entry[0]() is None:
        if len(_RETURNED) > 64:  # forget graphs that are gone
            for k in [k for k, v in _RETURNED.items() if v[0]() is None]:
                del _RETURNED[k]
        entry = _RETURNED[key] = (weakref.ref(graph), [])
    return entry[1]


def _simple(g, budget):
    """Store-all, keeping nothing recomputable, and a greedy choice (drop kept forward
    values, the most bytes per recomputed FLOP first, until it fits): those that fit."""
    out = []
    for name, s in (("fallback", store_all(g)), ("fallback", keeping(g, []))):
        if s.predicted_peak_bytes <= budget:
            out.append((name, s))
    kept = set(range(g.n_forward))
    for i in sorted(kept, key=lambda i: -g.value_bytes[i] / max(g.flops[i], 1)):
        kept.discard(i)
        try:
            s = keeping(g, kept)
        except ValueError:
            continue
        if s.predicted_peak_bytes <= budget:
            out.append(("greedy", s))
            break
    return out


def _fallback(g, budget):
    """The cheaper of store-all and keep-nothing-recomputable, if one fits the budget."""
    best = None
    for sched in (store_all(g), keeping(g, [])):
        if sched.predicted_peak_bytes <= budget and (
                best is None or sched.recompute_flops < best[3]):
            best = (sched.recompute, sched.keep, sched.predicted_peak_bytes,
                    sched.recompute_flops)
    return best


def _complete(g, keep_fn):
    """A valid schedule from a choice of values to keep: each stage recomputes, in order,
    what its node needs and is not kept (recursively), then keeps ``keep_fn(t)`` where
    present. Raises ValueError if a missing value cannot be recomputed in that stage."""
    N = g.n_nodes
    keep, recompute = [frozenset()], []
    for t in range(N):
        have, order = set(keep[t]), []

        def visit(i, t=t, have=have, order=order):
            if i in have or i in order:
                return
            if not _recomputable(g, t, i):
                raise ValueError(f"stage {t} needs node {i}, which it cannot recompute")
            for d in g.deps[i]:
                visit(d)
            order.append(i)
        for d in g.deps[t]:
            visit(d)
        recompute.append(tuple(order))
        present = have | set(order) | {t}
        keep.append(frozenset(i for i in keep_fn(t + 1) if i in present))
    return _cleanup(g, tuple(recompute), tuple(keep[:N]))


def _round(g, x, P, S, budget):
    """Round the LP relaxation: keep the values whose ``S`` is at least a threshold
    (forced values always), recompute the rest; the cheapest rounding within the budget,
    trying thresholds from 0.5 down to 0 (0 keeps everything the LP touches)."""
    N, users, nf = g.n_nodes, g.users(), g.n_forward
    best = None
    for threshold in (0.5, 0.25, 0.1, 0.01, 1e-9):
        def keep_fn(t, th=threshold):
            out = set()
            for i in range(min(t, N)):
                forced = any(j >= t and (i >= nf or j < nf) for j in users[i])
                s = S(t, i) if t < N else 0
                if forced or s == 1 or (s != 0 and x[P.index[s]] >= th):
                    out.add(i)
            return out | {g.out_buffer[i] for i in out if i < len(g.out_buffer)}
        try:
            recompute, keep = _complete(g, keep_fn)
        except ValueError:
            continue
        peak, cost = simulate(g, recompute, keep)
        if peak <= budget and (best is None or cost < best[0]):
            best = (cost, recompute, keep)
    if best is None:  # no rounding fits: the simple schedules, if one does
        simple = _fallback(g, budget)
        if simple is not None:
            return simple[0], simple[1]
        raise ValueError(f"remat(relax=True): no rounding of the LP fits budget_bytes={budget}; "
                         f"solve the integer program (relax=False)")
    return best[1], best[2]
