"""Every op's backward against central differences in float64, plus shape errors."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.ops as F
from minigrad import Tensor

RNG = np.random.default_rng(0)


def numeric_grad(f, arrays, i, eps=1e-6):
    """d sum(f * w) / d arrays[i] by central differences (w fixed by the caller through f)."""
    x = arrays[i]
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        j = it.multi_index
        old = x[j]
        x[j] = old + eps
        fp = f(*arrays)
        x[j] = old - eps
        fm = f(*arrays)
        x[j] = old
        g[j] = (fp - fm) / (2 * eps)
    return g


def check(fn, *shapes, grad_inputs=None, arrays=None, tol=1e-6, seed=0):
    """Compare minigrad's gradients of sum(fn(*xs) * w) with central differences."""
    rng = np.random.default_rng(seed)
    arrays = arrays if arrays is not None else [rng.standard_normal(s) for s in shapes]
    grad_inputs = range(len(arrays)) if grad_inputs is None else grad_inputs
    out_shape = fn(*[Tensor(a) for a in arrays]).shape
    w = rng.standard_normal(out_shape)

    def scalar(*arrs):
        with mg.no_grad():
            return float((fn(*[Tensor(a) for a in arrs]).data * w).sum())

    ts = [Tensor(a.copy(), requires_grad=(i in grad_inputs)) for i, a in enumerate(arrays)]
    out = fn(*ts)
    assert out.dtype == np.float64
    (out * Tensor(w)).sum().backward()
    for i in grad_inputs:
        num = numeric_grad(scalar, [a.copy() for a in arrays], i)
        assert ts[i].grad is not None, f"input {i} got no gradient"
        assert ts[i].grad.shape == arrays[i].shape
        np.testing.assert_allclose(ts[i].grad, num, rtol=tol, atol=tol, err_msg=f"input {i}")


def test_add_broadcast():
    check(F.add, (3, 4), (4,))
    check(F.add, (2, 1, 4), (3, 1))


def test_sub_mul_div():
    check(F.sub, (3, 4), (3, 1))
    check(F.mul, (3, 4), (1, 4))
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)), rng.uniform(0.5, 2.0, (3, 4))
    check(F.div, arrays=[a, b])


def test_neg_pow():
    check(F.neg, (5,))
    rng = np.random.default_rng(2)
    check(lambda a: F.pow(a, 3.0), arrays=[rng.standard_normal((4,))])
    check(lambda a: a ** 0.5, arrays=[rng.uniform(0.5, 2.0, (4,))])


def test_matmul():
    check(F.matmul, (3, 4), (4, 5))
    check(F.matmul, (2, 3, 4), (4, 5))      # folded batch path
    check(F.matmul, (2, 3, 4), (2, 4, 5))   # batched
    check(F.matmul, (2, 3, 4), (1, 4, 5))   # broadcast batch


def test_linear():
    check(F.linear, (2, 3, 4), (5, 4), (5,))
    check(lambda x, w: F.linear(x, w), (3, 4), (5, 4))


def test_sum_mean():
    check(lambda a: F.sum(a), (3, 4))
    check(lambda a: F.sum(a, axis=1), (3, 4, 2))
    check(lambda a: F.sum(a, axis=(0, 2), keepdims=True), (3, 4, 2))
    check(lambda a: F.mean(a), (3, 4))
    check(lambda a: F.mean(a, axis=-1), (3, 4))


def test_reshape_transpose_permute_getitem():
    check(lambda a: F.reshape(a, 4, 3), (3, 4))
    check(lambda a: F.reshape(a, (-1,)), (3, 4))
    check(lambda a: F.transpose(a, 0, 2), (2, 3, 4))
    check(lambda a: a.T, (3, 4))
    check(lambda a: F.permute(a, 2, 0, 1), (2, 3, 4))
    check(lambda a: a[1], (3, 4))
    check(lambda a: a[:, 1:3], (3, 4))
    check(lambda a: a[np.array([0, 2, 0])], (3, 4))


def test_elementwise():
    rng = np.random.default_rng(3)
    check(F.exp, (3, 4))
    check(F.log, arrays=[rng.uniform(0.5, 2.0, (3, 4))])
    check(F.tanh, (3, 4))
    # relu: keep away from 0 where it is not differentiable
    x = rng.standard_normal((3, 4))
    x[np.abs(x) < 0.1] = 0.5
    check(F.relu, arrays=[x])
    check(F.gelu, (3, 4))


def test_softmax_family():
    check(F.softmax, (3, 5))
    check(lambda a: F.softmax(a, dim=0), (3, 5))
    check(F.log_softmax, (3, 5))
    check(lambda a: F.log_softmax(a, dim=1), (2, 3, 4))


def test_layer_norm():
    check(lambda x, w, b: F.layer_norm(x, 5, w, b), (2, 3, 5), (5,), (5,))
    check(lambda x: F.layer_norm(x, 5), (4, 5))


def test_batch_norm_train_and_eval():
    rng = np.random.default_rng(4)

    def train(x, w, b):
        return F.batch_norm(x, None, None, w, b, training=True)
    check(train, (6, 3), (3,), (3,))
    check(train, (4, 3, 5), (3,), (3,))
    rm, rv = rng.standard_normal(3), rng.uniform(0.5, 2.0, 3)

    def evaluate(x, w, b):
        return F.batch_norm(x, rm, rv, w, b, training=False)
    check(evaluate, (6, 3), (3,), (3,))


def test_batch_norm_running_stats_update_in_place():
    x = np.random.default_rng(5).standard_normal((8, 3))
    rm, rv = np.zeros(3), np.ones(3)
    F.batch_norm(Tensor(x), rm, rv, training=True, momentum=0.1)
    np.testing.assert_allclose(rm, 0.1 * x.mean(0))
    np.testing.assert_allclose(rv, 0.9 + 0.1 * x.var(0, ddof=1))
    before = rm.copy()
    F.batch_norm(Tensor(x), rm, rv, training=True, update_stats=False)
    np.testing.assert_array_equal(rm, before)


def test_dropout_gradient_with_fixed_mask():
    def f(x):
        mg.random.manual_seed(7)  # the same mask at every evaluation
        return F.dropout(x, 0.3, training=True)
    check(f, (4, 6))
    x = Tensor(np.ones((200, 50)))
    y = F.dropout(x, 0.3)
    kept = y.data != 0
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_allclose(y.data[kept], 1 / 0.7)
    assert F.dropout(x, 0.3, training=False) is x


def test_embedding():
    idx = np.array([[0, 2, 2], [1, 0, 3]])
    check(lambda w: F.embedding(idx, w), (4, 3))


def test_attention():
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (2, 3, 4), (2, 5, 4), (2, 5, 2))
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          (1, 2, 4, 3), (1, 2, 4, 3), (1, 2, 4, 3))


def test_attention_causal_matches_masked_softmax():
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    out = F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), is_causal=True).data
    s = q @ k.transpose(0, 2, 1) / np.sqrt(3)
    s[:, np.triu(np.ones((4, 4), bool), 1)] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, p @ v, rtol=1e-12)


def test_losses():
    target = np.array([1, 0, 3])
    check(lambda z: F.cross_entropy(z, target), (3, 4))
    check(lambda z: F.cross_entropy(z, target.reshape(1, 3)), (1, 3, 4))
    rng = np.random.default_rng(8)
    y = rng.standard_normal((3, 4))
    check(lambda a: F.mse_loss(a, Tensor(y)), (3, 4))
    check(F.mse_loss, (3, 4), (3, 4))


def test_float32_stays_float32():
    rng = np.random.default_rng(9)
    x = Tensor(rng.standard_normal((2, 4, 8)).astype(np.float32), requires_grad=True)
    w = Tensor(rng.standard_normal((8,)).astype(np.float32), requires_grad=True)
    ops = [
        lambda: x * 2.0 + 1.0 - x / 3.0, lambda: F.gelu(x), lambda: F.relu(x), lambda: F.tanh(x),
        lambda: F.exp(x), lambda: F.softmax(x), lambda: F.log_softmax(x),
        lambda: F.layer_norm(x, 8, w, w), lambda: F.dropout(x, 0.2), lambda: x.mean(axis=1),
        lambda: F.scaled_dot_product_attention(x, x, x, is_causal=True), lambda: x ** 2,
    ]
    for op in ops:
        y = op()
        assert y.dtype == np.float32
        x.grad = w.grad = None
        y.sum().backward()
        assert x.grad.dtype == np.float32


@pytest.mark.parametrize("fn, a, b", [
    (F.add, (3, 4), (5,)), (F.sub, (2, 3), (3, 2)), (F.mul, (4,), (3,)), (F.div, (2, 2), (3,)),
    (F.matmul, (3, 4), (5, 6)), (F.mse_loss, (3, 4), (4, 3)),
])
def test_mismatched_shapes_name_both(fn, a, b):
    with pytest.raises(ValueError) as e:
        fn(Tensor(np.zeros(a)), Tensor(np.zeros(b)))
    assert str(a) in str(e.value) and str(b) in str(e.value)


def test_other_bad_inputs():
    x = Tensor(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(5, 2\)"):
        F.reshape(x, 5, 2)
    with pytest.raises(ValueError, match="normalized_shape"):
        F.layer_norm(x, 5)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        F.cross_entropy(x, np.array([0, 1, 4]))
    with pytest.raises(ValueError, match="integer"):
        F.embedding(np.array([0.5]), x)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        F.dropout(x, 1.0)
    with pytest.raises(ValueError, match="permutation"):
        F.permute(x, 0, 0)


# --- regressions found by review: named errors instead of NumPy's, no silent truncation --------
@pytest.mark.parametrize("call, exc, msg", [
    (lambda x: x.sum(axis=5), ValueError, r"sum: axis=5 is out of range for a tensor of shape \(3, 4\) \(allowed: -2 \.\. 1\)"),
    (lambda x: x.sum(axis=1.5), TypeError, r"sum: axis must be an int, got 1\.5"),
    (lambda x: x.sum(axis=(0, -2)), ValueError, r"sum: axis \(0, -2\) names a dimension twice"),
    (lambda x: x.mean(axis=-3), ValueError, r"mean: axis=-3 is out of range"),
    (lambda x: F.softmax(x, 2), ValueError, r"softmax: dim=2 is out of range"),
    (lambda x: F.log_softmax(x, -3), ValueError, r"log_softmax: dim=-3 is out of range"),
    (lambda x: x.transpose(0, 3), ValueError, r"transpose: dim1=3 is out of range"),
    (lambda x: x.permute(0, 5), ValueError, r"permute: dim=5 is out of range"),
    (lambda x: x.permute(0, 1, 2), ValueError, r"not a permutation"),
    (lambda x: x.reshape(2.5, 4), TypeError, r"reshape: the new shape must be integers, got \(2\.5, 4\)"),
    (lambda x: x[5], IndexError, r"getitem: index 5 is not valid for a tensor of shape \(3, 4\)"),
    (lambda x: F.linear(x, Tensor(np.ones((2, 4))), [1.0, 2.0]), TypeError, r"linear: bias must be a Tensor, got list"),
])
def test_bad_dims_and_indices_name_the_op_and_the_shape(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(Tensor(np.zeros((3, 4))))


def test_reshape_refuses_sizes_that_would_have_been_rounded():
    # int(3.7) == 3 made x.reshape(3.7, 4) silently succeed on a (3, 4) tensor
    with pytest.raises(TypeError, match="refused, not rounded"):
        Tensor(np.zeros((3, 4))).reshape(3.7, 4)
    assert Tensor(np.zeros((3, 4))).reshape(np.int64(4), 3).shape == (4, 3)


def test_permute_refuses_out_of_range_dims_that_wrap_to_a_permutation():
    # 5 % 2 == 1 made permute(0, 5) on a 2-d tensor silently the identity
    with pytest.raises(ValueError, match="out of range"):
        F.permute(Tensor(np.zeros((3, 4))), 0, 5)


def test_causal_attention_aligns_the_mask_at_the_top_left_like_torch():
    """torch's is_causal for T != S masks keys j > i (the mask's top-left corner), not the
    bottom-right one; with T > S the last queries then still see every key."""
    rng = np.random.default_rng(3)
    for t, s in [(3, 5), (5, 3), (4, 4)]:
        q, k, v = rng.standard_normal((2, t, 4)), rng.standard_normal((2, s, 4)), rng.standard_normal((2, s, 2))
        out = F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), is_causal=True).data
        scores = q @ k.transpose(0, 2, 1) / 2.0
        scores[:, np.triu(np.ones((t, s), bool), 1)] = -np.inf
        p = np.exp(scores - scores.max(-1, keepdims=True))
        np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-12)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (2, 3, 4), (2, 5, 4), (2, 5, 2))


def test_a_number_operand_is_a_constant_and_saves_no_array():
    """``x * 2.0`` and ``x / 2.0`` keep the number on the node, not a 0-d array (torch saves
    no tensor for a Python scalar); dtype and gradients are unchanged."""
    x = Tensor(np.array([1.0, -2.0], np.float32), requires_grad=True)
    for y in (x * 2.0, 2.0 * x, x / 2.0, 3 * x, x * np.float64(2.0)):
        assert y.dtype == np.float32
        assert mg.autograd.saved_arrays(y) == []
    z = 2.0 / x                                   # d/dx needs x (saved) and the constant 2
    assert [a is x.data for a in mg.autograd.saved_arrays(z)] == [True]
    z.sum().backward()
    np.testing.assert_allclose(x.grad, -2.0 / x.data ** 2)
    check(lambda a: a * 3.0 - 1.5 / (a * a + 1.0) + 2 * a, (3, 4))
    check(lambda a: a * Tensor(np.array(2.0)), (3,))  # a 0-d *tensor* is saved, as in torch
    w = Tensor(np.array(2.0), requires_grad=True)
    assert len(mg.autograd.saved_arrays(x * Tensor(np.array(2.0, np.float32)))) == 1
    assert len(mg.autograd.saved_arrays(w * 2.0)) == 0
