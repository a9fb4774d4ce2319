"""Timing a training step's forward and backward passes separately.

``bookkit.torchmem.step_time`` times a whole step. Chapter 14 needs the two halves
apart, because checkpointing's cost is an extra forward *inside* the backward pass:
with full checkpointing the backward pass grows by about one forward, and the
forward pass stays as it was.

Wall-clock times vary from run to run (other processes, frequency scaling, caches),
so each figure is a median over several repeats, and notebooks print them in cells
marked ``# NBVAL_IGNORE_OUTPUT``.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["StepTimes", "forward_backward_times", "compare_times", "overhead_bound"]


@dataclass(frozen=True)
class StepTimes:
    """Median wall-clock seconds of a step's forward and backward passes.

    ``forward``: building the graph and the loss; ``backward``: ``loss.backward()``
    (including any recomputation a checkpoint does there). ``step`` is their sum,
    ``repeats`` how many timed runs each median is over.

    Shown in chapter 14.
    """

    forward: float
    backward: float
    repeats: int

    @property
    def step(self) -> float:
        return self.forward + self.backward

    @property
    def backward_per_forward(self) -> float:
        """Backward time in units of forward time (about 2 for matmul-bound layers)."""
        return self.backward / self.forward


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def forward_backward_times(forward: Callable[[], torch.Tensor], repeats: int = 5,
                           warmup: int = 1) -> StepTimes:
    """Time ``loss = forward()`` and ``loss.backward()`` separately.

    ``forward`` must return a scalar tensor that requires grad (typically the loss of
    one batch); it is called ``warmup + repeats`` times, each followed by a backward.
    Gradients accumulate in the parameters across calls (set them to None afterwards
    if that matters). On a GPU the device is synchronised around each half so that
    queued kernels are counted where they run. Returns the medians as ``StepTimes``
    (seconds).

    Shown in chapter 14.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    fwd, bwd = [], []
    for i in range(warmup + repeats):
        _sync()
        t0 = time.perf_counter()
        loss = forward()
        _sync()
        t1 = time.perf_counter()
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
            raise ValueError("forward() must return a one-element tensor that requires grad, "
                             f"got {type(loss).__name__}"
                             + (f" of shape {tuple(loss.shape)}, requires_grad={loss.requires_grad}"
                                if isinstance(loss, torch.Tensor) else ""))
        loss.backward()
        _sync()
        t2 = time.perf_counter()
        del loss
        if i >= warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
    return StepTimes(statistics.median(fwd), statistics.median(bwd), repeats)


def compare_times(forwards: dict[str, Callable[[], torch.Tensor]], rounds: int = 5,
                  warmup: int = 1) -> dict[str, StepTimes]:
    """``forward_backward_times`` for several variants, interleaved round by round.

    Each round runs every variant once (forward and backward) in the given order, so
    that a slow spell of a shared machine affects all variants alike instead of the
    one that happened to run then. ``warmup`` untimed rounds come first. Returns
    ``{name: StepTimes}`` with medians over ``rounds``.

    Shown in chapter 14.
    """
    if not forwards:
        raise ValueError("compare_times: no variants given")
    if rounds < 1 or warmup < 0:
        raise ValueError(f"need rounds >= 1 and warmup >= 0, got {rounds}, {warmup}")
    samples: dict[str, list[StepTimes]] = {name: [] for name in forwards}
    for _ in range(warmup):
        for fn in forwards.values():
            forward_backward_times(fn, repeats=1, warmup=0)
    for _ in range(rounds):
        for name, fn in forwards.items():
            samples[name].append(forward_backward_times(fn, repeats=1, warmup=0))
    return {name: StepTimes(statistics.median(t.forward for t in ts),
                            statistics.median(t.backward for t in ts), rounds)
            for name, ts in samples.items()}


def overhead_bound(backward_per_forward: float = 2.0, recomputed_fraction: float = 1.0) -> float:
    """Predicted extra step time of checkpointing, as a fraction of the plain step.

    Recomputing a fraction ``r`` of the forward adds ``r·F`` to a step of ``F + B``;
    with ``B = k·F`` that is ``r / (1 + k)``. Full checkpointing (``r = 1``) with the
    usual ``k = 2`` gives the one-third bound. ``r`` is the share of the forward's time
    spent inside checkpointed regions: torch's ``checkpoint`` reruns each of them once
    during backward.

    Shown in chapter 14.
    """
    if backward_per_forward <= 0:
        raise ValueError(f"backward_per_forward must be positive, got {backward_per_forward}")
    if not 0.0 <= recomputed_fraction <= 1.0:
        raise ValueError(f"recomputed_fraction must be in [0, 1], got {recomputed_fraction}")
    return recomputed_fraction / (1.0 + backward_per_forward)
