"""minigrad against PyTorch in float64 with identical weights: losses and gradients to 1e-10."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

import minigrad as mg  # noqa: E402
import minigrad.ops as F  # noqa: E402
from minigrad import Tensor, nn, optim  # noqa: E402

TOL = dict(rtol=1e-10, atol=1e-10)


def pair(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    return ([Tensor(a.copy(), requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def compare(mine, theirs, m_in, t_in, seed=1):
    w = np.random.default_rng(seed).standard_normal(mine.shape)
    np.testing.assert_allclose(mine.data, theirs.detach().numpy(), **TOL)
    (mine * Tensor(w)).sum().backward()
    (theirs * torch.tensor(w)).sum().backward()
    for a, b in zip(m_in, t_in):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), **TOL)


OPS = {
    "add": ([(3, 4), (4,)], lambda a, b: a + b, lambda a, b: a + b),
    "sub": ([(3, 4), (3, 1)], lambda a, b: a - b, lambda a, b: a - b),
    "mul": ([(3, 4), (1, 4)], lambda a, b: a * b, lambda a, b: a * b),
    "div": ([(3, 4), (3, 4)], lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1.0)),
    "neg": ([(3,)], lambda a: -a, lambda a: -a),
    "matmul": ([(2, 3, 4), (4, 5)], lambda a, b: a @ b, lambda a, b: a @ b),
    "bmm": ([(2, 3, 4), (2, 4, 5)], lambda a, b: a @ b, lambda a, b: a @ b),
    "linear": ([(2, 3, 4), (5, 4), (5,)], F.linear, TF.linear),
    "sum": ([(3, 4)], lambda a: a.sum(axis=1), lambda a: a.sum(dim=1)),
    "mean": ([(3, 4)], lambda a: a.mean(axis=0, keepdims=True), lambda a: a.mean(dim=0, keepdim=True)),
    "reshape": ([(3, 4)], lambda a: a.reshape(2, 6), lambda a: a.reshape(2, 6)),
    "transpose": ([(2, 3, 4)], lambda a: a.transpose(0, 2), lambda a: a.transpose(0, 2)),
    "exp": ([(3, 4)], F.exp, torch.exp),
    "log": ([(3, 4)], lambda a: F.log(a * a + 0.5), lambda a: torch.log(a * a + 0.5)),
    "tanh": ([(3, 4)], F.tanh, torch.tanh),
    "relu": ([(3, 4)], F.relu, torch.relu),
    "gelu": ([(3, 4)], F.gelu, lambda a: TF.gelu(a, approximate="tanh")),
    "softmax": ([(3, 4)], F.softmax, lambda a: torch.softmax(a, -1)),
    "log_softmax": ([(3, 4)], F.log_softmax, lambda a: torch.log_softmax(a, -1)),
    "layer_norm": ([(2, 3, 5), (5,), (5,)], lambda x, w, b: F.layer_norm(x, 5, w, b),
                   lambda x, w, b: TF.layer_norm(x, (5,), w, b)),
    "batch_norm": ([(6, 3, 2), (3,), (3,)],
                   lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True)),
    "sdpa": ([(2, 2, 5, 4), (2, 2, 5, 4), (2, 2, 5, 4)],
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
    "mse_loss": ([(3, 4), (3, 4)], F.mse_loss, TF.mse_loss),
    "pow": ([(3, 4)], lambda a: (a * a + 0.5) ** -1.5 + a ** 3, lambda a: (a * a + 0.5) ** -1.5 + a ** 3),
    "permute": ([(2, 3, 4)], lambda a: a.permute(2, 0, 1), lambda a: a.permute(2, 0, 1)),
    "getitem": ([(5, 3)], lambda a: a[np.array([0, 0, 4])][:, 1:] + a[1::2].sum(axis=1),
                lambda a: a[torch.tensor([0, 0, 4])][:, 1:] + a[1::2].sum(1)),
    "sdpa_non_square": ([(2, 3, 4), (2, 5, 4), (2, 5, 6)],
                        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True)),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_matches_torch(name):
    shapes, mine, theirs = OPS[name]
    m_in, t_in = pair(*shapes)
    compare(mine(*m_in), theirs(*t_in), m_in, t_in)


def test_cross_entropy_and_embedding_match_torch():
    (z, w), (tz, tw) = pair((6, 5), (7, 5))
    idx = np.array([0, 3, 3, 6, 1, 2])
    target = np.array([4, 0, 1, 1, 2, 3])
    mine = F.cross_entropy(z * F.embedding(idx, w), target)
    theirs = TF.cross_entropy(tz * TF.embedding(torch.tensor(idx), tw), torch.tensor(target))
    compare(mine, theirs, [z, w], [tz, tw])


def test_dropout_matches_torch_with_the_same_mask():
    (x,), (tx,) = pair((20, 10))
    mg.random.manual_seed(0)
    y = F.dropout(x, 0.4)
    mask = torch.tensor(y.data != 0)
    compare(y, tx * mask / 0.6, [x], [tx])


def to_torch_state(model):
    return {k: torch.tensor(v) for k, v in model.state_dict().items()}


def test_mlp_with_batchnorm_loss_grads_and_running_stats():
    mg.random.manual_seed(0)
    mine = nn.Sequential(nn.Linear(6, 8, dtype=np.float64), nn.BatchNorm1d(8, dtype=np.float64),
                         nn.GELU(), nn.LayerNorm(8, dtype=np.float64), nn.Linear(8, 3, dtype=np.float64))
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                                 torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(8),
                                 torch.nn.Linear(8, 3)).double()
    sd = mine.state_dict()
    tsd = theirs.state_dict()
    names = [k for k in tsd if "num_batches" not in k]
    assert len(names) == len(sd)
    theirs.load_state_dict({**tsd, **{t: torch.tensor(v) for t, v in zip(names, sd.values())}})
    x = np.random.default_rng(1).standard_normal((10, 6))
    y = np.random.default_rng(2).standard_normal((10, 3))
    for _ in range(2):
        mine.zero_grad()
        theirs.zero_grad()
        loss = F.mse_loss(mine(Tensor(x)), Tensor(y))
        tloss = TF.mse_loss(theirs(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        tloss.backward()
        np.testing.assert_allclose(loss.item(), tloss.item(), **TOL)
        for p, tp in zip(mine.parameters(), theirs.parameters()):
            np.testing.assert_allclose(p.grad, tp.grad.numpy(), **TOL)
    np.testing.assert_allclose(mine[1].running_mean.data, theirs[1].running_mean.numpy(), **TOL)
    np.testing.assert_allclose(mine[1].running_var.data, theirs[1].running_var.numpy(), **TOL)
    mine.eval()
    theirs.eval()
    np.testing.assert_allclose(mine(Tensor(x)).data, theirs(torch.tensor(x)).detach().numpy(), **TOL)


class TorchBlock(torch.nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.out(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TorchGPT(torch.nn.Module):
    def __init__(self, vocab, d, h, n, seq):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList([TorchBlock(d, h) for _ in range(n)])
        self.ln_f = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln_f(h))


def copy_gpt_weights(mine, theirs):
    t = theirs
    pairs = [(mine.tok_emb.weight, t.tok.weight), (mine.pos_emb.weight, t.pos.weight),
             (mine.ln_f.weight, t.ln_f.weight), (mine.ln_f.bias, t.ln_f.bias),
             (mine.head.weight, t.head.weight)]
    for mb, tb in zip(mine.blocks, t.blocks):
        for m_mod, t_mod in [(mb.ln1, tb.ln1), (mb.ln2, tb.ln2), (mb.attn.qkv, tb.qkv),
                             (mb.attn.proj, tb.proj), (mb.mlp.fc, tb.fc), (mb.mlp.proj, tb.out)]:
            pairs += [(m_mod.weight, t_mod.weight), (m_mod.bias, t_mod.bias)]
    with torch.no_grad():
        for m, tp in pairs:
            tp.copy_(torch.tensor(m.data))
    assert len(pairs) == len(mine.parameters()) == len(list(theirs.parameters()))
    return pairs


@pytest.mark.parametrize("checkpoint_blocks", [False, True])
def test_gpt_matches_torch(checkpoint_blocks):
    mg.random.manual_seed(0)
    mine = nn.GPT(vocab_size=13, d_model=16, n_heads=4, n_layers=2, seq_len=8,
                  checkpoint_blocks=checkpoint_blocks, dtype=np.float64)
    theirs = TorchGPT(13, 16, 4, 2, 8).double()
    pairs = copy_gpt_weights(mine, theirs)
    rng = np.random.default_rng(3)
    idx, tgt = rng.integers(0, 13, (3, 8)), rng.integers(0, 13, (3, 8))
    loss = mine.loss(idx, tgt)
    tloss = TF.cross_entropy(theirs(torch.tensor(idx)).reshape(-1, 13), torch.tensor(tgt).reshape(-1))
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), **TOL)
    for m, tp in pairs:
        np.testing.assert_allclose(m.grad, tp.grad.numpy(), **TOL)


@pytest.mark.parametrize("kind", ["sgd", "sgd_momentum", "adamw"])
def test_optimizers_match_torch(kind):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 3))
    x = rng.standard_normal((5, 4))
    p, tp = nn.Parameter(w0.copy()), torch.nn.Parameter(torch.tensor(w0))
    if kind == "sgd":
        opt, topt = optim.SGD([p], lr=0.1, weight_decay=0.01), torch.optim.SGD([tp], lr=0.1, weight_decay=0.01)
    elif kind == "sgd_momentum":
        opt = optim.SGD([p], lr=0.1, momentum=0.9)
        topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    else:
        opt = optim.AdamW([p], lr=0.05, betas=(0.8, 0.95), weight_decay=0.1)
        topt = torch.optim.AdamW([tp], lr=0.05, betas=(0.8, 0.95), weight_decay=0.1)
    for _ in range(4):
        opt.zero_grad()
        topt.zero_grad()
        (F.tanh(Tensor(x) @ p) ** 2).sum().backward()
        (torch.tanh(torch.tensor(x) @ tp) ** 2).sum().backward()
        opt.step()
        topt.step()
        np.testing.assert_allclose(p.data, tp.detach().numpy(), **TOL)
