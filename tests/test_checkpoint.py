"""checkpoint / checkpoint_sequential: bit-identical gradients, errors, RNG, state, nesting."""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import minigrad as mg
import minigrad.ops as F
from minigrad import Tensor, nn
from minigrad.checkpoint import CheckpointError, checkpoint, checkpoint_sequential, is_recomputing


# --- random chains -----------------------------------------------------------------------
@st.composite
def chains(draw):
    depth = draw(st.integers(1, 30))
    kinds = draw(st.lists(st.sampled_from(["linear", "relu", "gelu", "layernorm", "dropout"]),
                          min_size=depth, max_size=depth))
    widths = draw(st.lists(st.integers(1, 12), min_size=depth + 1, max_size=depth + 1))
    seed = draw(st.integers(0, 2 ** 16))
    return kinds, widths, seed


def build(kinds, widths, seed, dtype):
    mg.random.manual_seed(seed)
    layers, w = [], widths[0]
    for kind, w_next in zip(kinds, widths[1:]):
        if kind == "linear":
            layers.append(nn.Linear(w, w_next, dtype=dtype))
            w = w_next
        elif kind == "relu":
            layers.append(nn.ReLU())
        elif kind == "gelu":
            layers.append(nn.GELU())
        elif kind == "layernorm":
            layers.append(nn.LayerNorm(w, dtype=dtype))
        else:
            layers.append(nn.Dropout(0.25))
    return layers, widths[0]


def grads_of(layers, w_in, dtype, seed, segments=None, x_requires_grad=True):
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((3, w_in)).astype(dtype), requires_grad=x_requires_grad)
    params = [p for l in layers for p in (l.parameters() if isinstance(l, nn.Module) else [])]
    for p in params:
        p.grad = None
    mg.random.manual_seed(seed + 1)  # dropout masks
    if segments is None:
        h = x
        for l in layers:
            h = l(h)
    else:
        h = checkpoint_sequential(layers, segments, x)
    loss = (h * h).sum()
    loss.backward()
    return loss.data.copy(), [x.grad] + [p.grad for p in params]


def assert_bit_equal(a, b):
    la, ga = a
    lb, gb = b
    assert np.array_equal(la, lb)
    assert len(ga) == len(gb)
    for u, v in zip(ga, gb):
        assert (u is None) == (v is None)
        if u is not None:
            assert u.dtype == v.dtype and np.array_equal(u, v)


@given(chains(), st.sampled_from([np.float32, np.float64]), st.data())
def test_checkpointed_gradients_bit_identical(chain, dtype, data):
    kinds, widths, seed = chain
    layers, w_in = build(kinds, widths, seed, dtype)
    n = len(layers)
    plain = grads_of(layers, w_in, dtype, seed)
    k = data.draw(st.integers(1, n), label="uniform segments")
    assert_bit_equal(plain, grads_of(layers, w_in, dtype, seed, k))
    starts = [0] + sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=n - 1), label="starts")) \
        if n > 1 else [0]
    assert_bit_equal(plain, grads_of(layers, w_in, dtype, seed, starts))


@given(st.integers(1, 3), st.sampled_from([np.float32, np.float64]), st.integers(0, 1000))
def test_gpt_every_block_checkpointed_bit_identical(n_layers, dtype, seed):
    def run(cb):
        mg.random.manual_seed(seed)
        model = nn.GPT(vocab_size=11, d_model=8, n_heads=2, n_layers=n_layers, seq_len=6,
                       dropout=0.1, checkpoint_blocks=cb, dtype=dtype)
        rng = np.random.default_rng(seed)
        idx, tgt = rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))
        loss = model.loss(idx, tgt)
        loss.backward()
        return loss.data.copy(), [p.grad for p in model.parameters()]
    plain = run(False)
    assert_bit_equal(plain, run(True))
    assert_bit_equal(plain, run(max(1, n_layers - 1)))


# --- the API ---------------------------------------------------------------------------------
def test_checkpoint_function_and_kwargs():
    w = nn.Parameter(np.random.default_rng(0).standard_normal((4, 4)))
    x = Tensor(np.random.default_rng(1).standard_normal((2, 4)), requires_grad=True)

    def f(h, scale=1.0):
        return F.tanh(h @ w) * scale
    checkpoint(f, x, scale=2.0).sum().backward()
    gx, gw = x.grad.copy(), w.grad.copy()
    x.grad = w.grad = None
    f(x, scale=2.0).sum().backward()
    assert np.array_equal(gx, x.grad) and np.array_equal(gw, w.grad)


def test_inputs_not_requiring_grad_warn_and_give_correct_gradients():
    lin = nn.Linear(4, 3, dtype=np.float64)
    x = Tensor(np.ones((2, 4)))
    with pytest.warns(UserWarning, match="none of the inputs requires grad"):
        y = checkpoint(lin, x)
    y.sum().backward()
    expected_w = np.ones((3, 4)) * 2  # d sum(x W^T + b) / dW = column sums of x
    np.testing.assert_array_equal(lin.weight.grad, expected_w)
    np.testing.assert_array_equal(lin.bias.grad, np.full(3, 2.0))


def test_checkpoint_sequential_first_segment_does_not_warn():
    layers = [nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint_sequential(layers, 3, Tensor(np.ones((2, 4), np.float32))).sum().backward()
    assert layers[0].weight.grad is not None


@pytest.mark.parametrize("segments", [0, -1, 5])
def test_segments_out_of_range(segments):
    layers = [nn.ReLU() for _ in range(4)]
    with pytest.raises(ValueError, match=r"1 <= segments <= 4"):
        checkpoint_sequential(layers, segments, Tensor(np.ones(2), requires_grad=True))


@pytest.mark.parametrize("starts, msg", [([1, 2], "begin with 0"), ([0, 2, 2], "increasing"),
                                         ([0, 4], r"0 \.\. 3"), ([], "begin with 0")])
def test_bad_starts(starts, msg):
    layers = [nn.ReLU() for _ in range(4)]
    with pytest.raises(ValueError, match=msg):
        checkpoint_sequential(layers, starts, Tensor(np.ones(2), requires_grad=True))


def test_plan_objects_are_accepted():
    class Plan:
        starts = (0, 2)
        n = 4
    layers = [nn.Tanh() for _ in range(4)]
    x = Tensor(np.array([0.3, -0.2]), requires_grad=True)
    with mg.memory.track() as m:
        checkpoint_sequential(layers, Plan(), x).sum().backward()
    assert m.counts["recompute"]["tanh"] == 2
    Plan.n = 5
    with pytest.raises(ValueError, match="n=5"):
        checkpoint_sequential(layers, Plan(), x)


def test_last_segment_is_not_checkpointed():
    layers = [nn.Tanh() for _ in range(6)]
    x = Tensor(np.ones(3), requires_grad=True)
    with mg.memory.track() as m:
        checkpoint_sequential(layers, 1, x).sum().backward()
    assert m.counts["forward"]["checkpoint"] == 0 and not m.counts["recompute"]
    with mg.memory.track() as m:
        checkpoint_sequential(layers, 3, x).sum().backward()
    assert m.counts["forward"]["checkpoint"] == 2
    assert m.counts["recompute"]["tanh"] == 4  # segments [0, 2) and [2, 4); [4, 6) is not


def test_recompute_with_different_shape_raises_naming_op():
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        h = h.exp()
        if state["calls"] > 1:  # the recomputation takes another path
            h = h.reshape(-1)
        return h.sum(axis=-1)
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    y = checkpoint(flaky, x)
    with pytest.raises(CheckpointError, match="reshape"):
        y.sum().backward()


def test_recompute_with_different_dtype_raises():
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        if state["calls"] > 1:
            h = Tensor(h.data.astype(np.float32), requires_grad=True)
        return h.tanh()
    x = Tensor(np.ones(3), requires_grad=True)
    y = checkpoint(flaky, x)
    with pytest.raises(CheckpointError, match="tanh.*float64.*float32"):
        y.sum().backward()
    state["calls"] = 0
    y = checkpoint(flaky, x, determinism_check=False)  # unchecked: no error
    y.sum().backward()


def test_dropout_masks_replayed_only_with_preserved_rng():
    def grads(preserve):
        mg.random.manual_seed(3)
        x = Tensor(np.ones((50, 20)), requires_grad=True)
        y = checkpoint(lambda h: F.dropout(h, 0.5), x, preserve_rng_state=preserve)
        mg.random.randn(5)  # something else draws in between, as training code does
        y.sum().backward()
        return x.grad, y.data
    g, y = grads(True)
    np.testing.assert_array_equal(g, (y != 0) * 2.0)
    g, y = grads(False)
    assert not np.array_equal(g, (y != 0) * 2.0)


def test_rng_state_after_backward_is_untouched():
    mg.random.manual_seed(0)
    x = Tensor(np.ones(10), requires_grad=True)
    y = checkpoint(lambda h: F.dropout(h, 0.5), x)
    state = mg.random.get_rng_state()
    y.sum().backward()
    assert mg.random.get_rng_state() == state


def test_batchnorm_running_stats_updated_once_unless_asked():
    x = Tensor(np.random.default_rng(0).standard_normal((16, 3)), requires_grad=True)

    def run(flag, ckpt):
        bn = nn.BatchNorm1d(3, update_stats_on_recompute=flag, dtype=np.float64)
        y = checkpoint(bn, x) if ckpt else bn(x)
        y.sum().backward()
        return bn.running_mean.data.copy(), bn.num_batches_tracked
    plain, n_plain = run(False, False)
    safe, n_safe = run(False, True)
    buggy, n_buggy = run(True, True)
    np.testing.assert_array_equal(safe, plain)
    assert n_safe == n_plain == 1 and n_buggy == 2
    np.testing.assert_allclose(buggy, plain * (1 + 0.9))  # updated twice with momentum 0.1


def test_is_recomputing_only_inside_recomputation():
    seen = []

    def f(h):
        seen.append(is_recomputing())
        return h * 2.0
    x = Tensor(np.ones(2), requires_grad=True)
    checkpoint(f, x).sum().backward()
    assert seen == [False, True] and not is_recomputing()


def test_nested_checkpoints():
    mg.random.manual_seed(0)
    layers = [nn.Sequential(nn.Linear(5, 5, dtype=np.float64), nn.GELU()) for _ in range(6)]
    x = Tensor(np.random.default_rng(0).standard_normal((2, 5)), requires_grad=True)

    def inner(a, b):
        def run(h):
            for l in layers[a:b]:
                h = l(h)
            return h
        return run

    def outer(h):
        h = checkpoint(inner(0, 2), h)
        h = checkpoint(inner(2, 4), h)
        return inner(4, 6)(h)

    def collect():
        return [x.grad.copy()] + [p.grad.copy() for l in layers for p in l.parameters()]

    nn.Sequential(*layers)(x).sum().backward()
    plain = collect()
    for l in layers:
        l.zero_grad()
    x.grad = None
    with mg.memory.track() as m:
        checkpoint(outer, x).sum().backward()
    for a, b in zip(plain, collect()):
        assert np.array_equal(a, b)
    # layers 0-3 run: forward, outer recompute, inner recompute; layers 4-5: forward + outer recompute
    assert m.counts["forward"]["linear"] == 6
    assert m.counts["recompute"]["linear"] == 6 + 4


def test_second_backward_through_checkpoint_raises():
    x = Tensor(np.ones(3), requires_grad=True)
    y = checkpoint(lambda h: h.exp(), x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_no_grad_checkpoint_is_plain_call():
    x = Tensor(np.ones(3), requires_grad=True)
    with mg.no_grad(), mg.memory.track() as m:
        y = checkpoint(lambda h: h.exp(), x)
    assert not y.requires_grad and m.counts["forward"]["checkpoint"] == 0


def test_revolve_plan_is_delegated():
    plan_mod = pytest.importorskip("minigrad.multilevel")
    plan = plan_mod.revolve(6, 2)
    layers = [nn.Tanh() for _ in range(6)]
    x = Tensor(np.array([0.1, 0.2]), requires_grad=True)
    checkpoint_sequential(layers, plan, x).sum().backward()
    g = x.grad.copy()
    x.grad = None
    nn.Sequential(*layers)(x).sum().backward()
    assert np.array_equal(g, x.grad)
