"""Which cases of an exhaustive parametrization run in the quick loop.

`make unit` skips tests marked ``slow``; `make test` runs every case exactly once. A grid
or a range of seeds keeps a spread of its cases in the quick loop and marks the rest
``slow``, so a change that breaks the claim usually fails within seconds and always
fails in `make test`.
"""
from __future__ import annotations

import pytest
from _pytest.mark.structures import ParameterSet

SLOW = pytest.mark.slow


def fast_every(cases, every: int) -> list:
    """``cases`` for ``pytest.mark.parametrize``, case ``i`` marked ``slow`` unless
    ``i % every == 0``.

    Args:
        cases: the parametrization's values; a tuple is one case of several arguments,
            a ``pytest.param`` keeps its id and marks.
        every: one case in ``every`` stays in the quick loop (the first always does).

    Returns:
        The cases as ``pytest.param`` where marked, in the same order.

    Example:
        >>> import pytest
        >>> from marks import fast_every
        >>> [c.marks[0].name for c in fast_every(range(3), 2)[1:2]]
        ['slow']
    """
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an integer >= 1, got {every!r}")
    out = []
    for i, case in enumerate(cases):
        if i % every == 0:
            out.append(case)
        elif isinstance(case, ParameterSet):
            out.append(pytest.param(*case.values, marks=[*case.marks, SLOW], id=case.id))
        elif isinstance(case, tuple):
            out.append(pytest.param(*case, marks=SLOW))
        else:
            out.append(pytest.param(case, marks=SLOW))
    return out
