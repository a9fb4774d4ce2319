"""DDP meets reentrant checkpointing: "mark a variable ready only once" ("Beyond one device").

DistributedDataParallel (DDP) starts averaging a parameter's gradient across ranks as
soon as autograd has produced it: a hook on each parameter marks it *ready*, and a
parameter may become ready once per backward pass. Reentrant checkpointing
(``use_reentrant=True``) runs a nested backward pass per checkpointed region, hidden
from the graph DDP sees after the forward. Two common models break that contract:

* a block whose parameters are used by two checkpointed calls (weight sharing, or one
  block applied twice): each nested backward marks the same parameters ready;
* ``find_unused_parameters=True`` (which a model with a parameter the step does not
  use needs): after the forward, DDP searches the graph for the parameters it can
  reach, finds none of those inside reentrant regions (their graph is built only during
  backward), marks them ready as "unused", and the nested backward marks them ready
  again. The flag alone is the trigger: the same model without its unused branch fails
  the same way.

When nothing trainable comes before a block used twice, DDP raises nothing: its
reduction completes inside the first nested backward, and the second one's share of the
block's gradient is added locally, never averaged (`run_case` measures exactly that).

Both fixes are measured: ``use_reentrant=False`` (checkpointing inside the ordinary
graph, so DDP sees every parameter once) and ``static_graph=True`` (DDP records the
first iteration's pattern of hooks and expects it afterwards).
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

__all__ = ["SharedBlockNet", "NetWithUnusedBranch", "CASES", "ddp_reentrant_cases",
           "run_case"]

WIDTH, BATCH, STEPS = 16, 4, 2


class SharedBlockNet(nn.Module):
    """``head(block(block(embed(x))))``: one block applied twice, each call checkpointed.

    The two calls use the same parameters, as weight-shared layers (ALBERT-style, or a
    recurrent cell unrolled) do. ``embed`` is a layer *before* the shared block; with
    ``embed=False`` the model starts at the block (which changes how DDP fails: see
    `CASES`).
    """

    def __init__(self, use_reentrant: bool, embed: bool = True, width: int = WIDTH):
        super().__init__()
        self.embed = nn.Linear(width, width) if embed else nn.Identity()
        self.block = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, 1)
        self.use_reentrant = use_reentrant

    def forward(self, x):
        h = self.embed(x)
        if self.use_reentrant is None:  # the reference: no checkpointing
            return self.head(self.block(self.block(h)))
        h = checkpoint(self.block, h, use_reentrant=self.use_reentrant)
        h = checkpoint(self.block, h, use_reentrant=self.use_reentrant)
        return self.head(h)


class NetWithUnusedBranch(nn.Module):
    """``head(block(x))`` with the block checkpointed, plus a branch this step never uses
    (an auxiliary head, a layer used only in evaluation). ``unused_branch=False`` leaves
    the branch out (the same model for which nothing is unused)."""

    def __init__(self, use_reentrant: bool, width: int = WIDTH, unused_branch: bool = True):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, 1)
        self.unused_branch = nn.Linear(width, width) if unused_branch else None
        self.use_reentrant = use_reentrant

    def forward(self, x):
        if self.use_reentrant is None:  # the reference: no checkpointing
            return self.head(self.block(x))
        return self.head(checkpoint(self.block, x, use_reentrant=self.use_reentrant))


def _shared(use_reentrant):
    return SharedBlockNet(use_reentrant)


def _shared_no_embed(use_reentrant):
    return SharedBlockNet(use_reentrant, embed=False)


def _no_unused_branch(use_reentrant):
    return NetWithUnusedBranch(use_reentrant, unused_branch=False)


# case name -> (model factory, use_reentrant, keyword arguments of DDP)
CASES = {
    "block used twice, reentrant": (_shared, True, {}),
    "block used twice, use_reentrant=False": (_shared, False, {}),
    "block used twice, reentrant, static_graph=True": (_shared, True, {"static_graph": True}),
    "block used twice, no layer before it, reentrant": (_shared_no_embed, True, {}),
    "unused branch, reentrant, find_unused_parameters=True":
        (NetWithUnusedBranch, True, {"find_unused_parameters": True}),
    "unused branch, use_reentrant=False, find_unused_parameters=True":
        (NetWithUnusedBranch, False, {"find_unused_parameters": True}),
    "unused branch, reentrant, static_graph=True": (NetWithUnusedBranch, True, {"static_graph": True}),
    "no unused branch, reentrant, find_unused_parameters=True":
        (_no_unused_branch, True, {"find_unused_parameters": True}),
}


def _batch(rank: int, step: int) -> torch.Tensor:
    """This rank's input at ``step`` (the same on every run). It requires grad, so that
    reentrant checkpointing passes gradients through (the trap of "The API in depth" is not
    this one)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, WIDTH, generator=g).requires_grad_(True)


def run_case(name: str, rank: int, world_size: int) -> dict:
    """Run ``STEPS`` forward/backward passes of case ``name`` under DDP on this rank.

    Returns a dict:
        ok: every step ran without an exception.
        step, error: the first step that raised and the first line of its message
            (None, None when ok).
        parameter: the line of the message that names the parameter marked twice
            (present with ``TORCH_DISTRIBUTED_DEBUG=INFO``), else None.
        grad_gap: largest |difference| between this rank's gradients after the last
            step and those of the same model, without DDP or checkpointing, run in one
            process on every rank's batch (the gradients DDP promises); None on error.
        rank_gap: largest |difference| between the ranks' gradients (DDP promises 0:
            every rank applies the same averaged gradient); None on error.
        local_share_gap: for a `SharedBlockNet`, largest |difference| between the
            shared block's gradients and "the second call's share averaged over the
            ranks + this rank's own share of the first call", the gradients DDP yields
            when its reduction ends after the first nested backward (the backward of
            the second call); None for other models and on error.
    """
    make_model, use_reentrant, ddp_kwargs = CASES[name]
    torch.manual_seed(0)
    model = DDP(make_model(use_reentrant), **ddp_kwargs)
    for step in range(STEPS):
        model.zero_grad(set_to_none=True)
        try:
            model(_batch(rank, step)).mean().backward()
        except RuntimeError as exc:
            lines = str(exc).strip().splitlines()
            return {"ok": False, "step": step, "error": lines[0],
                    "parameter": next((l for l in lines if l.startswith("Parameter at index")), None),
                    "grad_gap": None, "rank_gap": None, "local_share_gap": None}
    torch.manual_seed(0)
    reference = make_model(None)  # the same initial weights, no checkpointing
    loss = sum(reference(_batch(r, STEPS - 1)).mean() for r in range(world_size)) / world_size
    loss.backward()
    pairs = [(p.grad, q.grad) for p, q in zip(model.module.parameters(), reference.parameters())
             if q.grad is not None]
    grad_gap = max((g - ref).abs().max().item() for g, ref in pairs)
    mine = torch.cat([g.flatten() for g, _ in pairs])
    everyone = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(everyone, mine)
    rank_gap = max((e - everyone[0]).abs().max().item() for e in everyone)
    local_share_gap = None
    if isinstance(model.module, SharedBlockNet):
        first, second = _per_call_shares(make_model, rank)
        for g in second:
            dist.all_reduce(g)  # sum over ranks, then the mean
        unaveraged = [s / world_size + f for f, s in zip(first, second)]
        local_share_gap = max((p.grad - u).abs().max().item()
                              for p, u in zip(model.module.block.parameters(), unaveraged))
    return {"ok": True, "step": None, "error": None, "parameter": None,
            "grad_gap": grad_gap, "rank_gap": rank_gap, "local_share_gap": local_share_gap}


def _per_call_shares(make_model, rank: int) -> tuple[list, list]:
    """This rank's share of the shared block's gradient from each of its two calls, on
    its last batch and the initial weights: (first call's, second call's), each a list
    shaped like ``block.parameters()``. Each call gets its own copy of the block, so
    autograd keeps the two shares apart."""
    import copy

    torch.manual_seed(0)
    reference = make_model(None)
    first_block, second_block = copy.deepcopy(reference.block), copy.deepcopy(reference.block)
    h = reference.embed(_batch(rank, STEPS - 1))
    reference.head(second_block(first_block(h))).mean().backward()
    return ([p.grad for p in first_block.parameters()], [p.grad for p in second_block.parameters()])


def ddp_reentrant_cases(rank: int, world_size: int) -> dict:
    """Every case of `CASES` on this rank: ``{case name: run_case(...)}``."""
    results = {}
    for name in CASES:
        results[name] = run_case(name, rank, world_size)
        dist.barrier()  # a failed case leaves no collective half-done on the other rank
    return results
