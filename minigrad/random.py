"""minigrad's random numbers: one seedable generator for initialisation and dropout.

Mirrors ``torch.manual_seed`` / ``torch.get_rng_state`` / ``torch.set_rng_state``.
The state is a plain dict (NumPy's PCG64 state), so a checkpoint can save it
before a segment's forward and restore it before the recomputation: the
recomputed dropout masks are then the same bits as the original ones.
"""
from __future__ import annotations

import copy
import weakref
from contextlib import contextmanager

import numpy as np

__all__ = ["Generator", "default_generator", "manual_seed", "get_rng_state",
           "set_rng_state", "fork_rng", "rand", "randn", "uniform", "randint",
           "live_generators"]

_LIVE: "weakref.WeakSet[Generator]" = weakref.WeakSet()  # every Generator not yet freed


class Generator:
    """A seedable source of random arrays (wraps ``numpy.random.Generator(PCG64)``).

    Example:
        >>> g = Generator(0)
        >>> g.normal(0.0, 1.0, (2, 3)).shape
        (2, 3)
    """

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        _LIVE.add(self)  # here, not in __init__: a copy (copy.deepcopy, pickle) is seen too
        return self

    def __init__(self, seed: int = 0):
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> "Generator":
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"manual_seed: seed must be a non-negative integer, got {seed!r}")
        self._gen = np.random.Generator(np.random.PCG64(int(seed)))
        return self

    def get_state(self) -> dict:
        """A copy of the generator's state (a dict); pass it to `set_state` to replay."""
        return copy.deepcopy(self._gen.bit_generator.state)

    def set_state(self, state: dict) -> None:
        if not isinstance(state, dict) or "state" not in state:
            raise ValueError("set_state: expected a state dict returned by get_state()")
        self._gen.bit_generator.state = copy.deepcopy(state)

    # --- draws (dtype is preserved: float32 draws are made in float32) -------------
    def random(self, shape, dtype=np.float64) -> np.ndarray:
        """Uniform [0, 1) samples of ``shape``."""
        return self._gen.random(shape, dtype=dtype)

    def uniform(self, low, high, shape, dtype=np.float32) -> np.ndarray:
        """Uniform [low, high) samples, drawn in float64 and cast to ``dtype``."""
        return self._gen.uniform(low, high, shape).astype(dtype, copy=False)

    def normal(self, mean, std, shape, dtype=np.float32) -> np.ndarray:
        return (self._gen.standard_normal(shape) * std + mean).astype(dtype, copy=False)

    def integers(self, low, high, shape) -> np.ndarray:
        return self._gen.integers(low, high, shape, dtype=np.int64)


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (like ``torch.manual_seed``); returns it.

    Raises:
        ValueError: ``seed`` is not a non-negative integer.

    Example:
        >>> g = manual_seed(0)      # the default generator, reseeded
    """
    return default_generator.manual_seed(seed)



def get_rng_state() -> dict:
    """The default generator's state (a copy, a dict); `set_rng_state` replays it.

    Example:
        >>> state = get_rng_state(); a = rand(3); set_rng_state(state); b = rand(3)  # a == b
    """
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    """Restore the default generator's state (a dict from `get_rng_state`).

    Raises:
        ValueError: not a state dict.
    """
    default_generator.set_state(state)


@contextmanager
def fork_rng():
    """Context manager: run a block, then put the default generator back where it was.

    Example:
        >>> with fork_rng():
        ...     noise = randn(4)      # the global stream is not advanced
    """
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def rand(*shape, dtype=np.float32):
    """Uniform [0, 1) array of ``shape`` from the default generator.

    Example:
        >>> rand(2, 3).shape
        (2, 3)
    """
    return default_generator.random(shape, dtype=dtype)


def randn(*shape, dtype=np.float32):
    """Standard normal array of ``shape`` from the default generator (float32 by default).

    Example:
        >>> randn(2, 3).dtype
        dtype('float32')
    """
    return default_generator.normal(0.0, 1.0, shape, dtype=dtype)


def uniform(low, high, shape, dtype=np.float32):
    """Uniform [low, high) array of ``shape`` from the default generator.

    Example:
        >>> u = uniform(-1.0, 1.0, (4,))
        >>> u.dtype, bool(((-1.0 <= u) & (u < 1.0)).all())
        (dtype('float32'), True)
    """
    return default_generator.uniform(low, high, shape, dtype=dtype)


def randint(low, high, shape):
    """Integers in [low, high) (int64) of ``shape`` from the default generator.

    Example:
        >>> randint(0, 10, (2, 5)).dtype
        dtype('int64')
    """
    return default_generator.integers(low, high, shape)


def live_generators() -> list:
    """Every `Generator` alive now, the default one included (what a dry run must put
    back as it found it: `minigrad.plan.trace_graph`).

    Example:
        >>> g = Generator(3)
        >>> g in live_generators() and default_generator in live_generators()
        True
    """
    return list(_LIVE)
