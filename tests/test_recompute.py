"""The recomputation core: `replay_op` runs a recorded op again as it first ran, and says
so when it cannot; the executors that rebuild single ops (remat.run, DTR) go through it."""
import inspect

import numpy as np
import pytest

import minigrad
from minigrad import Tensor, memory
from minigrad import random as mrandom
from minigrad.ops import BatchNorm, Dropout, Exp
from minigrad.recompute import OpRecord, is_recomputing, replay_op, rng_state, values_digest


def _dropout_record(x):
    """Run dropout once and record it as DTR does: the random state before and after."""
    rec = OpRecord(0, Dropout)
    rec.kwargs = {}
    before = rng_state()
    first = Dropout.apply(x, 0.5, None)
    rec.rng_state, rec.rng_after = before, rng_state()
    rec.out_meta = (first.shape, first.dtype)
    rec.saved_meta = [((4, 8), np.dtype(bool))]
    return rec, first


def test_a_random_op_replays_bit_identically_and_leaves_the_callers_state():
    mrandom.manual_seed(0)
    x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    rec, first = _dropout_record(x)
    after_first = rng_state()
    out, saved = replay_op(rec, [x, 0.5, None], "replaying dropout")
    assert np.array_equal(out.data, first.data)
    assert [a.dtype for a in saved] == [np.dtype(bool)]  # the mask, handed back
    assert rng_state() == after_first  # the caller's stream is untouched


def test_a_replay_from_another_random_state_is_refused():
    mrandom.manual_seed(0)
    x = Tensor(np.ones((4, 8), np.float32), requires_grad=True)
    rec, _ = _dropout_record(x)
    mrandom.manual_seed(1)
    rec.rng_state = rng_state()  # as if something drew between the ops
    with pytest.raises(RuntimeError, match="replaying dropout did not draw the same random"):
        replay_op(rec, [x, 0.5, None], "replaying dropout")


def test_a_replay_that_makes_other_arrays_is_refused():
    rec = OpRecord(0, Exp)
    rec.out_meta, rec.saved_meta = ((2,), np.dtype(np.float32)), [((2,), np.dtype(np.float32))]
    replay_op(rec, [Tensor(np.zeros(2, np.float32), requires_grad=True)], "exp")  # fine
    with pytest.raises(RuntimeError, match=r"exp made different arrays .*output \(\(2,\).*then \(\(3,\)"):
        replay_op(rec, [Tensor(np.zeros(3, np.float32), requires_grad=True)], "exp")


def test_a_replay_is_a_recomputation_and_copies_numpy_arguments():
    rec = OpRecord(0, Exp)
    with memory.track() as m:
        out, _ = replay_op(rec, [Tensor(np.zeros(4, np.float32))], "exp")
    assert not is_recomputing()  # only while it runs
    assert m.flops["recompute"] > 0 and m.flops["forward"] == 0
    running = np.zeros(3, np.float32)
    bn = OpRecord(0, BatchNorm)
    bn.kwargs = dict(training=True, momentum=0.5, eps=1e-5, update_stats=True)
    before = running.copy()
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    replay_op(bn, [x, None, None, running, np.ones(3, np.float32)], "batch norm")
    assert np.array_equal(running, before)  # the step's running statistics are not moved


def test_values_digest_sees_values_shapes_and_dtypes():
    a = np.arange(4, dtype=np.float32)
    assert values_digest([a]) == values_digest([a.copy()])
    assert values_digest([a]) != values_digest([a.reshape(2, 2)])
    assert values_digest([a]) != values_digest([a.astype(np.float64)])
    b = a.copy()
    b[3] += 1
    assert values_digest([a]) != values_digest([b])


def test_the_executors_that_rebuild_ops_go_through_the_core():
    import minigrad.dtr as dtr
    import minigrad.remat as remat

    for module in (dtr, remat):
        source = inspect.getsource(module)
        assert "replay_op(" in source and "values_digest(" in source, module.__name__
        assert ".apply(*args" not in source, module.__name__  # no replay of their own
        assert "zlib" not in source, module.__name__  # one checksum
    assert issubclass(dtr._Op, OpRecord)
