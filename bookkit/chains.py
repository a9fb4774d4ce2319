"""Chains of MLP blocks and one training step through them, measured by the byte ledger
(shown in chapter 4b; chapters 5 and 6 use them too).

`block_chain` builds the chain, `measure_chain_step` runs one forward, loss and backward
(plainly or through ``checkpoint_sequential`` with a plan) under ``minigrad.memory.track``
and returns peak bytes, op counts, FLOPs per phase and the gradients; `time_chain_steps`
times plans against each other (wall clock: an illustration, never a claim);
`waist_chain` is chapter 5's chain with narrow waists, which chapter 6 plans again.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

import minigrad
import minigrad.ops as F
from bookkit.blas import blas_threads
from minigrad import Tensor, memory, nn, random
from minigrad.checkpoint import checkpoint_sequential

__all__ = ["block_chain", "run_chain", "ChainStep", "measure_chain_step", "ChainTimes",
           "time_chain_steps", "WaistChain", "waist_chain"]


def block_chain(widths, hidden, seed: int = 0, activation: str = "tanh", dtype=np.float32) -> list:
    """A chain of ``n`` MLP blocks ``Linear(widths[i], hidden[i]) -> act -> Linear(hidden[i], widths[i+1])``.
    Shown in chapter 4b.

    ``widths``: ``n + 1`` boundary widths (the chain's input is ``(batch, widths[0])``,
    block ``i`` maps ``(batch, widths[i])`` to ``(batch, widths[i+1])``); ``hidden``:
    ``n`` inner widths, or one int for all blocks. For a batch ``b`` in float32, block
    ``i`` saves for backward its input (``4 b widths[i]`` bytes) and its activation's
    output (``4 b hidden[i]`` bytes; ``activation`` is ``"tanh"`` or ``"relu"``, both save
    their output); its output is saved by the next block. Parameters are drawn from
    ``minigrad.random`` seeded with ``seed``."""
    widths = [int(w) for w in widths]
    n = len(widths) - 1
    if n < 1:
        raise ValueError(f"block_chain: widths needs at least 2 entries (n + 1 boundaries), got {widths}")
    hidden = [int(hidden)] * n if np.ndim(hidden) == 0 else [int(h) for h in hidden]
    if len(hidden) != n:
        raise ValueError(f"block_chain: hidden has {len(hidden)} entries, expected n={n} "
                         f"(one per block, len(widths) - 1)")
    if min(widths) < 1 or min(hidden) < 1:
        raise ValueError(f"block_chain: widths and hidden sizes must be >= 1, got {widths}, {hidden}")
    acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
    if activation not in acts:
        raise ValueError(f"block_chain: activation must be one of {sorted(acts)}, got {activation!r}")
    random.manual_seed(seed)
    return [nn.Sequential(nn.Linear(widths[i], hidden[i], dtype=dtype), acts[activation](),
                          nn.Linear(hidden[i], widths[i + 1], dtype=dtype)) for i in range(n)]


def run_chain(layers, x, plan=None):
    """Output of ``layers`` applied in turn to ``x`` (shown in chapter 4b): plainly (``plan=None``) or
    through ``minigrad.checkpoint.checkpoint_sequential(layers, plan, x)`` (``plan``: a
    number of segments, a list of segment starts, a `minigrad.plan` plan or a schedule such
    as ``minigrad.plan.revolve(n, slots)``)."""
    if plan is None:
        h = x
        for layer in layers:
            h = layer(h)
        return h
    return checkpoint_sequential(layers, plan, x)


@dataclass
class ChainStep:
    """One forward, loss and backward of a chain, as the byte ledger saw it (shown in chapter 4b).

    ``peak_activations``: peak bytes of saved activations during the step; ``peak_total``:
    peak bytes of everything the step holds for this chain (its parameters and input,
    gradients, saved activations, temporaries), both relative to what was live before,
    so other objects alive in the process do not count; ``forward_ops``,
    ``recompute_ops``: op executions of the forward pass and those repeated in backward
    (checkpoint bookkeeping nodes not counted); ``forward_flops``, ``recompute_flops``,
    ``backward_flops``: the ledger's FLOPs of each phase (``m.flops``: exact, the same on
    every machine); ``grads``: copies of the parameters' gradients after the step."""

    peak_activations: int
    peak_total: int
    forward_ops: int
    recompute_ops: int
    forward_flops: int
    recompute_flops: int
    backward_flops: int
    grads: list = field(repr=False)

    @property
    def extra_forward_flops(self) -> float:
        """Recomputed FLOPs as a fraction of the forward pass's FLOPs."""
        return self.recompute_flops / self.forward_flops

    @property
    def step_overhead(self) -> float:
        """Recomputed FLOPs as a fraction of a plain step's (forward + backward) FLOPs."""
        return self.recompute_flops / (self.forward_flops + self.backward_flops)


def _params(layers):
    """The parameters of every layer of the chain, in order."""
    return [p for layer in layers for p in layer.parameters()]


def measure_chain_step(layers, x, plan=None, loss=None, seed: int = 0) -> ChainStep:
    """Run ``loss(run_chain(layers, x, plan))`` and its backward under
    ``minigrad.memory.track`` and report bytes, op counts and FLOPs (`ChainStep`). Shown in
    chapter 4b.

    ``x``: a minigrad Tensor ``(batch, widths[0])``; ``loss``: output -> scalar Tensor
    (default: ``y.sum()``, which saves nothing). Gradients are reset first;
    ``minigrad.random`` is seeded with ``seed`` (dropout masks are reproducible)."""
    loss = loss if loss is not None else (lambda y: y.sum())
    for p in _params(layers):
        p.grad = None
    minigrad.random.manual_seed(seed)
    with memory.track(record_timeline=False) as m:
        value = loss(run_chain(layers, x, plan))
        value.backward()
        del value
    grads = [p.grad.copy() for p in _params(layers)]
    for p in _params(layers):
        p.grad = None
    # Checkpoint keepers are bookkeeping, not forward work.
    fwd = m.ops("forward") - m.counts["forward"].get("checkpoint", 0)
    recomputed = m.ops("recompute") - m.counts["recompute"].get("checkpoint", 0)
    # The ledger counts every array alive in the process: subtract what was live before the
    # step (other models in the notebook) and add back this chain's own parameters and input.
    own = sum(p.nbytes for p in _params(layers)) + x.nbytes
    return ChainStep(peak_activations=int(m.peak["activations"] - m.start["activations"]),
                     peak_total=int(m.peak["total"] - m.start["total"] + own),
                     forward_ops=int(fwd), recompute_ops=int(recomputed),
                     forward_flops=m.flops["forward"], recompute_flops=m.flops["recompute"],
                     backward_flops=m.flops["backward"], grads=grads)


@dataclass(frozen=True)
class ChainTimes:
    """Wall-clock seconds of one step's ``forward`` (checkpointed segments run untaped) and
    ``backward`` (every recomputation included). An illustration: it varies by machine.
    Shown in chapter 4b."""

    forward: float
    backward: float

    @property
    def step(self) -> float:
        return self.forward + self.backward


def time_chain_steps(layers, x, plans: dict, repeat: int = 5) -> dict:
    """Time one forward + backward of ``run_chain(layers, x, plan).sum()`` for each
    ``name: plan`` of ``plans`` (``None``: no checkpointing). Shown in chapter 4b, for an
    illustration.

    The plans take turns (round robin, ``repeat`` rounds) so that a slow spell of the
    machine hits all of them; each keeps its fastest step. NumPy's BLAS runs
    single-threaded meanwhile (`bookkit.blas.blas_threads`). Returns ``{name: ChainTimes}``."""
    if repeat < 1:
        raise ValueError(f"time_chain_steps: repeat must be >= 1, got {repeat}")
    best = {}
    with blas_threads(1):
        for _ in range(repeat):
            for name, plan in plans.items():
                for p in _params(layers):
                    p.grad = None
                t0 = time.perf_counter()
                value = run_chain(layers, x, plan).sum()
                t1 = time.perf_counter()
                value.backward()
                t2 = time.perf_counter()
                del value
                if name not in best or t2 - t0 < best[name].step:
                    best[name] = ChainTimes(forward=t1 - t0, backward=t2 - t1)
    for p in _params(layers):
        p.grad = None
    return best


@dataclass
class WaistChain:
    """A chain and its regression task (shown in chapter 5): ``layers`` (MLP blocks on the
    boundary ``widths``), the input ``x`` (requires grad) and the ``target`` of
    ``loss(y)``, a mean-squared error."""

    widths: tuple
    layers: list = field(repr=False)
    x: Tensor = field(repr=False)
    target: Tensor = field(repr=False)

    def loss(self, y):
        """The mean-squared error of the chain's output ``y`` against ``target``."""
        return F.mse_loss(y, self.target)


def waist_chain(batch: int = 16) -> WaistChain:
    """Chapter 5's chain with narrow waists (shown in chapter 5; chapter 6 plans it again):
    24 blocks ``Linear(w, 4w) -> ReLU -> Linear(4w, w')`` whose boundaries are 8 features
    wide except three stretches at 64, like the high-resolution stages of a vision
    network; a random input of ``batch`` rows and a random target, both seeded."""
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"waist_chain: batch must be an integer >= 1, got {batch!r}")
    widths = (8,) * 4 + (64,) * 2 + (8,) * 6 + (64,) * 2 + (8,) * 6 + (64,) * 2 + (8,) * 3
    layers = block_chain(widths, [4 * w for w in widths[:-1]], activation="relu")
    random.manual_seed(0)
    x = Tensor(random.randn(int(batch), widths[0]), requires_grad=True)
    target = Tensor(random.randn(int(batch), widths[-1]))
    return WaistChain(widths, layers, x, target)
