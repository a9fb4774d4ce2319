"""Wrong answers to a6_nested that the grader must catch (scripts/probe_assignment.py)."""
# ruff: noqa: C408 (the suite's format: one dict(...) per wrong answer)
MUTANTS = [
    dict(question="q1", name="never_checkpoints", points=6,
         idea="runs every block with the graph on, checkpoints ignored (right gradients)",
         source='''
def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        else:
            h = run_nested(layers, item[3], h)
    return h
'''),
    dict(question="q1", name="flat_checkpoints", points=5,
         idea="a checkpoint recomputes its blocks plainly: the inner items (the nesting) ignored",
         source='''
def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        else:
            _, s, t, inner = item
            h = checkpoint(lambda u, s=s, t=t: run_plain(layers[s:t], u), h, use_reentrant=True)
    return h
'''),
    dict(question="q1", name="late_binding_closure", points=3,
         idea="the lambda reads the loop's inner when backward runs: the last checkpoint's",
         source='''
def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        else:
            _, s, t, inner = item
            h = checkpoint(lambda u: run_nested(layers, inner, u), h, use_reentrant=True)
    return h
'''),
    dict(question="q1", name="every_block_checkpointed", points=3,
         idea="wraps taped blocks in checkpoints too (saves less than the schedule says)",
         source='''
def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = checkpoint(layers[item[1]], h, use_reentrant=True)
        else:
            _, s, t, inner = item
            h = checkpoint(lambda u, inner=inner: run_nested(layers, inner, u), h, use_reentrant=True)
    return h
'''),
    dict(question="q1", name="checkpoint_on_a_detached_input", points=4,
         idea="checkpoints on h.detach(): nothing flows back to the blocks before",
         source='''
def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        else:
            _, s, t, inner = item
            h = checkpoint(lambda u, inner=inner: run_nested(layers, inner, u),
                           Tensor(h.data, requires_grad=True), use_reentrant=True)
    return h
'''),
    dict(question="q1", name="stashes_the_segment_outputs", points=2,
         idea="checkpoints as told but keeps every segment's forward activations in a list",
         source='''
_KEPT = []


def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        else:
            _, s, t, inner = item

            def f(u, inner=inner):
                out = run_nested(layers, inner, u)
                _KEPT.append(out.data.copy())
                return out
            h = checkpoint(f, h, use_reentrant=True)
    return h
'''),
    dict(question="q2", name="sums_without_sets", points=5,
         idea="adds a[i] + a[i+1] per taped block: an activation two blocks keep counts twice",
         source='''
def nested_peak(a, items, held=0):
    current, peaks = held, []
    for item in items:
        if item[0] == "taped":
            current += a[item[1]] + a[item[1] + 1]
        else:
            _, s, t, inner = item
            peaks.append(nested_peak(a, inner, current + a[s]))
            current += a[s]
    return max([current] + peaks)
'''),
    dict(question="q2", name="forward_only", points=4,
         idea="the end of the forward pass only, recomputations forgotten",
         source='''
def nested_peak(a, items):
    held = set()
    for item in items:
        if item[0] == "taped":
            held |= {item[1], item[1] + 1}
        else:
            held |= {item[1]}
    return sum(a[i] for i in held)
'''),
    dict(question="q2", name="recompute_forgets_the_items_before", points=4,
         idea="a recomputation runs on top of the outer level's set only (what the items "
              "before it on its own level keep is forgotten)",
         source='''
def nested_peak(a, items, held=frozenset()):
    current, peaks = set(held), []
    for item in items:
        if item[0] == "taped":
            current |= {item[1], item[1] + 1}
        else:
            _, s, t, inner = item
            peaks.append(nested_peak(a, inner, frozenset(held | {s})))
            current |= {s}
    return max([sum(a[i] for i in current)] + peaks)
'''),
    dict(question="q2", name="input_never_counts", points=5,
         idea="leaves the chain's input x0 out (the caller owns it)",
         source='''
def nested_peak(a, items, held=frozenset()):
    current, peaks = set(held), []
    for item in items:
        if item[0] == "taped":
            current |= {item[1], item[1] + 1}
        else:
            _, s, t, inner = item
            peaks.append(nested_peak(a, inner, frozenset(current | {s})))
            current |= {s}
    return max([sum(a[i] for i in current if i > 0)] + peaks)
'''),
    dict(question="q2", name="recompute_on_the_whole_forward", points=4,
         idea="a recomputation runs on top of everything the forward pass keeps (items after it too)",
         source='''
def nested_peak(a, items, held=frozenset()):
    current = set(held)
    for item in items:
        current |= {item[1], item[1] + 1} if item[0] == "taped" else {item[1]}
    peaks = [nested_peak(a, item[3], frozenset(current)) for item in items if item[0] == "ckpt"]
    return max([sum(a[i] for i in current)] + peaks)
'''),
    dict(question="q2", name="taped_keeps_only_its_output", points=5,
         idea="a taped block keeps its output only (forgets the linear layer's input)",
         source='''
def nested_peak(a, items, held=frozenset()):
    current, peaks = set(held), []
    for item in items:
        if item[0] == "taped":
            current |= {item[1] + 1}
        else:
            _, s, t, inner = item
            peaks.append(nested_peak(a, inner, frozenset(current | {s})))
            current |= {s}
    return max([sum(a[i] for i in current)] + peaks)
'''),
    dict(question="q3", name="top_level_only", points=2,
         idea="counts each top-level checkpoint's blocks once, no recursion",
         source='''
def nested_recompute(c, items):
    return sum(sum(c[it[1]:it[2]]) for it in items if it[0] == "ckpt")
'''),
    dict(question="q3", name="union_of_checkpointed_blocks", points=2,
         idea="a block inside any checkpoint counts once, however deep",
         source='''
def nested_recompute(c, items):
    blocks = set()

    def visit(its):
        for it in its:
            if it[0] == "ckpt":
                blocks.update(range(it[1], it[2]))
                visit(it[3])
    visit(items)
    return sum(c[i] for i in blocks)
'''),
    dict(question="q3", name="off_by_one_end", points=3,
         idea="sums c[s:t + 1]: the block after the checkpoint too",
         source='''
def nested_recompute(c, items):
    total = 0
    for it in items:
        if it[0] == "ckpt":
            total += sum(c[it[1]:it[2] + 1]) + nested_recompute(c, it[3])
    return total
'''),
    dict(question="q3", name="counts_every_run", points=3,
         idea="the cost of all runs, the forward pass included",
         source='''
def nested_recompute(c, items):
    total = 0
    for it in items:
        if it[0] == "taped":
            total += c[it[1]]
        else:
            total += sum(c[it[1]:it[2]]) + nested_recompute(c, it[3])
    return total
'''),
    dict(question="q3", name="innermost_only", points=2,
         idea="counts only the checkpoints that hold no checkpoint",
         source='''
def nested_recompute(c, items):
    total = 0
    for it in items:
        if it[0] == "ckpt":
            inner = nested_recompute(c, it[3])
            nested = any(i[0] == "ckpt" for i in it[3])
            total += inner if nested else sum(c[it[1]:it[2]])
    return total
'''),
    dict(question="q1", name="recursive_on_the_list", points=0, correct=True,
         idea="a correct executor that recurses on the rest of the list, after checking the "
              "whole tree (blocks 0 .. n-1) with an explicit stack",
         source='''
def _covers(items, n):
    todo = [(items, 0, n)]
    while todo:
        level, start, end = todo.pop()
        at = start
        for item in level:
            if not isinstance(item, tuple) or not item or item[0] not in ("taped", "ckpt"):
                raise ValueError(f"unknown schedule item {item!r}")
            if item[0] == "taped":
                if len(item) != 2 or type(item[1]) is not int:
                    raise ValueError(f"bad taped item {item!r}")
                lo, hi = item[1], item[1] + 1
            else:
                if len(item) != 4 or type(item[1]) is not int or type(item[2]) is not int \
                        or not isinstance(item[3], list) or item[1] >= item[2]:
                    raise ValueError(f"bad checkpoint item {item!r}")
                lo, hi = item[1], item[2]
                todo.append((item[3], lo, hi))
            if at is not None and lo != at:
                raise ValueError(f"{item!r}: expected an item starting at block {at}")
            if lo < 0 or hi > n:
                raise ValueError(f"{item!r}: blocks must lie in 0 .. {n - 1}")
            at = hi
        if end is not None and at != end:
            raise ValueError(f"inner items stop at {at}, the checkpoint at {end}")


def _run(layers, items, x):
    if not items:
        return x
    head, rest = items[0], items[1:]
    if head[0] == "taped":
        h = layers[head[1]](x)
    else:
        inner = head[3]
        h = checkpoint(lambda u: _run(layers, inner, u), x, use_reentrant=True)
    return _run(layers, rest, h)


def run_nested(layers, items, x):
    items = list(items)
    _covers(items, len(layers))
    return _run(layers, items, x)
'''),
    dict(question="q1", name="raises_its_own_valueerror", points=0, correct=True,
         idea="a correct executor whose checks raise a subclass of ValueError, checking "
              "each level recursively and running through a nested function",
         source='''
class ScheduleError(ValueError):
    pass


def run_nested(layers, items, x):
    items = list(items)

    def check(level, start, end):
        at = start
        for item in level:
            if not (isinstance(item, tuple) and len(item) in (2, 4)
                    and item[0] == ("taped" if len(item) == 2 else "ckpt")):
                raise ScheduleError(f"bad item {item!r}")
            lo = item[1]
            hi = lo + 1 if item[0] == "taped" else item[2]
            if type(lo) is not int or type(hi) is not int or lo != at or hi <= lo or hi > end:
                raise ScheduleError(f"{item!r} does not continue at block {at} within {end}")
            if item[0] == "ckpt":
                if not isinstance(item[3], list):
                    raise ScheduleError(f"{item!r}: inner items must be a list")
                check(item[3], lo, hi)
            at = hi
        if at != end:
            raise ScheduleError(f"items end at {at}, not {end}")

    check(items, 0, len(layers))

    def go(level, h):
        for item in level:
            if item[0] == "taped":
                h = layers[item[1]](h)
            else:
                h = checkpoint(lambda u, inner=item[3]: go(inner, u), h, use_reentrant=True)
        return h

    return go(items, x)
'''),
    dict(question="q1", name="no_validation", points=1,
         idea="chapter 6's executor over tuples: runs any schedule it is given, bad ones "
              "included (an error, if any, only when a bad item is reached)",
         source='''
def run_nested(layers, items, x):
    h = x
    for item in items:
        if item[0] == "taped":
            h = layers[item[1]](h)
        elif item[0] == "ckpt":
            _, s, t, inner = item
            h = checkpoint(lambda u, inner=inner: run_nested(layers, inner, u), h, use_reentrant=True)
        else:
            raise ValueError(f"unknown item {item!r}")
    return h
'''),
    dict(question="q1", name="checks_each_item_as_it_runs", points=1,
         idea="checks every item, but only when it reaches it: the good blocks before a bad "
              "item have already run",
         source='''
def run_nested(layers, items, x, start=None, end=None):
    h, at = x, start
    for item in items:
        if not isinstance(item, tuple) or item[0] not in ("taped", "ckpt"):
            raise ValueError(f"unknown item {item!r}")
        lo = item[1]
        hi = lo + 1 if item[0] == "taped" else item[2]
        if type(lo) is not int or type(hi) is not int or lo >= hi or lo < 0 or hi > len(layers) \
                or (at is not None and lo != at):
            raise ValueError(f"bad item {item!r}")
        if item[0] == "taped":
            h = layers[lo](h)
        else:
            inner = item[3]
            h = checkpoint(lambda u, inner=inner, lo=lo, hi=hi: run_nested(layers, inner, u, lo, hi),
                           h, use_reentrant=True)
        at = hi
    if end is not None and at != end:
        raise ValueError(f"inner items stop at {at}, expected {end}")
    return h
'''),
    dict(question="q2", name="events_and_sets", points=0, correct=True,
         idea="a correct peak that walks the schedule with an explicit stack",
         source='''
def nested_peak(a, items):
    best = 0
    stack = [(items, frozenset())]
    while stack:
        its, held = stack.pop()
        current = set(held)
        for it in its:
            if it[0] == "ckpt":
                stack.append((it[3], frozenset(current | {it[1]})))
                current.add(it[1])
            else:
                current.update((it[1], it[1] + 1))
        best = max(best, sum(a[i] for i in current))
    return best
'''),
    dict(question="q3", name="depth_weighted", points=0, correct=True,
         idea="a correct cost: each block costs c[i] times the number of checkpoints around it",
         source='''
def nested_recompute(c, items, depth=0):
    total = 0
    for it in items:
        if it[0] == "taped":
            total += depth * c[it[1]]
        else:
            total += nested_recompute(c, it[3], depth + 1)
    return total
'''),
]
