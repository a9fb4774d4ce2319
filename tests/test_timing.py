"""bookkit.timing: forward and backward timed apart, against sleeps of known length."""
from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from bookkit.timing import StepTimes, compare_times, forward_backward_times, overhead_bound  # noqa: E402


class _Slow(torch.autograd.Function):
    """Identity whose forward sleeps `fwd` seconds and backward `bwd` seconds."""

    @staticmethod
    def forward(ctx, x, fwd, bwd):
        time.sleep(fwd)
        ctx.bwd = bwd
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        time.sleep(ctx.bwd)
        return g, None, None


def test_halves_are_timed_apart():
    x = torch.ones(3, requires_grad=True)
    calls = []

    def forward():
        calls.append(1)
        return _Slow.apply(x, 0.02, 0.06).sum()

    t = forward_backward_times(forward, repeats=3, warmup=1)
    assert len(calls) == 4
    assert isinstance(t, StepTimes) and t.repeats == 3
    # Sleeps are lower bounds; the slack covers a busy machine.
    assert 0.02 <= t.forward < 0.02 + 0.05
    assert 0.06 <= t.backward < 0.06 + 0.05
    assert t.step == pytest.approx(t.forward + t.backward)
    assert 1.5 < t.backward_per_forward < 4.0
    assert torch.equal(x.grad, torch.full((3,), 4.0))   # four backward passes accumulated


def test_rejects_a_forward_that_returns_no_scalar_loss():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="one-element tensor"):
        forward_backward_times(lambda: x * 2, repeats=1)
    with pytest.raises(ValueError, match="requires_grad=False"):
        forward_backward_times(lambda: torch.ones(()), repeats=1)
    with pytest.raises(ValueError, match="repeats"):
        forward_backward_times(lambda: x.sum(), repeats=0)


def test_overhead_bound():
    assert overhead_bound() == pytest.approx(1 / 3)
    assert overhead_bound(3.0) == pytest.approx(0.25)
    assert overhead_bound(2.0, 0.5) == pytest.approx(1 / 6)
    assert overhead_bound(2.0, 0.0) == 0.0
    with pytest.raises(ValueError, match="recomputed_fraction"):
        overhead_bound(2.0, 1.5)
    with pytest.raises(ValueError, match="backward_per_forward"):
        overhead_bound(0.0)


def test_compare_times_interleaves_and_keeps_variants_apart():
    x = torch.ones(2, requires_grad=True)
    order = []

    def variant(name, fwd, bwd):
        def forward():
            order.append(name)
            return _Slow.apply(x, fwd, bwd).sum()
        return forward

    times = compare_times({"fast": variant("fast", 0.0, 0.01), "slow": variant("slow", 0.03, 0.05)},
                          rounds=3, warmup=1)
    assert order == ["fast", "slow"] * 4
    assert times["fast"].repeats == times["slow"].repeats == 3
    assert times["slow"].forward >= 0.03 > times["fast"].forward
    assert times["slow"].backward >= 0.05 and times["fast"].backward >= 0.01
    with pytest.raises(ValueError, match="no variants"):
        compare_times({})
