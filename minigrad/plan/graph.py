"""The graph a training step really has: a `GraphProfile` traced by one dry run.

A chain profile (`ChainProfile`) sees layers in a row. A real step is a DAG: residual adds
use a tensor twice, attention reads one ``qkv`` array three times, a U-Net's decoder reads
the encoder's outputs. `trace_graph` records one step op by op, through the engine's
public hook points (a pack hook that sees every saved array, an op observer) and the
ledger's public functions (``memory.track`` for FLOPs, ``memory.base_buffer`` and
``memory.category`` for what a buffer is), and returns plain numbers:

* forward node ``i`` (one per op, in execution order): the op's output and the arrays only
  it can make (a dropout mask, a normalised input: its *private* saved arrays); its value
  is ``value_bytes[i]`` bytes and costs ``flops[i]`` to compute;
* backward node ``b`` (one per graph node, in the order the engine runs them): reads the
  gradients the backward nodes of its op's users produced and the values its op saved;
  its value is the gradients it returns (``value_bytes``), its cost the backward FLOPs.

``deps[v]`` lists the nodes whose values node ``v`` reads: data dependencies, residual
adds and attention's fan-out included. The planner (`minigrad.plan.checkmate`) sees only
these numbers; the executor (`minigrad.remat`) runs a plan on the real step.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np

from minigrad import memory
from minigrad import random as _random
from minigrad.recompute import StepRecorder
from minigrad.grad_mode import enable_grad
from minigrad.hooks import dry_run
from minigrad.tensor import Context, Function, Tensor, graph_nodes

__all__ = ["GraphProfile", "trace_graph", "chain_graph"]


@dataclass(frozen=True)
class GraphProfile:
    """A training step as a DAG of values (plain data; see the module docstring).

    Attributes:
        names: one name per node: forward op names, then ``"<op>.bwd"`` backward nodes.
        n_forward: the number of forward nodes (they come first).
        deps: for each node, the nodes whose values it reads (all earlier nodes).
        value_bytes: bytes of each node's value (Checkmate's memory model: an op's output
            plus its private saved arrays; a backward node's gradients). An output that
            is a view of an earlier node's buffer owns no bytes (``out_buffer``): every
            reader of a view also reads that node, and a kept view keeps it.
        flops: the cost of computing each node (forward or backward FLOPs, the ledger's).
        const_bytes: saved arrays no op made (the step's inputs), live all step long.
        backward_of: for each backward node, the forward node whose backward it is.
        out_buffer: for each forward node, the forward node that made its output's
            buffer (itself, or an earlier node when the output is a view).
        buffer_bytes: for each forward node, the bytes of the buffer it made (0 for a view).
        private_bytes: for each forward node, the bytes of its private saved arrays.
        const_slots: ``(buffer, bytes, forward node)`` for each input buffer an op saves
            (``buffer`` numbers the distinct buffers), for the ledger's model.
        out_shapes: for each forward node, ``(shape, dtype name)`` of its output, as
            traced (empty for graphs built by hand); `minigrad.remat.run` checks them.
    """

    names: tuple
    n_forward: int
    deps: tuple
    value_bytes: tuple
    flops: tuple
    const_bytes: int = 0
    backward_of: tuple = ()
    out_buffer: tuple = ()
    buffer_bytes: tuple = ()
    private_bytes: tuple = ()
    const_slots: tuple = ()
    out_shapes: tuple = ()

    def __post_init__(self):
        n = len(self.names)
        for name in ("deps", "value_bytes", "flops"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"GraphProfile: {name} has {len(getattr(self, name))} entries "
                                 f"for {n} nodes")
        if not 0 <= self.n_forward <= n:
            raise ValueError(f"GraphProfile: n_forward={self.n_forward} for {n} nodes")
        for v, ds in enumerate(self.deps):
            for i in ds:
                if not 0 <= i < v:
                    raise ValueError(f"GraphProfile: node {v} ({self.names[v]}) reads node {i}; "
                                     f"nodes must be listed in a topological order (deps earlier)")
        for name in ("value_bytes", "flops"):
            for v, b in enumerate(getattr(self, name)):
                if isinstance(b, bool) or not isinstance(b, numbers.Integral) or b < 0:
                    raise ValueError(f"GraphProfile: {name}[{v}] = {b!r} is not a whole, "
                                     f"non-negative number")
        if self.backward_of and len(self.backward_of) != n - self.n_forward:
            raise ValueError("GraphProfile: backward_of needs one entry per backward node")

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    def users(self) -> list:
        """For each node, the nodes that read its value."""
        out = [[] for _ in self.names]
        for v, ds in enumerate(self.deps):
            for i in ds:
                out[i].append(v)
        return out

    def without_gradients(self) -> "GraphProfile":
        """The same graph with the backward nodes' values at 0 bytes: a memory model
        closer to the ledger's ``activations``, which never counts gradients. It still
        counts every forward value while it is live (the ledger counts only saved ones),
        so a schedule planned on it keeps the ledger's activations within its budget too.

        Example:
            >>> from minigrad.plan import remat
            >>> g = chain_graph([4, 8, 4, 8], [1, 2, 3, 4])
            >>> remat(g, 24).recompute_flops, remat(g.without_gradients(), 24).recompute_flops
            (3, 0)
        """
        nf = self.n_forward
        return replace(self, value_bytes=self.value_bytes[:nf] + (0,) * (self.n_nodes - nf))

    def chain_view(self) -> "GraphProfile":
        """What a chain planner sees: the forward ops in a row, op ``i`` reading only op
        ``i - 1``, and each backward node reading the gradient of the one before, plus its
        op's value and its op's input where the real backward reads them (as a
        `ChainProfile`'s ``saves_output`` and ``saves_input``); same bytes and FLOPs. Plans priced on it ignore the
        residual and skip edges that keep values alive and force recomputation further back.

        Example:
            >>> from minigrad.plan import keeping
            >>> g = chain_graph([4, 8, 4, 8], [1, 2, 3, 4])   # a chain: its own view
            >>> keeping(g.chain_view(), [1]).recompute_flops, keeping(g, [1]).recompute_flops
            (12, 12)
        """
        nf = self.n_forward
        grad = [0] * nf
        back_flops = [0] * nf
        reads_own, reads_input = [False] * nf, [False] * nf
        for k, j in enumerate(self.backward_of):
            grad[j] += self.value_bytes[nf + k]
            back_flops[j] += self.flops[nf + k]
            for i in self.deps[nf + k]:
                if i == j:
                    reads_own[j] = True
                elif i < nf and i != self.out_buffer[j]:
                    reads_input[j] = True
        names = list(self.names[:nf]) + [f"{self.names[i]}.bwd" for i in reversed(range(nf))]
        deps = [((i - 1,) if i else ()) for i in range(nf)]
        for k, i in enumerate(reversed(range(nf))):
            d = ([nf + k - 1] if k else []) + ([i] if reads_own[i] else [])
            d += [i - 1] if i and reads_input[i] else []
            deps.append(tuple(sorted(d)))
        return GraphProfile(names=tuple(names), n_forward=nf, deps=tuple(deps),
                            value_bytes=tuple(self.value_bytes[:nf]) + tuple(reversed(grad)),
                            flops=tuple(self.flops[:nf]) + tuple(reversed(back_flops)),
                            const_bytes=self.const_bytes,
                            backward_of=tuple(reversed(range(nf))), out_buffer=tuple(range(nf)),
                            buffer_bytes=tuple(self.value_bytes[:nf]),
                            private_bytes=(0,) * nf)

    @property
    def forward_flops(self) -> int:
        return int(sum(self.flops[: self.n_forward]))

    @property
    def backward_flops(self) -> int:
        return int(sum(self.flops[self.n_forward:]))


def chain_graph(value_bytes, flops, grad_bytes=None, saves_input=True) -> GraphProfile:
    """A `GraphProfile` of a chain of ``n`` ops written by hand (for tests and exercises).

    Forward node ``i`` reads node ``i - 1``; backward node ``b_i`` (run from the last op
    down) reads the gradient of ``b_{i+1}``, op ``i``'s own value, and op ``i - 1``'s value
    when ``saves_input`` (like ``y = f(x)`` keeping ``x``).

    Args:
        value_bytes: bytes of each op's value.
        flops: forward cost of each op (backward costs are set to twice that).
        grad_bytes: bytes of each backward node's gradient (default: its input's bytes).
        saves_input: whether op ``i``'s backward reads its input's value.

    Example:
        >>> g = chain_graph([4, 8, 4], [1, 1, 1])
        >>> g.names
        ('op0', 'op1', 'op2', 'op2.bwd', 'op1.bwd', 'op0.bwd')
    """
    n = len(value_bytes)
    if len(flops) != n:
        raise ValueError(f"chain_graph: {len(flops)} costs for {n} ops")
    grad_bytes = list(value_bytes) if grad_bytes is None else list(grad_bytes)
    names = [f"op{i}" for i in range(n)] + [f"op{i}.bwd" for i in reversed(range(n))]
    deps = [((i - 1,) if i else ()) for i in range(n)]
    vb, fl = list(value_bytes), list(flops)
    for k, i in enumerate(reversed(range(n))):
        d = [] if k == 0 else [n + k - 1]
        d.append(i)
        if saves_input and i:
            d.append(i - 1)
        deps.append(tuple(sorted(d)))
        vb.append(int(grad_bytes[i]))
        fl.append(2 * int(flops[i]))
    return GraphProfile(names=tuple(names), n_forward=n, deps=tuple(deps),
                        value_bytes=tuple(int(b) for b in vb), flops=tuple(int(f) for f in fl),
                        backward_of=tuple(reversed(range(n))), out_buffer=tuple(range(n)),
                        buffer_bytes=tuple(int(b) for b in value_bytes),
                        private_bytes=(0,) * n)


def _with_roots(deps, out_buffer, v):
    """``deps`` plus the node that made each view's buffer (never ``v`` itself)."""
    d = set(deps)
    d |= {out_buffer[i] for i in deps if i < len(out_buffer)}
    d.discard(v)
    return tuple(sorted(d))


def _unique_bytes(arrays):
    seen = {}
    for a in arrays:
        b = memory.base_buffer(a)
        seen[id(b)] = int(b.nbytes)
    return sum(seen.values())


def trace_graph(step, *inputs, free_ops=()) -> GraphProfile:
    """Trace one training step of a minigrad model into a `GraphProfile` by one dry run.

    ``step(*inputs)`` runs the forward pass and the loss and returns the scalar loss. The
    forward runs once, recorded op by op (FLOPs from the ledger); the backward's nodes,
    their order and their FLOPs are read from the graph the engine would walk, without
    running it, so no ``.grad`` changes. It is a dry run (`minigrad.hooks.dry_run`): what
    existed before the call is left as it was found: every `minigrad.random.Generator`
    alive then (the default one included), NumPy's global generator, BatchNorm's running
    statistics. (A Generator the step itself creates on its first call is new state; it
    stays.)

    Args:
        step: callable ``(*inputs) -> loss`` (a one-element Tensor that requires grad);
            it must not call ``backward()`` itself (trace_graph refuses it).
        *inputs: its arguments.
        free_ops: names of ops defined outside minigrad that have no FLOP count and are
            meant to be planned as free (otherwise such an op is an error: a planner would
            treat it as costing nothing to recompute).

    Returns:
        A `GraphProfile`.

    Raises:
        TypeError: ``step`` does not return a one-element Tensor that requires grad.
        ValueError: ``step`` ran a backward pass, or an op outside minigrad has no FLOP
            count and is not in ``free_ops``.

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> from minigrad import Tensor, nn
        >>> import minigrad.ops as F
        >>> model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        >>> x, y = Tensor(np.ones((3, 4), np.float32)), Tensor(np.zeros((3, 2), np.float32))
        >>> g = trace_graph(lambda x: F.mse_loss(model(x), y), x)
        >>> g.names[:g.n_forward], g.n_nodes
        (('linear', 'tanh', 'linear', 'mseloss'), 8)
    """
    if not callable(step):
        raise TypeError(f"trace_graph: step must be callable, got {type(step).__name__}")
    # a dry run: put back every random stream, and update no running statistics
    generators = [(g, g.get_state()) for g in _random.live_generators()]
    rng_state, np_state = _random.get_rng_state(), np.random.get_state()
    rec = StepRecorder(keep_outputs=True)
    loss = None
    try:
        with enable_grad(), dry_run(), memory.track() as m:
            with rec.hooks():
                loss = step(*inputs)
            if not isinstance(loss, Tensor) or loss.size != 1 or not loss.requires_grad:
                raise TypeError("trace_graph: step must return a one-element Tensor that requires "
                                "grad (the loss), got " + (f"shape {loss.shape}, requires_grad="
                                f"{loss.requires_grad}" if isinstance(loss, Tensor)
                                else type(loss).__name__))
            ran_backward = sorted({e.op for e in m.timeline if e.phase == "backward"})
            if ran_backward:
                raise ValueError(f"trace_graph: step ran a backward pass itself (through "
                                 f"{', '.join(ran_backward[:3])}); step must return the loss "
                                 f"and leave backward() to the caller")
            fwd_events = [e for e in m.timeline if e.phase == "forward"]
            order = [n for n in reversed(graph_nodes(loss)) if isinstance(n, Context)]
            return _build(rec, fwd_events, order, frozenset(free_ops))
    finally:
        loss = None
        rec.outputs.clear()
        for g, state in generators:
            g.set_state(state)
        _random.set_rng_state(rng_state)
        np.random.set_state(np_state)


def _build(rec, fwd_events, order, free_ops=frozenset()):
    ops = rec.ops
    nf = len(ops)
    for r in ops:  # an op without a FLOP count would be planned as free: say so
        counted = r.fn.flops is not Function.flops or r.fn.backward_flops is not Function.backward_flops
        if not counted and not r.fn.__module__.startswith("minigrad.") and r.name not in free_ops:
            raise ValueError(f"trace_graph: op {r.name} ({r.fn.__module__}.{r.fn.__qualname__}) "
                             f"has no FLOP count, so a planner would recompute it for free; "
                             f"define flops/backward_flops on it, or pass "
                             f"free_ops={{{r.name!r}}} to plan it as free")
    if len(fwd_events) != nf or any(e.op != r.name for e, r in zip(fwd_events, ops)):
        raise RuntimeError("trace_graph: the ledger's forward events do not match the recorded "
                           "ops (an op applied other ops inside its forward?)")
    node_of_ctx = {r.ctx_id: r.index for r in ops if r.ctx_id is not None}
    bwd = []
    for ctx in order:
        j = node_of_ctx.get(id(ctx))
        if j is None:
            raise ValueError(f"trace_graph: the loss depends on a {ctx.fn.name()} node made "
                             f"outside step(); build the whole graph inside step")
        bwd.append((j, ctx))
    stage_of = {j: nf + k for k, (j, _) in enumerate(bwd)}
    consumers = {j: [] for j, _ in bwd}
    for j, ctx in bwd:
        for e in ctx.inputs:
            if isinstance(e, Context) and id(e) in node_of_ctx:
                q = node_of_ctx[id(e)]
                if j not in consumers[q]:
                    consumers[q].append(j)
    names, deps, vbytes, flops = [], [], [], []
    out_buffer, buffer_bytes, private_bytes = [], [], []
    const_ids: dict = {}
    const_slots = []
    for r, e, out in zip(ops, fwd_events, rec.outputs):
        names.append(r.name)
        deps.append(tuple(sorted(r.input_nodes)))
        base = memory.base_buffer(out)
        own = r.out_bytes if memory.category(base) not in ("parameters", "buffers") else 0
        out_buffer.append(r.out_buffer_of)
        buffer_bytes.append(own if r.out_buffer_of == r.index else 0)
        priv = _unique_bytes(r.privates)
        private_bytes.append(priv)
        flops.append(int(e.flops))
        for s in r.slots:
            if s.kind == "const" and memory.category(s.array) not in ("parameters", "buffers"):
                b = memory.base_buffer(s.array)
                cid = const_ids.setdefault(id(b), (len(const_ids), int(b.nbytes), b))[0]
                if (cid, int(b.nbytes), r.index) not in const_slots:
                    const_slots.append((cid, int(b.nbytes), r.index))
    # A view owns no bytes: its value is 0 bytes plus its private arrays, and whoever reads
    # a view also reads the node that made its buffer (so that node is live then).
    vbytes = [buffer_bytes[i] + private_bytes[i] for i in range(nf)]
    for i in range(nf):
        deps[i] = _with_roots(deps[i], out_buffer, i)
    for j, ctx in bwd:
        r = ops[j]
        names.append(f"{r.name}.bwd")
        d = {stage_of[c] for c in consumers[j]}
        for s in r.slots:
            if s.kind == "node":
                d.add(s.node)
            elif s.kind == "private":
                d.add(j)
        deps.append(_with_roots(d, out_buffer, len(deps)))
        vbytes.append(int(r.grad_bytes))
        flops.append(int(ctx.fn.backward_flops(ctx)))
    const_bytes = sum(v[1] for v in const_ids.values())
    return GraphProfile(names=tuple(names), n_forward=nf, deps=tuple(deps),
                        value_bytes=tuple(vbytes), flops=tuple(flops), const_bytes=int(const_bytes),
                        backward_of=tuple(j for j, _ in bwd), out_buffer=tuple(out_buffer),
                        buffer_bytes=tuple(buffer_bytes), private_bytes=tuple(private_bytes),
                        const_slots=tuple(const_slots),
                        out_shapes=tuple((tuple(o.shape), o.dtype.name) for o in rec.outputs))
