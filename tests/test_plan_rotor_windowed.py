"""plan.rotor on long chains: short checkpoints on a fine grid (`_Windowed`).

* with a window as long as the chain and the exact grid, the windowed table is the
  exact recurrence: its schedule's work and its bound are the reference optimum;
* with a short window and a coarse grid, every schedule fits the budget in true bytes
  and recomputes no less than the optimum, and every bound is at most the optimum
  (`tests/plan_references.py`'s recurrence on exact bytes);
* the fallback read off the smallest-peak recurrence fits the budget, guided or not;
* the smallest peak with checkpoints of at most ``W`` layers (`_min_peak` with
  ``W``) is brute force's, and decides exactly whether a window's pass finds a
  schedule (on the exact grid; on a coarse one it finds none above the budget),
  so `rotor` skips the passes that cannot fit;
* a guided schedule and a window schedule spliced at the top level (`_splice`)
  fit and recompute no more than either;
* through `rotor` itself (the thresholds lowered so small chains take the long-chain
  path): fits, bounds, and a gap under 5 % on a 200-layer chain in about a second.
"""
import time

import numpy as np
import pytest
from plan_references import rotor_reference
from test_plan_rotor_bound import _store_all, long_chain
from test_plan_rotor_dense import random_profile

from minigrad import plan as P
from minigrad.plan import nested
from minigrad.plan.nested import (
    NestedSchedule,
    _costs,
    _Dense,
    _feasible_floor,
    _min_peak,
    _min_peak_items,
    _splice,
    _windowed_rotor,
    enumerate_schedules,
    schedule_peak,
    schedule_recompute_cost,
)


def _budgets(rng, profile):
    smallest = _min_peak(profile)
    whole = _store_all(profile)
    return sorted({smallest, whole, *(int(b) for b in
                                      rng.integers(smallest, whole + 1, 4))})


def _work(profile, items):
    return schedule_recompute_cost(profile,
                                   NestedSchedule(n=profile.n, items=items))


@pytest.mark.parametrize("seed", range(12))
def test_a_full_window_on_the_exact_grid_is_the_exact_optimum(seed, monkeypatch):
    rng = np.random.default_rng(300 + seed)
    profile = random_profile(rng, int(rng.integers(2, 9)),
                             unit=int(rng.choice([1, 8, 64])))
    monkeypatch.setattr(nested, "_WINDOW", profile.n + 1)
    costs = _costs(profile, None)
    for budget in _budgets(rng, profile):
        exact = rotor_reference(profile, budget)
        items, bound = _windowed_rotor(profile, costs, budget)
        assert items is not None
        assert schedule_peak(profile, NestedSchedule(n=profile.n, items=items)) \
            <= budget
        assert _work(profile, items) == exact
        assert bound == exact


@pytest.mark.parametrize("seed", range(24))
def test_short_windows_and_coarse_grids_fit_and_bound(seed, monkeypatch):
    rng = np.random.default_rng(400 + seed)
    profile = random_profile(rng, int(rng.integers(3, 11)), unit=4)
    monkeypatch.setattr(nested, "_WINDOW", int(rng.integers(1, 4)))
    # a few hundred grid points: units of many bytes, sizes rounded both ways
    monkeypatch.setattr(nested, "_WINDOW_WORK", int(rng.integers(200, 2000)))
    costs = _costs(profile, None)
    for budget in _budgets(rng, profile):
        exact = rotor_reference(profile, budget)
        items, bound = _windowed_rotor(profile, costs, budget)
        assert bound <= exact
        if items is not None:
            assert schedule_peak(
                profile, NestedSchedule(n=profile.n, items=items)) <= budget
            assert _work(profile, items) >= exact


@pytest.mark.parametrize("seed", range(12))
def test_the_smallest_peak_fallback_fits(seed):
    rng = np.random.default_rng(500 + seed)
    profile = random_profile(rng, int(rng.integers(2, 11)), unit=4)
    a, si, so, own = nested._chain_arrays(profile)
    for budget in _budgets(rng, profile)[:3]:
        exact = rotor_reference(profile, budget)
        guide = _Dense(([v * 16 // budget for v in a], si, so,
                        [v * 16 // budget for v in own]),
                       _costs(profile, None), 16)
        assert guide.top()[16] <= exact  # rounded down: a bound
        half = _Dense(([v * 16 // budget for v in a], si, so,
                       [v * 16 // budget for v in own]),
                      _costs(profile, None), 16, down32=True)
        assert half.top()[16] <= guide.top()[16]  # float32, rounded down
        for items in (_min_peak_items(profile, budget),
                      _min_peak_items(profile, budget, guide, (16, budget))):
            sched = NestedSchedule(n=profile.n, items=items)
            assert schedule_peak(profile, sched) <= budget
            assert _work(profile, items) >= exact


def _long_path(monkeypatch, work=None):
    monkeypatch.setattr(nested, "_FRONTS_MAX_LAYERS", 2)
    monkeypatch.setattr(nested, "_DENSE_MAX_CELLS", 100)
    if work is not None:
        monkeypatch.setattr(nested, "_WINDOW_WORK", work)


def _random_long_path(rng, monkeypatch, smallest: int, widest: int):
    """``(profile, w)``: a random profile of ``smallest`` to 10 layers on the
    long-chain path, with window passes of ``w`` (at most ``widest``) and
    ``w + 2`` layers."""
    profile = random_profile(rng, int(rng.integers(smallest, 11)), unit=4)
    _long_path(monkeypatch, work=int(rng.integers(300, 3000)))
    w = int(rng.integers(1, widest + 1))
    monkeypatch.setattr(nested, "_WINDOW_STEPS",
                        ((w, 0.5, 0.01), (w, 1, 0.05), (w + 2, 1, 0.05)))
    return profile, w


@pytest.mark.parametrize("seed", range(8))
def test_rotor_takes_the_long_chain_path_soundly(seed, monkeypatch):
    rng = np.random.default_rng(600 + seed)
    profile, _ = _random_long_path(rng, monkeypatch, 4, 4)
    for budget in [None] + _budgets(rng, profile):
        s = P.rotor(profile, budget_bytes=budget)
        cap = _min_peak(profile) if budget is None else budget
        exact = rotor_reference(profile, cap)
        assert schedule_peak(profile, s) == s.predicted_peak_activations <= cap
        assert s.recompute_cost >= exact
        assert s.lower_bound_cost is None and s.recompute_cost == exact or \
            s.lower_bound_cost <= exact


def test_two_hundred_layers_within_five_percent(monkeypatch):
    """200 layers at 30 % of store-all on a grid of 3e8 elements: fits, gap < 5 %
    (about a second; the default grid, 6e9, reaches 0.4 % in about 13 s at 1,000
    layers: benchmarks/rotor_bound.py)."""
    profile = long_chain(200)
    budget = int(0.3 * _store_all(profile))
    monkeypatch.setattr(nested, "_WINDOW_WORK", 300_000_000)
    t = time.process_time()
    s = P.rotor(profile, budget_bytes=budget)
    assert time.process_time() - t < 20
    assert schedule_peak(profile, s) <= budget
    assert s.lower_bound_cost is not None
    assert s.recompute_cost - s.lower_bound_cost <= 0.05 * s.recompute_cost


@pytest.mark.parametrize("seed", range(12))
def test_the_feasible_floor_keeps_a_bound(seed):
    """The whole table on a coarse rounded-down grid, set to inf below each
    sub-problem's exact smallest peak (`_feasible_floor`): still at most the exact
    optimum, at least the unmasked table, and a guide whose schedule fits."""
    rng = np.random.default_rng(700 + seed)
    profile = random_profile(rng, int(rng.integers(2, 11)),
                             unit=int(rng.choice([1, 4, 64])))
    a, si, so, own = nested._chain_arrays(profile)
    costs = _costs(profile, None)
    for budget in _budgets(rng, profile):
        exact = rotor_reference(profile, budget)
        for S in (4, 16, 61):
            sizes = ([v * S // budget for v in a], si, so,
                     [v * S // budget for v in own])
            plain = _Dense(sizes, costs, S, down32=True)
            masked = _Dense(sizes, costs, S, down32=True,
                            floor=_feasible_floor(profile, S, budget))
            assert plain.top()[S] <= masked.top()[S] <= exact
            items = _min_peak_items(profile, budget, masked, (S, budget))
            sched = NestedSchedule(n=profile.n, items=items)
            assert schedule_peak(profile, sched) <= budget
            assert _work(profile, items) >= exact


def test_the_smallest_peak_within_two_percent(monkeypatch):
    """150 layers at their smallest peak, small grids (3e8 elements, 4e6 cells):
    the whole table set to inf below each sub-problem's smallest peak and stored
    from there bounds the optimum within 2 % (0.6 % measured; 21 % without the
    floor), in about two seconds."""
    profile = long_chain(150)
    monkeypatch.setattr(nested, "_WINDOW_WORK", 300_000_000)
    monkeypatch.setattr(nested, "_DENSE_MAX_CELLS", 4_000_000)
    t = time.process_time()
    s = P.rotor(profile)
    assert time.process_time() - t < 20
    assert schedule_peak(profile, s) == _min_peak(profile)
    assert s.lower_bound_cost is not None
    assert s.recompute_cost - s.lower_bound_cost <= 0.02 * s.recompute_cost


def test_float32_down_never_rounds_up():
    x = np.array([2.0 ** 24 + 1, 2.0 ** 30 + 3, 3.0, 0.0, np.inf, 1e9 + 7])
    y = nested._float32_down(x)
    assert y.dtype == np.float32
    assert (y.astype(np.float64) <= x).all()
    fin = np.isfinite(x)  # and the largest such float32
    assert (np.nextafter(y[fin], np.float32(np.inf)).astype(np.float64)
            > x[fin]).all()
    assert y[~fin].tolist() == [np.inf]


def test_a_float32_sum_one_step_down_is_at_most_the_exact_sum():
    """`_Dense` with ``down32`` adds float32 entries (rounded to nearest) and
    takes one float32 step down: never above the exact sum of the two."""
    rng = np.random.default_rng(0)
    x = (rng.random(100_000) * 2.0 ** rng.integers(0, 40, 100_000)).astype(
        np.float32)
    y = (rng.random(100_000) * 2.0 ** rng.integers(0, 40, 100_000)).astype(
        np.float32)
    x[:3] = [2.0 ** 24, 2.0 ** 25, 1.0]
    y[:3] = [3.0, 1.0, 2.0 ** 24]
    s = np.nextafter(x + y, np.float32(-np.inf))
    assert (s.astype(np.float64) <= x.astype(np.float64) + y).all()


@pytest.mark.parametrize("seed", range(6))
def test_the_window_smallest_peak_is_brute_force(seed):
    """`_min_peak` with ``W``: the least peak over every schedule whose
    checkpoints span at most ``W`` layers (all schedules of up to 5 layers)."""
    rng = np.random.default_rng(800 + seed)
    n = int(rng.integers(1, 6))
    profile = random_profile(rng, n, unit=4)
    scheds = [NestedSchedule(n=n, items=items)
              for items in enumerate_schedules(n)]
    peaks = [schedule_peak(profile, s) for s in scheds]
    spans = [max((e - b for b, e, _ in s.checkpoints), default=0)
             for s in scheds]
    for W in range(1, n + 1):
        assert _min_peak(profile, W) == min(
            p for p, w in zip(peaks, spans) if w <= W)
    assert _min_peak(profile, n) == _min_peak(profile) == min(peaks)


@pytest.mark.parametrize("seed", range(12))
def test_the_window_peak_decides_whether_a_window_fits(seed):
    """A pass with windows of ``W`` finds a schedule on the exact grid iff
    ``_min_peak(profile, W)`` fits the budget, and none on a coarse grid when
    it does not (rounded up, a schedule found fits in true bytes)."""
    rng = np.random.default_rng(900 + seed)
    profile = random_profile(rng, int(rng.integers(3, 11)),
                             unit=int(rng.choice([1, 4, 64])))
    costs = _costs(profile, None)
    smallest = _min_peak(profile)
    for W in (1, 2, 3):
        peak = _min_peak(profile, W)
        assert peak >= smallest
        for budget in sorted({smallest, peak - 1, peak, peak + 7}):
            if budget < smallest:
                continue
            exact, _ = _windowed_rotor(profile, costs, budget, W,
                                       work=10 ** 15)  # the gcd grid
            assert (exact is None) == (peak > budget)
            if exact is not None:
                sched = NestedSchedule(n=profile.n, items=exact)
                assert schedule_peak(profile, sched) <= budget
                assert all(e - b <= W for b, e, _ in sched.checkpoints)
            coarse, low = _windowed_rotor(profile, costs, budget, W, work=500,
                                          bound=False, probe=False)
            assert low == 0.0
            if peak > budget:
                assert coarse is None


@pytest.mark.parametrize("seed", range(8))
def test_rotor_skips_the_windows_that_cannot_fit(seed, monkeypatch):
    """Near the smallest peak `rotor` runs no window pass whose smallest peak
    is over the budget, and then the whole table on a finer grid: the schedule
    fits, and the bound is at most the exact optimum."""
    rng = np.random.default_rng(1100 + seed)
    profile, w = _random_long_path(rng, monkeypatch, 5, 2)
    calls = []
    real = nested._windowed_rotor

    def spy(profile, costs, cap, W, *args, **kwargs):
        calls.append((cap, W))
        return real(profile, costs, cap, W, *args, **kwargs)
    monkeypatch.setattr(nested, "_windowed_rotor", spy)
    smallest = _min_peak(profile)
    deep = 0
    for budget in sorted({smallest, smallest + 4, _min_peak(profile, w),
                          _min_peak(profile, w + 2)}):
        calls.clear()
        s = P.rotor(profile, budget_bytes=budget)
        exact = rotor_reference(profile, budget)
        assert all(_min_peak(profile, W) <= cap for cap, W in calls)
        assert {W for _, W in calls} == {
            W for W in (w, w + 2) if _min_peak(profile, W) <= budget}
        deep += _min_peak(profile, w) > budget
        assert schedule_peak(profile, s) == s.predicted_peak_activations \
            <= budget
        assert s.recompute_cost >= exact
        assert s.lower_bound_cost is None and s.recompute_cost == exact or \
            s.lower_bound_cost <= exact
    assert deep or _min_peak(profile, w) == smallest


@pytest.mark.parametrize("seed", range(10))
def test_spliced_schedules_fit_and_improve(seed):
    rng = np.random.default_rng(1200 + seed)
    profile = random_profile(rng, int(rng.integers(4, 12)), unit=4)
    a, si, so, own = nested._chain_arrays(profile)
    costs = _costs(profile, None)
    tables = nested._min_peak_tables(profile)
    W = int(rng.integers(1, 4))
    for budget in _budgets(rng, profile)[:3]:
        exact = rotor_reference(profile, budget)
        S = int(rng.integers(4, 40))
        guide = _Dense(([v * S // budget for v in a], si, so,
                        [v * S // budget for v in own]), costs, S,
                       down32=True, floor=_feasible_floor(profile, S, budget))
        guided = _min_peak_items(profile, budget, guide, (S, budget), tables)
        windowed, low, (up, unit) = _windowed_rotor(
            profile, costs, budget, W, work=int(rng.integers(200, 3000)),
            bound=False, probe=False, keep=True)
        assert low == 0.0
        if windowed is None:
            continue
        assert up.build(budget // unit) == windowed
        items, work = _splice(profile, costs, budget, guided, windowed, up,
                              unit, guide, (S, budget), tables, tries=3)
        sched = NestedSchedule(n=profile.n, items=items)
        assert schedule_peak(profile, sched) <= budget
        assert work == _work(profile, items) >= exact
        assert work <= min(_work(profile, guided), _work(profile, windowed))
        # the states between top-level items: the recurrence's bytes (at
        # the end of forward, with the loss's: the held set, at most the peak)
        s, h, used, done = nested._top_states(profile, items, costs)[-1]
        assert s == profile.n and done == work
        assert used + tables[1][h][profile.n] <= schedule_peak(profile, sched)


@pytest.mark.parametrize("seed", range(6))
def test_the_top_level_alone_rejects_only_what_does_not_fit(seed):
    """`_Windowed.build` with ``inner=False``: the same top level, and the
    bytes held at the end of forward it gives (`_top_states`, the loss's
    added) are at most the schedule's peak: `_windowed_rotor` rejects a grid
    point on them only when the schedule does not fit."""
    rng = np.random.default_rng(1300 + seed)
    profile = random_profile(rng, int(rng.integers(4, 12)), unit=4)
    a, si, so, own = nested._chain_arrays(profile)
    costs = _costs(profile, None)
    _, d = nested._min_peak_tables(profile)
    unit = int(rng.integers(1, 9)) * 4
    S = _store_all(profile) // unit + 8
    up = nested._Windowed(([-(-v // unit) for v in a], si, so,
                           [-(-v // unit) for v in own]), costs, S,
                          int(rng.integers(1, 4)), codes=True)
    for m in range(S + 1):
        if up.top[m] == np.inf:
            continue
        full, top = up.build(m), up.build(m, inner=False)
        assert [(type(x), getattr(x, "start", None), getattr(x, "stop", None))
                for x in full] == [
            (type(x), getattr(x, "start", None), getattr(x, "stop", None))
            for x in top]
        _, h, used, _ = nested._top_states(profile, top, costs)[-1]
        peak = schedule_peak(profile, NestedSchedule(n=profile.n, items=full))
        assert used + d[h][profile.n] <= peak
        if not any(isinstance(x, nested.Checkpointed) for x in top):
            assert used + d[h][profile.n] == peak  # all taped: exactly
