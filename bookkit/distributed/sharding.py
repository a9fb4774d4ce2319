"""DDP, FSDP1 and FSDP2, with and without activation checkpointing ("Beyond one device").

Each rank trains the same small GPT-style stack (`bookkit.torchmodels.GPTBlock`, the
block of "Transformer activations, measured" and "Selective recomputation") on its half of a
global batch, for a few SGD steps, under each wrapper and each way of switching
checkpointing on:

``"none"``
    no checkpointing.
``"integration"``
    the wrapper's own activation-checkpointing integration: ``checkpoint_wrapper`` with
    ``CheckpointImpl.NO_REENTRANT`` around every block, *inside* the wrapper's unit.
    FSDP1 and DDP: ``apply_activation_checkpointing(model, checkpoint_wrapper_fn=...,
    check_fn=...)`` after wrapping; FSDP2: ``checkpoint_wrapper`` on each block, then
    ``fully_shard`` on each block and on the root (the order the FSDP2 docs use).
``"hand-written reentrant"`` / ``"hand-written non-reentrant"``
    a checkpoint written by hand around the wrapped module: the model's forward calls
    ``torch.utils.checkpoint.checkpoint(layer, x)`` on each layer, and under FSDP each
    layer *is* the FSDP unit, so the checkpoint sits *outside* the unit.

`compare_hf_switch` adds what a ``transformers`` model's own switch does under FSDP1
and FSDP2 (a tiny GPT-2, ``activation_checkpointing_enable``): from ``transformers``
5.23 it checkpoints each layer's ``forward``, not its ``__call__``, so FSDP2's module
hooks stay outside the checkpoint, and FSDP1's wrapper, which calls the layer, stays
outside it too: the checkpoint sits *inside* the unit, as with the integration.

Measured per rank: parameter bytes stored (`local_parameter_bytes`), bytes saved for
backward by the forward (`ShardedSavedTensorMeter`), the collectives of the forward and
of the backward (`CollectiveCounter`), and the loss of every step (averaged over ranks).
"""
from __future__ import annotations

import functools

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from bookkit.distributed.meters import (BackwardTimeline, CollectiveCounter,
                                        ShardedSavedTensorMeter, local_parameter_bytes)
from bookkit.torchmodels import GPTBlock

__all__ = ["TinyGPT", "WRAPPERS", "CHECKPOINTING", "wrap", "train_steps", "compare_wrappers",
           "HF_WRAPPERS", "HF_CHECKPOINTING", "wrap_hf", "compare_hf_switch",
           "TIMELINES", "backward_timelines",
           "HIDDEN", "N_HEADS", "N_LAYERS", "BATCH_PER_RANK", "SEQ", "STEPS"]

HIDDEN, N_HEADS, N_LAYERS = 128, 4, 4
BATCH_PER_RANK, SEQ, STEPS, LR = 4, 64, 3, 0.1
WRAPPERS = ("DDP", "FSDP1", "FSDP2")
CHECKPOINTING = ("none", "integration", "hand-written reentrant", "hand-written non-reentrant")
HF_WRAPPERS = ("FSDP1", "FSDP2")
HF_CHECKPOINTING = ("none", "transformers reentrant", "transformers non-reentrant")


class TinyGPT(nn.Module):
    """``N_LAYERS`` GPT blocks (no dropout) and a mean-square loss, on ``(b, s, h)`` inputs.

    ``outer``: None, or ``"reentrant"`` / ``"non-reentrant"`` to checkpoint each
    layer by hand from the model's forward, around whatever wraps the layer.
    """

    def __init__(self, outer: str | None = None):
        super().__init__()
        if outer not in (None, "reentrant", "non-reentrant"):
            raise ValueError(f"outer must be None, 'reentrant' or 'non-reentrant', got {outer!r}")
        self.layers = nn.ModuleList(GPTBlock(HIDDEN, N_HEADS, dropout=0.0, max_seq=SEQ)
                                    for _ in range(N_LAYERS))
        self.outer = outer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            if self.outer is None:
                x = layer(x)
            else:
                x = checkpoint(layer, x, use_reentrant=self.outer == "reentrant")
        return x.square().mean()


def _no_reentrant_wrapper():
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, checkpoint_wrapper)

    return functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def _is_block(module: nn.Module) -> bool:
    return isinstance(module, GPTBlock)


def wrap(wrapper: str, checkpointing: str) -> nn.Module:
    """A freshly initialised `TinyGPT` (seed 0) under ``wrapper`` with ``checkpointing``.

    ``wrapper``: one of `WRAPPERS`; ``checkpointing``: one of `CHECKPOINTING`.
    """
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        apply_activation_checkpointing)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from torch.nn.parallel import DistributedDataParallel as DDP

    if wrapper not in WRAPPERS or checkpointing not in CHECKPOINTING:
        raise ValueError(f"wrapper must be one of {WRAPPERS} and checkpointing one of "
                         f"{CHECKPOINTING}, got {wrapper!r}, {checkpointing!r}")
    outer = (checkpointing.removeprefix("hand-written ")
             if checkpointing.startswith("hand-written") else None)
    torch.manual_seed(0)
    model = TinyGPT(outer)
    integration = checkpointing == "integration"
    if wrapper == "DDP":
        if integration:
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=_no_reentrant_wrapper(),
                                           check_fn=_is_block)
        return DDP(model, broadcast_buffers=False)  # the only buffer is a constant mask
    if wrapper == "FSDP1":
        model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({GPTBlock}), use_orig_params=True,
                     device_id=torch.device("cpu"))
        if integration:
            apply_activation_checkpointing(model, checkpoint_wrapper_fn=_no_reentrant_wrapper(),
                                           check_fn=_is_block)
        return model
    # FSDP2: checkpoint_wrapper first, then fully_shard each block and the root.
    for i, layer in enumerate(model.layers):
        if integration:
            layer = _no_reentrant_wrapper()(layer)
            model.layers[i] = layer
        fully_shard(layer)
    fully_shard(model)
    return model


def _global_batches(steps: int = STEPS, world_size: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(world_size * BATCH_PER_RANK, SEQ, HIDDEN, generator=g) for _ in range(steps)]


def train_steps(model: nn.Module, rank: int, world_size: int, steps: int = STEPS,
                batches: list[torch.Tensor] | None = None) -> dict:
    """``steps`` SGD steps of ``model`` on this rank's slice of fixed global batches, or
    on ``batches`` (this rank's inputs; token ids go through the model's own loss,
    ``model(input_ids=ids, labels=ids).loss``).

    Returns ``param_bytes`` (stored on this rank), ``saved_bytes`` (saved for backward
    by the last step's forward, this rank), ``forward`` / ``backward`` (collectives of the
    last step's forward and backward, by kind) and ``losses`` (each step's loss averaged
    over ranks, as Python floats).
    """
    if batches is None:
        # The input requires grad so that the hand-written reentrant variant has gradients
        # to pass (chapter 10's trap; Hugging Face calls enable_input_require_grads for it).
        lo = rank * BATCH_PER_RANK
        batches = [x[lo:lo + BATCH_PER_RANK].clone().requires_grad_(True)
                   for x in _global_batches(steps, world_size)]
    param_bytes = local_parameter_bytes(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x in batches:
        with CollectiveCounter() as forward_comms, ShardedSavedTensorMeter(model) as meter:
            loss = model(x) if x.is_floating_point() else \
                model(input_ids=x, labels=x, use_cache=False).loss
        saved = meter.live_bytes
        with CollectiveCounter() as backward_comms:
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        losses.append(mean_loss.item() / world_size)
    return {"param_bytes": param_bytes, "saved_bytes": saved, "losses": losses,
            "forward": forward_comms.by_kind(), "backward": backward_comms.by_kind()}


def compare_wrappers(rank: int, world_size: int) -> dict:
    """`train_steps` for every wrapper and checkpointing mode:
    ``{"FSDP1 / integration": {...}, ...}`` (keys ``f"{wrapper} / {checkpointing}"``)."""
    results = {}
    for wrapper in WRAPPERS:
        for checkpointing in CHECKPOINTING:
            results[f"{wrapper} / {checkpointing}"] = train_steps(
                wrap(wrapper, checkpointing), rank, world_size)
    return results


def wrap_hf(wrapper: str, checkpointing: str) -> nn.Module:
    """A tiny GPT-2 (`bookkit.hfmodels.tiny_gpt2`, seed 0, no dropout) under ``wrapper``.

    ``wrapper``: one of `HF_WRAPPERS`; ``checkpointing``: one of `HF_CHECKPOINTING`,
    switched on with the model's own ``activation_checkpointing_enable`` before
    wrapping, as the ``Trainer`` does. Each ``GPT2Block`` is one FSDP unit.
    """
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    from bookkit.hfmodels import tiny_gpt2

    if wrapper not in HF_WRAPPERS or checkpointing not in HF_CHECKPOINTING:
        raise ValueError(f"wrapper must be one of {HF_WRAPPERS} and checkpointing one of "
                         f"{HF_CHECKPOINTING}, got {wrapper!r}, {checkpointing!r}")
    model = tiny_gpt2(dropout=0.0)
    if checkpointing != "none":
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is None:  # transformers < 5.23: the old name
            enable = model.gradient_checkpointing_enable
        enable({"use_reentrant": checkpointing == "transformers reentrant"})
    if wrapper == "FSDP1":
        return FSDP(model, auto_wrap_policy=ModuleWrapPolicy({GPT2Block}),
                    use_orig_params=True, device_id=torch.device("cpu"))
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    return model


def _hf_train_steps(model: nn.Module, rank: int, world_size: int, steps: int = STEPS) -> dict:
    """`train_steps` for a causal language model on this rank's slice of token batches."""
    g = torch.Generator().manual_seed(1)
    lo = rank * BATCH_PER_RANK
    batches = [torch.randint(0, 256, (world_size * BATCH_PER_RANK, SEQ), generator=g)[lo:lo + BATCH_PER_RANK]
               for _ in range(steps)]
    return train_steps(model, rank, world_size, steps, batches=batches)


def compare_hf_switch(rank: int, world_size: int) -> dict:
    """`wrap_hf` for every wrapper and mode, trained like `compare_wrappers`:
    ``{"FSDP1 / transformers reentrant": {...}, ...}``, plus ``"transformers"``: the
    version that ran."""
    import transformers

    results = {}
    for wrapper in HF_WRAPPERS:
        for checkpointing in HF_CHECKPOINTING:
            results[f"{wrapper} / {checkpointing}"] = _hf_train_steps(
                wrap_hf(wrapper, checkpointing), rank, world_size)
    return {"transformers": transformers.__version__, "runs": results}


# The runs whose backward pass `backward_timelines` records: (label, builder, args).
TIMELINES = (
    ("FSDP1, integration", "wrap", ("FSDP1", "integration")),
    ("FSDP1, hand-written reentrant", "wrap", ("FSDP1", "hand-written reentrant")),
    ("FSDP1, transformers reentrant", "wrap_hf", ("FSDP1", "transformers reentrant")),
    ("FSDP2, transformers reentrant", "wrap_hf", ("FSDP2", "transformers reentrant")),
)


def backward_timelines(rank: int, world_size: int) -> dict:
    """The events of one training step's backward (`BackwardTimeline`) for each run of
    `TIMELINES`: ``{label: ["all-gather", "recompute", ..., "reduce-scatter"]}``.
    Shows *where* each all-gather falls relative to the recomputation."""
    out = {}
    for label, builder, args in TIMELINES:
        model = wrap(*args) if builder == "wrap" else wrap_hf(*args)
        if builder == "wrap":
            x = _global_batches(1, world_size)[0][rank * BATCH_PER_RANK:][:BATCH_PER_RANK]
            loss = model(x.clone().requires_grad_(True))
        else:
            g = torch.Generator().manual_seed(1)
            ids = torch.randint(0, 256, (BATCH_PER_RANK, SEQ), generator=g)
            loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        with BackwardTimeline() as timeline:
            loss.backward()
        out[label] = timeline.events
    return out
