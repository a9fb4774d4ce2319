"""Helpers for Part III's chapters on related techniques (ch19) and applications (ch20).

``training_step``
    One optimizer step, optionally split into micro-batches (gradient accumulation)
    and run under ``torch.autocast`` (mixed precision), that reports the bytes of each
    memory category: parameters, gradients, optimizer state and the peak of the saved
    activations. Checkpointing is the model's own business (for example
    ``GPTStack.checkpoint``); the step measures whatever the model does.

``step_peak``
    The peak bytes of one forward + backward beyond the weights, from torch's
    ``MemTracker``: what must fit in a memory budget besides the model.

``SegmentationNet``
    A small encoder-decoder for dense prediction (a convolutional backbone and a light
    feature-pyramid decoder), whose backbone stages can each run under
    ``torch.utils.checkpoint`` (``use_reentrant=False``).

``largest_fitting``
    Binary search for the largest setting (resolution, sequence length, batch) whose
    *measured* memory stays within a budget.

``autobatch``
    An AutoBatch-style choice of batch size: measure memory at a few batch sizes, fit a
    straight line, and take the largest batch whose predicted memory is a given fraction
    of the budget (the approach of Ultralytics' AutoBatch, which does this with the free
    GPU memory).

All sizes are in bytes (ints); shapes are given in the docstrings.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from bookkit.torchmem import SavedTensorMeter, storage_key

__all__ = ["tensor_bytes", "optimizer_state_bytes", "StepMemory", "training_step", "step_peak",
           "SegmentationNet", "CHECKPOINT_MODES", "largest_fitting", "AutoBatch", "autobatch"]


def tensor_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (``None`` entries skipped).

    A storage shared by several tensors (views, tied weights) counts once, whole.

    Shown in chapter 19.
    """
    seen: dict[tuple[str, int], int] = {}
    for t in tensors:
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensor_bytes: expected tensors, got {type(t).__name__}")
        seen[storage_key(t)] = t.untyped_storage().nbytes()
    return sum(seen.values())


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of every tensor in ``optimizer.state`` (AdamW: ``exp_avg``, ``exp_avg_sq``
    and a one-element ``step`` per parameter). Empty before the first ``step()``.
    Shown in chapter 19."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    return tensor_bytes(v for state in optimizer.state.values() for v in state.values()
                        if isinstance(v, torch.Tensor))


@dataclass
class StepMemory:
    """What one training step held, by category, in bytes.

    ``parameters``, ``gradients`` (the ``.grad`` of the parameters after the last
    backward) and ``optimizer_state`` (after ``optimizer.step()``) are exact sizes of
    the tensors involved. ``saved_activations`` is the peak of the bytes autograd kept
    for backward (``SavedTensorMeter.peak_bytes``) over all micro-batches: with
    accumulation, one micro-batch's worth, since each backward frees its micro-batch's
    activations before the next forward. ``loss`` is the mean loss over the whole
    batch, as a Python float; ``micro_batches`` the number of forward/backward passes.
    ``saved_activations`` is ``None`` for a step run with ``meter=False`` (for timing:
    the meter's hooks cost a little Python work per saved tensor).

    Shown in chapter 19.
    """

    parameters: int
    gradients: int
    optimizer_state: int
    saved_activations: int | None
    loss: float
    micro_batches: int

    CATEGORIES = ("parameters", "gradients", "optimizer_state", "saved_activations")

    def as_dict(self) -> dict[str, int]:
        """``{category: bytes}`` in the order of ``CATEGORIES``."""
        return {c: getattr(self, c) for c in self.CATEGORIES}

    @property
    def total(self) -> int:
        """Sum of the four categories. Not the step's peak: gradients and saved
        activations are not all alive at the same moment, while activation gradients,
        temporaries and what a checkpointed region rebuilds during backward are not in
        the sum at all (chapter 19 measures the peak with the allocator)."""
        if self.saved_activations is None:
            raise ValueError("this step ran without the meter (meter=False): no activation figure")
        return sum(self.as_dict().values())


def training_step(model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                  inputs: torch.Tensor, targets: torch.Tensor,
                  optimizer: torch.optim.Optimizer | None = None, micro_batches: int = 1,
                  autocast_dtype: torch.dtype | None = None, meter: bool = True) -> StepMemory:
    """One training step on ``(inputs, targets)``, measured by memory category.

    The batch (dimension 0 of ``inputs`` and ``targets``) is split into
    ``micro_batches`` nearly equal parts (``torch.tensor_split``), each copied into
    its own storage as a data loader would deliver it. Each part runs
    forward, ``loss_fn(output, target)`` and backward; the gradients add up in
    ``.grad`` (gradient accumulation). Each part's loss is weighted by its share of the
    batch, so for a ``loss_fn`` that averages over the batch (``reduction="mean"``) the
    accumulated gradient equals the full batch's gradient up to float rounding.
    With ``autocast_dtype`` (e.g. ``torch.bfloat16``) the forward runs under
    ``torch.autocast(device_type, dtype)``; the loss is computed in float32 outside it
    (on float32 copies of a 16-bit output and a 16-bit floating-point target).
    Then ``optimizer.step()`` if an optimizer is given. Gradients are cleared
    (``set_to_none``) at the start and left in place at the end, for inspection.
    ``meter=False`` runs the same step without ``SavedTensorMeter`` (for timing).

    Shapes: ``inputs`` (batch, ...), ``targets`` (batch, ...). Returns ``StepMemory``.

    Shown in chapter 19.
    """
    if not isinstance(inputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError("inputs and targets must be tensors")
    if inputs.dim() == 0 or targets.dim() == 0 or inputs.shape[0] != targets.shape[0]:
        raise ValueError(f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} "
                         "must share a leading batch dimension")
    batch = inputs.shape[0]
    if isinstance(micro_batches, bool) or int(micro_batches) != micro_batches \
            or not 1 <= micro_batches <= batch:
        raise ValueError(f"micro_batches must be an integer in [1, batch={batch}], got {micro_batches!r}")
    micro_batches = int(micro_batches)
    params = list(model.parameters())
    model.zero_grad(set_to_none=True)
    total_loss = 0.0
    device_type = inputs.device.type
    counter = SavedTensorMeter(params=model) if meter else contextlib.nullcontext()
    with counter:
        for xs, ys in zip(inputs.tensor_split(micro_batches), targets.tensor_split(micro_batches)):
            # Own storage per micro-batch, as a data loader would deliver it: a saved view
            # would keep (and the meter would count) the whole batch's storage.
            xs, ys = xs.clone(), ys.clone()
            with torch.autocast(device_type, dtype=autocast_dtype or torch.bfloat16,
                                enabled=autocast_dtype is not None):
                out = model(xs)
            # float32 loss: a mean over many elements is exactly where 16-bit rounding hurts
            # (a 16-bit target is upcast too: torch 2.5's mse_loss cannot backward mixed dtypes)
            loss = loss_fn(out.float(), ys.float() if ys.is_floating_point() else ys) \
                * (xs.shape[0] / batch)
            loss.backward()
            total_loss += loss.item()
            del out, loss  # nothing of this micro-batch outlives its backward
    gradients = tensor_bytes(p.grad for p in params)
    if optimizer is not None:
        optimizer.step()
    return StepMemory(parameters=tensor_bytes(params), gradients=gradients,
                      optimizer_state=optimizer_state_bytes(optimizer) if optimizer is not None else 0,
                      saved_activations=counter.peak_bytes if meter else None, loss=total_loss,
                      micro_batches=micro_batches)


def step_peak(model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
              inputs: torch.Tensor, targets: torch.Tensor,
              autocast_dtype: torch.dtype | None = None) -> int:
    """Peak bytes of one forward + backward beyond the model's parameters and buffers.

    Measured with torch's ``MemTracker`` (``bookkit.torchmem.tracker_peaks``): the total
    at the moment it peaked, minus the Parameter and Buffer categories. What remains is
    what the step itself needs: the inputs and targets, saved activations, what a
    checkpointed region rebuilds, gradients of activations and weights, temporaries.
    No optimizer step. Gradients are cleared (``set_to_none``) before and after, so
    that calls do not see each other's. ``autocast_dtype`` runs forward and loss under
    ``torch.autocast``. Shapes: ``inputs`` (batch, ...), ``targets`` (batch, ...).

    Shown in chapter 20.
    """
    from bookkit.torchmem import tracker_peaks

    if inputs.dim() == 0 or targets.dim() == 0 or inputs.shape[0] != targets.shape[0]:
        raise ValueError(f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} "
                         "must share a leading batch dimension")

    def step():
        with torch.autocast(inputs.device.type, dtype=autocast_dtype or torch.bfloat16,
                            enabled=autocast_dtype is not None):
            loss = loss_fn(model(inputs), targets)
        loss.backward()

    model.zero_grad(set_to_none=True)
    peaks = tracker_peaks(model, step, inputs=[inputs, targets])
    model.zero_grad(set_to_none=True)
    return peaks["Total"] - peaks["Parameter"] - peaks["Buffer"]


CHECKPOINT_MODES = ("none", "backbone", "all")


def _conv_stage(c_in: int, c_out: int, depth: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Conv2d(c_in if i == 0 else c_out, c_out, 3, padding=1), nn.ReLU()]
    return nn.Sequential(*layers)


class _Merge(nn.Module):
    """Decoder stage (FPN-style): upsample the coarser map by 2, add a 1×1 projection
    of the encoder's skip at this resolution, then a 3×3 convolution with ReLU.

    ``(b, width, H/2, W/2), (b, c_skip, H, W) -> (b, width, H, W)``.
    """

    def __init__(self, c_skip: int, width: int):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.lateral = nn.Conv2d(c_skip, width, 1)
        self.smooth = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU())

    def forward(self, coarse: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.smooth(self.up(coarse) + self.lateral(skip))


class SegmentationNet(nn.Module):
    """A small encoder-decoder network for per-pixel classification (segmentation).

    ``(batch, in_channels, H, W) -> (batch, n_classes, H, W)`` logits.

    The encoder (the "backbone") has one stage per entry of ``widths``: ``depth``
    3×3 convolutions with ReLU, each stage after the first preceded by a 2×2 max-pool,
    so stage *i* works at resolution H/2^i. The decoder is light, as in feature-pyramid
    segmentation heads: starting from a 1×1 projection of the coarsest stage, it
    climbs back one resolution at a time (upsample, add a 1×1 projection of the encoder
    output at that resolution, a 3×3 convolution with ReLU, all ``decoder_width``
    channels wide); a 1×1 convolution gives the class logits. H and W must be divisible
    by 2^(len(widths) - 1). There is no normalisation layer: BatchNorm's running
    statistics would be updated twice under checkpointing (chapter 8).

    ``checkpoint``: ``"none"`` (keep everything), ``"backbone"`` (each encoder stage
    under ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``), or
    ``"all"`` (decoder stages too). An attribute, so it can be changed between steps.

    Shown in chapter 20.
    """

    def __init__(self, in_channels: int = 3, n_classes: int = 4,
                 widths: Sequence[int] = (16, 32, 64), depth: int = 3,
                 decoder_width: int = 16, checkpoint: str = "none"):
        super().__init__()
        widths = tuple(widths)
        for name, vals in (("widths", widths), ("depth", (depth,)),
                           ("decoder_width", (decoder_width,)),
                           ("in_channels", (in_channels,)), ("n_classes", (n_classes,))):
            if not vals or any(isinstance(v, bool) or int(v) != v or v < 1 for v in vals):
                raise ValueError(f"{name} must be positive integers, got {vals if name == 'widths' else vals[0]!r}")
        self.in_channels, self.n_classes, self.widths = in_channels, n_classes, widths
        self.checkpoint = checkpoint
        self.encoder = nn.ModuleList()
        c = in_channels
        for i, w in enumerate(widths):
            stage = _conv_stage(c, w, depth)
            self.encoder.append(nn.Sequential(nn.MaxPool2d(2), stage) if i else stage)
            c = w
        self.top = nn.Conv2d(widths[-1], decoder_width, 1)
        self.decoder = nn.ModuleList(_Merge(widths[i], decoder_width)
                                     for i in reversed(range(len(widths) - 1)))
        self.head = nn.Conv2d(decoder_width, n_classes, 1)

    @property
    def checkpoint(self) -> str:
        return self._checkpoint

    @checkpoint.setter
    def checkpoint(self, mode: str) -> None:
        if mode not in CHECKPOINT_MODES:
            raise ValueError(f"checkpoint must be one of {CHECKPOINT_MODES}, got {mode!r}")
        self._checkpoint = mode

    @property
    def divisor(self) -> int:
        """H and W must be multiples of this (one halving per stage after the first)."""
        return 2 ** (len(self.widths) - 1)

    @staticmethod
    def _run(module: nn.Module, *args: torch.Tensor, ckpt: bool) -> torch.Tensor:
        if ckpt and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint
            return checkpoint(module, *args, use_reentrant=False)
        return module(*args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f"expected input (batch, {self.in_channels}, H, W), got {tuple(x.shape)}")
        if x.shape[2] % self.divisor or x.shape[3] % self.divisor:
            raise ValueError(f"H and W must be multiples of {self.divisor}, got {tuple(x.shape[2:])}")
        ck_enc = self.checkpoint in ("backbone", "all")
        ck_dec = self.checkpoint == "all"
        skips = []
        for stage in self.encoder:
            x = self._run(stage, x, ckpt=ck_enc)
            skips.append(x)
        x = self.top(x)
        for merge, skip in zip(self.decoder, reversed(skips[:-1])):
            x = self._run(merge, x, skip, ckpt=ck_dec)
        return self.head(x)


def largest_fitting(measure: Callable[[int], int], low: int, high: int, budget: int,
                    step: int = 1) -> tuple[int | None, dict[int, int]]:
    """Largest ``v`` in ``low, low + step, ..., <= high`` with ``measure(v) <= budget``.

    ``measure`` maps a setting (a resolution, a sequence length, a batch size) to the
    bytes it needs, measured; it must not decrease as the setting grows (memory does
    not shrink with more pixels or tokens), which is what makes binary search valid.
    Returns ``(v, probes)``: ``v`` is ``None`` when even ``low`` does not fit;
    ``probes`` maps every setting measured to its bytes (about log2 of the number of
    candidates, plus one).

    Shown in chapter 20.
    """
    for name, v in (("low", low), ("high", high), ("step", step), ("budget", budget)):
        if isinstance(v, bool) or int(v) != v:
            raise ValueError(f"{name} must be an integer, got {v!r}")
    if step < 1 or low > high:
        raise ValueError(f"need step >= 1 and low <= high, got low={low}, high={high}, step={step}")
    probes: dict[int, int] = {}

    def fits(i: int) -> bool:
        v = low + i * step
        if v not in probes:
            probes[v] = int(measure(v))
        return probes[v] <= budget

    lo, hi = 0, (high - low) // step          # candidate indices
    if not fits(lo):
        return None, probes
    while lo < hi:                            # invariant: index lo fits
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return low + lo * step, probes


@dataclass
class AutoBatch:
    """Result of ``autobatch``: the chosen ``batch``; the fitted line
    ``bytes ≈ fixed + per_sample · batch``; ``target`` = fraction · budget (bytes);
    ``measured`` = {batch size: bytes} of the profiling runs. Shown in chapter 20."""

    batch: int
    fixed: float
    per_sample: float
    target: float
    measured: dict[int, int] = field(default_factory=dict)

    def predict(self, batch: int) -> float:
        """Bytes the fitted line predicts for ``batch`` samples."""
        return self.fixed + self.per_sample * batch


def autobatch(measure: Callable[[int], int], budget: int, fraction: float = 0.6,
              batch_sizes: Sequence[int] = (1, 2, 4, 8, 16), max_batch: int = 1024) -> AutoBatch:
    """Choose a batch size from measured memory, in the manner of Ultralytics' AutoBatch.

    ``measure(b)`` returns the bytes one training step with ``b`` samples needs. It is
    called for each of ``batch_sizes``; a least-squares line through the results gives
    the fixed bytes (weights, gradients, workspaces) and the bytes per sample; the
    chosen batch is the largest whole number whose predicted bytes are at most
    ``fraction · budget``, capped at ``max_batch``. (Ultralytics measures free CUDA memory
    for the budget, profiles 1, 2, 4, 8, 16 images at the training image size and uses
    60 % by default; it fits in log-log space, a power law, which for memory that grows
    linearly with the batch is the same line.) The fraction leaves room for what
    the profile did not see: fragmentation, larger temporaries, other processes.

    Raises ``ValueError`` when the measurements do not grow with the batch or when not
    even one sample fits.

    Shown in chapter 20.
    """
    sizes = sorted({int(b) for b in batch_sizes})
    if len(sizes) < 2 or sizes[0] < 1:
        raise ValueError(f"need at least two distinct positive batch sizes, got {batch_sizes!r}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if budget <= 0:
        raise ValueError(f"budget must be positive (bytes), got {budget}")
    measured = {b: int(measure(b)) for b in sizes}
    n = len(sizes)
    mean_b = sum(sizes) / n
    mean_m = sum(measured.values()) / n
    sxx = sum((b - mean_b) ** 2 for b in sizes)
    per_sample = sum((b - mean_b) * (measured[b] - mean_m) for b in sizes) / sxx
    fixed = mean_m - per_sample * mean_b
    if per_sample <= 0:
        raise ValueError(f"memory does not grow with the batch (slope {per_sample:.1f} bytes "
                         f"per sample); measured {measured}")
    target = fraction * budget
    batch = min(int((target - fixed) // per_sample), max_batch)
    if batch < 1:
        raise ValueError(f"not even one sample fits: {fraction:.0%} of the budget is "
                         f"{target:,.0f} bytes, one sample needs about {fixed + per_sample:,.0f}")
    return AutoBatch(batch=batch, fixed=fixed, per_sample=per_sample, target=target,
                     measured=measured)
