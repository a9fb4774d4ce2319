"""Dynamic tensor rematerialization (DTR): a byte budget for saved activations, kept at run time.

Kirisame et al., *Dynamic Tensor Rematerialization* (ICLR 2021), need no plan. Every
array a step saves for backward goes into a pool; when keeping a new one would put the
pool over the budget, the pool *evicts* the resident array with the lowest score, and
when backward asks for an evicted array the pool *rebuilds* it by running again the op
that made it, first rebuilding that op's inputs if they were evicted too (recursively).

``with minigrad.dtr.budget(budget_bytes): step(*inputs).backward()`` keeps the saved
activations' bytes (the ledger's ``m.peak["activations"]``) within ``budget_bytes``, with
gradients bit-identical to a plain step. It is built only on the engine's public hooks:

* `minigrad.autograd.saved_tensors_hooks`: the pack hook stores a small handle instead of
  each saved array; the unpack hook returns the array, rebuilt if it was evicted;
* `minigrad.hooks.register_hooks` (``op=``): every op run in the block is recorded as
  the core's `minigrad.recompute.OpRecord` (its `Function`, inputs, constants, FLOPs, and
  the random state it drew from) and rebuilt by `minigrad.recompute.replay_op`, as
  `minigrad.remat.run` rebuilds; a node's backward ends the locks on the arrays it used;
* `minigrad.hooks.hold_role` / `release_role`: the pool tells the ledger which arrays it
  keeps for backward (``"activations"``), as the engine does for the arrays it saves.

Scores (``heuristic=``), for a resident array t (all arrays sharing t's buffer are evicted
together, as DTR's alias pools):

* ``"dtr"``: DTR's own score ``h(t) = (c(t) + sum of c over e(t)) / (m(t) * s(t))``: ``c``
  the FLOPs of the op that makes t, ``m`` its bytes, ``s`` its staleness (ops since its
  last use), and ``e(t)`` the *evicted neighbourhood* approximated, as in the paper's
  prototype, by equivalence classes: the connected groups of non-resident arrays adjacent
  to t (its evicted inputs' and evicted users' groups, each group's FLOPs counted once).
  Evicting t would merge those groups, and rebuilding any of them would then rebuild t.
  (The prototype keeps the groups in a union-find that never splits when an array comes
  back; here they are recomputed from the current residency, the exact classes.)
* ``"dtr_full"``: the same score with the paper's exact ``e*(t)``: the evicted arrays
  that rebuilding t would rebuild too (its evicted inputs, their evicted inputs, ...)
  and those whose rebuild would need t (its evicted users' arrays, and so on), each op's
  FLOPs once. Costlier to evaluate; the classes over-approximate it.
* ``"naive"``: ``c(t) / (m(t) * s(t))``, t's own FLOPs only. It evicts cheap arrays whose
  inputs are evicted too, and rebuilding them cascades: it thrashes (measured in
  ``tests/test_dtr.py`` and in "Beyond chains").

Model and scope: the pool counts each buffer it keeps once (its base array's bytes), not
arrays that belong to parameters, buffers or optimizer state; a checkpoint inside the
block is refused (its recomputation would save arrays the pool does not see), and so is an
op that reads an earlier op's output updated in place since (``h.data *= 2``: a rebuild
would make the value before the update; an update after an op saved it raises as in a plain
step, ``Tensor._version``); inputs of
the step that are saved (leaves, not made by an op) cannot be rebuilt and stay; rebuilt ops run in the
ledger's phase ``"recompute"``, so ``m.flops["recompute"]`` is the price of the budget.
Within that model the budget is a hard limit: when nothing more can be evicted (every
resident array is pinned or in use by the op that needs room), `BudgetError` says how
many bytes were needed against the budget; the pool never goes over it silently.

Example:
    >>> import numpy as np
    >>> import minigrad
    >>> from minigrad import nn
    >>> import minigrad.ops as F
    >>> _ = minigrad.random.manual_seed(0)
    >>> model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(),
    ...                       nn.Linear(16, 16))
    >>> x = Tensor(np.ones((8, 16), np.float32))
    >>> with minigrad.memory.track() as m:            # a plain step
    ...     F.mse_loss(model(x), x).backward()
    >>> m.peak["activations"]
    3072
    >>> with minigrad.memory.track() as m, budget(1536) as pool:
    ...     F.mse_loss(model(x), x).backward()
    >>> m.peak["activations"], pool.rebuilds, m.flops["recompute"]
    (1536, 3, 6528)
    >>> with budget(1024):
    ...     F.mse_loss(model(x), x).backward()
    Traceback (most recent call last):
    ...
    minigrad.dtr.BudgetError: dtr.budget: 1536 B of saved activations must be resident at once ...
"""
from __future__ import annotations

import weakref
from collections import Counter

import numpy as np

from minigrad import memory as _memory
from minigrad import random as _random
from minigrad._validation import check_int
from minigrad.autograd import saved_tensors_hooks
from minigrad.hooks import hold_role, register_hooks, release_role
from minigrad.recompute import OpRecord, replay_op, rng_state, values_digest
from minigrad.tensor import Tensor

__all__ = ["budget", "Budget", "BudgetError", "HEURISTICS"]

#: The eviction scores `budget` knows (see the module docstring).
HEURISTICS = ("dtr", "dtr_full", "naive")
# Ledger categories whose arrays the pool does not count: others own them.
_OWNED_ELSEWHERE = ("parameters", "buffers", "optimizer", "gradients")


class BudgetError(RuntimeError):
    """The saved activations cannot be kept within the budget: more bytes must be resident
    at once than the budget allows (the message names both)."""


class _Value:
    """One array of the step (DTR's "tensor"): an op's output, an array an op saved that
    is neither its output nor one of its inputs (a dropout mask, softmax probabilities,
    a layer norm's statistics), or a constant (an input made outside the block)."""

    __slots__ = ("op", "slot", "array", "weak", "pinned", "handles", "last_use", "nbytes",
                 "users", "index", "digest", "__weakref__")

    def __init__(self, op, slot, index, pinned=None):
        self.op = op  # the _Op that makes it (None for a constant)
        self.slot = slot  # "out", or the index of the array among what op saved
        self.array = None  # set while resident in the pool
        self.weak = None  # weak reference to the last array (it may still be alive)
        self.pinned = pinned  # a constant's array (never evicted, never rebuilt)
        self.handles = 0  # live saved entries that will unpack it
        self.last_use = 0
        self.nbytes = 0
        self.users: list = []  # the _Ops that take it as an input
        self.index = index
        self.digest = None  # checksum taken when first evicted: a rebuild must match it

    @property
    def const(self) -> bool:
        return self.op is None


class _Op(OpRecord):
    """One op call recorded in the block (the core's `OpRecord`: enough to run it again),
    and the values it made (``"out"``, or the index of a private array it saved)."""

    __slots__ = ("values",)

    def __init__(self, fn, args, kwargs, flops, rng, index):
        super().__init__(index, fn)
        self.args, self.kwargs, self.flops = args, kwargs, flops
        if rng is not None:  # drew random numbers: (state before, state after)
            self.rng_state, self.rng_after = rng
        self.values: dict = {}  # slot -> _Value made by this op
        self.saved_meta = []  # (shape, dtype) of each array it saved, in order


class _Arg:
    """A tensor argument of a recorded op: its value and whether it required grad."""

    __slots__ = ("value", "requires_grad")

    def __init__(self, value, requires_grad):
        self.value, self.requires_grad = value, requires_grad


class _Handle:
    """What a node stores instead of a saved array (the pack hook's result)."""

    __slots__ = ("pool", "value", "array", "__weakref__")

    def __init__(self, pool, array):
        self.pool, self.value, self.array = pool, None, array

    def kept_arrays(self):
        """The array kept for backward in this entry's stead, if resident now (see
        ``minigrad.autograd.saved_arrays``)."""
        v = self.value
        if v is None:
            return [self.array]
        a = v.array if v.array is not None else v.pinned
        return [] if a is None else [a]

    def __del__(self):
        try:
            if self.value is not None:
                self.pool._handle_dead(self.value)
        except Exception:  # interpreter shutdown
            pass


class _Group:
    """Resident values sharing one buffer (DTR's alias pool): evicted together."""

    __slots__ = ("members", "nbytes", "counted")

    def __init__(self, nbytes, counted):
        self.members: dict = {}  # _Value -> None (insertion-ordered set)
        self.nbytes, self.counted = nbytes, counted


def _base(a: np.ndarray) -> np.ndarray:
    return _memory.base_buffer(a)


class Budget:
    """The pool behind `budget`: a context manager, and the statistics of its run.

    Attributes:
        budget_bytes: the limit on the saved activations' bytes.
        heuristic: ``"dtr"``, ``"dtr_full"``, ``"naive"`` or a score function.
        resident_bytes: the pool's bytes now; ``peak_bytes``: their maximum.
        evictions: arrays groups evicted; ``rebuilds``: ops run again;
        rebuild_flops: their FLOPs (the ledger counts the same in ``"recompute"``);
        rebuilt_ops: ``Counter`` op name -> rebuilds;
        max_depth: the longest chain of nested rebuilds (2: an evicted array whose op's
            input had been evicted too);
        reacquired: evicted arrays taken back at no cost because something else still
            held them (a tensor the step's code kept).
    """

    def __init__(self, budget_bytes: int, heuristic: str = "dtr"):
        self.budget_bytes = check_int("budget_bytes", budget_bytes, 0, where="dtr.budget")
        if not callable(heuristic) and heuristic not in HEURISTICS:
            raise ValueError(f"dtr.budget: unknown heuristic {heuristic!r}; allowed: {list(HEURISTICS)}")
        self.heuristic = heuristic
        self.resident_bytes = 0
        self.peak_bytes = 0
        self.evictions = 0
        self.rebuilds = 0
        self.rebuild_flops = 0
        self.reacquired = 0
        self.rebuilt_ops: Counter = Counter()
        self.max_depth = 0
        self._depth = 0
        self._groups: dict[int, _Group] = {}  # id(base buffer) -> group
        self._group_of: dict = {}  # _Value -> group key
        self._by_tensor: dict[int, tuple] = {}  # id(Tensor) -> (weakref, _Value)
        self._pending: list[_Handle] = []  # packed by the op running now
        self._node_locks: set = set()  # values unpacked by the node whose backward runs
        self._rebuild_locks: Counter = Counter()  # inputs of the rebuilds in progress
        self._clock = 0
        self._count = 0
        self._replaying = 0
        self._live_handles = 0
        self._rng = None
        self._hooks = None
        self._op_hook = None
        self._closing = False

    # --- entering and leaving -------------------------------------------------------------
    def __enter__(self):
        if self._op_hook is not None:
            raise RuntimeError("dtr.budget: this budget is already in use; make a new one")
        self._rng = rng_state()
        self._op_hook = register_hooks(op=self._on_op)
        self._hooks = saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        self._closing = True
        if self._live_handles == 0 or exc[0] is not None:
            self._close()
        return False

    def _close(self):
        """Stop observing and let go of everything (a graph still alive then rebuilds
        nothing more: its evicted arrays are gone)."""
        if self._op_hook is not None:
            self._op_hook.remove()
        for key in list(self._groups):
            for v in list(self._groups[key].members):
                self._remove(v)
        self._by_tensor.clear()
        self._pending.clear()

    # --- the pool -------------------------------------------------------------------------
    def _add(self, v: _Value, a: np.ndarray) -> None:
        """Make ``v`` resident with array ``a`` (room was made by the caller)."""
        base = _base(a)
        key = id(base)
        g = self._groups.get(key)
        if g is None:
            counted = _memory.category(base) not in _OWNED_ELSEWHERE
            g = self._groups[key] = _Group(base.nbytes, counted)
            if counted:
                self.resident_bytes += base.nbytes
                self.peak_bytes = max(self.peak_bytes, self.resident_bytes)
        g.members[v] = None
        self._group_of[v] = key
        v.array = a
        v.weak = None
        hold_role(a, "activations")

    def _remove(self, v: _Value) -> None:
        """``v`` leaves the pool (evicted, or nothing will unpack it any more)."""
        a = v.array
        key = self._group_of.pop(v)
        g = self._groups[key]
        del g.members[v]
        if not g.members:
            del self._groups[key]
            if g.counted:
                self.resident_bytes -= g.nbytes
        v.array = None
        v.weak = weakref.ref(a)
        release_role(a, "activations")

    def _new_bytes(self, arrays) -> int:
        """Bytes that making ``arrays`` resident would add (buffers already kept count 0)."""
        seen, total = set(), 0
        for a in arrays:
            base = _base(a)
            key = id(base)
            if key in self._groups or key in seen:
                continue
            seen.add(key)
            if _memory.category(base) not in _OWNED_ELSEWHERE:
                total += base.nbytes
        return total

    def _locked(self, v) -> bool:
        return v in self._node_locks or self._rebuild_locks[v] > 0

    def _make_room(self, nbytes: int, what: str) -> None:
        """Evict until ``nbytes`` more fit in the budget, or raise `BudgetError`."""
        while self.resident_bytes + nbytes > self.budget_bytes:
            key = self._victim()
            if key is None:
                pinned = sum(g.nbytes for g in self._groups.values() if g.counted
                             and any(v.const for v in g.members))
                raise BudgetError(
                    f"dtr.budget: {self.resident_bytes + nbytes} B of saved activations must be "
                    f"resident at once ({what}: {nbytes} B more, {self.resident_bytes} B kept, "
                    f"of which {pinned} B are inputs of the step that cannot be rebuilt), but "
                    f"the budget is {self.budget_bytes} B; nothing else can be evicted. Raise "
                    f"the budget to at least {self.resident_bytes + nbytes} B (a lower bound: what "
                    f"is resident later may need more).")
            self.evictions += 1
            for v in list(self._groups[key].members):
                if v.digest is None and not v.const:
                    v.digest = values_digest([v.array])
                self._remove(v)

    # --- scores ---------------------------------------------------------------------------
    def _victim(self):
        """The key of the evictable group with the lowest score (first one on ties)."""
        best, best_score = None, None
        classes: dict = {}  # _Value -> its evicted class (members, ops), for this choice
        for key, g in self._groups.items():
            if not g.counted or g.nbytes == 0:
                continue
            if any(v.const or self._locked(v) for v in g.members):
                continue
            ops = {v.op for v in g.members}
            cost = sum(op.flops for op in ops)
            stale = self._clock - max(v.last_use for v in g.members) + 1
            if callable(self.heuristic):
                score = self.heuristic(cost, self._neighbourhood_cost(g, ops, classes),
                                       g.nbytes, stale)
            else:
                if self.heuristic == "dtr":
                    cost += self._neighbourhood_cost(g, ops, classes)
                elif self.heuristic == "dtr_full":
                    cost += self._evicted_neighbourhood_cost(g, ops)
                score = cost / (g.nbytes * stale)
            if best_score is None or score < best_score:
                best, best_score = key, score
        return best

    def _neighbours(self, v: _Value):
        if v.op is not None:
            for a in v.op.args:
                if isinstance(a, _Arg):
                    yield a.value
        for op in v.users:
            yield from op.values.values()

    def _evicted(self, v: _Value) -> bool:
        return v.op is not None and v.array is None

    def _neighbourhood_cost(self, g: _Group, own_ops, classes: dict) -> int:
        """The FLOPs of the evicted classes adjacent to group ``g`` (each class once; an op
        of ``g`` itself is not counted twice)."""
        total, seen = 0, set()
        for v in g.members:
            for n in self._neighbours(v):
                if not self._evicted(n):
                    continue
                cls = classes.get(n)
                if cls is None:
                    cls = self._evicted_class(n, classes)
                if id(cls) in seen:
                    continue
                seen.add(id(cls))
                total += sum(op.flops for op in cls[1] if op not in own_ops)
        return total

    def _evicted_neighbourhood_cost(self, g: _Group, own_ops) -> int:
        """The FLOPs of e*(t), the paper's exact evicted neighbourhood: the evicted arrays
        that rebuilding t's would need (its evicted inputs, theirs, ...) and those whose
        rebuild would need t (its evicted users' arrays, theirs, ...), each op once."""
        ops = set()
        up = [a.value for v in g.members if v.op is not None
              for a in v.op.args if isinstance(a, _Arg)]
        down = [u for v in g.members for op in v.users for u in op.values.values()]
        for stack, step in ((up, self._parents), (down, self._children)):
            seen = set()
            while stack:
                v = stack.pop()
                if v in seen or not self._evicted(v):
                    continue
                seen.add(v)
                ops.add(v.op)
                stack.extend(step(v))
        return sum(op.flops for op in ops if op not in own_ops)

    @staticmethod
    def _parents(v: _Value):
        return [a.value for a in v.op.args if isinstance(a, _Arg)]

    @staticmethod
    def _children(v: _Value):
        return [u for op in v.users for u in op.values.values()]

    def _evicted_class(self, start: _Value, classes: dict):
        """The connected set of non-resident values around ``start`` and their ops."""
        members, ops, stack = [start], set(), [start]
        cls = (members, ops)
        classes[start] = cls
        while stack:
            v = stack.pop()
            ops.add(v.op)
            for n in self._neighbours(v):
                if self._evicted(n) and n not in classes:
                    classes[n] = cls
                    members.append(n)
                    stack.append(n)
        return cls

    # --- recording the forward ------------------------------------------------------------
    def _value_of(self, t: Tensor) -> _Value:
        entry = self._by_tensor.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        # made outside the block (an input, a parameter): a constant, kept as is
        v = _Value(None, "out", self._next(), pinned=t.data)
        v.nbytes = _base(t.data).nbytes
        self._remember(t, v)
        return v

    def _remember(self, t: Tensor, v: _Value) -> None:
        key = id(t)
        by_tensor = self._by_tensor

        def forget(ref, key=key):
            entry = by_tensor.get(key)
            if entry is not None and entry[0] is ref:
                del by_tensor[key]
        self._by_tensor[key] = (weakref.ref(t, forget), v)

    def _next(self) -> int:
        self._count += 1
        return self._count

    def _pack(self, array):
        h = _Handle(self, array)
        self._pending.append(h)
        return h

    def _on_op(self, kind, fn, ctx, args, kwargs, output):
        if self._replaying:
            return
        self._clock += 1
        if kind == "backward":
            self._node_locks.clear()  # that node's backward has run: its arrays are free
            return
        if self._closing:  # after the block: only its graph's backward still concerns the pool
            return
        pending, self._pending = self._pending, []
        if fn.name() == "checkpoint":  # checkpoint's nodes (its inputs' keeper, Checkpoint, run_schedule)
            raise RuntimeError(
                "dtr.budget: a checkpoint runs inside the budget; the arrays its recomputation "
                "saves would escape the pool's count. DTR decides itself what to keep and "
                "rebuild: run the model without checkpoint inside dtr.budget")
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, _random.Generator) and a is not _random.default_generator:
                raise NotImplementedError(
                    f"dtr.budget: op {fn.name()} draws from its own Generator; the budget "
                    f"replays only minigrad.random's default generator (pass generator=None)")
        rng_now = rng_state()
        rng = None if rng_now == self._rng else (self._rng, rng_now)
        self._rng = rng_now
        arrays = [a.data if isinstance(a, Tensor) else a for a in args]
        for k, a in enumerate(args):
            entry = self._by_tensor.get(id(a)) if isinstance(a, Tensor) else None
            if entry is not None and entry[0]() is a and not entry[1].const and a._version:
                raise RuntimeError(
                    f"dtr.budget: op {fn.name()} reads, as its argument {k}, the output of an "
                    f"earlier op updated in place since (version {a._version}); the pool "
                    f"rebuilds values from the ops that made them, so a rebuild would use the "
                    f"value before the update: update a copy (an op), not the tensor")
        rec_args = [_Arg(self._value_of(a), a.requires_grad) if isinstance(a, Tensor) else a
                    for a in args]
        op = _Op(fn, rec_args, dict(kwargs), int(fn.flops(ctx, output.data, *arrays, **kwargs)),
                 rng, self._next())
        op.out_meta = (output.shape, output.dtype)
        for a in rec_args:
            if isinstance(a, _Arg) and not a.value.const:
                a.value.users.append(op)
        out = _Value(op, "out", self._next())
        out.weak = weakref.ref(output.data)
        out.nbytes = _base(output.data).nbytes
        out.last_use = self._clock
        op.values["out"] = out
        self._remember(output, out)
        if not pending:
            return
        # What this op saved: its output, one of its inputs, or an array of its own.
        inputs = {id(a.data): a for a in args if isinstance(a, Tensor)}
        for k, h in enumerate(pending):
            a = h.array
            op.saved_meta.append((a.shape, a.dtype))
            if a is output.data:
                v = out
            elif id(a) in inputs and inputs[id(a)].data is a:
                v = self._value_of(inputs[id(a)])
            else:
                v = _Value(op, k, self._next())
                v.weak = weakref.ref(a)
                v.nbytes = _base(a).nbytes
                op.values[k] = v
            v.last_use = self._clock
            h.value = v
            v.handles += 1
            self._live_handles += 1
        new = {}
        for h in pending:
            if h.value.array is None:
                new[h.value] = h.array
        self._make_room(self._new_bytes(new.values()), f"op {fn.name()} saves")
        for v, a in new.items():
            self._add(v, a)
        for h in pending:
            h.array = None

    # --- backward: unpack, rebuild ---------------------------------------------------------
    def _unpack(self, h: _Handle):
        v = h.value
        self._clock += 1
        a = self._fetch(v)
        self._node_locks.add(v)
        return a

    def _fetch(self, v: _Value) -> np.ndarray:
        """``v``'s array, resident in the pool (rebuilt if it was evicted)."""
        v.last_use = self._clock
        if v.const:
            if v.handles and v.array is None:  # a saved input: kept (pinned) while needed
                self._make_room(self._new_bytes([v.pinned]), "an input of the step")
                self._add(v, v.pinned)
            return v.pinned
        if v.array is not None:
            return v.array
        a = v.weak() if v.weak is not None else None
        if a is not None:  # evicted from the pool, but something else still holds it
            self.reacquired += 1
            self._make_room(self._new_bytes([a]), f"{v.op.name}'s array")
            self._add(v, a)
            return a
        self._rebuild(v)
        return v.array

    def _rebuild(self, want: _Value) -> None:
        """Run ``want``'s op again (its inputs fetched first, recursively), keeping ``want``
        and, if they fit without evicting, the op's other arrays that are still needed."""
        op = want.op
        held = []
        self._depth += 1
        self.max_depth = max(self.max_depth, self._depth)
        try:
            args = []
            for a in op.args:
                if isinstance(a, _Arg):
                    # locked first: what the nested rebuilds drop must not take it along
                    self._rebuild_locks[a.value] += 1
                    held.append(a.value)
                    arr = self._fetch(a.value)
                    args.append(Tensor(arr, requires_grad=a.requires_grad))
                else:
                    args.append(a)
            out, saved = self._replay(op, args)
            self.rebuilds += 1
            self.rebuild_flops += op.flops
            self.rebuilt_ops[op.fn.name()] += 1
            produced = {"out": out}
            produced.update(enumerate(saved))
            # Room is made once the exact bytes are known (a view of a resident input adds
            # none): until the pool holds them, the rebuilt arrays are not saved activations.
            a = produced[want.slot]
            for slot, v in op.values.items():
                if v.digest is not None and values_digest([produced[slot]]) != v.digest:
                    raise RuntimeError(
                        f"dtr.budget: rebuilding op {op.fn.name()} gave other values than its "
                        f"first run (it draws from a stream the budget does not replay, such "
                        f"as NumPy's global generator, or an argument was edited in place "
                        f"since); the gradients would differ")
            self._make_room(self._new_bytes([a]), f"rebuilding {op.fn.name()}")
            self._add(want, a)
            want.last_use = self._clock
            for slot, v in op.values.items():
                if v is want or v.array is not None or v.handles == 0:
                    continue
                a = produced[slot]
                extra = self._new_bytes([a])
                if self.resident_bytes + extra <= self.budget_bytes:
                    self._add(v, a)
                    v.last_use = self._clock
                else:
                    v.weak = weakref.ref(a)
        finally:
            self._depth -= 1
            for v in held:
                self._rebuild_locks[v] -= 1
                if self._rebuild_locks[v] == 0:
                    del self._rebuild_locks[v]
                    self._drop_if_unneeded(v)  # an input needed only for this rebuild

    def _replay(self, op: _Op, args):
        self._replaying += 1
        try:
            out, saved = replay_op(op, args, f"dtr.budget: rebuilding op {op.name}")
        finally:
            self._replaying -= 1
        return out.data, saved

    def _drop_if_unneeded(self, v: _Value) -> None:
        """Let ``v`` leave the pool if nothing will unpack it and no rebuild uses it, with
        the other such arrays of its buffer; while another array of the same buffer is
        needed, they stay (keeping them costs no byte, and a view's parent stays at hand)."""
        if v.array is None or v.handles or self._rebuild_locks[v]:
            return
        g = self._groups[self._group_of[v]]
        if any(m.handles or self._rebuild_locks[m] for m in g.members):
            return
        for m in list(g.members):
            self._remove(m)

    def _handle_dead(self, v: _Value) -> None:
        v.handles -= 1
        self._live_handles -= 1
        self._drop_if_unneeded(v)
        if self._closing and self._live_handles == 0:
            self._close()

    def __repr__(self):
        return (f"Budget({self.budget_bytes} B, heuristic={self.heuristic!r}: peak "
                f"{self.peak_bytes} B, {self.evictions} evictions, {self.rebuilds} rebuilds, "
                f"{self.rebuild_flops} FLOPs rebuilt)")


def budget(budget_bytes: int, *, heuristic: str = "dtr") -> Budget:
    """Keep the arrays saved for backward within ``budget_bytes``, evicting and rebuilding
    at run time (DTR, Kirisame et al. 2021).

    Inside the block, every array an op saves for backward joins a pool that never holds
    more than ``budget_bytes``; when it would, the pool evicts the array with the lowest
    score (``heuristic``), and backward rebuilds evicted arrays on demand by running their
    ops again (their inputs first, recursively), with the random state of the first run,
    so that gradients are bit-identical to a plain step. Run both the forward and the
    backward inside the block.

    Args:
        budget_bytes: the limit on the saved activations (the ledger's ``"activations"``),
            an integer >= 0.
        heuristic: ``"dtr"`` (DTR's score, its evicted neighbourhood approximated by
            equivalence classes, as the paper's prototype), ``"dtr_full"`` (the exact
            evicted neighbourhood), ``"naive"`` (each array's own FLOPs /
            (bytes x staleness)), or a function ``score(flops, neighbourhood_flops,
            nbytes, staleness) -> float`` of a candidate's own FLOPs, its evicted
            classes' FLOPs (as ``"dtr"`` counts them), its bytes and its staleness (ops
            since its last use, >= 1): the lowest score is evicted first.

    Returns:
        A `Budget`: a context manager whose attributes count evictions, rebuilds and
        rebuilt FLOPs.

    Raises:
        BudgetError: (in the block) more bytes must be resident at once than the budget.
        ValueError: an unknown heuristic name or a negative budget.

    Example:
        >>> import numpy as np
        >>> import minigrad
        >>> from minigrad import nn
        >>> import minigrad.ops as F
        >>> model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16))
        >>> x = Tensor(np.ones((8, 16), np.float32))
        >>> with minigrad.memory.track() as m, budget(1536, heuristic="naive") as pool:
        ...     F.mse_loss(model(x), x).backward()
        >>> m.peak["activations"] <= 1536, pool.evictions > 0
        (True, True)
    """
    return Budget(budget_bytes, heuristic)
