"""PyTorch's own checkpoint tests, ported to minigrad where the feature exists.

From torch's test/test_utils.py (class TestCheckpoint) and test/test_autograd.py
(test_checkpointing_*, test_checkpoint_*, class TestNestedCheckpoint). Each test keeps
torch's name and checks what torch checks; where minigrad's API differs (arrays in
``Function.forward``, ``minigrad.grad`` for ``torch.autograd.grad``, the ledger instead
of CUDA memory stats) the adaptation is noted. Not ported: create_graph / double
backward, CUDA and autocast, context_fn, tensor hooks, ``torch.compile``, DataParallel,
the curried ``checkpoint(use_reentrant=False)(fn)`` form, and reentrant multi-output
functions (minigrad's reentrant Checkpoint returns one Tensor).
"""
import random
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import Function, Tensor, memory, nn
from minigrad.checkpoint import CheckpointError, checkpoint, set_checkpoint_early_stop
from minigrad.checkpoint import checkpoint_sequential

BOTH = pytest.mark.parametrize("use_reentrant", [True, False])


def randn(*shape, requires_grad=False, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=requires_grad)


def mlp():
    mg.random.manual_seed(0)
    return nn.Sequential(nn.Linear(100, 50, dtype=np.float64), nn.ReLU(),
                         nn.Linear(50, 20, dtype=np.float64), nn.ReLU(),
                         nn.Linear(20, 5, dtype=np.float64), nn.ReLU())


# --- test_utils.py: TestCheckpoint ----------------------------------------------------------
def _check_checkpoint_sequential(model, module_lists_to_compare, num_chunks, input, use_reentrant):
    out = model(input)
    out_not_checkpointed = out.data.copy()
    model.zero_grad()
    out.sum().backward()
    grad_not_checkpointed = {n: p.grad.copy() for n, p in model.named_parameters()}
    input_grad_not_checkpointed = input.grad.copy()
    for model_to_compare in module_lists_to_compare:
        detached = Tensor(input.data, requires_grad=True)
        out = checkpoint_sequential(model_to_compare, num_chunks, detached, use_reentrant=use_reentrant)
        out_checkpointed = out.data.copy()
        model.zero_grad()
        out.sum().backward()
        np.testing.assert_array_equal(out_checkpointed, out_not_checkpointed)
        np.testing.assert_array_equal(detached.grad, input_grad_not_checkpointed)
        for n, p in model.named_parameters():
            np.testing.assert_array_equal(p.grad, grad_not_checkpointed[n])


@BOTH
def test_checkpoint_trigger(use_reentrant):
    class Net(nn.Module):
        def __init__(self):
            self.counter = 0

        def forward(self, input_var):
            self.counter += 1
            return input_var * Tensor(np.array(2.0))  # a mul that saves something

    modules = [Net() for _ in range(10)]
    input_var = randn(3, 4, requires_grad=True)
    out = checkpoint_sequential(modules, 2, input_var, use_reentrant=use_reentrant)
    assert all(m.counter == 1 for m in modules)
    out.sum().backward()
    assert all(m.counter == 2 for m in modules[:5])
    assert all(m.counter == 1 for m in modules[5:])


def test_checkpoint_valid():
    model = mlp()
    input_var = randn(1, 100, requires_grad=True)
    modules = list(model)
    out = checkpoint_sequential(modules, 2, input_var, use_reentrant=True)
    with pytest.raises(RuntimeError, match="incompatible with grad"):
        mg.grad(out, [input_var], grad_outputs=[np.ones((1, 5))])
    # works with use_reentrant=False, and the gradients are the same
    out = model(input_var)
    grads_no_checkpoint = mg.grad(out, [input_var], grad_outputs=[np.ones((1, 5))])
    out_checkpoint = checkpoint_sequential(modules, 2, input_var, use_reentrant=False)
    np.testing.assert_array_equal(out_checkpoint.data, out.data)
    grads_checkpoint = mg.grad(out_checkpoint, [input_var], grad_outputs=[np.ones((1, 5))])
    np.testing.assert_array_equal(grads_checkpoint[0], grads_no_checkpoint[0])


@BOTH
def test_checkpoint(use_reentrant):
    model = mlp()
    _check_checkpoint_sequential(model, [list(model), model], 2, randn(1, 100, requires_grad=True),
                                 use_reentrant)


@BOTH
def test_checkpoint_module_list(use_reentrant):
    class ModuleListNet(nn.Module):
        def __init__(self):
            mg.random.manual_seed(0)
            self.module_list = nn.ModuleList(
                nn.Linear(100, 50, dtype=np.float64), nn.ReLU(), nn.Linear(50, 20, dtype=np.float64),
                nn.ReLU(), nn.Linear(20, 5, dtype=np.float64), nn.ReLU())

        def forward(self, input):
            for layer in self.module_list:
                input = layer(input)
            return input

    model = ModuleListNet()
    _check_checkpoint_sequential(model, [list(model.module_list), model.module_list], 2,
                                 randn(1, 100, requires_grad=True), use_reentrant)


@BOTH
def test_checkpoint_sequential_deprecated_multiple_args(use_reentrant):
    class Two(nn.Module):
        def forward(self, a, b):
            return a, b

    model = nn.Sequential(Two())
    a, b = randn(1, 100, requires_grad=True), randn(1, 100, requires_grad=True)
    with pytest.raises(TypeError):
        checkpoint_sequential(model, 1, a, b, use_reentrant)  # b lands in use_reentrant's place


def test_checkpoint_sequential_deprecated_no_args():
    class Noop(nn.Module):
        def forward(self):
            pass

    with pytest.raises(TypeError):
        checkpoint_sequential(nn.Sequential(Noop()), 1)


@BOTH
def test_checkpoint_rng_cpu(use_reentrant):
    for seed in range(5):
        inp = randn(20000, requires_grad=True, seed=seed)
        phase1, phase2 = nn.Dropout(), nn.Dropout()

        def run_fn(input):
            return phase2(input)

        state = mg.random.get_rng_state()
        out = checkpoint(run_fn, phase1(inp), use_reentrant=use_reentrant)
        out.sum().backward()
        grad_with_checkpointing = inp.grad
        mg.random.set_rng_state(state)
        inp.grad = None
        run_fn(phase1(inp)).sum().backward()
        np.testing.assert_array_equal(grad_with_checkpointing, inp.grad)


def test_checkpoint_non_tensor():
    def run_fn(tensor1, tensor2):
        if tensor2 is None:
            return tensor1
        return tensor1 + tensor2

    input_var = randn(1, 100, requires_grad=True)
    checkpoint(run_fn, input_var, None, use_reentrant=True).sum().backward()
    np.testing.assert_array_equal(input_var.grad, np.ones((1, 100)))


def test_checkpoint_non_tensor_inputs_outputs():
    # torch runs this with use_reentrant=True; minigrad's reentrant Checkpoint returns one
    # Tensor, so the multi-output version runs without reentrance.
    def foo(t1, t2, scale, t3):
        t4 = t1 + t2 * t3
        t5 = t1 * t2 + t3
        t4 = t4 * scale
        t5 = t5 * scale
        return scale, t4, None, True, t5, "bar", t1

    t1, t2 = randn(10, requires_grad=True, seed=1), randn(10, requires_grad=True, seed=2)
    t3 = randn(10, seed=3)
    scale = random.Random(0).randint(0, 10)
    res = checkpoint(foo, t1, t2, scale, t3)
    assert res[0] == scale and res[2] is None and res[3] is True and res[5] == "bar"
    np.testing.assert_allclose(res[1].data, ((t1 + t2 * t3) * scale).data)
    np.testing.assert_allclose(res[4].data, ((t1 * t2 + t3) * scale).data)
    assert res[6] is t1
    res[1].sum().backward(retain_graph=True)
    res[4].sum().backward(retain_graph=True)
    res[6].sum().backward()
    t1_grad, t2_grad = t1.grad.copy(), t2.grad.copy()
    t1.grad = t2.grad = None
    res = foo(t1, t2, scale, t3)
    for r in (res[1], res[4], res[6]):
        r.sum().backward(retain_graph=True)
    np.testing.assert_allclose(t1.grad, t1_grad)
    np.testing.assert_allclose(t2.grad, t2_grad)


def test_checkpoint_no_tensors():
    def foo(t1, t2, scale, t3):
        t4 = t1 + t2 * t3
        t5 = t1 * t2 + t3
        return scale, t4 * scale, None, True, t5 * scale, "bar", t1

    rng = random.Random(1)
    t1, t2, t3 = rng.random(), rng.random(), rng.random()
    scale = rng.randint(0, 10)
    res = checkpoint(foo, t1, t2, scale, t3)  # nothing to differentiate: a plain call
    assert res == foo(t1, t2, scale, t3)


def test_checkpoint_partial_grad():
    def run_fn2(tensor1, tensor2):
        return tensor1

    input_var, input_var2 = randn(1, 4), randn(1, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"none of output has requires_grad=True, this checkpoint\(\) "
                                           r"is not necessary"):
        out = checkpoint(run_fn2, input_var, input_var2, use_reentrant=True)
        out.sum().backward()


def test_checkpointing_without_reentrant_early_free():
    # torch checks CUDA memory after each gradient hook; here the ledger's saved activations
    # after each backward node: a checkpointed backward frees as it goes, like a plain one.
    def test_fn(x):
        for _ in range(4):
            x = x ** 2
        return x.sum()

    def freed_per_node(fn):
        x = Tensor(np.full(10, 0.5), requires_grad=True)
        with memory.track() as m:
            fn(x).backward()
        return [ev.live["activations"] for ev in m.timeline if ev.phase == "backward"]

    plain = freed_per_node(test_fn)
    ckpt = freed_per_node(lambda x: checkpoint(test_fn, x))
    assert plain == sorted(plain, reverse=True)
    # the checkpoint holds only its input until the first node needs its arrays; from then on
    # every node frees its rebuilt arrays exactly as the plain backward frees its saved ones
    assert ckpt[0] < plain[0] and ckpt[1:] == plain[1:]


def test_checkpoint_not_preserve_rng_state_and_without_reentrant():
    inp = randn(2, requires_grad=True)
    out = checkpoint(nn.Dropout(), inp, use_reentrant=False, preserve_rng_state=False)
    out.sum().backward()
    assert inp.grad is not None


# --- test_autograd.py -----------------------------------------------------------------------
def test_checkpointing_without_reentrant_custom_function_works():
    msg = "Unpack is being triggered for a tensor that was already unpacked once"

    class MyFunc(Function):
        @staticmethod
        def forward(ctx, x, y, z):
            w = x * y * z
            out = w + w
            ctx.save_for_backward(x, y, z, w, out)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            x, y, z, w, out = ctx.saved_tensors
            # a second access raises: recomputed arrays are cleared as they are unpacked
            with pytest.raises(CheckpointError, match=msg):
                ctx.saved_tensors
            return x, y, z

    x, y, z = (Tensor(np.array(v), requires_grad=True) for v in (1.0, 2.0, 3.0))

    def foo(x, y, z):
        x = x * y * z
        y = y * y * z
        z = z * z
        return MyFunc.apply(x, y, z)

    checkpoint(foo, x, y, z, use_reentrant=False).sum().backward()


def test_checkpoint_detects_non_determinism():
    def save_3_tensors(x):
        out = x.tanh().exp()
        return out.tanh()

    def save_2_tensors(x):
        return x.tanh().exp()

    def save_2_tensors_alt(x):
        return x.tanh() * Tensor(np.array([1.0, 2.0]))

    def get_non_det_fn(orig_fn, recompute_fn):
        counter = [0]

        def fn(x):
            if counter[0] == 0:
                counter[0] += 1
                return orig_fn(x)
            return recompute_fn(x)
        return fn

    a = randn(1, requires_grad=True)
    # save fewer tensors during recompute
    fn = get_non_det_fn(orig_fn=save_3_tensors, recompute_fn=save_2_tensors)
    with pytest.raises(CheckpointError, match="saved 2 arrays for backward but the original forward saved 3"):
        checkpoint(fn, a, use_reentrant=False).sum().backward()
    # save more tensors during recompute
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    with set_checkpoint_early_stop(False):
        with pytest.raises(CheckpointError, match="saved more arrays for backward than the original"):
            checkpoint(fn, a, use_reentrant=False).sum().backward()
    # with early stopping (the default) this does not raise, and the result is right
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_3_tensors)
    checkpoint(fn, a, use_reentrant=False).sum().backward()
    # the same number of tensors, but a different shape
    fn = get_non_det_fn(orig_fn=save_2_tensors, recompute_fn=save_2_tensors_alt)
    with pytest.raises(CheckpointError, match="recomputation differs from the original forward at saved array"):
        checkpoint(fn, a, use_reentrant=False).sum().backward()


def test_access_saved_tensor_twice_without_recomputation_works():
    count = [0]

    def foo(a):
        count[0] += 1
        b = a * a
        c = a * b
        return c.exp()

    a = randn(5, requires_grad=True)
    d = checkpoint(foo, a, use_reentrant=False)
    assert count[0] == 1
    # outside backward, each access recomputes (and the recomputed arrays are let go)
    d._ctx.saved_tensors
    assert count[0] == 2
    d._ctx.saved_tensors
    assert count[0] == 3
    d.sum().backward()
    assert count[0] == 4
    with pytest.raises(RuntimeError, match="directly access saved tensors after they have already been freed"):
        d._ctx.saved_tensors


@pytest.mark.parametrize("input_requires_grad", [True, False])
def test_checkpointing_without_reentrant(input_requires_grad):
    mg.random.manual_seed(0)
    module = nn.Sequential(nn.Linear(10, 100, dtype=np.float64), nn.ReLU(), nn.Linear(100, 10, dtype=np.float64))

    class MyModule(nn.Module):
        def __init__(self, mod):
            self.module = mod

        def forward(self, data):
            return self.module(data)

    module = MyModule(module)
    feat, feat_plain = [], []
    rng = np.random.default_rng(0)
    for _ in range(50):
        data_r = Tensor(rng.uniform(size=(1, 10)), requires_grad=input_requires_grad)
        feat.append(checkpoint(module, data=data_r, use_reentrant=False))  # kwargs
        feat_plain.append(module(data_r))
    def mean_of(feats):
        total = feats[0]
        for f in feats[1:]:
            total = total + f
        return total.mean()
    mean_of(feat).backward()
    grads = [p.grad.copy() for p in module.parameters()]
    module.zero_grad()
    mean_of(feat_plain).backward()
    for g, p in zip(grads, module.parameters()):
        np.testing.assert_allclose(g, p.grad, rtol=1e-12)


def test_checkpoint_valid_reset_on_error():
    a = randn(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="incompatible with grad"):
        b = checkpoint(lambda t: t.exp(), a, use_reentrant=True).sum()
        mg.grad(b, [a])
    c = checkpoint(lambda t: t.exp(), a, use_reentrant=True).sum()
    c.backward()
    np.testing.assert_allclose(a.grad, np.exp(a.data))


@BOTH
def test_checkpointing_without_reentrant_detached_tensor(use_reentrant):
    class NoGradModule(nn.Module):
        def __init__(self):
            mg.random.manual_seed(0)
            self.linear = nn.Linear(2, 2, bias=False, dtype=np.float64)
            self.lin2 = nn.Linear(2, 2, bias=False, dtype=np.float64)

        def forward(self, x):
            with mg.no_grad():
                return self.lin2(self.linear(x))

    module = NoGradModule()
    a = randn(2, 2, requires_grad=True)
    for _ in range(3):
        if use_reentrant:
            with pytest.raises(RuntimeError, match="none of output has requires_grad=True"):
                out = checkpoint(module, a, use_reentrant=True)
                out = out + a
                out.sum().backward()
        else:
            out = checkpoint(module, a, use_reentrant=False)
            assert not out.requires_grad  # the output does not require grad
            out = out + a
            out.sum().backward()


def test_checkpointing_without_reentrant_saved_object_identity():
    x_backward = None

    class Test(Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x

        @staticmethod
        def backward(ctx, x):
            nonlocal x_backward
            (x_backward,) = ctx.saved_tensors
            return x, None

    a = Tensor(np.array(1.0), requires_grad=True)
    b = Tensor(np.array(1.0))
    Test.apply(a, b).backward()
    assert x_backward is b.data  # minigrad saves arrays: the very same array object
    x_backward = None
    checkpoint(Test.apply, a, b, use_reentrant=False).backward()
    assert x_backward is b.data


def test_checkpointing_without_reentrant_correct_grad():
    a = randn(2, 2, requires_grad=True)
    a.exp().sum().backward()
    b_grad = a.grad.copy()
    a.grad = None
    checkpoint(lambda t: t.exp(), a, use_reentrant=False).sum().backward()
    c_grad = a.grad.copy()
    a.grad = None
    d = checkpoint(lambda t: t.exp(), a, use_reentrant=False).sum()
    (d_grad,) = mg.grad(d, [a])
    np.testing.assert_array_equal(b_grad, c_grad)
    np.testing.assert_array_equal(b_grad, d_grad)


def test_checkpointing_without_reentrant_parameter_used_in_an_out():
    # torch counts gradient hooks; minigrad checks the gradient itself
    w = randn(10, 10, requires_grad=True, seed=1)
    x = randn(10, 10, requires_grad=True, seed=2)
    h = w * x  # w used outside the checkpoint
    checkpoint(lambda t: w * t, h, use_reentrant=False).sum().backward()  # and inside
    got = w.grad.copy()
    w.grad = None
    (w * (w * x)).sum().backward()
    np.testing.assert_array_equal(got, w.grad)


def test_checkpointing_without_reentrant_arbitrary_input_output():
    class MyModel(nn.Module):
        def __init__(self):
            mg.random.manual_seed(0)
            self.layer = nn.Linear(5, 5, bias=False, dtype=np.float64)

        def forward(self, dict_input):
            return {"result": self.layer(dict_input["tensor"])}

    model_no_checkpoint, model_checkpoint = MyModel(), MyModel()
    inp = {"tensor": randn(5, 5)}
    out_no_checkpoint = model_no_checkpoint(inp)["result"].sum()
    out_checkpoint = checkpoint(model_checkpoint, inp, use_reentrant=False)["result"].sum()
    assert out_checkpoint.item() == out_no_checkpoint.item()
    out_no_checkpoint.backward()
    out_checkpoint.backward()
    for p, q in zip(model_no_checkpoint.parameters(), model_checkpoint.parameters()):
        np.testing.assert_array_equal(p.grad, q.grad)


# --- test_autograd.py: TestNestedCheckpoint (first-order: no create_graph in minigrad) ----------
def c(fn):
    def wrapped(*args, **kwargs):
        return checkpoint(fn, *args, use_reentrant=False, **kwargs)
    return wrapped


def grad(fn):
    def wrapper(x):
        with mg.enable_grad():
            out = fn(x)
            (grad_input,) = mg.grad(out, [x])
        return grad_input
    return wrapper


def graph_dies(fn):
    """After the output is dropped, no saved activation of the call is left."""
    before = memory.live_bytes()["activations"]
    a = Tensor(np.array(0.7), requires_grad=True)
    out = fn(a)
    del out
    return memory.live_bytes()["activations"] == before


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint(early_stop):
    with set_checkpoint_early_stop(early_stop):
        x = Tensor(np.array(0.3), requires_grad=True)

        def f(x):
            return x.tanh().exp().tanh()

        def g(x):
            a = x.tanh().exp().tanh()
            b = x.tanh().exp().tanh()
            mg.grad(a.sum(), [x])
            mg.grad(b.sum(), [x])
            return x.tanh()

        for fn in (f, g):
            expected = grad(lambda t: fn(t).sum())(x)
            for actual_fn in (c(fn), c(c(fn))):
                actual = grad(lambda t: actual_fn(t).sum())(x)
                np.testing.assert_allclose(actual, expected, rtol=1e-12)
                assert graph_dies(actual_fn)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_two_children(early_stop):
    with set_checkpoint_early_stop(early_stop):
        def f(x):
            return x.tanh().exp().tanh()

        def g(x):
            return x.exp().tanh().exp()

        def hc(x):
            return c(g)(c(f)(x))

        def h(x):
            return g(f(x))

        a = randn(3, 3, requires_grad=True)
        expected = grad(lambda t: h(t).sum())(a)
        np.testing.assert_allclose(grad(lambda t: c(hc)(t).sum())(a), expected, rtol=1e-12)
        assert graph_dies(c(hc))


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_non_tensor_inputs_and_outputs(early_stop):
    def fn(k, a, b, f):
        return f(k * a * b.exp()), 1, "abcd"

    k = 3
    a, b = Tensor(np.array(2.0), requires_grad=True), Tensor(np.array(3.0), requires_grad=True)

    def f(x):
        return x.tanh()

    with set_checkpoint_early_stop(early_stop):
        out, _, _ = checkpoint(fn, k, a, b, f, use_reentrant=False)
    actual = mg.grad(out, [a, b])
    out, _, _ = fn(k, a, b, f)
    expected = mg.grad(out, [a, b])
    for u, v in zip(actual, expected):
        np.testing.assert_allclose(u, v, rtol=1e-12)


@pytest.mark.parametrize("early_stop", [True, False])
def test_nested_checkpoint_kwargs(early_stop):
    def fn(a, blah=None):
        out = a.tanh().exp()
        if blah is not None:
            out = out * blah
        return out.tanh().exp()

    a, b = Tensor(np.array(2.0), requires_grad=True), Tensor(np.array(3.0), requires_grad=True)
    with set_checkpoint_early_stop(early_stop):
        actual = mg.grad(checkpoint(fn, a, blah=b, use_reentrant=False), [a, b])
        expected = mg.grad(fn(a, blah=b), [a, b])
    for u, v in zip(actual, expected):
        np.testing.assert_allclose(u, v, rtol=1e-12)


def test_checkpoint_zero_arg_function():
    a = Tensor(np.array(2.0), requires_grad=True)

    def fn():
        return a.tanh().exp()

    old_out = checkpoint(fn, use_reentrant=False)
    expected_out = fn()
    assert old_out.item() == expected_out.item()
    np.testing.assert_array_equal(mg.grad(old_out, [a], retain_graph=True)[0],
                                  mg.grad(expected_out, [a])[0])


def test_nested_checkpoint_set_early_stop():
    counter = [0]

    def clone(x):
        counter[0] += 1
        return x + 0.0  # an add saves nothing

    def fn(x):
        # clone saves nothing, so it is recomputed iff early stop is disabled
        return clone(x.tanh().exp())

    for early, ctx_value, expected in [(None, None, 1), (False, None, 2), (True, None, 1),
                                       (None, False, 2), (None, True, 1), (False, True, 1),
                                       (True, False, 2)]:
        counter[0] = 0
        a = Tensor(np.array(1.0), requires_grad=True)
        kw = {} if early is None else {"early_stop": early}
        if ctx_value is None:
            out = checkpoint(fn, a, use_reentrant=False, **kw)
        else:
            with set_checkpoint_early_stop(ctx_value):  # wins over the argument, as in torch
                out = checkpoint(fn, a, use_reentrant=False, **kw)
        out.backward()
        assert counter[0] == expected, (early, ctx_value)


def test_nested_checkpoint_set_early_stop_no_recompution_needed():
    counter = [0]

    def fn(x):
        counter[0] += 1
        return x.tanh()

    def fn2(x):  # the forward saves nothing: unpack is never called, nothing is recomputed
        counter[0] += 1
        return x + 0.0

    for f, calls in ((fn, 2), (fn2, 1)):
        for early in (True, False):
            counter[0] = 0
            a = Tensor(np.array(1.0), requires_grad=True)
            with set_checkpoint_early_stop(early):
                out = checkpoint(f, a, use_reentrant=False)
            out.backward()
            assert counter[0] == calls


def test_warnings_only_where_torch_warns():
    # torch's reentrant checkpoint warns when no input requires grad; non-reentrant does not
    lin = nn.Linear(3, 3)
    x = Tensor(np.ones((1, 3), np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checkpoint(lin, x, use_reentrant=False)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        checkpoint(lin, x, use_reentrant=True)
