"""bookkit.schedule_comparison: Revolve, the one-level and the nested optimum at Revolve's
measured peak (chapters 5 and 6)."""
from minigrad import plan
from bookkit.schedule_comparison import compare_at_revolve_peak


def test_every_case_is_measured_and_the_nested_optimum_never_loses():
    cases = compare_at_revolve_peak(n_max=7, nested=True)
    assert [(c.n, c.slots) for c in cases] == [(n, s) for n in range(2, 8) for s in range(1, n)]
    for c in cases:
        # Revolve recomputes every layer call beyond the first forward pass
        assert c.revolve == plan.revolve(c.n, c.slots).n_layer_calls - c.n
        assert c.nested <= c.revolve
        if c.one_level is not None:
            assert c.nested <= c.one_level
    assert any(c.one_level is not None and c.one_level < c.revolve for c in cases)
    assert any(c.one_level is None for c in cases)


def test_without_nested_the_column_is_empty():
    assert all(c.nested is None for c in compare_at_revolve_peak(n_max=3))
