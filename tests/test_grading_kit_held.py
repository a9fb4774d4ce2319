"""The grader's what-is-held measure (``grading.kit.bytes_held_since``) sees a stash of
activations in whatever form it is kept, and nothing when nothing is kept."""
from __future__ import annotations

import array
import sys

import numpy as np
import pytest
from bookpaths import ROOT

sys.path.insert(0, str(ROOT / "assignments"))
from grading import kit

ACT = np.arange(48, dtype=np.float64).reshape(6, 8)  # 384 bytes of "activations"

STASHES = {
    "float32 copy": lambda a: a.astype(np.float32),
    "bytes": lambda a: a.tobytes(),
    "bytearray": lambda a: bytearray(a.tobytes()),
    "int64 view": lambda a: a.view(np.int64).copy(),
    "uint8 records": lambda a: np.frombuffer(a.tobytes(), dtype=np.uint8).copy(),
    "array.array": lambda a: array.array("d", a.ravel().tolist()),
    "memoryview of bytes": lambda a: memoryview(a.tobytes()),
    "frombuffer over bytes": lambda a: np.frombuffer(a.tobytes(), dtype=np.float64),
    "object array of bytes": lambda a: np.array([a.tobytes()], dtype=object),
}


@pytest.mark.parametrize("kind", sorted(STASHES))
def test_a_stash_in_any_form_is_counted(kind):
    before = kit.live_float_arrays()
    stash = {"kept": [STASHES[kind](ACT)]}  # noqa: F841 (held until the count)
    held = kit.bytes_held_since(before)
    assert held >= ACT.nbytes // 2, (kind, held)


def test_nothing_kept_counts_nothing_and_the_results_are_left_out():
    before = kit.live_float_arrays()
    y = ACT * 2
    kept = [y]  # a frame's locals alone are not seen: a list holds it
    scratch = ACT.tobytes()  # made and dropped
    del scratch
    assert kit.bytes_held_since(before, y) == 0
    assert kit.bytes_held_since(before) == y.nbytes
    assert kept[0] is y
