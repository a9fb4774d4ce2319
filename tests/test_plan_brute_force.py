"""The planners against brute force on numbers, and their plans executed under the ledger.

* One level: on random `ChainProfile`s (with a loss, float costs, a chain input without
  grad and a parameter-free prefix), `optimal_segments` and its reference recurrence equal
  the best of all ``2^(n-1)`` segmentations, for no budget and for every achievable budget;
  a budget below the smallest peak raises naming it.
* Nested: `rotor` equals the best of all nested schedules on up to 5 layers for every
  budget, and never recomputes more than the one-level optimum at the same budget.
* Executed: each planner's plan for a real chain with a loss, run by
  ``checkpoint_sequential``, measures the peak it predicts (within its budget), runs the
  same forward and backward FLOPs as the plain step, and recomputes exactly the FLOPs
  ``recompute_cost`` predicts.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import minigrad
import minigrad.ops as F
from minigrad import memory
from minigrad import plan as P
from plan_references import optimal_segments_reference
from minigrad.checkpoint import checkpoint_sequential
from minigrad.plan.nested import NestedSchedule, enumerate_schedules, schedule_peak, schedule_recompute_cost

from chains import random_chain, segmentations


def random_profile(seed, n):
    """A random chain's numbers; layers whose output needs no grad (a prefix on an input
    without grad) save nothing, as `profile_chain` measures them."""
    rng = np.random.default_rng(seed)
    size = lambda: int(rng.integers(1, 6)) * 8  # noqa: E731
    a = [size() for _ in range(n + 1)]
    saves_in = [bool(rng.integers(2)) for _ in range(n)]
    saves_out = [bool(rng.integers(2)) for _ in range(n)]
    own = [int(rng.integers(0, 4)) * 8 for _ in range(n)]
    floats = seed % 3 == 0
    cost = [float(rng.integers(0, 5)) / 3 if floats else int(rng.integers(0, 5)) for _ in range(n)]
    requires_grad = None
    if seed % 4 == 1:
        first = int(rng.integers(0, n))
        requires_grad = (False,) * first + (True,) * (n + 1 - first)
        for i in range(first - 1):
            saves_in[i] = saves_out[i] = False
            own[i] = 0
    loss = {}
    if seed % 2 == 0:
        loss = dict(loss_saves_input=bool(rng.integers(2)), loss_own_bytes=int(rng.integers(0, 3)) * 8)
    return P.ChainProfile(tuple(a[:n]), a[n], tuple(saves_in), tuple(saves_out), tuple(own), tuple(cost),
                          requires_grad=requires_grad, **loss)



@pytest.mark.parametrize("seed", range(80))
def test_one_level_planners_equal_brute_force_for_every_budget(seed):
    n = 1 + seed % 7
    profile = random_profile(seed, n)
    table = [(P.predict_peak(profile, s), Fraction(P.recompute_cost(profile, s))) for s in segmentations(n)]
    best = min(p for p, _ in table)
    for plan in (P.optimal_segments(profile), optimal_segments_reference(profile)):
        assert plan.predicted_peak_activations == best == P.predict_peak(profile, plan)
        assert Fraction(plan.recompute_cost) == min(c for p, c in table if p == best)
    for budget in sorted({p for p, _ in table}):
        least = min(c for p, c in table if p <= budget)
        for plan in (P.optimal_segments(profile, budget_bytes=budget),
                     optimal_segments_reference(profile, budget_bytes=budget)):
            assert Fraction(plan.recompute_cost) == least
            assert plan.predicted_peak_activations == min(p for p, c in table if c == least and p <= budget)
    with pytest.raises(ValueError, match=f"allowed: budget_bytes >= {best}"):
        P.optimal_segments(profile, budget_bytes=best - 1)


SCHEDULES = {n: [NestedSchedule(n, items) for items in enumerate_schedules(n)] for n in range(1, 6)}


@pytest.mark.parametrize("seed", range(30))
def test_rotor_equals_brute_force_and_never_loses_to_one_level(seed):
    n = 1 + seed % 5
    profile = random_profile(1000 + seed, n)
    points = [(schedule_peak(profile, s), Fraction(schedule_recompute_cost(profile, s)))
              for s in SCHEDULES[n]]
    one_level = [(P.predict_peak(profile, s), Fraction(P.recompute_cost(profile, s))) for s in segmentations(n)]
    for budget in sorted({p for p, _ in points} | {p for p, _ in one_level}):
        plan = P.rotor(profile, budget_bytes=budget)
        assert plan.predicted_peak_activations <= budget
        assert P.predict_peak(profile, plan) == plan.predicted_peak_activations
        assert Fraction(plan.recompute_cost) == min(c for p, c in points if p <= budget)
        fits = [c for p, c in one_level if p <= budget]
        if fits:
            assert Fraction(plan.recompute_cost) <= min(fits)
    smallest = min(p for p, _ in points)
    assert P.rotor(profile).predicted_peak_activations == smallest
    with pytest.raises(ValueError, match=f"allowed: budget_bytes >= {smallest}"):
        P.rotor(profile, budget_bytes=smallest - 1)


def _step(layers, x, target, plan):
    minigrad.random.manual_seed(7)
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential(layers, plan, x) if plan is not None else _plain(layers, x)
        F.mse_loss(y, target).backward()
    for layer in layers:
        for p in layer.parameters():
            p.grad = None
    return m.peak["activations"] - m.start["activations"], m.flops


def _plain(layers, x):
    for layer in layers:
        x = layer(x)
    return x


@pytest.mark.parametrize("seed", range(4))
def test_every_planner_runs_what_it_predicts_with_a_loss(seed):
    rng = np.random.default_rng(seed)
    minigrad.random.manual_seed(seed)
    layers, width = random_chain(rng, 8)
    x = minigrad.Tensor(rng.standard_normal((3, width)).astype(np.float32), requires_grad=bool(seed % 2))
    out_width = _plain(layers, x).shape[-1]
    target = minigrad.Tensor(rng.standard_normal((3, out_width)).astype(np.float32))
    loss = lambda y: F.mse_loss(y, target)  # noqa: E731
    profile = P.profile_chain(layers, x, loss=loss)
    _, plain = _step(layers, x, target, None)
    assert plain["forward"] == sum(profile.cost) + profile.loss_cost
    low = P.optimal_segments(profile).predicted_peak_activations
    budget = (low + P.predict_peak(profile, [0])) // 2
    plans = {"sqrt": P.sqrt_segments(8), "optimal": P.optimal_segments(profile),
             "optimal within budget": P.optimal_segments(layers, x, budget_bytes=budget, loss=loss),
             "revolve 2": P.revolve(8, 2), "revolve 3": P.revolve(8, 3),
             "rotor": P.rotor(profile), "rotor within budget": P.rotor(layers, x, budget_bytes=budget, loss=loss)}
    for name, plan in plans.items():
        peak, flops = _step(layers, x, target, plan)
        assert peak == P.predict_peak(profile, plan), name
        assert flops["recompute"] == P.recompute_cost(profile, plan), name
        assert (flops["forward"], flops["backward"]) == (plain["forward"], plain["backward"]), name
        if "budget" in name:
            assert peak <= budget, name
