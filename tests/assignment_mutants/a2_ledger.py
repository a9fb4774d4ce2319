"""Wrong answers to a2_ledger that the grader must catch, and correct ones it must not
(scripts/probe_assignment.py a2_ledger --mutants; tests/test_assignment_mutants.py)."""

PREDICT = '''
def predict_saved_per_layer(layers, input_shape):
    batch, features = input_shape
    added = []
    input_is_saved = False
    for layer in layers:
        n = batch * features
        if isinstance(layer, nn.Linear):
            added.append({LINEAR})
            features, input_is_saved = layer.out_features, False
        elif isinstance(layer, (nn.ReLU, nn.Tanh)):
            added.append(4 * n)
            input_is_saved = True
        elif isinstance(layer, nn.Dropout):
            if {DROPOUT_ON}:
                added.append({MASK})
                input_is_saved = False
            else:
                added.append(0)
        elif isinstance(layer, nn.LayerNorm):
            added.append({LAYERNORM})
            input_is_saved = False
        else:
            raise TypeError(f"unsupported layer {type(layer).__name__}")
    return added
'''


def predict(LINEAR="0 if input_is_saved else 4 * n", DROPOUT_ON="layer.p > 0", MASK="n",
            LAYERNORM="(0 if input_is_saved else 4 * n) + 2 * 4 * batch", template=PREDICT):
    return (template.replace("{LINEAR}", LINEAR).replace("{DROPOUT_ON}", DROPOUT_ON).replace("{MASK}", MASK)
            .replace("{LAYERNORM}", LAYERNORM))


def predict_edited(old, new):
    """q1's reference with one statement changed (``old`` must occur once)."""
    assert PREDICT.count(old) == 1, old
    return predict(template=PREDICT.replace(old, new))


STEP = '''
def predict_step(layers, input_shape):
    params = sum(p.nbytes for layer in layers for p in layer.parameters())
    batch, features = input_shape
    for layer in layers:
        if isinstance(layer, nn.Linear):
            features = layer.out_features
    loss_saves = {LOSS}
    activations = sum(predict_saved_per_layer(layers, input_shape)) + loss_saves
    return {{"parameters": params, "gradients": {GRADS}, "optimizer": {OPT}, "activations": activations}}
'''


def step(LOSS="4 * batch * features", GRADS="params", OPT="2 * params"):
    return STEP.replace("{LOSS}", LOSS).replace("{GRADS}", GRADS).replace("{OPT}", OPT).replace("{{", "{").replace("}}", "}")


CROSSOVER = '''
def crossover_batch(layers, features):
    one = predict_step(layers, (1, features))
    fixed = {FIXED}
    per_sample = one["activations"]
    return {RESULT}
'''


def crossover(FIXED='one["parameters"] + one["gradients"] + one["optimizer"]',
              RESULT="max(1, math.ceil(fixed / per_sample))"):
    return CROSSOVER.replace("{FIXED}", FIXED).replace("{RESULT}", RESULT)


MUTANTS = [
    # q1: predict_saved_per_layer
    {"question": "q1", "name": "linear_always_keeps_its_input", "points": 4,
     "idea": "a Linear after ReLU/Tanh keeps a second copy of the same array",
     "source": predict(LINEAR="4 * n")},
    {"question": "q1", "name": "dropout_mask_in_float", "points": 4, "idea": "a dropout mask of 4 bytes per element",
     "source": predict(MASK="4 * n")},
    {"question": "q1", "name": "dropout_zero_keeps_a_mask", "points": 4, "idea": "Dropout(0.0) keeps a mask too",
     "source": predict(DROPOUT_ON="True")},
    {"question": "q1", "name": "layernorm_without_statistics", "points": 4,
     "idea": "LayerNorm keeps only its input, not its per-row statistics",
     "source": predict(LAYERNORM="0 if input_is_saved else 4 * n")},
    {"question": "q1", "name": "layernorm_always_keeps_its_input", "points": 4,
     "idea": "LayerNorm keeps its input even when an earlier layer already does",
     "source": predict(LAYERNORM="4 * n + 2 * 4 * batch")},
    {"question": "q1", "name": "dropout_output_counted_as_kept", "points": 4,
     "idea": "after Dropout(p > 0) the next Linear is taken to find its input kept already",
     "source": predict_edited("                added.append({MASK})\n                input_is_saved = False\n",
                              "                added.append({MASK})\n")},
    {"question": "q1", "name": "dropout0_forgets_the_kept_array", "points": 4,
     "idea": "after Dropout(0.0), the identity, the next layer is taken to need a new copy of its input",
     "source": predict_edited("                added.append(0)\n",
                              "                added.append(0)\n                input_is_saved = False\n")},
    {"question": "q1", "name": "layernorm_output_counted_as_kept", "points": 4,
     "idea": "LayerNorm's output is taken to be kept (it keeps its normalised input and statistics, not its output)",
     "source": predict_edited("            added.append({LAYERNORM})\n            input_is_saved = False\n",
                              "            added.append({LAYERNORM})\n            input_is_saved = True\n")},
    {"question": "q1", "name": "a_tuple", "points": 5, "idea": "returns numpy ints in an array",
     "source": predict() + "\n_predict = predict_saved_per_layer\n"
                            "def predict_saved_per_layer(layers, input_shape):\n"
                            "    return np.array(_predict(layers, input_shape), dtype=np.float64)\n"},
    {"question": "q1", "name": "explicit_table", "points": 0, "correct": True, "idea": "correct, by a table of rules",
     "source": '''
def predict_saved_per_layer(layers, input_shape):
    batch, width = input_shape
    out, kept = [], False
    for layer in layers:
        size = 4 * batch * width
        kind = type(layer).__name__
        if kind == "Linear":
            out.append(0 if kept else size); width, kept = layer.out_features, False
        elif kind in ("ReLU", "Tanh"):
            out.append(size); kept = True
        elif kind == "Dropout":
            out.append(size // 4 if layer.p > 0 else 0); kept = kept if layer.p == 0 else False
        elif kind == "LayerNorm":
            out.append((0 if kept else size) + 8 * batch); kept = False
        else:
            raise TypeError(kind)
    return out
'''},
    # q2: measure_saved_per_layer
    {"question": "q2", "name": "predicts_instead_of_measuring", "points": 1,
     "idea": "returns q1's prediction, measuring nothing",
     "source": '''
def measure_saved_per_layer(layers, x):
    return predict_saved_per_layer(layers, x.shape)
'''},
    {"question": "q2", "name": "cumulative", "points": 2, "idea": "the running total, not what each layer adds",
     "source": '''
def measure_saved_per_layer(layers, x):
    added = []
    with memory.track():
        h = x
        start = memory.live_bytes()["activations"]
        for layer in layers:
            h = layer(h)
            added.append(memory.live_bytes()["activations"] - start)
    return added
'''},
    {"question": "q2", "name": "output_bytes", "points": 2, "idea": "the bytes of each layer's output",
     "source": '''
def measure_saved_per_layer(layers, x):
    added, h = [], x
    for layer in layers:
        h = layer(h)
        added.append(int(h.nbytes))
    return added
'''},
    {"question": "q2", "name": "total_not_activations", "points": 2, "idea": "reads the ledger's total",
     "source": '''
def measure_saved_per_layer(layers, x):
    added = []
    with memory.track():
        h = x
        before = memory.live_bytes()["total"]
        for layer in layers:
            h = layer(h)
            now = memory.live_bytes()["total"]
            added.append(now - before)
            before = now
    return added
'''},
    {"question": "q2", "name": "without_grad", "points": 2, "idea": "measures under no_grad, where nothing is kept",
     "source": '''
def measure_saved_per_layer(layers, x):
    added = []
    with memory.track(), minigrad.no_grad():
        h = x
        before = memory.live_bytes()["activations"]
        for layer in layers:
            h = layer(h)
            now = memory.live_bytes()["activations"]
            added.append(now - before)
            before = now
    return added
'''},
    {"question": "q2", "name": "one_tracker_per_layer", "points": 0, "correct": True,
     "idea": "correct, one tracker per layer, each layer's peak increase",
     "source": '''
def measure_saved_per_layer(layers, x):
    added, h = [], x
    for layer in layers:
        with memory.track() as m:
            h = layer(h)
        added.append(m.increase["activations"] if hasattr(m, "increase") else m.peak_increase["activations"])
    return added
'''},
    # q3: predict_step
    {"question": "q3", "name": "adam_one_array", "points": 3, "idea": "AdamW keeps one array per parameter",
     "source": step(OPT="params")},
    {"question": "q3", "name": "no_gradients", "points": 3, "idea": "forgets the gradients", "source": step(GRADS="0")},
    {"question": "q3", "name": "loss_keeps_nothing", "points": 3, "idea": "forgets what mse_loss keeps",
     "source": step(LOSS="0")},
    {"question": "q3", "name": "loss_of_the_input_width", "points": 3, "idea": "mse_loss keeps an array of the input width",
     "source": step(LOSS="4 * batch * input_shape[1]")},
    {"question": "q3", "name": "float64_optimizer", "points": 3, "idea": "AdamW's state in float64",
     "source": step(OPT="4 * params")},
    {"question": "q3", "name": "a_list", "points": 4, "idea": "returns the numbers in a list, not a dict",
     "source": step() + "\n_step = predict_step\n"
                         "def predict_step(layers, input_shape):\n    return list(_step(layers, input_shape).values())\n"},
    {"question": "q3", "name": "keyword_order", "points": 0, "correct": True, "idea": "correct, built another way",
     "source": step(LOSS="4 * batch * [l for l in layers if isinstance(l, nn.Linear)][-1].out_features "
                          "if any(isinstance(l, nn.Linear) for l in layers) else 4 * batch * features")},
    # q4: crossover_batch
    {"question": "q4", "name": "floor_plus_one", "points": 2, "idea": "fixed // per_sample + 1 (wrong when it divides)",
     "source": crossover(RESULT="fixed // per_sample + 1")},
    {"question": "q4", "name": "floor", "points": 3, "idea": "fixed // per_sample (rounds down)",
     "source": crossover(RESULT="max(1, fixed // per_sample)")},
    {"question": "q4", "name": "parameters_only", "points": 3, "idea": "compares with the parameters alone",
     "source": crossover(FIXED='one["parameters"]')},
    {"question": "q4", "name": "round", "points": 2, "idea": "rounds to the nearest batch",
     "source": crossover(RESULT="max(1, round(fixed / per_sample))")},
    {"question": "q4", "name": "off_by_one_above", "points": 2, "idea": "the first batch strictly above",
     "source": crossover(RESULT="math.floor(fixed / per_sample) + 1")},
    {"question": "q4", "name": "a_float", "points": 3, "idea": "returns a float", "source": crossover(RESULT="fixed / per_sample")},
    {"question": "q4", "name": "search", "points": 0, "correct": True, "idea": "correct, by searching the batch",
     "source": '''
def crossover_batch(layers, features):
    b = 1
    while True:
        s = predict_step(layers, (b, features))
        if s["activations"] >= s["parameters"] + s["gradients"] + s["optimizer"]:
            return b
        b += 1
'''},
]
