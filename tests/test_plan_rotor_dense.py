"""plan.rotor on long chains: the dense solver (a memory grid, NumPy diagonals) and the
published solver's discretisation (``slots=``).

* on the exact grid (the gcd of the chain's sizes) the dense solver returns the very
  schedules of the Pareto-front solver, for every budget of random chains;
* with ``slots``, every schedule's true peak fits the budget, its work is no less than the
  exact optimum and no more than the exact optimum at the budget minus the rounding
  bound stated in `rotor`'s docstring, and it runs within the budget under the ledger;
* long chains plan in seconds (generous bounds; ``benchmarks/rotor_scaling.py`` measures).
"""
import time

import numpy as np
import pytest

import minigrad
import minigrad.ops as F
from minigrad import memory, nn
from minigrad import plan as P
from minigrad.checkpoint import checkpoint_sequential
from minigrad.plan.chain import ChainProfile
from minigrad.plan.nested import _costs, _Fronts, _min_peak, _planned
from plan_references import rotor_reference
from bookpaths import ROOT, load_module


def random_profile(rng, n, unit=64):
    """A chain of ``n`` layers with random sizes (multiples of ``unit`` bytes), flags and
    integer costs, and a loss that may save its input and arrays of its own."""
    return ChainProfile(
        input_bytes=tuple(int(v) * unit for v in rng.integers(1, 9, n)),
        output_bytes=int(rng.integers(1, 9)) * unit,
        saves_input=tuple(bool(v) for v in rng.integers(0, 2, n)),
        saves_output=tuple(bool(v) for v in rng.integers(0, 2, n)),
        own_bytes=tuple(int(v) * unit for v in rng.integers(0, 6, n)),
        cost=tuple(int(v) for v in rng.integers(1, 100, n)),
        loss_saves_input=bool(rng.integers(0, 2)),
        loss_own_bytes=int(rng.integers(0, 3)) * unit)


def fronts_rotor(profile, budget=None):
    """The Pareto-front solver alone (the exact reference for the dense one)."""
    costs = _costs(profile, None)
    fronts = _Fronts(profile, costs, float("inf") if budget is None else budget)
    needs, _ = fronts.front()
    return _planned(profile, fronts.build(needs[0] if budget is None else needs[-1]), costs)


@pytest.mark.parametrize("seed", range(12))
def test_dense_solver_returns_the_fronts_schedules(seed):
    rng = np.random.default_rng(seed)
    profile = random_profile(rng, int(rng.integers(1, 16)), unit=int(rng.choice([1, 8, 96])))
    smallest = _min_peak(profile)
    assert P.rotor(profile).items == fronts_rotor(profile).items
    assert P.rotor(profile).predicted_peak_activations == smallest
    whole = fronts_rotor(profile, None)
    for budget in sorted({smallest, smallest + 1, *rng.integers(smallest, 4 * smallest + 2, 6)}):
        budget = int(budget)
        mine, ref = P.rotor(profile, budget_bytes=budget), fronts_rotor(profile, budget)
        assert mine.items == ref.items
        assert (mine.predicted_peak_activations, mine.recompute_cost) == \
            (ref.predicted_peak_activations, ref.recompute_cost)
    with pytest.raises(ValueError, match=f"smallest peak .* is {smallest} bytes"):
        P.rotor(profile, budget_bytes=smallest - 1)
    assert whole.predicted_peak_activations == smallest


def exact_at(profile, budget):
    """The exact optimum within ``budget`` bytes (a real number; inf below 0)."""
    return float("inf") if budget < 0 else rotor_reference(profile, int(budget))


@pytest.mark.parametrize("seed", range(12))
def test_slots_fit_the_true_budget_within_the_stated_bound(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 9))
    profile = random_profile(rng, n, unit=int(rng.choice([1, 7, 64])))
    smallest = _min_peak(profile)
    for _ in range(5):
        budget = int(rng.integers(smallest, 3 * smallest + 1))
        slots = int(rng.integers(2, 40))
        exact = rotor_reference(profile, budget)
        try:
            plan = P.rotor(profile, budget_bytes=budget, slots=slots)
        except ValueError as e:  # too coarse: nothing fits once sizes are rounded up
            assert "slots" in str(e)
            # then even the smallest-peak schedule does not fit the bound's margin
            K = 2 * n + 3  # arrays a schedule can hold at once: n + 2 boundaries, n + 1 sets
            assert exact_at(profile, budget - K * budget / slots) == float("inf")
            continue
        assert plan.predicted_peak_activations <= budget  # rounding up only over-counts
        assert plan.recompute_cost >= exact
        K = 2 * n + 3
        assert plan.recompute_cost <= exact_at(profile, budget - K * budget / slots)


def test_slots_with_float_costs():
    """Seconds instead of FLOPs: the grid adds floats (ties may round differently from the
    exact fronts), the schedule still fits the true budget and is never better than exact."""
    rng = np.random.default_rng(5)
    profile = random_profile(rng, 7, unit=32)
    costs = [float(c) for c in rng.uniform(0.1, 3.0, 7)]
    smallest = _min_peak(profile)
    for budget in (smallest, 2 * smallest, 3 * smallest):
        plan = P.rotor(profile, budget_bytes=budget, cost=costs, slots=64)
        assert plan.predicted_peak_activations <= budget
        assert plan.recompute_cost >= P.rotor(profile, budget_bytes=budget, cost=costs).recompute_cost


def test_slots_arguments_checked():
    profile = random_profile(np.random.default_rng(0), 5)
    with pytest.raises(ValueError, match="pass budget_bytes"):
        P.rotor(profile, slots=10)
    with pytest.raises(ValueError, match="slots"):
        P.rotor(profile, budget_bytes=10 ** 6, slots=0)
    with pytest.raises(TypeError, match="slots"):
        P.rotor(profile, budget_bytes=10 ** 6, slots=2.5)


def test_a_slotted_schedule_runs_within_its_budget():
    rng = np.random.default_rng(3)
    minigrad.random.manual_seed(3)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(24, 24), nn.GELU(), nn.Dropout(0.2)]
    x = minigrad.Tensor(rng.standard_normal((8, 24)).astype(np.float32), requires_grad=True)

    def loss(y):
        return F.mse_loss(y, minigrad.Tensor(np.zeros(y.shape, np.float32)))
    profile = P.profile_chain(layers, x, loss=loss)
    budget = 2 * P.rotor(profile).predicted_peak_activations
    plan = P.rotor(profile, budget_bytes=budget, slots=12)
    minigrad.random.manual_seed(9)
    with memory.track(record_timeline=False) as m:
        loss(checkpoint_sequential(layers, plan, x)).backward()
    assert m.peak["activations"] - m.start["activations"] == plan.predicted_peak_activations
    assert plan.predicted_peak_activations <= budget
    assert m.flops["recompute"] == plan.recompute_cost


# n identical GPT blocks (minigrad's TransformerBlock, width 32, 4 heads, batch 4 x 16
# tokens) and a mean-square loss: the chain the scaling script times.
gpt_chain = load_module(ROOT / "benchmarks" / "rotor_scaling.py").gpt_chain


def test_long_chains_plan_in_seconds():
    """Generous bounds (targets: 2 s and 60 s; measured: well below)."""
    profile = gpt_chain(100)
    t = time.process_time()
    smallest = P.rotor(profile)
    roomy = P.rotor(profile, budget_bytes=3 * smallest.predicted_peak_activations)
    assert time.process_time() - t < 10
    assert roomy.recompute_cost < smallest.recompute_cost
    rng = np.random.default_rng(7)
    long = random_profile(rng, 300, unit=512)
    budget = 4 * _min_peak(long)
    t = time.process_time()
    plan = P.rotor(long, budget_bytes=budget, slots=16)
    assert time.process_time() - t < 30
    assert plan.predicted_peak_activations <= budget
