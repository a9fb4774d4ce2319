"""Optimizers: update rules by hand, in-place updates, dtypes, state in the ledger, errors."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, optim


def param(values, dtype=np.float64):
    p = nn.Parameter(np.array(values, dtype=dtype))
    return p


def test_sgd_step_by_hand():
    p = param([1.0, -2.0])
    p.grad = np.array([0.5, 0.5])
    optim.SGD([p], lr=0.1).step()
    np.testing.assert_allclose(p.data, [0.95, -2.05])


def test_sgd_momentum_by_hand():
    p = param([0.0])
    opt = optim.SGD([p], lr=1.0, momentum=0.5)
    for _ in range(3):
        p.grad = np.array([1.0])
        opt.step()
    # buffers: 1, 1.5, 1.75 -> p = -(1 + 1.5 + 1.75)
    np.testing.assert_allclose(p.data, [-4.25])


def test_adamw_first_step_is_lr_sign():
    p = param([1.0, -1.0, 3.0])
    p.grad = np.array([2.0, -0.5, 1e-3])
    optim.AdamW([p], lr=0.01, weight_decay=0.0).step()
    # at step 1 the bias-corrected update is g/|g| (up to eps)
    np.testing.assert_allclose(p.data, [0.99, -0.99, 2.99], rtol=1e-5)


def test_adamw_weight_decay_is_decoupled():
    p = param([2.0])
    p.grad = np.array([0.0])
    optim.AdamW([p], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_allclose(p.data, [2.0 * (1 - 0.05)])


def test_updates_are_in_place_and_keep_float32():
    p = param(np.ones((3, 3)), np.float32)
    arr = p.data
    opt = optim.AdamW([p])
    p.grad = np.ones((3, 3), np.float32)
    opt.step()
    assert p.data is arr and p.data.dtype == np.float32
    assert opt.state[id(p)]["exp_avg"].dtype == np.float32


def test_state_is_counted_as_optimizer_bytes():
    p = param(np.ones((10, 10)), np.float32)
    with mg.memory.track() as m:
        opt = optim.SGD([p], lr=0.1, momentum=0.9)
        p.grad = np.ones((10, 10), np.float32)
        opt.step()
    assert m.peak["optimizer"] - m.start["optimizer"] == 400
    del opt  # frees the momentum buffer
    with mg.memory.track() as m:
        opt = optim.AdamW([p])
        opt.step()
    assert m.peak["optimizer"] - m.start["optimizer"] == 800


def test_zero_grad_modes():
    p = param([1.0])
    opt = optim.SGD([p], lr=0.1)
    p.grad = np.array([3.0])
    opt.zero_grad(set_to_none=False)
    assert p.grad[0] == 0.0
    opt.zero_grad()
    assert p.grad is None


def test_bad_hyperparameters():
    p = param([1.0])
    with pytest.raises(ValueError, match=r"SGD: lr=-1.0 is out of range; allowed: 0.0 <= lr"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="betas"):
        optim.AdamW([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([], lr=0.1)


def test_training_reduces_loss():
    mg.random.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    x = mg.random.randn(64, 2)
    y = (x[:, :1] * x[:, 1:]).astype(np.float32)
    opt = optim.AdamW(model.parameters(), lr=0.02)
    losses = []
    for _ in range(100):
        opt.zero_grad()
        loss = mg.mse_loss(model(mg.Tensor(x)), mg.Tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


@pytest.mark.parametrize("kwargs, msg", [
    (dict(lr=float("nan")), "AdamW: lr must be a finite number, got nan"),
    (dict(lr=float("inf")), "AdamW: lr must be a finite number, got inf"),
    (dict(lr=-1e-3), r"AdamW: lr=-0.001 is out of range; allowed: 0.0 <= lr"),
    (dict(betas=(0.9, float("nan"))), r"AdamW: betas\[1\] must be a finite number"),
    (dict(betas=0.9), "AdamW: betas must be a pair"),
    (dict(eps=-1.0), "AdamW: eps=-1.0 is out of range"),
    (dict(weight_decay=float("nan")), "AdamW: weight_decay must be a finite number"),
])
def test_adamw_rejects_bad_hyperparameters_by_name(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        optim.AdamW([param([1.0])], **kwargs)


def test_sgd_rejects_nan_and_non_tensors():
    with pytest.raises(ValueError, match="SGD: momentum must be a finite number, got nan"):
        optim.SGD([param([1.0])], lr=0.1, momentum=float("nan"))
    with pytest.raises(TypeError, match="SGD: parameter 0 is not a Tensor that requires grad"):
        optim.SGD([np.ones(3)], lr=0.1)
    with pytest.raises(TypeError, match="SGD: lr must be a real number"):
        optim.SGD([param([1.0])], lr="0.1")
