"""bookkit.torchmem: each meter against a count made by hand from shapes and dtypes."""
from __future__ import annotations

import gc
import json
import os
import time

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from bookkit.torchmem import (  # noqa: E402
    TRACKER_CATEGORIES,
    SavedTensorMeter,
    allocator_peak_bytes,
    cuda_peak_bytes,
    record,
    saved_bytes,
    step_time,
    tracker_peaks,
)


def chain(widths, dtype=torch.float32):
    """Linear(w0,w1)-ReLU-Linear(w1,w2)-ReLU-... with fixed weights."""
    torch.manual_seed(0)
    layers = []
    for d_in, d_out in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(d_in, d_out, dtype=dtype), nn.ReLU()]
    return nn.Sequential(*layers)


def chain_saved_by_hand(batch, widths, itemsize):
    # Linear i saves its input (the first one: x; the others: the previous ReLU's
    # output, which that ReLU also saves: one storage); the last ReLU saves its output.
    # Weights are parameters, not counted.
    return batch * sum(widths) * itemsize


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("batch,widths", [(3, [5, 7, 2]), (8, [16, 32, 32, 4])])
def test_linear_relu_chain_matches_hand_count(dtype, batch, widths):
    model = chain(widths, dtype)
    x = torch.randn(batch, widths[0], dtype=dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    with SavedTensorMeter(params=model) as m:
        y = model(x)
    assert m.live_bytes == chain_saved_by_hand(batch, widths, itemsize)
    assert m.peak_bytes == m.live_bytes
    assert m.n_saved == len(widths)  # x, then one ReLU output per layer
    assert saved_bytes(model, x) == m.live_bytes
    # The meter only observes: gradients are those of a run without it.
    y.float().sum().backward()
    metered = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).float().sum().backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(metered, model.parameters()))


def test_parameters_count_when_not_excluded():
    widths, batch = [6, 10, 3], 4
    model = chain(widths)
    x = torch.randn(batch, widths[0])
    w1, w2 = (layer.weight.numel() * 4 for layer in model if isinstance(layer, nn.Linear))
    # Without `params` the weights count: addmm saves the weight (a transposed view)
    # only when the gradient of its input is needed, so the first layer's weight is
    # saved only once x requires grad. Biases are never saved.
    assert saved_bytes(model, x, params=()) == chain_saved_by_hand(batch, widths, 4) + w2
    x.requires_grad_()
    assert saved_bytes(model, x, params=()) == chain_saved_by_hand(batch, widths, 4) + w1 + w2


def test_views_of_one_storage_count_once():
    class SaveViews(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a, a[1:3], a.t())
            return a * 2

        @staticmethod
        def backward(ctx, g):
            a, part, at = ctx.saved_tensors
            assert part.shape == (2, 5) and at.shape == (5, 4)
            return g * 2

    a = torch.randn(4, 5, requires_grad=True)
    with SavedTensorMeter() as m:
        out = SaveViews.apply(a)
    assert m.n_packed == 3 and m.n_saved == 1
    assert m.live_bytes == 4 * 5 * 4
    assert m.by_shape() == {((4, 5), "float32"): (1, 80)}
    out.sum().backward()
    assert torch.equal(a.grad, torch.full((4, 5), 2.0))


def test_a_view_costs_its_whole_storage():
    base = torch.randn(100, 10)
    w = torch.randn(10, 3, requires_grad=True)
    with SavedTensorMeter(params=[w]) as m:
        y = base[:2] @ w  # mm saves the (2, 10) view of a (100, 10) storage
    assert m.live_bytes == 100 * 10 * 4
    assert list(m.by_shape()) == [((2, 10), "float32")]
    del y


def test_release_after_backward_and_when_graph_dropped():
    widths, batch = [8, 16, 4], 5
    model = chain(widths)
    x = torch.randn(batch, widths[0])
    expected = chain_saved_by_hand(batch, widths, 4)
    with SavedTensorMeter(params=model) as m:
        y1 = model(x)
        y2 = model(x * 2)
    # Two graphs alive at once: x, x*2 and both graphs' activations.
    assert m.live_bytes == m.peak_bytes == 2 * expected
    y1.sum().backward()
    assert m.live_bytes == expected and m.peak_bytes == 2 * expected
    del y2
    gc.collect()
    assert m.live_bytes == 0 and m.n_live == 0
    assert m.total_bytes == 2 * expected and m.peak_bytes == 2 * expected


def test_checkpoint_keeps_only_inputs_and_what_follows():
    batch, d, hidden = 8, 32, 128
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))
    x = torch.randn(batch, d)
    target = torch.zeros(batch, d)
    runs = {}
    for use_ckpt in (False, True):
        with SavedTensorMeter(params=block) as m:
            y = checkpoint(block, x, use_reentrant=False) if use_ckpt else block(x)
            loss = nn.functional.mse_loss(y, target)
        runs[use_ckpt] = m.live_bytes
        loss.backward()
        assert m.live_bytes == 0
    # mse_loss saves y and the target; the plain block saves x and the ReLU output;
    # checkpoint saves only the block input x.
    assert runs[False] == 4 * (batch * d + batch * hidden + 2 * batch * d)
    assert runs[True] == 4 * (batch * d + 2 * batch * d)


def test_bad_params_raise():
    with pytest.raises(TypeError, match="params"):
        SavedTensorMeter(params=[3])


def test_tracker_peaks_categories_against_hand_count():
    widths, batch = [16, 64, 8], 4
    model = chain(widths)
    x = torch.randn(batch, widths[0])
    n_param_bytes = sum(p.numel() * 4 for p in model.parameters())

    def step():
        model(x).square().mean().backward()

    peaks = tracker_peaks(model, step, inputs=[x])
    assert set(peaks) == set(TRACKER_CATEGORIES)
    assert peaks["Parameter"] == n_param_bytes
    assert peaks["Other"] == x.numel() * 4
    assert peaks["Total"] == sum(v for k, v in peaks.items() if k != "Total")
    # The peak is at least the parameters, the input and the activations kept for backward.
    assert peaks["Total"] >= n_param_bytes + x.numel() * 4 + batch * sum(widths[1:]) * 4
    model.zero_grad(set_to_none=True)

    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step_opt():
        step()
        opt.step()

    peaks = tracker_peaks(model, step_opt, optimizer=opt, inputs=[x])
    # After backward every parameter has a gradient; SGD with momentum keeps one buffer
    # per parameter (created in the first step).
    assert peaks["Gradient"] == n_param_bytes
    assert peaks["Optstate"] >= n_param_bytes


def test_tracker_rejects_non_callable():
    with pytest.raises(TypeError, match="step_fn"):
        tracker_peaks(None, 3)


def test_cuda_peak_bytes():
    n = 1 << 20
    got = cuda_peak_bytes(lambda: torch.empty(n, device="cuda").fill_(1.0)
                          if torch.cuda.is_available() else None)
    if not torch.cuda.is_available():
        assert got is None
    else:
        assert got == 4 * n


def test_allocator_peak_sees_temporaries_inside_operators(capfd):
    assert allocator_peak_bytes(lambda: None) == 0
    assert allocator_peak_bytes(lambda: torch.empty(1000)) == 4000
    kept = []
    # Two tensors alive at once, then one freed: the peak is both, not what is left.
    assert allocator_peak_bytes(lambda: kept.append(torch.empty(250) + torch.empty(250))) == 3000
    z = torch.randn(64, 300)
    inside = allocator_peak_bytes(lambda: torch.logsumexp(z, dim=1))
    assert inside >= z.numel() * 4                     # a temporary as large as z, freed inside
    # MemTracker sees only the (64,) result the operator returns.
    assert tracker_peaks(None, lambda: torch.logsumexp(z, dim=1), inputs=[z])["Activation"] == 64 * 4
    # Profiler lines printed by its C++ backend never reach fd 2 (they would land in a
    # notebook's output); fd 2 works again afterwards.
    out, err = capfd.readouterr()
    assert "profiler_start" not in out + err
    os.write(2, b"fd2 still works\n")
    assert "fd2 still works" in capfd.readouterr().err
    with pytest.raises(TypeError, match="fn must be callable"):
        allocator_peak_bytes(3)


def test_record_appends_json_lines(tmp_path, monkeypatch):
    path = tmp_path / "m.jsonl"
    monkeypatch.delenv("BOOK_MEASUREMENTS", raising=False)
    assert record("ch00_x", cpu=1) is None
    assert not path.exists()
    monkeypatch.setenv("BOOK_MEASUREMENTS", str(path))
    record("ch00_x", cpu=123, ratio=0.5, cuda=None)
    record("ch00_y", cpu=torch.tensor(7))
    lines = [json.loads(s) for s in path.read_text().splitlines()]
    assert [e["key"] for e in lines] == ["ch00_x", "ch00_y"]
    assert lines[0]["figures"] == {"cpu": 123, "ratio": 0.5, "cuda": None}
    assert lines[1]["figures"] == {"cpu": 7}
    with pytest.raises(TypeError, match="'bad'"):
        record("ch00_z", bad=object())
    with pytest.raises(ValueError, match="not finite"):
        record("ch00_z", bad=float("nan"))
    with pytest.raises(ValueError, match="key"):
        record("", cpu=1)


def test_step_time_median_and_call_count():
    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.01)

    t = step_time(fn, repeats=3, warmup=2)
    assert len(calls) == 5
    assert 0.01 <= t < 0.5
    with pytest.raises(ValueError, match="repeats"):
        step_time(fn, repeats=0)


# ---------------------------------------------------------------------------
# bookkit.torchmodels: the GPT block the meters are used on in chapters 11 and 12.
from bookkit.torchmodels import (  # noqa: E402
    GPTBlock,
    GPTStack,
    korthikanti_layer_bytes,
    layer_saved_terms,
)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("attention", ["sdpa", "naive"])
@pytest.mark.parametrize("dropout", [0.0, 0.1])
@pytest.mark.parametrize("b,s,h,a", [(2, 32, 64, 4), (1, 24, 48, 3)])
def test_block_saves_what_the_term_by_term_count_says(dtype, attention, dropout, b, s, h, a):
    torch.manual_seed(0)
    block = GPTBlock(h, a, dropout=dropout, attention=attention, dtype=dtype)
    x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)
    with SavedTensorMeter(params=block) as m:
        y = block(x)
    e = torch.empty((), dtype=dtype).element_size()
    # CPU: masks and LayerNorm statistics in the activations' dtype, float32 logsumexp.
    terms = layer_saved_terms(b, s, h, a, attention, dropout > 0, act_bytes=e,
                              mask_bytes=e, stat_bytes=e, lse_bytes=4)
    assert m.live_bytes == sum(terms.values())
    y.float().square().mean().backward()
    assert m.live_bytes == 0 and x.grad.shape == x.shape


def test_layer_terms_reduce_to_korthikanti():
    b, s, h, a = 2, 1024, 2048, 16
    for attention in ("sdpa", "naive"):
        assert sum(layer_saved_terms(b, s, h, a, attention).values()) == \
            korthikanti_layer_bytes(b, s, h, a, attention)
    assert korthikanti_layer_bytes(b, s, h, a) == 34 * b * s * h
    assert korthikanti_layer_bytes(b, s, h, a, "naive") == 34 * b * s * h + 5 * a * s * s * b
    with pytest.raises(ValueError, match="attention"):
        korthikanti_layer_bytes(b, s, h, a, "flash")
    with pytest.raises(ValueError, match="s must"):
        layer_saved_terms(b, 0, h, a)


def test_naive_and_sdpa_attention_agree():
    torch.manual_seed(0)
    block = GPTBlock(64, 4, dropout=0.0, attention="sdpa", dtype=torch.float64)
    naive = GPTBlock(64, 4, dropout=0.0, attention="naive", dtype=torch.float64)
    naive.load_state_dict(block.state_dict())
    x = torch.randn(2, 16, 64, dtype=torch.float64)
    torch.testing.assert_close(block(x), naive(x))
    # Causal: changing the last position leaves the earlier outputs unchanged.
    x2 = x.clone()
    x2[:, -1] += 1.0
    torch.testing.assert_close(naive(x2)[:, :-1], naive(x)[:, :-1])


def test_block_rejects_bad_shapes_and_options():
    with pytest.raises(ValueError, match="divisible"):
        GPTBlock(10, 3)
    with pytest.raises(ValueError, match="attention"):
        GPTBlock(8, 2, attention="flash")
    block = GPTBlock(8, 2, attention="naive", max_seq=4)
    with pytest.raises(ValueError, match="expected input"):
        block(torch.randn(2, 3, 9))
    with pytest.raises(ValueError, match="max_seq"):
        block(torch.randn(1, 5, 8))


def test_checkpointed_stack_keeps_layer_inputs_and_same_gradients():
    n, b, s, h, a = 3, 2, 16, 32, 4
    grads = {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        stack = GPTStack(n, h, a, dropout=0.1, checkpoint=ckpt)
        x = torch.randn(b, s, h, requires_grad=True)
        with SavedTensorMeter(params=stack) as m:
            y = stack(x)
        if ckpt:  # each layer keeps only its input
            assert m.live_bytes == n * b * s * h * 4
        else:
            one = sum(layer_saved_terms(b, s, h, a, "sdpa", True, 4, 4, 4, 4).values())
            assert m.live_bytes == n * one
        y.square().mean().backward()
        grads[ckpt] = [p.grad for p in stack.parameters()] + [x.grad]
    # Same dropout masks in the recomputation (RNG state preserved): same gradients.
    for g0, g1 in zip(grads[False], grads[True]):
        torch.testing.assert_close(g0, g1, rtol=0, atol=1e-6)


def test_sdpa_backend_names_the_kernel_and_math_terms_match_the_meter():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from bookkit.torchmodels import sdpa_backend

    assert sdpa_backend(1, 64, 128, 2) == "flash (CPU)"
    assert sdpa_backend(1, 64, 128, 2, dtype=torch.bfloat16) == "flash (CPU)"
    # With attention dropout a CPU has no fused kernel: the s×s math path runs.
    assert sdpa_backend(1, 64, 128, 2, dropout_p=0.1) == "math"
    with sdpa_kernel(SDPBackend.MATH):
        assert sdpa_backend(1, 64, 128, 2) == "math"
    # What the math fallback keeps (float32 Q, K, V copies and softmax), exactly.
    sizes = dict(act_bytes=2, mask_bytes=2, stat_bytes=2, lse_bytes=4)
    for b, s, h, a in [(2, 128, 256, 4), (1, 64, 128, 2)]:
        torch.manual_seed(0)
        block = GPTBlock(h, a, dropout=0.1, max_seq=s, dtype=torch.bfloat16)
        x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
        with sdpa_kernel(SDPBackend.MATH):
            with SavedTensorMeter(params=block) as m:
                y = block(x)
        math_terms = layer_saved_terms(b, s, h, a, "sdpa", True, **sizes, sdpa_math=True)
        assert m.live_bytes == sum(math_terms.values())
        fused = sum(layer_saved_terms(b, s, h, a, "sdpa", True, **sizes).values())
        assert m.live_bytes > 1.25 * fused             # +27 % and +39 % here
        del y
    with pytest.raises(ValueError, match="sdpa_math"):
        layer_saved_terms(1, 8, 8, 2, "naive", sdpa_math=True)
    # On float32 inputs the math path keeps other tensors than the 16-bit upcast the
    # count models (measured: 689,152 bytes against 623,616 for (1, 64, 128, 2)).
    torch.manual_seed(0)
    block = GPTBlock(128, 2, dropout=0.1, max_seq=64)
    x = torch.randn(1, 64, 128, requires_grad=True)
    with sdpa_kernel(SDPBackend.MATH):
        with SavedTensorMeter(params=block) as m:
            y = block(x)
    sizes32 = dict(act_bytes=4, mask_bytes=4, stat_bytes=4, lse_bytes=4)
    fused32 = layer_saved_terms(1, 64, 128, 2, "sdpa", True, **sizes32)
    upcast_model = sum(fused32.values()) - fused32["attention logsumexp"] + 4 * 2 * 64 * 64
    assert m.live_bytes != upcast_model                 # the 16-bit account does not hold
    with pytest.raises(ValueError, match="16-bit"):
        layer_saved_terms(1, 64, 128, 2, "sdpa", True, **sizes32, sdpa_math=True)
    del y
    with pytest.raises(ValueError, match="divisible"):
        sdpa_backend(1, 8, 10, 3)


def test_allocator_trace_marks_held_bytes_and_phase_peaks():
    from bookkit.torchmem import AllocatorTrace

    with AllocatorTrace("cpu") as trace:
        a = torch.empty(1000)                          # 4,000 bytes
        tmp = torch.empty(3000)
        del tmp                                        # a 12,000-byte spike, gone
        trace.mark("first")
        b = torch.empty(500)
        trace.mark("second")
        del a
    assert trace.held == {"first": 4000, "second": 6000}
    assert trace.peaks == {"first": 16000, "second": 6000, "end": 6000}
    assert trace.peak_bytes == 16000 and trace.end_bytes == 2000
    # Event by event: a, tmp, del tmp | b | del a.
    assert trace.series == [0, 4000, 16000, 4000, 6000, 2000]
    assert trace.mark_at == {"first": 3, "second": 4}
    assert all(trace.series[trace.mark_at[n]] == trace.held[n] for n in trace.held)
    with pytest.raises(ValueError, match="used already"):
        with AllocatorTrace("cpu") as t:
            t.mark("x")
            t.mark("x")
    with pytest.raises(ValueError, match="cpu or cuda"):
        AllocatorTrace("meta")
    del b


def test_allocator_trace_ignores_releases_of_blocks_from_an_earlier_trace():
    """Regression: a block allocated under one trace and released under the next was
    subtracted from the second trace's count (end_bytes -3,960 instead of 40)."""
    from bookkit.torchmem import AllocatorTrace

    with AllocatorTrace() as first:
        a = torch.empty(1000)                          # 4,000 bytes
    outside = torch.empty(2000)                        # allocated with no trace running
    with AllocatorTrace() as second:
        del a, outside                                 # neither lowers the count
        b = torch.empty(10)                            # 40 bytes
        c = torch.empty(5)
        del c                                          # a block of this trace: counted
    assert first.end_bytes == 4000
    assert second.end_bytes == 40 and second.peak_bytes == 60
    del b


_GARBAGE_FROM_BEFORE_THE_TRACE = """
import gc
import torch
from bookkit.torchmem import AllocatorTrace

gc.set_threshold(10**9)                # keep the cycle below alive until the trace
cycle = [torch.ones(1 << 16)]
cycle.append(cycle)
del cycle                              # garbage allocated before the profiler started
with AllocatorTrace("cpu") as trace:
    gc.set_threshold(1)                # the first allocation once gc resumes collects it
    x = torch.ones(1 << 10)
print(trace.peak_bytes)
"""


def test_allocator_trace_writes_nothing_to_stderr_when_gc_frees_older_garbage():
    """Regression: ``__exit__`` re-enabled the cycle collector before stopping the
    profiler; a collection in between freed a block allocated before the profiler
    started, and torch's CPU allocator printed "Memory block of unknown size was
    allocated before the profiling started" on fd 2 (a fresh ``make book`` failed on
    it in chapter 9). A fresh process, so no earlier test has collected the garbage."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _GARBAGE_FROM_BEFORE_THE_TRACE],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout == "4096\n"                       # 1,024 float32s, nothing older


def test_allocator_trace_counts_do_not_depend_on_the_thread_count():
    from bookkit.torchmem import AllocatorTrace

    def step(n_threads):
        torch.set_num_threads(n_threads)
        torch.manual_seed(0)
        stack = GPTStack(2, 64, 4, dropout=0.0, max_seq=64)
        x = torch.randn(1, 64, 64, requires_grad=True)   # (16 threads: +181,632 B unpinned)
        with AllocatorTrace() as trace:
            inside = torch.get_num_threads()
            loss = stack(x).square().mean()
            trace.mark("forward")
            loss.backward()
        assert torch.get_num_threads() == n_threads          # restored
        return inside, trace.peaks

    before = torch.get_num_threads()
    try:
        one, many = step(1), step(16)
    finally:
        torch.set_num_threads(before)
    assert one[0] == many[0] == 1
    assert one[1] == many[1]
    with pytest.raises(ValueError, match="threads"):
        AllocatorTrace(threads=0)


def test_saved_tensor_meter_does_not_count_empty_tensors():
    """An empty tensor holds no memory (torch 2.5's checkpoint saves one per region as
    a placeholder): it is not a saved array, and counts no bytes."""
    from bookkit.torchmem import SavedTensorMeter

    class SavesAPlaceholder(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(torch.empty(0), x)
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            _, x = ctx.saved_tensors
            return grad * 2

    x = torch.randn(4, 8)                                   # 128 bytes, saved once
    with SavedTensorMeter() as meter:
        y = SavesAPlaceholder.apply(x.requires_grad_())
        assert meter.n_live == 1
    assert meter.n_saved == 1 and meter.n_packed == 2 and meter.peak_bytes == 128
    y.sum().backward()
    assert meter.n_live == 0 and meter.live_bytes == 0


class _Cycle:
    """An object in a reference cycle: only the cycle collector frees it."""

    def __init__(self):
        self.me = self


def test_older_objects_frozen_keeps_old_garbage_out_of_collections():
    import weakref

    from bookkit.torchmem import older_objects_frozen

    assert gc.get_freeze_count() == 0
    old = _Cycle()
    old_ref = weakref.ref(old)
    del old                                  # garbage now, freed only by a collection
    with older_objects_frozen():
        assert gc.get_freeze_count() > 0
        young = _Cycle()
        young_ref = weakref.ref(young)
        del young
        gc.collect()
        assert young_ref() is None, "garbage made inside the block is collected"
        assert old_ref() is not None, "older garbage is not freed inside the block"
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert old_ref() is None, "older garbage is collected after the block"


def test_older_objects_frozen_leaves_a_callers_freeze_alone():
    from bookkit.torchmem import older_objects_frozen

    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with older_objects_frozen():
            assert 0 < gc.get_freeze_count() <= frozen, "the block froze more than its caller did"
        # Not unfrozen (0) and nothing more frozen; frozen objects that die meanwhile (a
        # weak reference's callback, a frame) leave the count, so it may only go down.
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


from bookkit import torchmem as tm  # noqa: E402

def test_held_and_peak_counts_what_the_forward_keeps():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(4, 8, requires_grad=True)
    held, peak = tm.held_and_peak(model, x)
    # the first Linear keeps x; ReLU's output is kept once for ReLU and the second Linear
    assert held == 4 * 8 * 4 + 4 * 16 * 4
    assert peak >= held
    assert all(p.grad is None for p in model.parameters())  # gradients dropped
    ckpt = nn.Sequential(model)
    ckpt.forward = lambda v: checkpoint(model, v, use_reentrant=False)
    assert tm.held_and_peak(ckpt, x)[0] == 4 * 8 * 4  # only the input
