"""bookkit.losses: the chunked cross-entropy against torch's own, value, gradient and bytes."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from bookkit.losses import chunked_linear_cross_entropy, logits_bytes, logsumexp_  # noqa: E402
from bookkit.torchmem import SavedTensorMeter, allocator_peak_bytes, tracker_peaks  # noqa: E402

# float32: the chunked and the full computation do the same arithmetic per row, but the
# weight gradient is summed in a different order (chunk by chunk).
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-5, rtol=1e-5),
       torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}


def problem(n, h, vocab, dtype=torch.float32, bias=True, seed=0, lead=None, ignored=()):
    g = torch.Generator().manual_seed(seed)
    shape = lead if lead is not None else (n,)
    x = torch.randn(*shape, h, generator=g).to(dtype).requires_grad_()
    w = (torch.randn(vocab, h, generator=g) / h**0.5).to(dtype).requires_grad_()
    b = torch.randn(vocab, generator=g).to(dtype).requires_grad_() if bias else None
    t = torch.randint(0, vocab, shape, generator=g)
    for i in ignored:
        t.view(-1)[i] = -100
    return x, w, b, t


def grads_of(loss, tensors, grad_out=None):
    tensors = [v for v in tensors if v is not None]
    return torch.autograd.grad(loss, tensors, grad_out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("chunk", [1, 7, 16, 1000])
def test_matches_full_cross_entropy(dtype, reduction, chunk):
    x, w, b, t = problem(37, 16, 101, dtype, ignored=(3, 20))
    ref = F.cross_entropy(F.linear(x, w, b).float(), t, reduction=reduction)
    out = chunked_linear_cross_entropy(x, w, t, b, chunk_size=chunk, reduction=reduction)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    torch.testing.assert_close(out, ref, **TOL[torch.float32])
    grad_out = torch.randn_like(ref)
    for got, want in zip(grads_of(out, (x, w, b), grad_out), grads_of(ref, (x, w, b), grad_out)):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, **TOL[dtype])


def test_batched_input_without_bias_and_ignored_rows_get_no_gradient():
    x, w, _, t = problem(0, 8, 50, bias=False, lead=(2, 5), ignored=(0, 7))
    out = chunked_linear_cross_entropy(x, w, t, chunk_size=3, reduction="none")
    ref = F.cross_entropy(F.linear(x, w).flatten(0, 1), t.flatten(), reduction="none").view(2, 5)
    torch.testing.assert_close(out, ref)
    assert out.view(-1)[0] == 0 and out.view(-1)[7] == 0
    (gx,) = torch.autograd.grad(out.sum(), x)
    assert torch.all(gx.view(-1, 8)[[0, 7]] == 0)
    assert torch.all(gx.view(-1, 8)[[1, 2, 3]] != 0)


def test_all_ignored_gives_nan_loss_and_zero_gradient():
    x, w, b, t = problem(6, 4, 9)
    t[:] = -100
    out = chunked_linear_cross_entropy(x, w, t, b)
    assert torch.isnan(out) and torch.isnan(F.cross_entropy(F.linear(x, w, b), t))
    gx, gw, gb = torch.autograd.grad(out, (x, w, b))
    assert not gx.any() and not gw.any() and not gb.any()


def test_frozen_head_gets_no_gradient_and_input_still_does():
    x, w, b, t = problem(12, 8, 30)
    w.requires_grad_(False)
    b.requires_grad_(False)
    chunked_linear_cross_entropy(x, w, t, b, chunk_size=5).backward()
    ref_x = x.detach().clone().requires_grad_()
    F.cross_entropy(F.linear(ref_x, w, b), t).backward()
    assert w.grad is None and b.grad is None
    torch.testing.assert_close(x.grad, ref_x.grad)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), h=st.integers(1, 12), vocab=st.integers(2, 60),
       chunk=st.integers(1, 50), seed=st.integers(0, 2**16))
def test_property_any_shape_and_chunk(n, h, vocab, chunk, seed):
    x, w, b, t = problem(n, h, vocab, seed=seed)
    out = chunked_linear_cross_entropy(x, w, t, b, chunk_size=chunk)
    ref = F.cross_entropy(F.linear(x, w, b), t)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads_of(out, (x, w, b)), grads_of(ref, (x, w, b))):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_saved_for_backward_is_inputs_and_one_float_per_row():
    n, h, vocab = 96, 24, 500
    x, w, b, t = problem(n, h, vocab)
    with SavedTensorMeter(params=[w, b]) as full:
        ref = F.cross_entropy(F.linear(x, w, b), t)
    # torch keeps the (n, vocab) float32 log-softmax, the input x, the target and
    # nll_loss's float32 scalar `total_weight` (the count that divides the mean).
    assert full.live_bytes == n * vocab * 4 + n * h * 4 + n * 8 + 4
    with SavedTensorMeter(params=[w, b]) as chunked:
        out = chunked_linear_cross_entropy(x, w, t, b, chunk_size=16)
    # x, the target (int64, ignored rows replaced by 0), the validity mask (bool) and
    # the float32 log-sum-exp per row: no (n, vocab) tensor.
    assert chunked.live_bytes == n * h * 4 + n * 8 + n * 1 + n * 4
    del ref, out


@pytest.mark.parametrize("n", [256, 1024])
def test_step_peak_is_set_by_the_chunk_not_the_rows(n):
    h, vocab, chunk = 32, 2000, 64
    x, w, _, t = problem(n, h, vocab, bias=False)
    logit_bytes = n * vocab * 4

    def full_step():
        F.cross_entropy(F.linear(x, w), t).backward()

    def chunked_step():
        chunked_linear_cross_entropy(x, w, t, chunk_size=chunk).backward()

    full = tracker_peaks(None, full_step, inputs=[x, w, t])
    x.grad = w.grad = None
    chunked = tracker_peaks(None, chunked_step, inputs=[x, w, t])
    inputs = x.numel() * 4 + w.numel() * 4 + t.numel() * 8
    # Full: the log-softmax kept plus, in backward, two (n, vocab) gradients at once.
    assert full["Total"] - inputs >= 3 * logit_bytes
    # Chunked: gradients of x and w, one chunk of logits and small change.
    grads = x.numel() * 4 + w.numel() * 4
    extra = chunked["Total"] - inputs - grads
    assert chunk * vocab * 4 <= extra <= chunk * vocab * 4 + 64 * n


def chunked_formula(n, h, vocab, chunk):
    # "The logits wall"'s formula: one chunk of float32 logits and the column of -1s scattered
    # into it, the input's gradient, 17 bytes per row (lse, row scale, int64 target, mask).
    return chunk * (vocab + 1) * 4 + n * h * 4 + 17 * n


@pytest.mark.parametrize("n,h,vocab,chunk", [(256, 64, 4000, 32), (256, 64, 4000, 64),
                                             (512, 64, 4000, 64), (256, 64, 8000, 128),
                                             (100, 16, 1000, 7), (50, 8, 300, 64)])
def test_true_allocator_peak_is_the_formula(n, h, vocab, chunk):
    # The allocator's own events (profiler) see temporaries inside operators, which
    # MemTracker does not; a frozen head (adapter training) leaves only x's gradient.
    x, w, _, t = problem(n, h, vocab, bias=False)
    w.requires_grad_(False)
    peak = allocator_peak_bytes(lambda: chunked_linear_cross_entropy(x, w, t, chunk_size=min(chunk, n)).backward())
    expected = chunked_formula(n, h, vocab, min(chunk, n))
    assert expected <= peak <= expected + 32                # + a few scalars (loss, count)
    # torch.logsumexp on a chunk would have held a second chunk-sized temporary.
    z = torch.randn(chunk, vocab)
    assert allocator_peak_bytes(lambda: torch.logsumexp(z, dim=1)) >= chunk * vocab * 4
    assert allocator_peak_bytes(lambda: logsumexp_(z.clone())) < chunk * vocab * 4 + 64 * chunk


def test_logsumexp_in_place_matches_torch_and_handles_infinities():
    z = torch.randn(9, 50, dtype=torch.float64) * 30
    z[2] = float("-inf")                                 # every logit masked
    z[3, 5] = float("inf")
    want = torch.logsumexp(z, dim=1)
    got = logsumexp_(z.clone())
    torch.testing.assert_close(got, want)
    assert got[2] == float("-inf") and got[3] == float("inf")


def test_logits_bytes_seed_example():
    assert logits_bytes(2, 1024, 248_000) == 2 * 1024 * 248_000 * 4
    assert round(logits_bytes(2, 1024, 248_000) / 1e9, 1) == 2.0
    assert logits_bytes(1, 1, 10, itemsize=2) == 20
    with pytest.raises(ValueError, match="vocab"):
        logits_bytes(2, 1024, 0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(w_shape=(30, 5)), "weight must be"),
    (dict(b_shape=(29,)), "bias must be"),
    (dict(t_shape=(11,)), "target shape"),
    (dict(t_value=30), "outside"),
    (dict(t_value=-1), "outside"),
    (dict(t_float=True), "class indices"),
    (dict(chunk=0), "chunk_size"),
    (dict(chunk=2.5), "chunk_size"),
    (dict(reduction="avg"), "reduction"),
])
def test_bad_input_raises_naming_the_problem(kwargs, match):
    x = torch.randn(12, 8)
    w = torch.randn(*kwargs.get("w_shape", (30, 8)))
    b = torch.randn(*kwargs.get("b_shape", (30,)))
    t = torch.randint(0, 30, kwargs.get("t_shape", (12,)))
    if "t_value" in kwargs:
        t[4] = kwargs["t_value"]
    if kwargs.get("t_float"):
        t = t.float()
    with pytest.raises(ValueError, match=match):
        chunked_linear_cross_entropy(x, w, t, b, chunk_size=kwargs.get("chunk", 4),
                                     reduction=kwargs.get("reduction", "mean"))
