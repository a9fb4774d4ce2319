"""bookkit.fitting: the exponent of a power law (chapters 1 and 4)."""
import numpy as np
import pytest

from bookkit.fitting import loglog_slope


@pytest.mark.parametrize("power", [0.5, 1.0, 2.0])
def test_loglog_slope_recovers_the_exponent(power):
    xs = np.array([2.0, 4.0, 16.0, 100.0])
    assert loglog_slope(xs, 3.0 * xs ** power) == pytest.approx(power, abs=1e-12)


def test_loglog_slope_rejects_bad_input():
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1, 2], [0, 1])
    with pytest.raises(ValueError, match="equal length"):
        loglog_slope([1, 2, 3], [1, 2])
