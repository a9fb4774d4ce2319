"""The published rotor solver's model, restated, and how a ChainProfile maps onto it.

Beaumont, Eyraud-Dubois, Herrmann, Joly and Shilova (2019) describe a chain of
``L`` layers followed by a loss by six lists, the fields of rotor's ``Chain``
(its spelling kept in the attribute aliases below):

==============  ======================  ===============================================
rotor           `RotorChain`            meaning
==============  ======================  ===============================================
``fweigth``     ``forward_cost``        ``L`` forward costs (the loss's is 0)
``bweigth``     ``backward_cost``       ``L + 1`` backward costs (the last is the loss's)
``cweigth``     ``x_size``              ``L + 1`` sizes of ``x_0 .. x_L``; rotor also uses
                                        them as the sizes of the gradients ``δ_i``
``cbweigth``    ``xbar_size``           ``L + 1`` sizes of ``x̄_i``: what layer ``i - 1``
                                        keeps when run with taping, ``x_i`` included
                                        (entry 0 is not used)
``fwd_tmp``     ``forward_tmp``         ``L`` temporary sizes of a forward
``bwd_tmp``     ``backward_tmp``        ``L + 1`` temporary sizes of a backward
==============  ======================  ===============================================

Memory is counted in *slots* (sizes are integers; rotor rounds bytes up to
``memory_limit / slots``). Its "persistent" dynamic program, for a memory
``m`` left once ``x_i`` is stored and with ``δ_{l+1}`` reserved, is (with
every list extended by a 0 for the loss's output)::

    opt[m][i][i] = fw[i] + bw[i]                      if m >= max(cw[i+1] + cbw[i+1] + ftmp[i],
                                                                  cw[i] + cw[i+1] + cbw[i+1] + btmp[i])
    opt[m][i][l] = inf                                if m < mmin(i, l) =
                       max(cw[l+1] + cw[i+1] + ftmp[i],  cw[l+1] + cw[j] + cw[j+1] + ftmp[j] for i < j < l)
    opt[m][i][l] = min( chain:  opt[m][i][i] + opt[m - cbw[i+1]][i+1][l]          (F_all^i ... B^i)
                        leaf:   min over i < j <= l, m >= cw[j] of
                                fw[i] + ... + fw[j-1] + opt[m - cw[j]][j][l] + opt[m][i][j-1] )

with ties going to the leaf, and among leaves to the smallest ``j``. The
schedule for a ``memory_limit`` is read back from ``opt[memory_limit - cw[0]][0][L]``.
`persistent_table` and `persistent_sequence` compute exactly this: the published
code's tables and operation lists (see the agreement measured, below).

The same schedules, another price for memory
---------------------------------------------
Rotor's "chain" choice is a ``Taped(i)`` item of `minigrad.plan.rotor`, its "leaf"
choice ``j`` a ``Checkpointed(i, j, inner)`` whose inner schedule is the
sub-problem ``(i, j - 1)``, and the loss always runs taped: the recurrence
searches exactly the nested schedules `minigrad.plan.rotor`'s dynamic program
searches, those in which no checkpoint covers the whole rest of its level
(`schedule_from_sequence` and `sequence_from_schedule` convert one into the other).
What differs is the price of memory. Rotor adds sizes; minigrad's ledger measures the union
of the arrays held for backward, so the exact solver `minigrad.plan.rotor`
differs from rotor's model in four ways:

1. gradients ``δ`` and temporaries are not saved activations (the ledger
   files them under other categories), so they cost nothing here;
2. a segment's input ``x_i`` costs only when something keeps it (a
   checkpoint node, or a layer that saves its input), not always;
3. a boundary kept by two neighbours (layer ``i`` saves its output, layer
   ``i + 1`` its input) counts once;
4. bytes are exact instead of rounded up to slots.

`to_rotor_chain` maps a `minigrad.plan.ChainProfile` onto rotor's parameters as
closely as rotor's model allows: ``fw`` = the layer costs (FLOPs by default),
``cw[i] = |x_i|`` (``x_L`` is the loss's input), ``cbw[i + 1] = |x_{i+1}| + own_i`` (the
output plus the layer's private saved arrays; its input is already counted in rotor's
model), temporaries 0 except the loss's private saved bytes as the loss's backward
temporary, sizes rounded up to ``slot_bytes``. Rotor's model then over-counts the
ledger for every schedule (tested), so each schedule the published solver returns for
a memory limit runs under ``checkpoint_sequential`` within that limit, and at the peak
it measures `minigrad.plan.rotor` recomputes no more: it optimises over the same
schedules with the exact price.

Agreement measured with the published code (rotor's ``algorithms/persistent.py``,
Python ``compute_table`` and ``persistent_rec``), which is not part of this repository:

* 4000 random chains in rotor's model (two runs of 2000; 1 to 7 layers, integer and
  float costs, memory limits 0 to 45 slots): identical ``opt`` and ``what`` tables,
  identical operation lists for all 42010 feasible (chain, limit) pairs, the same 51258
  infeasible ones; on 17462 (chain, limit) pairs of chains up to 5 layers, the published
  optimum equals the brute-force minimum over `minigrad.plan.rotor`'s nested schedules
  priced by `rotor_model_memory`;
* 200 profiled minigrad chains (2 to 7 layers, with an MSE or cross-entropy loss on two
  thirds of them) converted by `to_rotor_chain`: the 1193 distinct schedules the
  published solver returned all ran within their limit, each measured peak equal to
  `minigrad.plan.nested.schedule_peak`; `minigrad.plan.rotor` at that peak recomputed fewer
  FLOPs for 753 of them and as many for 440, never more.

``tests/rotor_published_record.py`` reruns the comparison given the published code;
``tests/test_plan_rotor_published.py`` checks the recorded answers without it.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

from minigrad.plan.nested import Checkpointed, NestedSchedule, Taped, _costs

__all__ = [
    "RotorChain",
    "persistent_table",
    "persistent_sequence",
    "sequence_makespan",
    "schedule_from_sequence",
    "sequence_from_schedule",
    "rotor_model_memory",
    "to_rotor_chain",
]


@dataclass(frozen=True)
class RotorChain:
    """Rotor's ``Chain`` (see the module docstring for the fields and their lengths)."""

    forward_cost: tuple
    backward_cost: tuple
    x_size: tuple
    xbar_size: tuple
    forward_tmp: tuple
    backward_tmp: tuple

    def __post_init__(self):
        L = len(self.forward_cost)
        want = {"backward_cost": L + 1, "x_size": L + 1, "xbar_size": L + 1,
                "forward_tmp": L, "backward_tmp": L + 1}
        for name, size in want.items():
            if len(getattr(self, name)) != size:
                raise ValueError(f"RotorChain.{name} has {len(getattr(self, name))} entries, expected "
                                 f"{size} for a chain of {L} layers")
        for name in ("x_size", "xbar_size", "forward_tmp", "backward_tmp"):
            values = getattr(self, name)
            if any(isinstance(v, bool) or int(v) != v or v < 0 for v in values):
                raise ValueError(f"RotorChain.{name} must hold integers >= 0 (memory slots), got {list(values)}")

    # rotor's attribute names, so code written for its Chain reads this one too
    length = property(lambda self: len(self.forward_cost))
    fweigth = property(lambda self: list(self.forward_cost))
    bweigth = property(lambda self: list(self.backward_cost))
    cweigth = property(lambda self: list(self.x_size))
    cbweigth = property(lambda self: list(self.xbar_size))
    fwd_tmp = property(lambda self: list(self.forward_tmp))
    bwd_tmp = property(lambda self: list(self.backward_tmp))


def _lists(chain):
    """``(L, fw, bw, cw, cbw, ftmp, btmp)`` from a RotorChain or any object with
    rotor's attribute names, each extended by the loss's 0 as rotor does."""
    L = int(chain.length)
    return (L, list(chain.fweigth) + [0], list(chain.bweigth), list(chain.cweigth) + [0],
            list(chain.cbweigth) + [0], list(chain.fwd_tmp) + [0], list(chain.bwd_tmp) + [0])


_INF = float("inf")


def persistent_table(chain, mmax: int):
    """Rotor's persistent dynamic program on ``chain`` for memories ``0 .. mmax``.

    Returns ``(opt, what)`` indexed ``[m][i][l]`` (``0 <= i <= l <= L``, the loss
    is index ``L``): ``opt`` the least makespan (``inf`` if none fits),
    ``what`` ``(True,)`` for the chain choice (run ``F_all^i``) or ``(False, j)``
    for a checkpoint of layers ``i .. j-1`` (the published tables' format; ``what``
    has no entry where ``i == l`` or where ``opt`` is infinite by ``mmin``)."""
    L, fw, bw, cw, cbw, ftmp, btmp = _lists(chain)
    opt = [[{} for _ in range(L + 1)] for _ in range(mmax + 1)]
    what = [[{} for _ in range(L + 1)] for _ in range(mmax + 1)]
    # one layer (or the loss) run with taping and reversed at once
    need_one = [max(cw[i + 1] + cbw[i + 1] + ftmp[i], cw[i] + cw[i + 1] + cbw[i + 1] + btmp[i])
                for i in range(L + 1)]
    for m in range(mmax + 1):
        for i in range(L + 1):
            opt[m][i][i] = fw[i] + bw[i] if m >= need_one[i] else _INF
    # the memory any schedule of i..l needs to run its forwards without taping
    mmin = {}
    for i in range(L + 1):
        for l in range(i + 1, L + 1):
            need = cw[l + 1] + cw[i + 1] + ftmp[i]
            for j in range(i + 1, l):
                need = max(need, cw[l + 1] + cw[j] + cw[j + 1] + ftmp[j])
            mmin[i, l] = need
    for m in range(mmax + 1):
        for span in range(1, L + 1):
            for i in range(L + 1 - span):
                l = i + span
                if m < mmin[i, l]:
                    opt[m][i][l] = _INF
                    continue
                leaf_j, leaf_cost, run = None, _INF, 0
                for j in range(i + 1, l + 1):
                    run = run + fw[j - 1]  # fw[i] + ... + fw[j-1], summed left to right
                    if m >= cw[j]:
                        cost = run + opt[m - cw[j]][j][l] + opt[m][i][j - 1]
                        if leaf_j is None or cost < leaf_cost:
                            leaf_j, leaf_cost = j, cost
                chain_cost = opt[m][i][i] + opt[m - cbw[i + 1]][i + 1][l] if m >= cbw[i + 1] else _INF
                if leaf_j is not None and leaf_cost <= chain_cost:
                    opt[m][i][l], what[m][i][l] = leaf_cost, (False, leaf_j)
                else:
                    opt[m][i][l], what[m][i][l] = chain_cost, (True,)
    return opt, what


def persistent_sequence(chain, memory_limit: int, table=None) -> list[tuple]:
    """The operations of rotor's optimal persistent schedule within ``memory_limit``
    slots, as ``("CF", i)`` (forward keeping its input), ``("Fn", i)`` (forward
    without grad), ``("Fe", i)`` (forward with taping), ``("B", i)`` (backward)
    and ``("L",)`` (the loss): the order of the published ``persistent``.

    Raises ValueError if nothing fits (as the published solver does)."""
    L, *_ = _lists(chain)
    cw = list(chain.cweigth)
    cbw = list(chain.cbweigth)
    if table is None:
        table = persistent_table(chain, memory_limit)
    opt, what = table
    out: list[tuple] = []

    def rec(i, l, m):
        if m <= 0 or opt[m][i][l] == _INF:
            raise ValueError(f"rotor: layers {i} .. {l} do not fit in {m} memory slots")
        if i == l:
            out.extend([("L",)] if i == L else [("Fe", i), ("B", i)])
        elif what[m][i][l][0]:
            out.append(("Fe", i))
            rec(i + 1, l, m - cbw[i + 1])
            out.append(("B", i))
        else:
            j = what[m][i][l][1]
            out.append(("CF", i))
            out.extend(("Fn", k) for k in range(i + 1, j))
            rec(j, l, m - cw[j])
            rec(i, j - 1, m)
    rec(0, L, memory_limit - cw[0])
    return out


def sequence_makespan(chain, ops: Sequence[tuple]):
    """Total cost of an operation list: forward costs of every ``CF``/``Fn``/``Fe``,
    backward costs of every ``B`` (rotor's ``Sequence.get_makespan``)."""
    L, fw, bw, *_ = _lists(chain)
    return sum(fw[op[1]] if op[0] in ("CF", "Fn", "Fe") else bw[op[1]] if op[0] == "B" else 0
               for op in ops)


def schedule_from_sequence(ops: Sequence[tuple], n: int) -> NestedSchedule:
    """The nested schedule of a rotor operation list for ``n`` layers (the loss,
    ``("L",)``, is left out: it runs taped after the layers)."""
    ops = [tuple(op) for op in ops]
    pos = 0

    def expect(*op):
        nonlocal pos
        if pos >= len(ops) or ops[pos] != op:
            got = ops[pos] if pos < len(ops) else "the end"
            raise ValueError(f"rotor sequence: expected {op} at position {pos}, got {got}")
        pos += 1

    def parse(i, l):  # items for rotor's sub-problem (i, l): layers i .. l, l = n being the loss
        nonlocal pos
        if i == l:
            if i == n:
                expect("L")
                return []
            expect("Fe", i)
            expect("B", i)
            return [Taped(i)]
        if pos < len(ops) and ops[pos] == ("Fe", i):
            pos += 1
            items = [Taped(i)] + parse(i + 1, l)
            expect("B", i)
            return items
        expect("CF", i)
        j = i + 1
        while pos < len(ops) and ops[pos] == ("Fn", j):
            pos += 1
            j += 1
        rest = parse(j, l)
        inner = parse(i, j - 1)
        return [Checkpointed(i, j, tuple(inner))] + rest

    items = parse(0, n)
    if pos != len(ops):
        raise ValueError(f"rotor sequence: {len(ops) - pos} operations left after the schedule ended")
    return NestedSchedule(n=n, items=tuple(items))


def sequence_from_schedule(schedule: NestedSchedule) -> list[tuple]:
    """Rotor's operation list for a nested schedule (the inverse of
    `schedule_from_sequence`; the schedule must not checkpoint the rest of a
    level whole, which rotor cannot express)."""
    n = schedule.n

    def emit(items, i, l):
        if i > l:
            return []
        if not items:  # only the loss is left
            return [("L",)]
        first, rest = items[0], items[1:]
        if isinstance(first, Taped):
            if i == l:
                return [("Fe", i), ("B", i)]
            return [("Fe", i)] + emit(rest, i + 1, l) + [("B", i)]
        if first.stop > l:
            raise ValueError(f"{first} covers the whole rest of its level, which rotor's schedules never do")
        return ([("CF", i)] + [("Fn", k) for k in range(i + 1, first.stop)]
                + emit(rest, first.stop, l) + emit(first.inner, i, first.stop - 1))
    return emit(schedule.items, 0, n)


def rotor_model_memory(chain, schedule: NestedSchedule) -> int:
    """The smallest ``memory_limit`` (slots) with which rotor's model accepts
    ``schedule``: the published recurrence evaluated along this one schedule
    instead of minimised over all. ``persistent_table``'s optimum at a memory
    ``M`` is the least makespan over the schedules with ``rotor_model_memory <= M``."""
    L, fw, bw, cw, cbw, ftmp, btmp = _lists(chain)
    if schedule.n != L:
        raise ValueError(f"the schedule is for n={schedule.n} layers, the chain has {L}")

    def one(i):
        return max(cw[i + 1] + cbw[i + 1] + ftmp[i], cw[i] + cw[i + 1] + cbw[i + 1] + btmp[i])

    def mmin(i, l):
        return max([cw[l + 1] + cw[i + 1] + ftmp[i]]
                   + [cw[l + 1] + cw[j] + cw[j + 1] + ftmp[j] for j in range(i + 1, l)])

    def need(items, i, l):  # memory (beyond x_i) that sub-problem (i, l) needs
        first, rest = items[0], items[1:]
        if i == l:
            if first != Taped(i):
                raise ValueError(f"{first} covers the whole rest of its level, which rotor's schedules never do")
            return one(i)
        if isinstance(first, Taped):
            return max(mmin(i, l), one(i), cbw[i + 1] + need(rest, i + 1, l))
        j = first.stop
        if j > l:
            raise ValueError(f"{first} covers the whole rest of its level, which rotor's schedules never do")
        return max(mmin(i, l), cw[j] + need(rest, j, l), need(first.inner, i, j - 1))
    return cw[0] + need(tuple(schedule.items) + (Taped(L),), 0, L)


def to_rotor_chain(profile, slot_bytes: int = 1, cost=None, backward_cost=None) -> RotorChain:
    """Rotor's parameters for a `minigrad.plan.ChainProfile` (see the module docstring).

    Args:
        profile: the chain's profile (the loss's saved bytes included).
        slot_bytes: bytes per memory slot (sizes are rounded up; 1 = exact bytes).
        cost: per-layer forward costs (default: ``profile.cost``).
        backward_cost: optional per-layer backward costs (rotor adds them to every
            schedule's makespan alike; default 0), one more for the loss.
    Returns:
        a `RotorChain` of ``L = profile.n`` layers and the loss.

    Example:
        >>> ch = to_rotor_chain(profile, slot_bytes=4)
        >>> ops = persistent_sequence(ch, memory_limit=ch.x_size[0] + 100)
        >>> checkpoint_sequential(layers, schedule_from_sequence(ops, profile.n), x)
    """
    if isinstance(slot_bytes, bool) or not isinstance(slot_bytes, int) or slot_bytes < 1:
        raise ValueError(f"to_rotor_chain: slot_bytes must be an integer >= 1, got {slot_bytes!r}")
    costs = _costs(profile, cost, "to_rotor_chain")
    L = profile.n
    a = list(profile.input_bytes) + [profile.output_bytes]

    def slots(nbytes):
        return -(-int(nbytes) // slot_bytes)  # rounded up
    bw = list(backward_cost) if backward_cost is not None else [0] * (L + 1)
    if len(bw) != L + 1:
        raise ValueError(f"to_rotor_chain: backward_cost has {len(bw)} entries, expected {L + 1} "
                         f"(one per layer and one for the loss)")
    # the loss's private saved arrays live from its forward to its backward, like a
    # backward temporary of the loss (its input x_L is already counted in rotor's model)
    return RotorChain(forward_cost=tuple(float(c) if isinstance(c, Fraction) else c for c in costs),
                      backward_cost=tuple(bw),
                      x_size=tuple(slots(v) for v in a),
                      xbar_size=(slots(a[0]),) + tuple(slots(a[i + 1] + profile.own_bytes[i]) for i in range(L)),
                      forward_tmp=(0,) * L,
                      backward_tmp=(0,) * L + (slots(profile.loss_own_bytes),))
