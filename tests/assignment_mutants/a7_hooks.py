"""Wrong answers to a7_hooks that the grader must catch (scripts/probe_assignment.py)."""
# ruff: noqa: C408 (the suite's format: one dict(...) per wrong answer)
MUTANTS = [
    dict(question="q1", name="stash_and_throwaway_recompute", points=5,
         idea="pack keeps every array in its closure and returns an index (the ledger sees "
              "nothing); backward reads the stash and calls fn once for show",
         source='''
def hook_checkpoint(fn, x):
    rng_state = minigrad.random.get_rng_state()
    stash, done = [], []

    def pack(array):
        stash.append(array)
        return len(stash) - 1

    def unpack(k):
        if not done:
            done.append(1)
            now = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(rng_state)
            with enable_grad():
                fn(Tensor(x.data, requires_grad=True))
            minigrad.random.set_rng_state(now)
        return stash[k]

    with saved_tensors_hooks(pack, unpack):
        return fn(x)
'''),
    dict(question="q1", name="stash_in_a_global", points=5,
         idea="the arrays stashed in a module-level dict keyed by handle, no recomputation",
         source='''
_STASH = {}


def hook_checkpoint(fn, x):
    def pack(array):
        _STASH[len(_STASH)] = array
        return len(_STASH) - 1

    calls = [fn]

    def unpack(k):
        if calls:
            calls.pop()(Tensor(x.data, requires_grad=True))
        return _STASH[k]

    with saved_tensors_hooks(pack, unpack):
        return fn(x)
'''),
    dict(question="q1", name="pack_returns_the_array", points=5,
         idea="pack returns the array itself (identity hooks): nothing is checkpointed",
         source='''
def hook_checkpoint(fn, x):
    with saved_tensors_hooks(lambda a: a, lambda a: a):
        return fn(x)
'''),
    dict(question="q1", name="recompute_per_unpack", points=1,
         idea="recomputes the whole segment on every unpack instead of once",
         source='''
def hook_checkpoint(fn, x):
    rng_state = minigrad.random.get_rng_state()
    handles = itertools.count()

    def unpack(k):
        rebuilt = []

        def collect(array):
            rebuilt.append(array)
            return len(rebuilt) - 1

        now = minigrad.random.get_rng_state()
        minigrad.random.set_rng_state(rng_state)
        try:
            with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                fn(Tensor(x.data, requires_grad=True))
        finally:
            minigrad.random.set_rng_state(now)
        return rebuilt[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
    dict(question="q1", name="no_rng_replay", points=2,
         idea="recomputes without replaying the random state (dropout draws new masks)",
         source='''
def hook_checkpoint(fn, x):
    rebuilt = []
    handles = itertools.count()

    def collect(array):
        rebuilt.append(array)
        return len(rebuilt) - 1

    def unpack(k):
        if not rebuilt:
            with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                fn(Tensor(x.data, requires_grad=True))
        return rebuilt[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
    dict(question="q1", name="rng_not_restored", points=2,
         idea="replays the random state but leaves it there (later draws repeat the segment's)",
         source='''
def hook_checkpoint(fn, x):
    rng_state = minigrad.random.get_rng_state()
    rebuilt = []
    handles = itertools.count()

    def collect(array):
        rebuilt.append(array)
        return len(rebuilt) - 1

    def unpack(k):
        if not rebuilt:
            minigrad.random.set_rng_state(rng_state)
            with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                fn(Tensor(x.data, requires_grad=True))
        return rebuilt[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
    dict(question="q1", name="arrays_in_reverse_order", points=4,
         idea="hands the rebuilt arrays back in reverse order (the order backward unpacks them)",
         source='''
def hook_checkpoint(fn, x):
    rng_state = minigrad.random.get_rng_state()
    rebuilt = []
    handles = itertools.count()

    def collect(array):
        rebuilt.insert(0, array)
        return 0

    def unpack(k):
        if not rebuilt:
            now = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(rng_state)
            try:
                with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                    fn(Tensor(x.data, requires_grad=True))
            finally:
                minigrad.random.set_rng_state(now)
        return rebuilt[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
    dict(question="q2", name="never_checkpoints", points=1,
         idea="validates starts, then runs every layer plainly",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    return run_plain(layers, x)
'''),
    dict(question="q2", name="checkpoints_the_last_segment_too", points=1,
         idea="checkpoints every segment, the last included",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-1], bounds[1:]):
        h = hook_checkpoint(lambda t, a=a, b=b: run_plain(layers[a:b], t), h)
    return h
'''),
    dict(question="q2", name="drops_the_last_segment", points=3,
         idea="off by one: the layers after the last start are never run",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or any(not isinstance(s, int) for s in starts) or starts[0] != 0 \\
            or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n:
        raise ValueError(f"bad starts {starts!r} for {n} layers")
    h = x
    for a, b in zip(starts[:-1], starts[1:]):
        h = hook_checkpoint(lambda t, a=a, b=b: run_plain(layers[a:b], t), h)
    return h
'''),
    dict(question="q2", name="no_validation", points=1,
         idea="never checks starts",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = hook_checkpoint(lambda t, a=a, b=b: run_plain(layers[a:b], t), h)
    return run_plain(layers[bounds[-2]:], h)
'''),
    dict(question="q2", name="accepts_non_int_and_end_start", points=1,
         idea="checks order only: a float start and a start equal to len(layers) pass",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not starts or starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])):
        raise ValueError(f"bad starts {starts!r}")
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = hook_checkpoint(lambda t, a=a, b=b: run_plain(layers[a:b], t), h)
    return run_plain(layers[bounds[-2]:], h)
'''),
    dict(question="q2", name="assert_instead_of_valueerror", points=1,
         idea="validates with assert (AssertionError, not ValueError)",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    assert starts and all(isinstance(s, int) for s in starts), "starts must be ints"
    assert starts[0] == 0 and starts[-1] < n, "starts must begin with 0 and stay below n"
    assert all(b > a for a, b in zip(starts, starts[1:])), "starts must increase"
    bounds = list(starts) + [n]
    h = x
    for a, b in zip(bounds[:-2], bounds[1:-1]):
        h = hook_checkpoint(lambda t, a=a, b=b: run_plain(layers[a:b], t), h)
    return run_plain(layers[bounds[-2]:], h)
'''),
    dict(question="q1", name="keeps_every_rebuilt_array", points=1,
         idea="chapter 8's checkpoint with the random state replayed: right gradients, one "
              "recomputation, but every rebuilt array stays in the closure until the "
              "segment's backward is over",
         source='''
def hook_checkpoint(fn, x):
    rng_state = minigrad.random.get_rng_state()
    rebuilt = []
    handles = itertools.count()

    def collect(array):
        rebuilt.append(array)
        return len(rebuilt) - 1

    def unpack(k):
        if not rebuilt:
            now = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(rng_state)
            try:
                with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                    fn(Tensor(x.data, requires_grad=True))
            finally:
                minigrad.random.set_rng_state(now)
        return rebuilt[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
    dict(question="q1", name="hides_rebuilt_arrays_in_an_object_array", points=1,
         idea="chapter 8's leak, disguised: each handed-out array moves into a NumPy object "
              "array, which a heap walk over gc referents alone does not look inside",
         source='''
def hook_checkpoint(fn, x):
    import numpy as np
    rng_state = minigrad.random.get_rng_state()
    rebuilt, attic = {}, np.empty(1000, dtype=object)
    handles = itertools.count()
    done = []

    def collect(array):
        rebuilt[len(rebuilt)] = array
        return len(rebuilt) - 1

    def unpack(k):
        if not done:
            done.append(1)
            now = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(rng_state)
            try:
                with saved_tensors_hooks(collect, lambda j: rebuilt[j]), enable_grad():
                    fn(Tensor(x.data, requires_grad=True))
            finally:
                minigrad.random.set_rng_state(now)
        attic[k] = rebuilt.pop(k)
        return attic[k]

    with saved_tensors_hooks(lambda array: next(handles), unpack):
        return fn(x)
'''),
    dict(question="q1", name="frees_by_overwriting_with_none", points=0, correct=True,
         idea="a correct checkpoint that keeps the rebuilt arrays in a list and overwrites "
              "each with None once handed out; the random state put back with fork-style "
              "save and restore",
         source='''
def hook_checkpoint(fn, x):
    state = minigrad.random.get_rng_state()
    slots = None
    count = 0

    def pack(array):
        nonlocal count
        count += 1
        return count - 1

    def unpack(k):
        nonlocal slots
        if slots is None:
            slots = []
            current = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(state)
            try:
                with enable_grad(), saved_tensors_hooks(lambda a: slots.append(a) or len(slots) - 1,
                                                        lambda j: slots[j]):
                    fn(Tensor(x.data, requires_grad=True))
            finally:
                minigrad.random.set_rng_state(current)
        array, slots[k] = slots[k], None
        return array

    with saved_tensors_hooks(pack, unpack):
        return fn(x)
'''),
    dict(question="q1", name="frees_each_rebuilt_array", points=0, correct=True,
         idea="a correct checkpoint that drops each rebuilt array once it is unpacked, keeps "
              "the random state in an object, and restores it with try/finally",
         source='''
class _Segment:
    __slots__ = ("fn", "x", "state", "rebuilt", "count")


def hook_checkpoint(fn, x):
    seg = _Segment()
    seg.fn, seg.x, seg.state, seg.rebuilt, seg.count = fn, x, minigrad.random.get_rng_state(), None, 0

    def pack(array):
        seg.count += 1
        return seg.count - 1

    def unpack(k):
        if seg.rebuilt is None:
            seg.rebuilt = {}
            now = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(seg.state)
            try:
                def collect(a):
                    seg.rebuilt[len(seg.rebuilt)] = a
                    return len(seg.rebuilt) - 1
                with saved_tensors_hooks(collect, lambda j: seg.rebuilt[j]), enable_grad():
                    seg.fn(Tensor(seg.x.data, requires_grad=True))
            finally:
                minigrad.random.set_rng_state(now)
        return seg.rebuilt.pop(k)

    with saved_tensors_hooks(pack, unpack):
        return fn(x)
'''),
    dict(question="q1", name="arrays_kept_as_bytes", points=8,
         idea="no checkpoint: every saved array kept as bytes (no float array, nothing on "
              "the ledger), fn called once more with None, its error swallowed",
         source='''
def hook_checkpoint(fn, x):
    # No checkpoint: every saved array is kept, as a bytes object (not an ndarray, so
    # kit.live_float_arrays never sees it; a handle goes to the engine, so the ledger
    # counts nothing). Nothing is recomputed: fn is "called" once more with None, which
    # fails at once (the call is counted by the test's fn wrapper).
    import weakref
    store = {}      # entry -> [bytes, shape, dtype, weakref, pending handles]
    handles = {}    # handle -> entry
    by_id = {}
    thawed = {}
    state = {'first': True}

    def pack(a):
        e = by_id.get(id(a))
        if e is None or store[e][3]() is not a:
            e = len(store)
            store[e] = [a.tobytes(), a.shape, a.dtype.str, weakref.ref(a), 0]
            by_id[id(a)] = e
        store[e][4] += 1
        h = len(handles)
        handles[h] = e
        return h

    def unpack(h):
        if state['first']:
            state['first'] = False
            try:
                fn(None)
            except Exception:
                pass
            for e, (b, shape, dt, ref, n) in list(store.items()):
                live = ref()
                thawed[e] = live if live is not None else np.frombuffer(b, dtype=dt).reshape(shape).copy()
            store.clear()
        e = handles.pop(h)
        a = thawed[e]
        if e not in [v for v in handles.values()]:
            del thawed[e]
        return a

    with saved_tensors_hooks(pack, unpack):
        return fn(x)
'''),
    dict(question="q1", name="keeps_python_metadata", points=0, correct=True,
         idea="a correct checkpoint that keeps the input's shape and dtype and the random "
              "state as Python objects, and a count of handles per array",
         source='''
def hook_checkpoint(fn, x):
    info = {"shape": tuple(x.shape), "dtype": x.dtype.str, "state": minigrad.random.get_rng_state(),
            "packed": 0}
    rebuilt = {}

    def pack(array):
        info["packed"] += 1
        return info["packed"] - 1

    def unpack(k):
        if not rebuilt and info["packed"]:
            now = minigrad.random.get_rng_state()
            minigrad.random.set_rng_state(info["state"])
            try:
                def keep(a):
                    rebuilt[len(rebuilt)] = a
                    return len(rebuilt) - 1
                with saved_tensors_hooks(keep, rebuilt.get), enable_grad():
                    fn(Tensor(x.data.reshape(info["shape"]), requires_grad=True))
            finally:
                minigrad.random.set_rng_state(now)
            info["packed"] = 0
        return rebuilt.pop(k)

    with saved_tensors_hooks(pack, unpack):
        return fn(x)
'''),
    dict(question="q2", name="recursive", points=0, correct=True,
         idea="a correct version that checkpoints the first segment and recurses on the rest",
         source='''
def hook_checkpoint_sequential(layers, starts, x):
    n = len(layers)
    if not isinstance(starts, list) or not starts or any(type(s) is not int for s in starts):
        raise ValueError("starts must be a non-empty list of ints")
    if starts[0] != 0 or starts[-1] >= n or sorted(set(starts)) != starts:
        raise ValueError(f"starts {starts} must begin with 0, increase, and stay below {n}")
    if len(starts) == 1:
        return run_plain(layers, x)
    cut = starts[1]
    h = hook_checkpoint(lambda t: run_plain(layers[:cut], t), x)
    return hook_checkpoint_sequential(layers[cut:], [s - cut for s in starts[1:]], h)
'''),
]
