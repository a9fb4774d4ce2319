"""Wrong answers to a4_planning that the grader must catch, and correct ones it must not
(scripts/probe_assignment.py a4_planning --mutants; tests/test_assignment_mutants.py)."""

SEGMENT_PEAK = '''
def segment_peak(a, m, starts):
    n = len(m)
    bounds = list(starts) + [n]
    k = len(starts)

    def V(p, q):
        return {V}

    held = 0
    terms = []
    for j in range(k - 1):
        terms.append({TERM})
        held += a[bounds[j]]
    terms.append({LAST})
    return {REDUCE}(terms)
'''


def segment_peak(V="a[p] + sum(m[p:q])", TERM="held + V(bounds[j], bounds[j + 1])",
                 LAST="held + V(bounds[k - 1], n)", REDUCE="max"):
    return (SEGMENT_PEAK.replace("{V}", V).replace("{TERM}", TERM).replace("{LAST}", LAST)
            .replace("{REDUCE}", REDUCE))


BRUTE = '''
def brute_force_plan(a, m, c, budget):
    n = len(m)
    best = None
    for r in range({R}):
        for rest in itertools.combinations(range(1, n), r):
            starts = [0, *rest]
            if segment_peak(a, m, starts) {FITS} budget:
                cost = {COST}
                if best is None or {BETTER}:
                    best = (cost, starts)
    return best{EMPTY}
'''


def brute(R="n", FITS="<=", COST="sum(c[:starts[-1]])", BETTER="cost < best[0]", EMPTY=""):
    return (BRUTE.replace("{R}", R).replace("{FITS}", FITS).replace("{COST}", COST)
            .replace("{BETTER}", BETTER).replace("{EMPTY}", EMPTY))


OPTIMAL = '''
def optimal_plan(a, m, c, budget):
    n = len(m)

    def V(p, q):
        return {V}

    g, pred = [None] * n, [None] * n
    g[0] = 0
    for i in range(1, n):
        for p in range(i):
            if g[p] is not None and g[p] + V(p, i) {FITS} budget:
                held = {HELD}
                if g[i] is None or held < g[i]:
                    g[i], pred[i] = held, p
    for last in {ORDER}:
        if g[last] is not None and g[last] + V(last, n) {FITS} budget:
            starts = [last]
            while starts[-1] != 0:
                starts.append(pred[starts[-1]])
            return {COST}, starts[::-1]
    return None
'''


def optimal(V="a[p] + sum(m[p:q])", FITS="<=", HELD="g[p] + a[p]", ORDER="range(n)",
            COST="sum(c[:last])"):
    return (OPTIMAL.replace("{V}", V).replace("{FITS}", FITS).replace("{HELD}", HELD)
            .replace("{ORDER}", ORDER).replace("{COST}", COST))


PROFILE = '''
def chain_profile(widths, batch):
    a = [{A} for w in widths]
    m = {M}
    c = [{C} for i, o in zip(widths, widths[1:])]
    return a, m, c
'''


def profile(A="4 * batch * w", M="a[1:]", C="2 * batch * i * o"):
    return PROFILE.replace("{A}", A).replace("{M}", M).replace("{C}", C)


MUTANTS = [
    # q1: segment_peak
    {"question": "q1", "name": "checkpoints_not_held", "points": 2,
     "idea": "forgets the checkpoints kept while a later segment runs",
     "source": segment_peak(TERM="V(bounds[j], bounds[j + 1])", LAST="V(bounds[k - 1], n)")},
    {"question": "q1", "name": "last_segment_alone", "points": 2,
     "idea": "holds the checkpoints for every segment but the last",
     "source": segment_peak(LAST="V(bounds[k - 1], n)")},
    {"question": "q1", "name": "segment_without_its_input", "points": 3, "idea": "a segment's input is not counted",
     "source": segment_peak(V="sum(m[p:q])")},
    {"question": "q1", "name": "sum_of_the_segments", "points": 3, "idea": "adds the segments' peaks",
     "source": segment_peak(REDUCE="sum")},
    {"question": "q1", "name": "one_layer_too_many", "points": 3, "idea": "a segment counts the next layer's bytes",
     "source": segment_peak(V="a[p] + sum(m[p:q + 1])")},
    {"question": "q1", "name": "all_checkpoints_held", "points": 2,
     "idea": "holds every checkpoint during every segment",
     "source": segment_peak(TERM="sum(a[s] for s in starts[:-1]) + V(bounds[j], bounds[j + 1])",
                           LAST="sum(a[s] for s in starts[:-1]) + V(bounds[k - 1], n)")},
    {"question": "q1", "name": "prefix_sums", "points": 0, "correct": True, "idea": "a correct version with prefix sums",
     "source": '''
def segment_peak(a, m, starts):
    prefix = [0]
    for v in m:
        prefix.append(prefix[-1] + v)
    bounds = list(starts) + [len(m)]
    peak, held = 0, 0
    for p, q in zip(bounds, bounds[1:]):
        peak = max(peak, held + a[p] + prefix[q] - prefix[p])
        held += a[p]
    return peak
'''},
    # q2: brute_force_plan
    {"question": "q2", "name": "strictly_below_the_budget", "points": 1, "idea": "a plan must stay strictly below the budget",
     "source": brute(FITS="<")},
    {"question": "q2", "name": "cost_of_every_layer", "points": 3, "idea": "counts every layer as recomputed",
     "source": brute(COST="sum(c) if len(starts) > 1 else 0")},
    {"question": "q2", "name": "first_fit", "points": 2, "idea": "returns the first plan that fits, not the cheapest",
     "source": brute(BETTER="False")},
    {"question": "q2", "name": "empty_instead_of_none", "points": 1, "idea": "returns () when no plan fits",
     "source": brute(EMPTY=" or ()")},
    {"question": "q2", "name": "last_segment_recomputed", "points": 3,
     "idea": "counts the last segment's layers as recomputed",
     "source": brute(COST="sum(c[:starts[-1] + 1]) if len(starts) > 1 else 0")},
    {"question": "q2", "name": "two_segments_at_most", "points": 2, "idea": "tries one or two segments only",
     "source": brute(R="min(n, 2)")},
    {"question": "q2", "name": "calls_the_dynamic_program", "points": 2,
     "idea": "hands the work to optimal_plan (q3's dynamic program) instead of trying every plan",
     "source": '''
def brute_force_plan(a, m, c, budget):
    return optimal_plan(a, m, c, budget)
'''},
    {"question": "q2", "name": "recursive", "points": 0, "correct": True, "idea": "a correct recursive enumeration",
     "source": '''
def brute_force_plan(a, m, c, budget):
    n = len(m)

    def plans(prefix):
        yield prefix
        for s in range(prefix[-1] + 1, n):
            yield from plans(prefix + [s])

    fits = [(sum(c[:p[-1]]), p) for p in plans([0]) if segment_peak(a, m, p) <= budget]
    return min(fits, key=lambda t: t[0]) if fits else None
'''},
    # q3: optimal_plan
    {"question": "q3", "name": "checkpoints_not_held", "points": 4, "idea": "the DP forgets the checkpoints held",
     "source": optimal(HELD="0")},
    {"question": "q3", "name": "strictly_below_the_budget", "points": 1, "idea": "a plan must stay strictly below the budget",
     "source": optimal(FITS="<")},
    {"question": "q3", "name": "last_start_from_the_end", "points": 4,
     "idea": "takes the latest last start that fits, not the earliest",
     "source": optimal(ORDER="reversed(range(n))")},
    {"question": "q3", "name": "cost_off_by_one", "points": 6, "idea": "counts the last segment's first layer as recomputed",
     "source": optimal(COST="sum(c[:last + 1]) if last else 0")},
    {"question": "q3", "name": "segment_without_its_input", "points": 4, "idea": "a segment's input is not counted",
     "source": optimal(V="sum(m[p:q])")},
    {"question": "q3", "name": "sqrt_segments", "points": 5, "idea": "a fixed sqrt(n) plan, not the cheapest",
     "source": '''
def optimal_plan(a, m, c, budget):
    n = len(m)
    step = max(1, int(math.isqrt(n)))
    for starts in ([0], list(range(0, n, step)), list(range(n))):
        if segment_peak(a, m, starts) <= budget:
            return sum(c[:starts[-1]]), starts
    return None
'''},
    {"question": "q3", "name": "brute_force_when_small", "points": 5,
     "idea": "no dynamic program: q2's brute force on short chains, nothing on long ones",
     "source": '''
def optimal_plan(a, m, c, budget):
    if len(m) <= 12:
        return brute_force_plan(a, m, c, budget)
    return None
'''},
    {"question": "q3", "name": "held_as_the_last_checkpoint", "points": 0, "correct": True,
     "idea": "a correct DP that keeps, for every start, the least held bytes",
     "source": '''
def optimal_plan(a, m, c, budget):
    n = len(m)
    best = {0: (0, [0])}                      # start -> (held before it, starts)
    for i in range(1, n):
        options = [(h + a[p], s + [i]) for p, (h, s) in best.items()
                   if p < i and h + a[p] + sum(m[p:i]) <= budget]
        if options:
            best[i] = min(options, key=lambda t: t[0])
    for last in sorted(best):
        h, s = best[last]
        if h + a[last] + sum(m[last:]) <= budget:
            return sum(c[:last]), s
    return None
'''},
    # q4: chain_profile
    {"question": "q4", "name": "float64_bytes", "points": 3, "idea": "counts 8 bytes per number",
     "source": profile(A="8 * batch * w")},
    {"question": "q4", "name": "forgets_the_batch", "points": 3, "idea": "sizes without the batch",
     "source": profile(A="4 * w", C="2 * i * o")},
    {"question": "q4", "name": "multiply_only", "points": 2, "idea": "counts a multiply-add as one FLOP",
     "source": profile(C="batch * i * o")},
    {"question": "q4", "name": "nothing_saved_inside", "points": 2, "idea": "a block saves nothing but its input",
     "source": profile(M="[0] * (len(widths) - 1)")},
    {"question": "q4", "name": "m_of_the_input", "points": 2, "idea": "m is the layer's input, not its output",
     "source": profile(M="a[:-1]")},
    {"question": "q4", "name": "numpy_ints", "points": 0, "correct": True, "idea": "correct, with NumPy integers",
     "source": '''
def chain_profile(widths, batch):
    w = np.array(widths, dtype=np.int64)
    a = 4 * batch * w
    return list(a), list(a[1:]), list(2 * batch * w[:-1] * w[1:])
'''},
]
