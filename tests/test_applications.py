"""bookkit.step_memory (the step meter by category), bookkit.segmentation (the
segmentation network) and bookkit.budget_search (the budget search and the
AutoBatch-style choice), against counts made by hand."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch import nn  # noqa: E402

from bookkit.budget_search import autobatch, largest_fitting  # noqa: E402
from bookkit.segmentation import SegmentationNet  # noqa: E402
from bookkit.step_memory import (  # noqa: E402
    StepMemory,
    optimizer_state_bytes,
    tensor_bytes,
    training_step,
)
from bookkit.torchmem import saved_bytes  # noqa: E402


def mlp(widths=(16, 32, 8)):
    torch.manual_seed(0)
    layers = []
    for d_in, d_out in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(d_in, d_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])          # no ReLU after the last Linear


def data(batch=8, d_in=16, d_out=8):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, d_in, generator=g), torch.randn(batch, d_out, generator=g)


# -- tensor_bytes / optimizer_state_bytes -------------------------------------------

def test_tensor_bytes_counts_each_storage_once():
    a = torch.zeros(10, 4)                      # 160 bytes
    b = torch.zeros(3, dtype=torch.float64)     # 24 bytes
    assert tensor_bytes([a, a[2:], a.T, None, b]) == 160 + 24
    with pytest.raises(TypeError, match="expected tensors"):
        tensor_bytes([a, 3])


def test_adamw_state_is_two_copies_of_the_weights_plus_step_counters():
    model = mlp()
    opt = torch.optim.AdamW(model.parameters())
    assert optimizer_state_bytes(opt) == 0      # lazily created on the first step
    x, y = data()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    params = list(model.parameters())
    weights = sum(p.numel() * 4 for p in params)
    steps = sum(s["step"].untyped_storage().nbytes() for s in opt.state.values())
    assert optimizer_state_bytes(opt) == 2 * weights + steps
    with pytest.raises(TypeError, match="Optimizer"):
        optimizer_state_bytes(model)


# -- training_step ------------------------------------------------------------------

def test_plain_step_categories_match_a_count_by_hand():
    model = mlp((16, 32, 8))
    x, y = data(batch=8)
    opt = torch.optim.AdamW(model.parameters())
    m = training_step(model, nn.functional.mse_loss, x, y, opt)
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert m.parameters == weights and m.gradients == weights
    assert m.optimizer_state >= 2 * weights
    # Linear 1 saves x (8x16); ReLU saves its output, which Linear 2 saves too (8x32);
    # the loss keeps the output and the target (8x8 each).
    assert m.saved_activations == 4 * 8 * (16 + 32 + 8 + 8)
    assert m.total == sum(m.as_dict().values())
    assert list(m.as_dict()) == list(StepMemory.CATEGORIES)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_accumulation_divides_activations_and_keeps_the_gradient(k):
    x, y = data(batch=8)
    full_model, acc_model = mlp(), mlp()
    full = training_step(full_model, nn.functional.mse_loss, x, y)
    acc = training_step(acc_model, nn.functional.mse_loss, x, y, micro_batches=k)
    assert acc.saved_activations * k == full.saved_activations
    assert acc.micro_batches == k and acc.gradients == full.gradients
    assert acc.loss == pytest.approx(full.loss, rel=1e-6)
    for p, q in zip(full_model.parameters(), acc_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_uneven_micro_batches_still_give_the_batch_mean():
    x, y = data(batch=7)
    a, b = mlp(), mlp()
    training_step(a, nn.functional.mse_loss, x, y)
    training_step(b, nn.functional.mse_loss, x, y, micro_batches=3)   # 3, 2, 2 samples
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_bf16_autocast_halves_what_the_linears_save_but_not_the_weights():
    x, y = data(batch=64)
    fp32 = training_step(mlp(), nn.functional.mse_loss, x, y)
    model = mlp()
    bf16 = training_step(model, nn.functional.mse_loss, x, y, autocast_dtype=torch.bfloat16)
    assert bf16.parameters == fp32.parameters and bf16.gradients == fp32.gradients
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    assert bf16.saved_activations < fp32.saved_activations
    assert bf16.loss == pytest.approx(fp32.loss, rel=0.05)


def test_training_step_rejects_bad_input():
    model = mlp()
    x, y = data(batch=4)
    with pytest.raises(ValueError, match="micro_batches"):
        training_step(model, nn.functional.mse_loss, x, y, micro_batches=5)
    with pytest.raises(ValueError, match="micro_batches"):
        training_step(model, nn.functional.mse_loss, x, y, micro_batches=0)
    with pytest.raises(ValueError, match="leading batch dimension"):
        training_step(model, nn.functional.mse_loss, x, y[:3])


# -- SegmentationNet ----------------------------------------------------------------

def seg(mode="none"):
    torch.manual_seed(0)
    return SegmentationNet(widths=(4, 8), depth=2, decoder_width=4, checkpoint=mode)


def test_segmentation_net_shapes_and_bad_input():
    net = seg()
    assert net(torch.randn(2, 3, 8, 12)).shape == (2, 4, 8, 12)
    with pytest.raises(ValueError, match="multiples of 2"):
        net(torch.randn(1, 3, 7, 8))
    with pytest.raises(ValueError, match=r"\(batch, 3, H, W\)"):
        net(torch.randn(1, 1, 8, 8))
    with pytest.raises(ValueError, match="checkpoint must be one of"):
        net.checkpoint = "some"
    with pytest.raises(ValueError, match="widths"):
        SegmentationNet(widths=())


def test_checkpointing_shrinks_saved_bytes_in_order_and_keeps_gradients():
    x = torch.randn(1, 3, 16, 16)
    target = torch.randint(0, 4, (1, 16, 16))
    kept, grads = {}, {}
    for mode in ("none", "backbone", "all"):
        net = seg(mode)
        kept[mode] = saved_bytes(net, x)
        nn.functional.cross_entropy(net(x), target).backward()
        grads[mode] = [p.grad for p in net.parameters()]
    assert kept["none"] > kept["backbone"] > kept["all"] > 0
    for mode in ("backbone", "all"):
        for g0, g in zip(grads["none"], grads[mode]):
            torch.testing.assert_close(g, g0)


def test_saved_bytes_are_proportional_to_pixels():
    net = seg("backbone")
    small = saved_bytes(net, torch.randn(1, 3, 8, 8))
    assert saved_bytes(net, torch.randn(1, 3, 16, 16)) == 4 * small
    assert saved_bytes(net, torch.randn(3, 3, 8, 16)) == 6 * small


# -- largest_fitting ----------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(low=st.integers(0, 50), n=st.integers(0, 60), step=st.integers(1, 7),
       a=st.integers(0, 9), c=st.integers(0, 40), budget=st.integers(0, 800))
def test_largest_fitting_equals_brute_force(low, n, step, a, c, budget):
    measure = lambda v: a * v + c          # noqa: E731  (non-decreasing)
    high = low + n
    best, probes = largest_fitting(measure, low, high, budget, step)
    fitting = [v for v in range(low, high + 1, step) if measure(v) <= budget]
    assert best == (max(fitting) if fitting else None)
    assert all(probes[v] == measure(v) for v in probes)
    assert len(probes) <= (n // step).bit_length() + 1


def test_largest_fitting_rejects_bad_ranges():
    with pytest.raises(ValueError, match="low <= high"):
        largest_fitting(lambda v: v, 10, 5, 100)
    with pytest.raises(ValueError, match="step"):
        largest_fitting(lambda v: v, 1, 5, 100, step=0)
    with pytest.raises(ValueError, match="integer"):
        largest_fitting(lambda v: v, 1.5, 5, 100)


# -- autobatch ----------------------------------------------------------------------

def test_autobatch_recovers_a_linear_memory_model():
    fixed, per = 1000, 300
    calls = []

    def measure(b):
        calls.append(b)
        return fixed + per * b

    r = autobatch(measure, budget=100_000, fraction=0.6)
    assert calls == [1, 2, 4, 8, 16]
    assert r.fixed == pytest.approx(fixed) and r.per_sample == pytest.approx(per)
    assert r.batch == (60_000 - fixed) // per
    assert r.predict(r.batch) <= r.target < r.predict(r.batch + 1)
    assert autobatch(measure, budget=10**9, max_batch=64).batch == 64


def test_autobatch_errors():
    with pytest.raises(ValueError, match="not even one sample"):
        autobatch(lambda b: 1000 + 300 * b, budget=1000)
    with pytest.raises(ValueError, match="does not grow"):
        autobatch(lambda b: 5000, budget=10**6)
    with pytest.raises(ValueError, match="fraction"):
        autobatch(lambda b: b, budget=100, fraction=1.5)
    with pytest.raises(ValueError, match="two distinct"):
        autobatch(lambda b: b, budget=100, batch_sizes=(4,))


def test_step_without_meter_computes_the_same_gradient():
    x, y = data(batch=8)
    a, b = mlp(), mlp()
    with_meter = training_step(a, nn.functional.mse_loss, x, y, micro_batches=2)
    without = training_step(b, nn.functional.mse_loss, x, y, micro_batches=2, meter=False)
    assert without.saved_activations is None and without.loss == with_meter.loss
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.grad, q.grad)
    with pytest.raises(ValueError, match="meter=False"):
        without.total


@pytest.mark.slow
def test_step_peak_is_exactly_linear_in_the_batch_and_smaller_with_checkpointing():
    from bookkit.step_memory import step_peak
    net = seg("none")
    peaks = {}
    for mode in ("none", "backbone"):
        net.checkpoint = mode
        for b in (1, 2, 3):
            x = torch.randn(b, 3, 16, 16)
            t = torch.randint(0, 4, (b, 16, 16))
            peaks[mode, b] = step_peak(net, nn.functional.cross_entropy, x, t)
        assert peaks[mode, 3] - peaks[mode, 2] == peaks[mode, 2] - peaks[mode, 1] > 0
        assert all(p.grad is None for p in net.parameters())
    assert peaks["backbone", 3] < peaks["none", 3]
    # the peak includes at least everything the forward saved
    net.checkpoint = "none"
    assert peaks["none", 2] > saved_bytes(net, torch.randn(2, 3, 16, 16))
    with pytest.raises(ValueError, match="leading batch dimension"):
        step_peak(net, nn.functional.cross_entropy, torch.randn(2, 3, 16, 16), t)
