"""bookkit.rounded and bookkit.bound: the two helpers of the portability convention."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bookkit import bound, rounded


def test_rounded_formats_a_value_far_from_a_boundary():
    assert rounded(0.059860832989, ".4g") == "0.05986"
    assert rounded(np.float32(0.22058868), ".3g") == "0.221"
    assert rounded(0.9999999999999993, ".2f") == "1.00"
    assert rounded(1.0000000000000004, ".2f") == "1.00"
    assert rounded(-1e-17, ".2f", abs_err=1e-12) == "0.00"      # never "-0.00"


def test_rounded_refuses_digits_that_another_cpu_may_change():
    with pytest.raises(ValueError, match="rounding boundary of '.4g'"):
        rounded(0.9806511402130127, ".4g")                    # 1.1e-6 from 0.98065
    assert rounded(0.9806511402130127, ".3g") == "0.981"
    with pytest.raises(ValueError, match="rounding boundary"):
        rounded(0.125, ".2f", abs_err=1e-9)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.5", None, True])
def test_rounded_rejects_what_has_no_digits(bad):
    with pytest.raises((TypeError, ValueError)):
        rounded(bad, ".3g")


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
       st.sampled_from([".4g", ".3g", ".2f", ".1e"]))
def test_rounded_is_stable_within_its_error(value, spec):
    """Whatever it returns, every value within the error formats the same way."""
    try:
        shown = rounded(value, spec, rel_err=1e-5)
    except ValueError:
        return
    for v in (value * (1 - 1e-5), value * (1 + 1e-5)):
        other = format(v + 0.0, spec)
        assert other == shown or other.lstrip("-") == shown


def test_bound_asserts_and_returns_the_limit():
    assert bound(8.2e-07, 1e-6) == "1e-6"
    assert bound(np.float64(-3e-10), 1e-8) == "1e-8"
    assert bound(0.0, 0.05) == "0.05"
    assert bound(1e-6, 0.1 * 1e-4) == "1e-5"
    with pytest.raises(AssertionError, match="not below"):
        bound(2e-6, 1e-6)
    with pytest.raises(ValueError):
        bound(0.0, 0.0)
