"""minigrad.testing: answers as data. canonical() accepts exactly plain data; judge() takes
everything that decides from the reference's record; assert_answer asserts in a notebook
and records under the grader."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minigrad import testing
from minigrad.testing import REFERENCE, AnswerError, assert_answer, canonical, compare, judge, recording

plain = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)
arrays = hnp.arrays(st.sampled_from([np.float32, np.float64, np.int64, np.bool_]),
                    hnp.array_shapes(max_dims=3, max_side=4))


@given(plain)
def test_plain_data_equals_itself(value):
    assert compare(canonical(value), canonical(value)) == ""


@given(arrays)
def test_arrays_round_trip_bit_for_bit(a):
    c = canonical(a)
    back = testing._array(c["__ndarray__"])
    assert back.dtype == a.dtype and back.shape == a.shape and back.tobytes() == a.tobytes()
    assert compare(c, canonical(a.copy())) == ""


@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=4),
                  elements=st.floats(-1e3, 1e3, width=32)))
def test_one_changed_value_is_found(a):
    b = a.copy()
    b.flat[0] = b.flat[0] + np.float32(1)
    assert "differ" in compare(canonical(b), canonical(a))


class AlwaysEqual:
    def __eq__(self, other):
        return True


class EqualFloat(float):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [AlwaysEqual(), EqualFloat(1.0), np.zeros(2).view(np.matrix),
                                   {1: 2}, np.array(["a"]), object(), np.zeros(2, dtype=object)])
def test_anything_but_plain_data_is_no_answer(value):
    with pytest.raises(AnswerError):
        canonical(value)


def test_types_dtypes_and_shapes_count():
    assert compare(canonical(np.float32(1)), canonical(1.0)) == ""  # a NumPy scalar is its value
    assert compare(canonical(1), canonical(1.0)) == "int instead of float"
    assert "dtype" in compare(canonical(np.ones(2, np.float64)), canonical(np.ones(2, np.float32)))
    assert "shape" in compare(canonical(np.ones((2, 1))), canonical(np.ones(2)))
    assert compare(canonical([1, 2]), canonical((1, 2))) == ""  # tuples are lists
    assert compare(canonical(float("nan")), canonical(float("nan"))) == ""


def test_close_uses_the_tolerances():
    w, g = canonical(np.array([1.0, 2.0])), canonical(np.array([1.0, 2.0 + 1e-7]))
    assert compare(g, w, "close", rtol=1e-6) == "" and compare(g, w, "equal") != ""
    assert compare(g, w, "close", rtol=1e-9) != ""
    with pytest.raises(ValueError, match="compare must be one of"):
        compare(g, w, "roughly")


def test_the_judge_takes_rules_and_keys_from_the_reference():
    with recording() as ref:
        assert_answer("a", np.ones(2), np.ones(2), msg="the ones")
        assert_answer("b", 1.0, REFERENCE, compare="close", rtol=0.1, msg="about one")
    with recording() as lax:  # the student's own rules and messages are ignored
        assert_answer("a", np.zeros(2), np.zeros(2), compare="close", atol=10.0, msg="mine")
        assert_answer("b", 1.05, 1.05, msg="mine")
    assert judge(lax.answers, ref.answers).startswith("the ones: 2 of 2 values differ")
    with recording() as good:
        assert_answer("a", np.ones(2), None)
        assert_answer("b", 1.05, None)
    assert judge(good.answers, ref.answers) == ""
    assert judge(good.answers[:1], ref.answers) == "about one: no answer was given"
    assert judge(good.answers + [{"key": "c", "value": 1}], ref.answers).startswith("answers the reference")
    with recording() as odd:
        assert_answer("a", AlwaysEqual(), None)
        assert_answer("b", 1.05, None)
    assert "cannot be graded" in judge(odd.answers, ref.answers)


def test_in_a_notebook_assert_answer_asserts():
    assert_answer("n", 3, 3)
    assert_answer("n", 3, REFERENCE)  # nothing to compare with outside the grader
    with pytest.raises(AssertionError, match="^three: 4 instead of 3$"):
        assert_answer("n", 4, 3, msg="three")
    with pytest.raises(AssertionError, match="cannot be graded"):
        assert_answer("n", AlwaysEqual(), 3)
