"""Multi-level recomputation: the Griewank–Walther binomial schedule ("Revolve").

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

Execution. `run_revolve` follows the recursive form of the schedule with nested
`minigrad.checkpoint.checkpoint` calls: for a chain of ``l > 1`` layers and ``s``
slots, checkpoint the first ``m`` layers (their input is the snapshot), run the
remaining ``l - m`` layers recursively with ``s - 1`` slots, and let the
checkpoint's recomputation of the first part apply the same rule with ``s``
slots. Every value is recomputed from the same inputs by the same ops, so the
gradients are bit-identical to running the chain without checkpointing.

The split ``m`` is chosen so that the first part has repetition number ``r - 1``
with ``s`` slots and the rest has repetition number ``r`` with ``s - 1`` slots;
since ``t(., s)`` is convex and piecewise linear in ``l`` (slope ``r``), any such
split attains ``t(l, s) = m + t(l - m, s - 1) + t(m, s)`` (Pascal's rule
``beta(s + 1, r - 1) = beta(s + 1, r - 2) + beta(s, r - 1)``).

This module is pure Python (numbers in, actions out) except `run_revolve`,
which imports the engine lazily.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "beta",
    "repetition_number",
    "untaped_forward_steps",
    "binomial_split",
    "revolve_actions",
    "RevolvePlan",
    "revolve",
    "run_revolve",
]


def _check_int(name: str, value, lo: int, hi: int | None = None) -> int:
    """Validate an integer argument, raising ValueError that names the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int,)) and not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        allowed = f"{lo} <= {name}" + (f" <= {hi}" if hi is not None else "")
        raise ValueError(f"{name}={value} is out of range; allowed: {allowed}")
    return value


def beta(s: int, r: int) -> int:
    """``beta(s, r) = C(s + r, s)``: the longest chain that ``s`` snapshot slots can
    reverse with every step run untaped at most ``r`` times (Griewank 1992).
    Defined as 0 for ``r < 0`` (no chain longer than 0 can be reversed then)."""
    if r < 0 or s < 0:
        return 0
    return math.comb(s + r, s)


def repetition_number(l: int, s: int) -> int:
    """The integer ``r >= 0`` with ``beta(s, r - 1) < l <= beta(s, r)``.

    ``l``: number of layers (>= 1); ``s``: snapshot slots (>= 1)."""
    l = _check_int("l", l, 1)
    s = _check_int("slots", s, 1)
    r = 0
    while beta(s, r) < l:
        r += 1
    return r


def untaped_forward_steps(l: int, s: int) -> int:
    """Closed form ``t(l, s) = r * l - beta(s + 1, r - 1)`` of the binomial schedule.

    The number of layer calls made without taping when reversing ``l`` layers
    with ``s`` slots (the first forward sweep included). Examples: one slot
    gives ``l * (l - 1) / 2`` (re-run from the input for every step); ``s >= l - 1``
    gives ``l - 1`` (store every state, no recomputation at all)."""
    r = repetition_number(l, s)
    return r * l - beta(s + 1, r - 1)


def _t(l: int, s: int) -> int:
    # t with the s = 0 convention: zero slots can only "reverse" a single step
    # (run it taped); anything longer is impossible.
    if l == 1:
        return 0
    if s == 0:
        raise ValueError("no snapshot slot left for a chain longer than one layer")
    return untaped_forward_steps(l, s)


def binomial_split(l: int, s: int) -> int:
    """How many layers ``m`` (1 <= m < l) to advance before the next snapshot.

    Returns the largest ``m`` with ``beta(s, r - 2) <= m <= beta(s, r - 1)`` and
    ``beta(s - 1, r - 1) <= l - m <= beta(s - 1, r)``, clipped to ``[1, l - 1]``:
    every such ``m`` is optimal (see the module docstring)."""
    l = _check_int("l", l, 2)
    s = _check_int("slots", s, 1)
    r = repetition_number(l, s)
    lo = max(beta(s, r - 2), l - beta(s - 1, r), 1)
    hi = min(beta(s, r - 1), l - beta(s - 1, r - 1), l - 1)
    if lo > hi:  # cannot happen for l > 1, s >= 1 (see the proof); guard anyway
        raise AssertionError(f"empty binomial split interval for l={l}, s={s}")
    return hi


def revolve_actions(n: int, slots: int) -> list[tuple]:
    """The action list that `run_revolve` performs, in execution order.

    Returns tuples ``("snapshot", i)``, ``("advance", i, j)``, ``("taped", i)``,
    ``("restore", i)``, ``("free", i)``; indices are layer positions 0..n-1
    (a snapshot ``i`` is the state *before* layer ``i``, i.e. layer ``i``'s input).
    """
    n = _check_int("n", n, 1)
    slots = _check_int("slots", slots, 1)
    held: dict[int, int] = {}  # snapshot position -> number of nested checkpoints holding it
    out: list[tuple] = []

    def hold(i: int) -> None:
        if held.get(i, 0) == 0:
            out.append(("snapshot", i))
        held[i] = held.get(i, 0) + 1

    def release(i: int) -> None:
        held[i] -= 1
        if held[i] == 0:
            del held[i]
            out.append(("free", i))

    # The recursion mirrors run_revolve exactly: forward(a, l, s) is what the
    # taped forward of the sub-chain does; backward(a, l, s) what its backward does.
    def forward(a: int, l: int, s: int) -> None:
        if l == 1:
            out.append(("taped", a))
            return
        m = binomial_split(l, s)
        hold(a)
        out.append(("advance", a, a + m))
        forward(a + m, l - m, s - 1)

    def backward(a: int, l: int, s: int) -> None:
        if l == 1:
            return  # the taped step was reversed right after it ran
        m = binomial_split(l, s)
        backward(a + m, l - m, s - 1)
        out.append(("restore", a))
        forward(a, m, s)
        backward(a, m, s)
        release(a)

    forward(0, n, slots)
    backward(0, n, slots)
    return out


@dataclass(frozen=True)
class RevolvePlan:
    """A binomial (multi-level) checkpointing schedule for a chain of ``n`` layers.

    Accepted by ``minigrad.checkpoint.checkpoint_sequential(layers, plan, x)``,
    which hands it to `run_revolve` because ``kind == "revolve"``.

    Attributes: ``n`` layers, ``slots`` snapshot slots (the chain's input counts
    as one), ``repetitions`` (the repetition number r), ``n_untaped_forward_steps``
    (= t(n, slots)), ``n_layer_calls`` (= t + n) and ``actions`` (see
    `revolve_actions`)."""

    n: int
    slots: int
    repetitions: int
    n_untaped_forward_steps: int
    actions: tuple = field(repr=False)
    kind: str = "revolve"

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

    ``n >= 1`` layers, ``slots >= 1`` (the chain's input takes one slot; with
    ``slots >= n - 1`` nothing is recomputed). Raises ValueError naming the
    allowed range otherwise."""
    n = _check_int("n", n, 1)
    slots = _check_int("slots", slots, 1)
    return RevolvePlan(
        n=n,
        slots=slots,
        repetitions=repetition_number(n, slots),
        n_untaped_forward_steps=untaped_forward_steps(n, slots),
        actions=tuple(revolve_actions(n, slots)),
    )


def run_revolve(layers, plan: RevolvePlan, x, preserve_rng_state: bool = True, determinism_check=True):
    """Run ``layers`` (a list of callables Tensor -> Tensor) on ``x`` under ``plan``.

    Returns the chain's output Tensor; its backward recomputes according to the
    binomial schedule by nesting ``minigrad.checkpoint.checkpoint`` calls (the
    keyword arguments are passed on to each). The layers are called exactly
    ``plan.n_layer_calls`` times over one forward and one backward. Gradients
    are bit-identical to ``layers`` run plainly. Like ``checkpoint_sequential``,
    it does not warn when ``x`` needs no grad (the chain's data usually does not)."""
    import warnings

    layers = list(layers)
    if getattr(plan, "kind", None) != "revolve":
        raise TypeError(f"run_revolve needs a plan with kind == 'revolve', got {plan!r}")
    if len(layers) != plan.n:
        raise ValueError(f"plan is for n={plan.n} layers but {len(layers)} layers were given")
    from minigrad.checkpoint import checkpoint  # lazy: keep this module importable alone

    def run(a: int, l: int, s: int, h):
        if l == 1:
            return layers[a](h)
        m = binomial_split(l, s)

        def first_part(inp, a=a, m=m, s=s):
            # Same rule, same slots: during the recomputation this part is
            # reversed with s slots, its input being the snapshot it started from.
            return run(a, m, s, inp)

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="checkpoint: none of the inputs requires grad")
            h = checkpoint(first_part, h, preserve_rng_state=preserve_rng_state,
                           determinism_check=determinism_check)
        return run(a + m, l - m, s - 1, h)

    return run(0, plan.n, plan.slots, x)
