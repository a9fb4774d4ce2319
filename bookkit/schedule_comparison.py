"""Revolve against the one-level and nested optima at Revolve's own measured peak, on
chains of equal layers (shown in chapter 5; chapter "Beyond one level" adds the nested
optimum). Every count is measured under the byte ledger and checked against the
planners' predictions."""
from __future__ import annotations

from dataclasses import dataclass

import minigrad
from bookkit.chains import block_chain, measure_chain_step
from minigrad import Tensor, plan
from minigrad.plan.nested import rotor_frontier

__all__ = ["RevolveCase", "compare_at_revolve_peak", "plan_families"]


@dataclass(frozen=True)
class RevolveCase:
    """One chain of ``n`` equal layers and ``slots`` Revolve slots: Revolve's measured
    ``peak`` (bytes) and the layer calls each plan recomputes within that peak:
    ``revolve``, ``one_level`` (None when no one-level plan fits) and ``nested`` (the
    optimal nested schedule, `minigrad.plan.rotor`; None when not asked for). Shown in chapter 5."""

    n: int
    slots: int
    peak: int
    revolve: int
    one_level: int | None
    nested: int | None


def compare_at_revolve_peak(n_max: int = 16, width: int = 16, hidden: int = 64, batch: int = 8,
                            nested: bool = False) -> list[RevolveCase]:
    """For every chain of ``n = 2 .. n_max`` equal blocks ``Linear(width, hidden) -> ReLU ->
    Linear(hidden, width)`` and every slot count ``s < n``: run ``plan.revolve(n, s)`` under
    the ledger, take its measured peak as the budget, plan and run the one-level optimum
    (``plan.optimal_segments``) and, with ``nested``, the nested optimum (``plan.rotor``)
    within it, and count recomputed layer calls (recomputed FLOPs over one layer's FLOPs:
    the layers are equal). Shown in chapter 5; chapter 6 adds the nested column."""
    cases = []
    for n in range(2, n_max + 1):
        layers = block_chain([width] * (n + 1), hidden, seed=n, activation="relu")
        minigrad.random.manual_seed(n)
        x = Tensor(minigrad.random.randn(batch, width), requires_grad=True)
        profile = plan.profile_chain(layers, x)
        per_layer = profile.cost[0]

        def run(p, budget):
            step = measure_chain_step(layers, x, p)
            assert step.peak_activations == plan.predict_peak(profile, p) <= budget
            assert step.recompute_flops == plan.recompute_cost(profile, p)
            return step.recompute_flops // per_layer

        for s in range(1, n):
            rev = plan.revolve(n, s)
            peak = measure_chain_step(layers, x, rev).peak_activations
            try:
                one = run(plan.optimal_segments(profile, budget_bytes=peak), peak)
            except ValueError:  # no one-level plan fits Revolve's peak
                one = None
            rot = run(plan.rotor(profile, budget_bytes=peak), peak) if nested else None
            cases.append(RevolveCase(n, s, peak, run(rev, peak), one, rot))
    return cases


def plan_families(profile) -> dict:
    """Every kind of plan the book compares, as points of one memory–compute plane
    (a book experiment, shown in chapter 6; it was ``minigrad.plan.nested.frontier_families``).

    Returns ``{name: [(recompute_cost, peak_bytes, plan), ...]}`` for ``"store all"``,
    ``"sqrt(n)"`` (`sqrt_segments`), ``"segment plans"`` (the smallest peak for each last
    segment start, `min_peak_for_each_last_start`), ``"Revolve"`` (every slot count
    ``1 .. n-1``) and ``"rotor"`` (`rotor_frontier`), in the profile's cost unit. Peaks
    and work are those ``checkpoint_sequential`` measures for each plan (`predict_peak`,
    `recompute_cost`), and every plan can be passed to it. Draw them with
    ``minigrad.viz.frontier_families``."""
    n = profile.n

    def point(p):
        return (plan.recompute_cost(profile, p), plan.predict_peak(profile, p), p)
    one_level = sorted((point(plan.explicit(n, starts))
                        for _, _, starts in plan.min_peak_for_each_last_start(profile)),
                       key=lambda t: t[:2])
    return {
        "store all": [point(plan.explicit(n, [0]))],
        "sqrt(n)": [point(plan.sqrt_segments(n))],
        "segment plans": one_level,
        "Revolve": [point(plan.revolve(n, s)) for s in range(1, n)],
        "rotor": rotor_frontier(profile),
    }
