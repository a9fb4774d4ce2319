"""minigrad.random: seeding, state save/restore, dtypes."""
import numpy as np
import pytest

import minigrad as mg


def test_manual_seed_reproduces():
    mg.random.manual_seed(42)
    a = mg.random.randn(5)
    mg.random.manual_seed(42)
    assert np.array_equal(a, mg.random.randn(5))
    assert not np.array_equal(a, mg.random.randn(5))


def test_get_set_rng_state_replays_and_is_a_copy():
    mg.random.manual_seed(1)
    state = mg.random.get_rng_state()
    a = mg.random.rand(4)
    mg.random.set_rng_state(state)
    assert np.array_equal(a, mg.random.rand(4))
    state["state"]["state"] = 0  # mutating the returned dict does not touch the generator
    b = mg.random.rand(4)
    mg.random.set_rng_state(mg.random.get_rng_state())
    assert not np.array_equal(a, b)


def test_fork_rng_restores():
    mg.random.manual_seed(3)
    with mg.random.fork_rng():
        mg.random.rand(100)
    after = mg.random.rand(3)
    mg.random.manual_seed(3)
    assert np.array_equal(after, mg.random.rand(3))


def test_dtypes_and_ranges():
    assert mg.random.rand(3).dtype == np.float32
    assert mg.random.randn(3, dtype=np.float64).dtype == np.float64
    r = mg.random.randint(0, 5, (1000,))
    assert r.dtype == np.int64 and r.min() == 0 and r.max() == 4
    g = mg.random.Generator(7)
    assert np.array_equal(g.random((3,)), mg.random.Generator(7).random((3,)))


def test_bad_seed_and_state():
    with pytest.raises(ValueError, match="non-negative integer"):
        mg.random.manual_seed(-1)
    with pytest.raises(ValueError, match="state dict"):
        mg.random.set_rng_state({"x": 1})
