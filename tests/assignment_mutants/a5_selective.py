"""Wrong answers to a5_selective that the grader must catch (scripts/probe_assignment.py)."""
# ruff: noqa: C408 (the suite's format: one dict(...) per wrong answer)
_METER = '''
class SavedTensorMeter:
    def __init__(self, params=()):
        self.param_storages = {p.untyped_storage().data_ptr() for p in params}
        self.param_ids = {id(p) for p in params}
        self.saved_bytes = 0
        self.n_saved = 0
        self.seen = set()
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def pack(self, t):
%s

    def unpack(self, t):
%s

    def __enter__(self):
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)
'''
_UNPACK = "        return t"


def _meter(pack, unpack=_UNPACK):
    return _METER % (pack, unpack)


_BY_SHAPE = '''
def saved_by_shape(fn, x, params=()):
    skip = {p.untyped_storage().data_ptr() for p in params}
    seen, by_shape = set(), {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
%s
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(x)
    return by_shape
'''

MUTANTS = [
    dict(question="q1", name="bytes_per_save", points=3,
         idea="adds the bytes at every save: a storage saved twice counts twice",
         source=_meter('''        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.param_storages:
            self.n_saved += 1
            self.saved_bytes += t.untyped_storage().nbytes()
        return t''')),
    dict(question="q1", name="tensor_nbytes_not_storage", points=1,
         idea="counts t.numel() * t.element_size(), the view's bytes, not its storage's",
         source=_meter('''        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.param_storages:
            self.n_saved += 1
            if ptr not in self.seen:
                self.seen.add(ptr)
                self.saved_bytes += t.numel() * t.element_size()
        return t''')),
    dict(question="q1", name="params_by_identity", points=3,
         idea="skips parameters by id(t): the weight a linear layer saves is another tensor object",
         source=_meter('''        ptr = t.untyped_storage().data_ptr()
        if id(t) not in self.param_ids:
            self.n_saved += 1
            if ptr not in self.seen:
                self.seen.add(ptr)
                self.saved_bytes += t.untyped_storage().nbytes()
        return t''')),
    dict(question="q1", name="n_saved_counts_distinct", points=1,
         idea="n_saved counts distinct storages, not saves",
         source=_meter('''        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.param_storages and ptr not in self.seen:
            self.seen.add(ptr)
            self.n_saved += 1
            self.saved_bytes += t.untyped_storage().nbytes()
        return t''')),
    dict(question="q1", name="pack_keeps_a_copy", points=2,
         idea="pack returns a clone (the meter doubles what the forward pass holds)",
         source=_meter('''        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.param_storages:
            self.n_saved += 1
            if ptr not in self.seen:
                self.seen.add(ptr)
                self.saved_bytes += t.untyped_storage().nbytes()
        return t.detach().clone()''')),
    dict(question="q1", name="unpack_returns_nothing", points=2,
         idea="unpack left as a stub: backward through the meter fails",
         source=_meter('''        ptr = t.untyped_storage().data_ptr()
        if ptr not in self.param_storages:
            self.n_saved += 1
            if ptr not in self.seen:
                self.seen.add(ptr)
                self.saved_bytes += t.untyped_storage().nbytes()
        return t''', "        return None")),
    dict(question="q2", name="counts_every_save", points=2,
         idea="adds a storage's bytes at every save",
         source=_BY_SHAPE % '''        if ptr not in skip:
            shape = tuple(t.shape)
            by_shape[shape] = by_shape.get(shape, 0) + t.untyped_storage().nbytes()'''),
    dict(question="q2", name="last_shape_wins", points=2,
         idea="files a storage under the shape it was saved with last",
         source=_BY_SHAPE % '''        if ptr not in skip:
            owner = getattr(pack, "owner", None)
            if owner is None:
                owner = pack.owner = {}
            if ptr in owner:
                old = owner[ptr]
                by_shape[old] -= t.untyped_storage().nbytes()
                if not by_shape[old]:
                    del by_shape[old]
            owner[ptr] = tuple(t.shape)
            by_shape[owner[ptr]] = by_shape.get(owner[ptr], 0) + t.untyped_storage().nbytes()'''),
    dict(question="q2", name="view_bytes", points=2,
         idea="counts the saved view's bytes instead of its storage's",
         source=_BY_SHAPE % '''        if ptr not in skip and ptr not in seen:
            seen.add(ptr)
            shape = tuple(t.shape)
            by_shape[shape] = by_shape.get(shape, 0) + t.numel() * t.element_size()'''),
    dict(question="q2", name="params_not_skipped", points=2,
         idea="forgets to skip the parameters' storages",
         source=_BY_SHAPE % '''        if ptr not in seen:
            seen.add(ptr)
            shape = tuple(t.shape)
            by_shape[shape] = by_shape.get(shape, 0) + t.untyped_storage().nbytes()'''),
    dict(question="q2", name="flat_shape", points=3,
         idea="keys by the number of elements (t.numel(),) instead of the shape",
         source=_BY_SHAPE % '''        if ptr not in skip and ptr not in seen:
            seen.add(ptr)
            shape = (t.numel(),)
            by_shape[shape] = by_shape.get(shape, 0) + t.untyped_storage().nbytes()'''),
    dict(question="q3", name="save_everything", points=5,
         idea="MUST_SAVE for every op: no memory saved",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE
'''),
    dict(question="q3", name="recompute_everything", points=5,
         idea="PREFER_RECOMPUTE for every op: full checkpointing, the matrix products redone",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.PREFER_RECOMPUTE
'''),
    dict(question="q3", name="saves_the_attention_scores", points=5,
         idea="keeps the matrix products and the softmax: the (B, h, T, T) scores are the bulk",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    if op in (aten.mm.default, aten.addmm.default, aten.bmm.default, aten._softmax.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
'''),
    dict(question="q3", name="saves_only_the_attention_bmm", points=5,
         idea="keeps the attention's batched products, recomputes the linear layers",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    if op == aten.bmm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
'''),
    dict(question="q3", name="decides_by_call_count", points=4,
         idea="saves the calls at the positions the linear layers had in the public block",
         source='''
_CALLS = []


def my_policy(ctx, op, *args, **kwargs):
    if ctx.is_recompute:
        return CheckpointPolicy.PREFER_RECOMPUTE
    _CALLS.append(op)
    k = (len(_CALLS) - 1) % 31
    return CheckpointPolicy.MUST_SAVE if k in (3, 20, 25, 28) else CheckpointPolicy.PREFER_RECOMPUTE
'''),
    dict(question="q3", name="saves_mm_but_not_addmm", points=4,
         idea="keeps aten.mm only: the linear layers (addmm) are recomputed",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    if op == aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
'''),
    dict(question="q3", name="policy_inverted_in_recompute", points=4,
         idea="answers by ctx.is_recompute: saves during the recomputation, recomputes in the forward",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    if ctx.is_recompute and op in (aten.mm.default, aten.addmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
'''),
    dict(question="q1", name="dict_of_storages", points=0, correct=True,
         idea="a correct meter that keeps {storage: bytes} and reads saved_bytes as a property",
         source='''
class SavedTensorMeter:
    def __init__(self, params=()):
        self.skip = {p.untyped_storage().data_ptr() for p in params}
        self.sizes, self.n_saved = {}, 0
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    @property
    def saved_bytes(self):
        return sum(self.sizes.values())

    def pack(self, t):
        st = t.untyped_storage()
        if st.data_ptr() not in self.skip:
            self.n_saved += 1
            self.sizes.setdefault(st.data_ptr(), st.nbytes())
        return t

    def unpack(self, t):
        return t

    def __enter__(self):
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)
'''),
    dict(question="q2", name="with_the_meter_order", points=0, correct=True,
         idea="a correct version that records (ptr, shape, bytes) in order, then groups",
         source='''
def saved_by_shape(fn, x, params=()):
    skip = {p.untyped_storage().data_ptr() for p in params}
    log = []

    def pack(t):
        log.append((t.untyped_storage().data_ptr(), tuple(t.shape), t.untyped_storage().nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x)
    first = {}
    for ptr, shape, nbytes in log:
        if ptr not in skip and ptr not in first:
            first[ptr] = (shape, nbytes)
    out = {}
    for shape, nbytes in first.values():
        out[shape] = out.get(shape, 0) + nbytes
    return out
'''),
    dict(question="q3", name="by_op_name", points=0, correct=True,
         idea="a correct policy that decides by the op's name",
         source='''
def my_policy(ctx, op, *args, **kwargs):
    name = str(op)
    if name.startswith(("aten.mm", "aten.addmm")):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
'''),
]
