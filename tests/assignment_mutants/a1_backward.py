"""Wrong answers to a1_backward that the grader must catch, and correct ones it must not
(scripts/probe_assignment.py a1_backward --mutants; tests/test_assignment_mutants.py)."""


def op(name, save, forward, backward):
    return f'''
class {name}(Function):
    @staticmethod
    def forward(ctx, *args):
        {save}
        return {forward}

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        return {backward}
'''


GRADCHECK = '''
def numerical_grad(f, x, eps=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        f_plus = f(x)
        x[i] = old - eps
        f_minus = f(x)
        x[i] = {RESTORE}
        grad[i] = (f_plus - f_minus) / ({DENOM})
    return grad


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-4):
    for t in inputs:
        {RESET}
    out = fn(*inputs)
    w = {WEIGHTS}
    out.backward(w)
    for j, t in enumerate(inputs{ONLY}):
        def loss_of(arr, j=j):
            args = [Tensor(arr) if k == j else u for k, u in enumerate(inputs)]
            return float(np.sum(w * fn(*args).data))
        numeric = numerical_grad(loss_of, t.data.copy(), eps)
        if t.grad is None or not np.allclose(t.grad, numeric, atol=atol, rtol=rtol):
            return False
    return True
'''


def gradcheck(RESTORE="old", DENOM="2 * eps", RESET="t.grad = None",
              WEIGHTS="np.random.default_rng(0).standard_normal(out.shape)", ONLY=""):
    return (GRADCHECK.replace("{RESTORE}", RESTORE).replace("{DENOM}", DENOM).replace("{RESET}", RESET)
            .replace("{WEIGHTS}", WEIGHTS).replace("{ONLY}", ONLY))


MUTANTS = [
    # q1: Mul
    {"question": "q1", "name": "saves_copies", "points": 1, "idea": "saves copies of its inputs (memory it need not use)",
     "source": op("Mul", "ctx.save_for_backward(args[0].copy(), args[1].copy())", "args[0] * args[1]",
               "grad * saved[1], grad * saved[0]")},
    {"question": "q1", "name": "copies_on_ctx", "points": 1,
     "idea": "keeps copies of its inputs as ctx attributes, where the ledger does not see them",
     "source": op("Mul", "ctx.a, ctx.b = args[0].copy(), args[1].copy()", "args[0] * args[1]",
               "grad * ctx.b, grad * ctx.a")},
    {"question": "q1", "name": "gradients_swapped", "points": 2, "idea": "gives a the gradient of b",
     "source": op("Mul", "ctx.save_for_backward(*args)", "args[0] * args[1]", "grad * saved[0], grad * saved[1]")},
    {"question": "q1", "name": "ignores_the_incoming_gradient", "points": 2, "idea": "returns b and a, not g * b and g * a",
     "source": op("Mul", "ctx.save_for_backward(*args)", "args[0] * args[1]", "saved[1], saved[0]")},
    {"question": "q1", "name": "one_gradient", "points": 2, "idea": "returns one gradient for two inputs",
     "source": op("Mul", "ctx.save_for_backward(*args)", "args[0] * args[1]", "grad * saved[1]")},
    {"question": "q1", "name": "saves_the_output", "points": 1, "idea": "saves the product and divides in backward",
     "source": op("Mul", "ctx.save_for_backward(args[0] * args[1], args[1])", "args[0] * args[1]",
               "grad * saved[1], grad * saved[0] / saved[1]")},
    {"question": "q1", "name": "float64_forward", "points": 1, "idea": "computes the product in float64",
     "source": op("Mul", "ctx.save_for_backward(*args)", "args[0].astype(np.float64) * args[1]",
               "grad * saved[1], grad * saved[0]")},
    {"question": "q1", "name": "np_multiply", "points": 0, "correct": True, "idea": "correct, with np.multiply",
     "source": op("Mul", "ctx.save_for_backward(*args)", "np.multiply(*args)",
               "np.multiply(grad, saved[1]), np.multiply(grad, saved[0])")},
    {"question": "q1", "name": "inputs_on_ctx", "points": 0, "correct": True,
     "idea": "correct, the inputs themselves (no copies) kept as ctx attributes",
     "source": op("Mul", "ctx.a, ctx.b = args", "args[0] * args[1]", "grad * ctx.b, grad * ctx.a")},
    # q2: Tanh
    {"question": "q2", "name": "saves_the_input", "points": 1, "idea": "saves the input and recomputes tanh from it",
     "source": op("Tanh", "ctx.save_for_backward(args[0])", "np.tanh(args[0])",
               "grad * (1 - np.tanh(saved[0]) ** 2)")},
    {"question": "q2", "name": "saves_input_and_output", "points": 1, "idea": "saves both the input and the output",
     "source": op("Tanh", "ctx.save_for_backward(args[0], np.tanh(args[0]))", "np.tanh(args[0])",
               "grad * (1 - saved[1] ** 2)")},
    {"question": "q2", "name": "input_copy_on_ctx", "points": 1,
     "idea": "keeps a copy of the input on ctx and recomputes tanh from it in backward",
     "source": op("Tanh", "ctx.a = args[0].copy(); ctx.save_for_backward(np.tanh(args[0]))", "np.tanh(args[0])",
               "grad * (1 - np.tanh(ctx.a) ** 2)")},
    {"question": "q2", "name": "derivative_without_square", "points": 3, "idea": "1 - tanh(a), not 1 - tanh(a)^2",
     "source": op("Tanh", "ctx.save_for_backward(np.tanh(args[0]))", "np.tanh(args[0])", "grad * (1 - saved[0])")},
    {"question": "q2", "name": "ignores_the_incoming_gradient", "points": 1, "idea": "returns 1 - tanh^2, not g times it",
     "source": op("Tanh", "ctx.save_for_backward(np.tanh(args[0]))", "np.tanh(args[0])", "1 - saved[0] ** 2")},
    {"question": "q2", "name": "computes_tanh_twice", "points": 1,
     "idea": "saves a second tanh of the input (two arrays held)",
     "source": op("Tanh", "ctx.save_for_backward(np.tanh(args[0]), np.tanh(args[0]))", "np.tanh(args[0])",
               "grad * (1 - saved[0] * saved[1])")},
    {"question": "q2", "name": "cosh", "points": 0, "correct": True, "idea": "correct, 1 - tanh^2 from the saved output",
     "source": op("Tanh", "out = np.tanh(args[0]); ctx.save_for_backward(out)", "out",
               "grad - grad * np.square(saved[0])")},
    # q3: MatMul
    {"question": "q3", "name": "gradients_not_transposed", "points": 3, "idea": "G @ B and G @ A, without transposes",
     "source": op("MatMul", "ctx.save_for_backward(*args)", "args[0] @ args[1]",
               "grad @ saved[1].T, grad.T @ saved[0]")},
    {"question": "q3", "name": "order_swapped", "points": 3, "idea": "A.T @ G for A and G @ B.T for B",
     "source": op("MatMul", "ctx.save_for_backward(*args)", "args[0] @ args[1]",
               "(saved[0].T @ grad).T if saved[0].shape == saved[1].shape else grad @ saved[1].T, grad.T @ saved[0]")},
    {"question": "q3", "name": "saves_copies", "points": 2, "idea": "saves copies of A and B",
     "source": op("MatMul", "ctx.save_for_backward(args[0].copy(), args[1].copy())", "args[0] @ args[1]",
               "grad @ saved[1].T, saved[0].T @ grad")},
    {"question": "q3", "name": "transposes_on_ctx", "points": 2,
     "idea": "keeps transposed copies of A and B on ctx for backward",
     "source": op("MatMul", "ctx.at, ctx.bt = args[0].T.copy(), args[1].T.copy()", "args[0] @ args[1]",
               "grad @ ctx.bt, ctx.at @ grad")},
    {"question": "q3", "name": "elementwise", "points": 3, "idea": "multiplies elementwise",
     "source": op("MatMul", "ctx.save_for_backward(*args)", "args[0] @ args[1]",
               "grad.sum() * np.ones_like(saved[0]), grad.sum() * np.ones_like(saved[1])")},
    {"question": "q3", "name": "only_square_matrices", "points": 2, "idea": "right only when the shapes make it easy",
     "source": op("MatMul", "ctx.save_for_backward(*args)", "args[0] @ args[1]",
               "grad @ saved[1].T, saved[0].T @ grad if saved[0].shape[0] > 1 else np.zeros_like(saved[1])")},
    {"question": "q3", "name": "einsum", "points": 0, "correct": True, "idea": "correct, with einsum",
     "source": op("MatMul", "ctx.save_for_backward(*args)", "np.einsum('ik,kj->ij', *args)",
               "np.einsum('ij,kj->ik', grad, saved[1]), np.einsum('ik,ij->kj', saved[0], grad)")},
    {"question": "q3", "name": "inputs_on_ctx", "points": 0, "correct": True,
     "idea": "correct, the inputs themselves (no copies) kept as ctx attributes, transposed in backward",
     "source": op("MatMul", "ctx.a, ctx.b = args", "args[0] @ args[1]", "grad @ ctx.b.T, ctx.a.T @ grad")},
    # q4: numerical_grad and gradcheck
    {"question": "q4", "name": "weights_all_ones", "points": 1, "idea": "checks with all-ones weights",
     "source": gradcheck(WEIGHTS="np.ones(out.shape)")},
    {"question": "q4", "name": "first_input_only", "points": 1, "idea": "checks the first input only",
     "source": gradcheck(ONLY="[:1]")},
    {"question": "q4", "name": "keeps_old_gradients", "points": 1, "idea": "does not reset .grad before its backward",
     "source": gradcheck(RESET="pass")},
    {"question": "q4", "name": "does_not_restore_x", "points": 2, "idea": "leaves x shifted by -eps",
     "source": gradcheck(RESTORE="old - eps")},
    {"question": "q4", "name": "one_sided_difference", "points": 1, "idea": "divides a central difference by eps",
     "source": gradcheck(DENOM="eps")},
    {"question": "q4", "name": "always_true", "points": 2, "idea": "gradcheck that always says True",
     "source": gradcheck() + "\n\ndef gradcheck(fn, *inputs, **kwargs):\n    return True\n"},
    {"question": "q4", "name": "fixed_seed_normal", "points": 0, "correct": True, "idea": "correct, other random weights",
     "source": gradcheck(WEIGHTS="np.random.default_rng(12345).uniform(-1, 1, out.shape)")},
    # q5: saved_bytes
    {"question": "q5", "name": "total_not_activations", "points": 2, "idea": "reads the ledger's total, not its activations",
     "source": '''
def saved_bytes(op, *inputs):
    with memory.track() as m:
        out = op(*inputs)
    return int(m.peak_increase["total"])
'''},
    {"question": "q5", "name": "bytes_of_the_inputs", "points": 2, "idea": "adds up the inputs' bytes",
     "source": '''
def saved_bytes(op, *inputs):
    return int(sum(t.nbytes for t in inputs))
'''},
    {"question": "q5", "name": "bytes_of_the_output", "points": 2, "idea": "the output's bytes",
     "source": '''
def saved_bytes(op, *inputs):
    return int(op(*inputs).nbytes)
'''},
    {"question": "q5", "name": "after_the_block", "points": 2, "idea": "reads the ledger after the output is gone",
     "source": '''
def saved_bytes(op, *inputs):
    with memory.track() as m:
        op(*inputs)
    return int(m.increase["activations"]) if hasattr(m, "increase") else 0
'''},
    {"question": "q5", "name": "a_float", "points": 3, "idea": "returns a float",
     "source": '''
def saved_bytes(op, *inputs):
    with memory.track() as m:
        out = op(*inputs)
    return float(m.peak_increase["activations"])
'''},
    {"question": "q5", "name": "twice", "points": 0, "correct": True, "idea": "correct, measured twice, the larger",
     "source": '''
def saved_bytes(op, *inputs):
    peaks = []
    for _ in range(2):
        with memory.track() as m:
            out = op(*inputs)
        peaks.append(m.peak_increase["activations"])
        del out
    return max(peaks)
'''},
    # q6: PREDICTED_SAVED_BYTES
    {"question": "q6", "name": "layer_norm_without_statistics", "points": 3,
     "idea": "layer_norm keeps only its normalised input, not the per-row statistics",
     "source": 'PREDICTED_SAVED_BYTES = dict(PREDICTED_SAVED_BYTES, **{"F.layer_norm(x, 128)": 64 * 128 * 4})'},
    {"question": "q6", "name": "sum_keeps_its_input", "points": 3, "idea": "sum keeps its input",
     "source": 'PREDICTED_SAVED_BYTES = dict(PREDICTED_SAVED_BYTES, **{"F.sum(x)": 64 * 128 * 4})'},
    {"question": "q6", "name": "matmul_keeps_the_output", "points": 3, "idea": "matmul keeps its output",
     "source": 'PREDICTED_SAVED_BYTES = dict(PREDICTED_SAVED_BYTES, **{"F.matmul(x, w)": 64 * 32 * 4})'},
    {"question": "q6", "name": "float64_bytes", "points": 3, "idea": "8 bytes per number",
     "source": 'PREDICTED_SAVED_BYTES = {k: 2 * v for k, v in PREDICTED_SAVED_BYTES.items()}'},
    {"question": "q6", "name": "floats", "points": 4, "idea": "the entries are floats",
     "source": 'PREDICTED_SAVED_BYTES = {k: float(v) for k, v in PREDICTED_SAVED_BYTES.items()}'},
    {"question": "q6", "name": "entry_missing", "points": 4, "idea": "softmax left out",
     "source": 'PREDICTED_SAVED_BYTES = {k: v for k, v in PREDICTED_SAVED_BYTES.items() if k != "F.softmax(x)"}'},
    {"question": "q6", "name": "written_as_products", "points": 0, "correct": True, "idea": "correct, built in a loop",
     "source": '''
_a = 64 * 128 * 4
PREDICTED_SAVED_BYTES = {}
for _k, _v in [("F.mul(x, y)", 2 * _a), ("F.tanh(x)", _a), ("F.matmul(x, w)", _a + 128 * 32 * 4),
               ("F.relu(x)", _a), ("F.sum(x)", 0), ("F.softmax(x)", _a), ("F.mse_loss(x, target)", _a),
               ("F.layer_norm(x, 128)", _a + 2 * 64 * 4)]:
    PREDICTED_SAVED_BYTES[_k] = _v
'''},
]
