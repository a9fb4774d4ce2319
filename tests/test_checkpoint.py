"""checkpoint / checkpoint_sequential: bit-identical gradients, torch's semantics, errors, RNG,
state, nesting. Both variants (use_reentrant=False, the default, and True) unless noted;
tests ported from PyTorch's own suite are in test_checkpoint_torch.py."""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import minigrad as mg
import minigrad.ops as F
from minigrad import Tensor, nn
from minigrad.checkpoint import CheckpointError, checkpoint, is_recomputing, set_checkpoint_early_stop
from minigrad.checkpoint import checkpoint_sequential


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


def grads_of(layers, w_in, dtype, seed, segments=None, x_requires_grad=True, use_reentrant=False):
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
        h = checkpoint_sequential(layers, segments, x, use_reentrant=use_reentrant)
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
    reentrant = data.draw(st.booleans(), label="use_reentrant")
    assert_bit_equal(plain, grads_of(layers, w_in, dtype, seed, k, use_reentrant=reentrant))
    starts = [0] + sorted(data.draw(st.sets(st.integers(1, n - 1), max_size=n - 1), label="starts")) \
        if n > 1 else [0]
    assert_bit_equal(plain, grads_of(layers, w_in, dtype, seed, starts, use_reentrant=reentrant))


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
BOTH = pytest.mark.parametrize("use_reentrant", [False, True])


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


def test_keyword_tensor_is_an_input_of_the_checkpoint():
    # A tensor passed by keyword gets its gradient through grad(...).
    a = Tensor(np.array([0.5, -1.0]), requires_grad=True)
    b = Tensor(np.array([2.0, 3.0]), requires_grad=True)
    out = checkpoint(lambda a, blah: (a * blah).exp(), a, blah=b).sum()
    ga, gb = mg.grad(out, [a, b])
    assert a.grad is None and b.grad is None  # grad() writes no .grad
    np.testing.assert_array_equal(gb, np.exp(a.data * b.data) * a.data)
    np.testing.assert_array_equal(ga, np.exp(a.data * b.data) * b.data)


def test_non_leaf_keyword_tensor_also_used_outside():
    # The non-leaf keyword tensor is not "backwarded twice".
    x = Tensor(np.array([0.3, 0.7]), requires_grad=True)
    b = x * 2.0
    out = (checkpoint(lambda a, blah: a * blah.tanh(), x, blah=b) + b).sum()
    out.backward()
    got = x.grad.copy()
    x.grad = None
    b = x * 2.0
    (x * b.tanh() + b).sum().backward()
    np.testing.assert_array_equal(got, x.grad)


def test_tensors_inside_lists_tuples_and_dicts_are_inputs():
    a = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    b = Tensor(np.array([0.5, 0.25]), requires_grad=True)
    c = Tensor(np.array([3.0, -1.0]), requires_grad=True)

    def f(pair, table):
        x, y = pair
        return (x * y * table["c"]).tanh()
    out = checkpoint(f, [a, b], {"c": c}).sum()
    got = mg.grad(out, [a, b, c])
    want = mg.grad(f([a, b], {"c": c}).sum(), [a, b, c])
    for u, v in zip(got, want):
        np.testing.assert_array_equal(u, v)


def test_autograd_inside_the_checkpointed_function():
    # fn calls grad() itself; same result with and without checkpointing.
    x = Tensor(np.array([0.2, -0.4, 0.9]), requires_grad=True)

    def f(h):
        y = (h.tanh() * h).sum()
        (g,) = mg.grad(y, [h])       # a gradient computed inside the forward
        return h.exp() * Tensor(g)   # ... used as a constant afterwards
    plain = f(x).sum()
    (want,) = mg.grad(plain, [x])
    for early in (True, False):
        out = checkpoint(f, x, early_stop=early).sum()
        (got,) = mg.grad(out, [x])
        np.testing.assert_array_equal(got, want)


def test_backward_inside_the_checkpointed_function():
    w = nn.Parameter(np.array([0.5, 1.5]))
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)

    def f(h):
        inner = Tensor(h.data.copy(), requires_grad=True)
        (inner * w).sum().backward()  # accumulates into w.grad and inner.grad, inside fn
        return (h * Tensor(inner.grad)).tanh()
    checkpoint(f, x).sum().backward()
    got_x, got_w = x.grad.copy(), w.grad.copy()
    x.grad = w.grad = None
    f(x).sum().backward()
    np.testing.assert_array_equal(got_x, x.grad)
    # w.grad: the first forward's inner backward (the recomputation's inner backward too,
    # as in torch: fn runs twice)
    np.testing.assert_array_equal(got_w, 2 * w.grad)


@BOTH
def test_output_that_needs_no_grad_does_not_pretend(use_reentrant):
    # Nothing fn uses requires grad -> the output does not, backward raises.
    x = Tensor(np.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reentrant warns, like torch
        y = checkpoint(lambda h: h.exp() * 2.0, x, use_reentrant=use_reentrant)
    assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_reentrant_inputs_without_grad_warn_and_leave_parameters_without_gradients():
    # torch's reentrant trap: only the inputs decide whether the output requires grad.
    lin = nn.Linear(4, 3, dtype=np.float64)
    x = Tensor(np.ones((2, 4)))
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = checkpoint(lin, x, use_reentrant=True)
    assert not y.requires_grad


def test_non_reentrant_inputs_without_grad_give_parameters_their_gradients():
    lin = nn.Linear(4, 3, dtype=np.float64)
    x = Tensor(np.ones((2, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = checkpoint(lin, x)
    y.sum().backward()
    np.testing.assert_array_equal(lin.weight.grad, np.ones((3, 4)) * 2)  # column sums of x
    np.testing.assert_array_equal(lin.bias.grad, np.full(3, 2.0))


def test_reentrant_refuses_keywords_and_non_tensor_outputs():
    x = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="keyword arguments are not supported with use_reentrant=True"):
        checkpoint(lambda h, s=1.0: h * s, x, s=2.0, use_reentrant=True)
    with pytest.raises(TypeError, match="must return one Tensor"):
        checkpoint(lambda h: (h, h), x, use_reentrant=True)


def test_reentrant_refuses_grad_style_backward():
    x = Tensor(np.ones(2), requires_grad=True)
    out = checkpoint(lambda h: h.exp(), x, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match="use_reentrant=True is incompatible with grad"):
        mg.grad(out, [x])


def test_non_reentrant_any_output_structure():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    out = checkpoint(lambda h: {"y": h.exp(), "n": 3, "pair": (h * 2.0, "s")}, x)
    assert out["n"] == 3 and out["pair"][1] == "s"
    (out["y"].sum() + out["pair"][0].sum()).backward()
    np.testing.assert_array_equal(x.grad, np.exp(x.data) + 2.0)


def test_scalar_tensor_added_to_itself_backward():
    # 0-d tensors in backward (was: cannot create weak reference to float64).
    y = Tensor(np.float64(3.0), requires_grad=True)
    (y + y).backward()
    assert y.grad == 2.0 and isinstance(y.grad, np.ndarray) and y.grad.shape == ()
    z = Tensor(np.array(2.0), requires_grad=True)
    w = z * z
    (w + w).backward()
    assert z.grad == 8.0


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


@pytest.mark.parametrize("starts", [[0, 1.7], [0, 2.0], [0, True], ["0"]])
def test_non_integer_starts_are_refused_not_rounded(starts):
    layers = [nn.ReLU() for _ in range(4)]
    with pytest.raises(TypeError, match="segment starts must be integers"):
        checkpoint_sequential(layers, starts, Tensor(np.ones(2), requires_grad=True))


def test_non_callable_layers_and_functions_are_named():
    x = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match=r"functions\[1\] is not callable"):
        checkpoint_sequential([nn.ReLU(), 3], 1, x)
    with pytest.raises(TypeError, match="function must be callable, got list.*checkpoint_sequential"):
        checkpoint([nn.ReLU(), nn.ReLU()], x)
    with pytest.raises(ValueError, match="no layers"):
        checkpoint_sequential([], 1, x)


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


@BOTH
def test_last_segment_is_not_checkpointed(use_reentrant):
    layers = [nn.Tanh() for _ in range(6)]
    x = Tensor(np.ones(3), requires_grad=True)
    with mg.memory.track() as m:
        checkpoint_sequential(layers, 1, x, use_reentrant=use_reentrant).sum().backward()
    assert m.counts["forward"]["checkpoint"] == 0 and not m.counts["recompute"]
    with mg.memory.track() as m:
        checkpoint_sequential(layers, 3, x, use_reentrant=use_reentrant).sum().backward()
    assert m.counts["forward"]["checkpoint"] == 2
    assert m.counts["recompute"]["tanh"] == 4  # segments [0, 2) and [2, 4); [4, 6) is not
    assert m.flops["recompute"] == 4 * 3  # four tanh of 3 elements, one FLOP each


def test_reentrant_recompute_with_different_shape_raises_naming_op():
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        h = h.exp()
        if state["calls"] > 1:  # the recomputation takes another path
            h = h.reshape(-1)
        return h.sum(axis=-1)
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    y = checkpoint(flaky, x, use_reentrant=True)
    with pytest.raises(CheckpointError, match="reshape"):
        y.sum().backward()


def test_non_reentrant_only_needs_the_saved_arrays_to_match():
    # The same flaky function: the arrays it saves (exp's output) are the same, and backward
    # runs through the original graph, so the gradient is right (torch behaves the same).
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        h = h.exp()
        if state["calls"] > 1:
            h = h.reshape(-1)
        return h.sum(axis=-1)
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    checkpoint(flaky, x).sum().backward()
    np.testing.assert_array_equal(x.grad, np.exp(np.ones((2, 3))))


def test_non_reentrant_saved_array_of_another_shape_raises_naming_op():
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        if state["calls"] > 1:
            h = h.reshape(3, 2)
        return (h * h).sum()
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    y = checkpoint(flaky, x)
    with pytest.raises(CheckpointError, match=r"saved array #0: originally op 'mul' saved shape \(2, 3\)"):
        y.backward()


@BOTH
def test_recompute_with_different_dtype_raises(use_reentrant):
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        if state["calls"] > 1:
            h = Tensor(h.data.astype(np.float32), requires_grad=True)
        return h.tanh()
    x = Tensor(np.ones(3), requires_grad=True)
    y = checkpoint(flaky, x, use_reentrant=use_reentrant)
    with pytest.raises(CheckpointError, match="tanh.*float64.*float32"):
        y.sum().backward()
    if use_reentrant:  # unchecked: backward runs (through the recomputed graph)
        state["calls"] = 0
        y = checkpoint(flaky, x, determinism_check=False, use_reentrant=True)
        y.sum().backward()


def test_non_reentrant_count_mismatch_is_named():
    state = {"calls": 0}

    def flaky(h):
        state["calls"] += 1
        h = h.exp()
        return h if state["calls"] > 1 else h.tanh()  # the recomputation saves one array less
    x = Tensor(np.ones(3), requires_grad=True)
    y = checkpoint(flaky, x)
    with pytest.raises(CheckpointError, match="saved 1 arrays for backward but the original forward saved 2.*'tanh'"):
        y.sum().backward()


def test_determinism_check_values():
    x = Tensor(np.ones(3), requires_grad=True)
    for value in ("default", "none", True, False):
        checkpoint(lambda h: h.exp(), x, determinism_check=value).sum().backward()
    with pytest.raises(ValueError, match="determinism_check must be 'default' or 'none'"):
        checkpoint(lambda h: h.exp(), x, determinism_check="strict")
    with pytest.raises(TypeError, match="use_reentrant must be True or False"):
        checkpoint(lambda h: h.exp(), x, use_reentrant="yes")


@BOTH
def test_dropout_masks_replayed_only_with_preserved_rng(use_reentrant):
    def grads(preserve):
        mg.random.manual_seed(3)
        x = Tensor(np.ones((50, 20)), requires_grad=True)
        y = checkpoint(lambda h: F.dropout(h, 0.5), x, preserve_rng_state=preserve,
                       use_reentrant=use_reentrant)
        mg.random.randn(5)  # something else draws in between, as training code does
        y.sum().backward()
        return x.grad, y.data
    g, y = grads(True)
    np.testing.assert_array_equal(g, (y != 0) * 2.0)
    g, y = grads(False)
    assert not np.array_equal(g, (y != 0) * 2.0)


@BOTH
def test_rng_state_after_backward_is_untouched(use_reentrant):
    mg.random.manual_seed(0)
    x = Tensor(np.ones(10), requires_grad=True)
    y = checkpoint(lambda h: F.dropout(h, 0.5), x, use_reentrant=use_reentrant)
    state = mg.random.get_rng_state()
    y.sum().backward()
    assert mg.random.get_rng_state() == state


@BOTH
def test_batchnorm_running_stats_updated_once_unless_asked(use_reentrant):
    x = Tensor(np.random.default_rng(0).standard_normal((16, 3)), requires_grad=True)

    def run(flag, ckpt):
        bn = nn.BatchNorm1d(3, update_stats_on_recompute=flag, dtype=np.float64)
        y = checkpoint(bn, x, use_reentrant=use_reentrant) if ckpt else bn(x)
        y.sum().backward()
        return bn.running_mean.data.copy(), bn.num_batches_tracked
    plain, n_plain = run(False, False)
    safe, n_safe = run(False, True)
    buggy, n_buggy = run(True, True)
    np.testing.assert_array_equal(safe, plain)
    assert n_safe == n_plain == 1 and n_buggy == 2
    np.testing.assert_allclose(buggy, plain * (1 + 0.9))  # updated twice with momentum 0.1


@BOTH
def test_is_recomputing_only_inside_recomputation(use_reentrant):
    seen = []

    def f(h):
        seen.append(is_recomputing())
        return h * h  # saves h: backward needs a recomputation
    x = Tensor(np.ones(2), requires_grad=True)
    checkpoint(f, x, use_reentrant=use_reentrant, early_stop=False).sum().backward()
    assert seen == [False, True] and not is_recomputing()


@BOTH
def test_nested_checkpoints(use_reentrant):
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
        h = checkpoint(inner(0, 2), h, use_reentrant=use_reentrant, early_stop=False)
        h = checkpoint(inner(2, 4), h, use_reentrant=use_reentrant, early_stop=False)
        return inner(4, 6)(h)

    def collect():
        return [x.grad.copy()] + [p.grad.copy() for l in layers for p in l.parameters()]

    nn.Sequential(*layers)(x).sum().backward()
    plain = collect()
    for l in layers:
        l.zero_grad()
    x.grad = None
    with mg.memory.track() as m:
        checkpoint(outer, x, use_reentrant=use_reentrant, early_stop=False).sum().backward()
    for a, b in zip(plain, collect()):
        assert np.array_equal(a, b)
    # layers 0-3 run: forward, outer recompute, inner recompute; layers 4-5: forward + outer recompute
    assert m.counts["forward"]["linear"] == 6
    assert m.counts["recompute"]["linear"] == 6 + 4


@BOTH
def test_second_backward_through_checkpoint_raises(use_reentrant):
    x = Tensor(np.ones(3), requires_grad=True)
    y = checkpoint(lambda h: h.exp(), x, use_reentrant=use_reentrant).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_retain_graph_recomputes_for_each_backward():
    calls = []

    def f(h):
        calls.append(is_recomputing())
        return (h * h).exp()
    x = Tensor(np.array([0.1, 0.2]), requires_grad=True)
    y = checkpoint(f, x).sum()
    y.backward(retain_graph=True)
    first = x.grad.copy()
    y.backward()
    np.testing.assert_array_equal(x.grad, 2 * first)
    assert calls == [False, True, True]  # one recomputation per backward pass


def test_no_grad_checkpoint_is_plain_call():
    x = Tensor(np.ones(3), requires_grad=True)
    with mg.no_grad(), mg.memory.track() as m:
        y = checkpoint(lambda h: h.exp(), x)
    assert not y.requires_grad and m.counts["forward"]["checkpoint"] == 0


def test_early_stop_skips_what_follows_the_last_saved_array():
    # torch's test_nested_checkpoint_set_early_stop: clone-like work after the last save.
    calls = []

    def fn(h):
        h = h.exp()                       # saves its output
        calls.append(1)
        return h.reshape(-1)              # saves nothing
    for early, ctx_value, expected in [(True, None, 1), (False, None, 2), (True, False, 2),
                                       (False, True, 1)]:
        calls.clear()
        x = Tensor(np.ones((2, 2)), requires_grad=True)
        if ctx_value is None:
            y = checkpoint(fn, x, early_stop=early)
        else:
            with set_checkpoint_early_stop(ctx_value):  # overrides the argument, as in torch
                y = checkpoint(fn, x, early_stop=early)
        y.sum().backward()
        assert len(calls) == expected, (early, ctx_value)


def test_revolve_plan_is_walked_by_the_schedule_executor():
    plan = mg.plan.revolve(6, 2)
    layers = [nn.Tanh() for _ in range(6)]
    x = Tensor(np.array([0.1, 0.2]), requires_grad=True)
    checkpoint_sequential(layers, plan, x).sum().backward()
    g = x.grad.copy()
    x.grad = None
    nn.Sequential(*layers)(x).sum().backward()
    assert np.array_equal(g, x.grad)


def test_rebuilt_arrays_are_let_go_after_each_backward_even_when_retained():
    # torch's rule: recomputed arrays belong to one backward pass, retain_graph or not.
    x = Tensor(np.ones((8, 8)), requires_grad=True)
    before = mg.memory.live_bytes()["activations"]
    y = checkpoint(lambda h: (h * h).exp().tanh(), x).sum()
    kept = mg.memory.live_bytes()["activations"] - before
    assert kept == x.nbytes  # only the checkpoint's input
    y.backward(retain_graph=True)
    assert mg.memory.live_bytes()["activations"] - before == kept
    y.backward()
    del y
    assert mg.memory.live_bytes()["activations"] == before


def test_non_reentrant_peaks_match_reentrant_activations_and_never_exceed_its_total():
    # The same arrays are saved and rebuilt; the reentrant variant's inner backward holds
    # more gradient temporaries at once.
    mg.random.manual_seed(0)
    layers = [nn.Linear(16, 16, dtype=np.float64) for _ in range(4)]
    x = Tensor(np.ones((32, 16)), requires_grad=True)

    def peaks(use_reentrant):
        with mg.memory.track(record_timeline=False) as m:
            y = checkpoint(nn.Sequential(*layers), x, use_reentrant=use_reentrant)
            y.backward(np.ones(y.shape))
        x.grad = None
        for layer in layers:
            layer.zero_grad()
        return m.peak["activations"] - m.start["activations"], m.peak["total"] - m.start["total"]
    (act_nr, total_nr), (act_r, total_r) = peaks(False), peaks(True)
    assert act_nr == act_r and total_nr <= total_r


@pytest.mark.parametrize("name", ["use_reentrant", "preserve_rng_state", "early_stop"])
def test_flags_must_be_booleans(name):
    # "no" is truthy: it would have meant True without a word
    x = Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=f"checkpoint: {name} must be True or False, got 'no'"):
        checkpoint(F.tanh, x, **{name: "no"})
    with pytest.raises(TypeError, match="checkpoint: use_reentrant must be True or False"):
        checkpoint_sequential([F.tanh, F.exp], 2, x, use_reentrant="no")  # checked by each checkpoint
    with pytest.raises(TypeError, match="run_schedule: preserve_rng_state must be True or False"):
        checkpoint_sequential([F.tanh, F.exp], mg.plan.revolve(2, 1), x, preserve_rng_state="no")
