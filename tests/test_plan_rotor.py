"""Multi-level checkpointing (minigrad.plan.rotor): the byte model, the solver, the
executor (``checkpoint_sequential`` walking a schedule's actions).

* every nested schedule of small random chains is executed under the byte ledger:
  its measured peak, recomputed ops and recomputed FLOPs equal the model's prediction
  (and ``plan.predict_peak``'s replay of its actions);
* the dynamic program equals brute force over all nested schedules for every budget
  (predicted on up to 6 layers, executed on up to 6), and its readable reference;
* the planned schedules give bit-identical gradients, never recompute more than the
  one-level optimum, and make the loss part of the step;
* under the ledger, equal-layer chains: the one-level plan beats Revolve at Revolve's
  own peak whenever it fits, the nested optimum always does.
"""
import math

import numpy as np
import pytest

from marks import fast_every

import minigrad
import minigrad.ops as F
from minigrad import memory, nn
from minigrad import plan as P
from minigrad.checkpoint import checkpoint_sequential
from minigrad.plan.nested import (Checkpointed, NestedSchedule, Taped, count_schedules,
                                 enumerate_schedules, from_revolve,
                                 from_segments, rotor_frontier, schedule_layer_calls,
                                 schedule_peak, schedule_recompute_cost)

from chains import random_chain
from plan_references import rotor_reference

from bookkit.schedule_comparison import plan_families


def measure(layers, x, sched, loss=None, seed=123):
    """Measured (peak saved-activation bytes, recomputed ops, recomputed FLOPs) of a step."""
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential(layers, sched, x)
        if loss is None:
            y.backward(np.ones(y.shape, dtype=y.dtype))
        else:
            loss(y).backward()
    # (the peak above what was alive before the step: the ledger's m.peak["activations"]
    # when nothing else holds activations, and robust to a failed test that still does)
    return m.peak["activations"] - m.start["activations"], m.ops("recompute"), m.flops["recompute"]


def predicted(profile, ops, sched):
    """The model's (peak, recomputed ops, recomputed FLOPs); ``ops``: the op-count profile."""
    return (schedule_peak(profile, sched), schedule_recompute_cost(ops, sched),
            schedule_recompute_cost(profile, sched))


def chain(seed, n, grad=True, batch=3, dtype=np.float32):
    rng = np.random.default_rng(seed)
    minigrad.random.manual_seed(seed)
    layers, width = random_chain(rng, n, dtype=dtype)
    x = minigrad.Tensor(rng.standard_normal((batch, width)).astype(dtype), requires_grad=grad)
    return layers, x


def prefix_chain(seed, n):
    """Parameter-free layers first, on an input without grad (they save nothing)."""
    rng = np.random.default_rng(200 + seed)
    minigrad.random.manual_seed(seed)
    lead = [nn.ReLU(), nn.Dropout(0.3), nn.GELU()][: 1 + seed % 3]
    rest, width = random_chain(rng, n - len(lead))
    return lead + rest, minigrad.Tensor(rng.standard_normal((3, width)).astype(np.float32))


def pareto(points):
    out, best = [], math.inf
    for m, c in sorted(points):
        if c < best:
            out.append((m, c))
            best = c
    return out


# --------------------------------------------------------------------------- the data
def test_schedule_is_plain_readable_data():
    s = NestedSchedule.from_nested(5, [(0, 3, [(0, 1, [0]), 1, 2]), 3, 4])
    assert str(s) == ("checkpoint [0, 3)\n    checkpoint [0, 1)\n        taped 0\n    taped 1\n"
                      "    taped 2\ntaped 3\ntaped 4")
    assert s.nested == [(0, 3, [(0, 1, [0]), 1, 2]), 3, 4]
    assert NestedSchedule.from_nested(5, s.nested) == s
    assert s.depth == 2 and s.checkpoints == [(0, 3, 1), (0, 1, 2)]
    assert s.items[0] == Checkpointed(0, 3, (Checkpointed(0, 1, (Taped(0),)), Taped(1), Taped(2)))
    # the executor's steps, in the vocabulary of the other plans
    assert s.actions == (("snapshot", 0), ("advance", 0, 3), ("tape", 3), ("tape", 4), ("reverse", 4),
                         ("reverse", 3), ("restore", 0), ("advance", 0, 1), ("tape", 1), ("tape", 2),
                         ("reverse", 2), ("reverse", 1), ("restore", 0), ("tape", 0), ("reverse", 0),
                         ("free", 0))
    assert from_segments(6, [0, 2, 4]).actions == P.explicit(6, [0, 2, 4]).actions
    assert P.rotor is not None and P.NestedSchedule is NestedSchedule  # exported as plan.rotor


@pytest.mark.parametrize("spec,msg", [
    ([1, 0, 2], "out of order"),
    ([(0, 2, [(0, 2, [0, 1])]), 2], "recomputes itself"),
    ([(0, 2, [0]), 2], r"covers layers 0 \.\. 0"),
    ([0, (1, 4, [1, 2, 3])], "out of order"),
    ([0, 1], r"covers layers 0 \.\. 1, expected 0 \.\. 2"),
    (["a"], "an int"),
])
def test_bad_schedules_are_named(spec, msg):
    with pytest.raises(ValueError, match=msg):
        NestedSchedule.from_nested(3, spec)


def test_bad_input_is_named():
    layers, x = chain(0, 3)
    with pytest.raises(ValueError, match="n=4 layers but 3"):
        checkpoint_sequential(layers, from_segments(4, [0, 2]), x)
    with pytest.raises(ValueError, match=r"x .* is required"):
        P.rotor(layers)
    profile = P.profile_chain(layers, x)
    smallest = P.rotor(profile).predicted_peak_activations
    with pytest.raises(ValueError, match=rf"budget_bytes >= {smallest}"):
        P.rotor(profile, budget_bytes=smallest - 1)
    with pytest.raises(ValueError, match="out of range"):
        P.rotor(profile, budget_bytes=-5)
    with pytest.raises(TypeError, match="must be an integer"):
        P.rotor(profile, budget_bytes=100.5)
    with pytest.raises(ValueError, match="one per layer"):
        P.rotor(profile, cost=[1, 2])
    with pytest.raises(ValueError, match="finite number >= 0"):
        P.rotor(profile, cost=[1, float("nan"), 2])
    with pytest.raises(ValueError, match="cost must be one of"):
        P.rotor(layers, x, cost="seconds")
    with pytest.raises(ValueError, match="the schedule is for n=2 layers, the profile has 3"):
        schedule_peak(profile, from_segments(2, [0]))
    with pytest.raises(ValueError, match="rotor: a ChainProfile already includes its loss"):
        P.rotor(profile, loss=lambda y: y.sum())


def test_schedule_count():
    for n in range(1, 6):
        assert sum(1 for _ in enumerate_schedules(n)) == count_schedules(n)
    assert [count_schedules(n) for n in range(1, 7)] == [2, 8, 48, 352, 2880, 25216]
    assert len(set(enumerate_schedules(4))) == 352  # all distinct


@pytest.mark.parametrize("seed", range(4))
def test_one_level_and_revolve_are_nested_schedules(seed):
    layers, x = chain(seed, 9, grad=bool(seed % 2))
    profile = P.profile_chain(layers, x)
    for starts in ([0], [0, 3], [0, 1, 5, 8], list(range(9))):
        s = from_segments(9, starts)
        assert schedule_peak(profile, s) == P.predict_peak(profile, starts)
        assert schedule_recompute_cost(profile, s) == P.recompute_cost(profile, starts)
    for slots in range(1, 8):
        rev = P.revolve(9, slots)
        s = from_revolve(rev)
        assert s.actions == tuple(_revolve_as_tape_reverse(rev.actions))
        assert schedule_peak(profile, s) == P.predict_peak(profile, rev)
        assert schedule_layer_calls(profile, s) == rev.n_layer_calls


def _revolve_as_tape_reverse(actions):
    # revolve's ("taped", i) is a taped run reversed at once
    for a in actions:
        yield from ((("tape", a[1]), ("reverse", a[1])) if a[0] == "taped" else (a,))


# --------------------------------------------------------------------------- model vs ledger
@pytest.mark.parametrize("seed,n,kind", fast_every([(0, 4, "grad"), (1, 4, "nograd"), (2, 4, "grad"),
                                                    (4, 4, "prefix"), (5, 5, "prefix")], 3))
def test_every_nested_schedule_is_predicted_exactly(seed, n, kind):
    layers, x = prefix_chain(seed, n) if kind == "prefix" else chain(seed, n, grad=kind == "grad")
    profile = P.profile_chain(layers, x)
    ops = P.profile_chain(layers, x, cost="ops")
    if kind == "prefix":
        assert profile.first_grad >= 2
    for items in enumerate_schedules(n):
        s = NestedSchedule(n=n, items=items)
        expected = predicted(profile, ops, s)
        assert measure(layers, x, s) == expected, (s.nested, [type(layer).__name__ for layer in layers])
        # the replay of the actions (an independent implementation) agrees
        assert (P.predict_peak(profile, s), P.recompute_cost(profile, s)) == (expected[0], expected[2])


@pytest.mark.slow
def test_six_layers_exhaustive_executed():
    # All 25216 nested schedules of a 6-layer chain are predicted; the 2880 that tape the
    # last layer (the others recompute it at once, for nothing, when no loss follows)
    # run under the ledger. For every budget the solver finds the optimum of all of them,
    # measured. Widths change; layers save their input (Linear, GELU) or output (Tanh, ReLU).
    minigrad.random.manual_seed(0)
    layers = [nn.Linear(5, 9), nn.Tanh(), nn.Linear(9, 3), nn.ReLU(), nn.Linear(3, 7), nn.GELU()]
    x = minigrad.Tensor(np.ones((2, 5), np.float32), requires_grad=True)
    profile = P.profile_chain(layers, x)
    ops = P.profile_chain(layers, x, cost="ops")
    every, measured = [], []
    for items in enumerate_schedules(6):
        s = NestedSchedule(n=6, items=items)
        every.append((schedule_peak(profile, s), schedule_recompute_cost(profile, s)))
        if isinstance(items[-1], Taped):
            got = measure(layers, x, s)
            assert got == predicted(profile, ops, s), s.nested
            measured.append((got[0], got[2]))  # (peak bytes, recomputed FLOPs)
    assert (len(every), len(measured)) == (25216, 2880)
    front = pareto(measured)
    assert pareto(every) == front
    assert front[0][0] < P.optimal_segments(profile).predicted_peak_activations  # below one level
    for budget, best in front:
        plan = P.rotor(profile, budget_bytes=budget)
        assert (plan.predicted_peak_activations, plan.recompute_cost) == (budget, best)
        peak, _, flops = measure(layers, x, plan)
        assert (peak, flops) == (budget, best)
    assert sorted((m, c) for c, m, _ in rotor_frontier(profile)) == front


# --------------------------------------------------------------------------- solver vs brute force
@pytest.mark.parametrize("seed", fast_every(range(14), 7))
def test_solver_equals_brute_force_for_every_budget(seed):
    rng = np.random.default_rng(1000 + seed)
    n = 1 + seed % 6
    layers, x = prefix_chain(seed, max(n, 4)) if seed % 4 == 3 else chain(1000 + seed, n, grad=bool(seed % 2))
    loss = (lambda y: F.mse_loss(y, minigrad.Tensor(np.zeros(y.shape, np.float32)))) if seed % 5 == 1 else None
    profile = P.profile_chain(layers, x, loss=loss)
    n = profile.n
    costs = {0: None, 1: [int(c) for c in rng.integers(0, 6, size=n)],
             2: [float(c) for c in rng.uniform(0, 3, size=n)]}[seed % 3]
    points = []
    for items in enumerate_schedules(n):
        s = NestedSchedule(n=n, items=items)
        points.append((schedule_peak(profile, s), schedule_recompute_cost(profile, s, costs)))
    front = pareto(points)
    assert sorted((m, c) for c, m, _ in rotor_frontier(profile, cost=costs)) == front
    for budget in sorted({m for m, _ in points}):
        plan = P.rotor(profile, budget_bytes=budget, cost=costs)
        best = min(c for m, c in points if m <= budget)
        assert plan.recompute_cost == best  # exact, float costs included
        assert plan.predicted_peak_activations == min(m for m, c in points if c == best and m <= budget)
        assert rotor_reference(profile, budget, cost=costs) == best
    assert P.rotor(profile, cost=costs).predicted_peak_activations == front[0][0]
    assert rotor_reference(profile, front[0][0] - 1, cost=costs) == math.inf


@pytest.mark.parametrize("seed", range(4))
def test_reference_recurrence_equals_the_fast_solver(seed):
    layers, x = prefix_chain(seed, 9) if seed % 2 else chain(700 + seed, 9, grad=bool(seed % 3))
    profile = P.profile_chain(layers, x, cost="ops")
    for work, peak, _ in rotor_frontier(profile):
        assert rotor_reference(profile, peak) == work
        assert rotor_reference(profile, peak - 1) > work  # the front's steps are exact


# --------------------------------------------------------------------------- planned schedules
def test_a_forward_that_tapes_nothing():
    # Every layer checkpointed at the top level: the forward tapes nothing, the backward
    # starts by recomputing the last layers; gradients as without checkpointing.
    minigrad.random.manual_seed(2)
    layers = [nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)]
    x = minigrad.Tensor(np.ones((4, 3), np.float32), requires_grad=True)
    s = NestedSchedule.from_nested(3, [(0, 2, [0, 1]), (2, 3, [2])])
    assert not any(a[0] == "tape" for a in s.actions[:s.actions.index(("restore", 2))])
    y = checkpoint_sequential(layers, s, x)
    y.sum().backward()
    got = [x.grad.copy()] + [p.grad.copy() for layer in layers for p in layer.parameters()]
    for layer in layers:
        for p in layer.parameters():
            p.grad = None
    x2 = minigrad.Tensor(x.data.copy(), requires_grad=True)
    h = x2
    for layer in layers:
        h = layer(h)
    h.sum().backward()
    want = [x2.grad] + [p.grad for layer in layers for p in layer.parameters()]
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    profile = P.profile_chain(layers, x)
    assert measure(layers, x, s)[0] == schedule_peak(profile, s) == P.predict_peak(profile, s)


@pytest.mark.parametrize("seed", range(5))
def test_gradients_bit_identical_and_peak_as_predicted(seed):
    n = 8 + seed
    layers, x = chain(50 + seed, n, grad=bool(seed % 2), dtype=np.float64 if seed == 4 else np.float32)
    profile = P.profile_chain(layers, x)

    def grads(run):
        for layer in layers:
            for p in layer.parameters():
                p.grad = None
        xx = minigrad.Tensor(x.data.copy(), requires_grad=x.requires_grad)
        minigrad.random.manual_seed(7)
        y = run(xx)
        y.backward(np.ones(y.shape, dtype=y.dtype))
        out = [p.grad.copy() for layer in layers for p in layer.parameters()]
        return out + ([xx.grad.copy()] if xx.requires_grad else [])

    def plain(h):
        for layer in layers:
            h = layer(h)
        return h

    reference = grads(plain)
    lowest = P.rotor(profile).predicted_peak_activations
    one_level = P.optimal_segments(profile).predicted_peak_activations
    store_all = P.predict_peak(profile, [0])
    assert lowest < one_level  # the nested schedules go below one level here
    for budget in sorted({lowest, (lowest + one_level) // 2, one_level, (one_level + store_all) // 2}):
        plan = P.rotor(layers, x, budget_bytes=budget)  # FLOPs, the default
        peak, _, flops = measure(layers, x, plan, seed=7)
        assert peak == plan.predicted_peak_activations <= budget
        assert flops == plan.recompute_cost
        got = grads(lambda h: checkpoint_sequential(layers, plan, h))
        assert len(got) == len(reference) and all(np.array_equal(a, b) for a, b in zip(got, reference))


@pytest.mark.parametrize("seed", range(6))
def test_never_more_recomputation_than_one_level(seed):
    layers, x = prefix_chain(seed, 10 + seed) if seed % 3 == 2 else chain(80 + seed, 10 + seed, grad=bool(seed % 2))
    loss = (lambda y: F.mse_loss(y, minigrad.Tensor(np.zeros(y.shape, np.float32)))) if seed % 2 else None
    profile = P.profile_chain(layers, x, loss=loss)
    nested_min = P.rotor(profile).predicted_peak_activations
    for cost, peak, starts in P.min_peak_for_each_last_start(profile):
        one = P.optimal_segments(profile, budget_bytes=peak)
        plan = P.rotor(profile, budget_bytes=peak)
        assert plan.recompute_cost <= one.recompute_cost <= cost
        assert plan.predicted_peak_activations <= peak
        assert nested_min <= peak


@pytest.mark.parametrize("kind", ["mse", "cross_entropy"])
def test_loss_is_part_of_the_step(kind):
    # A loss that saves what it needs (MSE the difference, cross-entropy the softmax):
    # every schedule of a short chain, executed with the loss, peaks as predicted, and the
    # solver finds the measured optimum for every budget.
    minigrad.random.manual_seed(4)
    layers = [nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 8), nn.Linear(8, 40)]
    x = minigrad.Tensor(np.ones((3, 6), np.float32))
    if kind == "mse":
        target = minigrad.Tensor(np.ones((3, 40), np.float32))
        loss = lambda y: F.mse_loss(y, target)  # noqa: E731
    else:
        target = minigrad.Tensor(np.array([1, 7, 30]))
        loss = lambda y: F.cross_entropy(y, target)  # noqa: E731
    profile = P.profile_chain(layers, x, loss=loss)
    ops = P.profile_chain(layers, x, loss=loss, cost="ops")
    assert profile.loss_own_bytes >= 3 * 40 * 4  # as large as the output, at least
    measured = []
    for items in enumerate_schedules(4):
        s = NestedSchedule(n=4, items=items)
        got = measure(layers, x, s, loss=loss)
        assert got == predicted(profile, ops, s), s.nested
        assert P.predict_peak(profile, s) == got[0]  # the replay counts the loss before recomputing
        measured.append((got[0], got[2], isinstance(items[-1], Checkpointed)))
    front = pareto([m[:2] for m in measured])
    for budget, best in front:
        plan = P.rotor(layers, x, budget_bytes=budget, loss=loss)
        peak, _, flops = measure(layers, x, plan, loss=loss)
        assert (peak, flops) == (plan.predicted_peak_activations, plan.recompute_cost) == (budget, best)
    # with the loss in the step, checkpointing the last layers pays: the smallest peak
    # needs it (the loss's arrays and the last layer's are then never alive together)
    assert all(last for peak, work, last in measured if peak == front[0][0])


def test_frontier_families_share_one_plane():
    layers, x = chain(31, 10)
    profile = P.profile_chain(layers, x)
    families = plan_families(profile)
    assert list(families) == ["store all", "sqrt(n)", "segment plans", "Revolve", "rotor"]
    assert families["store all"][0][:2] == (0, P.predict_peak(profile, [0]))
    for name, points in families.items():
        for work, peak, plan in points:
            assert (P.recompute_cost(profile, plan), P.predict_peak(profile, plan)) == (work, peak), name
            # the nested optimum is on or below every plan of no more work
            assert min(m for c, m, _ in families["rotor"] if c <= work) <= peak, name
    # each is executed as predicted
    for name in families:
        work, peak, plan = families[name][-1]
        measured_peak, _, flops = measure(layers, x, plan)
        assert (measured_peak, flops) == (peak, work), name


# --------------------------------------------------------------------------- Revolve, said precisely
def equal_layers(n, width=8, batch=4):
    """n equal Linear layers: each saves only its input, one boundary's bytes."""
    minigrad.random.manual_seed(n)
    layers = [nn.Linear(width, width) for _ in range(n)]
    return layers, minigrad.Tensor(np.ones((batch, width), np.float32), requires_grad=True)


def test_revolve_against_one_level_and_rotor_at_its_own_peak():
    # Measured for n = 2 .. 9 and every slot count: at the peak
    # Revolve measures, the one-level plan (when one fits) and the nested optimum.
    cases = feasible = one_less = rotor_less = 0
    for n in range(2, 10):
        layers, x = equal_layers(n)
        profile = P.profile_chain(layers, x)
        for slots in range(1, n):
            rev = from_revolve(P.revolve(n, slots))
            peak, rev_calls, _ = measure(layers, x, rev)
            assert rev_calls == P.revolve(n, slots).n_untaped_forward_steps  # Revolve re-runs every step
            nested = P.rotor(profile, budget_bytes=peak, cost=[1] * n)
            assert measure(layers, x, nested)[:2] == (nested.predicted_peak_activations, nested.recompute_cost)
            assert nested.recompute_cost < rev_calls
            rotor_less += 1
            try:
                one = P.optimal_segments(profile, budget_bytes=peak)
            except ValueError:
                pass
            else:
                feasible += 1
                one_calls = measure(layers, x, one)[1]
                one_less += one_calls < rev_calls
                assert nested.recompute_cost <= one_calls
            cases += 1
    assert (cases, feasible) == (36, 27)
    assert one_less == feasible and rotor_less == cases
    # the example: n = 5, s = 2
    layers, x = equal_layers(5)
    peak, rev_calls, _ = measure(layers, x, from_revolve(P.revolve(5, 2)))
    one = P.optimal_segments(layers, x, budget_bytes=peak, cost="ops")
    assert (rev_calls, measure(layers, x, one)[1]) == (6, 3)


def test_a_schedule_nested_1000_levels_deep_needs_no_recursion():
    import sys
    from minigrad.plan.nested import NestedSchedule
    n = 1000
    spec = [n - 1]
    for i in reversed(range(n - 1)):  # checkpoint [i, n): tape i, then the rest nested
        spec = [(i, n, [i] + spec)] if i else [i] + spec
    from minigrad.plan.chain import ChainProfile
    from minigrad.plan.nested import (schedule_layer_calls, schedule_peak,
                                      schedule_recompute_cost)
    profile = ChainProfile(input_bytes=tuple(4 * (i % 7 + 1) for i in range(n)),
                           output_bytes=8, saves_input=(True,) * n,
                           saves_output=(False,) * n, own_bytes=(12,) * n,
                           cost=tuple(i % 5 for i in range(n)))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(400)  # well below the nesting: nothing below may recurse
    try:
        s = NestedSchedule.from_nested(n, spec)
        depth, nested, text = s.depth, s.nested, str(s)
        cps, actions, short = s.checkpoints, s.actions, repr(s)
        peak, work = schedule_peak(profile, s), schedule_recompute_cost(profile, s)
        calls, replayed = schedule_layer_calls(profile, s), P.predict_peak(profile, s)
    finally:
        sys.setrecursionlimit(old)
    assert peak == replayed  # the nesting's model and the actions' replay agree
    # checkpoints [i, n) for i = 1 .. n-2, each re-running its layers once
    assert work == sum(profile.cost[j] for i in range(1, n - 1) for j in range(i, n))
    assert calls == n + sum(n - i for i in range(1, n - 1))
    assert depth == n - 2 and len(cps) == n - 2 and cps[-1] == (n - 2, n, n - 2)
    assert text.count("\n") == len(cps) + n - 1 and len(short) < 200
    assert sum(a[0] == "reverse" for a in actions) == n
    assert sum(a[0] == "snapshot" for a in actions) == sum(a[0] == "free" for a in actions)
    flat, stack = [], [nested]
    while stack:  # the nested form holds every layer once
        for it in stack.pop():
            if isinstance(it, tuple):
                stack.append(it[2])
            else:
                flat.append(it)
    assert sorted(flat) == list(range(n))


def test_slots_bound_the_exact_optimum_from_both_sides():
    from minigrad import plan as P
    from minigrad.plan.chain import ChainProfile
    rng = np.random.default_rng(11)
    for n in (6, 9, 12):
        p = ChainProfile(input_bytes=tuple(int(4 * rng.integers(10, 500)) for _ in range(n)),
                         output_bytes=400, saves_input=tuple(bool(b) for b in rng.integers(0, 2, n)),
                         saves_output=tuple(bool(b) for b in rng.integers(0, 2, n)),
                         own_bytes=tuple(int(4 * rng.integers(0, 300)) for _ in range(n)),
                         cost=tuple(int(c) for c in rng.integers(1, 1000, n)), loss_saves_input=True)
        smallest = P.rotor(p).predicted_peak_activations
        for budget in (smallest, int(smallest * 1.3), int(smallest * 2)):
            exact = P.rotor(p, budget_bytes=budget)
            assert exact.optimal and exact.lower_bound_cost is None
            for slots in (8, 32, 128):
                try:
                    s = P.rotor(p, budget_bytes=budget, slots=slots)
                except ValueError:
                    continue  # rounding up leaves nothing that fits
                assert s.predicted_peak_activations <= budget
                low = s.recompute_cost if s.optimal else s.lower_bound_cost
                assert low <= exact.recompute_cost <= s.recompute_cost


def test_a_long_chain_gets_one_entry_point_and_a_proven_bound():
    from minigrad import plan as P
    from minigrad.plan.chain import ChainProfile
    rng = np.random.default_rng(0)
    n = 120
    p = ChainProfile(input_bytes=tuple(int(4 * rng.integers(100, 5000)) for _ in range(n)),
                     output_bytes=4000, saves_input=tuple(bool(b) for b in rng.integers(0, 2, n)),
                     saves_output=tuple(bool(b) for b in rng.integers(0, 2, n)),
                     own_bytes=tuple(int(4 * rng.integers(0, 3000)) for _ in range(n)),
                     cost=tuple(int(c) for c in rng.integers(100, 100000, n)), loss_saves_input=True)
    budget = int(0.3 * sum(p.input_bytes))
    s = P.rotor(p, budget_bytes=budget)  # exact grid too large: the long-chain path
    assert s.predicted_peak_activations <= budget
    # its proven bound (sizes rounded down, long checkpoints relaxed) is within 1 %
    assert s.lower_bound_cost is None or 0 < s.lower_bound_cost < s.recompute_cost
    assert s.optimal or s.recompute_cost - s.lower_bound_cost <= 0.01 * s.recompute_cost
    with_slots = P.rotor(p, budget_bytes=budget, slots=64)  # the published grid
    assert with_slots.predicted_peak_activations <= budget
    assert 0 < with_slots.lower_bound_cost <= s.recompute_cost <= with_slots.recompute_cost
