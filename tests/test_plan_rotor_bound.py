"""plan.rotor's grid-free lower bound (the top level's knapsack,
`minigrad.plan.nested._taped_knapsack_bound`): never above the exact optimum
on random small chains (shared boundaries, a loss that saves arrays, budgets
from the smallest peak to store-all), and meaningful (> 0) on 1,000 layers."""
import time

import numpy as np
import pytest
from test_plan_rotor_dense import fronts_rotor, random_profile

from minigrad import plan as P
from minigrad.plan.chain import ChainProfile
from minigrad.plan.nested import _costs, _min_peak, _taped_knapsack_bound


@pytest.mark.parametrize("seed", range(40))
def test_knapsack_bound_is_below_the_exact_optimum(seed):
    rng = np.random.default_rng(1000 + seed)
    profile = random_profile(rng, int(rng.integers(1, 13)),
                             unit=int(rng.choice([1, 4, 64])))
    costs = _costs(profile, None)
    smallest = _min_peak(profile)
    whole = fronts_rotor(profile, 10 ** 12).predicted_peak_activations
    budgets = {smallest, whole, *rng.integers(smallest, whole + 1, 6)}
    for budget in sorted(int(b) for b in budgets):
        exact = fronts_rotor(profile, budget).recompute_cost
        assert _taped_knapsack_bound(profile, costs, budget) <= exact


def long_chain(n, seed=0):
    rng = np.random.default_rng(seed)
    return ChainProfile(
        input_bytes=tuple(int(v) * 4 for v in rng.integers(1000, 100000, n)),
        output_bytes=int(rng.integers(1000, 100000)) * 4,
        saves_input=tuple(bool(v) for v in rng.integers(0, 2, n)),
        saves_output=tuple(bool(v) for v in rng.integers(0, 2, n)),
        own_bytes=tuple(int(v) * 4 for v in rng.integers(0, 100000, n)),
        cost=tuple(int(v) for v in rng.integers(1, 10 ** 6, n)),
        loss_saves_input=True, loss_own_bytes=4)


@pytest.mark.slow
def test_thousand_layers_have_a_positive_bound_within_a_minute():
    profile = long_chain(1000)
    whole = P.rotor  # the public entry point
    smallest = _min_peak(profile)
    budget = max(smallest, int(0.3 * _store_all(profile)))
    t = time.perf_counter()
    s = whole(profile, budget_bytes=budget)
    assert time.perf_counter() - t < 60
    assert s.lower_bound_cost is None or 0 < s.lower_bound_cost <= s.recompute_cost
    assert s.predicted_peak_activations <= budget
    assert s.lower_bound_cost is not None and s.lower_bound_cost > 0
    # the fine grid's bound (sizes rounded down, long checkpoints relaxed): within
    # 5 % of the schedule's work (0.4 % measured: benchmarks/rotor_bound.py)
    assert s.recompute_cost - s.lower_bound_cost <= 0.05 * s.recompute_cost


def _store_all(profile):
    from minigrad.plan.nested import NestedSchedule, Taped, schedule_peak
    n = profile.n
    return schedule_peak(profile, NestedSchedule(
        n=n, items=tuple(Taped(i) for i in range(n))))
