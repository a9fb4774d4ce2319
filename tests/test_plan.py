"""minigrad.plan on numbers alone: plans, the memory model, the DP against brute force.

The engine-level checks (a plan executed for real gives the predicted peak)
live in tests/test_exhaustive.py.
"""
import math
import random
import time
from fractions import Fraction

import pytest

from minigrad import plan as P
from plan_references import optimal_segments_reference
from minigrad.plan import ChainProfile

from chains import segmentations


# --- uniform / sqrt / explicit -------------------------------------------------------

def test_uniform_matches_torch_split():
    # torch.utils.checkpoint.checkpoint_sequential: segment_size = n // segments,
    # checkpointed segments start at 0, size, 2*size, ...; the last one takes the rest.
    for n in range(1, 40):
        for k in range(1, n + 1):
            plan = P.uniform(n, k)
            size = n // k
            assert plan.starts == tuple(range(0, size * k, size))[:k]
            assert len(plan.starts) == k and plan.n == n
            assert sum(b - a for a, b in plan.segments) == n


def test_sqrt_segments_is_balanced_with_ceil_sqrt_n_segments():
    for n in range(1, 1001):
        plan = P.sqrt_segments(n)
        k = math.ceil(math.sqrt(n))
        assert len(plan.starts) == k
        lengths = [b - a for a, b in plan.segments]
        assert max(lengths) - min(lengths) <= 1  # balanced
        assert lengths == sorted(lengths, reverse=True)  # longer first
        assert max(lengths) <= k and sum(lengths) == n


@pytest.mark.parametrize("k", [0, -1, 11])
def test_uniform_rejects_bad_segment_counts(k):
    with pytest.raises(ValueError, match=r"1 <= segments <= 10"):
        P.uniform(10, k)


@pytest.mark.parametrize("starts,msg", [([], "begin with 0"), ([1, 3], "begin with 0"),
                                        ([0, 3, 3], "strictly increasing"), ([0, 10], "< n=10")])
def test_explicit_rejects_bad_starts(starts, msg):
    with pytest.raises(ValueError, match=msg):
        P.explicit(10, starts)


def test_segment_plan_actions_count_calls():
    plan = P.explicit(7, [0, 2, 5])
    acts = plan.actions
    advanced = sum(a[2] - a[1] for a in acts if a[0] == "advance")
    taped = sum(1 for a in acts if a[0] == "tape")
    # layers 0..4 run untaped in forward and taped in their recomputation; 5, 6 taped once
    assert advanced == 5 and taped == 7
    assert plan.n_layer_calls == advanced + taped == 12
    assert [a for a in acts if a[0] == "reverse"] == [("reverse", i) for i in (6, 5, 4, 3, 2, 1, 0)]


# --- the memory model against a set-based evaluation --------------------------------

def _random_profile(rng, n, loss=None, floats=False):
    # a third of the chains begin with layers whose outputs need no grad
    f = rng.randint(0, n) if rng.random() < 1 / 3 else 0
    loss = rng.random() < 0.5 if loss is None else loss
    return ChainProfile(
        input_bytes=tuple(rng.choice([4, 8, 16, 64, 100, 256, 1024]) for _ in range(n)),
        output_bytes=rng.choice([4, 64, 512]),
        saves_input=tuple(rng.random() < 0.6 for _ in range(n)),
        saves_output=tuple(rng.random() < 0.4 for _ in range(n)),
        own_bytes=tuple(rng.choice([0, 0, 8, 128, 512, 4096]) for _ in range(n)),
        cost=tuple((rng.randint(0, 5) * 0.3 if floats else rng.randint(0, 5)) for _ in range(n)),
        requires_grad=tuple(b >= f for b in range(n + 1)),
        loss_saves_input=loss and rng.random() < 0.7,
        loss_own_bytes=rng.choice([0, 8, 512, 2048]) if loss else 0,
    )


def _reference_cost(pr, starts):
    """Layers of checkpointed segments whose output requires grad (those make a node)."""
    bounds = list(starts) + [pr.n]
    rg = pr.requires_grad or (True,) * (pr.n + 1)
    total = sum(Fraction(c) for j in range(len(starts) - 1) if rg[bounds[j + 1]]
                for c in pr.cost[bounds[j]:bounds[j + 1]])
    # exact, then as the planner returns it: an int for int costs, else the nearest float
    return int(total) if all(isinstance(c, int) for c in pr.cost) else float(total)


def _reference_peak(pr, starts):
    """Same model, written with explicit sets of named arrays (the union is literal)."""
    n = pr.n
    size = {("x", b): pr.input_bytes[b] for b in range(n)}
    size[("x", n)] = pr.output_bytes
    size.update({("own", i): pr.own_bytes[i] for i in range(n)})

    def saved(i):
        s = {("own", i)}
        if pr.saves_input[i]:
            s.add(("x", i))
        if pr.saves_output[i]:
            s.add(("x", i + 1))
        return s

    bounds = list(starts) + [n]
    rg = pr.requires_grad or (True,) * (n + 1)
    kept, terms = set(), []
    for j in range(len(starts) - 1):  # recomputation of checkpointed segment j
        if not rg[bounds[j + 1]]:
            continue  # its output needs no grad: no checkpoint node, nothing kept
        live = kept | {("x", bounds[j])}
        for i in range(bounds[j], bounds[j + 1]):
            live |= saved(i)
        terms.append(sum(size[k] for k in live))
        kept.add(("x", bounds[j]))
    live = set(kept)  # end of forward: last segment taped, then the loss
    for i in range(starts[-1], n):
        live |= saved(i)
    if pr.loss_saves_input:
        live.add(("x", n))
    size[("loss",)] = pr.loss_own_bytes
    live.add(("loss",))
    terms.append(sum(size[k] for k in live))
    return max(terms)



def test_the_brute_force_lists_every_segmentation_once():
    # the helper every brute-force test trusts: 2^(n-1) distinct plans, each a valid
    # set of starts (0 first, increasing, below n)
    for n in range(1, 9):
        every = list(segmentations(n))
        assert len(every) == len(set(every)) == 2 ** (n - 1)
        assert all(s[0] == 0 and list(s) == sorted(set(s)) and s[-1] < n for s in every)
    assert list(segmentations(3)) == [(0,), (0, 1), (0, 2), (0, 1, 2)]
    with pytest.raises(ValueError, match="at least one layer"):
        list(segmentations(0))


def test_predict_peak_equals_set_model():
    rng = random.Random(1)
    for _ in range(100):
        pr = _random_profile(rng, rng.randint(1, 8))
        for starts in segmentations(pr.n):
            assert P.predict_peak(pr, starts) == _reference_peak(pr, starts)
            assert P.recompute_cost(pr, starts) == _reference_cost(pr, starts)


def test_no_checkpointing_keeps_everything_saved():
    pr = ChainProfile(input_bytes=(10, 20, 30), output_bytes=40, saves_input=(True, True, True),
                      saves_output=(False, False, True), own_bytes=(1, 2, 3), cost=(1, 1, 1))
    assert P.predict_peak(pr, [0]) == 10 + 20 + 30 + 40 + 1 + 2 + 3
    # checkpoint layer 0 alone: forward ends with x_0 kept + layers 1,2 taped;
    # its recomputation holds x_0 + layer 0's arrays only.
    assert P.predict_peak(pr, [0, 1]) == max(10 + (20 + 30 + 40 + 2 + 3), 10 + 1)
    assert P.recompute_cost(pr, [0, 1]) == 1 and P.recompute_cost(pr, [0]) == 0


# --- the DP against brute force ------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_optimal_segments_is_minimal(seed):
    rng = random.Random(seed)
    for _ in range(40):
        pr = _random_profile(rng, rng.randint(1, 9), floats=seed % 2 == 1)
        table = [(_reference_peak(pr, s), _reference_cost(pr, s), s) for s in segmentations(pr.n)]
        best = min(t[0] for t in table)
        plan = P.optimal_segments(pr)
        assert plan.predicted_peak_activations == best
        assert plan.predicted_peak_activations == P.predict_peak(pr, plan.starts)
        # among the minimal-peak plans, the least recomputation
        assert plan.recompute_cost == min(c for p, c, _ in table if p == best)

        budget = rng.choice([t[0] for t in table]) + rng.choice([0, 0, 3])
        within = [(c, p) for p, c, _ in table if p <= budget]
        pb = P.optimal_segments(pr, budget_bytes=budget)
        assert pb.predicted_peak_activations <= budget
        assert pb.recompute_cost == min(c for c, _ in within)
        assert pb.predicted_peak_activations == min(p for c, p in within if c == pb.recompute_cost)

        # the reference DP (the recurrence, as written) finds the same optimum
        ref = optimal_segments_reference(pr)
        assert (ref.predicted_peak_activations, ref.recompute_cost) == \
            (plan.predicted_peak_activations, plan.recompute_cost)
        ref_b = optimal_segments_reference(pr, budget_bytes=budget)
        assert (ref_b.predicted_peak_activations, ref_b.recompute_cost) == \
            (pb.predicted_peak_activations, pb.recompute_cost)


def test_infeasible_budget_names_the_smallest_feasible_one():
    rng = random.Random(7)
    pr = _random_profile(rng, 8)
    best = min(P.predict_peak(pr, s) for s in segmentations(8))
    with pytest.raises(ValueError, match=rf"budget_bytes >= {best}\b"):
        P.optimal_segments(pr, budget_bytes=best - 1)
    assert P.optimal_segments(pr, budget_bytes=best).predicted_peak_activations == best
    with pytest.raises(ValueError, match="budget_bytes"):
        P.optimal_segments(pr, budget_bytes=-5)


def _pareto(points):
    front, best = [], float("inf")
    for cost, peak in sorted(set(points)):
        if peak < best:
            front.append((cost, peak))
            best = peak
    return front


@pytest.mark.parametrize("seed", range(4))
def test_frontier_points_span_the_pareto_front(seed):
    rng = random.Random(seed)
    for _ in range(10):
        pr = _random_profile(rng, rng.randint(1, 8))
        pts = P.min_peak_for_each_last_start(pr)
        for cost, peak, starts in pts:
            assert peak == _reference_peak(pr, starts) and cost == _reference_cost(pr, starts)
        every = [(_reference_cost(pr, s), _reference_peak(pr, s)) for s in segmentations(pr.n)]
        assert _pareto([(c, p) for c, p, _ in pts]) == _pareto(every)
        if pr.first_grad == 0:  # one point per last start, each the minimum for it
            assert sorted(s[-1] for _, _, s in pts) == list(range(pr.n))
            for _, peak, starts in pts:
                assert peak == min(_reference_peak(pr, s) for s in segmentations(pr.n)
                                   if s[-1] == starts[-1])


def test_thousand_layers_planned_in_under_a_second():
    rng = random.Random(0)
    n = 1000
    pr = ChainProfile(
        input_bytes=tuple(rng.choice([4096, 8192, 65536]) for _ in range(n)), output_bytes=4096,
        saves_input=tuple(rng.random() < 0.6 for _ in range(n)),
        saves_output=tuple(rng.random() < 0.4 for _ in range(n)),
        own_bytes=tuple(rng.choice([0, 0, 8192, 131072]) for _ in range(n)),
        cost=tuple(rng.randint(1, 5) for _ in range(n)))
    t0 = time.process_time()  # CPU time: other processes on the machine do not count
    plan = P.optimal_segments(pr)
    elapsed = time.process_time() - t0
    assert elapsed < 1.0, f"planning 1000 layers took {elapsed:.2f} s of CPU time"
    # sanity against the uniform sqrt(n) plan: the optimum cannot be worse
    assert plan.predicted_peak_activations <= P.predict_peak(pr, P.sqrt_segments(n).starts)
    assert plan.predicted_peak_activations == P.predict_peak(pr, plan.starts)


def test_homogeneous_chain_optimum_is_near_sqrt_n():
    # Chen et al.: with equal layers the best one-level plan holds O(sqrt n) layers' worth.
    n = 100
    pr = ChainProfile(input_bytes=(100,) * n, output_bytes=100, saves_input=(True,) * n,
                      saves_output=(False,) * n, own_bytes=(0,) * n, cost=(1,) * n)
    plan = P.optimal_segments(pr)
    assert plan.predicted_peak_activations <= 2 * math.isqrt(n) * 100 + 100
    assert P.predict_peak(pr, [0]) == n * 100
    assert 7 <= len(plan.starts) <= 14


def test_revolve_is_reexported():
    assert isinstance(P.revolve(10, 3), P.RevolvePlan) and P.revolve(10, 3).n == 10
    with pytest.raises(ValueError, match=r"1 <= slots"):
        P.revolve(10, 0)


def test_profile_validates_requires_grad():
    kw = dict(input_bytes=(4, 4), output_bytes=4, saves_input=(True, True), saves_output=(False, False),
              own_bytes=(0, 0), cost=(1, 1))
    with pytest.raises(ValueError, match="does not require grad"):
        ChainProfile(requires_grad=(False, False, False), **kw)
    with pytest.raises(ValueError, match="stay True"):
        ChainProfile(requires_grad=(True, False, True), **kw)
    with pytest.raises(ValueError, match="n \\+ 1 = 3"):
        ChainProfile(requires_grad=(True, True), **kw)
    assert ChainProfile(requires_grad=(False, False, True), **kw).first_grad == 2


# --- float costs, bad profiles -------------------------------------------------------------
def test_float_costs_are_summed_exactly_not_truncated():
    # A 0.9 s-per-layer cost used to become int64 0 per layer.
    n = 6
    pr = ChainProfile(input_bytes=(100,) * n, output_bytes=100, saves_input=(True,) * n,
                      saves_output=(False,) * n, own_bytes=(50,) * n, cost=(0.9,) * n)
    assert P.recompute_cost(pr, [0, 3]) == pytest.approx(2.7) and isinstance(P.recompute_cost(pr, [0, 3]), float)
    assert P.recompute_cost(pr, [0, 1, 2, 3, 4, 5]) == pytest.approx(4.5)
    budget = P.predict_peak(pr, [0, 3])
    plan = P.optimal_segments(pr, budget_bytes=budget)
    assert plan.recompute_cost == min(P.recompute_cost(pr, s) for s in segmentations(n)
                                      if P.predict_peak(pr, s) <= budget)
    assert plan.recompute_cost > 0
    ints = ChainProfile(**{**pr.__dict__, "cost": (1,) * n})
    assert isinstance(P.recompute_cost(ints, [0, 3]), int)
    # costs given to optimal_segments replace the profile's
    assert P.optimal_segments(pr, budget_bytes=budget, cost=[2] * n).recompute_cost == 2 * 3


@pytest.mark.parametrize("field, value, msg", [
    ("cost", (1, float("nan")), r"cost\[1\] = nan is not a finite"),
    ("cost", (1, float("inf")), r"cost\[1\] = inf is not a finite"),
    ("cost", (1, -2), r"cost\[1\] = -2 is not a finite, non-negative"),
    ("cost", (1, "3"), r"cost\[1\] = '3' is not a number"),
    ("input_bytes", (4, 4.5), r"input_bytes\[1\] = 4.5 is not a whole"),
    ("own_bytes", (0, -1), r"own_bytes\[1\] = -1"),
    ("cost", (1,), "cost has 1 entries, expected n=2"),
])
def test_profile_rejects_bad_numbers(field, value, msg):
    kw = dict(input_bytes=(4, 4), output_bytes=4, saves_input=(True, True),
              saves_output=(False, False), own_bytes=(0, 0), cost=(1, 1))
    kw[field] = value
    with pytest.raises(ValueError, match=msg):
        ChainProfile(**kw)


def test_budget_must_be_whole_bytes():
    pr = _random_profile(random.Random(3), 5)
    with pytest.raises(TypeError, match="budget_bytes must be an integer"):
        P.optimal_segments(pr, budget_bytes=1000.5)


def test_plans_for_another_chain_are_refused():
    pr = _random_profile(random.Random(4), 5)
    with pytest.raises(ValueError, match="n=6 layers, the profile has 5"):
        P.predict_peak(pr, P.uniform(6, 2))
    with pytest.raises(ValueError, match="n=6 layers, the profile has 5"):
        P.recompute_cost(pr, P.revolve(6, 2))


# The sqrt(n) theorem for every n <= 512 (predicted; measured where the segments change): tests/test_sqrt_theorem.py.


def test_balanced_and_uniform_splits():
    assert P.balanced(10, 3).starts == (0, 4, 7)
    assert P.uniform(10, 3).starts == (0, 3, 6)
    assert P.balanced(10, 10).starts == tuple(range(10))
    with pytest.raises(ValueError, match=r"1 <= segments <= 10"):
        P.balanced(10, 11)
    with pytest.raises(TypeError, match="segments must be an integer, got 2.5"):
        P.uniform(10, 2.5)


def test_segment_plan_validates_itself():
    with pytest.raises(TypeError, match="segment starts must be integers, got 1.7"):
        P.SegmentPlan(n=4, starts=(0, 1.7))
    with pytest.raises(ValueError, match="begin with 0"):
        P.SegmentPlan(n=4, starts=(1, 2))


def test_cost_names_and_plans_are_checked_with_a_profile_too():
    pr = ChainProfile((8, 8), 8, (True, True), (False, False), (0, 0), (1, 1))
    with pytest.raises(ValueError, match=r"optimal_segments: cost must be one of \['flops', 'ops'\]"):
        P.optimal_segments(pr, cost="seconds")
    with pytest.raises(ValueError, match=r"rotor: cost must be one of \['flops', 'ops'\]"):
        P.rotor(pr, cost="seconds")
    with pytest.raises(ValueError, match=r"rotor: cost\[0\] must be a finite number >= 0"):
        P.rotor(pr, cost=[-1, 1])
    with pytest.raises(ValueError, match="predict_peak: the plan is for n=3 layers, the profile has 2"):
        P.predict_peak(pr, P.uniform(3, 2))
    with pytest.raises(ValueError, match="recompute_cost: the schedule is for n=3 layers"):
        P.recompute_cost(pr, P.revolve(3, 2))
    with pytest.raises(TypeError, match="recompute_cost: plan must be a sequence of segment starts"):
        P.recompute_cost(pr, "0, 1")
    assert P.optimal_segments(pr, cost="ops") == P.optimal_segments(pr)  # a name: the profile's own
