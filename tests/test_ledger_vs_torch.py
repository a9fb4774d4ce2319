"""The ledger against independent counts made by torch: saved bytes and FLOPs.

* Saved bytes: the same random graph is built in minigrad and in torch (float64); torch's
  count is the distinct storages its ``saved_tensors_hooks`` hold alive (each packed tensor
  is boxed, and a box leaves the count when torch drops it). minigrad's ledger must show
  exactly those bytes as ``"activations"`` at the end of the forward pass, and, with no
  checkpoint, that is its peak. Wrapped in a non-reentrant checkpoint, the forward keeps
  what torch's outer hook sees (the checkpoint's inputs), and the recomputation peaks at
  the plain graph's saved bytes plus the kept input.
* FLOPs: bias-free linear layers and attention products, the ops
  ``torch.utils.flop_counter.FlopCounterMode`` counts, in forward, and in backward with
  the recomputation of checkpointed blocks: equal without early stop; with it, minigrad
  recomputes exactly one more product per block, the one torch stops inside (see
  ``minigrad.checkpoint``'s ``early_stop``).
"""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from marks import fast_every

torch = pytest.importorskip("torch")
from torch.utils.checkpoint import checkpoint as torch_checkpoint  # noqa: E402
from torch.utils.checkpoint import set_checkpoint_early_stop  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import minigrad.ops as F  # noqa: E402
from minigrad import Tensor, memory  # noqa: E402
from minigrad.checkpoint import checkpoint, set_checkpoint_early_stop as mg_early_stop  # noqa: E402


class _Box:
    __slots__ = ("t", "__weakref__")

    def __init__(self, t):
        self.t = t


class TorchSaved:
    """torch's saved tensors that are alive, as distinct storages (bytes)."""

    def __init__(self):
        self.live = {}

    def pack(self, t):
        box = _Box(t)
        storage = t.untyped_storage()
        self.live[id(box)] = (storage.data_ptr(), storage.nbytes())
        weakref.finalize(box, self.live.pop, id(box), None)
        return box

    @staticmethod
    def unpack(box):
        return box.t

    def bytes(self):
        return sum(dict(self.live.values()).values())

    def pointers(self):
        return {p for p, _ in self.live.values()}

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


# The same op in both frameworks: (minigrad, torch).
UNARY = {
    "exp": (lambda x: x.exp(), lambda x: x.exp()),
    "tanh": (lambda x: x.tanh(), lambda x: x.tanh()),
    "relu": (lambda x: x.relu(), lambda x: x.relu()),
    "log": (lambda x: (x * x + 1.0).log(), lambda x: (x * x + 1.0).log()),
    "square": (lambda x: x ** 2, lambda x: x ** 2),
    "softmax": (lambda x: F.softmax(x, -1), lambda x: torch.softmax(x, -1)),
    "log_softmax": (lambda x: F.log_softmax(x, 0), lambda x: torch.log_softmax(x, 0)),
    "gelu": (F.gelu, lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    "neg": (lambda x: -x, lambda x: -x),
    "transpose": (lambda x: x.T, lambda x: x.T),
    "row_sum": (lambda x: x.sum(axis=0, keepdims=True) + x, lambda x: x.sum(0, keepdim=True) + x),
    "scale": (lambda x: x * 0.5 - 1.0, lambda x: x * 0.5 - 1.0),
    "reciprocal": (lambda x: 2.0 / (x * x + 1.0), lambda x: 2.0 / (x * x + 1.0)),
}
BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div": (lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1.0)),
    "matmul": (lambda a, b: a @ b.T @ a, lambda a, b: a @ b.T @ a),
}


def random_graph(seed, inputs, which, n_ops=7):
    """Apply ``n_ops`` random ops (drawn from ``seed``) to ``inputs``; the output adds up
    every value made, so that the whole graph stays alive until the end of the forward."""
    rng = np.random.default_rng(seed)
    values = list(inputs)
    for _ in range(n_ops):
        if rng.random() < 0.5:
            op = UNARY[sorted(UNARY)[rng.integers(len(UNARY))]][which]
            values.append(op(values[rng.integers(len(values))]))
        else:
            op = BINARY[sorted(BINARY)[rng.integers(len(BINARY))]][which]
            i, j = rng.integers(len(values), size=2)
            values.append(op(values[i], values[j]))
    out = values[-1]
    for v in values[len(inputs):-1]:
        out = out + v
    return out


def arrays(seed):
    rng = np.random.default_rng(10_000 + seed)
    return [rng.standard_normal((4, 4)) for _ in range(3)], [True, bool(rng.integers(2)), False]


@pytest.mark.parametrize("seed", fast_every(range(60), 20))
def test_saved_bytes_of_a_random_graph_equal_torch(seed):
    data, needs = arrays(seed)
    saved = TorchSaved()
    with saved.hooks():
        t_out = random_graph(seed, [torch.tensor(a, requires_grad=r) for a, r in zip(data, needs)], 1)
    expected = saved.bytes()
    del t_out
    gc.collect()
    with memory.track() as m:
        out = random_graph(seed, [Tensor(a.copy(), requires_grad=r) for a, r in zip(data, needs)], 0)
        at_end_of_forward = memory.live_bytes()["activations"] - m.start["activations"]
        if out.requires_grad:
            out.sum().backward()
        del out
    assert at_end_of_forward == expected
    assert m.peak["activations"] - m.start["activations"] == expected  # backward only frees
    assert m.end["activations"] == m.start["activations"]


@pytest.mark.parametrize("seed", fast_every(range(40), 20))
def test_saved_bytes_of_a_checkpointed_random_graph_equal_torch(seed):
    data, needs = arrays(seed)
    x_grad = needs[1]
    t_x = torch.tensor(data[0], requires_grad=x_grad)
    t_w = torch.tensor(data[1], requires_grad=True)
    plain = TorchSaved()
    with plain.hooks():
        t_out = random_graph(seed, [t_x, t_w], 1) + t_w  # (+ w: the output needs a gradient)
    input_kept = t_x.untyped_storage().data_ptr() in plain.pointers()
    recompute_peak = plain.bytes() + (0 if input_kept else t_x.untyped_storage().nbytes())
    del t_out
    outer = TorchSaved()
    with outer.hooks():
        t_out = torch_checkpoint(lambda x: random_graph(seed, [x, t_w], 1) + t_w, t_x, use_reentrant=False)
    forward_kept = outer.bytes()
    del t_out
    gc.collect()
    x, w = Tensor(data[0].copy(), requires_grad=x_grad), Tensor(data[1].copy(), requires_grad=True)
    with memory.track() as m:
        out = checkpoint(lambda h: random_graph(seed, [h, w], 0) + w, x, early_stop=False)
        at_end_of_forward = memory.live_bytes()["activations"] - m.start["activations"]
        out.sum().backward()
        del out
    assert at_end_of_forward == forward_kept
    # torch keeps the inputs from the start: a graph that saves nothing still held x briefly
    assert m.peak["activations"] - m.start["activations"] == (
        recompute_peak if forward_kept else data[0].nbytes)
    grads = sum(t.grad.nbytes for t in (x, w) if t.grad is not None)
    assert m.end["total"] - m.start["total"] == grads  # nothing else left behind


# --- FLOPs against FlopCounterMode --------------------------------------------------------------
D, HIDDEN, T_LEN, BATCH = 8, 16, 5, 2


def weights(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"q": (D, D), "k": (D, D), "v": (D, D), "o": (D, D), "up": (HIDDEN, D), "down": (D, HIDDEN)}
    return {k: rng.standard_normal(s) / np.sqrt(s[1]) for k, s in shapes.items()}


def block(x, W, linear, softmax, const):
    """Attention (explicit products) and an MLP, bias-free: every contraction is one that
    FlopCounterMode counts. ``const`` is a product of constants after the last saved
    array: early stop skips it in the recomputation."""
    q, k, v = linear(x, W["q"]), linear(x, W["k"]), linear(x, W["v"])
    p = softmax(q @ k.transpose(-1, -2) * (1.0 / np.sqrt(D)))
    h = x + linear(p @ v, W["o"])
    h = h + linear(linear(h, W["up"]).tanh(), W["down"])
    return h + (const @ const).sum()


MG_OPS = dict(linear=F.linear, softmax=lambda s: F.softmax(s, -1))
TORCH_OPS = dict(linear=torch.nn.functional.linear, softmax=lambda s: torch.softmax(s, -1))


def torch_flops(n_blocks, checkpointed, early_stop):
    W = {k: torch.tensor(v, requires_grad=True) for k, v in weights().items()}
    x = torch.tensor(np.random.default_rng(1).standard_normal((BATCH, T_LEN, D)), requires_grad=True)
    const = torch.tensor(np.ones((6, 6)))
    with set_checkpoint_early_stop(early_stop), FlopCounterMode(display=False) as fwd:
        h = x
        for _ in range(n_blocks):
            run = lambda a: block(a, W, const=const, **TORCH_OPS)  # noqa: E731
            h = torch_checkpoint(run, h, use_reentrant=False) if checkpointed else run(h)
    with FlopCounterMode(display=False) as bwd:
        (h * h).sum().backward()
    return fwd.get_total_flops(), bwd.get_total_flops()


def minigrad_flops(n_blocks, checkpointed, early_stop):
    W = {k: Tensor(v, requires_grad=True) for k, v in weights().items()}
    x = Tensor(np.random.default_rng(1).standard_normal((BATCH, T_LEN, D)), requires_grad=True)
    const = Tensor(np.ones((6, 6)))
    with mg_early_stop(early_stop), memory.track(record_timeline=False) as m:
        h = x
        for _ in range(n_blocks):
            run = lambda a: block(a, W, const=const, **MG_OPS)  # noqa: E731
            h = checkpoint(run, h) if checkpointed else run(h)
        (h * h).sum().backward()
    contraction = {p: m.flops_by_op[p]["linear"] + m.flops_by_op[p]["matmul"] for p in m.flops}
    return contraction["forward"], contraction["recompute"], contraction["backward"]


@pytest.mark.parametrize("checkpointed, early_stop", [(False, True), (True, False), (True, True)])
def test_contraction_flops_equal_torch_flop_counter(checkpointed, early_stop):
    t_fwd, t_bwd = torch_flops(2, checkpointed, early_stop)
    fwd, recompute, bwd = minigrad_flops(2, checkpointed, early_stop)
    plain_fwd, _, plain_bwd = minigrad_flops(2, False, True)
    assert fwd == t_fwd == plain_fwd and bwd == plain_bwd
    # Early stop ends each block's recomputation at the save of the last array backward
    # needs: the MLP's down projection's input and weight. torch stops inside that save,
    # before the product (and before the constant product after it); minigrad lets the
    # projection finish (its timeline shows the recomputation's peak) and stops after it.
    down, const = 2 * (BATCH * T_LEN) * HIDDEN * D, 2 * 6 * 6 * 6
    if not checkpointed:
        assert (recompute, bwd) == (0, t_bwd)
    elif not early_stop:
        assert recompute == plain_fwd and recompute + bwd == t_bwd
    else:
        assert recompute == plain_fwd - 2 * const
        assert recompute + bwd == t_bwd + 2 * down  # exactly the two projections torch skips
