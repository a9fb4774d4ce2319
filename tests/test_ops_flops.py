"""FLOP accounting (minigrad.ops' convention, the ledger's m.flops).

Every op's forward and backward count is checked against a count written out here by
hand from the shapes (one FLOP per scalar add/multiply/compare/exp..., ``2 k`` per dot
product of length ``k``), and the matrix products against torch's own FlopCounterMode.
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.ops as F
from minigrad import Tensor, memory, nn


def counts(fn, *shapes, grad=(True,), dtype=np.float64, seed=0):
    """(forward FLOPs, backward FLOPs, {op: forward FLOPs}) of ``fn(*tensors).sum()``
    without the final sum's own FLOPs."""
    rng = np.random.default_rng(seed)
    tensors = [Tensor(rng.uniform(0.5, 2.0, s).astype(dtype),  # positive: log and div are defined
                      requires_grad=(grad[i] if i < len(grad) else True))
               for i, s in enumerate(shapes)]
    with memory.track(record_timeline=False) as m:
        out = fn(*tensors)
        total = out.sum()
        total.backward()
    fwd = m.flops["forward"] - m.flops_by_op["forward"]["sum"]
    bwd = m.flops["backward"] - m.flops_by_op["backward"]["sum"]
    return fwd, bwd, out


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_elementwise_with_broadcasting(op):
    a, b = (4, 3), (3,)  # b broadcast over the 4 rows
    n = 12
    fwd, bwd, _ = counts(getattr(F, op), a, b)
    assert fwd == n
    red_b = n - 3  # summing b's gradient over the broadcast rows
    per_input = {"add": (0, red_b), "sub": (0, n + red_b), "mul": (n, n + red_b), "div": (n, 4 * n + red_b)}
    assert bwd == sum(per_input[op])
    # only the inputs that need a gradient count
    _, bwd_a_only, _ = counts(getattr(F, op), a, b, grad=(True, False))
    assert bwd_a_only == per_input[op][0]


class _Counted(np.ndarray):
    """An array that counts, in ``_Counted.flops``, one FLOP per element of every NumPy
    elementwise operation (ufunc call) it takes part in: the count of what the code runs,
    independent of the number an op's ``flops`` declares."""

    flops = 0

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        if method != "__call__":  # a reduction or an outer product is no elementwise step
            raise NotImplementedError(f"_Counted counts elementwise calls, not {ufunc}.{method}")
        plain = [np.asarray(x) if isinstance(x, _Counted) else x for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(np.asarray(o) if isinstance(o, _Counted) else o for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        _Counted.flops += int(np.size(result))
        return result.view(_Counted) if isinstance(result, np.ndarray) else result


class _Ctx:
    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays


def ufunc_flops(op, a, g):
    """(forward, backward) elementwise operations the op's NumPy code runs on ``a``."""
    ctx = _Ctx()
    _Counted.flops = 0
    op.forward(ctx, a.view(_Counted))
    fwd = _Counted.flops
    ctx.saved_tensors = tuple(t.view(_Counted) for t in getattr(ctx, "saved_tensors", ()))
    _Counted.flops = 0
    op.backward(ctx, g.view(_Counted))
    return fwd, _Counted.flops


@pytest.mark.parametrize("name, op", [("neg", F.Neg), ("exp", F.Exp), ("log", F.Log),
                                      ("tanh", F.Tanh), ("relu", F.ReLU), ("gelu", F.GELU)])
def test_unary_elementwise(name, op):
    # the declared counts equal the elementwise operations forward and backward really run
    rng = np.random.default_rng(0)
    a, g = rng.uniform(0.5, 2.0, (5, 7)), rng.uniform(0.5, 2.0, (5, 7))
    fwd, bwd, _ = counts(getattr(F, name), (5, 7))
    assert (fwd, bwd) == ufunc_flops(op, a, g)
    assert fwd > 0 and bwd > 0


def test_the_ufunc_counter_counts():
    # the yardstick itself, on code whose count is plain: forward one operation per
    # element, backward two; then an expression of three
    class Square:
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            t = np.multiply(a, 2.0)
            t *= g
            return t

    a = np.ones((5, 7))
    assert ufunc_flops(Square, a, a) == (35, 2 * 35)
    _Counted.flops = 0
    b = a.view(_Counted)
    np.tanh(b * b + 1.0, out=np.empty_like(a))
    assert _Counted.flops == 3 * 35


def test_pow():
    fwd, bwd, _ = counts(lambda a: a ** 3, (2, 5))
    assert (fwd, bwd) == (10, 30)


@pytest.mark.parametrize("sa, sb, m_, n_, k, batch", [((3, 4), (4, 5), 3, 5, 4, 1),
                                                      ((2, 3, 4), (4, 5), 3, 5, 4, 2),
                                                      ((2, 3, 4), (2, 4, 5), 3, 5, 4, 2)])
def test_matmul_is_two_m_n_k(sa, sb, m_, n_, k, batch):
    fwd, bwd, _ = counts(F.matmul, sa, sb)
    assert fwd == 2 * batch * m_ * n_ * k
    assert bwd == 2 * fwd  # a gradient for each operand, each a product of the same size
    _, bwd_a, _ = counts(F.matmul, sa, sb, grad=(True, False))
    assert bwd_a == fwd


def test_linear_product_and_bias():
    # x (2, 3, 4) -> M = 6 rows, in 4, out 5
    fwd, bwd, _ = counts(lambda x, w, b: F.linear(x, w, b), (2, 3, 4), (5, 4), (5,))
    assert fwd == 2 * 6 * 4 * 5 + 6 * 5
    assert bwd == 2 * 6 * 4 * 5 + 2 * 6 * 4 * 5 + (6 * 5 - 5)
    fwd_nb, _, _ = counts(lambda x, w: F.linear(x, w), (6, 4), (5, 4))
    assert fwd_nb == 2 * 6 * 4 * 5


def test_reductions_and_views():
    x = Tensor(np.ones((4, 6)), requires_grad=True)
    with memory.track(record_timeline=False) as m:
        x.sum(axis=1).backward(np.ones(4))
    assert (m.flops["forward"], m.flops["backward"]) == (4 * 6 - 4, 0)
    assert counts(lambda a: a.mean(axis=0), (4, 6))[:2] == (4 * 6, 6)
    assert counts(lambda a: a.reshape(6, 4).transpose(0, 1).permute(1, 0) * 1.0, (4, 6))[:2] == (24, 24)
    assert counts(lambda a: a[1:3] * 1.0, (4, 6))[:2] == (12, 12)  # basic index: a view, 0
    # integer-array indexing: gradients of picked rows are added back (one add per element)
    assert counts(lambda a: a[[0, 0, 2]] * 1.0, (4, 6))[:2] == (18, 18 + 18)


def test_softmax_family():
    rows, d = 3, 5
    n = rows * d
    assert counts(lambda a: F.softmax(a, -1), (rows, d))[:2] == (5 * n - 2 * rows, 4 * n - rows)
    assert counts(lambda a: F.log_softmax(a, -1), (rows, d))[:2] == (5 * n - rows, 4 * n - rows)


def test_layer_norm():
    rows, d = 4, 6
    n = rows * d
    fwd, bwd, _ = counts(lambda x, w, b: F.layer_norm(x, d, w, b), (rows, d), (d,), (d,))
    assert fwd == 5 * n + 3 * rows + n + n
    assert bwd == 9 * n + n + (2 * n - rows) + (n - rows)
    fwd0, bwd0, _ = counts(lambda x: F.layer_norm(x, d), (rows, d))
    assert (fwd0, bwd0) == (5 * n + 3 * rows, 9 * n)


def test_batch_norm_train_and_eval():
    n_, c = 8, 3
    n = n_ * c
    rm, rv = np.zeros(c), np.ones(c)
    fwd, bwd, _ = counts(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=True), (n_, c), (c,), (c,))
    assert fwd == 4 * n + 3 * c + n + n + n
    assert bwd == 9 * n + n + (2 * n - c) + (n - c)
    fwd_e, bwd_e, _ = counts(lambda x: F.batch_norm(x, rm, rv, training=False), (n_, c))
    assert (fwd_e, bwd_e) == (n + 3 * c + n, 3 * n)


def test_dropout_embedding_losses():
    mg.random.manual_seed(0)
    assert counts(lambda a: F.dropout(a, 0.5), (4, 5))[:2] == (3 * 20, 2 * 20)
    idx = np.array([[0, 2, 2], [1, 0, 3]])
    assert counts(lambda w: F.embedding(idx, w), (4, 5))[:2] == (0, 6 * 5)
    target = np.array([0, 2, 1])
    fwd, bwd, _ = counts(lambda z: F.cross_entropy(z, target), (3, 4))
    assert (fwd, bwd) == (5 * 12 + 1, 2 * 12 + 3 + 1)
    fwd, bwd, _ = counts(lambda a, b: F.mse_loss(a, b), (3, 4), (3, 4))
    assert (fwd, bwd) == (3 * 12, 2 + 12 + 12)


def test_attention():
    b, h, t, s, e, ev = 2, 3, 5, 7, 4, 6
    scores, rows = b * h * t * s, b * h * t
    fwd, bwd, _ = counts(lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
                         (b, h, t, e), (b, h, s, e), (b, h, s, ev))
    matmuls = 2 * scores * e + 2 * scores * ev
    assert fwd == matmuls + scores + (scores - rows) + scores + scores + (scores - rows) + scores
    assert bwd == 2 * matmuls + (2 * scores - rows) + 3 * scores
    fwd_c, _, _ = counts(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                         (b, h, t, e), (b, h, t, e), (b, h, t, ev))
    sc = b * h * t * t
    assert fwd_c == 2 * sc * e + 2 * sc * ev + sc + sc + (sc - rows) + sc + sc + (sc - rows) + sc


def test_matrix_products_agree_with_torch_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    def torch_counts(fn, *shapes):
        ts = [torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes]
        with FlopCounterMode(display=False) as fc:
            out = fn(*ts)
        fwd = fc.get_total_flops()
        with FlopCounterMode(display=False) as fc:
            out.sum().backward()
        return fwd, fc.get_total_flops()

    for sa, sb in [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5))]:
        assert counts(F.matmul, sa, sb)[:2] == torch_counts(torch.matmul, sa, sb)
    # torch counts addmm as the product only: compare without the bias
    assert counts(lambda x, w: F.linear(x, w), (6, 4), (5, 4))[:2] == \
        torch_counts(lambda x, w: torch.nn.functional.linear(x, w), (6, 4), (5, 4))
    # attention: torch counts its two (backward: four) matrix products
    shapes = ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6))
    fwd, bwd, _ = counts(F.scaled_dot_product_attention, *shapes)
    t_fwd, t_bwd = torch_counts(torch.nn.functional.scaled_dot_product_attention, *shapes)
    scores, rows = 2 * 3 * 5 * 7, 2 * 3 * 5
    assert fwd - (6 * scores - 2 * rows) == t_fwd
    assert bwd - (5 * scores - rows) == t_bwd


def test_ledger_flops_by_phase_for_a_checkpointed_chain():
    # Linear(8, 8) layers on a batch of 4: 2*4*8*8 + 4*8 forward FLOPs each;
    # backward: two products + the bias sum.
    mg.random.manual_seed(0)
    layers = [nn.Linear(8, 8, dtype=np.float64) for _ in range(6)]
    x = Tensor(np.ones((4, 8)), requires_grad=True)
    per_fwd = 2 * 4 * 8 * 8 + 4 * 8
    per_bwd = 2 * (2 * 4 * 8 * 8) + (4 * 8 - 8)
    with memory.track() as m:
        y = mg.checkpoint.checkpoint_sequential(layers, [0, 2, 4], x)
        y.backward(np.ones(y.shape))
    assert m.flops["forward"] == 6 * per_fwd
    assert m.flops["recompute"] == 4 * per_fwd  # layers 0-3: checkpointed segments
    assert m.flops["backward"] == 6 * per_bwd
    assert m.flops_by_op["recompute"]["linear"] == 4 * per_fwd
    assert sum(ev.flops for ev in m.timeline) == sum(m.flops.values())
    assert all(isinstance(v, int) for v in m.flops.values())


def test_flops_are_the_same_in_float32_and_float64():
    def step(dtype):
        mg.random.manual_seed(0)
        model = nn.TransformerBlock(8, 2, dtype=dtype)
        x = Tensor(np.ones((2, 5, 8), dtype), requires_grad=True)
        with memory.track(record_timeline=False) as m:
            model(x).sum().backward()
        return m.flops
    assert step(np.float32) == step(np.float64)
