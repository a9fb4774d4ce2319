"""What one PyTorch training step holds, by memory category (chapters 19 and 20).

``training_step``
    One optimizer step, optionally split into micro-batches (gradient accumulation)
    and run under ``torch.autocast`` (mixed precision), that reports the bytes of each
    memory category: parameters, gradients, optimizer state and the peak of the saved
    activations. Checkpointing is the model's own business (for example
    ``GPTStack.checkpoint``); the step measures whatever the model does.

``step_peak``
    The peak bytes of one forward + backward beyond the weights, from torch's
    ``MemTracker``: what must fit in a memory budget besides the model.

``tensor_bytes``, ``optimizer_state_bytes``
    Bytes of distinct storages, and of an optimizer's state.

All sizes are in bytes (ints).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from bookkit.torchmem import SavedTensorMeter, storage_key

__all__ = ["tensor_bytes", "optimizer_state_bytes", "StepMemory", "training_step", "step_peak"]


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
