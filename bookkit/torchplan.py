"""minigrad's planners applied to a PyTorch block stack (chapter 7's second page).

`profile_blocks` measures a stack of ``torch.nn.Module`` blocks into a
`minigrad.plan.ChainProfile` (FLOPs with ``torch.utils.flop_counter.FlopCounterMode``,
bytes with saved-tensor hooks, `bookkit.torchmem.SavedTensorMeter`); any chain planner
(`minigrad.plan.optimal_segments`, `minigrad.plan.rotor`) plans on it, and
`run_plan` runs the plan with ``torch.utils.checkpoint`` (non-reentrant): a `SegmentPlan`
checkpoints every segment but the last, a `NestedSchedule` nests checkpoints as its
items do. `saved_after_forward` predicts the bytes autograd holds when the forward pass
ends, which `SavedTensorMeter` measures.

The graph optimum: `trace_torch_graph` records a step's ATen ops into a
`minigrad.plan.GraphProfile`, `minigrad.plan.remat` plans on it, `selective_policy` turns
the schedule into torch's selective-checkpoint policy (``MUST_SAVE`` for the outputs it
keeps, ``PREFER_RECOMPUTE`` for the rest) and predicts what torch will then hold,
recompute and peak at; `run_selective` runs it, `measure_step` measures a step.
Selective checkpointing needs torch >= 2.4 (the book declares torch >= 2.5).

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

import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from bookkit.torchmem import SavedTensorMeter, storage_key
from minigrad.plan.chain import ChainProfile
from minigrad.plan.graph import GraphProfile
from minigrad.plan.nested import Checkpointed, NestedSchedule
from minigrad.plan.segments import SegmentPlan

__all__ = ["FlopCount", "SelectivePolicy", "StepMeasure", "TorchGraphProfile",
           "buffers_kept", "forward_flops", "measure_step", "op_flops", "profile_blocks", "run_plan",
           "run_selective", "saved_after_forward", "selective_frontier", "selective_policy",
           "trace_torch_graph"]


@contextmanager
def buffers_kept(*modules):
    """Put every buffer of ``modules`` (``nn.Module`` objects; anything else is
    skipped) back as it was when the block ends: a profiling forward pass in
    training mode updates BatchNorm's running statistics and its batch count.

    Example:
        >>> bn = torch.nn.BatchNorm1d(3)
        >>> with buffers_kept(bn):
        ...     _ = bn(torch.randn(4, 3))
        >>> int(bn.num_batches_tracked), float(bn.running_mean.abs().sum())
        (0, 0.0)
    """
    kept = {}
    for m in modules:
        if isinstance(m, torch.nn.Module):
            for b in m.buffers():
                kept.setdefault(id(b), (b, b.detach().clone()))
    try:
        yield
    finally:
        with torch.no_grad():
            for b, value in kept.values():
                b.copy_(value)


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


def _as_blocks(blocks) -> list:
    """``blocks`` as a list: a ``Sequential``'s or a ``ModuleList``'s modules, any
    other module as the one block, or the items of a sequence."""
    if isinstance(blocks, (torch.nn.Sequential, torch.nn.ModuleList)):
        return list(blocks)
    if isinstance(blocks, torch.nn.Module):
        return [blocks]
    return list(blocks)


def _check_blocks(blocks, who: str) -> None:
    if not blocks:
        raise ValueError(f"{who}: no blocks")
    bad = [type(b).__name__ for b in blocks if not callable(b)]
    if bad:
        raise TypeError(f"{who}: blocks must be callable, got {bad[0]}")


def _state_versions(block) -> dict:
    """``{storage key: (kind, name, version)}`` of the parameters and buffers of
    ``block`` that a forward pass must not write in place (a norm's running
    statistics excepted: `run_plan` keeps them to one update per step)."""
    if not isinstance(block, torch.nn.Module):
        return {}
    from torch.nn.modules.batchnorm import _NormBase
    state = [("parameter", n, p) for n, p in block.named_parameters()]
    state += [("buffer", f"{name}.{n}" if name else n, b)
              for name, m in block.named_modules() if not isinstance(m, _NormBase)
              for n, b in m.named_buffers(recurse=False)]
    return {storage_key(t): (kind, n, t._version) for kind, n, t in state}


def _check_state_kept(block, before: dict, who: str, k: int) -> None:
    after = _state_versions(block)
    for key, (kind, name, version) in before.items():
        if after.get(key, (kind, name, version))[2] != version:
            raise ValueError(
                f"{who}: block {k} writes a {kind} in place ({name}) in its forward "
                f"pass: a recomputation would write it again (only a norm's running "
                f"statistics are kept to one update); update it outside the blocks")


def _reaches(out: torch.Tensor, h: torch.Tensor) -> bool:
    """Whether the gradient of ``out`` reaches ``h`` through autograd (no
    ``.detach()`` or ``no_grad`` in between)."""
    target = h.grad_fn
    stack = [out.grad_fn] if out.grad_fn is not None else []
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if target is not None and node is target:
            return True
        if target is None and getattr(node, "variable", None) is h:
            return True
        if node is not target:
            stack.extend(n for n, _ in node.next_functions)
    return False


def _cut_gradient(who: str, k: int) -> ValueError:
    return ValueError(
        f"{who}: block {k} does not pass the gradient back to its input (a .detach() "
        f"or torch.no_grad() inside it): the blocks before it get no gradient, which "
        f"the plan does not model; run them before the stack under torch.no_grad()")


def profile_blocks(blocks, x: torch.Tensor, loss=None) -> ChainProfile:
    """A `ChainProfile` of ``blocks`` on ``x`` (no backward).

    For each block: the bytes of its input, whether it saves its input or its output
    for backward (the same storage), the bytes of the other storages it saves, and its
    forward FLOPs (``FlopCounterMode``: matmuls and attention; elementwise ops count 0,
    as in torch's counter), and whether its output requires grad. Each block runs
    twice (once counted, once measured), on the real input (`run_plan` recomputes
    it too): its output must depend on its input and parameters only. ``loss``
    (output -> scalar) is profiled the same way. The random state and the modules'
    buffers (BatchNorm's running statistics) are left as they were (`buffers_kept`).

    Args:
        blocks: ``torch.nn.Module`` blocks (or callables) applied in sequence.
        x: the stack's input (requires grad or not, as it will be run).
        loss: optional callable on the last output, returning a one-element tensor.

    Returns:
        A `minigrad.plan.ChainProfile` (cost in FLOPs).

    Raises:
        TypeError: ``x`` is not a tensor, or a block is not callable.
        ValueError: what the chain model cannot describe, named: a block that returns
            anything but a tensor, writes its input, a parameter or a buffer in place,
            returns its input's storage (``nn.Identity``, a view), cuts the gradient
            (``.detach()``), or saves a tensor another block or the loss saves too (a
            shared constant that is not a parameter or buffer); a loss that saves a
            block's tensor (``x``) or returns more than one element.
            `trace_torch_graph` plans most of these.
    """
    who = "profile_blocks"
    blocks = _as_blocks(blocks)
    _check_blocks(blocks, who)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who}: x must be a tensor, got {type(x).__name__}")
    inputs, saves_in, saves_out, own, cost, grad = [], [], [], [], [], [x.requires_grad]
    owner = {}  # storage key -> what it is, or who saves it ("is block 2's output")
    params = [b for b in blocks if isinstance(b, torch.nn.Module)]
    h = x
    with torch.random.fork_rng(), buffers_kept(*blocks, loss):
        for k, block in enumerate(blocks):
            key_in = storage_key(h)
            owner.setdefault(key_in, f"is block {k - 1}'s output" if k
                             else "is the stack's input x")
            # a copy that may be written in place (a leaf that requires grad may not)
            probe = h.detach().clone().requires_grad_(h.requires_grad)
            probe = probe * 1 if h.requires_grad else probe
            version, state = probe._version, _state_versions(block)
            flops = forward_flops(block, probe)
            if probe._version != version:
                raise ValueError(
                    f"{who}: block {k} writes its input in place (relu_, "
                    f"ReLU(inplace=True) first): a checkpoint's recomputation would "
                    f"start from the overwritten input; make that op out of place")
            _check_state_kept(block, state, who, k)
            out, saved = _saved(block, h, block if isinstance(block, torch.nn.Module) else ())
            if not isinstance(out, torch.Tensor):
                raise ValueError(
                    f"{who}: block {k} returned {type(out).__name__}, not a tensor: "
                    f"each block must return the one tensor the next block (or the "
                    f"loss) takes")
            key_out = storage_key(out)
            if key_out == key_in:
                raise ValueError(
                    f"{who}: block {k} returns a tensor in its input's storage "
                    f"(nn.Identity, a view): the chain model needs each block's output "
                    f"in a storage of its own; fold it into a neighbouring block, or "
                    f"plan with trace_torch_graph")
            if h.requires_grad and not _reaches(out, h):
                raise _cut_gradient(who, k)
            for key in saved:
                if key not in (key_in, key_out) and key in owner:
                    raise ValueError(
                        f"{who}: block {k} saves a tensor that {owner[key]} (a shared "
                        f"constant, not a parameter or buffer of the block; a skip "
                        f"connection across blocks): the chain model would count it "
                        f"twice; register it as a buffer, or plan with "
                        f"trace_torch_graph")
                owner.setdefault(key, f"block {k} saves too")
            inputs.append(h.untyped_storage().nbytes())
            saves_in.append(key_in in saved)
            saves_out.append(key_out in saved)
            own.append(sum(b for key, b in saved.items() if key not in (key_in, key_out)))
            cost.append(flops)
            grad.append(out.requires_grad)
            h = out
        owner.setdefault(storage_key(h), f"is block {len(blocks) - 1}'s output")
        loss_in, loss_own, loss_cost = False, 0, 0
        if loss is not None:
            loss_cost = forward_flops(loss, h.detach().requires_grad_(True))
            value, saved = _saved(loss, h, params)
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                raise ValueError(f"{who}: loss must return a one-element tensor")
            loss_in = storage_key(h) in saved
            for key in saved:
                if key != storage_key(h) and key in owner:
                    raise ValueError(
                        f"{who}: the loss saves a tensor that {owner[key]}, besides the "
                        f"last output: the chain model would count it twice; plan with "
                        f"trace_torch_graph")
            loss_own = sum(b for key, b in saved.items() if key != storage_key(h))
    _make_scratch(blocks)  # for run_plan's recomputations, outside any measured step
    return ChainProfile(input_bytes=tuple(inputs), output_bytes=h.untyped_storage().nbytes(),
                        saves_input=tuple(saves_in), saves_output=tuple(saves_out),
                        own_bytes=tuple(own), cost=tuple(cost),
                        requires_grad=tuple(grad), loss_saves_input=loss_in,
                        loss_own_bytes=int(loss_own), loss_cost=loss_cost)


def _running_stats(block):
    """The batch-norm-like submodules of ``block`` that update running statistics
    when they run (training mode, ``track_running_stats``)."""
    from torch.nn.modules.batchnorm import _NormBase
    return [m for m in block.modules() if isinstance(m, _NormBase)
            and m.training and m.track_running_stats] \
        if isinstance(block, torch.nn.Module) else []


# module -> {buffer name: scratch copy}: what a recomputation updates instead
_SCRATCH = weakref.WeakKeyDictionary()


def _make_scratch(blocks):
    """Scratch copies of the running statistics of ``blocks`` (once per module;
    again if its buffers changed shape, dtype or device). `profile_blocks` and `trace_torch_graph`
    make them, so that a measured step does not allocate them."""
    for block in blocks:
        for m in _running_stats(block):
            own = {k: t for k, t in m._buffers.items() if t is not None}
            have = _SCRATCH.get(m)
            if have is None or have.keys() != own.keys() or any(
                    have[k].shape != t.shape or have[k].dtype != t.dtype
                    or have[k].device != t.device for k, t in own.items()):
                _SCRATCH[m] = {k: t.detach().clone() for k, t in own.items()}


def _first_runs_only(blocks, who: str):
    """``blocks`` wrapped so that only each block's first run in the step updates
    its running statistics: a recomputation in backward runs it again, and
    BatchNorm would count that batch once more (torch's checkpoint does). A re-run
    updates scratch copies instead, swapped in by attribute: no tensor op runs in
    the wrapper, so a selective policy sees the block's own ops only."""
    _make_scratch(blocks)

    from torch.nn.modules.module import register_module_forward_pre_hook

    def wrap(k, block):
        stats = _running_stats(block)
        runs = [0]

        def first_run(h):
            # a norm the block runs but does not own (a plain function's, a module
            # kept in a list) would count the batch again in each recomputation
            foreign = []

            def seen(m, args):
                if any(n is m for n in _running_stats(m)) \
                        and not any(m is s for s in stats):
                    foreign.append(type(m).__name__)
            handle = register_module_forward_pre_hook(seen)
            try:
                out = block(h)
            finally:
                handle.remove()
            if foreign:
                raise ValueError(
                    f"{who}: block {k} runs {foreign[0]} (running statistics, training mode), "
                    f"which is not one of its submodules: a recomputation would update "
                    f"its statistics again; make it a submodule of the block (an "
                    f"nn.Module), or put it in eval mode")
            return out

        def run(h):
            runs[0] += 1
            if runs[0] == 1:
                return first_run(h)
            own = [dict(m._buffers) for m in stats]
            for m in stats:
                m._buffers.update(_SCRATCH[m])
            try:
                return block(h)
            finally:
                for m, mine in zip(stats, own):
                    m._buffers.update(mine)
        return run
    return [wrap(k, b) for k, b in enumerate(blocks)]


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
        chain model counts. Running statistics (BatchNorm in training mode) are
        updated by each block's first run only, as without checkpoints: a
        recomputation updates scratch copies instead (the statistics' own size,
        made once per module by `profile_blocks` or `trace_torch_graph`, else
        by the first run).
    """
    blocks = _as_blocks(blocks)
    if not isinstance(plan, (SegmentPlan, NestedSchedule)):
        raise TypeError(f"run_plan: plan must be a SegmentPlan or a NestedSchedule, "
                        f"got {type(plan).__name__}")
    if plan.n != len(blocks):
        raise ValueError(f"run_plan: the plan is for {plan.n} blocks, got {len(blocks)}; "
                         f"plan again on these blocks (profile_blocks)")
    blocks = _first_runs_only(blocks, "run_plan")
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
    plan: each checkpointed segment's input (where the segment saves anything and
    its output requires grad), and what the last segment and the loss save (each
    storage once). The random state each checkpoint keeps for its recomputation
    (`measure_step` does not count it either) is not included.

    Raises:
        TypeError: ``plan`` is not a `SegmentPlan`.
        ValueError: the plan is for another number of blocks.
    """
    if not isinstance(plan, SegmentPlan):
        raise TypeError(f"saved_after_forward: plan must be a SegmentPlan, got "
                        f"{type(plan).__name__}")
    n = len(profile.input_bytes)
    if plan.n != n:
        raise ValueError(f"saved_after_forward: the plan is for {plan.n} blocks, the "
                         f"profile has {n}")
    rg = profile.requires_grad or (True,) * (n + 1)
    starts = list(plan.starts)
    last = starts[-1]
    held = {}
    for a, b in zip(starts[:-1], starts[1:]):
        saves = any(profile.saves_input[i] or profile.saves_output[i] or profile.own_bytes[i]
                    for i in range(a, b))
        if saves and rg[b]:
            held[("in", a)] = profile.input_bytes[a]
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


# --- the graph optimum as a selective-checkpoint policy -------------------------------

def _tensors_in(obj):
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _is_view_op(func) -> bool:
    """Whether every output of ``func`` aliases an input and none is written (a view:
    no FLOPs, no bytes). An in-place op (``relu_``, ``bernoulli_``) is not a view: it
    computes a new value into its argument's storage."""
    rets = func._schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write
                              for r in rets)


def _writes(func) -> bool:
    """Whether ``func`` writes one of its arguments in place (``add_``, ``bernoulli_``)."""
    return any(a.alias_info is not None and a.alias_info.is_write
               for a in func._schema.arguments)


def _written_arguments(func, args, kwargs) -> list:
    """The tensors ``func`` writes in place among its arguments."""
    written = []
    for k, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            v = args[k] if k < len(args) else kwargs.get(a.name)
            written += _tensors_in(v)
    return written


def op_flops(func, args, kwargs, out) -> int:
    """FLOPs of one ATen op under the book's counting (see `trace_torch_graph`).

    Matmuls, convolutions and attention: torch's own formulas
    (``torch.utils.flop_counter``'s registry; CPU flash attention by the flash
    formula). Views: 0. Every other op, in-place ones included: one FLOP per output
    element (torch's counter gives elementwise ops 0, which would make recomputing
    them free).
    """
    from torch.utils import flop_counter as fc

    packet = func._overloadpacket
    if packet is torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
        packet = torch.ops.aten._scaled_dot_product_flash_attention
    if packet in fc.flop_registry:
        return int(fc.flop_registry[packet](*args, **kwargs, out_val=out))
    if _is_view_op(func):
        return 0
    return int(sum(t.numel() for t in _tensors_in(out)))


class FlopCount:
    """Context manager: the FLOPs of every ATen op run inside it, counted by `op_flops`.

    ``total`` (FLOPs) and ``by_op`` (``{op name: FLOPs}``). Ops torch's checkpoint
    ignores (``detach``) count 0.

    Example:
        >>> import torch
        >>> a, b = torch.ones(4, 8), torch.ones(8, 2)
        >>> with FlopCount() as c:
        ...     _ = (a @ b + 1.0).t()
        >>> c.total, c.by_op
        (136, {'mm': 128, 'add': 8, 't': 0})
    """

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                n = op_flops(func, args, kwargs, out)
                name = func._overloadpacket.__name__
                counter.by_op[name] = counter.by_op.get(name, 0) + n
                counter.total += n
                return out

        self._mode = _Mode()
        self.total = 0
        self.by_op: dict = {}

    def __enter__(self) -> "FlopCount":
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)


@dataclass(frozen=True)
class TorchGraphProfile(GraphProfile):
    """A `minigrad.plan.GraphProfile` traced from a PyTorch step, with what a
    selective-checkpoint policy needs to name each forward node.

    Attributes (besides `GraphProfile`'s):
        ops: for each forward node, ``(op, region, call)``: the ATen overload, the
            block it ran in (``-1``: the loss, outside every block) and its place among
            the calls a selective-checkpoint policy sees in that block (0, 1, ...).
        n_regions: the number of blocks.
        pinned: forward nodes a checkpoint of each block cannot recompute: each block's
            output (the next block's checkpointed input) and the loss's ops.
        saves: for each backward node, how many tensors its op saved (parameters
            included): the first backward node of a block that saves one starts that
            block's recomputation.
        saves_output: for each forward node, whether its backward saves one of its
            own outputs (then a recomputation that stops at it still runs it).
        region_calls: for each block, ``(op, output shape, dtype)`` of each ATen op a policy
            sees there, in call order (views included: they are not nodes, and are
            always recomputed); the policy checks them as it runs.
        mutated: forward nodes torch's selective checkpoint cannot save: an
            in-place op's own output (cached before its version moves) and a value
            a later op writes in place (dropout's mask, filled by ``bernoulli_``;
            a tensor ``ReLU(inplace=True)`` overwrites). An in-place op is a node
            that takes over the storage's bytes from the value it overwrites.
        block_inputs: for each block, the forward node that made its input (``-1``:
            the step's input ``x``; ``None``: a tensor no op of the step made). A
            checkpoint holds its block's input whenever the block saves anything,
            even where no op of the block saves it (``lin(tanh(h))``).
        input_bytes: the bytes of ``x``'s storage.
    """

    ops: tuple = ()
    n_regions: int = 0
    pinned: frozenset = frozenset()
    saves: tuple = ()
    saves_output: tuple = ()
    region_calls: tuple = ()
    mutated: frozenset = frozenset()
    block_inputs: tuple = ()
    input_bytes: int = 0


def _saved_tensors(grad_fn):
    out = []
    for name in dir(grad_fn):
        if not name.startswith("_saved_"):
            continue
        try:
            v = getattr(grad_fn, name)
        except RuntimeError:       # released, or an undefined optional tensor
            continue
        out.extend(_tensors_in(v) if isinstance(v, (tuple, list, torch.Tensor)) else [])
    if isinstance(grad_fn, torch.autograd.function.BackwardCFunction):
        try:  # a custom autograd.Function's node: what its forward saved for backward
            out.extend(_tensors_in(grad_fn.saved_tensors))
        except RuntimeError:
            pass
    return out


def trace_torch_graph(blocks, x: torch.Tensor, loss=None) -> TorchGraphProfile:
    """Trace one training step of a PyTorch block stack into minigrad's graph form.

    One forward pass, recorded ATen op by ATen op (a ``TorchDispatchMode``: the ops
    torch's selective checkpoint sees), then the autograd graph read without running
    backward. Forward node ``i`` is the ``i``-th op; its value is the storages its
    outputs create (views of an earlier storage own no bytes; parameters count 0,
    as in `minigrad.plan.trace_graph`), its cost `op_flops`: torch's formulas for
    matmuls and attention, 0 for views, and one FLOP per output element for every
    other op (layer norms, GELU, adds: torch's counter gives them 0, which would plan
    their recomputation as free). Backward node ``b`` (one per autograd node, in the
    engine's order, descending sequence numbers) reads the gradients of its op's
    users and the values its op saved (``grad_fn._saved_*``, matched by storage);
    its value is the gradients it returns (the bytes of its op's inputs that require
    grad), its cost twice its op's FLOPs (not measured: the planner minimises
    recomputed forward FLOPs only). The step's input, when saved, is
    ``const_bytes``. The random state and the modules' buffers (BatchNorm's running
    statistics) are left as they were (`buffers_kept`).

    Args:
        blocks: an ``nn.Module`` or a sequence of them, applied in order; each one
            is a region a checkpoint (`run_selective`) can wrap.
        x: the input (a tensor; it may require grad or not).
        loss: callable on the last output returning a scalar (default: the mean of
            squares).

    Returns:
        A `TorchGraphProfile` (a `minigrad.plan.GraphProfile`: `minigrad.plan.remat`
        plans on it).

    Raises:
        TypeError: ``x`` is not a tensor, or a block is not callable.
        ValueError: no blocks; the loss is not a scalar that requires grad; or a
            block does what a checkpoint's recomputation cannot repeat, named: it writes
            its input, a parameter or a buffer (other than a norm's running statistics)
            in place, writes through a view, or cuts the gradient to its input
            (``.detach()``).

    Example:
        >>> import torch
        >>> from bookkit.torchmodels import GPTBlock
        >>> g = trace_torch_graph([GPTBlock(16, 2, dropout=0.0)], torch.randn(2, 8, 16))
        >>> g.names[:2], g.n_forward, g.n_regions
        (('native_layer_norm', 'addmm'), 12, 1)
    """
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import SAC_IGNORED_OPS

    blocks = _as_blocks(blocks)
    _check_blocks(blocks, "trace_torch_graph")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"trace_torch_graph: x must be a tensor, got {type(x).__name__}")
    loss = loss if loss is not None else (lambda y: y.square().mean())
    param_keys = {storage_key(p) for b in blocks if isinstance(b, torch.nn.Module)
                  for p in list(b.parameters()) + list(b.buffers())}
    x_key = storage_key(x)

    ops = []          # (func, region, call, inputs, outputs, flops)
    side_writes = []  # (block, op) of ops that write an argument they do not return
    buffer_writes = []  # (block, op) of ops that write a buffer no norm's scratch covers
    view_writes = []  # (block, op) of ops that write through a view
    from torch.nn.modules.batchnorm import _NormBase
    free_buffers = {storage_key(b) for blk in blocks if isinstance(blk, torch.nn.Module)
                    for m in blk.modules() if not isinstance(m, _NormBase)
                    for b in m.buffers(recurse=False)}
    region = [-1]
    calls = {}

    class _Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func in SAC_IGNORED_OPS:
                return out
            call = calls.get(region[0], 0)      # a policy sees every other op
            calls[region[0]] = call + 1
            if not _tensors_in(out):
                ops.append((func, region[0], call, [], [], 0))
                return out
            outs = _tensors_in(out)
            written = _written_arguments(func, args, kwargs) if region[0] >= 0 else []
            if any(not any(t is o for o in outs) and storage_key(t) not in param_keys
                   for t in written):  # an argument written and not returned: rrelu's noise
                side_writes.append((region[0], func))
            if any(storage_key(t) in free_buffers for t in written):
                buffer_writes.append((region[0], func))
            if any(t._is_view() and storage_key(t) not in param_keys for t in written):
                view_writes.append((region[0], func))
            ops.append((func, region[0], call, _tensors_in((args, kwargs)), outs,
                        op_flops(func, args, kwargs, out)))
            return out

    with torch.random.fork_rng(), buffers_kept(*blocks, loss), torch.enable_grad():
        block_in = []
        with _Record():
            h = x
            for r, block in enumerate(blocks):
                region[0] = r
                block_in.append(h)
                version, state = h._version, _state_versions(block)
                h_in, h = h, block(h)
                if h_in._version != version:
                    raise ValueError(
                        f"trace_torch_graph: block {r} writes its input in place (relu_, "
                        f"ReLU(inplace=True) first): a checkpoint's recomputation would "
                        f"start from the overwritten input; make that op out of place")
                _check_state_kept(block, state, "trace_torch_graph", r)
                if not isinstance(h, torch.Tensor):
                    raise ValueError(
                        f"trace_torch_graph: block {r} returned {type(h).__name__}, not "
                        f"a tensor: each block must return the one tensor the next block "
                        f"(or the loss) takes")
            region[0] = -1
            value = loss(h)
        if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.requires_grad:
            raise ValueError("trace_torch_graph: loss must return a one-element tensor that "
                             "requires grad")
        for r in reversed(range(len(blocks))):
            if block_in[r].requires_grad and not _reaches(value, block_in[r]):
                raise _cut_gradient("trace_torch_graph", r)
        if view_writes:
            r, func = view_writes[0]
            raise ValueError(
                f"trace_torch_graph: block {r} writes through a view in place ({func}; "
                f"e.g. h[:, :4].relu_(), or ReLU(inplace=True) after InstanceNorm, "
                f"whose output is a view): the plan cannot follow that write yet; use "
                f"the op out of place")
        if buffer_writes:
            r, func = buffer_writes[0]
            raise ValueError(
                f"trace_torch_graph: block {r} writes a buffer in place ({func}) in its "
                f"forward pass: a recomputation would write it again (only a norm's "
                f"running statistics are kept to one update); update it outside the "
                f"blocks")
        if side_writes:
            r, func = side_writes[0]
            raise ValueError(
                f"trace_torch_graph: block {r} runs {func}, which writes an argument in "
                f"place that it does not return (RReLU's noise): torch's selective "
                f"checkpoint would return the op's saved output without that write, so "
                f"backward would read an unwritten tensor; use an op without that "
                f"side effect (LeakyReLU for RReLU)")
        graph = _build_torch_graph(ops, value, len(blocks), param_keys, x_key, x, block_in)
    _make_scratch(blocks)  # for run_selective's recomputations
    return graph


def _build_torch_graph(ops, value, n_regions, param_keys, x_key, x, block_in):
    # Views (outputs aliasing an input: view, t, permute, unbind, ...) cost 0 FLOPs and
    # own no bytes: they are not nodes; whoever reads a view reads the node that made
    # its storage. Their backward nodes pass gradients through (as views, except
    # unbind's, which stacks them: a copy this model does not count).
    node_of_tensor, creator = {}, {}      # id(tensor) -> node; storage key -> node
    names, deps, buffer_bytes, shapes, kept_ops = [], [], [], [], []
    node_of_grad_fn, grad_bytes, mutated = {}, [], set()
    made_by = {}                          # id(tensor) -> (tensor, nodes that wrote it)
    for func, region, call, inputs, outputs, flops in ops:
        written = set()
        if _writes(func):          # an in-place op: what it writes is no longer
            for t in outputs:      # the value its creator made; the storage's
                key = storage_key(t)  # bytes now belong to this op's value
                q = creator.get(key)
                if q is not None:
                    mutated.add(q)
                    written.add(key)
        d = set()
        for t in inputs:
            q = node_of_tensor.get(id(t), creator.get(storage_key(t)))
            if q is not None:
                d.add(q)
        if not outputs:
            continue
        if _is_view_op(func):
            for t in outputs:
                q = creator.get(storage_key(t))
                if q is not None:
                    node_of_tensor[id(t)] = q
            continue
        i = len(names)
        own = 0
        for t in outputs:
            key = storage_key(t)
            if key in written:
                written.discard(key)
                buffer_bytes[creator[key]] -= t.untyped_storage().nbytes()
                del creator[key]
            if key not in creator and key not in param_keys and key != x_key and key[1] != 0:
                creator[key] = i
                own += t.untyped_storage().nbytes()
            node_of_tensor[id(t)] = creator.get(key, i)
            made_by.setdefault(id(t), (t, []))[1].append(i)
        if _writes(func):          # torch's checkpoint caches an op's output before
            mutated.add(i)         # the in-place op bumps its version: never saved
        d.discard(i)
        names.append(func._overloadpacket.__name__)
        deps.append(tuple(sorted(d)))
        buffer_bytes.append(own)
        shapes.append((tuple(outputs[0].shape), str(outputs[0].dtype).replace("torch.", "")))
        grad_bytes.append(sum(t.numel() * t.element_size() for t in inputs if t.requires_grad))
        kept_ops.append((func, region, call, flops))
    nf = len(names)
    # A tensor's grad_fn is its last writer's; each in-place op's grad_fn reaches the
    # one before through its first edge (``self``).
    for t, writers in made_by.values():
        fn = t.grad_fn
        for i in reversed(writers):
            if fn is None:
                break
            if fn not in node_of_grad_fn or node_of_grad_fn[fn] > i:
                node_of_grad_fn[fn] = i
            fn = fn.next_functions[0][0] if fn.next_functions else None
    # the backward: autograd nodes reachable from the loss, in the engine's order
    seen, stack = {}, [value.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen[fn] = []
        stack.extend(f for f, _ in fn.next_functions)
    for fn in seen:                    # who reads each node's gradient
        for f, _ in fn.next_functions:
            if f is not None:
                seen[f].append(fn)

    def readers(fn, out):              # through the pass-through nodes of views
        for c in seen[fn]:
            if c in node_of_grad_fn:
                out.add(c)
            else:
                readers(c, out)
        return out

    bwd = sorted((fn for fn in seen if fn in node_of_grad_fn),
                 key=lambda fn: -fn._sequence_nr())
    stage_of = {fn: nf + k for k, fn in enumerate(bwd)}
    flops = [f for *_, f in kept_ops]
    const, const_slots, saves = {}, [], []
    saves_output = [False] * nf
    for fn in bwd:
        j = node_of_grad_fn[fn]
        d = {stage_of[c] for c in readers(fn, set())}
        # a Python number an op took (``h * 1.5``) is saved as a 0-dim tensor no op
        # made, which autograd never packs: torch's recomputation does not run for it
        saved = [t for t in _saved_tensors(fn) if t.dim() or storage_key(t) in creator
                 or storage_key(t) in param_keys or storage_key(t) == x_key]
        for t in saved:
            key = storage_key(t)
            if key in creator:
                q = creator[key]
                d.add(q)
                saves_output[j] = saves_output[j] or q == j
            elif key == x_key:
                nbytes = x.untyped_storage().nbytes()
                cid = const.setdefault(key, len(const))
                if (cid, nbytes, j) not in const_slots:
                    const_slots.append((cid, nbytes, j))
        saves.append(len(saved))
        names.append(names[j] + ".bwd")
        deps.append(tuple(sorted(d)))
        flops.append(2 * flops[j])
    value_bytes = buffer_bytes + [grad_bytes[node_of_grad_fn[fn]] for fn in bwd]
    regions = [r for _, r, *_ in kept_ops]
    pinned = {i for i in range(nf) if regions[i] == -1}
    for r in range(n_regions):     # a block's output: the last op of the block made it
        made = [i for i in range(nf) if regions[i] == r]
        if made:                   # (a block of views only, nn.Identity, makes none)
            pinned.add(max(made))
    calls = tuple(tuple((f, tuple(outs[0].shape) if outs else None,
                         outs[0].dtype if outs else None)
                        for f, rr, _, _, outs, _ in ops if rr == r) for r in range(n_regions))
    block_inputs = tuple(-1 if storage_key(h) == x_key
                         else node_of_tensor.get(id(h), creator.get(storage_key(h)))
                         for h in block_in)
    return TorchGraphProfile(
        names=tuple(names), n_forward=nf, deps=tuple(deps), value_bytes=tuple(value_bytes),
        flops=tuple(int(f) for f in flops),
        const_bytes=int(x.untyped_storage().nbytes()) if const else 0,
        backward_of=tuple(node_of_grad_fn[fn] for fn in bwd), out_buffer=tuple(range(nf)),
        buffer_bytes=tuple(buffer_bytes), private_bytes=(0,) * nf,
        const_slots=tuple(const_slots), out_shapes=tuple(shapes),
        ops=tuple((f, r, c) for f, r, c, _ in kept_ops), n_regions=n_regions,
        pinned=frozenset(pinned), saves=tuple(saves), saves_output=tuple(saves_output),
        region_calls=calls, mutated=frozenset(mutated), block_inputs=block_inputs,
        input_bytes=int(x.untyped_storage().nbytes()))


def _sac_schedule(g: TorchGraphProfile, save) -> tuple:
    """What torch's selective checkpoint runs when each block is checkpointed and the
    forward nodes ``save`` are MUST_SAVE (the rest recomputed), as a Checkmate schedule
    ``(recompute, keep)``: a block's recomputation runs once, in order, when backward
    first unpacks a tensor the block saved, and stops (torch's early stop) once it has
    rebuilt the last one; what it rebuilds stays until its last reader. The block's
    input stays too, until the block's last backward node that saved something has
    run (the checkpoint holds it as long as any tensor it packed)."""
    nf, N = g.n_forward, g.n_nodes
    regions = [r for _, r, _ in g.ops]
    present = set(save) | set(g.pinned)
    recompute, starts = [()] * N, {}
    held_input = {}
    for r in range(g.n_regions):
        nodes = [i for i in range(nf) if regions[i] == r]
        saving = _saving_nodes(g, r)
        if not saving:
            continue
        t_r = min(_stage_of(g, i) for i in saving)
        last = max(saving)
        rerun = [i for i in nodes if i not in present
                 and (i < last or (i == last and g.saves_output[last]))]
        recompute[t_r] = tuple(rerun)
        starts[t_r] = {i for i in nodes if i in save}
        q = g.block_inputs[r] if r < len(g.block_inputs) else None
        if q is not None and q >= 0:
            t_end = max(_stage_of(g, i) for i in saving)
            held_input.setdefault(t_end, set()).add(q)
    # a value is needed where a node or a recomputation reads it; a saved output is
    # held by the checkpoint until its block's recomputation takes it
    need = [set(g.deps[t]) | {d for k in recompute[t] for d in g.deps[k]} - set(recompute[t])
            | starts.get(t, set()) | held_input.get(t, set()) for t in range(N)]
    keep, avail = [], set()
    for t in range(N):
        later = set().union(*need[t:]) if t < N else set()
        fwd_later = set().union(*need[t:nf]) if t < nf else set()
        keep.append(frozenset(i for i in avail
                              if i in fwd_later or (i in later and (i in present or i >= nf
                                                                     or t > nf))))
        avail = set(keep[-1]) | set(recompute[t]) | {t}
        if t == nf - 1:
            avail = {i for i in avail if i in present or i >= nf}
    return tuple(recompute), tuple(keep)


def _stage_of(g, i):
    return g.n_forward + g.backward_of.index(i)


def _saving_nodes(g, r):
    """The forward nodes of block ``r`` whose backward saved a tensor (autograd
    packs it through the block's checkpoint)."""
    nf = g.n_forward
    return [i for i in range(nf) if g.ops[i][1] == r and i in g.backward_of
            and g.saves[_stage_of(g, i) - nf] > 0]


def _input_held_bytes(g) -> int:
    """The bytes of ``x`` a checkpoint holds though no op saves it: block 0 (or a
    block after views only) saves something, so its checkpoint keeps ``x``."""
    if g.const_bytes:        # an op saves x: counted already
        return 0
    held = any(q == -1 and _saving_nodes(g, r) for r, q in enumerate(g.block_inputs))
    return g.input_bytes if held else 0


@dataclass(frozen=True)
class SelectivePolicy:
    """A graph schedule as torch's selective-checkpoint policy, with what it will do.

    Attributes:
        graph: the `TorchGraphProfile` it was made for.
        save: the forward nodes whose outputs are saved (``MUST_SAVE``): the
            schedule's, and each block's output whose op saves it (tanh; never
            recomputed in the model, as the next block holds it); every other op
            of a block is recomputed (``PREFER_RECOMPUTE``).
        schedule: the `minigrad.plan.GraphSchedule` it came from (None for one
            `selective_frontier` found).
        held_bytes: predicted bytes held for backward when the forward ends
            (the saved outputs, the blocks' inputs, what the loss saves).
        recompute_flops: predicted FLOPs torch recomputes (`op_flops`).
        peak_bytes: predicted peak of the step in Checkmate's model (live values and
            gradients in flight) as torch runs it: each block recomputed at once.
        recompute, keep: that execution as a Checkmate schedule.
    """

    graph: TorchGraphProfile
    save: frozenset
    schedule: object
    held_bytes: int
    recompute_flops: int
    peak_bytes: int
    recompute: tuple
    keep: tuple

    def policy_fn(self, region: int):
        """The policy function of block ``region`` for
        ``create_selective_checkpoint_contexts``: op instances by call order."""
        from torch.utils.checkpoint import CheckpointPolicy

        g = self.graph
        save_calls = {c for i, (_, r, c) in enumerate(g.ops) if r == region and i in self.save}
        expected = g.region_calls[region]
        count = [0]

        def policy(ctx, func, *args, **kwargs):
            k = count[0]
            count[0] += 1
            outs = _tensors_in(ctx.op_output)
            got = (func, tuple(outs[0].shape) if outs else None,
                   outs[0].dtype if outs else None)
            if k >= len(expected) or expected[k] != got:
                want = ("{} with output shape {} ({})".format(*expected[k])
                        if k < len(expected) else "no such call")
                raise RuntimeError(
                    f"selective policy: block {region} call {k} is {got[0]} with output "
                    f"shape {got[1]} ({got[2]}), but the plan was traced with {want}; "
                    f"trace the graph again for this model and input")
            return (CheckpointPolicy.MUST_SAVE if k in save_calls
                    else CheckpointPolicy.PREFER_RECOMPUTE)
        return policy

    def context_fn(self, region: int):
        """A ``context_fn`` for ``checkpoint(block, ..., context_fn=...)`` of block
        ``region``."""
        import functools

        from torch.utils.checkpoint import create_selective_checkpoint_contexts

        return functools.partial(create_selective_checkpoint_contexts, self.policy_fn(region))


def selective_policy(graph: TorchGraphProfile, schedule) -> SelectivePolicy:
    """Turn a graph schedule into torch's selective checkpoint, and predict its run.

    The forward values the schedule keeps into the backward pass become ``MUST_SAVE``
    (named by op instance: the ``k``-th op torch sees in a block), every other op
    ``PREFER_RECOMPUTE``; each block runs under ``torch.utils.checkpoint``
    (`run_selective`). Torch then holds exactly what the schedule holds when the
    forward ends (plus each block's input, which a checkpoint always keeps), but it
    recomputes a block all at once, when backward first needs one of its tensors, up
    to the last one it needs: ``recompute_flops`` and ``peak_bytes`` are that
    execution's, priced in the schedule's model; they equal the schedule's own when
    it recomputes each dropped op once and the ones it needs are all before the last.
    A value written in place (dropout's mask, filled by ``bernoulli_``; a batch
    norm's output that ``ReLU(inplace=True)`` overwrites) cannot be saved (torch
    refuses a mutated cached tensor): it is recomputed, and the predictions count
    it so. A block's output op that saves its output is saved too (the output is
    alive anyway, and the model never recomputes it); when it cannot be (it is an
    in-place op), its block's recomputation rebuilds it, counted in the FLOPs and,
    as an upper bound, in the peak.

    Args:
        graph: a `TorchGraphProfile` (`trace_torch_graph`).
        schedule: a `minigrad.plan.GraphSchedule` of that graph (`minigrad.plan.remat`).

    Returns:
        A `SelectivePolicy`.

    Raises:
        TypeError: ``graph`` is not a `TorchGraphProfile`.
        ValueError: ``schedule`` was planned for another graph.

    Example:
        >>> import torch
        >>> from bookkit.torchmodels import GPTBlock
        >>> from minigrad import plan
        >>> x = torch.randn(2, 8, 16, requires_grad=True)
        >>> g = trace_torch_graph([GPTBlock(16, 2, dropout=0.0)], x)
        >>> p = selective_policy(g, plan.store_all(g))
        >>> p.held_bytes == plan.store_all(g).predicted_activation_bytes
        True
        >>> p.recompute_flops    # the attention's output projection: nothing saves it
        8192
    """
    if not isinstance(graph, TorchGraphProfile):
        raise TypeError(f"selective_policy: graph must be a TorchGraphProfile "
                        f"(trace_torch_graph), got {type(graph).__name__}")
    if getattr(schedule, "graph", None) != graph:
        raise ValueError("selective_policy: the schedule was planned for another graph")
    nf = graph.n_forward
    save = frozenset(i for i in schedule.keep[nf] if i < nf and graph.ops[i][1] >= 0)
    return _policy(graph, save, schedule)


def _policy(graph, save, schedule=None) -> SelectivePolicy:
    from minigrad.plan.checkmate import simulate

    # A block's output is the next block's input, held anyway; but if its op saves
    # its own output (tanh, a batch norm's statistics), torch's checkpoint of the
    # block would rebuild it in backward unless the policy saves it: MUST_SAVE, at
    # no extra byte, as the model prices it (never recomputed).
    save = frozenset(save) | {i for i in graph.pinned
                              if graph.ops[i][1] >= 0 and graph.saves_output[i]}
    # a value written in place after its op ran cannot be saved (torch refuses
    # a mutated cached tensor): it is recomputed, and predicted so
    save = save - graph.mutated
    recompute, keep = _sac_schedule(graph, save)
    peak, cost = simulate(graph, recompute, keep)
    # A block output that its op saves but cannot be MUST_SAVE (``ReLU(inplace=True)``
    # wrote it) is held by the next block and rebuilt by its own block's
    # recomputation as well: its FLOPs once more, and a second copy while that
    # block's backward starts (counted at the peak: an upper bound).
    rebuilt = [i for i in graph.pinned if graph.ops[i][1] >= 0
               and graph.saves_output[i] and i not in save]
    cost += sum(graph.flops[i] for i in rebuilt)
    peak += max((graph.value_bytes[i] for i in rebuilt), default=0)
    # x, which every checkpoint of block 0 holds until the step's end
    peak += _input_held_bytes(graph)
    nf = graph.n_forward
    held = (sum(graph.value_bytes[i] for i in set(keep[nf]) | set(save)) + graph.const_bytes
            + _input_held_bytes(graph))
    return SelectivePolicy(graph, frozenset(save), schedule, int(held), int(cost), int(peak),
                           recompute, keep)


def selective_frontier(graph: TorchGraphProfile, max_ops: int = 14) -> list:
    """Every best selective policy of a stack of identical blocks, by enumeration.

    Torch's selective checkpoint cannot run every graph schedule (it rebuilds a block
    all at once, and reruns what nothing needs), so the best policy is searched in
    torch's own family: one choice of ``MUST_SAVE`` ops per block, the same in every
    block, each of the ``2**k`` choices priced by `selective_policy`'s model of
    torch's execution (exact on CPU for held bytes and FLOPs). Returns the Pareto
    frontier: held bytes up, recomputed FLOPs down.

    Args:
        graph: a `TorchGraphProfile` whose blocks run the same ops.
        max_ops: refuse blocks with more candidate ops than this (``2**max_ops``
            choices).

    Returns:
        A list of `SelectivePolicy` (``schedule`` None), fewest held bytes first.

    Raises:
        TypeError: ``graph`` is not a `TorchGraphProfile`.
        ValueError: the blocks differ, or a block has more than ``max_ops`` ops.

    Example:
        >>> import torch
        >>> from bookkit.torchmodels import GPTBlock
        >>> x = torch.randn(2, 8, 16, requires_grad=True)
        >>> g = trace_torch_graph([GPTBlock(16, 2, dropout=0.0)] * 2, x)
        >>> front = selective_frontier(g)
        >>> front[-1].recompute_flops, len(front) > 2
        (0, True)
    """
    if not isinstance(graph, TorchGraphProfile):
        raise TypeError(f"selective_frontier: graph must be a TorchGraphProfile, got "
                        f"{type(graph).__name__}")
    nf = graph.n_forward
    calls = [tuple(c) for c in graph.region_calls]
    if len(set(calls)) != 1:
        raise ValueError("selective_frontier: the blocks run different ops (or shapes); "
                         "it enumerates one choice for identical blocks")
    per = [[i for i in range(nf) if graph.ops[i][1] == r and i not in graph.pinned]
           for r in range(graph.n_regions)]
    k = len(per[0])
    if k > max_ops:
        raise ValueError(f"selective_frontier: {k} ops per block, more than max_ops={max_ops}")
    points = []
    for mask in range(2 ** k):
        pick = [j for j in range(k) if mask >> j & 1]
        points.append(_policy(graph, frozenset(block[j] for block in per for j in pick)))
    front = []
    for p in sorted(points, key=lambda p: (p.held_bytes, p.recompute_flops)):
        if not front or p.recompute_flops < front[-1].recompute_flops:
            front.append(p)
    return front


def run_selective(blocks, policy: SelectivePolicy, x: torch.Tensor) -> torch.Tensor:
    """Run ``blocks`` on ``x``, each under ``torch.utils.checkpoint`` with its
    selective policy (non-reentrant, torch's early stop on).

    Args:
        blocks: the blocks `trace_torch_graph` traced.
        policy: a `SelectivePolicy` of that trace.
        x: the input.

    Returns:
        The last block's output. Running statistics (BatchNorm in training mode)
        are updated by each block's first run only, as without checkpoints: a
        recomputation updates scratch copies instead (`run_plan`).
    """
    blocks = _as_blocks(blocks)
    if len(blocks) != policy.graph.n_regions:
        raise ValueError(f"run_selective: {len(blocks)} blocks for a policy traced on "
                         f"{policy.graph.n_regions}")
    for r, block in enumerate(_first_runs_only(blocks, "run_selective")):
        x = checkpoint(block, x, use_reentrant=False, context_fn=policy.context_fn(r))
    return x


class StepMeasure(NamedTuple):
    """What `measure_step` measured (bytes and FLOPs)."""

    held_bytes: int
    backward_flops: int
    peak_bytes: int
    grads: list


def measure_step(blocks, x: torch.Tensor, loss, run=None) -> StepMeasure:
    """Measure one training step of ``blocks`` on CPU, as its plans predict it.

    ``held_bytes``: the storages ATen ops made in the forward pass (and the loss)
    that are still alive when it ends, the loss's own excepted
    (`bookkit.torchmem.ForwardMemoryMeter`; it sees what a checkpoint caches, not
    the copy of the random state each checkpoint keeps for its recomputation).
    ``backward_flops``: the backward pass's FLOPs under `op_flops` (`FlopCount`),
    recomputation included. ``peak_bytes``: the CPU allocator's peak over a whole
    step, forward and backward (`bookkit.torchmem.AllocatorTrace`, one thread), with
    the gradients already allocated (they accumulate in place). ``grads``: the
    gradients of the parameters, then of ``x``. The step runs twice (counted, then
    traced); the blocks' buffers (BatchNorm's running statistics) are then put back
    as they were, and ``.grad`` holds one step's gradients.

    Args:
        blocks: an ``nn.Module`` or a sequence of them, applied in order (their
            parameters are not counted).
        x: the input; it must require grad.
        loss: callable on the output returning a scalar.
        run: callable ``x -> output`` (default ``blocks``), e.g. `run_selective`.

    Returns:
        A `StepMeasure`.

    Example (the backward's FLOPs: the seed gradient, 1, tanh's, 32, and the
    in-place sum into ``x.grad``, 32):
        >>> import torch
        >>> x = torch.randn(4, 8, requires_grad=True)
        >>> m = measure_step(torch.nn.Tanh(), x, lambda y: y.sum())
        >>> m.held_bytes, m.backward_flops      # tanh keeps its output
        (128, 65)
    """
    from bookkit.torchmem import AllocatorTrace, ForwardMemoryMeter

    if not isinstance(x, torch.Tensor) or not x.requires_grad:
        raise ValueError("measure_step: x must be a tensor that requires grad")
    if not isinstance(blocks, torch.nn.Module) or isinstance(blocks, torch.nn.ModuleList):
        blocks = torch.nn.Sequential(*_as_blocks(blocks))
    run = blocks if run is None else run
    params = list(blocks.parameters()) + [x]
    for p in params:
        p.grad = torch.zeros_like(p)
    with buffers_kept(blocks, loss):  # two steps run: BatchNorm would count both
        with ForwardMemoryMeter(exclude=[blocks], inputs=[x],
                                allocations=False) as meter:
            value = loss(run(x))
        held = meter.alive_bytes() - value.untyped_storage().nbytes()
        with FlopCount() as count:
            value.backward()
        grads = [p.grad.clone() for p in params]
        for p in params:
            p.grad.zero_()
        with AllocatorTrace("cpu") as trace:
            loss(run(x)).backward()
    return StepMeasure(int(held), int(count.total), int(trace.peak_bytes), grads)
