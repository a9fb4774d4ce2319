"""Measure a `ChainProfile` from real layers: one taped dry run, observed through public APIs.

The run is taped layer by layer inside ``minigrad.memory.track()`` (FLOPs and op counts per
layer) and inside a `saved_tensors_hooks` block whose pack hook records every array each
layer saves for backward (and hands it back unchanged). Which of those arrays are
activations, and how big their buffers are, comes from the ledger's public functions
``memory.category`` and ``memory.base_buffer`` (a view and its base are one buffer; a
saved view of a parameter is a parameter, not an activation).
"""
from __future__ import annotations

import dataclasses
import math
import numbers

from minigrad import memory
from minigrad import random as _random
from minigrad.plan.chain import ChainProfile
from minigrad.autograd import saved_tensors_hooks
from minigrad.grad_mode import enable_grad
from minigrad.hooks import dry_run
from minigrad.tensor import Tensor

__all__ = ["profile_chain", "as_profile", "COSTS", "check_cost_name", "check_costs"]

#: What ``profile_chain(cost=...)`` can measure per layer.
COSTS = ("flops", "ops")


class _SavedArrays:
    """A pack hook that records every array saved while it is active (and stores it as is)."""

    def __init__(self):
        self.arrays = []

    def pack(self, a):
        self.arrays.append(a)
        return a

    @staticmethod
    def unpack(a):
        return a

    def take(self):
        """The activation buffers saved since the last call: ``{buffer id: nbytes}``."""
        out = {}
        for a in self.arrays:
            if memory.category(a) == "activations":  # not a parameter, buffer, ...
                base = memory.base_buffer(a)
                out[id(base)] = int(base.nbytes)
        self.arrays = []
        return out


def check_cost_name(cost, where: str, n: int):
    """Raise a named ValueError if ``cost`` is a string other than those in `COSTS`
    (the planners accept a name or a sequence of ``n`` numbers)."""
    if isinstance(cost, str) and cost not in COSTS:
        raise ValueError(f"{where}: cost must be one of {list(COSTS)} or a sequence of {n} numbers, "
                         f"got {cost!r}")


def check_costs(cost, n: int, where: str) -> tuple:
    """``cost``, a sequence of ``n`` numbers, as a tuple, or an error naming ``where``:
    each must be a real number (not a bool), finite and >= 0.

    Example:
        >>> check_costs([1, 2.5], 2, "rotor")
        (1, 2.5)
        >>> check_costs([1], 2, "rotor")
        Traceback (most recent call last):
        ...
        ValueError: rotor: cost has 1 entries, expected one per layer (2)
    """
    values = tuple(cost)
    if len(values) != n:
        raise ValueError(f"{where}: cost has {len(values)} entries, expected one per layer ({n})")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):  # NumPy's bool too
            raise TypeError(f"{where}: cost[{i}] must be a number, got {type(v).__name__}")
        try:
            finite = math.isfinite(v)
        except OverflowError:
            raise ValueError(f"{where}: cost[{i}] is too large to compare as a float: "
                             f"{v!r}") from None
        if not finite or v < 0:
            raise ValueError(f"{where}: cost[{i}] must be a finite number >= 0, got {v!r}")
    return values


def _layer_costs(cost, flops, ops, n, where="profile_chain"):
    if cost is None:
        cost = "flops"
    if isinstance(cost, str):
        check_cost_name(cost, where, n)
        return tuple(flops if cost == "flops" else ops)
    return check_costs(cost, n, where)


def profile_chain(layers, x, loss=None, cost="flops") -> ChainProfile:
    """Measure a `ChainProfile` of ``layers`` on input ``x`` (and ``loss``) by one taped dry run.

    Args:
        layers: callables Tensor -> Tensor (minigrad modules).
        x: the chain's input Tensor, as it will be passed to ``checkpoint_sequential``
            (whether it requires grad matters: a first layer without parameters saves
            nothing for an input that does not).
        loss: optional callable mapping the chain's output to a scalar Tensor (for
            example ``lambda y: F.mse_loss(y, target)``); what it saves is part of the
            step's peak, and plans are optimal for forward, loss and backward together.
        cost: each layer's forward work: ``"flops"`` (default: the ledger's FLOP count),
            ``"ops"`` (op executions), or a sequence of ``n`` non-negative numbers.

    Returns:
        A `ChainProfile` (``cost`` as asked; ``loss_*`` fields from the loss).

    Raises:
        TypeError: ``x`` is not a Tensor, a layer does not return one, or the loss does
            not return a one-element Tensor.
        ValueError: the chain is not one the model covers: a layer whose output shares its
            input's buffer (``x_{i+1}`` a view of ``x_i``), or an array saved by two layers
            that is not the boundary between them.

    It is a dry run (`minigrad.hooks.dry_run`): every `minigrad.random.Generator` alive
    before the call is put back as it was (the default one included) and BatchNorm's running
    statistics do not move, so the dry run does not shift the dropout masks of the real run;
    other state a layer of your own mutates in its forward is mutated once more.

    Example:
        >>> import numpy as np
        >>> from minigrad import nn
        >>> layers = [nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(3)]
        >>> x = Tensor(np.ones((4, 8), np.float32))
        >>> profile = profile_chain(layers, x, loss=lambda y: (y * y).sum())
        >>> profile.n, profile.output_bytes
        (3, 128)
    """
    layers = list(layers)
    if not layers:
        raise ValueError("profile_chain needs at least one layer")
    if not isinstance(x, Tensor):
        raise TypeError(f"profile_chain: x must be a minigrad Tensor, got {type(x).__name__}")
    if loss is not None and not callable(loss):
        raise TypeError(f"profile_chain: loss must be callable (output -> scalar Tensor), got "
                        f"{type(loss).__name__}")
    generators = [(g, g.get_state()) for g in _random.live_generators()]
    rng_state = _random.get_rng_state()
    saved = _SavedArrays()
    input_bytes, saves_in, saves_out, own_bytes, flops, ops = [], [], [], [], [], []
    requires_grad = [bool(x.requires_grad)]
    owner: dict[int, int] = {}  # private saved buffer -> layer that saved it
    boundaries: dict[int, int] = {}  # buffer of x_i -> i
    outputs = []  # keep every boundary alive so buffer ids stay unique during the run
    loss_in, loss_own, loss_flops = False, 0, 0
    h = out = value = None
    try:
        with enable_grad(), dry_run(), memory.track(record_timeline=False) as m, \
                saved_tensors_hooks(saved.pack, saved.unpack):
            h = x
            for i, layer in enumerate(layers):
                f0, o0 = m.flops["forward"], m.ops("forward")
                out = layer(h)
                if not isinstance(out, Tensor):
                    raise TypeError(f"profile_chain: layer {i} returned {type(out).__name__}, "
                                    f"expected a Tensor")
                flops.append(m.flops["forward"] - f0)
                ops.append(m.ops("forward") - o0)
                k_in, k_out = id(memory.base_buffer(h.data)), id(memory.base_buffer(out.data))
                if k_in == k_out:
                    raise ValueError(
                        f"profile_chain: layer {i} ({type(layer).__name__}) returns a tensor sharing "
                        f"its input's buffer; the planner's chain model needs a new array per layer")
                s_in = s_out = False
                own = 0
                for k, nbytes in saved.take().items():
                    if k == k_in:
                        s_in = True
                    elif k == k_out:
                        s_out = True
                    else:
                        _check_private(k, i, nbytes, owner, boundaries, "layer")
                        owner[k] = i
                        own += nbytes
                boundaries[k_in] = i
                input_bytes.append(int(memory.base_buffer(h.data).nbytes))
                saves_in.append(s_in)
                saves_out.append(s_out)
                own_bytes.append(int(own))
                requires_grad.append(bool(out.requires_grad))
                outputs.append(out)
                h = out
            output_bytes = int(memory.base_buffer(h.data).nbytes)
            if loss is not None:
                f0 = m.flops["forward"]
                value = loss(h)
                if not isinstance(value, Tensor) or value.size != 1:
                    raise TypeError(f"profile_chain: loss must return a one-element Tensor, got "
                                    f"{type(value).__name__}"
                                    + (f" of shape {value.shape}" if isinstance(value, Tensor) else ""))
                loss_flops = m.flops["forward"] - f0
                k_out = id(memory.base_buffer(h.data))
                for k, nbytes in saved.take().items():
                    if k == k_out:
                        loss_in = True
                    else:
                        _check_private(k, len(layers), nbytes, owner, boundaries, "loss")
                        loss_own += nbytes
    finally:
        outputs.clear()
        h = out = value = None
        for g, state in generators:
            g.set_state(state)
        _random.set_rng_state(rng_state)
    return ChainProfile(input_bytes=tuple(input_bytes), output_bytes=output_bytes,
                        saves_input=tuple(saves_in), saves_output=tuple(saves_out),
                        own_bytes=tuple(own_bytes), cost=_layer_costs(cost, flops, ops, len(layers)),
                        requires_grad=tuple(requires_grad), loss_saves_input=loss_in,
                        loss_own_bytes=int(loss_own), loss_cost=int(loss_flops))


def _check_private(k, i, nbytes, owner, boundaries, what):
    """An array saved by layer ``i`` (or the loss) that is neither its input nor its output
    must be its own: not another layer's input, not saved by another layer."""
    who = f"layer {i}" if what == "layer" else "the loss"
    if k in boundaries:
        raise ValueError(f"profile_chain: {who} saves the input of layer {boundaries[k]}; the "
                         f"planner's chain model covers layers that save only their own input, "
                         f"output and private arrays")
    if k in owner:
        raise ValueError(f"profile_chain: layer {owner[k]} and {who} both save the same {nbytes}-byte "
                         f"array, which is not the boundary between them; the planner's chain model "
                         f"cannot account for it")


def as_profile(layers, x=None, loss=None, cost="flops", where: str = "plan") -> ChainProfile:
    """The one adapter of the planners: ``layers`` as a `ChainProfile`.

    A `ChainProfile` is returned as is (``cost``, a sequence of ``n`` numbers, replaces
    its costs; None or a name keeps them; errors name ``where``; a ``loss`` is refused: the profile already includes its own); a list of
    layers is measured on ``x`` by `profile_chain`.

    Example:
        >>> from minigrad.plan.chain import ChainProfile
        >>> profile = ChainProfile(input_bytes=(64, 8), output_bytes=8,
        ...                        saves_input=(True,) * 2, saves_output=(False,) * 2,
        ...                        own_bytes=(256, 32), cost=(10, 1))
        >>> as_profile(profile, cost=[1, 1]).cost
        (1, 1)
    """
    if isinstance(layers, ChainProfile):
        if loss is not None:
            raise ValueError(f"{where}: a ChainProfile already includes its loss; pass "
                             f"loss to profile_chain(layers, x, loss) instead")
        check_cost_name(cost, where, layers.n)
        if cost is None or isinstance(cost, str):
            return layers
        return dataclasses.replace(layers, cost=check_costs(cost, layers.n, where))
    if x is None:
        raise ValueError(f"{where}(layers, x): x (the chain's input Tensor) is required")
    layers = list(layers)
    if cost is not None and not isinstance(cost, str):
        cost = check_costs(cost, len(layers), where)  # named before anything runs
    check_cost_name(cost, where, len(layers))
    return profile_chain(layers, x, loss=loss, cost="flops" if cost is None else cost)
