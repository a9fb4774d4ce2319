"""The theorem of "The square-root trick", predicted and measured: the balanced sqrt(n) plan's peak.

Predicted for every n <= 512; measured under the ledger for every n <= 100 and, up to 512,
at each n where the number of segments changes (``MEASURED_N``).

A chain in the theorem's model: every layer saves its input (``c`` bytes) and ``a`` bytes of
its own, nothing else (its output is saved, if at all, by the next layer); the loss (a sum)
saves nothing. For ``plan.sqrt_segments(n)`` (``k = ceil(sqrt(n))`` segments, lengths
``L_1 >= ... >= L_k`` differing by at most one) the theorem says the peak of saved
activations is exactly ``max_j [(j - 1) c + L_j (a + c)]``, at most
``(k - 1) c + k (a + c) < k (a + 2c)``; no one-level plan goes below
``sqrt(2 n c (a + c)) - c / 2`` and the best one stays at or below
``sqrt(2 n c (a + c)) + a + c``. Each chain runs under the byte ledger through
``checkpoint_sequential``; one op per layer keeps the runs fast.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from minigrad import Function, Tensor, memory, plan
from minigrad.checkpoint import checkpoint_sequential

C_FLOATS, A_FLOATS = 4, 16  # per layer: its input and 4x as much of its own (float32)
C, A = 4 * C_FLOATS, 4 * A_FLOATS


class ModelLayer(Function):
    """Saves its input and ``A`` bytes of its own; one FLOP per output element."""

    @staticmethod
    def forward(ctx, x):
        own = np.repeat(x, A_FLOATS // C_FLOATS, axis=-1)
        ctx.save_for_backward(x, own)
        return x + 1.0

    @staticmethod
    def backward(ctx, g):
        ctx.saved_tensors  # what a real layer would read
        return g

    @staticmethod
    def flops(ctx, out, x):
        return x.size


def layer(h):
    return ModelLayer.apply(h)


def exact_peak(lengths):
    return max((j * C + L * (A + C)) for j, L in enumerate(lengths))


# Every n up to 100, and up to 512 the n around each square k * k, where
# ceil(sqrt(n)) and so the number and lengths of the segments change: a run costs about n
# ops, so every n up to 512 (131,328 layer runs) would take 8x as long as these.
MEASURED_N = sorted(set(range(1, 101)) | {m for k in range(10, 24) for m in (k * k - 1, k * k, k * k + 1)
                                           if m <= 512} | {511, 512})


def measured(n, starts):
    x = Tensor(np.ones((1, C_FLOATS), np.float32), requires_grad=True)
    with memory.track(record_timeline=False) as m:
        y = checkpoint_sequential([layer] * n, starts, x)
        y.sum().backward()
        del y
    return m.peak["activations"] - m.start["activations"], m.flops


def test_every_predicted_sqrt_peak_for_n_up_to_512_is_the_exact_formula_within_the_bounds():
    # The theorem on the model, for every n: the peak is the exact formula, within the
    # upper bound and above the lower one (the ledger measures this model exactly: next test).
    for n in range(1, 513):
        p = plan.sqrt_segments(n)
        k = math.isqrt(n - 1) + 1
        lengths = [b - a for a, b in p.segments]
        assert len(lengths) == k and max(lengths) - min(lengths) <= 1
        assert lengths == sorted(lengths, reverse=True)
        peak = plan.predict_peak(_profile(n), p)
        assert peak == exact_peak(lengths), n
        assert peak <= (k - 1) * C + k * (A + C) < k * (A + 2 * C), n
        assert peak >= lower_bound(n), n
        assert plan.recompute_cost(_profile(n), p) == C_FLOATS * (n - lengths[-1]), n


@pytest.mark.slow
def test_the_measured_sqrt_peak_is_the_predicted_one_where_the_segments_change():
    # Executed under the ledger: the measured peak and FLOPs are the predicted ones, so the
    # theorem above holds for the run, not only for the model.
    assert len(MEASURED_N) > 100 and MEASURED_N[-1] == 512
    for n in MEASURED_N:
        p = plan.sqrt_segments(n)
        lengths = [b - a for a, b in p.segments]
        peak, flops = measured(n, p)
        assert peak == exact_peak(lengths), n
        # each layer costs C_FLOATS FLOPs; the sum of the output C_FLOATS - 1
        assert flops["forward"] == C_FLOATS * n + C_FLOATS - 1, n
        assert flops["recompute"] == C_FLOATS * (n - lengths[-1]) < flops["forward"], n


def lower_bound(n):
    """Part 2 of the theorem: no one-level plan keeps less."""
    return math.sqrt(2 * n * C * (A + C)) - C / 2


def upper_bound(n):
    """Part 2 of the theorem: the best one-level plan keeps no more."""
    return math.sqrt(2 * n * C * (A + C)) + A + C


def _profile(n):
    return plan.ChainProfile(input_bytes=(C,) * n, output_bytes=C, saves_input=(True,) * n,
                             saves_output=(False,) * n, own_bytes=(A,) * n, cost=(C_FLOATS,) * n,
                             requires_grad=(True,) * (n + 1))


@pytest.mark.parametrize("n", list(range(1, 41)) + [64, 100, 128, 256, 512])
def test_the_best_one_level_plan_lies_between_the_two_bounds(n):
    best = plan.optimal_segments(_profile(n)).predicted_peak_activations
    assert lower_bound(n) <= best <= min(upper_bound(n), plan.predict_peak(_profile(n), plan.sqrt_segments(n)))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 30, 100, 512])
@pytest.mark.parametrize("a_over_c", [0, 1, 4, 31])
def test_the_plan_of_the_proof_fits_the_upper_bound(n, a_over_c):
    """The construction in the proof of part 2: k = round(X / c) segments of lengths
    floor((M - (j - 1) c) / (a + c)), trimmed to n layers, never exceed M = X + a + c."""
    c, a = 16, 16 * a_over_c
    x = math.sqrt(2 * n * c * (a + c))
    m = x + a + c
    k = max(1, round(x / c))
    lengths = [math.floor((m - j * c) / (a + c)) for j in range(k)]
    assert min(lengths) >= 0 and sum(lengths) >= n
    trimmed, left = [], n
    for length in lengths:
        trimmed.append(min(length, left))
        left -= trimmed[-1]
    trimmed = [length for length in trimmed if length > 0]
    assert sum(trimmed) == n
    assert max(j * c + length * (a + c) for j, length in enumerate(trimmed)) <= m


@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_the_model_profile_is_what_the_ledger_measures(n):
    x = Tensor(np.ones((1, C_FLOATS), np.float32), requires_grad=True)
    assert plan.profile_chain([layer] * n, x) == _profile(n)
    for starts in ([0], list(range(n)), list(plan.sqrt_segments(n).starts)):
        assert measured(n, starts)[0] == plan.predict_peak(_profile(n), starts)
