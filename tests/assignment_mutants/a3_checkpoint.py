"""Wrong answers to a3_checkpoint that the grader must catch, and correct ones it must not
(scripts/probe_assignment.py a3_checkpoint --mutants; tests/test_assignment_mutants.py)."""

CHECKPOINT_WITHOUT_RNG = '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        xr = Tensor(x, requires_grad=True)
        with enable_grad():
            y = ctx.run(xr)
        y.backward(grad)
        return xr.grad, None
'''

MUTANTS = [
    dict(question="q1", name="plain_pass_through", points=7,
         idea="a Checkpoint that just runs the segment (nothing dropped, nothing recomputed)",
         source="""
class Checkpoint:
    @staticmethod
    def apply(x, fn):
        return fn(x)
"""),
    # q1: Checkpoint
    {"question": "q1", "name": "stashes_copies_off_the_ledger", "points": 2,
     "idea": "recomputes correctly, but keeps a copy of every block's output in a closure: held, "
             "though the ledger never hears of it",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.rng_state = minigrad.random.get_rng_state()
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)
        ctx.run = fn
        ctx.stash = [out.copy(), (out * 2).copy()]
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(ctx.rng_state)
        try:
            xr = Tensor(x, requires_grad=True)
            with enable_grad():
                y = ctx.run(xr)
            y.backward(grad)
        finally:
            minigrad.random.set_rng_state(now)
        return xr.grad, None
'''},
    {"question": "q1", "name": "no_rng_replay", "points": 4,
     "idea": "recomputes with whatever random state is current (gradients wrong wherever there is dropout)",
     "source": CHECKPOINT_WITHOUT_RNG},
    {"question": "q1", "name": "rng_not_put_back", "points": 2,
     "idea": "replays the forward's random state but leaves it set after backward",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.rng_state = minigrad.random.get_rng_state()
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        minigrad.random.set_rng_state(ctx.rng_state)
        xr = Tensor(x, requires_grad=True)
        with enable_grad():
            y = ctx.run(xr)
        y.backward(grad)
        return xr.grad, None
'''},
    {"question": "q1", "name": "keeps_the_graph", "points": 4,
     "idea": "runs the segment with the graph on in forward and back-propagates through it (no recomputation)",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.inp = Tensor(x, requires_grad=True)
        with enable_grad():
            ctx.out = fn(ctx.inp)
        return ctx.out.data

    @staticmethod
    def backward(ctx, grad):
        ctx.out.backward(grad)
        return ctx.inp.grad, None
'''},
    {"question": "q1", "name": "input_gradient_dropped", "points": 3,
     "idea": "returns no gradient for the segment's input",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.rng_state = minigrad.random.get_rng_state()
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(ctx.rng_state)
        xr = Tensor(x, requires_grad=True)
        with enable_grad():
            y = ctx.run(xr)
        y.backward(grad)
        minigrad.random.set_rng_state(now)
        return None, None
'''},
    {"question": "q1", "name": "recomputes_without_grad", "points": 5,
     "idea": "recomputes under no_grad, so there is no graph to back-propagate through",
     "source": CHECKPOINT_WITHOUT_RNG.replace("with enable_grad():\n            y = ctx.run(xr)",
                                           "with no_grad():\n            y = ctx.run(xr)")},
    {"question": "q1", "name": "saves_the_output_too", "points": 2,
     "idea": "keeps the segment's output as well as its input",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.rng_state = minigrad.random.get_rng_state()
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x, out)
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, grad):
        x, _ = ctx.saved_tensors
        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(ctx.rng_state)
        try:
            xr = Tensor(x, requires_grad=True)
            with enable_grad():
                y = ctx.run(xr)
            y.backward(grad)
        finally:
            minigrad.random.set_rng_state(now)
        return xr.grad, None
'''},
    {"question": "q1", "name": "numpy_rng_state", "points": 4,
     "idea": "saves and restores NumPy's global random state instead of minigrad's",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.rng_state = np.random.get_state()
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.save_for_backward(x)
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        now = np.random.get_state()
        np.random.set_state(ctx.rng_state)
        try:
            xr = Tensor(x, requires_grad=True)
            with enable_grad():
                y = ctx.run(xr)
            y.backward(grad)
        finally:
            np.random.set_state(now)
        return xr.grad, None
'''},
    {"question": "q1", "name": "state_saved_after_the_forward", "points": 4,
     "idea": "saves the random state after running the segment, so the recomputation draws the next masks",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        with no_grad():
            out = fn(Tensor(x)).data
        ctx.rng_state = minigrad.random.get_rng_state()
        ctx.save_for_backward(x)
        ctx.run = fn
        return out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(ctx.rng_state)
        try:
            xr = Tensor(x, requires_grad=True)
            with enable_grad():
                y = ctx.run(xr)
            y.backward(grad)
        finally:
            minigrad.random.set_rng_state(now)
        return xr.grad, None
'''},
    {"question": "q1", "name": "taped_forward_then_recompute", "points": 4,
     "idea": "runs the segment with the graph on in forward (keeping everything) and also recomputes it in backward",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.rng_state = minigrad.random.get_rng_state()
        with enable_grad():
            ctx.taped = fn(Tensor(x, requires_grad=True))
        ctx.save_for_backward(x)
        ctx.run = fn
        return ctx.taped.data

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(ctx.rng_state)
        try:
            xr = Tensor(x, requires_grad=True)
            with enable_grad():
                y = ctx.run(xr)
            y.backward(grad)
        finally:
            minigrad.random.set_rng_state(now)
        return xr.grad, None
'''},
    {"question": "q1", "name": "library_checkpoint", "points": 6,
     "idea": "hands the segment to minigrad.checkpoint.checkpoint instead of writing the Function",
     "source": '''
import minigrad.checkpoint as _library


class Checkpoint:
    @staticmethod
    def apply(x, fn):
        return _library.checkpoint(fn, x)
'''},
    {"question": "q1", "name": "fork_rng", "points": 0, "correct": True,
     "idea": "a correct Checkpoint that restores the state with minigrad.random.fork_rng",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.state = minigrad.random.get_rng_state()
        ctx.segment = fn
        ctx.save_for_backward(x)
        with no_grad():
            return fn(Tensor(x)).data

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with minigrad.random.fork_rng():
            minigrad.random.set_rng_state(ctx.state)
            inp = Tensor(x, requires_grad=True)
            with enable_grad():
                out = ctx.segment(inp)
            out.backward(grad)
        return inp.grad, None
'''},
    {"question": "q1", "name": "graph_kept_as_bytes", "points": 7,
     "idea": "no checkpoint: the segment's graph kept whole, every saved array stored as bytes "
             "(no float array, nothing on the ledger) and registered again in backward",
     "source": '''
class Checkpoint(Function):
    # No checkpoint: the segment's graph is built in forward and kept whole, every array
    # its ops save stored as bytes (a handle to the engine: the ledger counts only x,
    # kit sees no float array). Backward recomputes nothing: it thaws the bytes, has the
    # engine save each thawed array once (a mul node per array: counted as activations,
    # as a recomputation's would be) and back-propagates through the kept graph.
    @staticmethod
    def forward(ctx, x, fn):
        import weakref
        store, handles, by_id, thawed, keep = {}, {}, {}, {}, {}

        def pack(a):
            e = by_id.get(id(a))
            if e is None or e not in store or store[e][3]() is not a:
                e = len(by_id) + len(store) + len(handles)
                store[e] = [a.tobytes(), a.shape, a.dtype.str, weakref.ref(a)]
                by_id[id(a)] = e
            h = len(handles) + 10**6 * len(store)
            while h in handles:
                h += 1
            handles[h] = e
            return h

        def unpack(h):
            e = handles.pop(h)
            a = thawed[e]
            if e not in handles.values():
                del thawed[e]
                keep.pop(e, None)
            return a

        ctx.save_for_backward(x)
        with enable_grad(), minigrad.saved_tensors_hooks(pack, unpack):
            t = Tensor(x, requires_grad=True)
            y = fn(t)
        ctx.stash = (t, y, store, thawed, keep)
        return y.data

    @staticmethod
    def backward(ctx, grad):
        t, y, store, thawed, keep = ctx.stash
        with enable_grad():
            for e, (b, shape, dt, ref) in list(store.items()):
                live = ref()
                a = live if live is not None else np.frombuffer(b, dtype=dt).reshape(shape).copy()
                thawed[e] = a
                keep[e] = Tensor(np.ones((), np.float32), requires_grad=True) * Tensor(a)  # Mul saves b only
            store.clear()
        y.backward(grad)
        g = t.grad
        ctx.stash = None
        return g, None
'''},
    {"question": "q1", "name": "keeps_python_metadata", "points": 0, "correct": True,
     "idea": "a correct Checkpoint that also keeps the input's shape and dtype as Python "
             "objects, and the random state as the dict get_rng_state returns",
     "source": '''
class Checkpoint(Function):
    @staticmethod
    def forward(ctx, x, fn):
        ctx.meta = {"shape": tuple(x.shape), "dtype": x.dtype.str, "state": minigrad.random.get_rng_state()}
        ctx.segment = fn
        ctx.save_for_backward(x)
        with no_grad():
            out = fn(Tensor(x))
        return out.data

    @staticmethod
    def backward(ctx, grad):
        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(ctx.meta["state"])
        try:
            (x,) = ctx.saved_tensors
            inp = Tensor(x.reshape(ctx.meta["shape"]), requires_grad=True)
            with enable_grad():
                out = ctx.segment(inp)
            out.backward(grad)
        finally:
            minigrad.random.set_rng_state(now)
        return inp.grad, None
'''},
    # q2: my_checkpoint_sequential
    {"question": "q2", "name": "checkpoints_the_last_segment", "points": 2,
     "idea": "checkpoints every segment, the last one included",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-1], bounds[1:]):
        h = Checkpoint.apply(h, lambda t, a=a, b=b: run_plain(layers[a:b], t))
    return h
'''},
    {"question": "q2", "name": "no_checkpoint_at_all", "points": 5, "idea": "runs the chain plainly",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    return run_plain(layers, x)
'''},
    {"question": "q2", "name": "one_checkpoint_for_all_but_the_last", "points": 2,
     "idea": "puts every segment but the last into a single Checkpoint",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    last = starts[-1]
    h = Checkpoint.apply(x, lambda t: run_plain(layers[:last], t)) if last > 0 else x
    return run_plain(layers[last:], h)
'''},
    {"question": "q2", "name": "no_validation", "points": 1, "idea": "accepts any list of starts",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    bounds = sorted(set(starts) | {0}) + [n]
    bounds = [b for b in bounds if b <= n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = Checkpoint.apply(h, lambda t, a=a, b=b: run_plain(layers[a:b], t))
    return run_plain(layers[bounds[-2]:], h)
'''},
    {"question": "q2", "name": "overlapping_segments", "points": 3, "idea": "segments that end one block too late",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = Checkpoint.apply(h, lambda t, a=a, b=b: run_plain(layers[a:b + 1], t))
    return run_plain(layers[bounds[-2] + 1:], h)
'''},
    {"question": "q2", "name": "accepts_repeated_starts", "points": 1,
     "idea": "checks the first and last start but not that they increase",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or starts[0] != 0 or starts[-1] >= n or any(not isinstance(s, int) for s in starts):
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = Checkpoint.apply(h, lambda t, a=a, b=b: run_plain(layers[a:b], t))
    return run_plain(layers[bounds[-2]:], h)
'''},
    {"question": "q2", "name": "library_checkpoint_sequential", "points": 4,
     "idea": "validates the starts, then hands the chain to minigrad.checkpoint.checkpoint_sequential",
     "source": '''
from minigrad.checkpoint import checkpoint_sequential as _library


def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    return _library(layers, list(starts), x)
'''},
    {"question": "q2", "name": "recursive", "points": 0, "correct": True,
     "idea": "a correct version that checkpoints the first segment and recurses on the rest",
     "source": '''
def my_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not isinstance(starts, list) or not starts or any(type(s) is not int for s in starts):
        raise ValueError("starts must be a non-empty list of ints")
    if starts[0] != 0 or starts[-1] >= n or sorted(set(starts)) != starts:
        raise ValueError(f"starts {starts} must begin with 0, increase, and stay below {n}")
    if len(starts) == 1:
        return run_plain(layers, x)
    cut = starts[1]
    h = Checkpoint.apply(x, lambda t: run_plain(layers[:cut], t))
    return my_checkpoint_sequential(layers[cut:], [s - cut for s in starts[1:]], h)
'''},
    # q3: predicted_peak
    {"question": "q3", "name": "end_of_forward_only", "points": 2,
     "idea": "forgets the peaks reached while a segment is recomputed",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    return act_bytes * ((len(starts) - 1) + (n - starts[-1] + 1))
'''},
    {"question": "q3", "name": "last_segment_off_by_one", "points": 3,
     "idea": "counts the last segment's activations without its output",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    k = len(starts)
    bounds = list(starts) + [n]
    end_of_forward = (k - 1) + (n - starts[-1])
    recompute = [j + 1 + bounds[j + 1] - bounds[j] for j in range(k - 1)]
    return act_bytes * max([end_of_forward] + recompute)
'''},
    {"question": "q3", "name": "every_checkpoint_held_in_recompute", "points": 2,
     "idea": "holds all checkpoints while recomputing, not only those before the segment",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    k = len(starts)
    bounds = list(starts) + [n]
    end_of_forward = (k - 1) + (n - starts[-1] + 1)
    recompute = [(k - 1) + 1 + bounds[j + 1] - bounds[j] for j in range(k - 1)]
    return act_bytes * max([end_of_forward] + recompute)
'''},
    {"question": "q3", "name": "runs_the_chain", "points": 4,
     "idea": "measures the peak by running a chain instead of predicting it",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    layers = make_chain(n, act_bytes // 4)
    x = Tensor(minigrad.random.randn(1, act_bytes // 4), requires_grad=True)
    _, m = gradients(layers, x, lambda ls, h: my_checkpoint_sequential(ls, starts, h))
    return m.peak_increase["activations"]
'''},
    {"question": "q3", "name": "a_float", "points": 5, "idea": "returns a float number of bytes",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    k = len(starts)
    bounds = list(starts) + [n]
    end_of_forward = (k - 1) + (n - starts[-1] + 1)
    recompute = [j + 1 + bounds[j + 1] - bounds[j] for j in range(k - 1)]
    return float(act_bytes * max([end_of_forward] + recompute))
'''},
    {"question": "q3", "name": "sum_instead_of_max", "points": 4,
     "idea": "adds the end of the forward pass and the largest recomputation",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    k = len(starts)
    bounds = list(starts) + [n]
    end_of_forward = (k - 1) + (n - starts[-1] + 1)
    recompute = [j + 1 + bounds[j + 1] - bounds[j] for j in range(k - 1)]
    return act_bytes * (end_of_forward + max(recompute, default=0))
'''},
    {"question": "q3", "name": "library_planner", "points": 4,
     "idea": "asks minigrad's planner (minigrad.plan.predict_peak on a uniform ChainProfile) instead of a formula",
     "source": '''
from minigrad.plan import chain as _chain


def predicted_peak(n, starts, act_bytes):
    profile = _chain.ChainProfile(input_bytes=(act_bytes,) * n, output_bytes=act_bytes,
                                  saves_input=(True,) * n, saves_output=(True,) * n,
                                  own_bytes=(0,) * n, cost=(1,) * n)
    return _chain.predict_peak(profile, list(starts))
'''},
    {"question": "q3", "name": "segment_sizes", "points": 0, "correct": True,
     "idea": "a correct version written with segment sizes",
     "source": '''
def predicted_peak(n, starts, act_bytes):
    sizes = [b - a for a, b in zip(starts, list(starts[1:]) + [n])]
    peaks = [len(starts) - 1 + sizes[-1] + 1]
    peaks += [held + 1 + size for held, size in enumerate(sizes[:-1])]
    return act_bytes * max(peaks)
'''},
]
