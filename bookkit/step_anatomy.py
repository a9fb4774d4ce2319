"""Where one training step's memory goes, by the ledger's categories (shown in chapter 1).

`measure_step` runs one optimizer step under ``minigrad.memory.track()`` and reports each
category at its own peak (`StepAnatomy`), with a language model's logits split out.
"""
from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field

from bookkit.blas import blas_threads
from minigrad import Tensor, memory

__all__ = ["StepAnatomy", "measure_step"]


@dataclass
class StepAnatomy:
    """Where one training step's memory goes, in bytes, each category at its own
    peak over the step (sampled at the start, after every ledger event and at the end).
    Shown in chapter 1.

    ``parameters``, ``buffers``, ``gradients``, ``optimizer`` (AdamW's two moments),
    ``activations`` (saved for backward, without the loss's own saved arrays when
    the logits are split out), ``logits`` (the logits array plus what the loss saves
    from it; 0 if not split), ``temporaries`` (everything else minigrad holds:
    inputs, op outputs the code still holds, gradients in flight; without the
    logits array when split). ``peak_total``: the largest simultaneous total, which
    is below the sum of the bars since the categories do not all peak at once.
    ``tracker``: the `minigrad.memory` tracker of the measured step."""

    parameters: int
    buffers: int
    gradients: int
    optimizer: int
    activations: int
    logits: int
    temporaries: int
    peak_total: int
    tracker: object = field(repr=False, default=None)

    #: The bar order used by the book's figures (bottom first).
    ORDER = ("parameters", "gradients", "optimizer", "activations", "logits", "temporaries")

    def bars(self) -> dict:
        """``{category: bytes}`` in `ORDER` (buffers join parameters: both are model state)."""
        d = {c: getattr(self, c) for c in self.ORDER}
        d["parameters"] += self.buffers
        return d

    @property
    def sum_of_peaks(self) -> int:
        return sum(self.bars().values())


def measure_step(forward, loss_of, optimizer, split_logits: bool = False, warmup: int = 1) -> StepAnatomy:
    """Measure one training step: ``out = forward()``, ``loss = loss_of(out)``,
    ``loss.backward()``, ``optimizer.step()``, with the gradients set to None before
    (shown in chapter 1).

    ``warmup`` full steps run first, so that the optimizer's state already exists
    (as in any step after the first). ``out`` is dropped as soon as the loss is
    computed, as in ``loss = loss_of(forward())``. With ``split_logits``, ``out`` is
    the logits tensor: its array, while it lives, and the arrays the loss saves for
    backward, until the loss's backward node (the first one) has run, are reported
    as ``logits`` and taken out of ``temporaries`` and ``activations``. (The
    gradient of the logits, created in backward, stays in ``temporaries``.)

    Counts everything live in the process (parameters exist before the step), so
    measure with nothing else alive. NumPy's BLAS runs single-threaded meanwhile
    (`blas_threads`): bytes do not depend on it, and on a shared CPU it keeps the
    small batched matrix products of a GPT from stalling."""
    with blas_threads(1):
        return _measure_step(forward, loss_of, optimizer, split_logits, warmup)


def _measure_step(forward, loss_of, optimizer, split_logits, warmup):
    if warmup < 0:
        raise ValueError(f"measure_step: warmup must be >= 0, got {warmup}")

    def step():
        optimizer.zero_grad()
        loss = loss_of(forward())
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    optimizer.zero_grad()
    # The figures are absolute (everything alive in the process), so unreachable
    # graphs left by earlier code must be gone first; track() then keeps the
    # collector paused during the step (minigrad.memory, rule 7).
    gc.collect()
    died = []  # number of timeline events recorded when the logits' buffer was freed
    with memory.track() as m:
        out = forward()
        if split_logits and not isinstance(out, Tensor):
            raise TypeError(f"measure_step: with split_logits, forward() must return the logits "
                            f"Tensor, got {type(out).__name__}")
        born = len(m.timeline)  # event born - 1 produced the logits
        act_before_loss = int(m.timeline[-1].live["activations"]) if born else int(m.start["activations"])
        logits_bytes = out.nbytes if split_logits else 0
        if split_logits:
            buf = memory.base_buffer(out.data)
            weakref.finalize(buf, lambda: died.append(len(m.timeline)))
            del buf  # only the caller's code may keep the logits alive
        loss = loss_of(out)
        del out
        after_loss = len(m.timeline)
        loss.backward()
        del loss
        optimizer.step()
    loss_saved = int(m.timeline[after_loss - 1].live["activations"]) - act_before_loss if split_logits else 0
    logits_end = died[0] if died else len(m.timeline) + 1  # first state index without the logits
    first_backward = next((i for i, ev in enumerate(m.timeline) if ev.phase == "backward"), len(m.timeline))
    # The start, after every event, and the end (after the optimizer step: the last
    # leaves' gradients are stored after the last backward event).
    states = [(-1, m.start)] + list(enumerate(ev.live for ev in m.timeline)) + [(len(m.timeline), m.end)]
    peak = {c: 0 for c in ("parameters", "buffers", "gradients", "optimizer", "activations",
                           "logits", "temporaries", "total")}
    for i, live in states:
        lg_alive = split_logits and born - 1 <= i < logits_end
        saved_alive = split_logits and after_loss - 1 <= i < first_backward
        vals = {c: int(live[c]) for c in ("parameters", "buffers", "gradients", "optimizer")}
        vals["activations"] = int(live["activations"]) - (loss_saved if saved_alive else 0)
        vals["temporaries"] = int(live["temporaries"]) - (logits_bytes if lg_alive else 0)
        vals["logits"] = (logits_bytes if lg_alive else 0) + (loss_saved if saved_alive else 0)
        vals["total"] = sum(int(live[c]) for c in memory.CATEGORIES)
        for c, v in vals.items():
            peak[c] = max(peak[c], v)
    return StepAnatomy(parameters=peak["parameters"], buffers=peak["buffers"],
                       gradients=peak["gradients"], optimizer=peak["optimizer"],
                       activations=peak["activations"], logits=peak["logits"],
                       temporaries=peak["temporaries"], peak_total=peak["total"], tracker=m)
