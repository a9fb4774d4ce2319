"""What one rank of a data-parallel job holds and sends ("Beyond one device").

``ShardedSavedTensorMeter``
    `bookkit.torchmem.SavedTensorMeter` for wrapped models: the bytes autograd saves
    for backward on this rank, parameters excluded. FSDP swaps a module's parameters
    between sharded and gathered tensors during the step, so the parameters to leave
    out are looked up at every save instead of once.
``CollectiveCounter``
    A dispatch mode that counts the collective operations (``c10d`` ops: all-gather,
    reduce-scatter, all-reduce, broadcast) a region of code issues on this rank.
``BackwardTimeline``
    A dispatch mode that writes down, in order, what a backward pass does on this
    rank: collectives by kind, forward operations run again (recomputation) and
    backward operations, one entry per operation.
``local_parameter_bytes``
    Bytes of parameters this rank stores: the whole model under DDP, its shard under
    FSDP1 (flat parameters) and FSDP2 (``DTensor`` local shards).
"""
from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bookkit.torchmem import SavedTensorMeter, storage_key

__all__ = ["ShardedSavedTensorMeter", "CollectiveCounter", "COLLECTIVE_KINDS",
           "BackwardTimeline", "FORWARD_ONLY_OPS", "local_parameter_bytes"]

# c10d op name -> the collective it performs. Backends and wrappers reach the same
# collective through different ops (FSDP1 calls ``allgather_`` on gloo, FSDP2
# ``_allgather_base_``), so counts are reported per kind.
COLLECTIVE_KINDS = {
    "allgather_": "all-gather",
    "_allgather_base_": "all-gather",
    "allgather_into_tensor_coalesced_": "all-gather",
    "allgather_coalesced_": "all-gather",
    "reduce_scatter_": "reduce-scatter",
    "_reduce_scatter_base_": "reduce-scatter",
    "reduce_scatter_tensor_coalesced_": "reduce-scatter",
    "allreduce_": "all-reduce",
    "allreduce_coalesced_": "all-reduce",
    "broadcast_": "broadcast",
}


def _local(t: torch.Tensor) -> torch.Tensor:
    """The tensor this rank stores for ``t`` (a DTensor's local shard, else ``t``)."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def local_parameter_bytes(module: torch.nn.Module) -> int:
    """Bytes of the parameters ``module`` stores on this rank.

    For a plain or DDP-wrapped module that is every parameter; for FSDP2
    (``fully_shard``) the local shards of its ``DTensor`` parameters; for FSDP1 with
    ``use_orig_params=True`` the parameters are views into flat shards, so the flat
    parameters' own bytes are counted (padding included). Each storage counts once.
    """
    flat = [m._flat_param for m in module.modules()  # FSDP1 units, if any
            if getattr(m, "_flat_param", None) is not None]
    tensors = flat if flat else [_local(p) for p in module.parameters()]
    seen, total = set(), 0
    for t in tensors:
        key = storage_key(t)
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


class ShardedSavedTensorMeter(SavedTensorMeter):
    """`SavedTensorMeter` for a model whose parameters change identity during the step.

    FSDP gathers a unit's parameters before its forward and frees them after; the
    gathered tensors are what the unit's operations save (a linear layer saves its
    weight), and they are not activations. This meter therefore re-reads
    ``module.parameters()`` at every save and leaves out the storages it finds there at
    that moment (DTensor shards are read through ``to_local``; storages already freed
    are skipped). Everything else works as in `SavedTensorMeter` ("torch.utils.checkpoint"):
    bytes of distinct storages autograd holds for backward on this rank.

    Args:
        module: the wrapped model (DDP, FSDP1, FSDP2 or a plain module).
    """

    def __init__(self, module: torch.nn.Module):
        super().__init__(params=())
        self._module = module

    def _current_param_keys(self) -> set:
        keys = set()
        for p in self._module.parameters():
            t = _local(p)
            try:
                if t.untyped_storage().nbytes():
                    keys.add(storage_key(t))
            except RuntimeError:  # a storage FSDP has freed: nothing to exclude
                continue
        return keys

    def _pack(self, t: torch.Tensor):
        self._param_keys = self._current_param_keys()
        return super()._pack(t)


class CollectiveCounter(TorchDispatchMode):
    """Count the collective operations issued while the mode is active.

    ``with CollectiveCounter() as c: loss.backward()`` then ``c.counts`` is a
    ``Counter`` of c10d op names (``"allgather_"``, ``"_reduce_scatter_base_"``, ...)
    and ``c.by_kind()`` the same grouped by `COLLECTIVE_KINDS` (``"all-gather"``,
    ``"reduce-scatter"``, ``"all-reduce"``, ``"broadcast"``). Every op passes through
    unchanged; only ops in the ``c10d`` namespace are counted, each call once (an
    asynchronous collective counts when it is issued).
    """

    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            self.counts[func._overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def by_kind(self) -> dict[str, int]:
        """Counts per collective kind; ops not in `COLLECTIVE_KINDS` keep their name."""
        kinds: Counter = Counter()
        for name, n in self.counts.items():
            kinds[COLLECTIVE_KINDS.get(name, name)] += n
        return dict(sorted(kinds.items()))


# Operations that only a forward pass runs (their backward has its own op, such as
# ``native_layer_norm_backward``): met during a backward pass, they are recomputation.
FORWARD_ONLY_OPS = frozenset({
    "native_layer_norm", "gelu", "_softmax", "addmm", "embedding",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
})


class BackwardTimeline(TorchDispatchMode):
    """Record the order of events in a region (meant for one ``loss.backward()``).

    ``events`` lists, one entry per operation: a collective's kind (``"all-gather"``,
    ``"reduce-scatter"``, ...), ``"recompute"`` for a forward-only operation
    (`FORWARD_ONLY_OPS`), ``"backward"`` for an operation whose name ends in
    ``_backward``; other operations (views, copies, matrix products, which both
    passes run) are left out.

    Example:
        >>> with BackwardTimeline() as tl:           # doctest: +SKIP
        ...     loss.backward()
        >>> tl.events[:3]                            # doctest: +SKIP
        ['all-gather', 'recompute', 'recompute']
    """

    def __init__(self):
        super().__init__()
        self.events: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        if func.namespace == "c10d":
            self.events.append(COLLECTIVE_KINDS.get(name, name))
        elif name in FORWARD_ONLY_OPS:
            self.events.append("recompute")
        elif name.endswith("_backward"):
            self.events.append("backward")
        return func(*args, **(kwargs or {}))
