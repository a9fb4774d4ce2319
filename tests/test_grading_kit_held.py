"""The grader's what-is-held measure (``grading.kit.bytes_held_since``) sees a stash of
activations in whatever form it is kept (buffers, and text, wide integers or floats
beyond the slack), and nothing when nothing is kept.

Each case runs in one fresh process with NumPy and the kit alone, as a graded test does:
a heap walk in a test worker that has loaded torch takes seconds."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bookpaths import ROOT

STASH_BUFFERS = {  # 384 bytes of "activations" (ACT), kept as a buffer
    "float32 copy": "a.astype(np.float32)",
    "bytes": "a.tobytes()",
    "bytearray": "bytearray(a.tobytes())",
    "int64 view": "a.view(np.int64).copy()",
    "uint8 records": "np.frombuffer(a.tobytes(), dtype=np.uint8).copy()",
    "array.array": "array.array('d', a.ravel().tolist())",
    "memoryview of bytes": "memoryview(a.tobytes())",
    "frombuffer over bytes": "np.frombuffer(a.tobytes(), dtype=np.float64)",
    "object array of bytes": "np.array([a.tobytes()], dtype=object)",
}
STASH_CARRIERS = {  # 4096 bytes of "activations" (BIG), kept in objects that are no buffer
    "base64 text": "base64.b64encode(a.tobytes()).decode()",
    "latin-1 text": "a.tobytes().decode('latin-1')",
    "hex text": "a.tobytes().hex()",
    "reprs of floats": "[repr(v) for v in a.ravel().tolist()]",
    "Python floats": "a.ravel().tolist()",
    "tuple of floats": "tuple(a.ravel().tolist())",
    "one wide integer": "int.from_bytes(a.tobytes(), 'little')",
    "complex numbers": "[complex(v, 1) for v in a.ravel().tolist()]",
    "object array of floats": "np.array(a.ravel().tolist(), dtype=object)",
}
SMALL = {  # what the grader's own window holds: under the slack, not counted
    "op names": "['linear', 'tanh', 'checkpoint'] * 20",
    "a generator's state": "np.random.default_rng(7).bit_generator.state",
    "a few floats": "[0.5, 2.0, 3.25]",
}

SCRIPT = r"""
import array, base64, json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from grading import kit
ACT = np.arange(48, dtype=np.float64).reshape(6, 8) + 0.5
BIG = np.linspace(-1, 1, 512).reshape(16, 32)
cases = json.loads(sys.argv[2])
np.random.default_rng(0).bit_generator.state  # (its first use loads NumPy's tables)
out = {}
for kind, (expr, which) in cases.items():
    a = ACT if which == "act" else BIG
    before = kit.live_float_arrays()
    stash = {"kept": [eval(expr)]}  # held until the count
    out[kind] = kit.bytes_held_since(before)
    del stash
before = kit.live_float_arrays()
y = ACT * 2
kept = [y]  # a frame's locals alone are not seen: a list holds it
scratch = ACT.tobytes().hex()  # made and dropped
del scratch
out["nothing kept, result left out"] = kit.bytes_held_since(before, y)
out["the result when not left out"] = kit.bytes_held_since(before)
out["slack"] = kit.CARRIER_SLACK_BYTES
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def held() -> dict:
    cases = {**{k: (v, "act") for k, v in STASH_BUFFERS.items()},
             **{k: (v, "big") for k, v in STASH_CARRIERS.items()},
             **{k: (v, "act") for k, v in SMALL.items()}}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT / "assignments"),
                           json.dumps(cases)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("kind", sorted(STASH_BUFFERS))
def test_a_stash_in_any_buffer_is_counted(kind, held):
    assert held[kind] >= 384 // 2, (kind, held[kind])


@pytest.mark.parametrize("kind", sorted(STASH_CARRIERS))
def test_a_stash_as_text_integers_or_floats_is_counted(kind, held):
    """Beyond the slack: a stash of 4096 bytes of activations, in any of these forms."""
    assert held[kind] >= 4096 // 2 > held["slack"], (kind, held[kind])


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_a_little_text_or_a_generators_state_counts_nothing(kind, held):
    assert held[kind] == 0, (kind, held[kind])


def test_nothing_kept_counts_nothing_and_the_results_are_left_out(held):
    assert held["nothing kept, result left out"] == 0
    assert held["the result when not left out"] == 48 * 8
