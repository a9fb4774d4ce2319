"""Optimal nested checkpointing of a heterogeneous chain: the rotor algorithm.

A one-level plan (`minigrad.plan.optimal_segments`) keeps a few segment inputs and
recomputes each segment once. Nested checkpointing goes further: while a
checkpointed segment is recomputed during backward, parts of it may be checkpointed
*again*, and so on. Beaumont, Eyraud-Dubois, Herrmann, Joly and Shilova (2019,
"Optimal checkpointing for heterogeneous chains: how to train deep neural networks
with limited memory") find the best nesting for a chain of layers of different sizes
and costs by dynamic programming; their solver is called *rotor*. `rotor` here solves
the same problem under minigrad's byte ledger, exactly; ``tests/rotor_published.py``
restates the published recurrence in rotor's own model and maps a `ChainProfile` onto it.
Shown in the chapter "Beyond one level".

The schedule
------------
A schedule is plain data, a list of *items* covering the layers in order:

* ``Taped(i)``: run layer ``i`` with taping; its saved arrays stay until its backward
  (rotor's ``F_all``, followed much later by ``B``);
* ``Checkpointed(start, stop, inner)``: run layers ``start .. stop-1`` without saving
  anything and keep their input ``x_start`` (rotor's ``F_ck`` and ``F_nograd``); in
  backward, run them again following the items ``inner``, which cover
  ``start .. stop-1`` and may hold checkpoints of their own.

One-level plans are the schedules whose checkpoints hold only ``Taped`` items
(`from_segments`), Revolve's binomial schedules are nested schedules too (`from_revolve`).
``checkpoint_sequential(layers, schedule, x)`` runs a schedule by walking its `actions`;
the loss, applied to its output, runs taped after the last layer.

The byte model (what the ledger's ``m.peak["activations"]`` measures)
-------------------------------------------------------------------
Write ``S_i`` for the arrays layer ``i`` saves when taped (its input ``x_i`` and/or its
output ``x_{i+1}`` and private arrays, as in `ChainProfile`) and ``{x_s}`` for what a
checkpoint keeps. Saved activations are the *union* of the arrays held, so an array two
holders keep (a boundary both neighbours save, a checkpointed input its first layer
saves too) counts once. A taped run only adds to that set and a backward only removes
from it, except that a recomputation adds again; so the peak is reached at the end of a
taped run: the first forward (with the loss, when it is part of the step), or the
forward part of a recomputation. For items ``I_1 .. I_K`` run on top of a held set
``H``::

    peak(I, H) = max( |H ∪ saved(I_1) ∪ ... ∪ saved(I_K) [∪ loss]|,
                      max over checkpoints I_k = [s, t):
                          peak(inner_k, H ∪ saved(I_1) ∪ ... ∪ saved(I_{k-1}) ∪ {x_s}) )

where ``[∪ loss]`` (the loss's saved arrays) belongs to the top level only (the loss's
backward runs before any recomputation), and a schedule's peak is ``peak(items, ∅)``:
the chain's input is not an activation unless something keeps it. `schedule_peak` evaluates this; ``minigrad.plan.predict_peak``
replays the actions instead, and the two agree. Recomputed work: every checkpoint
re-runs its layers once in backward, and its inner checkpoints theirs inside that run:
``recompute(I) = sum over checkpoints [s, t) of (cost[s] + ... + cost[t-1] + recompute(inner))``.

The dynamic program
-------------------
Inside a level, the held set ``H`` shares at most one array with the rest of the level:
the boundary ``x_a`` where the rest starts (a checkpoint started at ``a`` keeps it, and
so does a taped layer ``a - 1`` that saves its output). Everything else in ``H`` lies
before ``a``. So the state of rotor's recurrence, "layers ``a .. e-1`` still to run
with ``m`` bytes left under the budget", needs one more bit, ``h``: whether ``x_a`` is
already held. Count the loss as one more layer, ``n``, that saves its input (if it
does) and its private arrays and is never checkpointed. With ``C(a, e, h)(m)`` the least
recomputed work that fits and ``F(a, j) = cost[a] + ... + cost[j-1]``::

    C(e, e, h)(m)  = 0 if m >= 0
    C(a, e, h)(m)  = min(  C(a+1, e, so_a)(m - d_a(h)),                      Taped(a)
                           min over a < j < e of                             Checkpointed(a, j, ·)
                             F(a, j) + C(a, j, 1)(m - c_a(h)) + C(j, e, 0)(m - c_a(h))  )

    d_a(h) = own_a + so_a |x_{a+1}| + si_a (1 - h) |x_a|,      c_a(h) = (1 - h) |x_a|

(``si``/``so``: layer ``a`` saves its input/output; ``own``: its private bytes). The
checkpoint's inner schedule is ``C(a, j, 1)``: the checkpoint holds ``x_a``, and the
inner recomputation and the rest of the level both run on top of ``H ∪ {x_a}``, one
after the other, hence the same budget. The answer is ``C(0, n + 1, 0)(budget)``. A
checkpoint over all of ``a .. e-1`` (``j = e``) is left out: running its inner items in
its place costs no more memory and less work. So the loss is never inside a
checkpoint; the last layers may be, which pays when the loss saves arrays of its own
(the last layers' arrays are then not alive at the end of forward, with the loss's).
``tests/plan_references.py`` restates this recurrence word for word (memoised on exact
bytes, for small chains) to check the solvers against.

Rotor discretises ``m`` into memory slots. Here each ``C(a, e, h)`` is kept instead as
an exact step function of ``m``, the Pareto front of ``(peak bytes, recomputed work)``
of that sub-problem's schedules: a minimum is a merge of fronts, the checkpoint term a
merge of two fronts under ``max`` of bytes and ``+`` of work. Budgets are exact to the
byte, ties exact (float costs are summed as fractions), and `rotor_frontier` returns the
whole front. The cost is ``O(n^3 K)`` for fronts of ``K`` points (a budget prunes
them); in pure Python the whole front of a random 40-layer chain with FLOP costs (233
points) takes about half a second of CPU. `tests/test_plan_rotor.py` checks the model against
the ledger for every nested schedule of small chains and the solver against brute
force over all of them.

Long chains: the dense solver
-----------------------------
`rotor` itself keeps ``C(a, e, h)`` as a vector over a grid of memory, ``m = 0, u, 2u,
.. S u`` up to the budget (`_Dense`). With ``u`` the greatest common divisor of the
chain's sizes the grid loses nothing (every byte total the recurrence meets is a
multiple of ``u``), so the answers and the schedules are the fronts' own, ties broken
the same way (tested on random chains). A whole diagonal of the table (every sub-chain
of one length) is one NumPy array of shape (sub-chains, S + 1), so the checkpoint term
for one split offset is two slices added for every start at once: ``O(n^3 S / 6)``
array elements in ``O(n^2)`` NumPy calls. The smallest peak comes first from the same
recurrence with ``max`` of bytes in place of work (`_min_peak`), so ``rotor(profile)``
without a budget is the dense solver at that peak. The fronts remain for float costs
(exact fractions) up to 40 layers, for grids too large to store and for
`rotor_frontier`; longer chains with float costs, or integer costs whose sums float64
cannot add exactly, are planned on integer stand-ins with a scaled bound (`rotor`).
``rotor(..., slots=k)`` is the published solver's discretisation: ``u = budget / k``
and every size rounded *up* to whole slots, so a schedule never exceeds the true budget,
and it recomputes no more than the exact optimum at ``budget - K u`` bytes when that
optimum holds at most ``K`` arrays at once (each is over-counted by less than a slot).
Measured with ``benchmarks/rotor_scaling.py`` (CPU seconds, one thread, an illustration):
a 100-block GPT chain plans in about 0.1 s at its smallest peak and 0.3 s at three
times that; a 1000-layer heterogeneous chain in about 8 s at its smallest peak and 13 s
at ten times it with 32 slots; time grows about as ``n^2.1`` from 100 to 1000 layers at
a fixed grid (the ``O(n^2)`` calls weigh more than the ``O(n^3)`` elements at these
sizes), where the fronts grew as ``n^4.3``.

Long chains: short checkpoints on a fine grid
---------------------------------------------
Beyond that, ``rotor`` without ``slots`` (integer costs) plans on a grid fine enough for
the chain's arrays instead of one cut into a few dozen slots of the budget (which at
1,000 layers made every slot larger than any array, and the schedule use a twelfth of
the budget). It restricts every checkpoint to at most ``W = 16`` layers (`_Windowed`;
``W = 32`` next if the gap below is still over 5 %):
then only the suffixes ``C(a, n + 1, h)`` need the whole grid, ``n`` vectors built
from the next ``W`` ones in one sweep from the loss back to layer 0, and the short
sub-chains need it only up to what ``W`` layers hold all taped; the sweep keeps rings
of ``W + 1`` rows, the choices two bytes per entry. Work ``n (W S + W^2 S_in / 2)``
array elements for a grid of ``S`` points (``S_in`` for the short sub-chains, counted
four times): the unit is chosen to keep that near ``6e9`` (a first pass at a tenth of
that is kept when its gap is within 1 %). Two tables:

* sizes rounded *up*: a schedule (every checkpoint of at most ``W`` layers) whose
  true peak fits the budget; then larger grid points, whose schedules may still fit in
  true bytes, are tried (each checked with `schedule_peak`) and the least work kept;
* sizes rounded *down*, checkpoints longer than ``W`` relaxed to ``F(a, j) +
  C(j, e, 0)`` (their inner work and bytes dropped): a proven lower bound on the exact
  optimum (the proof is `_Windowed`'s), raised to `_taped_knapsack_bound` if that is
  larger.

Where no schedule with short checkpoints fits (near the smallest peak, which needs deep
nesting) or the gap stays over 5 %, a schedule is also read off the smallest-peak
recurrence (every step keeps the rest within the budget in exact bytes), guided by the
whole table on a coarse rounded-down grid (float32 entries rounded down: twice the
slots), whose optimum is also a bound (`_min_peak_items`); the better schedule and the
largest bound are kept. That table is set to inf below each sub-problem's exact
smallest peak (a bound still: `_feasible_floor`'s proof) and each length's vectors
are stored only from the least such floor, the slots chosen to fill the same memory
(`_coarse_slots`): near the smallest peak what matters is the room above the
sub-problems' own smallest peaks, and the same cells then hold three times the
slots at 1,000 layers.

Which windows can fit is known before any pass, exactly: the smallest peak
among the schedules whose checkpoints span at most ``W`` layers is the
smallest-peak recurrence with splits ``k <= W`` (`_min_peak` with ``W``, its
proof there; a tenth of a second at 1,000 layers), and a pass whose window's
peak is over the budget finds nothing, so it is skipped. On the chains below
that peak is 3.2 times the smallest peak for ``W = 16`` and 1.46 times for ``W
= 32`` at 1,000 layers (2.0 and 1.19 at 500). When not even the first window
fits (*deep*), the whole table runs whatever the gap, and gets the time the
skipped passes leave: twice ``_DENSE_MAX_CELLS`` (1.6 times after a ``W = 32``
pass, which then keeps no relaxed table, the whole table's bound being the
larger there, and tries no grid points above the budget); the window's schedule
and the guided one are then spliced at the top level (`_splice`), the best that
fits kept. The slots matter most near the smallest peak, on both sides: at
1,000 layers, 240 to 481 slots moved the bound from 2.12e9 to 2.78e9 and the
guided schedule's work from 3.56e9 to 2.86e9 (gap 40 % to 2.8 %); at 500
layers, 120, 240, 480, 960 and 1,920 slots gave gaps of 20, 7.9, 4.3, 3.2 and
2.9 % (the bound 6 % up, the work 12 % down). A larger grid point of a window
pass is first checked on the bytes held at the end of forward, from the top
level alone (no inner tables), where most of those that fail do. Measured with
``benchmarks/rotor_bound.py`` (CPU seconds, one process, an illustration, on
two cores shared with other jobs, where the code before the window peaks
measured 37, 50 and 46 s at 1,000 layers against its quiet machine's 41, 55 and
48 s below; the chains of ``long_chain`` in ``tests/test_plan_rotor_bound.py``;
gap = (work - bound) / work):

=======  ==================  ==================  ==================
layers   smallest peak       30 % of store-all   60 % of store-all
=======  ==================  ==================  ==================
250      8.9 s, gap 0.1 %    0.8 s, gap 0.7 %    10 s, gap 0.3 %
500      18 s, gap 0.4 %     11 s, gap 0.2 %     14 s, gap 0.4 %
1,000    36 s, gap 2.8 %     16 s, gap 0.4 %     21 s, gap 1.3 %
=======  ==================  ==================  ==================

=======  ==================  ==================
layers   1.5 x smallest      3 x smallest
=======  ==================  ==================
250      33 s, gap 0.4 %     20 s, gap 1.4 %
500      19 s, gap 1.4 %     30 s, gap 3.5 %
1,000    35 s, gap 7.5 %     33 s, gap 12 %
=======  ==================  ==================

(250 layers at 30 %: the coarser first pass was within 1 %; at 1.5 times the
smallest peak, 23 s of the 33 go to the full ``W = 16`` pass, whose grid is
fine at that length: 38 s before.) Where the full grid runs, time grows about
as ``n^0.5`` from 250 to 1,000 layers (the grid's work is held near a constant:
the unit grows with ``n`` instead, and so does the gap). Before the window
peaks (a quiet machine): at 1,000 layers 41 s, gap 40 % at the smallest peak,
55 s, 14 % at 1.5 times it, 48 s, 17 % at 3 times it; at 500 layers 23 s,
3.7 %, 31 s, 2.4 % and 40 s, 3.5 %. Near the smallest peak the coarse whole
table sets the bound, and the schedule but at 3 times it, where the ``W = 32``
window's is the better (6.21e8 against 6.55e8 from 204 slots): the gap there is
both sides' rounding (the window's grid: twice its work, 0.3 % less work;
``W = 48`` or ``64`` on the same work, more). Without the floor the gaps were
36 % and 67 % at the smallest peak (500 and 1,000 layers), 4.0 % and 38 % at
1.5 times it, 4.9 % and 21 % at 3 times it (before the window peaks).
"""
from __future__ import annotations

import bisect
import math
import numbers
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from minigrad._validation import check_int
from minigrad.plan.chain import ChainProfile
from minigrad.plan.profile import as_profile, check_cost_name, check_costs
from minigrad.plan.binomial import binomial_split
from minigrad.plan.segments import explicit

__all__ = [
    "optimal_one_level",
    "Taped",
    "Checkpointed",
    "NestedSchedule",
    "from_segments",
    "from_revolve",
    "enumerate_schedules",
    "count_schedules",
    "schedule_peak",
    "schedule_recompute_cost",
    "schedule_layer_calls",
    "rotor",
    "rotor_frontier",
]


# --------------------------------------------------------------------------- the schedule
@dataclass(frozen=True)
class Taped:
    """Run layer ``layer`` with taping (its saved arrays stay until its backward)."""

    layer: int

    def __str__(self):
        return f"taped {self.layer}"


@dataclass(frozen=True)
class Checkpointed:
    """Checkpoint layers ``start .. stop-1``: run them without saving, keep their
    input ``x_start``, and in backward run them again following ``inner`` (a
    tuple of `Taped` / `Checkpointed` items covering ``start .. stop-1``)."""

    start: int
    stop: int
    inner: tuple

    def __str__(self):
        return f"checkpoint [{self.start}, {self.stop})"



@dataclass(frozen=True)
class NestedSchedule:
    """A nested checkpointing schedule for a chain of ``n`` layers.

    Attributes:
        n: number of layers.
        items: `Taped` / `Checkpointed` items covering layers ``0 .. n-1`` in order
            (see the module docstring).
        predicted_peak_activations: bytes, filled in by the planner.
        recompute_cost: forward work redone in backward, in the profile's cost unit
            (FLOPs by default), filled in by the planner.
        lower_bound_cost: None when the planner proved the schedule optimal; else a
            proven lower bound on the optimum's work (`rotor` on a long chain plans on a
            grid of memory slots: see `rotor`'s ``slots``).

    ``checkpoint_sequential(layers, schedule, x)`` runs it (it walks `actions`),
    ``minigrad.plan.predict_peak`` and ``recompute_cost`` replay those actions, and
    ``print(schedule)`` shows the nesting.

    Example::

        >>> s = from_segments(4, [0, 2])
        >>> print(s)
        checkpoint [0, 2)
            taped 0
            taped 1
        taped 2
        taped 3
    """

    n: int
    items: tuple
    predicted_peak_activations: int | None = None
    recompute_cost: float | None = None
    lower_bound_cost: float | None = None

    @property
    def optimal(self) -> bool:
        """True unless the planner could only bound the optimum: then it recomputes at
        most ``recompute_cost - lower_bound_cost`` more than the optimum does."""
        return self.lower_bound_cost is None or self.lower_bound_cost >= self.recompute_cost

    def __post_init__(self):
        check_int("n", self.n, 1, where="NestedSchedule")
        object.__setattr__(self, "items", tuple(self.items))
        _check_items(self.items, 0, self.n, top=True)

    def __str__(self):
        return "\n".join(_lines(self.items, 0))

    def __repr__(self):
        # the items nest one level per layer at the smallest peak: summarise them
        return (f"NestedSchedule(n={self.n}, depth={self.depth}, "
                f"checkpoints={len(self.checkpoints)}, predicted_peak_activations="
                f"{self.predicted_peak_activations}, recompute_cost={self.recompute_cost})")

    @property
    def depth(self) -> int:
        """Nesting depth: 0 when nothing is checkpointed, 1 for one-level plans."""
        return _depth(self.items)

    @property
    def checkpoints(self) -> list[tuple[int, int, int]]:
        """Every checkpoint as ``(start, stop, level)``, in order of its first forward
        (level 1 = top level, 2 = inside a level-1 checkpoint's recomputation, ...)."""
        out = []
        for it, level in _walk(self.items):
            if isinstance(it, Checkpointed):
                out.append((it.start, it.stop, level + 1))
        return out

    @property
    def actions(self) -> tuple:
        """What the executor does, in order, in the vocabulary of
        ``minigrad.checkpoint.run_schedule`` (and `minigrad.plan.revolve_actions`):
        ``("snapshot", i)`` / ``("free", i)`` (a checkpoint starts / stops holding
        ``x_i``; nested checkpoints at the same ``i`` share one snapshot),
        ``("advance", i, j)`` (layers ``i .. j-1`` without taping), ``("tape", i)``,
        ``("reverse", i)`` (backward through layer ``i``) and ``("restore", i)``
        (a recomputation starts from ``x_i``)."""
        out, held = [], {}

        def forward(items):
            for it in items:
                if isinstance(it, Taped):
                    out.append(("tape", it.layer))
                else:
                    held[it.start] = held.get(it.start, 0) + 1
                    if held[it.start] == 1:
                        out.append(("snapshot", it.start))
                    out.append(("advance", it.start, it.stop))

        forward(self.items)
        stack = [(reversed(self.items), None)]  # iterative: deep schedules nest ~n levels
        while stack:
            items, owner = stack[-1]
            it = next(items, None)
            if it is None:
                stack.pop()
                if owner is not None:
                    held[owner.start] -= 1
                    if held[owner.start] == 0:
                        out.append(("free", owner.start))
            elif isinstance(it, Taped):
                out.append(("reverse", it.layer))
            else:
                out.append(("restore", it.start))
                forward(it.inner)
                stack.append((reversed(it.inner), it))
        return tuple(out)

    @property
    def nested(self):
        """The schedule as nested Python data: an int ``i`` for ``Taped(i)``, a tuple
        ``(start, stop, [inner...])`` for a checkpoint. Round-trips with `from_nested`."""
        root = []
        stack = [(iter(self.items), root)]
        while stack:
            items, out = stack[-1]
            it = next(items, None)
            if it is None:
                stack.pop()
            elif isinstance(it, Taped):
                out.append(it.layer)
            else:
                inner = []
                out.append((it.start, it.stop, inner))
                stack.append((iter(it.inner), inner))
        return root

    @classmethod
    def from_nested(cls, n: int, spec, **kwargs) -> "NestedSchedule":
        """Build a schedule from the `nested` form: ``[(0, 3, [(0, 1, [0]), 1, 2]), 3, 4]``."""
        root = []
        stack = [(iter(spec), root, None)]  # built bottom-up without recursion
        while stack:
            items, out, owner = stack[-1]
            it = next(items, None)
            if it is None:
                stack.pop()
                if owner is not None:
                    stack[-1][1].append(Checkpointed(owner[0], owner[1], tuple(out)))
            elif isinstance(it, tuple) and len(it) == 3:
                stack.append((iter(it[2]), [], (int(it[0]), int(it[1]))))
            elif isinstance(it, (int,)) and not isinstance(it, bool):
                out.append(Taped(int(it)))
            else:
                raise ValueError(f"a nested schedule item is an int (a taped layer) or a tuple "
                                 f"(start, stop, [inner items]), got {it!r}")
        return cls(n=n, items=tuple(root), **kwargs)


def _walk(items):
    """Every item with its nesting level (0 = top), in the order of their first forward:
    an explicit stack, so a schedule nested 1,000 levels deep needs no recursion."""
    stack = [(iter(items), 0)]
    while stack:
        it = next(stack[-1][0], None)
        if it is None:
            stack.pop()
            continue
        level = stack[-1][1]
        yield it, level
        if isinstance(it, Checkpointed):
            stack.append((iter(it.inner), level + 1))


def _lines(items, indent):
    return ["    " * (indent + level) + str(it) for it, level in _walk(items)]


def _depth(items):
    return max((level + 1 for it, level in _walk(items) if isinstance(it, Checkpointed)),
               default=0)


def _check_items(items, start, stop, top=False):
    """Items must cover ``start .. stop-1`` in order; a checkpoint's inner items must
    not be a single checkpoint of the same range (that would nest forever)."""
    stack = [(items, start, stop, top)]  # iterative: deep schedules nest ~n levels
    while stack:
        _check_level(*stack.pop(), stack)


def _check_level(items, start, stop, top, stack):
    pos = start
    for it in items:
        if isinstance(it, Taped):
            if isinstance(it.layer, bool) or not isinstance(it.layer, int) or it.layer != pos:
                raise ValueError(f"schedule item {it} out of order: expected layer {pos}")
            pos += 1
        elif isinstance(it, Checkpointed):
            if it.start != pos or not it.start < it.stop <= stop:
                raise ValueError(f"schedule item {it} out of order: expected a range starting at {pos} "
                                 f"and ending at most at {stop}")
            inner = tuple(it.inner)
            if len(inner) == 1 and isinstance(inner[0], Checkpointed) and \
                    (inner[0].start, inner[0].stop) == (it.start, it.stop):
                raise ValueError(f"{it} recomputes itself as one checkpoint of the same range")
            stack.append((inner, it.start, it.stop, False))
            pos = it.stop
        else:
            raise TypeError(f"schedule items are Taped or Checkpointed, got {type(it).__name__}")
    if pos != stop:
        what = "the schedule" if top else f"the checkpoint's inner schedule [{start}, {stop})"
        raise ValueError(f"{what} covers layers {start} .. {pos - 1}, expected {start} .. {stop - 1}")


def from_segments(n: int, starts: Sequence[int]) -> NestedSchedule:
    """The one-level plan with these segment starts as a nested schedule: every segment
    but the last checkpointed, its layers taped when recomputed.

    Example:
        >>> from_segments(4, [0, 2]).nested
        [(0, 2, [0, 1]), 2, 3]
    """
    starts = list(explicit(n, getattr(starts, "starts", starts)).starts)  # validated
    bounds = starts + [n]
    items = [Checkpointed(a, b, tuple(Taped(i) for i in range(a, b)))
             for a, b in zip(bounds[:-2], bounds[1:-1])]
    items += [Taped(i) for i in range(bounds[-2], n)]
    return NestedSchedule(n=n, items=tuple(items))


def from_revolve(plan) -> NestedSchedule:
    """A `minigrad.plan.RevolvePlan` as a nested schedule: ``l`` layers with ``s`` slots
    checkpoint the first ``m`` of them (the binomial split; recomputed with ``s`` slots)
    and run the other ``l - m`` with ``s - 1``. Its actions run the same layers in the
    same order as the plan's own (a ``("taped", i)`` becomes a tape and a reverse)."""
    def items(a, l, s):
        out = []
        while l > 1:
            m = binomial_split(l, s)
            out.append(Checkpointed(a, a + m, tuple(items(a, m, s))))
            a, l, s = a + m, l - m, s - 1
        out.append(Taped(a))
        return out
    return NestedSchedule(n=plan.n, items=tuple(items(0, plan.n, plan.slots)))


def enumerate_schedules(n: int):
    """Every nested schedule of ``n`` layers, as a tuple of items (a generator). A
    checkpoint's inner items are any schedule of its range except that same checkpoint
    again. There are `count_schedules(n)` of them (25216 for 6 layers)."""
    check_int("n", n, 1, where="enumerate_schedules")
    yield from _level(0, n)


def _level(a, e):
    """Schedules of ``a .. e-1``: the inner ones, and one checkpoint over all of it."""
    yield from _inner(a, e)
    if a < e:
        for inner in _inner(a, e):
            yield (Checkpointed(a, e, inner),)


def _inner(a, j):
    """Schedules of ``a .. j-1`` that are not one checkpoint over all of it."""
    if a == j:
        yield ()
        return
    for rest in _level(a + 1, j):
        yield (Taped(a),) + rest
    for k in range(a + 1, j):
        for inner in _inner(a, k):
            ck = Checkpointed(a, k, inner)
            for rest in _level(k, j):
                yield (ck,) + rest


def count_schedules(n: int) -> int:
    """How many schedules `enumerate_schedules(n)` yields: ``T(n)``, where ``T(0) = 1``,
    ``T(L) = 2 I(L)`` and ``I(L) = T(L-1) + sum_{0<k<L} I(k) T(L-k)`` counts the inner
    schedules of a checkpoint of ``L`` layers."""
    check_int("n", n, 1, where="count_schedules")
    T, I = [1], [0]
    for L in range(1, n + 1):
        I.append(T[L - 1] + sum(I[k] * T[L - k] for k in range(1, L)))
        T.append(2 * I[L])
    return T[n]


# --------------------------------------------------------------------------- the byte model
def _chain_arrays(profile: ChainProfile):
    """``(a, si, so, own)`` of the chain with the loss as one more layer ``n``: boundary
    bytes ``|x_0| .. |x_{n+1}|`` (the loss's scalar output is never kept: 0), saves-input
    and saves-output flags, private bytes."""
    a = list(profile.input_bytes) + [profile.output_bytes, 0]
    si = [bool(v) for v in profile.saves_input] + [bool(profile.loss_saves_input)]
    so = [bool(v) for v in profile.saves_output] + [False]
    own = list(profile.own_bytes) + [int(profile.loss_own_bytes)]
    return a, si, so, own


def _items_of(profile, schedule):
    if not isinstance(schedule, NestedSchedule):
        raise TypeError(f"expected a NestedSchedule, got {type(schedule).__name__}")
    if schedule.n != profile.n:
        raise ValueError(f"the schedule is for n={schedule.n} layers, the profile has {profile.n}")
    return schedule.items


def schedule_peak(profile: ChainProfile, schedule: NestedSchedule) -> int:
    """Peak saved-activation bytes of one step (forward, loss, backward) under ``schedule``.

    The model of the module docstring, evaluated along the nesting (equal to
    ``minigrad.plan.predict_peak``, which replays the schedule's actions).

    Args:
        profile: the chain's `ChainProfile` (the loss's bytes included).
        schedule: a `NestedSchedule` for ``profile.n`` layers.
    Returns:
        bytes (int).
    Example:
        >>> profile = ChainProfile(input_bytes=(64,) * 6, output_bytes=64, saves_input=(True,) * 6,
        ...                        saves_output=(False,) * 6, own_bytes=(128,) * 6, cost=(10,) * 6)
        >>> schedule_peak(profile, from_segments(profile.n, [0, 3]))
        640
    """
    items = _items_of(profile, schedule) + (Taped(profile.n),)  # the loss, taped last
    a, si, so, own = _chain_arrays(profile)
    # keys: boundary x_b -> b, private arrays of layer i (the loss: i = n) -> -(i + 1)
    size = {b: a[b] for b in range(len(a))}
    size.update({-(i + 1): own[i] for i in range(len(own))})

    def saved(it):
        if isinstance(it, Checkpointed):
            return {it.start}
        i = it.layer
        return ({i} if si[i] else set()) | ({i + 1} if so[i] else set()) | ({-(i + 1)} if own[i] else set())

    # the levels on an explicit stack (a schedule may nest ~n levels): each entry
    # is a level's remaining items and the set held so far; a checkpoint's inner
    # level starts on top of that set and x_start, and the level's own set is
    # summed when its items run out (the end of its taped run)
    best, stack = 0, [(iter(items), set())]
    while stack:
        rest, live = stack[-1]
        it = next(rest, None)
        if it is None:
            best = max(best, sum(size[k] for k in live))
            stack.pop()
            continue
        if isinstance(it, Checkpointed):
            stack.append((iter(it.inner), live | {it.start}))
        live |= saved(it)
    return int(best)


def _costs(profile: ChainProfile, cost, where: str = "rotor"):
    """Per-layer costs as exact numbers (ints, or Fractions when some are floats): the
    profile's own (``cost`` None or a name of `COSTS`) or the ``n`` numbers given."""
    check_cost_name(cost, where, profile.n)
    values = check_costs(profile.cost if cost is None or isinstance(cost, str) else cost,
                         profile.n, where)
    if all(float(v).is_integer() for v in values):
        return [int(v) for v in values]
    # exact: a float (NumPy's float32 too) is the fraction its bits say
    return [v if isinstance(v, Fraction) else Fraction(int(v))
            if isinstance(v, numbers.Integral) else Fraction(float(v)) for v in values]


def _number(x):
    """An exact work total as the profile's kind of number: int, or the nearest float."""
    return x if isinstance(x, int) else float(x)


def schedule_recompute_cost(profile: ChainProfile, schedule: NestedSchedule, cost=None):
    """Forward work redone in backward under ``schedule`` (every checkpoint re-runs its
    layers once; its inner checkpoints theirs inside that run).

    ``cost``: per-layer costs (default: ``profile.cost``, FLOPs when `profile_chain`
    measured it so). Exact: an int for int costs, else the float nearest the exact sum."""
    costs = _costs(profile, cost)
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    # every checkpoint, at any level, re-runs its layers once (no recursion: a
    # schedule may nest ~n levels)
    return _number(sum((prefix[it.stop] - prefix[it.start]
                        for it, _ in _walk(_items_of(profile, schedule))
                        if isinstance(it, Checkpointed)), 0))


def schedule_layer_calls(profile: ChainProfile, schedule: NestedSchedule) -> int:
    """Layer calls over one forward and backward: one per layer plus one per re-run."""
    return profile.n + schedule_recompute_cost(profile, schedule, cost=[1] * profile.n)


# --------------------------------------------------------------------------- the solver
_INF = float("inf")


def _combine(A, B, extra):
    """Front of ``max`` of bytes and ``+`` of work (plus ``extra``) of two fronts."""
    an, ac = A
    bn, bc = B
    if not an or not bn:
        return [], []
    mu = max(an[0], bn[0])
    i = bisect.bisect_right(an, mu) - 1
    j = bisect.bisect_right(bn, mu) - 1
    out_n, out_c = [mu], [ac[i] + bc[j] + extra]
    la, lb = len(an) - 1, len(bn) - 1
    while i < la or j < lb:
        ni = an[i + 1] if i < la else _INF
        nj = bn[j + 1] if j < lb else _INF
        mu = ni if ni < nj else nj
        if ni == mu:
            i += 1
        if nj == mu:
            j += 1
        c = ac[i] + bc[j] + extra
        if c < out_c[-1]:
            out_n.append(mu)
            out_c.append(c)
    return out_n, out_c


def _envelope(points, cap):
    """Pareto front (bytes ascending, work strictly descending) of ``(bytes, work)``
    points, those above ``cap`` bytes dropped."""
    points.sort()
    out_n, out_c = [], []
    best = _INF
    for m, c in points:
        if m > cap:
            break
        if c < best:
            out_n.append(m)
            out_c.append(c)
            best = c
    return out_n, out_c


def _value(front, m):
    """Least work of a front within ``m`` bytes (inf if none fits)."""
    k = bisect.bisect_right(front[0], m) - 1
    return front[1][k] if k >= 0 else _INF


class _Fronts:
    """``C(a, e, h)`` of the recurrence for every sub-chain, as Pareto fronts
    ``(bytes ascending, work descending)``, and the schedules behind them."""

    def __init__(self, profile: ChainProfile, costs, cap=_INF):
        self.n = profile.n
        N = profile.n + 1  # the loss is layer n
        self.a, self.si, self.so, self.own = a, si, so, own = _chain_arrays(profile)
        self.prefix = prefix = [0]
        for c in list(costs) + [0]:
            prefix.append(prefix[-1] + c)
        C = {}
        for s in range(N + 1):
            C[s, s, 0] = C[s, s, 1] = ([0], [0])
        for length in range(1, N + 1):
            for s in range(N - length + 1):
                e = s + length
                ck = []  # checkpoint alternatives, on top of a held x_s
                for j in range(s + 1, e):
                    sub, rest = C[s, j, 1], C[j, e, 0]
                    if sub[0] and rest[0]:
                        ck.append(_combine(sub, rest, prefix[j] - prefix[s]))
                tn, tc = C[s + 1, e, int(so[s])]
                base = own[s] + (a[s + 1] if so[s] else 0)
                for h in (0, 1):
                    d_taped = base + (a[s] if si[s] and not h else 0)
                    d_ck = 0 if h else a[s]
                    pts = [(m + d_taped, c) for m, c in zip(tn, tc)]
                    for fn, fc in ck:
                        pts += [(m + d_ck, c) for m, c in zip(fn, fc)]
                    C[s, e, h] = _envelope(pts, cap)
        self.C = C
        self.N = N

    def front(self):
        return self.C[0, self.N, 0]

    def build(self, m):
        """The items of a schedule of the whole chain with the least work within ``m``
        bytes (the loss, ``Taped(n)``, left out: it runs after the layers)."""
        items = self._build(0, self.N, 0, m)
        assert items[-1] == Taped(self.n), items
        return tuple(items[:-1])

    def _build(self, s, e, h, m):
        a, si, so, own, prefix, C = self.a, self.si, self.so, self.own, self.prefix, self.C
        items = []
        while s < e:
            target = _value(C[s, e, h], m)
            d = own[s] + (a[s + 1] if so[s] else 0) + (a[s] if si[s] and not h else 0)
            if _value(C[s + 1, e, int(so[s])], m - d) == target:
                items.append(Taped(s))
                s, h, m = s + 1, int(so[s]), m - d
                continue
            m2 = m - (0 if h else a[s])
            for j in range(s + 1, e):
                if _value(C[s, j, 1], m2) + _value(C[j, e, 0], m2) + (prefix[j] - prefix[s]) == target:
                    items.append(Checkpointed(s, j, tuple(self._build(s, j, 1, m2))))
                    s, h, m = j, 0, m2
                    break
            else:  # pragma: no cover  (the fronts were built from these very terms)
                raise AssertionError(f"no schedule item reproduces the front at {(s, e, h, m)}")
        return items



# --------------------------------------------------------------------------- the dense solver
# The same recurrence on a grid of memory: ``m`` counted in units of ``unit`` bytes, every
# size a whole number of units. With ``unit`` the greatest common divisor of the chain's
# sizes the grid is exact (every byte count the recurrence can meet is on it); with
# ``slots`` it is the published solver's discretisation (sizes rounded up). ``C(a, e, h)``
# is then a vector over ``m = 0 .. S`` instead of a front, and a whole diagonal of the
# table (every sub-chain of one length) is one NumPy array of shape (sub-chains, S + 1):
# the checkpoint term for a split at offset ``k`` is two slices added, for every start at
# once. Work is ``O(n^3 S / 6)`` array elements and ``O(n^2)`` NumPy calls.
_DENSE_MAX_CELLS = 40_000_000  # entries of the two tables (8 bytes each): 320 MB at most
_EXACT_FLOAT = 2 ** 53  # float64 adds integers exactly below this
_FRONTS_MAX_LAYERS = 40  # beyond, exact fronts grow about as n^4: slots with a bound


def _float32_down(x):
    """``x`` (float64) as float32, each entry the largest float32 at most it."""
    y = x.astype(np.float32)
    up = y > x
    y[up] = np.nextafter(y[up], np.float32(-np.inf))
    return y


class _Dense:
    """``C(a, e, h)(m)`` for every sub-chain, on a memory grid of ``S + 1`` points.

    ``D0[l][a]`` is ``C(a, a + l, 0)`` and ``P1[l][a]`` is ``C(a, a + l, 1) + F(a, a + l)``
    (the checkpoint term reads it so), vectors over ``m = off[l] .. S`` (inf: nothing
    fits; below ``off[l]``, inf too, not stored).

    ``down32``: store every entry as the float32 at or below it (half the memory).
    The recurrence is non-decreasing in the entries it reads, so by induction every
    stored entry is at most the exact one: the table is then only a lower bound (and
    a guide), never a schedule's work (a float32 sum is rounded to nearest, then
    one float32 step down: at most the exact sum).

    ``floor`` (`_feasible_floor`): every entry below its sub-problem's floor is set
    to inf, and a length's vectors are stored only from ``off[l]``, the least floor
    of its sub-chains (a lower bound still: `_feasible_floor`'s proof)."""

    def __init__(self, sizes, costs, S, down32=False, floor=None):
        a, si, so, own = sizes  # in grid units, the loss as layer n
        self.a, self.si, self.so, self.own = a, si, so, own
        N = len(si)
        self.N, self.S = N, S
        if floor is None:
            off = [0] * (N + 1)
        else:
            off = [0] + [int(min(S, floor[0][l].min(), floor[1][l].min()))
                         for l in range(1, N + 1)]
        self.off = off
        prefix = np.zeros(N + 1)
        prefix[1:] = np.cumsum(np.asarray(list(costs) + [0], dtype=np.float64))
        self.prefix = prefix
        a_arr = np.asarray(a, dtype=np.int64)
        si_arr = np.asarray(si, dtype=bool)
        so_arr = np.asarray(so, dtype=bool)
        own_arr = np.asarray(own, dtype=np.int64)
        # d(h): bytes a taped layer adds; c(0): bytes a checkpoint adds (x_a)
        base = own_arr + np.where(so_arr, a_arr[1:N + 1], 0)
        self.d = (base + np.where(si_arr, a_arr[:N], 0), base)  # h = 0, h = 1
        m_all = np.arange(S + 1)
        inf = np.inf
        D0 = [np.zeros((N + 1, S + 1))]
        P1 = [np.zeros((N + 1, S + 1))]
        dt = np.float32 if down32 else np.float64
        tmp = np.empty((N + 1, S + 1), dtype=dt)
        for length in range(1, N + 1):
            rows = N - length + 1
            F = prefix[length:length + rows] - prefix[:rows]  # F(a, a + length)
            o = off[length]
            m = m_all[o:]  # this length's grid points
            # checkpoint at a over [a, a + k): PF(a, a+k) + C(a+k, e, 0), on top of
            # x_a; Q over m = oq .. S, read from o - |x_a| on (inf below)
            need = o - int(a_arr[:rows].max()) if o else 0
            los = [max(off[k], off[length - k], need) for k in range(1, length)]
            oq = min(los, default=S + 1)
            Q = np.full((rows, S + 1 - oq), inf, dtype=dt)
            for k, lo in zip(range(1, length), los):
                if lo > S:
                    continue
                t = tmp[:rows, :S + 1 - lo]
                np.add(P1[k][:rows, lo - off[k]:],
                       D0[length - k][k:k + rows, lo - off[length - k]:],
                       out=t)
                q = Q[:, lo - oq:]
                np.minimum(q, t, out=q)
            if down32:  # each float32 sum rounded to nearest: one step down is
                fin = np.isfinite(Q)  # at most the exact sum
                Q[fin] = np.nextafter(Q[fin], np.float32(-inf))
            # taped a: C(a + 1, e, so_a)(m - d_a(h)), read from off[length - 1]
            o1 = off[length - 1]
            prev1 = P1[length - 1][1:rows + 1] - (prefix[length:length + rows]
                                                  - prefix[1:rows + 1])[:, None]
            nxt = np.where(so_arr[:rows, None], prev1, D0[length - 1][1:rows + 1])
            out = []
            for h in (0, 1):
                idx = m[None, :] - self.d[h][:rows, None] - o1
                taped = np.where(idx >= 0, np.take_along_axis(
                    nxt, np.maximum(idx, 0), axis=1), inf)
                # the checkpoint keeps x_a when h = 0: Q(m - |x_a|)
                idx = m[None, :] - (a_arr[:rows, None] if h == 0 else 0) - oq
                idx = np.broadcast_to(idx, taped.shape)
                ck = (np.where(idx >= 0, np.take_along_axis(
                    Q, np.maximum(idx, 0), axis=1), inf) if Q.shape[1] else
                      np.full(taped.shape, inf))
                out.append(np.minimum(taped, ck))
            if floor is not None:  # nothing fits below: inf (see _feasible_floor)
                for h in (0, 1):
                    out[h][m[None, :] < floor[h][length][:, None]] = inf
            if down32:
                out = [_float32_down(out[0]), _float32_down(out[1] + F[:, None])]
                D0.append(out[0])
                P1.append(out[1])
            else:
                D0.append(out[0])
                P1.append(out[1] + F[:, None])
        self.D0, self.P1 = D0, P1

    def at(self, table, length, s, m):
        """``table[length]`` (``self.D0`` or ``self.P1``) at start ``s``, grid
        point ``m`` (``0 <= m <= S``; inf below what is stored)."""
        o = self.off[length]
        return table[length][s, m - o] if m >= o else np.inf

    def value(self, s, e, h, m):
        """``C(s, e, h)(m)`` (inf if ``m < 0``)."""
        if m < 0:
            return np.inf
        length = e - s
        if h == 0:
            return self.at(self.D0, length, s, m)
        return self.at(self.P1, length, s, m) - (self.prefix[e] - self.prefix[s])

    def top(self):
        o = self.off[self.N]
        return np.concatenate([np.full(o, np.inf), self.D0[self.N][0]])

    def build(self, m):
        """Items of the whole chain's schedule with the least work within ``m`` units (the
        loss left out), choosing as `_Fronts.build` does: taped first, then the
        shortest checkpoint."""
        items = self._build(0, self.N, 0, m)
        assert items[-1] == Taped(self.N - 1), items
        return tuple(items[:-1])

    def _build(self, s, e, h, m):
        a, so = self.a, self.so
        items = []
        while s < e:
            # the candidates the table took its minimum over, in its order of preference
            d = int(self.d[h][s])
            best, choice = self.value(s + 1, e, int(so[s]), m - d), None
            m2 = m - (0 if h else a[s])
            if m2 >= 0:
                for j in range(s + 1, e):
                    v = (self.at(self.P1, j - s, s, m2)
                         + self.at(self.D0, e - j, j, m2))
                    if v < best:
                        best, choice = v, j
            if best == np.inf:  # pragma: no cover  (callers start from a finite entry)
                raise AssertionError(f"no schedule fits at {(s, e, h, m)}")
            if choice is None:
                items.append(Taped(s))
                s, h, m = s + 1, int(so[s]), m - d
            else:
                items.append(Checkpointed(s, choice, tuple(self._build(s, choice, 1, m2))))
                s, h, m = choice, 0, m2
        return items


def _min_peak(profile: ChainProfile, W: int | None = None) -> int:
    """The smallest peak any nested schedule reaches (bytes, exact): the recurrence with
    ``max`` of bytes in place of work, one diagonal of sub-chains at a time.
    With ``W``, among the schedules whose checkpoints span at most ``W`` layers
    (the schedules of a `_Windowed` table with windows of ``W``).

    Proof (with ``W``). A schedule of sub-problem ``(a, e, h)`` starts either
    with ``Taped(a)``, then a schedule of ``(a + 1, e, so_a)``, or with
    ``Checkpointed(a, a + k, inner)``, ``inner`` a schedule of ``(a, a + k,
    1)``, then one of ``(a + k, e, 0)``, each part run on top of what the
    first item holds: its peak is the recurrence's term for that choice, and
    its checkpoints span at most ``W`` layers iff ``k <= W`` and both parts'
    do. So the recurrence with ``k <= W`` ranges over exactly those schedules,
    and its minimum is their smallest peak. A `_Windowed` table's schedules
    (sizes rounded up; larger grid points checked with `schedule_peak`) are
    such schedules whose true peak fits the budget: when this peak is over the
    budget, `_windowed_rotor` finds none, and `rotor` skips the pass (on the
    exact grid the converse holds too; both tested)."""
    P, _ = _min_peak_tables(profile, W)
    return int(P[0][len(P[0]) - 1][0])


def _min_peak_tables(profile: ChainProfile, W: int | None = None):
    """``(P, d)``: ``P[h][l][a]`` the smallest peak of layers ``a .. a+l-1`` (the loss
    is layer ``n``) run on top of nothing more (``h``: ``x_a`` held), ``d[h]`` the
    bytes a taped layer adds. With ``W``, checkpoints span at most ``W`` layers
    (the split offsets ``k <= W``: the same recurrence over that subset of the
    schedules, so ``P`` is then their smallest peak, exactly)."""
    a, si, so, own = _chain_arrays(profile)
    N = len(si)
    a_arr = np.asarray(a, dtype=np.int64)
    si_arr, so_arr = np.asarray(si, dtype=bool), np.asarray(so, dtype=bool)
    base = np.asarray(own, dtype=np.int64) + np.where(so_arr, a_arr[1:N + 1], 0)
    d = (base + np.where(si_arr, a_arr[:N], 0), base)
    P = [[np.zeros(N + 1, dtype=np.int64)], [np.zeros(N + 1, dtype=np.int64)]]
    big = np.iinfo(np.int64).max // 4
    for length in range(1, N + 1):
        rows = N - length + 1
        Q = np.full(rows, big, dtype=np.int64)
        for k in range(1, length if W is None else min(length, W + 1)):
            np.minimum(Q, np.maximum(P[1][k][:rows], P[0][length - k][k:k + rows]), out=Q)
        for h in (0, 1):
            nxt = np.where(so_arr[:rows], P[1][length - 1][1:rows + 1], P[0][length - 1][1:rows + 1])
            taped = d[h][:rows] + nxt
            ck = Q + (a_arr[:rows] if h == 0 else 0)
            P[h].append(np.minimum(taped, ck))
    return P, d


def _coarse_slots(P, N: int, cap: int, cells: int) -> int:
    """The most slots ``S`` (at least 8) for which the whole table, each length's
    vectors stored from its least floor (`_feasible_floor`), holds at most ``cells``
    entries per table (``P``: `_min_peak_tables`)."""
    low = np.array([min(P[0][l].min(), P[1][l].min()) for l in range(1, N + 1)],
                   dtype=np.int64)
    rows = N - np.arange(1, N + 1) + 1

    def size(S):
        off = np.minimum(S, -(-low * S // cap))
        return int((rows * (S + 1 - off)).sum())

    lo, hi = 8, 8
    while size(2 * hi) <= cells and hi < 2 ** 24:
        hi *= 2
    hi *= 2
    while lo < hi - 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if size(mid) <= cells else (lo, mid)
    return lo


def _feasible_floor(profile: ChainProfile, S: int, cap: int, P=None):
    """For the whole table on a grid of ``S`` units of ``u = cap / S`` bytes, sizes
    rounded down (``floor(v / u)``): ``floor[h][l][a]``, the least grid point ``m``
    with ``m u`` at least the exact smallest peak of ``C(a, a + l, h)``. Below it the
    entry may be set to inf and the table stays a lower bound.

    Proof. Write ``V(a, e, h)(m)`` for the least work of the schedules ``X`` of
    sub-problem ``(a, e, h)`` whose peak fits ``m`` in rounded-down units *and*
    ``m u`` in true bytes (both in the recurrence's sense, on top of ``x_a`` when
    ``h``). A taped ``a`` leaves ``m - d'`` units (``d'`` rounded down) and ``m u -
    d`` true bytes, and ``m u - d <= (m - d') u`` since ``d' u <= d``; likewise a
    checkpoint's ``c``. So ``V`` satisfies the recurrence's inequality: ``V(a, e,
    h)(m)`` is at least the minimum of its terms read in ``V`` at the shifted
    points, and it is inf where the exact smallest peak ``P(a, e, h) > m u``. A
    table that follows the recurrence (float32 rounded down only lowers it) and is
    set to inf only there is, by induction over the sub-chains' lengths, at most
    ``V`` everywhere. At the top, the optimum's schedule fits ``S`` units (a sum of
    floors is at most the floor of the sum) and ``S u = cap`` bytes: the table's
    ``top()[S]`` is at most the exact optimum."""
    if P is None:
        P, _ = _min_peak_tables(profile)
    return [[-(-row * S // cap) for row in P[h]] for h in (0, 1)]


def _min_peak_items(profile: ChainProfile, budget: int, guide=None, scale=None,
                    tables=None, start=None):
    """A schedule of peak at most ``budget`` (at least the smallest peak), read off the
    smallest-peak recurrence: at every step the choices whose rest still fits (exact
    bytes), and among them the least work that ``guide`` (a `_Dense` table;
    ``scale = (S, cap)``: ``m`` bytes read at ``ceil(m S / cap)`` units, at most
    ``S``) estimates, taped on ties; without a guide, taped whenever it fits, else
    the shortest checkpoint that fits. No claim of optimality: the fallback when no
    schedule with short checkpoints fits. ``tables``: `_min_peak_tables`'s, if
    already computed. ``start = (s, h, m)``: the suffix from layer ``s`` on
    (``h``: ``x_s`` held) within ``m`` bytes (at least its smallest peak)."""
    P, d = _min_peak_tables(profile) if tables is None else tables
    a, si, so, _ = _chain_arrays(profile)
    N = len(si)
    Pm = [np.zeros((N + 1, N + 1), dtype=np.int64) for _ in (0, 1)]
    for h in (0, 1):
        for length, row in enumerate(P[h]):
            Pm[h][length, :len(row)] = row

    def grid(m):  # the guide's grid point for m bytes: m u at least m
        return min(guide.S, -(-int(m) * scale[0] // scale[1]))

    def est(s, e, h, m):  # the guide's work for C(s, e, h) within m bytes
        return 0.0 if guide is None else guide.value(s, e, h, grid(m))

    def build(s, e, h, m):
        items = []
        while s < e:
            L = e - s
            rest = Pm[int(so[s])][L - 1, s + 1] if L > 1 else 0
            m2 = m - (0 if h else a[s])
            ks = np.arange(1, L)
            ok = ks[np.maximum(Pm[1][ks, s], Pm[0][L - ks, s + ks]) <= m2]
            if d[h][s] + rest <= m:
                best, k = est(s + 1, e, int(so[s]), m - d[h][s]), 0
            else:
                best, k = np.inf, int(ok[0])
            if guide is not None and len(ok):
                mu = grid(m2)
                for j in ok.tolist():
                    v = (guide.at(guide.P1, j, s, mu)
                         + guide.at(guide.D0, L - j, s + j, mu))
                    if v < best:
                        best, k = v, j
            if k == 0:
                items.append(Taped(s))
                m -= int(d[h][s])
                s, h = s + 1, int(so[s])
            else:
                items.append(Checkpointed(s, s + k, tuple(build(s, s + k, 1, m2))))
                s, h, m = s + k, 0, m2
        return items

    s, h, m = (0, 0, budget) if start is None else start
    with _deep_nesting(N):
        return tuple(build(s, N, h, m)[:-1])


def _top_states(profile, items, costs):
    """The states between a schedule's top-level items, ``(s, h, used, work)``
    before item ``i`` for ``i = 0 .. len(items)``: the next layer, whether
    ``x_s`` is held, the bytes the recurrence has counted (``d_a(h)`` per taped
    layer, ``c_a(h)`` per checkpoint) and the work of the items before."""
    a, si, so, own = _chain_arrays(profile)
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)

    def work(items):
        return sum(prefix[it.stop] - prefix[it.start] + work(it.inner)
                   for it in items if isinstance(it, Checkpointed))
    s, h, used, done = 0, 0, 0, 0
    out = [(s, h, used, done)]
    for it in items:
        if isinstance(it, Taped):
            used += own[s] + (a[s + 1] if so[s] else 0) + (
                a[s] if si[s] and not h else 0)
            s, h = s + 1, int(so[s])
        else:
            used += 0 if h else a[s]
            done += work((it,))
            s, h = it.stop, 0
        out.append((s, h, used, done))
    return out


def _splice(profile, costs, cap, guided, windowed, up, unit, guide, scale,
            tables, tries=8):
    """The best of two schedules spliced at the top level: the guided one's
    first items, then the window table's suffix from that state (every split
    point; ``up``: a `_Windowed` with suffixes, sizes rounded up to ``unit``
    bytes), or the window schedule's first items, then a guided suffix
    (`_min_peak_items`, at ``tries`` split points). ``(items, work)`` of the
    least work among those that fit ``cap`` (`schedule_peak`), the two
    schedules included. Every splice is a schedule: the recurrence's state
    between top-level items is ``(s, h)`` and the bytes counted so far, and
    any schedule of the suffix within the rest continues it."""
    N = len(_chain_arrays(profile)[1])

    def total(items):
        return schedule_recompute_cost(
            profile, NestedSchedule(n=profile.n, items=items), costs)
    best = min(((total(x), x) for x in (guided, windowed)),
               key=lambda p: p[0])
    # the window table's suffix after the guided items: read, then built once
    states = _top_states(profile, guided, costs)
    est = [w + float(up.suffix[h][s][min((cap - used) // unit, up.S)])
           if s < N - 1 and cap >= used and up.suffix is not None else np.inf
           for s, h, used, w in states]
    candidates = []
    i = int(np.argmin(est))
    if est[i] < best[0]:
        s, h, used, _ = states[i]
        candidates.append(guided[:i] + up.build(
            min((cap - used) // unit, up.S), s, h))
    # a guided suffix after the window schedule's items, at a few splits
    states = _top_states(profile, windowed, costs)
    cuts = [i for i, it in enumerate(windowed) if isinstance(it, Checkpointed)]
    for i in cuts[::max(1, -(-len(cuts) // tries))]:
        s, h, used, _ = states[i]
        candidates.append(windowed[:i] + _min_peak_items(
            profile, cap, guide, scale, tables, start=(s, h, cap - used)))
    for items in candidates:
        w = total(items)
        if w < best[0] and schedule_peak(
                profile, NestedSchedule(n=profile.n, items=items)) <= cap:
            best = (w, items)
    return best[1], best[0]


# --------------------------------------------------------------------------- long chains
# The auto path for chains too long for the exact grid: every checkpoint spans at most
# ``_WINDOW`` layers (a restriction: its schedules are schedules, rounded up they fit),
# and the same table with sizes rounded down and longer checkpoints relaxed (a lower
# bound). Only the suffixes ``C(a, n + 1, h)`` need the whole memory grid; the short
# sub-chains need it only up to what they hold when all taped, so the grid can be fine.
_WINDOW = 16
_WINDOW_WORK = 6_000_000_000  # array elements of one table (a few seconds of CPU)
_WINDOW_CODES = 250_000_000  # bytes of the schedule table's choices (one per entry)
# (window, share of _WINDOW_WORK, gap that stops): tried in turn
_WINDOW_STEPS = ((_WINDOW, 0.1, 0.01), (_WINDOW, 1, 0.05), (2 * _WINDOW, 1, 0.05))
_WINDOW_GAP = 0.05  # above this gap, a longer window, then a coarse whole table
# the whole table's cells when deep, times _DENSE_MAX_CELLS: the time the
# skipped window passes leave (without a window pass, with one)
_DEEP_CELLS = (2.0, 1.6)


def _shift(v, c):
    """``out[m] = v[m - c]``, inf for ``m < c`` (a copy unless ``c == 0``)."""
    if c == 0:
        return v
    out = np.full(v.shape[-1], np.inf)
    if c < v.shape[-1]:
        out[c:] = v[:v.shape[-1] - c]
    return out


class _Windowed:
    """``C(a, n + 1, h)(m)`` for every suffix, on a memory grid ``m = 0 .. S``, with
    every checkpoint spanning at most ``W`` layers, or, with ``relax``, longer ones
    counted as ``F(a, j) + C(j, e, 0)(m - c_a(h))`` (their inner schedule's work and
    bytes dropped: a lower bound on the recurrence).

    Without ``relax`` it is the recurrence over a subset of the schedules (those whose
    checkpoints span at most ``W`` layers), so every value is the work of a schedule
    of that subset whose peak, in the table's units, fits ``m``.

    Proof that, with ``relax`` and sizes rounded down (``floor(v / u)``, the grid
    ``S = floor(budget / u)``), ``top[S]`` is at most the exact optimum. (1) A schedule
    whose true peak fits the budget fits ``S`` rounded down: its peak is a sum over a
    held set, and a sum of floors is at most the floor of the sum. So the exact
    recurrence on the rounded-down sizes, ``C'``, is at most the true optimum at
    ``S``. (2) The table's ``L(s, e, h)(m) <= C'(s, e, h)(m)`` for every entry, by
    induction from the loss back: a short sub-chain (at most ``W`` layers) holds only
    checkpoints shorter than itself, so its entries are ``C'``'s own recurrence
    (vectors cut at ``S_in``, where all taped already fits: constant beyond); a
    suffix's terms are ``C'``'s terms for taped and short checkpoints (at most by
    induction), and for a checkpoint ``[s, j)`` longer than ``W`` the term
    ``F(s, j) + C'(s, j, 1)(m') + C'(j, e, 0)(m')`` is at least ``F(s, j) +
    L(j, e, 0)(m')``, since ``C'(s, j, 1) >= 0`` (inf when nothing fits only raises it).
    A minimum of terms each at most ``C'``'s term is at most ``C'``'s minimum. So
    ``top[S] = L(0, n + 1, 0)(S) <= C'(0, n + 1, 0)(S) <= `` the true optimum.

    The relaxed term keeps a part of the inner work: ``C'(s, j, 1)(m') >=
    C'(s, s + W, 1)(m')`` for ``j > s + W``. Cut a schedule of ``s .. j-1`` at ``s +
    W``: drop the items from ``s + W`` on and end every checkpoint that crosses it
    there (its inner items cut the same way; one that then spans its whole level is
    replaced by its inner items, which the recurrence's own remark allows). Every held
    set of the cut schedule is a subset of one of the original's at the same moment,
    and it re-runs a subset of the layers: a schedule of ``s .. s+W-1`` on top of
    ``x_s`` within ``m'``, doing no more work. So the long term is at least
    ``F(s, j) + C'(s, s + W, 1)(m') + L(j, e, 0)(m')``, which is what the table uses.

    One sweep from the loss back to layer 0. A start ``s`` first gets its short
    sub-chains ``C(s, s + l, h)``, ``l <= W`` (the same recurrence as `_Dense`, vectors
    cut at ``S_in``, past which nothing changes: ``S_in`` is the most a window of ``W``
    layers holds all taped), kept in a ring of the last ``W + 1`` starts; then its
    suffix ``C(s, n + 1, h)`` from the next ``W`` suffixes (a ring too). With
    ``codes`` the choices are kept, two bytes per entry: the checkpoint's span at the
    argmin (bits 0-7), taped preferred for ``h = 0`` (bit 8) and ``h = 1`` (bit 9).
    With ``suffixes`` every ``C(s, n + 1, h)`` is kept too
    (``suffix[h][s]``), and `build` starts from any ``(s, h)``."""

    def __init__(self, sizes, costs, S, W, relax=False, codes=False,
                 suffixes=False):
        a, si, so, own = sizes
        N = len(si)
        self.N, self.S, self.W = N, S, W
        self.a, self.si, self.so, self.own = a, si, so, own
        prefix = np.zeros(N + 1)
        prefix[1:] = np.cumsum(np.asarray(list(costs) + [0], dtype=np.float64))
        self.prefix = prefix
        a_arr = np.asarray(a, dtype=np.int64)
        so_arr = np.asarray(so, dtype=bool)
        base = np.asarray(own, dtype=np.int64) + np.where(so_arr, a_arr[1:N + 1], 0)
        d0 = base + np.where(np.asarray(si, dtype=bool), a_arr[:N], 0)
        self.d = (d0, base)
        # S_in: a window's all-taped need, x_s included (sub-chains end before the loss)
        cum = np.concatenate([[0], np.cumsum(d0[:N - 1] + a_arr[:N - 1])])
        wi = min(W, N - 1)
        S_in = int((cum[wi:] - cum[:len(cum) - wi]).max(initial=0)) if wi else 0
        self.S_in = S_in = min(S_in, S)
        R, inf = W + 1, np.inf
        D0r = np.full((R, W + 1, S_in + 1), inf)  # D0r[s % R, l] = C(s, s + l, 0)
        P1r = np.full((R, W + 1, S_in + 1), inf)  # P1r[s % R, l] = C(s, s+l, 1) + F
        D0r[:, 0] = P1r[:, 0] = 0.0  # the empty sub-chain
        E0r = np.zeros((R + 1, S + 1))  # E0r[s % (R + 1)] = C(s, N, 0)
        E1 = np.zeros(S + 1)  # C(s + 1, N, 1)
        G = np.full(S + 1, inf)  # min over j > s + W of prefix[j] + C(j, N, 0)
        self.codes = np.zeros((N, S + 1), dtype=np.uint16) if codes else None
        # with suffixes: every C(s, N, h), for `build` from any (s, h)
        self.suffix = ((np.empty((N, S + 1)), np.empty((N, S + 1)))
                       if suffixes else None)
        cols = np.arange(S + 1)
        for s in range(N - 1, -1, -1):
            r, r1 = s % R, (s + 1) % R
            if s < N - 1:  # the short sub-chains starting at s
                top = min(W, N - 1 - s)
                for length in range(1, top + 1):
                    ks = np.arange(1, length)
                    Q = (P1r[r, 1:length] + D0r[(s + ks) % R, length - ks]).min(
                        axis=0, initial=inf)
                    nxt = (P1r[r1, length - 1] - (prefix[s + length] - prefix[s + 1])
                           if so[s] else D0r[r1, length - 1])
                    D0r[r, length] = np.minimum(_shift(nxt, int(d0[s])),
                                                _shift(Q, int(a[s])))
                    P1r[r, length] = np.minimum(_shift(nxt, int(base[s])), Q) + (
                        prefix[s + length] - prefix[s])
                D0r[r, top + 1:] = inf
                P1r[r, top + 1:] = inf
            # the suffix C(s, N, h): a checkpoint [s, s + k) then C(s + k, N, 0)
            K = min(W, N - 1 - s)
            if K:
                E = E0r[[(s + k) % (R + 1) for k in range(1, K + 1)]]
                E[:, :S_in + 1] += P1r[r, 1:K + 1]
                E[:, S_in + 1:] += P1r[r, 1:K + 1, -1:]
                karg = E.argmin(axis=0)
                Q = E[karg, cols]
            else:
                Q, karg = np.full(S + 1, inf), None
            if relax and s + W + 1 <= N - 1:
                j = s + W + 1
                np.minimum(G, prefix[j] + E0r[j % (R + 1)], out=G)
                # inner work: at least that of its first W layers, C(s, s + W, 1)
                inner = P1r[r, W] - (prefix[s + W] - prefix[s])
                long = G - prefix[s]
                long[:S_in + 1] += inner
                long[S_in + 1:] += inner[-1]
                np.minimum(Q, long, out=Q)
            nxt = E1 if so[s] else E0r[(s + 1) % (R + 1)]
            t0, c0 = _shift(nxt, int(d0[s])), _shift(Q, int(a[s]))
            t1 = _shift(nxt, int(base[s]))
            if codes:
                code = self.codes[s]
                if karg is not None:
                    code[:] = karg + 1
                code |= (t0 <= c0).astype(np.uint16) << 8
                code |= (t1 <= Q).astype(np.uint16) << 9
            E0r[s % (R + 1)] = np.minimum(t0, c0)
            E1 = np.minimum(t1, Q)
            if suffixes:
                self.suffix[0][s] = E0r[s % (R + 1)]
                self.suffix[1][s] = E1
        self.top = E0r[0]

    def build(self, m, s=0, h=0, inner=True):
        """The items of the schedule the table chose within ``m`` units (the loss left
        out); inner schedules from a `_Dense` of their own short sub-chain.
        From layer ``s`` on (``h``: ``x_s`` held): the suffix ``C(s, n + 1,
        h)``. ``inner=False``: the top level only (every checkpoint's inner
        empty)."""
        a, so, d, codes = self.a, self.so, self.d, self.codes
        items = []
        while s < self.N - 1:
            if codes[s, m] >> (8 + h) & 1:
                items.append(Taped(s))
                m -= int(d[h][s])
                s, h = s + 1, int(so[s])
                continue
            m2 = m - (0 if h else int(a[s]))
            k = int(codes[s, m2] & 255)
            items.append(Checkpointed(s, s + k, self._inner(s, s + k, m2)
                                      if inner else ()))
            s, h, m = s + k, 0, m2
        if not codes[s, m] >> (8 + h) & 1:  # pragma: no cover  (the loss is taped)
            raise AssertionError("the loss is never checkpointed")
        return tuple(items)

    def _inner(self, s, e, m):
        """A least-work schedule of ``s .. e-1`` on top of a held ``x_s`` within
        ``m`` units: all taped when that fits, else a `_Dense` of the sub-chain."""
        a, si, so, own, d = self.a, self.si, self.so, self.own, self.d
        need, h = 0, 1
        for i in range(s, e):
            need += int(d[h][i])
            h = int(so[i])
        if need <= m:
            return tuple(Taped(i) for i in range(s, e))
        # (the sub-chain's last cost is never recomputed inside it: _Dense reads it
        # as a loss of cost 0)
        sub = _Dense((a[s:e + 1], si[s:e], so[s:e], own[s:e]),
                     np.diff(self.prefix[s:e]), m)
        return _shifted(sub._build(0, e - s, 1, m), s)


def _shifted(items, offset):
    """Items with every layer index moved by ``offset``."""
    return tuple(Taped(it.layer + offset) if isinstance(it, Taped) else
                 Checkpointed(it.start + offset, it.stop + offset,
                              _shifted(it.inner, offset)) for it in items)


def _grid_unit(profile, W, cap, work=None):
    """The grid unit (bytes) of a `_Windowed` table with windows of ``W`` layers under
    ``cap``: its work ``N (W S + W^2 S_in / 2)`` within ``_WINDOW_WORK`` elements (the
    short sub-chains' counted four times: gathered, added, reduced, shifted) and the
    choices within ``_WINDOW_CODES`` bytes; the gcd of the sizes (exact) if finer."""
    a, si, so, own = _chain_arrays(profile)
    N = len(si)
    held = [own[i] + (a[i + 1] if so[i] else 0) + (a[i] if si[i] else 0) + a[i]
            for i in range(N - 1)]
    window = max((sum(held[i:i + W]) for i in range(max(1, N - W))), default=0)
    window = min(window, cap)
    g = math.gcd(*a, *own) or 1
    unit = N * (W * cap + 2 * W * W * window) / (work or _WINDOW_WORK)
    unit = max(unit, 2 * N * cap / _WINDOW_CODES, g)
    return g if unit <= g else math.ceil(unit)


def _relaxed_bound(profile, costs, cap, W, work=None):
    """The lower bound of a `_Windowed` table with windows of ``W`` layers, sizes
    rounded down and longer checkpoints relaxed (proof: `_Windowed`)."""
    a, si, so, own = _chain_arrays(profile)
    unit = _grid_unit(profile, W, cap, work)
    S = cap // unit
    low = _Windowed(([v // unit for v in a], si, so, [v // unit for v in own]),
                    costs, S, W, relax=True)
    return float(low.top[S])


def _windowed_rotor(profile, costs, cap, W=None, work=None, bound=True,
                    probe=True, keep=False):
    """`rotor` on a long chain: ``(items, lower_bound)``, items None when no schedule
    whose checkpoints span at most ``W`` (default ``_WINDOW``) layers fits ``cap``.
    ``bound=False``: the relaxed table left out (``lower_bound`` 0, a bound
    still); ``probe=False``: the grid's choice at the budget, larger grid
    points not tried (the table then stops at the budget); ``keep``: a third
    element, ``(table, unit)``, the table (sizes rounded up to ``unit`` bytes)
    with every suffix (`_splice`) if they fit in ``_WINDOW_CODES`` bytes."""
    a, si, so, own = _chain_arrays(profile)
    W = min(_WINDOW if W is None else W, len(si) - 1, 255)
    bound = _relaxed_bound(profile, costs, cap, W, work) if bound else 0.0
    unit = _grid_unit(profile, W, cap, work)
    S = cap // unit
    spare = sum(1 for v in a + own if v)  # rounding up over-counts each array < 1 unit
    up = _Windowed(([-(-v // unit) for v in a], si, so, [-(-v // unit) for v in own]),
                   costs, S + (spare if probe else 0), W, codes=True,
                   suffixes=keep and 16 * len(si) * (S + 1) <= _WINDOW_CODES)
    top = up.top
    if top[S] == np.inf:
        return (None, bound, (up, unit)) if keep else (None, bound)

    n = len(si) - 1  # the loss: the bytes it adds, x_n held or not
    loss = (own[n] + (a[n] if si[n] else 0), own[n])

    def fits(m):
        # the end of forward first, from the top level alone (no inner tables):
        # a part of the peak, and where most larger grid points fail
        _, h, used, _ = _top_states(profile, up.build(m, inner=False),
                                    costs)[-1]
        if used + loss[h] > cap:
            return None, False
        items = up.build(m)
        return items, schedule_peak(profile, NestedSchedule(n=profile.n, items=items)) <= cap

    # the grid's choice at S fits; one at a larger m may still fit in true bytes: keep
    # the least work among those that do (each checked with schedule_peak)
    best, lo, hi = S, S + 1, S + spare if probe else S
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid)[1]:
            best = mid if top[mid] < top[best] else best
            lo = mid + 1
        else:
            hi = mid - 1
    first = int(np.argmax(top[:best + 1] == top[best]))  # ties: the smaller peak
    items, ok = fits(first)
    items = items if ok else up.build(best)
    return (items, bound, (up, unit)) if keep else (items, bound)


def rotor(layers, x=None, budget_bytes: int | None = None, loss=None, cost="flops",
          slots: int | None = None) -> NestedSchedule:
    """The optimal nested checkpointing schedule of a chain.

    Model and scope: optimal among *persistent* nested schedules of a chain (a checkpoint
    is held from its first forward until the backward pass has gone through its segment;
    a layer's saved arrays are all kept or all dropped), under the byte ledger's model;
    it does not move arrays elsewhere and does not plan graphs. Within that scope it
    minimises the forward work recomputed in backward among all nested schedules whose
    peak of saved activations (the ledger's ``m.peak["activations"]`` over forward, loss
    and backward) fits ``budget_bytes``; ties go to the smaller peak. Without a budget,
    returns the schedule with the smallest peak (and the least work among those). This
    is the rotor algorithm (Beaumont et al. 2019) under minigrad's exact byte model; see
    the module docstring.

    Args:
        layers: callables Tensor -> Tensor (profiled on ``x`` by `profile_chain`), or a
            `ChainProfile`.
        x: the chain's input Tensor, as it will be passed to ``checkpoint_sequential``.
        budget_bytes: the memory budget for saved activations, in bytes.
        loss: optional callable mapping the chain's output to a scalar Tensor: it is
            then part of the planned step (what it saves counts at the end of forward).
        cost: what work means: ``"flops"`` (default), ``"ops"`` or one number per layer.
            With a `ChainProfile`, a string means the profile's own ``cost``.
        slots: None (exact, the default) or a number of memory slots, as the published
            solver: ``budget_bytes`` is cut into ``slots`` equal slots and every size is
            rounded *up* to whole slots. The schedule's true peak then never exceeds the
            budget (rounding only over-counts), and it recomputes no more than the exact
            optimum at ``budget_bytes - K * budget_bytes / slots`` bytes, where ``K`` is
            the number of arrays held at that optimum's peak (each is over-counted by
            less than one slot); its ``predicted_peak_activations`` and
            ``recompute_cost`` are exact. The solver's time grows with ``slots``
            (``O(n^3 slots)``) instead of with the number of distinct byte totals.
            With slots the optimum is also bounded from below: the same table with every
            size rounded *down* admits every schedule that truly fits, so its optimum is
            at most the true one; the schedule's ``lower_bound_cost`` holds it and
            ``optimal`` says whether the two meet.
            Without ``slots`` the exact grid is used while it is small enough (``n^2``
            times budget / gcd of the sizes at most 4e7 entries), else the exact Pareto
            fronts up to 40 layers (their time grows about as ``n^4``), else slots
            chosen automatically with the proven bound: one entry point, exact
            where it can be, bounded where not. The automatic grid of long chains
            (integer costs) is fine (about the arrays' size, not the budget's) and
            restricts checkpoints to at most 16 layers (32 if the gap stays over
            5 %; a window whose smallest peak is over the budget is skipped,
            and near the smallest peak a schedule read off the smallest-peak
            recurrence, guided by the coarse whole table); the bound is the same table
            with sizes rounded down and longer checkpoints relaxed, or the
            whole table's (module docstring, "Long chains: short checkpoints on
            a fine grid"). Float costs (seconds), and integer costs too large to
            add exactly in float64 (the FLOPs of large layers), are planned there
            on integer stand-ins ``floor(c / q)``: every true cost is at least
            ``q`` times its stand-in, so ``q`` times the stand-ins' bound bounds
            the true optimum, and the schedule's work is reported in true costs.
            With slots, ``lower_bound_cost`` is the larger of that table's bound and
            a grid-free one (`_taped_knapsack_bound`: what the top level cannot tape
            within the budget is recomputed at least once; a fractional knapsack),
            which stays positive when the slots are coarser than every array.
    Returns:
        a `NestedSchedule` with ``predicted_peak_activations`` and ``recompute_cost``;
        run it with ``checkpoint_sequential(layers, schedule, x)``.
    Raises:
        ValueError: ``budget_bytes`` is below the smallest peak any nested schedule
            reaches (the message names it), no schedule fits the budget once sizes are
            rounded to ``slots``, or the arguments are inconsistent.

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> from minigrad import nn
        >>> from minigrad.checkpoint import checkpoint_sequential
        >>> _ = minigrad.random.manual_seed(0)
        >>> layers = [nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8)]
        >>> x = minigrad.Tensor(np.ones((4, 8), np.float32), requires_grad=True)
        >>> def loss_fn(y):
        ...     return (y * y).mean()
        >>> sched = rotor(layers, x, budget_bytes=512, loss=loss_fn)
        >>> print(sched)                                  # the nesting, as a tree
        taped 0
        checkpoint [1, 4)
            taped 1
            taped 2
            taped 3
        taped 4
        >>> with minigrad.memory.track() as m:
        ...     loss_fn(checkpoint_sequential(layers, sched, x)).backward()
        >>> m.peak["activations"], m.flops["recompute"] == sched.recompute_cost
        (512, True)
        >>> profile = ChainProfile(input_bytes=(64,) * 6, output_bytes=64, saves_input=(True,) * 6,
        ...                        saves_output=(False,) * 6, own_bytes=(128,) * 6, cost=(10,) * 6)
        >>> rotor(profile, budget_bytes=640, slots=10).recompute_cost   # long chains: slots
        30
    """
    profile = as_profile(layers, x, loss, cost, "rotor")
    costs = _costs(profile, None)
    if budget_bytes is not None:
        budget_bytes = check_int("budget_bytes", budget_bytes, 0, where="rotor")
    if slots is not None:
        slots = check_int("slots", slots, 1, where="rotor")
        if budget_bytes is None:
            raise ValueError("rotor: slots= discretises budget_bytes; pass budget_bytes too")
    tables = _min_peak_tables(profile)
    smallest = int(tables[0][0][len(tables[0][0]) - 1][0])
    if budget_bytes is not None and budget_bytes < smallest:
        raise ValueError(f"rotor: budget_bytes={budget_bytes} is infeasible: the smallest peak of saved "
                         f"activations any nested schedule reaches on this chain is {smallest} bytes; "
                         f"allowed: budget_bytes >= {smallest}")
    cap = smallest if budget_bytes is None else budget_bytes
    a, si, so, own = _chain_arrays(profile)
    N = len(si)
    if slots is not None and cap > 0:
        def units(v):  # rounded up: a schedule that fits in slots fits in bytes
            return -(-v * slots // cap)
        S = slots
    else:
        g = math.gcd(*a, *own) or 1  # every byte total the recurrence meets is a multiple
        def units(v):
            return v // g
        S = cap // g
    exact_work = all(isinstance(c, int) for c in costs) and (N + 1) * (sum(costs) + 1) < _EXACT_FLOAT
    true_costs, quantum = costs, None
    if not exact_work and slots is None and N > _FRONTS_MAX_LAYERS and cap > 0:
        # float costs (seconds), or integers too large to add exactly in float64
        # (FLOPs of large layers): plan on integer stand-ins, the bound scaled back
        quantum, costs = _integer_costs(costs, N)
        exact_work = True
    dense = N * N * (S + 1) <= _DENSE_MAX_CELLS and (slots is not None or exact_work)
    if not dense and slots is None and N > _FRONTS_MAX_LAYERS and cap > 0 and exact_work:
        # too long for the exact solvers: short checkpoints on a fine grid, and the
        # proven bound (see the docstring)
        items, work, kept = None, None, None
        bound = _taped_knapsack_bound(profile, costs, cap)
        tried = set()
        # the smallest peak with checkpoints of at most W layers, exact: above
        # the budget, a pass with windows of W finds nothing and is skipped.
        # Deep: not even the first window fits (deep nesting needed): the
        # whole table runs anyway, on a finer grid, its bound the windows'
        # relaxed ones are left for, and the windows try no larger grid points
        peaks = {}

        def window_peak(W):
            if W not in peaks:
                peaks[W] = _min_peak(profile, W)
            return peaks[W]
        deep = window_peak(min(_WINDOW_STEPS[0][0], N - 1, 255)) > cap
        # a coarser grid first, stopping there within 1 %; then the full grid, then a
        # longer window while the gap is over 5 %
        for W, share, gap in _WINDOW_STEPS:
            W = min(W, N - 1, 255)
            if (W, share) in tried or window_peak(W) > cap:
                continue
            tried.add((W, share))
            found, low, *table = _windowed_rotor(
                profile, costs, cap, W, share * _WINDOW_WORK, bound=not deep,
                probe=not deep, keep=deep)
            bound = max(bound, low)
            if found is not None and deep:
                kept = (found, *table[0])
            if found is not None:
                w = schedule_recompute_cost(
                    profile, NestedSchedule(n=profile.n, items=found), costs)
                if work is None or w < work:
                    items, work = found, w
            if work is not None and work - bound <= gap * work:
                break
        if deep or work is None or work - bound > _WINDOW_GAP * work:
            # long checkpoints may matter: the whole table on a coarse grid, sizes
            # rounded down, is a bound and guides a schedule read off the
            # smallest-peak recurrence; the better schedule is kept
            P = tables[0]
            cells = _DENSE_MAX_CELLS * (
                _DEEP_CELLS[bool(tried)] if deep else 1)
            coarse = _coarse_slots(P, N, cap, int(cells))
            guide = _Dense(([v * coarse // cap for v in a], si, so,
                            [v * coarse // cap for v in own]), costs, coarse,
                           down32=True,
                           floor=_feasible_floor(profile, coarse, cap, P))
            bound = max(bound, float(guide.top()[coarse]))
            other = _min_peak_items(profile, cap, guide, (coarse, cap), tables)
            with _deep_nesting(N):
                if kept is not None:  # deep: the two spliced at the top level
                    other, _ = _splice(profile, costs, cap, other, *kept,
                                       guide, (coarse, cap), tables)
                del guide, kept
                if work is None or schedule_recompute_cost(profile, NestedSchedule(
                        n=profile.n, items=other), costs) < work:
                    items = other
        with _deep_nesting(N):
            return _planned(profile, items, true_costs,
                            _scaled_bound(profile, items, costs, bound, quantum))
    if not dense:
        if slots is not None:
            raise ValueError(f"rotor: {N} layers (the loss included) with slots={slots} need "
                             f"{N * N * (slots + 1)} table entries, more than {_DENSE_MAX_CELLS}; "
                             f"use fewer slots")
        # exact fronts: float costs (exact fractions), or too many distinct byte totals
        fronts = _Fronts(profile, costs, cap)
        needs, _ = fronts.front()
        with _deep_nesting(N):
            items = fronts.build(needs[0] if budget_bytes is None else needs[-1])
            return _planned(profile, items, costs)
    table = _Dense(([units(v) for v in a], si, so, [units(v) for v in own]), costs, S)
    top = table.top()
    best = top[S]
    if best == np.inf:
        raise ValueError(f"rotor: no schedule fits budget_bytes={budget_bytes} once sizes are rounded "
                         f"up to slots of {cap / slots:.6g} bytes (slots={slots}); the smallest exact "
                         f"peak is {smallest} bytes: use more slots, a larger budget or slots=None")
    m = int(np.argmax(top == best))  # ties go to the smaller peak: the first grid point
    with _deep_nesting(N):
        items = table.build(m)
    bound = None
    if slots is not None and cap > 0:
        # sizes rounded down: every schedule that truly fits fits there, so its optimum
        # is a lower bound on the true one
        del table

        def down(v):
            return v * slots // cap
        low = _Dense(([down(v) for v in a], si, so, [down(v) for v in own]), costs, S)
        bound = float(low.top()[S])
        # and one that needs no grid (the top level's knapsack): the larger holds
        bound = max(bound, _taped_knapsack_bound(profile, costs, cap))
    return _planned(profile, items, true_costs,
                    _scaled_bound(profile, items, costs, bound, quantum))


def _integer_costs(costs, N: int):
    """``(q, ints)``: integer stand-ins ``floor(c / q)`` for exact costs (ints or
    Fractions) whose work the tables cannot add exactly in float64, with ``q`` (a
    Fraction) such that ``N + 1`` times their sum stays below ``_EXACT_FLOAT``.

    Every schedule's true work is at least ``q`` times its work in stand-ins (each
    layer run costs ``c >= q floor(c / q)``), so ``q`` times a lower bound in
    stand-ins is a lower bound on the true optimum (`_scaled_bound`)."""
    total = sum(costs)
    q = Fraction(total) * (N + 1) / (_EXACT_FLOAT // 2) if total else Fraction(1)
    return q, [math.floor(Fraction(c) / q) for c in costs]


def _scaled_bound(profile, items, costs, bound, quantum):
    """The lower bound in true costs: ``bound`` itself without a ``quantum``, else
    ``quantum`` times the bound in integer stand-ins ``costs`` (their exact optimum,
    the schedule's own work in them, where ``bound`` is None), rounded down."""
    if quantum is None:
        return bound
    if bound is None:
        bound = schedule_recompute_cost(
            profile, NestedSchedule(n=profile.n, items=items), costs)
    return _down(Fraction(float(bound)) * quantum)


def _taped_knapsack_bound(profile: ChainProfile, costs, budget: int):
    """A lower bound on the optimum's recomputed work that needs no memory grid.

    Proof. Take any schedule that fits ``budget`` and let ``T`` be its top-level
    ``Taped`` layers. At the end of the first forward the held set contains
    ``saved(i)`` for every ``i`` in ``T`` and the loss's arrays, so their union fits
    the budget (the first term of ``peak``). Every layer not in ``T`` lies in a
    top-level checkpoint, which re-runs it at least once, so the work is at least
    ``sum of cost[i], i not in T``. Split every array's bytes equally among the
    holders that save it (a boundary two neighbours save: half each), giving a
    weight ``w_i`` per layer (the loss too) with ``|union| = sum of w_i`` over
    ``T`` and the loss. So ``sum over T of w_i <= budget - w_loss``, and the work
    is at least ``total - max{sum over T of cost_i}`` under that knapsack; its
    fractional relaxation (greedy by ``cost/w``) only raises the maximum, so
    ``total - (fractional maximum)`` is a lower bound. Exact in fractions."""
    a, si, so, own = _chain_arrays(profile)
    N = len(si)
    holders = [0] * len(a)
    for i in range(N):
        holders[i] += bool(si[i])
        holders[i + 1] += bool(so[i])
    w = []
    for i in range(N):
        v = Fraction(own[i])
        if si[i]:
            v += Fraction(a[i], holders[i])
        if so[i]:
            v += Fraction(a[i + 1], holders[i + 1])
        w.append(v)
    room = Fraction(budget) - w[N - 1]
    c = [Fraction(v) for v in costs]
    total = sum(c, Fraction(0))
    if room < 0:
        return _down(total)
    taped = Fraction(0)
    free = [i for i in range(N - 1) if w[i] == 0]
    taped += sum((c[i] for i in free), Fraction(0))
    rest = sorted((i for i in range(N - 1) if w[i] > 0),
                  key=lambda i: c[i] / w[i], reverse=True)
    for i in rest:
        if w[i] <= room:
            room -= w[i]
            taped += c[i]
        else:
            taped += c[i] * room / w[i]
            break
    return _down(total - taped)


def _down(q):
    """``q`` as a float no larger than ``q`` (a bound must not round up)."""
    f = float(q)
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f


@contextmanager
def _deep_nesting(n: int):
    """Room for the recursion of a schedule nested up to ``n`` levels deep (the smallest
    peak of a long chain nests about one level per layer): the recursion limit raised for
    the block, then put back."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * n + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _planned(profile, items, costs, lower_bound_cost=None):
    sched = NestedSchedule(n=profile.n, items=items)
    work = schedule_recompute_cost(profile, sched, costs)
    if lower_bound_cost is not None and lower_bound_cost >= work:
        lower_bound_cost = None  # proven optimal after all
    return NestedSchedule(n=profile.n, items=items, predicted_peak_activations=schedule_peak(profile, sched),
                          recompute_cost=work, lower_bound_cost=lower_bound_cost)


def rotor_frontier(profile: ChainProfile, cost=None) -> list:
    """The memory–compute frontier of nested schedules: ``(recompute_cost, peak_bytes,
    schedule)`` for every Pareto-optimal trade-off, by increasing work (from the schedule
    that recomputes nothing to the one with the smallest peak)."""
    costs = _costs(profile, cost)
    fronts = _Fronts(profile, costs)
    out = []
    for m, w in zip(*fronts.front()):
        s = _planned(profile, fronts.build(m), costs)
        assert (s.predicted_peak_activations, s.recompute_cost) == (m, _number(w)), (s, m, w)
        out.append((s.recompute_cost, m, s))
    return sorted(out, key=lambda t: t[0])


# --- one-level schedules: segments checkpointed or taped ------------------------------------
def optimal_one_level(layers, x=None, budget_bytes: int | None = None, loss=None,
                      cost="flops"):
    """The optimal one-level (depth <= 1) schedule: segment plans plus the "tape this
    layer and keep it" branch.

    Model and scope: a schedule of depth 1 covers the chain with items that are either
    a layer run taped (``Taped(i)``: its saved arrays stay until its backward, never
    recomputed) or a checkpointed segment (``Checkpointed(s, j)``: runs untaped, keeps
    ``x_s``, and in backward reruns ``s .. j-1`` taped, with no checkpoint inside). The
    peak is `minigrad.plan.nested.schedule_peak`'s (rotor's byte model; the segment-plan
    refinement for outputs that need no grad is not used). Among these schedules this
    returns the least recomputed work whose peak fits ``budget_bytes`` (ties: the smaller
    peak), or without a budget the smallest peak (and the least work at it). Every
    segment plan (`optimal_segments`) is such a schedule, so it never does worse; it is
    `rotor` restricted to depth 1.

    The dynamic program walks the chain once: at layer ``s``, with ``K`` bytes held by
    the items before it and ``h`` telling whether ``x_s`` is already held (saved as
    layer ``s-1``'s output), either tape ``s`` (``K`` grows by what it saves) or
    checkpoint ``[s, j)`` (``K`` grows by ``|x_s|`` if not held; feasible when ``K`` plus
    the taped rerun of ``s .. j-1`` fits the budget) at the cost of ``s .. j-1``'s
    forward. It keeps, for each ``(s, h)``, the Pareto front of ``(K, work)``.
    ``O(n^2 F)`` for fronts of ``F`` points: meant for chains of up to a few hundred
    layers.

    Args:
        layers: callables (profiled on ``x``), or a `ChainProfile`.
        x: the chain's input Tensor (needed with layers).
        budget_bytes: optional peak budget in bytes.
        loss: optional loss callable (with layers only).
        cost: ``"flops"`` (default), ``"ops"``, or one number per layer.

    Returns:
        A `minigrad.plan.NestedSchedule` of depth <= 1 with
        ``predicted_peak_activations`` and ``recompute_cost``; run it with
        ``checkpoint_sequential(layers, schedule, x)``.

    Raises:
        ValueError: ``budget_bytes`` below the smallest peak of any such schedule (the
            message names it).

    Example:
        >>> from minigrad.plan.chain import ChainProfile
        >>> pr = ChainProfile(input_bytes=(8, 8, 8), output_bytes=8,
        ...                   saves_input=(True, True, True),
        ...                   saves_output=(False, False, False),
        ...                   own_bytes=(0, 64, 0), cost=(100, 1, 100))
        >>> s = optimal_one_level(pr, budget_bytes=80)
        >>> s.nested, s.predicted_peak_activations, s.recompute_cost
        ([0, (1, 2, [1]), 2], 80, 1)
    """
    profile = as_profile(layers, x, loss, cost, "optimal_one_level")
    costs = _costs(profile, None, "optimal_one_level")
    solver = _OneLevel(profile, costs)
    if budget_bytes is None:
        budget = solver.min_peak()
    else:
        budget = check_int("budget_bytes", budget_bytes, 0, where="optimal_one_level")
    found = solver.solve(budget)
    if found is None:
        smallest = solver.min_peak()
        raise ValueError(
            f"optimal_one_level: budget_bytes={budget} is infeasible: the smallest peak of "
            f"saved activations of any one-level schedule on this chain is {smallest} "
            f"bytes; allowed: budget_bytes >= {smallest}")
    # among the least-work schedules, the smallest peak: the smallest budget that still
    # allows that work (feasibility at a given work is monotone in the budget too)
    work, items = found
    lo, hi = 0, budget
    while lo < hi:
        mid = (lo + hi) // 2
        at = solver.solve(mid)
        if at is not None and at[0] == work:
            hi, items = mid, at[1]
        else:
            lo = mid + 1
    sched = NestedSchedule(n=profile.n, items=items)
    return NestedSchedule(n=profile.n, items=items,
                          predicted_peak_activations=schedule_peak(profile, sched),
                          recompute_cost=_number(schedule_recompute_cost(profile, sched,
                                                                         costs)))


class _OneLevel:
    """The depth-1 dynamic program of `optimal_one_level` on one profile."""

    def __init__(self, profile, costs):
        self.n = profile.n
        self.a, self.si, self.so, self.own = _chain_arrays(profile)
        self.costs = costs
        self.prefix = [0]
        for c in costs:
            self.prefix.append(self.prefix[-1] + c)

    def tape_bytes(self, i, held):
        """Bytes layer ``i`` (``n``: the loss) adds when taped; ``held``: ``x_i`` already
        held."""
        a, si, so, own = self.a, self.si, self.so, self.own
        return own[i] + (a[i + 1] if so[i] else 0) + (a[i] if si[i] and not held else 0)

    def solve(self, M):
        """``(work, items)`` of a least-work schedule with peak <= ``M``, or None."""
        n = self.n
        # fronts[s][h]: {K: (work, back-pointer)} of the Pareto points reaching layer s
        fronts = [[{}, {}] for _ in range(n + 2)]
        fronts[0][0][0] = (0, None)
        for s in range(n + 1):
            for h in (0, 1):
                pts = _pareto_points(fronts[s][h])
                for K, (w, _) in pts.items():
                    # taped s (s == n: the loss, always taped)
                    K2 = K + self.tape_bytes(s, h)
                    if K2 <= M:
                        _offer_point(fronts[s + 1][int(self.so[s])], K2, w, (s, h, K, None))
                    if s == n:
                        continue
                    # checkpointed [s, j): keeps x_s; rerun taped with x_s held
                    Kc = K + (0 if h else self.a[s])
                    rerun, held = Kc, 1
                    for j in range(s + 1, n + 1):
                        rerun += self.tape_bytes(j - 1, held)
                        held = int(self.so[j - 1])
                        if rerun > M:
                            break
                        wj = w + self.prefix[j] - self.prefix[s]
                        _offer_point(fronts[j][0], Kc, wj, (s, h, K, j))
        end = {}
        for h in (0, 1):
            for K, (w, bp) in fronts[n + 1][h].items():
                end[(w, K, h)] = bp
        if not end:
            return None
        w, K, h = min(end)
        return w, self._items(fronts, n + 1, h, K)

    def _items(self, fronts, s, h, K):
        out = []
        while s > 0:
            _, bp = fronts[s][h][K]
            ps, ph, pK, j = bp
            if j is None:
                if ps < self.n:
                    out.append(Taped(ps))
            else:
                out.append(Checkpointed(ps, j, tuple(Taped(i) for i in range(ps, j))))
            s, h, K = ps, ph, pK
        return tuple(reversed(out))

    def min_peak(self):
        """The smallest peak (bytes) of any one-level schedule: a binary search over the
        budget (feasibility is monotone in it)."""
        hi = sum(self.tape_bytes(i, False) for i in range(self.n + 1))  # tape everything
        lo = 0
        while lo < hi:
            mid = (lo + hi) // 2
            if self.solve(mid) is None:
                lo = mid + 1
            else:
                hi = mid
        return lo


def _offer_point(front, K, w, bp):
    """Keep ``(K, w)`` in ``front`` if no kept point has both ``K`` and ``w`` as small."""
    old = front.get(K)
    if old is None or w < old[0]:
        front[K] = (w, bp)


def _pareto_points(front):
    """The points of ``front`` not dominated by one with smaller ``K`` and no more work
    (pruned in place, returned sorted by ``K``)."""
    keep, best = {}, None
    for K in sorted(front):
        w, bp = front[K]
        if best is None or w < best:
            keep[K] = (w, bp)
            best = w
    front.clear()
    front.update(keep)
    return keep
