"""Nested recomputation: the Griewank–Walther binomial schedule ("Revolve").

One-level checkpointing (`minigrad.plan.optimal_segments`) stores a few segment
inputs and recomputes each segment once. With very few memory slots that is
not enough: a segment that is itself too long to tape must be checkpointed
again inside its own recomputation, and so on. Griewank (1992) showed which
nesting is optimal for a chain of ``l`` equal steps and ``s`` snapshot slots;
Griewank & Walther (2000, ACM TOMS Algorithm 799, "revolve") turned it into a
schedule of actions. The schedule reverses the chain one step at a time:

* ``("snapshot", i)``   keep the chain's state before layer ``i`` (one slot);
* ``("advance", i, j)`` run layers ``i .. j-1`` untaped (nothing saved for backward);
* ``("taped", i)``      run layer ``i`` with taping and immediately back-propagate
  through it (revolve's "youturn"; the first one is its "firsturn");
* ``("restore", i)``    resume from the snapshot before layer ``i``;
* ``("free", i)``       release that snapshot's slot.

Counting (the binomial identities the tests check). With
``beta(s, r) = C(s + r, s)`` and ``r`` the *repetition number*, the integer with
``beta(s, r - 1) < l <= beta(s, r)``, the schedule makes exactly

    t(l, s) = r * l - beta(s + 1, r - 1)

untaped forward steps (layer calls inside ``advance``), plus one taped call per
layer, so the layers are called ``t(l, s) + l`` times in all; at most ``s``
snapshots are held at any time, the chain's input counting as one.

Execution. ``checkpoint_sequential(layers, plan, x)`` hands the plan to
`minigrad.checkpoint.run_schedule`, which performs the actions one by one (a loop, so a
1000-layer chain with one slot is no deeper to run than one with many). Every value is
recomputed from the same inputs by the same ops, so the gradients are bit-identical to
running the chain without checkpointing. The schedule reads recursively (for ``l > 1``
layers and ``s`` slots: snapshot the input, advance ``m`` layers, reverse the remaining
``l - m`` layers with ``s - 1`` slots, then restore the snapshot and reverse the first
``m`` layers with ``s`` slots); `revolve_actions` unrolls that recursion with an explicit
stack.

The split ``m`` is chosen so that the first part has repetition number ``r - 1``
with ``s`` slots and the rest has repetition number ``r`` with ``s - 1`` slots;
since ``t(., s)`` is convex and piecewise linear in ``l`` (slope ``r``), any such
split attains ``t(l, s) = m + t(l - m, s - 1) + t(m, s)`` (Pascal's rule
``beta(s + 1, r - 1) = beta(s + 1, r - 2) + beta(s, r - 1)``).

This module is pure Python: numbers in, actions out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from minigrad._validation import check_int

__all__ = [
    "beta",
    "repetition_number",
    "untaped_forward_steps",
    "binomial_split",
    "revolve_actions",
    "RevolvePlan",
    "revolve",
]


def beta(s: int, r: int) -> int:
    """``beta(s, r) = C(s + r, s)``: the longest chain that ``s`` snapshot slots can
    reverse with every step run untaped at most ``r`` times (Griewank 1992).
    Defined as 0 for ``r < 0`` (no chain longer than 0 can be reversed then).

    Example:
        >>> beta(3, 2)
        10
    """
    if r < 0 or s < 0:
        return 0
    return math.comb(s + r, s)


def repetition_number(l: int, s: int) -> int:
    """The integer ``r >= 0`` with ``beta(s, r - 1) < l <= beta(s, r)``.

    Args:
        l: number of layers (>= 1).
        s: snapshot slots (>= 1).

    Example:
        >>> repetition_number(24, 3)
        4
    """
    l = check_int("l", l, 1, where="repetition_number")
    s = check_int("slots", s, 1, where="repetition_number")
    hi = 1
    while beta(s, hi) < l:  # beta grows with r: double, then bisect
        hi *= 2
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if beta(s, mid) < l:
            lo = mid + 1
        else:
            hi = mid
    return lo


def untaped_forward_steps(l: int, s: int) -> int:
    """Closed form ``t(l, s) = r * l - beta(s + 1, r - 1)`` of the binomial schedule.

    The number of layer calls made without taping when reversing ``l`` layers
    with ``s`` slots (the first forward sweep included). Examples: one slot
    gives ``l * (l - 1) / 2`` (re-run from the input for every step); ``s >= l - 1``
    gives ``l - 1`` (store every state, no recomputation at all)."""
    r = repetition_number(l, s)
    return r * l - beta(s + 1, r - 1)


def binomial_split(l: int, s: int) -> int:
    """How many layers ``m`` (1 <= m < l) to advance before the next snapshot.

    Returns the largest ``m`` with ``beta(s, r - 2) <= m <= beta(s, r - 1)`` and
    ``beta(s - 1, r - 1) <= l - m <= beta(s - 1, r)``, clipped to ``[1, l - 1]``:
    every such ``m`` is optimal (see the module docstring).

    Example:
        >>> binomial_split(10, 2)
        6
    """
    l = check_int("l", l, 2, where="binomial_split")
    s = check_int("slots", s, 1, where="binomial_split")
    r = repetition_number(l, s)
    lo = max(beta(s, r - 2), l - beta(s - 1, r), 1)
    hi = min(beta(s, r - 1), l - beta(s - 1, r - 1), l - 1)
    if lo > hi:  # cannot happen for l > 1, s >= 1 (see the proof); guard anyway
        raise AssertionError(f"empty binomial split interval for l={l}, s={s}")
    return hi


def revolve_actions(n: int, slots: int) -> list[tuple]:
    """The binomial schedule's actions, in execution order.

    Args:
        n: layers (>= 1).
        slots: snapshot slots (>= 1; the chain's input takes one).

    Returns:
        Tuples ``("snapshot", i)``, ``("advance", i, j)``, ``("taped", i)``, ``("restore", i)``,
        ``("free", i)``; indices are layer positions 0..n-1 (a snapshot ``i`` is the state
        *before* layer ``i``, i.e. layer ``i``'s input).

    The recursion of the module docstring, unrolled with an explicit stack: ``forward`` of
    a sub-chain snapshots and advances until one layer is left, which it runs taped; each
    piece it advanced over is reversed later, last first (restore, forward, reverse its own
    pieces, free).

    Example:
        >>> revolve_actions(3, 2)
        [('snapshot', 0), ('advance', 0, 1), ('snapshot', 1), ('advance', 1, 2), ('taped', 2), ('restore', 1), ('taped', 1), ('free', 1), ('restore', 0), ('taped', 0), ('free', 0)]
    """
    n = check_int("n", n, 1, where="revolve_actions")
    slots = check_int("slots", slots, 1, where="revolve_actions")
    held: dict[int, int] = {}  # snapshot position -> number of pieces still needing it
    out: list[tuple] = []

    def forward(a: int, l: int, s: int) -> list[tuple]:
        """Advance over pieces until one layer is left, tape it; the pieces, in order."""
        pieces = []
        while l > 1:
            m = binomial_split(l, s)
            if held.get(a, 0) == 0:
                out.append(("snapshot", a))
            held[a] = held.get(a, 0) + 1
            out.append(("advance", a, a + m))
            pieces.append((a, m, s))
            a, l, s = a + m, l - m, s - 1
        out.append(("taped", a))
        return pieces

    stack = [("reverse", p) for p in forward(0, n, slots)]  # the last piece is reversed first
    while stack:
        what, piece = stack.pop()
        a = piece[0]
        if what == "free":
            held[a] -= 1
            if held[a] == 0:
                del held[a]
                out.append(("free", a))
            continue
        out.append(("restore", a))
        inner = forward(*piece)
        stack.append(("free", piece))
        stack.extend(("reverse", p) for p in inner)
    return out


@dataclass(frozen=True)
class RevolvePlan:
    """A binomial (nested) checkpointing schedule for a chain of ``n`` layers: plain data.

    Accepted by ``minigrad.checkpoint.checkpoint_sequential(layers, plan, x)``, which walks
    its ``actions`` with ``run_schedule``.

    Attributes:
        n: layers.
        slots: snapshot slots (the chain's input counts as one).
        repetitions: the repetition number r.
        n_untaped_forward_steps: t(n, slots).
        actions: see `revolve_actions`.

    Example:
        >>> plan = revolve(24, 3)
        >>> plan.n_layer_calls, plan.max_snapshots
        (85, 3)
    """

    n: int
    slots: int
    repetitions: int
    n_untaped_forward_steps: int
    actions: tuple = field(repr=False)

    @property
    def n_layer_calls(self) -> int:
        """Total layer calls: every untaped step plus one taped call per layer."""
        return self.n_untaped_forward_steps + self.n

    @property
    def max_snapshots(self) -> int:
        """Largest number of snapshots held at once, counted on the action list."""
        live = peak = 0
        for act in self.actions:
            if act[0] == "snapshot":
                live += 1
                peak = max(peak, live)
            elif act[0] == "free":
                live -= 1
        return peak


def revolve(n: int, slots: int) -> RevolvePlan:
    """The Griewank–Walther binomial schedule for ``n`` layers and ``slots`` slots.

    Args:
        n: layers, ``n >= 1``.
        slots: snapshot slots, ``slots >= 1`` (the chain's input takes one; with
            ``slots >= n - 1`` nothing is recomputed).

    Returns:
        A `RevolvePlan`.

    Raises:
        TypeError, ValueError: not integers, or out of range (the message names the range).

    Example:
        >>> revolve(10, 3).n_untaped_forward_steps
        15
    """
    n = check_int("n", n, 1, where="revolve")
    slots = check_int("slots", slots, 1, where="revolve")
    return RevolvePlan(
        n=n,
        slots=slots,
        repetitions=repetition_number(n, slots),
        n_untaped_forward_steps=untaped_forward_steps(n, slots),
        actions=tuple(revolve_actions(n, slots)),
    )
