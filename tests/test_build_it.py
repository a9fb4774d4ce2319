"""bookkit.build_it: every checker passes a correct version, skips a stub with one line,
and rejects a wrong version with an AssertionError naming the case."""
from __future__ import annotations

import math

import pytest

from bookkit import build_it as B
from bookkit.yours import HandCheckpoint
from bookkit.yours import my_checkpoint_sequential as my_cs
from minigrad import Function, Tensor, enable_grad, memory, plan, saved_tensors_hooks
from minigrad.checkpoint import checkpoint_sequential
from minigrad.plan.nested import NestedSchedule, Taped


def stub(*args, **kwargs):
    raise NotImplementedError


class StubCheckpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError


class NoPhase(HandCheckpoint):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xr = Tensor(x, requires_grad=True)
        with enable_grad():
            y = ctx.run(xr)
        y.backward(g)
        gx, xr.grad = xr.grad, None
        return gx, None


def sqrt_starts(n):
    k = math.isqrt(n - 1) + 1
    q, r = divmod(n, k)
    starts, s = [], 0
    for j in range(k):
        starts.append(s)
        s += q + (1 if j < r else 0)
    return starts


def run_schedule(layers, schedule, x):
    def run(items, h):
        for it in items:
            if isinstance(it, Taped):
                h = layers[it.layer](h)
            else:
                h = HandCheckpoint.apply(h, lambda t, it=it: run(it.inner, t))
        return h
    return run(schedule.items, x)


def hook_checkpoint(fn, x):
    rebuilt, count = [], [0]

    def pack(array):
        count[0] += 1
        return count[0] - 1

    def unpack(k):
        if not rebuilt:
            xr = Tensor(x.data, requires_grad=x.requires_grad)
            with enable_grad(), memory.phase("recompute"), \
                    saved_tensors_hooks(lambda a: rebuilt.append(a) or a, lambda a: a):
                fn(xr)
        return rebuilt[k]
    with saved_tensors_hooks(pack, unpack):
        return fn(x)


def saved_bytes(batch, widths):
    # each Linear saves its input, each Tanh its output: the next Linear's input
    return 4 * batch * sum(widths[:-1])


CASES = [
    (B.check_hand_checkpoint, (HandCheckpoint,), (NoPhase,)),
    (B.check_sqrt_starts, (sqrt_starts,), (lambda n: list(range(0, n, 2)),)),
    (B.check_checkpoint_sequential, (my_cs, lambda f, h: HandCheckpoint.apply(h, f)),
     (my_cs, lambda f, h: f(h))),
    (B.check_segment_dp, (lambda pr, b: plan.optimal_segments(pr, budget_bytes=b).starts,),
     (lambda pr, b: [0],)),
    (B.check_rotor, (lambda pr, b: plan.rotor(pr, budget_bytes=b),),
     (lambda pr, b: NestedSchedule(n=pr.n, items=tuple(Taped(i) for i in range(pr.n))),)),
    (B.check_schedule_executor, (run_schedule,),
     (lambda ls, s, x: checkpoint_sequential(ls, 1, x),)),
    (B.check_hook_checkpoint, (hook_checkpoint,), (lambda f, x: f(x),)),
    (B.check_saved_bytes, (saved_bytes,), (lambda b, w: 4 * b * sum(w),)),
    (B.check_backward, (lambda loss: loss.backward(),), (lambda loss: None,)),
]


@pytest.mark.parametrize("check, good, bad", CASES, ids=[c[0].__name__ for c in CASES])
def test_checker(check, good, bad, capsys):
    check(*good)
    assert "agree with minigrad" in capsys.readouterr().out
    stubbed = (StubCheckpoint if isinstance(good[0], type) else stub,) + good[1:]
    check(*stubbed)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "check skipped" in out
    with pytest.raises(AssertionError):
        check(*bad)
