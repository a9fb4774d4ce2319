"""`optimal_one_level`: segment plans plus the "tape this layer and keep it" branch.

Against brute force over every schedule of depth <= 1 (`enumerate_schedules` filtered
by depth) on random small profiles: for every achievable budget it recomputes the
least work of any such schedule, fits the budget, and never recomputes more than the
best segment plan (`optimal_segments`) at the same budget; it equals `rotor` whenever
rotor's optimum has depth <= 1, and never beats it. Executed on a real chain, the
ledger measures the peak and the recomputed FLOPs it predicts.
"""
from __future__ import annotations

import pytest

import minigrad
import minigrad.ops as F
from minigrad import memory
from minigrad import plan as P
from minigrad.checkpoint import checkpoint_sequential
from minigrad.plan.nested import optimal_one_level
from minigrad.plan.nested import (NestedSchedule, enumerate_schedules, schedule_peak,
                                 schedule_recompute_cost)

from test_plan_brute_force import random_profile


def _all_grad(pr):
    import dataclasses
    return dataclasses.replace(pr, requires_grad=None)


def _depth1(pr):
    out = []
    for items in enumerate_schedules(pr.n):
        s = NestedSchedule(n=pr.n, items=items)
        if s.depth <= 1:
            out.append((schedule_recompute_cost(pr, s), schedule_peak(pr, s)))
    return out


@pytest.mark.parametrize("seed", range(24))
def test_optimal_among_depth_one_schedules(seed):
    pr = _all_grad(random_profile(seed, 2 + seed % 4))
    points = _depth1(pr)
    smallest = min(p for _, p in points)
    free = optimal_one_level(pr)
    assert free.predicted_peak_activations == smallest
    assert free.recompute_cost == min(w for w, p in points if p == smallest)
    assert free.depth <= 1
    for budget in sorted({p for _, p in points}):
        s = optimal_one_level(pr, budget_bytes=budget)
        best = min(w for w, p in points if p <= budget)
        assert s.recompute_cost == best
        assert s.predicted_peak_activations == min(p for w, p in points
                                                   if p <= budget and w == best)
        assert s.predicted_peak_activations <= budget and s.depth <= 1
        seg = P.optimal_segments(pr, budget_bytes=budget) if budget >= \
            P.optimal_segments(pr).predicted_peak_activations else None
        if seg is not None:
            assert s.recompute_cost <= seg.recompute_cost
        rot = P.rotor(pr, budget_bytes=budget)
        assert rot.recompute_cost <= s.recompute_cost
        if rot.depth <= 1:
            assert rot.recompute_cost == s.recompute_cost
    with pytest.raises(ValueError, match=f"budget_bytes >= {smallest}"):
        optimal_one_level(pr, budget_bytes=smallest - 1)


def test_taped_branch_beats_segment_plans():
    # a wide, cheap middle layer between two costly narrow ones: taping the costly
    # layers and checkpointing only the wide one is no segment plan
    from minigrad.plan.chain import ChainProfile
    pr = ChainProfile(input_bytes=(8, 8, 8), output_bytes=8, saves_input=(True,) * 3,
                      saves_output=(False,) * 3, own_bytes=(0, 64, 0), cost=(100, 1, 100))
    s = optimal_one_level(pr, budget_bytes=80)
    assert s.nested == [0, (1, 2, [1]), 2]
    assert s.recompute_cost == 1
    assert P.optimal_segments(pr, budget_bytes=80).recompute_cost > 1


def test_executed_on_a_real_chain():
    minigrad.random.manual_seed(3)
    from minigrad import nn, Tensor
    layers = [nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 8), nn.Tanh(),
              nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 8)]
    x = Tensor(minigrad.random.randn(4, 8), requires_grad=True)
    target = Tensor(minigrad.random.randn(4, 8))
    loss = lambda y: F.mse_loss(y, target)  # noqa: E731
    free = optimal_one_level(layers, x, loss=loss)
    pr = P.profile_chain(layers, x, loss=loss)
    for budget in (free.predicted_peak_activations,
                   (free.predicted_peak_activations + schedule_peak(pr, NestedSchedule(
                       n=pr.n, items=tuple(P.Taped(i) for i in range(pr.n))))) // 2):
        s = optimal_one_level(layers, x, budget_bytes=budget, loss=loss)
        with memory.track() as m:
            loss(checkpoint_sequential(layers, s, x)).backward()
        assert m.peak["activations"] == s.predicted_peak_activations <= budget
        assert m.flops["recompute"] == s.recompute_cost
