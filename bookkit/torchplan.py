"""minigrad's chain planners applied to a PyTorch block stack.

`profile_blocks` measures a stack of ``torch.nn.Module`` blocks into a
`minigrad.plan.ChainProfile` (FLOPs with ``torch.utils.flop_counter.FlopCounterMode``,
bytes with saved-tensor hooks, `bookkit.torchmem.SavedTensorMeter`); any chain planner
(`minigrad.plan.optimal_segments`, `minigrad.plan.rotor`) plans on it, and
`run_plan` runs the plan with ``torch.utils.checkpoint`` (non-reentrant): a `SegmentPlan`
checkpoints every segment but the last, a `NestedSchedule` nests checkpoints as its
items do. `saved_after_forward` predicts the bytes autograd holds when the forward pass
ends, which `SavedTensorMeter` measures.

Example:
    >>> import torch
    >>> from bookkit.torchmodels import GPTBlock
    >>> from minigrad import plan
    >>> blocks = [GPTBlock(16, 2, dropout=0.0) for _ in range(4)]
    >>> x = torch.randn(2, 8, 16, requires_grad=True)
    >>> profile = profile_blocks(blocks, x, loss=lambda y: y.square().mean())
    >>> p = plan.optimal_segments(profile)
    >>> out = run_plan(blocks, p, x)
"""
from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from bookkit.torchmem import SavedTensorMeter, storage_key
from minigrad.plan.chain import ChainProfile
from minigrad.plan.nested import Checkpointed, NestedSchedule
from minigrad.plan.segments import SegmentPlan

__all__ = ["profile_blocks", "run_plan", "saved_after_forward", "forward_flops"]


def forward_flops(fn, *args) -> int:
    """FLOPs of ``fn(*args)`` as ``FlopCounterMode`` counts them (matmuls, attention)."""
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


def _saved(fn, x, params):
    """What ``fn(x)`` saves for backward: ``(output, saved storages {key: bytes})``."""
    with SavedTensorMeter(params=params) as meter:
        out = fn(x)
    return out, {k: v[0] for k, v in meter._seen.items() if v[0]}


def profile_blocks(blocks, x: torch.Tensor, loss=None) -> ChainProfile:
    """A `ChainProfile` of ``blocks`` on ``x`` (one forward, no backward).

    For each block: the bytes of its input, whether it saves its input or its output
    for backward (the same storage), the bytes of the other storages it saves, and its
    forward FLOPs (``FlopCounterMode``: matmuls and attention; elementwise ops count 0,
    as in torch's counter). ``loss`` (output -> scalar) is profiled the same way.

    Args:
        blocks: ``torch.nn.Module`` blocks applied in sequence.
        x: the stack's input (requires grad or not, as it will be run).
        loss: optional callable on the last output.

    Returns:
        A `minigrad.plan.ChainProfile` (cost in FLOPs).
    """
    blocks = list(blocks)
    if not blocks:
        raise ValueError("profile_blocks: no blocks")
    inputs, saves_in, saves_out, own, cost = [], [], [], [], []
    h = x
    with torch.random.fork_rng():
        for block in blocks:
            key_in = storage_key(h)
            flops = forward_flops(block, h.detach().requires_grad_(h.requires_grad))
            out, saved = _saved(block, h, block)
            key_out = storage_key(out)
            inputs.append(h.untyped_storage().nbytes())
            saves_in.append(key_in in saved)
            saves_out.append(key_out in saved)
            own.append(sum(b for k, b in saved.items() if k not in (key_in, key_out)))
            cost.append(flops)
            h = out
        loss_in, loss_own, loss_cost = False, 0, 0
        if loss is not None:
            loss_cost = forward_flops(loss, h.detach().requires_grad_(True))
            _, saved = _saved(loss, h, ())
            loss_in = storage_key(h) in saved
            loss_own = sum(b for k, b in saved.items() if k != storage_key(h))
    return ChainProfile(input_bytes=tuple(inputs), output_bytes=h.untyped_storage().nbytes(),
                        saves_input=tuple(saves_in), saves_output=tuple(saves_out),
                        own_bytes=tuple(own), cost=tuple(cost), loss_saves_input=loss_in,
                        loss_own_bytes=int(loss_own), loss_cost=loss_cost)


def _run_items(blocks, items, x):
    for it in items:
        if isinstance(it, Checkpointed):
            def seg(y, inner=it.inner):
                return _run_items(blocks, inner, y)
            x = checkpoint(seg, x, use_reentrant=False)
        else:
            x = blocks[it.layer](x)
    return x


def run_plan(blocks, plan, x: torch.Tensor) -> torch.Tensor:
    """Run ``blocks`` on ``x`` under ``plan`` with ``torch.utils.checkpoint``.

    Args:
        blocks: the blocks `profile_blocks` measured.
        plan: a `SegmentPlan` (every segment but the last checkpointed) or a
            `NestedSchedule` (checkpoints nested as its items).
        x: the input.

    Returns:
        The last block's output (call the loss and ``backward()`` on it). Checkpoints
        run without torch's early stop, so each recomputes its whole segment, as the
        chain model counts.
    """
    blocks = list(blocks)
    # torch stops a recomputation once it has rebuilt the last saved tensor it needs
    # (early stop): the trailing ops of a segment are then not rerun, fewer FLOPs than
    # the chain model's whole-segment recomputation. Off here, so the two agree.
    with set_checkpoint_early_stop(False):
        return _run(blocks, plan, x)


def _run(blocks, plan, x):
    if isinstance(plan, SegmentPlan):
        bounds = list(plan.starts) + [len(blocks)]
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b == len(blocks):
                for block in blocks[a:b]:
                    x = block(x)
            else:
                def seg(y, a=a, b=b):
                    for block in blocks[a:b]:
                        y = block(y)
                    return y
                x = checkpoint(seg, x, use_reentrant=False)
        return x
    if isinstance(plan, NestedSchedule):
        return _run_items(blocks, plan.items, x)
    raise TypeError(f"run_plan: plan must be a SegmentPlan or a NestedSchedule, got "
                    f"{type(plan).__name__}")


def saved_after_forward(profile: ChainProfile, plan: SegmentPlan) -> int:
    """Bytes autograd holds when the forward pass (and the loss) ends under a segment
    plan: each checkpointed segment's input, and what the last segment and the loss
    save (each storage once)."""
    n = len(profile.input_bytes)
    starts = list(plan.starts)
    last = starts[-1]
    held = {("in", a): profile.input_bytes[a] for a in starts[:-1]}
    for i in range(last, n):
        if profile.saves_input[i]:
            held[("in", i)] = profile.input_bytes[i]
        if profile.saves_output[i]:
            held[("in", i + 1)] = (profile.input_bytes[i + 1] if i + 1 < n
                                   else profile.output_bytes)
        held[("own", i)] = profile.own_bytes[i]
    if profile.loss_saves_input:
        held[("in", n)] = profile.output_bytes
    return sum(held.values()) + profile.loss_own_bytes
