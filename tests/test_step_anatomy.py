"""bookkit.step_anatomy: a training step's memory by category ("Where training memory goes")."""
import gc

import minigrad
import minigrad.ops as F
import pytest
from minigrad import Tensor, memory, nn, optim

from bookkit.step_anatomy import StepAnatomy, measure_step


def _mlp_anatomy(batch, widths=(16, 64, 8), opt_cls=optim.AdamW):
    """The step's anatomy, this model's parameter bytes, and the parameter bytes that
    earlier tests in this process keep alive (the ledger counts every live parameter:
    under xdist a worker may hold cached chains)."""
    gc.collect()
    others = memory.live_bytes()["parameters"]
    minigrad.random.manual_seed(0)
    layers = [nn.Linear(widths[0], widths[1]), nn.ReLU(), nn.Linear(widths[1], widths[2])]
    params = [p for layer in layers for p in layer.parameters()]
    opt = opt_cls(params, lr=1e-3)
    x = Tensor(minigrad.random.randn(batch, widths[0]))
    y = Tensor(minigrad.random.randn(batch, widths[2]))

    def forward():
        h = x
        for layer in layers:
            h = layer(h)
        return h

    anatomy = measure_step(forward, lambda out: F.mse_loss(out, y), opt)
    return anatomy, sum(p.nbytes for p in params), others


def test_measure_step_model_state_and_activations_match_the_shapes():
    batch, widths = 32, (16, 64, 8)
    a, param_bytes, others = _mlp_anatomy(batch, widths)
    assert a.parameters - others == a.gradients == param_bytes
    assert a.optimizer == 2 * param_bytes  # AdamW: exp_avg and exp_avg_sq
    # saved: the input, the ReLU output (= the second input), the loss's difference
    assert a.activations == 4 * batch * (widths[0] + widths[1] + widths[2])
    assert a.logits == 0
    assert a.peak_total <= a.sum_of_peaks
    assert list(a.bars()) == list(StepAnatomy.ORDER)
    sgd, _, _ = _mlp_anatomy(batch, widths, optim.SGD)
    assert sgd.optimizer == 0 and sgd.activations == a.activations
    double, _, _ = _mlp_anatomy(2 * batch, widths)
    assert double.activations == 2 * a.activations and double.parameters == a.parameters


def test_measure_step_splits_the_logits_out():
    batch, seq, vocab = 2, 8, 64
    minigrad.random.manual_seed(0)
    model = nn.GPT(nn.GPTConfig(vocab, 16, 2, 1, seq))
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    tokens = minigrad.random.randint(0, vocab, (batch, seq))
    targets = minigrad.random.randint(0, vocab, (batch, seq))
    run = dict(forward=lambda: model(tokens), loss_of=lambda lg: F.cross_entropy(lg, targets),
               optimizer=opt)
    split = measure_step(**run, split_logits=True)
    whole = measure_step(**run)
    logits = 4 * batch * seq * vocab
    # the logits, plus what cross_entropy saves: log-probabilities and int64 targets
    assert split.logits == 2 * logits + 8 * batch * seq
    assert whole.logits == 0
    assert whole.activations == split.activations + logits + 8 * batch * seq
    # the logits' gradient (created by the loss's backward) stays in the temporaries
    assert split.temporaries >= logits and whole.temporaries >= split.temporaries
    assert split.peak_total == whole.peak_total


def test_measure_step_bad_input():
    minigrad.random.manual_seed(0)
    lin = nn.Linear(3, 2)
    opt = optim.SGD(lin.parameters(), lr=0.1)
    x = Tensor(minigrad.random.randn(4, 3))
    with pytest.raises(ValueError, match="warmup"):
        measure_step(lambda: lin(x), lambda o: o.sum(), opt, warmup=-1)
    with pytest.raises(TypeError, match="logits Tensor"):
        measure_step(lambda: (lin(x), 1), lambda o: o[0].sum(), opt, split_logits=True)
