"""Run a training step under a graph schedule (`minigrad.plan.remat`): the executor.

``run(schedule, step, *inputs)`` runs ``step(*inputs)`` (forward and loss) and the
backward pass, and leaves in every ``.grad`` exactly what a plain ``loss.backward()``
leaves (the same ops on the same arrays, so the same bits). What differs is memory:

* during the forward pass, a saved-tensor pack hook stores a small `Slot` for every array
  an op saves; the executor keeps, as activations, only the values the schedule keeps
  into the backward pass (an op's output and its private saved arrays) and the step's
  inputs that ops save;
* before each backward node runs (stage ``t``), the executor recomputes the forward
  values the schedule lists, in order, each from values it holds, replaying the random
  state of the first forward (dropout masks match), and frees each value right after its
  last reader in the stage unless the schedule keeps it (Checkmate's FREE);
* the unpack hook hands each node the arrays it saved, rebuilt as views of the values
  held.

The ledger's ``m.peak["activations"]`` of the run equals the schedule's
``predicted_activation_bytes`` and is at most its ``predicted_peak_bytes`` (Checkmate's
model, which also counts gradients in flight and outputs nobody saved). Recomputed ops
count in the ledger's ``"recompute"`` phase: ``m.flops["recompute"]`` equals the
schedule's ``recompute_flops``.

Scope: ops whose forward depends only on their arguments and the default random
generator. A recomputation gets copies of the op's array arguments, so BatchNorm's running
statistics are updated once, by the first forward, as in a plain step.

Never silently wrong: the run checks what the schedule was planned for and raises a
`RuntimeError` naming what differs: each op's name, output shape and dtype, and private
saved bytes (a schedule traced at batch 8 refuses a batch of 64); an op that draws from its
own `minigrad.random.Generator` (only the default generator is replayed); an op that reads
an earlier op's output updated in place since (``h.data *= 2``: its ``_version`` moved on);
and every recomputed value is compared, by a checksum taken in the first forward, with the
value it replaces, so a recomputation that differs (a draw from NumPy's global generator, an
argument edited in place since) is an error, not different gradients. A value kept rather
than recomputed and updated in place after an op saved it raises as in a plain step
(``Tensor._version``, checked by the engine when backward reads it).
"""
from __future__ import annotations

from minigrad import memory
from minigrad import random as _random
from minigrad.grad_mode import enable_grad
from minigrad.hooks import hold_role, register_hooks, release_role
from minigrad.recompute import StepRecorder, rebuild_view, replay_op, values_digest
from minigrad.tensor import Tensor

__all__ = ["run"]


class _Executor(StepRecorder):
    def __init__(self, schedule):
        super().__init__(keep_outputs=False)
        g = schedule.graph
        self.g, self.nf = g, g.n_forward
        self.keep = [set(k) for k in schedule.keep] + [set()]
        self.recompute = [list(r) for r in schedule.recompute]
        self.users = g.users()
        self.store: dict = {}  # forward node -> (output array, private arrays)
        self.const_held: dict = {}  # forward node -> arrays held for its backward
        self.stage_of = {j: self.nf + k for k, j in enumerate(g.backward_of)}
        self.node_of_ctx: dict = {}
        self.entered = -1
        self.next_stage = self.nf
        self.on_op = self._forward_op
        self.recomputed = {k for r in schedule.recompute for k in r}
        self.digest: dict = {}  # recomputed node -> checksum of its first-forward values

    # --- values held as activations ---------------------------------------------------
    def _hold(self, i, out, privates):
        hold_role(out, "activations")
        for p in privates:
            hold_role(p, "activations")
        self.store[i] = (out, privates)

    def _drop(self, i):
        value = self.store.pop(i, None)
        if value is None:
            return
        release_role(value[0], "activations")
        for p in value[1]:
            release_role(p, "activations")

    def close(self):
        for i in list(self.store):
            self._drop(i)
        for arrays in self.const_held.values():
            for a in arrays:
                release_role(a, "activations")
        self.const_held.clear()

    # --- forward ------------------------------------------------------------------------
    def _forward_op(self, rec, output):
        i = rec.index
        if i >= self.nf or rec.name != self.g.names[i]:
            raise RuntimeError(f"remat.run: the step's op {i} is {rec.name}, but the schedule's "
                               f"graph has " + (f"{self.g.names[i]}" if i < self.nf else
                               f"only {self.nf} forward ops") + "; trace the same step")
        self._check_planned(i, rec, output)
        if rec.ctx_id is not None:
            self.node_of_ctx[rec.ctx_id] = i
        consts = []
        for slot in rec.slots:
            if slot.kind == "const":
                hold_role(slot.array, "activations")
                consts.append(slot.array)
            else:
                slot.array = None  # rebuilt from the values held when backward reads it
        self.const_held[i] = consts
        privates, rec.privates = rec.privates, []
        if i in self.recomputed:
            self.digest[i] = values_digest([output.data, *privates])
        if i in self.keep[self.nf]:
            self._hold(i, output.data, privates)

    def _check_planned(self, i, rec, output):
        """The op runs on what the schedule was planned for, or the run stops and says
        what differs (shapes and bytes, not only names)."""
        g, where = self.g, f"remat.run: op {i} ({rec.name})"
        if g.out_shapes:
            shape, dtype = g.out_shapes[i]
            got = (tuple(output.shape), output.data.dtype.name)
            if got != (tuple(shape), dtype):
                raise RuntimeError(f"{where} makes a {got[0]} {got[1]} output; the schedule was "
                                   f"planned for {tuple(shape)} {dtype} (trace_graph and plan "
                                   f"again at these shapes)")
        if g.private_bytes:
            got = sum({id(memory.base_buffer(p)): memory.base_buffer(p).nbytes
                       for p in rec.privates}.values())
            if got != g.private_bytes[i]:
                raise RuntimeError(f"{where} saves {got:,} private bytes; the schedule was "
                                   f"planned for {g.private_bytes[i]:,}")
        for k, version in rec.edited_args:
            raise RuntimeError(f"{where} reads, as its argument {k}, the output of an earlier op "
                               f"updated in place since (version {version}); remat.run rebuilds "
                               f"values from the ops that made them, so it would use the value "
                               f"before the update: update a copy (an op), not the tensor")
        for a in list(rec.args) + list(rec.kwargs.values()):
            if isinstance(a, _random.Generator) and a is not _random.default_generator:
                raise RuntimeError(f"{where} draws from its own minigrad.random.Generator; "
                                   f"remat.run replays only the default generator (pass "
                                   f"generator=None), so its recomputation would differ")

    # --- backward -----------------------------------------------------------------------
    def unpack(self, slot):
        j = slot.owner
        self._enter(self.stage_of[j])
        if slot.kind == "const":
            return slot.array
        if slot.kind == "node":
            value = self.store.get(slot.node)
            if value is None:
                raise RuntimeError(f"remat.run: node {j} ({self.g.names[j]}) reads the value of "
                                   f"node {slot.node}, which the schedule does not hold")
            return rebuild_view(value[0], slot.spec)
        return self.store[j][1][slot.index]

    def _enter(self, t):
        """Stage t begins: recompute what the schedule lists, freeing as Checkmate does."""
        if self.entered >= t:
            return
        if t != self.next_stage:
            raise RuntimeError(f"remat.run: the engine runs backward stage {t} before stage "
                               f"{self.next_stage}; the schedule's graph is not this step's")
        self.entered = t
        order = self.recompute[t] + [t]
        for pos, k in enumerate(order[:-1]):
            self._recompute(k)
            later = order[pos + 1:]
            for i in set(self.g.deps[k]) | {k}:
                if i not in self.keep[t + 1] and not any(j in later for j in self.users[i]):
                    self._drop(i)

    def _recompute(self, k):
        rec = self.ops[k]
        args = []
        for a, rg in zip(rec.args, rec.arg_grad):
            if hasattr(a, "node") and not isinstance(a, Tensor):
                value = self.store.get(a.node)
                if value is None:
                    raise RuntimeError(f"remat.run: recomputing node {k} ({rec.name}) needs node "
                                       f"{a.node}, which the schedule does not hold")
                a = Tensor(value[0], requires_grad=rg)
            args.append(a)
        out, saved = replay_op(rec, args, f"remat.run: recomputing node {k} ({rec.name})")
        privates = [None] * sum(1 for s in rec.slots if s.kind == "private")
        for p, slot in enumerate(rec.slots):
            if slot.kind == "private":
                privates[slot.index] = saved[p]
        if values_digest([out.data, *privates]) != self.digest.get(k):
            raise RuntimeError(f"remat.run: recomputing node {k} ({rec.name}) gave other values "
                               f"than its first forward (it draws from a stream remat.run does "
                               f"not replay, such as NumPy's global generator, or an argument "
                               f"was edited in place since); the gradients would differ")
        self._hold(k, out.data, privates)

    def backward_op(self, kind, fn, ctx, args, kwargs, output):
        if kind != "backward":
            return
        j = self.node_of_ctx.get(id(ctx))
        if j is None:
            return
        t = self.stage_of[j]
        self._enter(t)
        for a in self.const_held.pop(j, ()):
            release_role(a, "activations")
        for i in list(self.store):
            if i not in self.keep[t + 1]:
                self._drop(i)
        self.next_stage = t + 1


def run(schedule, step, *inputs):
    """Run one training step under ``schedule`` (forward, loss and backward).

    Args:
        schedule: a `minigrad.plan.checkmate.GraphSchedule` planned for this step's graph
            (`minigrad.plan.trace_graph` of the same ``step`` and input shapes).
        step: callable ``(*inputs) -> loss`` (a one-element Tensor).
        *inputs: its arguments.

    Returns:
        The loss Tensor (its graph already freed); ``.grad`` holds the gradients a plain
        ``loss.backward()`` would leave, bit for bit.

    Raises:
        RuntimeError: the step ran other ops, or ops on other shapes or bytes, than the
            schedule's graph has; an op draws from its own Generator; or a recomputed
            value differs from the first forward's (see the module docstring).

    Example:
        >>> import numpy as np
        >>> from minigrad import Tensor, memory, nn, plan
        >>> import minigrad.ops as F
        >>> model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        >>> x, y = Tensor(np.ones((3, 4), np.float32)), Tensor(np.zeros((3, 2), np.float32))
        >>> step = lambda x: F.mse_loss(model(x), y)
        >>> s = plan.keeping(plan.trace_graph(step, x), [])   # or plan.remat(graph, budget)
        >>> with memory.track() as m:
        ...     loss = run(s, step, x)
        >>> m.peak["activations"] == s.predicted_activation_bytes, m.flops["recompute"]
        (True, 840)
    """
    ex = _Executor(schedule)
    try:
        with enable_grad():
            with ex.hooks():
                loss = step(*inputs)
            if len(ex.ops) != ex.nf:
                raise RuntimeError(f"remat.run: the step ran {len(ex.ops)} forward ops, the "
                                   f"schedule's graph has {ex.nf}; trace the same step")
            handle = register_hooks(op=ex.backward_op)
            try:
                loss.backward()
            finally:
                handle.remove()
    finally:
        ex.close()
    return loss
