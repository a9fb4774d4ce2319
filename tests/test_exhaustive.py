"""optimal_segments against every segmentation, each executed for real.

For random heterogeneous chains of up to 10 layers, all 2^(n-1) one-level
segmentations are run through ``checkpoint_sequential`` under the byte ledger.
The plan `optimal_segments` returns must give a measured
``m.peak["activations"]`` equal to the smallest measured one and to its own
prediction; the model's prediction must match the measurement for every
segmentation, and the predicted recomputation must equal the ledger's count of
recomputed ops.
"""
import numpy as np
import pytest

from marks import fast_every

import minigrad
from minigrad import memory, nn
from minigrad import plan as P
from plan_references import optimal_segments_reference
from minigrad.checkpoint import checkpoint_sequential

from chains import random_chain, segmentations



def measure(layers, x, starts, seed=123):
    """Peak saved-activation bytes and recomputed FLOPs of one forward + backward."""
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential(layers, list(starts), x)
        y.backward(np.ones(y.shape, dtype=y.dtype))
    return m.peak["activations"], m.flops["recompute"]


@pytest.mark.parametrize("seed", fast_every(range(6), 3))
def test_optimal_plan_is_the_measured_minimum(seed):
    rng = np.random.default_rng(seed)
    minigrad.random.manual_seed(seed)
    n = 10 if seed < 3 else int(rng.integers(1, 10))
    layers, width = random_chain(rng, n)
    batch = int(rng.integers(1, 6))
    x = minigrad.Tensor(rng.standard_normal((batch, width)).astype(np.float32),
                        requires_grad=bool(seed % 2))
    profile = P.profile_chain(layers, x)
    plan = P.optimal_segments(layers, x)

    measured = {}
    for starts in segmentations(n):
        peak, recomputed = measure(layers, x, starts)
        # the model is exact for every segmentation, not only the optimal one
        assert peak == P.predict_peak(profile, starts), (starts, [type(l).__name__ for l in layers])
        assert recomputed == P.recompute_cost(profile, starts)
        measured[starts] = peak

    best = min(measured.values())
    got, recomputed = measure(layers, x, plan.starts)
    assert got == best == plan.predicted_peak_activations
    assert recomputed == plan.recompute_cost
    # least recomputation among the measured minima
    assert plan.recompute_cost == min(P.recompute_cost(profile, s) for s, v in measured.items() if v == best)


@pytest.mark.parametrize("seed", range(3))
def test_budgeted_plan_fits_measured_and_is_cheapest(seed):
    rng = np.random.default_rng(100 + seed)
    n = 8
    layers, width = random_chain(rng, n, dtype=np.float64)
    x = minigrad.Tensor(rng.standard_normal((4, width)), requires_grad=True)
    profile = P.profile_chain(layers, x)
    table = {s: measure(layers, x, s) for s in segmentations(n)}
    peaks = sorted({p for p, _ in table.values()})
    budget = peaks[len(peaks) // 3]
    plan = P.optimal_segments(profile, budget_bytes=budget)
    peak, recomputed = measure(layers, x, plan.starts)
    assert peak == plan.predicted_peak_activations <= budget
    assert recomputed == plan.recompute_cost == min(r for p, r in table.values() if p <= budget)
    with pytest.raises(ValueError, match=rf"budget_bytes >= {peaks[0]}"):
        P.optimal_segments(profile, budget_bytes=peaks[0] - 1)


def test_plan_object_is_accepted_by_checkpoint_sequential():
    rng = np.random.default_rng(5)
    layers, width = random_chain(rng, 6)
    x = minigrad.Tensor(rng.standard_normal((2, width)).astype(np.float32), requires_grad=True)
    plan = P.optimal_segments(layers, x)
    assert measure(layers, x, plan.starts) == measure_plan(layers, x, plan)


def measure_plan(layers, x, plan, seed=123):
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential(layers, plan, x)
        y.backward(np.ones(y.shape, dtype=y.dtype))
    return m.peak["activations"], m.flops["recompute"]


def test_profile_rejects_identity_layers():
    layers = [nn.Linear(3, 3), nn.Dropout(0.0), nn.ReLU()]  # p = 0: returns its input
    x = minigrad.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="sharing its input's buffer"):
        P.profile_chain(layers, x)


def test_profile_does_not_shift_the_random_stream():
    layers = [nn.Linear(4, 4), nn.Dropout(0.5)]
    x = minigrad.Tensor(np.ones((3, 4), np.float32))
    minigrad.random.manual_seed(9)
    before = minigrad.random.get_rng_state()
    P.profile_chain(layers, x)
    assert minigrad.random.get_rng_state() == before


def test_transformer_blocks_prediction_is_exact():
    # A realistic chain: pre-LN blocks with attention (q, k, v are views of one
    # array, counted once) and dropout; every segmentation measured.
    minigrad.random.manual_seed(0)
    blocks = [nn.TransformerBlock(16, 2, dropout=0.1) for _ in range(6)]
    x = minigrad.Tensor(np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32),
                        requires_grad=True)
    profile = P.profile_chain(blocks, x)
    measured = {}
    for starts in segmentations(6):
        peak, recomputed = measure(blocks, x, starts)
        assert peak == P.predict_peak(profile, starts), starts
        assert recomputed == P.recompute_cost(profile, starts)
        measured[starts] = peak
    plan = P.optimal_segments(profile)
    assert plan.predicted_peak_activations == min(measured.values()) == measure(blocks, x, plan.starts)[0]
    assert plan.predicted_peak_activations < measured[(0,)]  # checkpointing does help here


@pytest.mark.parametrize("seed", range(3))
def test_parameter_free_prefix_on_an_input_without_grad(seed):
    # The first layers see an input that needs no grad and have no parameters:
    # a checkpoint over them records no node, keeps nothing and is never recomputed.
    rng = np.random.default_rng(200 + seed)
    minigrad.random.manual_seed(seed)
    lead = [nn.ReLU(), nn.Dropout(0.3), nn.GELU(), nn.Tanh()][: 1 + seed]
    rest, width = random_chain(rng, 8 - len(lead))
    layers = lead + rest
    x = minigrad.Tensor(rng.standard_normal((3, width)).astype(np.float32))  # no grad
    profile = P.profile_chain(layers, x)
    assert profile.first_grad == len(lead) + 1
    measured = {}
    for starts in segmentations(len(layers)):
        peak, recomputed = measure(layers, x, starts)
        assert peak == P.predict_peak(profile, starts), starts
        assert recomputed == P.recompute_cost(profile, starts), starts
        measured[starts] = (peak, recomputed)
    best = min(p for p, _ in measured.values())
    plan = P.optimal_segments(profile)
    assert measure(layers, x, plan.starts) == (best, plan.recompute_cost)
    assert plan.recompute_cost == min(r for p, r in measured.values() if p == best)


def test_optimal_segments_needs_the_input():
    with pytest.raises(ValueError, match="x .* is required"):
        P.optimal_segments([nn.ReLU()])
    with pytest.raises(TypeError, match="minigrad Tensor"):
        P.profile_chain([nn.ReLU()], np.ones(3))
    with pytest.raises(ValueError, match="at least one layer"):
        P.profile_chain([], minigrad.Tensor(np.ones(3, np.float32)))


@pytest.mark.parametrize("seed", range(4))
def test_revolve_prediction_is_exact(seed):
    # The binomial schedule's peak (snapshots held + the one taped layer) and its
    # recomputed ops (nested checkpoint nodes aside) against the ledger.
    rng = np.random.default_rng(300 + seed)
    minigrad.random.manual_seed(seed)
    n = int(rng.integers(2, 13))
    layers, width = random_chain(rng, n)
    x = minigrad.Tensor(rng.standard_normal((3, width)).astype(np.float32), requires_grad=bool(seed % 2))
    profile = P.profile_chain(layers, x)
    for slots in range(1, 6):
        plan = P.revolve(n, slots)
        minigrad.random.manual_seed(1)
        with memory.track(record_timeline=False) as m:
            y = checkpoint_sequential(layers, plan, x)
            y.backward(np.ones(y.shape, dtype=y.dtype))
        assert m.peak["activations"] == P.predict_peak(profile, plan), slots
        assert m.flops["recompute"] == P.recompute_cost(profile, plan), slots
    # a segment plan object is accepted as well as its starts
    seg = P.uniform(n, 2)
    assert P.predict_peak(profile, seg) == P.predict_peak(profile, seg.starts)


# --- the loss is part of the planned step ------------------------------------------------------
class SquareMean(minigrad.Function):
    """An MSE-like loss that saves its input: mean(y * y)."""

    @staticmethod
    def forward(ctx, y):
        ctx.save_for_backward(y)
        return np.mean(y * y)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (2.0 * g / y.size)


def measure_with_loss(layers, x, plan, loss, seed=123):
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        loss(checkpoint_sequential(layers, plan, x)).backward()
    return m.peak["activations"], m.flops["recompute"]


LOSSES = {
    "saves its input": lambda y: SquareMean.apply(y),
    "mse (saves the difference)": lambda y: minigrad.mse_loss(y, np.ones(y.shape, y.dtype)),
    "cross entropy": lambda y: minigrad.cross_entropy(y, np.zeros(y.shape[0], dtype=np.int64)),
}


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("seed", range(3))
def test_plan_with_loss_is_the_measured_minimum_of_the_whole_step(name, seed):
    loss = LOSSES[name]
    rng = np.random.default_rng(400 + seed)
    n = 7
    layers, width = random_chain(rng, n)
    x = minigrad.Tensor(rng.standard_normal((4, width)).astype(np.float32), requires_grad=bool(seed % 2))
    profile = P.profile_chain(layers, x, loss=loss)
    table = {}
    for starts in segmentations(n):
        table[starts] = measure_with_loss(layers, x, list(starts), loss)
        assert table[starts] == (P.predict_peak(profile, starts), P.recompute_cost(profile, starts)), starts
    best = min(p for p, _ in table.values())
    plan = P.optimal_segments(layers, x, loss=loss)
    assert measure_with_loss(layers, x, plan, loss) == (best, plan.recompute_cost)
    assert plan.predicted_peak_activations == best
    ref = optimal_segments_reference(profile)
    assert (ref.predicted_peak_activations, ref.recompute_cost) == (best, plan.recompute_cost)
    budget = sorted({p for p, _ in table.values()})[1] if len(table) > 1 else best
    pb = P.optimal_segments(layers, x, budget_bytes=budget, loss=loss)
    assert pb.recompute_cost == min(c for p, c in table.values() if p <= budget)


def test_ignoring_the_loss_can_pick_a_worse_plan():
    # The measurement: a plan optimal for the chain alone is not for the whole step
    # when the loss saves the chain's output. Among a few chains, at least one shows it.
    worse = 0
    for seed in range(12):
        rng = np.random.default_rng(500 + seed)
        layers, width = random_chain(rng, 7)
        x = minigrad.Tensor(rng.standard_normal((4, width)).astype(np.float32))
        loss = LOSSES["saves its input"]
        blind = P.optimal_segments(layers, x)
        aware = P.optimal_segments(layers, x, loss=loss)
        peak_blind = measure_with_loss(layers, x, blind, loss)[0]
        peak_aware = measure_with_loss(layers, x, aware, loss)[0]
        assert peak_aware <= peak_blind
        worse += peak_aware < peak_blind
    assert worse >= 1


def test_profile_records_the_loss_and_both_cost_units():
    minigrad.random.manual_seed(0)
    layers = [nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)]
    x = minigrad.Tensor(np.ones((5, 3), np.float32), requires_grad=True)
    flops = P.profile_chain(layers, x, loss=LOSSES["cross entropy"])
    ops = P.profile_chain(layers, x, cost="ops")
    assert flops.cost == (2 * 5 * 3 * 4 + 5 * 4, 5 * 4, 2 * 5 * 4 * 2 + 5 * 2)
    assert ops.cost == (1, 1, 1)
    # cross entropy saves its log-softmax (5 x 2 float32) and the int64 targets, not its input
    assert not flops.loss_saves_input and flops.loss_own_bytes == 5 * 2 * 4 + 5 * 8
    assert flops.loss_cost == 5 * 10 + 1
    assert ops.loss_own_bytes == 0 and not ops.loss_saves_input
    with pytest.raises(ValueError, match="cost must be one of"):
        P.profile_chain(layers, x, cost="seconds")
    with pytest.raises(ValueError, match=r"profile_chain: cost has 2 entries, expected one per layer \(3\)"):
        P.profile_chain(layers, x, cost=[1, 2])
    with pytest.raises(TypeError, match="loss must return a one-element Tensor"):
        P.profile_chain(layers, x, loss=lambda y: y)
    with pytest.raises(ValueError, match="already includes its loss"):
        P.optimal_segments(flops, loss=LOSSES["cross entropy"])
