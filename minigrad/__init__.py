"""minigrad: a small NumPy autograd that accounts for every byte and recomputes exactly.

The book's reference implementation of gradient checkpointing. Names follow PyTorch:

    import minigrad
    from minigrad import nn, optim
    import minigrad.ops as F                      # the functional ops (like torch.nn.functional)
    from minigrad.checkpoint import checkpoint
    from minigrad.checkpoint import checkpoint_sequential

    with minigrad.memory.track() as m:            # the byte ledger and FLOP counter
        loss = F.mse_loss(model(x), y)
        loss.backward()
    m.peak["activations"], m.flops["backward"]

Modules, each importing only those listed before it (README's "How minigrad is built"
draws them; ``tests/test_imports.py`` checks it): `hooks` (the hook registry),
`grad_mode`, `tensor` (the engine "A tiny autograd that shows its memory" shows whole), `memory` (the ledger, an observer
of the hooks), `random`, `autograd` (torch-parity extras: ``saved_tensors_hooks``,
``grad``, ``backward(inputs=)``, ``retain_grad``), `ops`, `recompute` (the one
recomputation core: the recompute phase, RNG replay, the op record), `checkpoint`
(``checkpoint``, and the executors of plans: ``checkpoint_sequential``,
``run_schedule``), `nn`, `optim`,
`plan` (where to checkpoint: plain data and arithmetic; for a step's DAG, Checkmate's
integer program, which loads SciPy when it runs), `remat` (runs a graph schedule),
`dtr` (a byte budget kept at run time by evicting and rebuilding saved arrays), and
`viz` (plots; imported explicitly, it needs matplotlib); `testing` (answers checked as
data: the assignments' tests; NumPy only, imported explicitly). minigrad depends on NumPy only.
"""
from minigrad import tensor
from minigrad import autograd
from minigrad import memory
from minigrad import random
from minigrad import ops
from minigrad import recompute
from minigrad import checkpoint
from minigrad import nn
from minigrad import optim
from minigrad import plan
from minigrad import remat
from minigrad import dtr
from minigrad.checkpoint import CheckpointError
from minigrad.ops import (
    add, sub, mul, div, neg, matmul, linear, exp, log, tanh, relu, gelu, softmax, log_softmax,
    layer_norm, dropout, batch_norm, embedding, scaled_dot_product_attention, cross_entropy,
    mse_loss, reshape, transpose, permute, sum, mean, pow,
)
from minigrad.autograd import grad, saved_tensors_hooks
from minigrad.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from minigrad.tensor import Context, Function, Tensor, graph_nodes

__version__ = "0.1.0"
