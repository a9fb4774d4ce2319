"""plan.rotor on long chains whose costs float64 cannot add exactly: float costs
(seconds) and integers too large (FLOPs of large layers). They are planned on
integer stand-ins ``floor(c / q)`` (`minigrad.plan.nested._integer_costs`), the
bound scaled back by ``q``: checked against the exact optimum of the same chain
with small integer costs, scaled (an optimal schedule stays optimal when every
cost is multiplied by the same number)."""
import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from test_plan_rotor_bound import _store_all
from test_plan_rotor_dense import random_profile

from minigrad import plan as P
from minigrad.plan.nested import (_EXACT_FLOAT, _integer_costs, _min_peak,
                                  schedule_peak, schedule_recompute_cost)

# 2**-10 keeps every scaled cost an exact, non-integer float; 10**13 makes
# (n + 1) * sum(costs) pass 2**53 on these chains
SCALES = (Fraction(1, 1024), 10 ** 13)


def _scaled(profile, factor):
    costs = tuple(float(c * factor) if factor < 1 else c * factor
                  for c in profile.cost)
    return dataclasses.replace(profile, cost=costs)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("factor", SCALES)
def test_scaled_costs_keep_the_exact_optimum_within_the_bound(seed, factor):
    rng = np.random.default_rng(500 + seed)
    profile = random_profile(rng, 60)
    smallest = _min_peak(profile)
    whole = _store_all(profile)
    scaled = _scaled(profile, factor)
    for budget in (None, (smallest + whole) // 2):
        exact = P.rotor(profile, budget_bytes=budget)  # the exact grid
        assert exact.lower_bound_cost is None
        best = Fraction(exact.recompute_cost) * factor
        s = P.rotor(scaled, budget_bytes=budget)
        peak = smallest if budget is None else budget
        assert s.predicted_peak_activations <= peak
        assert s.predicted_peak_activations == schedule_peak(scaled, s)
        work = schedule_recompute_cost(scaled, s)
        assert s.recompute_cost == work
        assert type(work) is (float if factor < 1 else int)
        low = best if s.lower_bound_cost is None else s.lower_bound_cost
        assert Fraction(low) <= best <= Fraction(work)
        assert Fraction(work) - Fraction(low) <= Fraction(work) / 10 ** 9


def test_float_costs_at_the_smallest_peak_of_a_long_chain():
    """No budget (the smallest peak): the automatic path plans it; before,
    float costs took 256 slots rounded up, where nothing fit."""
    rng = np.random.default_rng(7)
    profile = _scaled(random_profile(rng, 200, unit=4), Fraction(1, 1024))
    s = P.rotor(profile)
    assert s.predicted_peak_activations == _min_peak(profile)
    assert 0 < s.lower_bound_cost <= s.recompute_cost if s.lower_bound_cost \
        else s.recompute_cost >= 0


@pytest.mark.parametrize("costs", [
    [0.5, 1e-300, 3.25, 0.0],
    [10 ** 18, 1, 0, 7 * 10 ** 17],
    [Fraction(1, 3), Fraction(2, 3), Fraction(5)],
])
def test_integer_stand_ins_fit_float64_and_never_exceed_the_cost(costs):
    exact = [Fraction(c) for c in costs]
    for n in (len(costs), 1000):
        q, ints = _integer_costs(exact, n)
        assert all(type(v) is int and v >= 0 for v in ints)
        assert (n + 1) * (sum(ints) + 1) < _EXACT_FLOAT
        assert all(q * v <= c for v, c in zip(ints, exact))
        # and they lose less than q per cost: the bound stays close
        assert all(c - q * v < q for v, c in zip(ints, exact))
