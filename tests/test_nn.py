"""Modules: parameters, buffers, modes, Sequential, shapes, initialisation, GPT."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, nn


def test_linear_shapes_and_init_bounds():
    mg.random.manual_seed(0)
    lin = nn.Linear(20, 7)
    assert lin.weight.shape == (7, 20) and lin.bias.shape == (7,)
    assert lin.weight.dtype == np.float32
    bound = 1 / np.sqrt(20)
    assert np.abs(lin.weight.data).max() <= bound and np.abs(lin.weight.data).max() > 0.8 * bound
    y = lin(Tensor(np.ones((3, 5, 20), np.float32)))
    assert y.shape == (3, 5, 7)
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(7, 20\)"):
        lin(Tensor(np.ones((3, 4), np.float32)))


def test_initialisation_is_reproducible():
    mg.random.manual_seed(5)
    a = nn.Linear(4, 4).weight.data.copy()
    mg.random.manual_seed(5)
    b = nn.Linear(4, 4).weight.data.copy()
    c = nn.Linear(4, 4).weight.data.copy()
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_sequential_indexing_len_iteration_and_parameters():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert len(seq) == 3
    assert isinstance(seq[1], nn.ReLU) and seq[-1] is seq[2]
    sub = seq[:2]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[0] is seq[0]
    assert [type(m) for m in seq] == [nn.Linear, nn.ReLU, nn.Linear]
    params = seq.parameters()
    assert len(params) == 4 and params[0] is seq[0].weight
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with pytest.raises(IndexError):
        seq[3]


def test_train_eval_propagates_and_dropout_obeys():
    seq = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    x = Tensor(np.ones((50, 3), np.float32))
    seq.eval()
    assert not seq[1].training
    np.testing.assert_array_equal(seq(x).data, seq[0](x).data)
    seq.train()
    assert seq[1].training
    assert (seq(x).data == 0).any()


def test_batchnorm_buffers_and_eval():
    bn = nn.BatchNorm1d(3)
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var"]
    x = Tensor(np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32) * 2 + 1)
    y = bn(x)
    np.testing.assert_allclose(y.data.mean(0), 0, atol=1e-5)
    assert not np.allclose(bn.running_mean.data, 0)
    bn.eval()
    before = bn.running_mean.data.copy()
    bn(x)
    np.testing.assert_array_equal(before, bn.running_mean.data)


def test_state_dict_round_trip():
    mg.random.manual_seed(0)
    a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    assert list(a.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias",
                                    "1.running_mean", "1.running_var"]
    b.load_state_dict(a.state_dict())
    for k, v in a.state_dict().items():
        assert np.array_equal(v, b.state_dict()[k])
    with pytest.raises(KeyError):
        b.load_state_dict({"0.weight": np.zeros((4, 3))})


def test_embedding_and_layernorm():
    emb = nn.Embedding(10, 4)
    out = emb(np.array([[1, 2], [3, 9]]))
    assert out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out.data[1, 1], emb.weight.data[9])
    ln = nn.LayerNorm(4)
    y = ln(out)
    np.testing.assert_allclose(y.data.mean(-1), 0, atol=1e-6)


def test_transformer_block_and_gpt_shapes_and_causality():
    mg.random.manual_seed(0)
    model = nn.GPT(vocab_size=17, d_model=16, n_heads=4, n_layers=2, seq_len=8, dtype=np.float64)
    idx = np.random.default_rng(0).integers(0, 17, (2, 8))
    logits = model(idx)
    assert logits.shape == (2, 8, 17)
    # causal: changing the last token does not change earlier positions
    idx2 = idx.copy()
    idx2[:, -1] = (idx2[:, -1] + 1) % 17
    np.testing.assert_array_equal(model(idx2).data[:, :-1], logits.data[:, :-1])
    assert not np.array_equal(model(idx2).data[:, -1], logits.data[:, -1])
    loss = model.loss(idx, idx)
    loss.backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
    assert abs(loss.item() - np.log(17)) < 2.0
    with pytest.raises(ValueError, match="seq <= 8"):
        model(np.zeros((1, 9), dtype=np.int64))
    with pytest.raises(ValueError, match="divisible"):
        nn.TransformerBlock(10, 3)


def test_gpt_parameter_count():
    v, d, n, s = 11, 8, 3, 5
    model = nn.GPT(nn.GPTConfig(v, d, 2, n, s))
    per_block = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    expected = v * d + s * d + n * per_block + 2 * d + d * v
    assert sum(p.size for p in model.parameters()) == expected


@pytest.mark.parametrize("args, exc, msg", [
    ((-1, 3), ValueError, r"Linear: in_features=-1 is out of range; allowed: 1 <= in_features"),
    ((0, 3), ValueError, r"Linear: in_features=0 is out of range"),
    ((3, 0), ValueError, r"Linear: out_features=0 is out of range"),
    ((2.5, 3), TypeError, r"Linear: in_features must be an integer, got 2.5"),
])
def test_linear_sizes_are_checked(args, exc, msg):
    with pytest.raises(exc, match=msg):
        nn.Linear(*args)


def test_other_module_sizes_are_checked():
    with pytest.raises(ValueError, match="LayerNorm: normalized_shape=0"):
        nn.LayerNorm(0)
    with pytest.raises(ValueError, match="Embedding: num_embeddings=-2"):
        nn.Embedding(-2, 4)
    with pytest.raises(ValueError, match="BatchNorm1d: momentum=1.5 is out of range"):
        nn.BatchNorm1d(3, momentum=1.5)
    with pytest.raises(ValueError, match=r"Dropout: p=1.0 is out of range; allowed: 0.0 <= p < 1.0"):
        nn.Dropout(1.0)
    with pytest.raises(ValueError, match="Dropout: p must be a finite number, got nan"):
        nn.Dropout(float("nan"))


def test_gpt_config():
    config = nn.GPTConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=2, seq_len=6)
    a = nn.GPT(config)
    b = nn.GPT(vocab_size=11, d_model=8, n_heads=2, n_layers=2, seq_len=6)
    c = nn.GPT(config, checkpoint_blocks=True)
    assert a.config == b.config and c.checkpoint_blocks is True and c.config.n_layers == 2
    assert sum(p.size for p in a.parameters()) == sum(p.size for p in b.parameters())
    with pytest.raises(ValueError, match="GPTConfig: d_model=10 is not divisible by n_heads=3"):
        nn.GPTConfig(vocab_size=11, d_model=10, n_heads=3, n_layers=1, seq_len=4)
    with pytest.raises(ValueError, match="GPTConfig: n_layers=0 is out of range"):
        nn.GPTConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=0, seq_len=4)
    with pytest.raises(ValueError, match="GPTConfig: dtype must be float32 or float64"):
        nn.GPTConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, seq_len=4, dtype=np.int32)
    assert nn.GPTConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, seq_len=4, dtype="float64")
    with pytest.raises(TypeError, match="expected a GPTConfig"):
        nn.GPT(11)
    with pytest.raises(TypeError):
        nn.GPT(config, 8)  # the eight positional arguments are gone
