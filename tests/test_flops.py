"""bookkit.flops: FLOP counts against counts made by hand from the shapes."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import set_checkpoint_early_stop  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from bookkit.flops import (  # noqa: E402
    StepFlops,
    count_flops,
    forward_backward_flops,
    korthikanti_layer_flops,
)
from bookkit.torchmodels import GPTBlock, GPTStack  # noqa: E402


def test_linear_forward_and_backward_by_hand():
    m, k, n = 7, 5, 3
    lin = nn.Linear(k, n)
    x = torch.randn(m, k, requires_grad=True)
    assert count_flops(lambda: lin(x)) == 2 * m * k * n
    f = forward_backward_flops(lambda: lin(x).sum())
    # backward: grad of x (m×n @ n×k) and of the weight (n×m @ m×k), each as large.
    assert f == StepFlops(2 * m * k * n, 4 * m * k * n)
    assert f.backward_per_forward == 2.0 and f.step == 6 * m * k * n
    x.requires_grad_(False)                       # no input gradient: one product fewer
    assert forward_backward_flops(lambda: lin(x).sum()).backward == 2 * m * k * n


@pytest.mark.parametrize("attention", ["sdpa", "naive"])
@pytest.mark.parametrize("b,s,h,a", [(2, 64, 128, 4), (1, 32, 64, 2)])
def test_layer_forward_is_korthikanti(attention, b, s, h, a):
    torch.manual_seed(0)
    layer = GPTBlock(h, a, dropout=0.0, attention=attention, max_seq=s)
    x = torch.randn(b, s, h)
    assert count_flops(lambda: layer(x)) == korthikanti_layer_flops(b, s, h)
    if attention == "sdpa":
        # torch's own counter misses the CPU's fused attention kernel.
        with FlopCounterMode(display=False) as plain:
            layer(x)
        assert plain.get_total_flops() == 24 * b * s * h * h


@pytest.mark.parametrize("early_stop", [True, False])
def test_checkpointing_adds_the_recomputed_forward_to_backward(early_stop):
    b, s, h, a, n_layers = 2, 32, 64, 4, 3

    def stack(checkpoint):
        torch.manual_seed(0)
        return GPTStack(n_layers, h, a, dropout=0.0, max_seq=s, checkpoint=checkpoint)

    x = torch.randn(b, s, h, requires_grad=True)
    plain = forward_backward_flops(lambda: stack(False)(x).square().mean())
    with set_checkpoint_early_stop(early_stop):
        ckpt = forward_backward_flops(lambda: stack(True)(x).square().mean())
    assert ckpt.forward == plain.forward == n_layers * korthikanti_layer_flops(b, s, h)
    # Early stop: the recomputation ends with the last tensor backward needs, the MLP
    # down projection's input, so that projection (2·b·s·4h·h) is not run again.
    down = 2 * b * s * 4 * h * h
    recomputed = plain.forward - (n_layers * down if early_stop else 0)
    assert ckpt.backward - plain.backward == recomputed
    assert ckpt.overhead_over(plain) == pytest.approx(recomputed / plain.step)


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match="callable"):
        count_flops(3)
    with pytest.raises(ValueError, match="one-element tensor"):
        forward_backward_flops(lambda: torch.ones(2, requires_grad=True) * 2)
    with pytest.raises(ValueError, match="requires_grad=False"):
        forward_backward_flops(lambda: torch.ones(()))
    with pytest.raises(ValueError, match="s must be"):
        korthikanti_layer_flops(1, 0, 4)


def test_in_place_products_count_and_the_chunked_loss_costs_one_more_head_matmul():
    from torch.nn import functional as F

    from bookkit.losses import chunked_linear_cross_entropy

    acc, a, b = torch.zeros(5, 3), torch.randn(5, 4), torch.randn(4, 3)
    assert count_flops(lambda: acc.addmm_(a, b)) == 2 * 5 * 4 * 3      # torch alone: 0
    with FlopCounterMode(display=False) as plain:
        acc.addmm_(a, b)
    assert plain.get_total_flops() == 0
    n, h, vocab = 96, 16, 300
    w = torch.randn(vocab, h, requires_grad=True)
    x = torch.randn(n, h, requires_grad=True)
    t = torch.randint(0, vocab, (n,))
    full = forward_backward_flops(lambda: F.cross_entropy(F.linear(x, w), t))
    chunked = forward_backward_flops(lambda: chunked_linear_cross_entropy(x, w, t, chunk_size=32))
    head = 2 * n * h * vocab
    assert full == StepFlops(head, 2 * head)                 # input and weight gradients
    assert chunked == StepFlops(head, 3 * head)              # + the logits rebuilt once
