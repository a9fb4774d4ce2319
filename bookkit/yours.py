"""Part I's build-it pieces, as the book solves them, for the chapters that build on them.

"Dropping and rebuilding" has the reader write `HandCheckpoint`; "The square-root trick"
passes it to the reader's `my_checkpoint_sequential`; "Choosing where to checkpoint" runs
its plans with that; "Beyond one level" nests it. Each later chapter imports the book's
solution from here, and says so: paste your own version in its place and the chapter runs on
your code. `bookkit.build_it` checks every piece against minigrad.

Example:
    >>> from bookkit.yours import HandCheckpoint, my_checkpoint_sequential
    >>> hand = lambda fn, h: HandCheckpoint.apply(h, fn)
    >>> # y = my_checkpoint_sequential(layers, [0, 3, 6], x, hand)
"""
from __future__ import annotations

from minigrad import Function, Tensor, enable_grad, memory, no_grad

__all__ = ["HandCheckpoint", "my_checkpoint_sequential"]


class HandCheckpoint(Function):
    """The checkpoint of "Dropping and rebuilding" by hand: run ``fn`` on ``x`` keeping only
    ``x``; rebuild ``fn``'s graph in backward. Apply as ``HandCheckpoint.apply(x, fn)``."""

    @staticmethod
    def forward(ctx, x, fn):
        # no graph inside: nothing is saved, intermediate outputs die at once
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)  # the checkpoint: the segment's input only
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xr = Tensor(x, requires_grad=True)  # shares the checkpoint's memory
        with enable_grad(), memory.phase("recompute"):
            y = ctx.run(xr)  # rebuild: the segment's ops save again
        y.backward(g)
        gx, xr.grad = xr.grad, None
        return gx, None


def my_checkpoint_sequential(layers, starts, x, checkpoint_fn):
    """The ``checkpoint_sequential`` of "The square-root trick": run ``layers`` on ``x``,
    every segment but the last through ``checkpoint_fn(segment, h)``; ``starts``: the
    segments' first layers, from 0."""
    bounds = list(starts) + [len(layers)]

    def segment(a, b):  # layers a .. b-1 as one function
        def run(h):
            for layer in layers[a:b]:
                h = layer(h)
            return h

        return run

    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = checkpoint_fn(segment(a, b), h)  # keeps h, drops the inside
    return segment(bounds[-2], bounds[-1])(h)  # the last segment: kept
