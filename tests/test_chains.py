"""bookkit.chains: chains of MLP blocks and one step through them, measured (chapters 4-5)."""
from __future__ import annotations

import numpy as np
import pytest

import minigrad.ops as F
from minigrad import Tensor, plan
from bookkit.chains import block_chain, measure_chain_step, time_chain_steps, waist_chain


def _chain(n=6, batch=4):
    layers = block_chain([8, 16, 4, 12, 8, 20, 6][: n + 1], hidden=10, seed=1)
    x = Tensor(np.random.default_rng(0).standard_normal((batch, 8)).astype(np.float32))
    return layers, x


@pytest.mark.parametrize("starts", [[0], [0, 2], [0, 1, 3, 5], [0, 4]])
def test_measured_peak_and_flops_equal_the_planner_prediction(starts):
    layers, x = _chain()
    profile = plan.profile_chain(layers, x)
    step = measure_chain_step(layers, x, starts)
    assert step.peak_activations == plan.predict_peak(profile, starts)
    assert step.recompute_flops == plan.recompute_cost(profile, starts)
    assert step.recompute_ops <= step.forward_ops  # one level: at most one extra forward


def test_the_loss_is_part_of_the_step():
    layers, x = _chain()
    target = Tensor(np.zeros((4, 6), np.float32))
    loss = lambda y: F.mse_loss(y, target)  # noqa: E731 (saves y - target: 4 x 6 floats)
    profile = plan.profile_chain(layers, x, loss=loss)
    with_loss = measure_chain_step(layers, x, [0, 3], loss=loss)
    assert with_loss.peak_activations == plan.predict_peak(profile, [0, 3])
    assert profile.loss_bytes == 4 * 4 * 6


def test_checkpointed_gradients_are_bit_identical_to_plain():
    layers, x = _chain()
    plain = measure_chain_step(layers, x, None)
    ckpt = measure_chain_step(layers, x, [0, 2, 4])
    assert plain.recompute_ops == 0 == plain.recompute_flops and ckpt.recompute_flops > 0
    assert 0 < ckpt.extra_forward_flops < 1 and 0 < ckpt.step_overhead < ckpt.extra_forward_flops
    assert all(np.array_equal(a, b) for a, b in zip(plain.grads, ckpt.grads))


def test_block_chain_validates_its_sizes():
    with pytest.raises(ValueError, match="hidden has 1 entries"):
        block_chain([4, 4, 4], hidden=[3])
    with pytest.raises(ValueError, match="activation"):
        block_chain([4, 4], hidden=3, activation="sigmoid")
    with pytest.raises(ValueError, match="at least 2"):
        block_chain([4], hidden=3)


def test_time_chain_steps_times_every_plan_and_checks_repeat():
    layers, x = _chain(n=3)
    times = time_chain_steps(layers, x, {"plain": None, "two": [0, 2]}, repeat=1)
    assert set(times) == {"plain", "two"} and all(t.step > 0 for t in times.values())
    with pytest.raises(ValueError, match="repeat"):
        time_chain_steps(layers, x, {"plain": None}, repeat=0)


def test_waist_chain_is_chapter_5s_chain():
    chain = waist_chain()
    assert len(chain.layers) == 24 and chain.widths.count(64) == 6 and chain.x.shape == (16, 8)
    assert chain.x.requires_grad and chain.target.shape == (16, 8)
    profile = plan.profile_chain(chain.layers, chain.x, loss=chain.loss)
    saved = [i + o for i, o in zip(profile.input_bytes, profile.own_bytes)]
    wide = [i for i, s in enumerate(saved) if s == 20 * 1024]   # 64-wide input and 256-wide hidden
    assert wide == [4, 5, 12, 13, 20, 21] and all(s == 2560 for i, s in enumerate(saved) if i not in wide)
    again = waist_chain()                                         # seeded: the same chain every time
    assert np.array_equal(again.x.data, chain.x.data) and np.array_equal(again.target.data, chain.target.data)
    assert all(np.array_equal(p.data, q.data) for a, b in zip(chain.layers, again.layers)
               for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("batch", [0, -1, 2.5, True, "16"])
def test_waist_chain_refuses_a_bad_batch(batch):
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        waist_chain(batch)
