"""bookkit.jaxmem: JAX's residuals as records, and FLOPs of a gradient program."""
from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from bookkit import jaxmem  # noqa: E402
from bookkit.jaxmem import Residual  # noqa: E402


@pytest.mark.parametrize("line, expected", [
    ("f32[8,4096] output of max from /tmp/ipykernel_1/2.py:3:4 (block)",
     Residual((8, 4096), "f32", 8 * 4096 * 4, "output of max")),
    ("bool[8,4096] output of gt from /x.py:1:2 (f)", Residual((8, 4096), "bool", 8 * 4096, "output of gt")),
    ("bf16[3] named 'pre' from /x.py:1:2 (f)", Residual((3,), "bf16", 6, "named 'pre'")),
    ("f32[8,1024] from the argument params[0][2]",
     Residual((8, 1024), "f32", 8 * 1024 * 4, "from the argument params[0][2]")),
    ("f64[] from a constant", Residual((), "f64", 8, "from a constant")),
])
def test_lines_are_parsed_without_source_locations(line, expected):
    assert jaxmem._parse(line) == expected


def test_unparseable_lines_and_dtypes_raise_clear_errors():
    with pytest.raises(ValueError, match="cannot parse"):
        jaxmem._parse("something else entirely")
    with pytest.raises(ValueError, match="unknown dtype"):
        jaxmem._parse("f3[2] output of x")


def _mlp(params, x, policy=None):
    def block(p, h):
        w1, w2 = p
        return jnp.maximum(h @ w1, 0.0) @ w2
    f = block if policy is None else jax.checkpoint(block, policy=policy)
    for p in params:
        x = f(p, x)
    return jnp.mean(x * x)


@pytest.fixture
def model():
    params = [(jnp.ones((16, 64)), jnp.ones((64, 16))) for _ in range(3)]
    return params, jnp.ones((4, 16))


def test_residuals_per_policy(model):
    params, x = model
    plain = jaxmem.activation_residuals(jaxmem.saved_residuals(_mlp, params, x))
    # per block: input (4x16), ReLU output and maximum's derivative (4x64 each); + the loss's input
    assert jaxmem.totals(plain) == (3 * 3 + 1, 4 * 4 * (3 * 16 + 6 * 64 + 16))
    nothing = jaxmem.activation_residuals(jaxmem.saved_residuals(
        lambda params, x: _mlp(params, x, jax.checkpoint_policies.nothing_saveable), params, x))
    assert jaxmem.totals(nothing) == (4, 4 * 4 * 4 * 16)
    assert all(r.what.startswith(("from the argument x", "output of")) for r in nothing)
    everything = jaxmem.saved_residuals(_mlp, params, x)
    assert len(everything) - len(plain) == 6  # the six weight matrices are the parameters


def test_dot_flops_counts_products_and_recomputation(model):
    params, x = model
    forward = jaxmem.dot_flops(jax.make_jaxpr(lambda p: _mlp(p, x))(params))
    assert forward == 3 * 2 * (2 * 4 * 16 * 64)
    plain = jaxmem.dot_flops(jax.make_jaxpr(jax.grad(lambda p: _mlp(p, x)))(params))
    remat = jaxmem.dot_flops(jax.make_jaxpr(jax.grad(
        lambda p: _mlp(p, x, jax.checkpoint_policies.nothing_saveable)))(params))
    # backward: a weight gradient for all 6 products, an input gradient for 5 of them
    assert plain == forward + 11 * (2 * 4 * 16 * 64)
    assert remat == plain + 3 * (2 * 4 * 16 * 64)  # each block's first product, again
