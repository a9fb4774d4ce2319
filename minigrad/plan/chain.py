"""The chain model: a `ChainProfile` of sizes and costs, and what a plan costs on it.

For a chain ``x_0 -> layer_0 -> x_1 -> ... -> layer_{n-1} -> x_n -> loss`` a profile lists,
per layer, the bytes of its input ``x_i``, which of its input and output it saves for
backward, the bytes of the other arrays it saves, and its forward cost (FLOPs by default);
and what the loss saves. `minigrad.plan.profile.profile_chain` measures one from real layers;
everything here is arithmetic on numbers, testable on numbers alone.

The memory model of a one-level plan (what ``checkpoint_sequential`` does and the ledger's
``m.peak["activations"]`` measures), with starts ``0 = s_0 < ... < s_{k-1} < n`` and
``s_k = n``. Every segment but the last is checkpointed: its forward runs untaped and only
its input ``x_{s_j}`` is kept; the last segment and the loss run taped. Write ``U(p, q)``
for the bytes of the union of the arrays that layers ``p .. q-1`` save (an array saved by
two layers, such as layer ``i``'s output that is layer ``i+1``'s input, counts once) and
``B_j = |x_{s_0}| + ... + |x_{s_j}|`` (``B_{-1} = 0``). The saved activations peak at one
of these moments:

* end of the forward pass (loss included):
  ``B_{k-2} + U(s_{k-1}, n) + L``, where ``L`` is what the loss saves besides what the last
  segment already saves;
* end of segment ``j``'s recomputation during backward (later segments, and the loss, are
  done and freed): ``B_{j-1} + |{x_{s_j}} ∪ U(s_j, s_{j+1})|``.

``peak = max`` of those ``k`` terms (`predict_peak`). One refinement: when the chain's
input needs no grad and its first layers have no parameters, a checkpointed segment whose
output needs no grad records nothing (nothing kept, nothing recomputed, no term).

Forward work: each checkpointed layer runs forward exactly once more during backward, so
a plan's recomputed work is the summed cost of the layers of its checkpointed segments
(`recompute_cost`). Costs may be floats (seconds, say); sums are then exact (rational)
and returned as floats.

Schedules given as actions (``plan.revolve``, nested schedules) are predicted by
replaying their actions: at every moment, the snapshots held plus what the taped layers
save (plus the loss at the end of the forward pass).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from minigrad._validation import check_segment_starts

__all__ = ["ChainProfile", "predict_peak", "recompute_cost", "exact_sum", "exact_fraction",
           "segment_peak"]


def _check_bytes(name, values):
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v < 0:
            raise ValueError(f"ChainProfile: {name}[{i}] = {v!r} is not a whole, non-negative number "
                             f"of bytes")


def _check_costs(name, values):
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise ValueError(f"ChainProfile: {name}[{i}] = {v!r} is not a number")
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"ChainProfile: {name}[{i}] = {v!r} is not a finite, non-negative cost")


def exact_fraction(v) -> Fraction:
    """A real number as the exact fraction its value is (NumPy's float32 included).

    Example:
        >>> import numpy as np
        >>> exact_fraction(np.float32(0.5)), exact_fraction(3)
        (Fraction(1, 2), Fraction(3, 1))
    """
    if isinstance(v, (numbers.Rational, Fraction)):
        return Fraction(v)
    return Fraction(float(v))


def exact_sum(values):
    """The exact sum of ints and floats: an int if all are ints, else the float nearest to
    the exact (rational) sum. Plan costs are compared with it, so ties are real ties.

    Example:
        >>> exact_sum([1, 2, 3]), exact_sum([0.5, 0.25, 2])
        (6, 2.75)
    """
    values = list(values)
    if all(isinstance(v, numbers.Integral) for v in values):
        return int(sum(int(v) for v in values))
    return float(sum(exact_fraction(v) for v in values))



@dataclass(frozen=True)
class ChainProfile:
    """Sizes and costs of a chain ``x_0 -> layer_0 -> ... -> layer_{n-1} -> x_n [-> loss]``.

    Attributes (lists of length ``n`` unless noted; bytes are whole numbers):
        input_bytes: ``|x_i|``.
        output_bytes: ``|x_n|`` (one int).
        saves_input, saves_output: layer ``i`` saves ``x_i`` / ``x_{i+1}`` for backward.
        own_bytes: bytes of the other arrays layer ``i`` saves (each counted once).
        cost: forward work of layer ``i``: finite, non-negative numbers, ints or floats
            (`profile_chain` measures FLOPs).
        requires_grad: optional, length ``n + 1``: whether ``x_0 .. x_n`` require grad
            (default: all do). A checkpointed segment whose output does not require grad
            (a parameter-free prefix on an input that needs no grad) records nothing.
        loss_saves_input: the loss saves ``x_n`` for backward.
        loss_own_bytes: bytes of the other arrays the loss saves (its targets, its
            softmax...). 0 and False: no loss, or one that saves nothing.
        loss_cost: the loss's forward work (never recomputed; for reference).

    Raises:
        ValueError: lengths differ, a byte count is negative or not whole, a cost is
            negative, NaN or infinite, or ``requires_grad`` is inconsistent.

    Example:
        >>> pr = ChainProfile(input_bytes=(64, 64), output_bytes=64, saves_input=(True, True),
        ...                   saves_output=(False, False), own_bytes=(0, 0), cost=(10, 10))
        >>> predict_peak(pr, [0, 1])
        128
    """

    input_bytes: tuple
    output_bytes: int
    saves_input: tuple
    saves_output: tuple
    own_bytes: tuple
    cost: tuple
    requires_grad: tuple | None = None
    loss_saves_input: bool = False
    loss_own_bytes: int = 0
    loss_cost: float = 0

    def __post_init__(self):
        n = len(self.input_bytes)
        if n < 1:
            raise ValueError("ChainProfile: a chain needs at least one layer")
        for name in ("saves_input", "saves_output", "own_bytes", "cost"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"ChainProfile: {name} has {len(getattr(self, name))} entries, "
                                 f"expected n={n}")
        _check_bytes("input_bytes", self.input_bytes)
        _check_bytes("own_bytes", self.own_bytes)
        _check_bytes("output_bytes", [self.output_bytes])
        _check_bytes("loss_own_bytes", [self.loss_own_bytes])
        _check_costs("cost", self.cost)
        _check_costs("loss_cost", [self.loss_cost])
        for name in ("input_bytes", "saves_input", "saves_output", "own_bytes", "cost"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.requires_grad is not None:
            rg = tuple(bool(r) for r in self.requires_grad)
            if len(rg) != n + 1:
                raise ValueError(f"ChainProfile: requires_grad has {len(rg)} entries, expected "
                                 f"n + 1 = {n + 1}")
            if not rg[-1]:
                raise ValueError("ChainProfile: the chain's output does not require grad: there is "
                                 "no backward to plan")
            if any(a and not b for a, b in zip(rg, rg[1:])):
                raise ValueError(f"ChainProfile: requires_grad must stay True once True along the "
                                 f"chain, got {list(rg)}")
            object.__setattr__(self, "requires_grad", rg)

    @property
    def n(self) -> int:
        """Number of layers."""
        return len(self.input_bytes)

    @property
    def first_grad(self) -> int:
        """``f``: the first boundary ``x_f`` that requires grad (0 unless the chain's input
        does not and its first layers have no parameters)."""
        if self.requires_grad is None:
            return 0
        return list(self.requires_grad).index(True)

    @property
    def loss_bytes(self) -> int:
        """What the loss adds to the end-of-forward term: its own saved bytes, plus ``x_n``
        if it saves it and the last layer does not already."""
        extra = int(self.loss_own_bytes)
        if self.loss_saves_input and not self.saves_output[-1]:
            extra += int(self.output_bytes)
        return extra

    def tables(self):
        """``(U, V, a)``: integer tables for ``0 <= p < q <= n``:
        ``U[p, q] = U(p, q)`` (plus the loss's bytes in column ``n``, the end of forward),
        ``V[p, q] = |{x_p} ∪ U(p, q)|``, and ``a[b] = |x_b|``."""
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
        U[:n, n] += self.loss_bytes  # the loss runs taped right after the last segment
        return U.astype(np.int64), V.astype(np.int64), a


def segment_peak(U, V, a, n, starts, f=0) -> int:
    """The model's peak for segment ``starts`` (see the module docstring); a checkpointed
    segment ending before ``f`` (its output needs no grad) makes no term and keeps nothing.

    Args:
        U, V, a: the tables of `ChainProfile.tables`; n: layers; starts: segment starts;
        f: ``profile.first_grad``.

    Example:
        >>> pr = ChainProfile(input_bytes=(64, 64), output_bytes=64, saves_input=(True, True),
        ...                   saves_output=(False, False), own_bytes=(0, 0), cost=(10, 10))
        >>> U, V, a = pr.tables()
        >>> int(segment_peak(U, V, a, pr.n, (0, 1)))
        128
    """
    bounds = list(starts) + [n]
    kept, peak = 0, 0  # kept: B_{j-1}, checkpointed inputs held while segment j is live
    for j in range(len(starts) - 1):
        if bounds[j + 1] < f:
            continue
        peak = max(peak, kept + int(V[bounds[j], bounds[j + 1]]))
        kept += int(a[bounds[j]])
    return max(peak, kept + int(U[starts[-1], n]))  # end of forward: last segment taped


def _starts_of(plan, n, where):
    """The segment starts of a one-level plan (a sequence, or an object with ``starts``);
    None for a schedule given by ``actions``."""
    if hasattr(plan, "starts"):
        if getattr(plan, "n", n) != n:
            raise ValueError(f"{where}: the plan is for n={plan.n} layers, the profile has {n}")
        return check_segment_starts(plan.starts, n, where)
    if hasattr(plan, "actions"):
        if getattr(plan, "n", None) != n:
            raise ValueError(f"{where}: the schedule is for n={getattr(plan, 'n', None)} layers, the "
                             f"profile has {n}")
        return None
    if isinstance(plan, (str, bytes, dict, set)) or not hasattr(plan, "__iter__"):
        raise TypeError(f"{where}: plan must be a sequence of segment starts, a SegmentPlan or a "
                        f"schedule with n and actions, got {type(plan).__name__}")
    return check_segment_starts(plan, n, where)


def predict_peak(profile: ChainProfile, plan) -> int:
    """Peak saved-activation bytes of one step (forward, loss, backward) under ``plan``.

    Args:
        profile: the chain's `ChainProfile`.
        plan: segment starts (a sequence), an object with ``starts`` (a ``SegmentPlan``), or
            a schedule with ``n`` and ``actions`` (``plan.revolve``).

    Returns:
        Bytes (int), by the model in the module docstring.

    Example:
        >>> pr = ChainProfile(input_bytes=(64,) * 8, output_bytes=64, saves_input=(True,) * 8,
        ...                   saves_output=(False,) * 8, own_bytes=(0,) * 8, cost=(10,) * 8)
        >>> predict_peak(pr, [0, 4]), predict_peak(pr, [0])   # two segments, then none
        (320, 512)
    """
    starts = _starts_of(plan, profile.n, "predict_peak")
    if starts is None:
        return _schedule_peak(profile, plan.actions)
    U, V, a = profile.tables()
    return segment_peak(U, V, a, profile.n, starts, profile.first_grad)


def recompute_cost(profile: ChainProfile, plan):
    """Forward work redone in backward under ``plan``, in the profile's cost unit.

    For segment starts: the cost of every layer of a checkpointed segment (all layers
    before the last start, except a leading run of segments whose outputs need no grad:
    those record nothing). For a schedule: every layer execution beyond the first forward.
    An int when the costs are ints, else a float (summed exactly).

    Example:
        >>> pr = ChainProfile(input_bytes=(64,) * 8, output_bytes=64, saves_input=(True,) * 8,
        ...                   saves_output=(False,) * 8, own_bytes=(0,) * 8, cost=(10,) * 8)
        >>> recompute_cost(pr, [0, 4])     # layers 0..3 run twice
        40
    """
    starts = _starts_of(plan, profile.n, "recompute_cost")
    if starts is None:
        runs = _schedule_runs(profile.n, plan.actions)
        return exact_sum(c * (r - 1) for c, r in zip(profile.cost, runs))
    f = profile.first_grad
    bounds = list(starts) + [profile.n]
    return exact_sum(profile.cost[i] for j in range(len(starts) - 1) if bounds[j + 1] >= f
                     for i in range(bounds[j], bounds[j + 1]))


def _schedule_runs(n, actions):
    """How many times each layer runs under a schedule's actions (forward included)."""
    runs = [0] * n
    for act in actions:
        if act[0] == "advance":
            for i in range(act[1], act[2]):
                runs[i] += 1
        elif act[0] in ("tape", "taped"):
            runs[act[1]] += 1
    return runs


def _schedule_peak(profile: ChainProfile, actions) -> int:
    """Replay a schedule: at every moment, the snapshots held (layer inputs ``x_b``) and the
    arrays the taped, not yet reversed, layers save; an array in both counts once. The loss's
    arrays are live once the forward pass has produced the output, until the backward starts
    (the first reversal, or the first restore when the last layers are checkpointed)."""
    n = profile.n
    size = {("x", b): int(v) for b, v in enumerate(list(profile.input_bytes) + [profile.output_bytes])}

    def saved(i):
        s = {("own", i)} if profile.own_bytes[i] else set()
        if profile.saves_input[i]:
            s.add(("x", i))
        if profile.saves_output[i]:
            s.add(("x", i + 1))
        return s

    size.update({("own", i): int(profile.own_bytes[i]) for i in range(n)})
    loss = {("loss",)} if profile.loss_own_bytes else set()
    size[("loss",)] = int(profile.loss_own_bytes)
    if profile.loss_saves_input:
        loss.add(("x", n))
    held: set = set()
    taped: list = []  # layers taped and not yet reversed

    def live(extra=()):
        arrays = set(held)
        for i in taped:
            arrays |= saved(i)
        arrays |= set(extra)
        return sum(size[k] for k in arrays)

    peak, forward_done = 0, False
    for act in actions:
        kind = act[0]
        if not forward_done and kind in ("reverse", "restore", "free", "taped"):
            # end of forward: the loss has run on top of what the forward keeps (its
            # backward comes first, before any recomputation)
            forward_done = True
            if kind == "taped":
                taped.append(act[1])
                peak = max(peak, live(loss))
                taped.remove(act[1])
                continue
            peak = max(peak, live(loss))
        if kind == "snapshot":
            held.add(("x", act[1]))
        elif kind == "free":
            held.discard(("x", act[1]))
        elif kind == "tape":
            taped.append(act[1])
        elif kind == "reverse":
            taped.remove(act[1])
        elif kind == "taped":
            taped.append(act[1])
            peak = max(peak, live())
            taped.remove(act[1])
        peak = max(peak, live())
    return int(peak)
