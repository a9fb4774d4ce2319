"""bookkit.blas: NumPy's BLAS thread count for a block."""
import pytest

from bookkit import blas


def test_blas_threads_restores_the_thread_count():
    found = blas._openblas()
    if found is None:
        pytest.skip("NumPy is not linked against OpenBLAS here")
    _, get_threads = found
    before = get_threads()
    with blas.blas_threads(1):
        assert get_threads() == 1
    assert get_threads() == before
