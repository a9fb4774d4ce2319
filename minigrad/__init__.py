"""minigrad: a small NumPy autograd that accounts for every byte and recomputes exactly.

The book's reference implementation of gradient checkpointing. Names follow PyTorch:

    import minigrad
    from minigrad import nn, optim
    import minigrad.ops as F                      # the functional ops (like torch.nn.functional)
    from minigrad.checkpoint import checkpoint, checkpoint_sequential

    with minigrad.memory.track() as m:            # the byte ledger
        loss = F.mse_loss(model(x), y)
        loss.backward()
    m.peak["activations"]

Modules: `tensor` (the engine), `ops`, `memory`, `random`, `nn`, `optim`,
`checkpoint`, `plan` and `multilevel` (where to checkpoint), `viz` (plots;
imported explicitly, it needs matplotlib). minigrad depends on NumPy only.
"""
from minigrad import memory, random
from minigrad.tensor import (Context, Function, Tensor, enable_grad, graph_nodes, is_grad_enabled,
                             no_grad)
from minigrad import ops
from minigrad.ops import (
    add, sub, mul, div, neg, matmul, linear, exp, log, tanh, relu, gelu, softmax, log_softmax,
    layer_norm, dropout, batch_norm, embedding, scaled_dot_product_attention, cross_entropy,
    mse_loss, reshape, transpose, permute, sum, mean, pow,
)
from minigrad import checkpoint
from minigrad.checkpoint import CheckpointError

__version__ = "0.1.0"


def __getattr__(name):
    # nn and optim load on first use (minigrad.nn, minigrad.optim), like plan and viz.
    import importlib
    if name in ("nn", "optim", "plan", "multilevel"):
        return importlib.import_module(f"minigrad.{name}")
    raise AttributeError(f"module 'minigrad' has no attribute {name!r}")
