"""Property tests: checkpointing never changes a gradient, not even by one bit.

Random chains (depth 1-30, random widths, Linear/ReLU/GELU/Tanh/LayerNorm/Dropout
mixed; half of them on an input without grad behind a parameter-free layer) under random plans (uniform, explicit boundaries, optimal, revolve), in
float32 and float64: the gradients of the input and of every parameter equal
those of the plain run exactly (``np.array_equal``). The same for the small GPT
with every block checkpointed.

Hypothesis profiles: "ci" (default; bounded and derandomized so CI is
reproducible) and "dev" (more examples): ``HYPOTHESIS_PROFILE=dev pytest ...``.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minigrad
from minigrad import nn
from minigrad import plan as P
from minigrad.checkpoint import checkpoint_sequential

from chains import KINDS, make_layer

settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))




@st.composite
def chains(draw):
    depth = draw(st.integers(1, 30))
    kinds = ["linear"] + [draw(st.sampled_from(KINDS)) for _ in range(depth - 1)]
    widths = [draw(st.integers(1, 9)) for _ in range(depth + 1)]
    p = [draw(st.floats(0.05, 0.7)) for _ in range(depth)]
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    batch = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    # an input without grad: checkpoints over a parameter-free prefix make no node
    x_grad = draw(st.booleans())
    if not x_grad:
        kinds = [draw(st.sampled_from(("relu", "gelu", "dropout")))] + kinds
        widths = [widths[0]] + widths
        p = [p[0]] + p
    return kinds, widths, p, dtype, batch, seed, x_grad


@st.composite
def plans(draw, n):
    kind = draw(st.sampled_from(["uniform", "explicit", "optimal", "revolve", "int"]))
    if kind in ("uniform", "int"):
        return kind, draw(st.integers(1, n))
    if kind == "explicit":
        inner = draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=n - 1)) if n > 1 else set()
        return kind, [0] + sorted(i for i in inner if i < n)
    if kind == "revolve":
        return kind, draw(st.integers(1, 8))
    return kind, None


def build(kinds, widths, p, dtype, seed):
    minigrad.random.manual_seed(seed)
    layers, width = [], widths[0]
    for i, kind in enumerate(kinds):
        out = widths[i + 1] if kind == "linear" else width
        layer, width = make_layer(kind, width, out, p[i], dtype)
        layers.append(layer)
    return layers


def grads(layers, x0, run, seed, x_grad=True):
    for layer in layers:
        layer.zero_grad()
    x = minigrad.Tensor(x0.copy(), requires_grad=x_grad)
    minigrad.random.manual_seed(seed)  # same dropout masks in both runs
    y = run(x)
    y.backward(np.linspace(-1, 1, y.size).reshape(y.shape).astype(y.dtype))
    return ([x.grad] if x_grad else []) + [q.grad for layer in layers for q in layer.parameters()]


def plain(layers):
    def run(h):
        for layer in layers:
            h = layer(h)
        return h
    return run


@PROFILE
@given(data=st.data(), chain=chains())
def test_checkpointed_gradients_are_bit_identical(data, chain):
    kinds, widths, p, dtype, batch, seed, x_grad = chain
    layers = build(kinds, widths, p, dtype, seed)
    n = len(layers)
    x0 = np.random.default_rng(seed).standard_normal((batch, widths[0])).astype(dtype)
    kind, arg = data.draw(plans(n))
    if kind == "uniform":
        plan = P.uniform(n, arg)
    elif kind == "int":
        plan = arg
    elif kind == "explicit":
        plan = P.explicit(n, arg)
    elif kind == "revolve":
        plan = P.revolve(n, arg)
    else:
        plan = P.optimal_segments(layers, minigrad.Tensor(x0, requires_grad=x_grad))

    expected = grads(layers, x0, plain(layers), seed + 1, x_grad)
    got = grads(layers, x0, lambda h: checkpoint_sequential(layers, plan, h), seed + 1, x_grad)
    assert len(expected) == len(got)
    for a, b in zip(expected, got):
        assert a is not None and b is not None
        assert a.dtype == b.dtype == dtype
        assert np.array_equal(a, b)


@PROFILE
@given(n_layers=st.integers(1, 3), seq=st.integers(1, 6), batch=st.integers(1, 3),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16),
       dropout=st.sampled_from([0.0, 0.2]))
def test_gpt_with_every_block_checkpointed_is_bit_identical(n_layers, seq, batch, dtype, seed, dropout):
    def model_grads(checkpoint_blocks):
        minigrad.random.manual_seed(seed)
        model = nn.GPT(vocab_size=13, d_model=8, n_heads=2, n_layers=n_layers, seq_len=6,
                       dropout=dropout, checkpoint_blocks=checkpoint_blocks, dtype=dtype)
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, 13, (batch, seq))
        targets = rng.integers(0, 13, (batch, seq))
        minigrad.random.manual_seed(seed + 1)
        model.loss(idx, targets).backward()
        return [(name, q.grad) for name, q in model.named_parameters()]

    expected = model_grads(False)
    got = model_grads(True)
    assert [n for n, _ in expected] == [n for n, _ in got]
    for (name, a), (_, b) in zip(expected, got):
        assert a is not None and a.dtype == dtype, name
        assert np.array_equal(a, b), name


@pytest.mark.parametrize("segments", [0, 6, -1])
def test_bad_segment_counts_name_the_range(segments):
    with pytest.raises(ValueError, match=r"1 <= segments <= 5"):
        P.uniform(5, segments)
