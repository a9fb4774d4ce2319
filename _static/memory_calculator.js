/*
 * Training-memory calculator of chapter 24 ("The memory calculator"); the formula is
 * chapter 22's.
 *
 * The same formula as bookkit/calculator.py (estimate_from_spec, activation_terms,
 * parameter_count), line for line, in exact integer arithmetic (BigInt), so that the
 * HTML book can run it without Python. tests/test_calculator_js.py runs both on
 * random configurations in headless Chromium and requires identical byte counts.
 *
 * No modules, no network: a plain script that works over http and from file://.
 * It does nothing on pages without an element with id "memcalc".
 */
(function (global) {
  "use strict";

  var PRECISIONS = ["fp32", "bf16", "bf16-autocast"];
  var PRECISION_ALIASES = { float32: "fp32", bfloat16: "bf16" };
  var DEVICES = ["cpu", "cuda"];
  var CUDA_EFFICIENT_LSE_ALIGN = 32n;  // memory-efficient attention pads its log-sum-exp
  var OPTIMIZERS = ["adamw", "sgd"];
  var RECOMPUTE = ["none", "selective", "full"];
  var ATTENTION_IMPLEMENTATIONS = ["eager", "sdpa"];
  var MODELS = ["gpt2", "llama"];
  var INDEX_BYTES = 8n;
  var FLOAT32_BYTES = 4n;
  var SDPA_GQA_MAX_HEAD_DIM = 256n;
  var CPU_RNG_STATE_BYTES = 5056n;  // torch.get_rng_state(), stashed by each checkpoint
  var SCALAR_BYTES = 8n;            // a Python number saved by mul, as a 0-d float64 tensor
  // [keeps its input, number of further tensors of the MLP's width it keeps,
  //  number of Python scalars its multiplications save]
  var ACTIVATIONS = {
    gelu_new: [true, 3n, 3n],
    gelu: [true, 0n, 0n],
    gelu_pytorch_tanh: [true, 0n, 0n],
    silu: [true, 0n, 0n],
    relu: [false, 0n, 0n]
  };
  var INT_FIELDS = ["n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim",
                    "intermediate", "vocab"];

  function fail(message) { throw new Error(message); }

  function isPositiveInt(v) { return typeof v === "number" && Number.isInteger(v) && v >= 1; }

  function checkChoice(name, value, choices) {
    if (choices.indexOf(value) < 0) {
      fail(name + " must be one of " + choices.join(", ") + ", got " + JSON.stringify(value));
    }
    return value;
  }

  /* The checks of ModelSpec.__post_init__. */
  function checkSpec(spec) {
    checkChoice("model", spec.model, MODELS);
    if (spec.model === "gpt2" && isPositiveInt(spec.hidden) && isPositiveInt(spec.n_heads) &&
        spec.hidden % spec.n_heads) {
      // Before head_dim's check: the form has no head_dim for GPT-2, it is hidden / heads.
      fail("GPT-2 needs the hidden size divisible by the heads: " + spec.hidden +
           " is not divisible by " + spec.n_heads);
    }
    INT_FIELDS.forEach(function (name) {
      if (!isPositiveInt(spec[name])) {
        fail(name + " must be a positive integer, got " + JSON.stringify(spec[name]));
      }
    });
    if (spec.model === "gpt2") {
      if (spec.hidden % spec.n_heads) {
        fail("GPT-2 needs hidden (" + spec.hidden + ") divisible by n_heads (" + spec.n_heads + ")");
      }
      if (spec.n_kv_heads !== spec.n_heads || spec.head_dim * spec.n_heads !== spec.hidden) {
        fail("GPT-2 has n_kv_heads == n_heads and head_dim == hidden // n_heads");
      }
      if (!isPositiveInt(spec.max_positions)) {
        fail("GPT-2 needs max_positions >= 1, got " + JSON.stringify(spec.max_positions));
      }
    }
    if (spec.n_heads % spec.n_kv_heads) {
      fail("n_heads (" + spec.n_heads + ") must be a multiple of n_kv_heads (" + spec.n_kv_heads + ")");
    }
    checkChoice("attn_implementation", spec.attn_implementation, ATTENTION_IMPLEMENTATIONS);
    if (!Object.prototype.hasOwnProperty.call(ACTIVATIONS, spec.activation)) {
      fail("activation " + JSON.stringify(spec.activation) + " is not modelled; supported: " +
           Object.keys(ACTIVATIONS).sort().join(", "));
    }
    ["attention_dropout", "hidden_dropout", "embedding_dropout"].forEach(function (name) {
      var p = spec[name];
      if (typeof p !== "number" || !(p >= 0 && p < 1)) {
        fail(name + " must be in [0, 1), got " + JSON.stringify(p));
      }
    });
    if (spec.model === "llama" && (spec.hidden_dropout || spec.embedding_dropout)) {
      fail("Llama has only attention dropout");
    }
  }

  /* [number of parameters, number of parameter tensors], shared weights once. */
  function parameterCount(spec) {
    var h = BigInt(spec.hidden), i = BigInt(spec.intermediate), v = BigInt(spec.vocab);
    var L = BigInt(spec.n_layers);
    var n, tensors;
    if (spec.model === "gpt2") {
      var perLayer = 2n * h + (3n * h * h + 3n * h) + (h * h + h) + 2n * h + (h * i + i) + (i * h + h);
      n = v * h + BigInt(spec.max_positions) * h + L * perLayer + 2n * h;
      tensors = 2n + 12n * L + 2n;
    } else {
      var q = BigInt(spec.n_heads * spec.head_dim), kv = BigInt(spec.n_kv_heads * spec.head_dim);
      var attn = h * q + 2n * h * kv + q * h;
      var attnBias = spec.attention_bias ? (q + 2n * kv + h) : 0n;
      var mlp = 3n * h * i;
      var mlpBias = spec.mlp_bias ? (2n * i + h) : 0n;
      n = v * h + L * (attn + attnBias + mlp + mlpBias + 2n * h) + h;
      var tensorsPerLayer = 4n + (spec.attention_bias ? 4n : 0n) + 3n + (spec.mlp_bias ? 3n : 0n) + 2n;
      tensors = 1n + L * tensorsPerLayer + 1n;
    }
    if (!spec.tie_embeddings) {
      n += v * h;
      tensors += 1n;
    }
    return [n, tensors];
  }

  /* The element widths of a recipe, as _widths in Python. */
  function widths(precision, device) {
    precision = Object.prototype.hasOwnProperty.call(PRECISION_ALIASES, precision)
      ? PRECISION_ALIASES[precision] : precision;
    checkChoice("precision", precision, PRECISIONS);
    var cuda = checkChoice("device", device, DEVICES) === "cuda";
    var w;
    if (precision === "bf16-autocast") {
      w = { compute: 2n, residual: 4n, param: 4n, autocast: true, cuda: cuda };
    } else {
      var e = precision === "fp32" ? 4n : 2n;
      w = { compute: e, residual: e, param: e, autocast: false, cuda: cuda };
    }
    // Dropout's mask: bool (1 byte) from CUDA's fused native_dropout, else the dtype.
    w.mask = function (nbytes) { return cuda ? 1n : nbytes; };
    return w;
  }

  function sym(nbytes, e) { return nbytes === e ? "e" : nbytes.toString(); }

  function matmulWeightsPerLayer(spec) {
    var h = BigInt(spec.hidden), i = BigInt(spec.intermediate);
    if (spec.model === "gpt2") { return 3n * h * h + h * h + 2n * h * i; }
    var q = BigInt(spec.n_heads * spec.head_dim), kv = BigInt(spec.n_kv_heads * spec.head_dim);
    return 2n * h * q + 2n * h * kv + 3n * h * i;
  }

  /* The activation terms, as activation_terms in Python: [{name, group, each, count, formula}]. */
  function activationTerms(spec, batchSize, seqLen, precision, recompute, device) {
    checkSpec(spec);
    if (!isPositiveInt(batchSize)) { fail("batch_size must be a positive integer, got " + JSON.stringify(batchSize)); }
    if (!isPositiveInt(seqLen)) { fail("seq_len must be a positive integer, got " + JSON.stringify(seqLen)); }
    var w = widths(precision, device === undefined ? "cpu" : device);
    checkChoice("recompute", recompute, RECOMPUTE);
    if (spec.model === "gpt2" && seqLen > spec.max_positions) {
      fail("seq_len " + seqLen + " exceeds GPT-2's n_positions " + spec.max_positions);
    }
    var b = BigInt(batchSize), s = BigInt(seqLen);
    var gpt2 = spec.model === "gpt2";
    var h = BigInt(spec.hidden), d = BigInt(spec.head_dim), v = BigInt(spec.vocab);
    var e = w.compute, r = w.residual;
    var f = FLOAT32_BYTES;
    var t = b * s;
    var eager = spec.attn_implementation === "eager";
    var terms = [];

    function add(name, group, each, count, formula) {
      if (each && count) {
        terms.push({ name: name, group: group, each: each, count: count, formula: formula });
      }
    }

    add("token ids (embedding)", "embedding", t * INDEX_BYTES, 1n, "8·b·s");
    if (gpt2) {
      add("position ids (embedding)", "embedding", s * INDEX_BYTES, 1n, "8·s");
      if (spec.embedding_dropout > 0) {
        add("embedding dropout mask", "embedding", t * h * w.mask(r), 1n,
            sym(w.mask(r), e) + "·b·s·h");
      }
    }
    // Positional arguments of a checkpointed region are saved ("checkpoint input"),
    // keyword arguments stay in its closure ("checkpoint closure"): Llama's layers.
    var closureHeld = !gpt2 && recompute === "full";
    if (eager && recompute !== "none") {
      add("causal mask (checkpoint " + (closureHeld ? "closure" : "input") + ")", "shared",
          b * s * s * r, 1n, sym(r, e) + "·b·s²");
    }
    if (!gpt2) {
      add("RoPE cos and sin" + (closureHeld ? " (checkpoint closure)" : ""), "shared",
          2n * s * d * r, 1n, "2·" + sym(r, e) + "·s·d");
      if (recompute !== "none") {
        add("position ids (checkpoint closure)", "shared", s * INDEX_BYTES, 1n, "8·s");
      }
    }

    var L = BigInt(spec.n_layers);
    if (recompute === "full") {
      add("layer input (checkpoint)", "layer", t * h * r, L, sym(r, e) + "·b·s·h");
      if (!w.cuda) {
        add("CPU RNG state (checkpoint closure)", "layer", CPU_RNG_STATE_BYTES, L, "5056");
      }
    } else {
      layerTerms(add, spec, b, s, w, recompute);
    }
    // Python numbers that multiply tensors: eager attention's scaling, gelu_new's three
    // (CPU wrapped numbers: no device memory on CUDA).
    var nScalars = (eager ? 1n : 0n) + ACTIVATIONS[spec.activation][2];
    if (!w.cuda) {
      add("Python scalars saved by mul (0-d float64)", "layer", SCALAR_BYTES * nScalars, L,
          "8·" + nScalars);
    }
    // autocast's bfloat16 weight copies, saved by the matrix products.
    if (w.autocast) {
      if (recompute !== "full") {
        add("bfloat16 weight copies (autocast, saved by matmuls)", "weights",
            matmulWeightsPerLayer(spec) * e, L, "e·(matmul weights of a layer)");
      }
      add("bfloat16 copy of the output layer's weight (autocast)", "logits", v * h * e, 1n,
          "e·V·h");
    }

    normTerms(add, gpt2, gpt2 ? "ln_f" : "norm", ["lm_head"], t, h, w, "final", 1n);
    if (w.autocast) {
      add("logits in float32 (returned, accelerate's copy)", "logits", t * v * f, 1n, "4·b·s·V");
    } else {
      add("logits (returned)", "logits", t * v * e, 1n, "e·b·s·V");
    }
    add("log-softmax in float32 (loss)", "logits", t * v * f, 1n, "4·b·s·V");
    if (b === 1n) {
      add("shifted labels (loss)", "logits", (s + 1n) * INDEX_BYTES, 1n, "8·(s+1)");
    } else {
      add("shifted labels (loss)", "logits", t * INDEX_BYTES, 1n, "8·b·s");
    }
    add("loss and its total weight", "logits", 2n * f, 1n, "2·4");
    return terms;
  }

  function layerTerms(add, spec, b, s, w, recompute) {
    var gpt2 = spec.model === "gpt2";
    var h = BigInt(spec.hidden), k = BigInt(spec.n_kv_heads);
    var d = BigInt(spec.head_dim), i = BigInt(spec.intermediate), L = BigInt(spec.n_layers);
    var a = BigInt(spec.n_heads);
    var e = w.compute, r = w.residual, f = FLOAT32_BYTES;
    var t = b * s;
    var qd = a * d;

    function norm(name, consumers) {
      normTerms(add, gpt2, name, consumers, t, h, w, "layer", L);
    }

    norm(gpt2 ? "ln_1" : "input norm", gpt2 ? ["c_attn"] : ["q_proj", "k_proj", "v_proj"]);
    if (recompute === "selective") {
      if (gpt2) {
        add("c_attn output: Q, K, V (core input)", "attention", 3n * t * h * e, L, "3·e·b·s·h");
      } else {
        add("Q after RoPE (core input)", "attention", t * qd * r, L, sym(r, e) + "·b·s·a·d");
        add("K after RoPE (core input)", "attention", t * k * d * r, L, sym(r, e) + "·b·s·k·d");
        add("V (core input)", "attention", t * k * d * e, L, "e·b·s·k·d");
      }
      if (!w.cuda) {
        add("CPU RNG state (checkpoint closure)", "attention", CPU_RNG_STATE_BYTES, L, "5056");
      }
    } else {
      coreTerms(add, spec, b, s, w);
    }
    add("attention output (" + (gpt2 ? "c_proj" : "o_proj") + " input)", "layer",
        t * qd * e, L, gpt2 ? "e·b·s·h" : "e·b·s·a·d");
    if (gpt2 && spec.hidden_dropout > 0) {
      add("attention residual dropout mask", "layer", t * h * w.mask(e), L,
          sym(w.mask(e), e) + "·b·s·h");
    }

    norm(gpt2 ? "ln_2" : "post-attention norm", gpt2 ? ["c_fc"] : ["gate_proj", "up_proj"]);
    var keepsInput = ACTIVATIONS[spec.activation][0], extra = ACTIVATIONS[spec.activation][1];
    var act = spec.activation;
    var fc = gpt2 ? "c_fc" : "gate_proj";
    if (act === "gelu_new" && w.autocast && w.cuda) {
      // CUDA autocast runs pow in float32: a float32 copy of x, float32 tanh and 1 + tanh.
      add(fc + " output in float32 (pow's autocast copy)", "layer", t * i * f, L, "4·b·s·I");
      add(act + " tanh and 1 + tanh in float32", "layer", 2n * t * i * f, L, "2·4·b·s·I");
      add(act + " 0.5·x", "layer", t * i * e, L, "e·b·s·I");
      add(act + " output cast to bfloat16 (c_proj input)", "layer", t * i * e, L, "e·b·s·I");
    } else {
      if (keepsInput) {
        add(fc + " output (" + act + " input)", "layer", t * i * e, L, "e·b·s·I");
      }
      if (extra) {
        add(act + " intermediates (tanh, 0.5·x, 1 + tanh)", "layer", extra * t * i * e, L,
            extra + "·e·b·s·I");
      }
      add(act + " output" + (gpt2 ? " (c_proj input)" : ""), "layer", t * i * e, L, "e·b·s·I");
    }
    if (gpt2) {
      if (spec.hidden_dropout > 0) {
        add("MLP dropout mask", "layer", t * h * w.mask(e), L, sym(w.mask(e), e) + "·b·s·h");
      }
    } else {
      add("up_proj output", "layer", t * i * e, L, "e·b·s·I");
      add("product (down_proj input)", "layer", t * i * e, L, "e·b·s·I");
    }
  }

  function normTerms(add, gpt2, name, consumers, t, h, w, group, count) {
    var e = w.compute, r = w.residual;
    if (gpt2) {
      var stats = w.cuda ? FLOAT32_BYTES : r;
      add(name + " input", group, t * h * r, count, sym(r, e) + "·b·s·h");
      add(name + " mean and 1/std", group, 2n * t * stats, count, "2·" + sym(stats, e) + "·b·s");
    } else {
      add(name + " input in float32", group, t * h * FLOAT32_BYTES, count, "4·b·s·h");
      add(name + " rsqrt", group, t * FLOAT32_BYTES, count, "4·b·s");
      add(name + " normalised", group, t * h * r, count, sym(r, e) + "·b·s·h");
    }
    if (w.autocast) {
      var n = BigInt(consumers.length);
      add(name + " output cast to bfloat16 (" + consumers.join(", ") + " input" +
          (consumers.length > 1 ? "s" : "") + ")", group === "final" ? "logits" : group,
          n * t * h * e, count, consumers.length > 1 ? n + "·e·b·s·h" : "e·b·s·h");
    } else {
      add(name + " output (" + consumers.join("/") + " input)", group, t * h * r, count, "e·b·s·h");
    }
  }

  function coreTerms(add, spec, b, s, w) {
    var gpt2 = spec.model === "gpt2";
    var a = BigInt(spec.n_heads), k = BigInt(spec.n_kv_heads);
    var d = BigInt(spec.head_dim), L = BigInt(spec.n_layers);
    var e = w.compute, r = w.residual, f = FLOAT32_BYTES;
    var t = b * s;
    var qd = a * d;
    var scores = a * b * s * s;
    var eager = spec.attn_implementation === "eager";
    var attnDrop = spec.attention_dropout > 0;
    var viewOk = b === 1n || a === 1n;
    if (eager) {
      var kvView = b === 1n && k === 1n;
      if (!kvView) {
        add("Q, K, V (matmul operands)", "attention", 3n * t * qd * e, L, "3·e·b·s·a·d");
      } else if (w.autocast && !gpt2) {
        add("Q, K (matmul operands)", "attention", 2n * t * qd * e, L, "2·e·b·s·a·d");
        add("V (matmul operand, not repeated)", "attention", t * d * e, L, "e·b·s·d");
      } else {
        add("Q (matmul operand)", "attention", t * qd * e, L, "e·b·s·a·d");
        add("K, V (matmul operands, not repeated)", "attention", 2n * t * k * d * e, L,
            "2·e·b·s·k·d");
      }
      // softmax -> cast -> dropout -> product with V (see _core_terms in Python).
      var soft = gpt2 ? r : f;
      var probs = gpt2 ? e : r;
      add("softmax output" + (soft === f && e !== f ? " in float32" : ""), "attention",
          scores * soft, L, sym(soft, e) + "·a·b·s²");
      if (attnDrop) {
        add("attention dropout mask", "attention", scores * w.mask(probs), L,
            sym(w.mask(probs), e) + "·a·b·s²");
        if (probs === e) {
          add("attention dropout output (matmul operand)", "attention", scores * e, L, "e·a·b·s²");
        }
      } else if (probs !== soft && probs === e) {
        add("probabilities cast to dtype (matmul operand)", "attention", scores * e, L, "e·a·b·s²");
      }
      if (probs !== e) {
        add("probabilities cast to bfloat16 (autocast, matmul operand)", "attention",
            scores * e, L, "e·a·b·s²");
      }
      return;
    }
    if (attnDrop && !w.cuda) {
      if (gpt2 && e === f && viewOk) {
        add("Q, K scaled copies (math path)", "attention", 2n * t * qd * f, L, "2·4·b·s·h");
        add("c_attn output as V (math path)", "attention", 3n * t * qd * e, L, "3·e·b·s·h");
      } else {
        add("Q, K, V in float32 (math path)", "attention", 3n * t * qd * f, L, "3·4·b·s·a·d");
      }
      add("softmax, dropout mask and output in float32 (math path)", "attention",
          3n * scores * f, L, "3·4·a·b·s²");
      return;
    }
    if (gpt2) {
      add("c_attn output: Q, K, V (fused kernel)", "attention", 3n * t * qd * e, L, "3·e·b·s·h");
    } else {
      add("Q after RoPE (fused kernel)", "attention", t * qd * e, L, "e·b·s·a·d");
      if (d <= SDPA_GQA_MAX_HEAD_DIM) {
        add("K after RoPE, V (fused kernel)", "attention", 2n * t * k * d * e, L, "2·e·b·s·k·d");
      } else if (k === 1n) {
        var kHeads = w.autocast ? a : 1n;
        add("K after RoPE (fused kernel)", "attention", t * kHeads * d * e, L,
            kHeads === a ? "e·b·s·a·d" : "e·b·s·d");
        add("V (fused kernel, not repeated)", "attention", t * d * e, L, "e·b·s·d");
      } else {
        add("K after RoPE, V (fused kernel, repeated)", "attention", 2n * t * qd * e, L,
            "2·e·b·s·a·d");
      }
    }
    if (w.cuda && e === f) {
      var padded = (s + CUDA_EFFICIENT_LSE_ALIGN - 1n) / CUDA_EFFICIENT_LSE_ALIGN * CUDA_EFFICIENT_LSE_ALIGN;
      add("log-sum-exp (fused kernel)", "attention", a * b * padded * f, L, "4·a·b·⌈s/32⌉·32");
    } else {
      add("log-sum-exp (fused kernel)", "attention", a * b * s * f, L, "4·a·b·s");
    }
  }

  /* estimate_from_spec: BigInt byte counts; terms as [[name, bytes], ...] in order. */
  function estimate(spec, opts) {
    var optimizer = checkChoice("optimizer", opts.optimizer === undefined ? "adamw" : opts.optimizer, OPTIMIZERS);
    var precision = opts.precision !== undefined ? opts.precision
      : (opts.dtype !== undefined ? opts.dtype : "fp32");
    var device = opts.device === undefined ? "cpu" : opts.device;
    var recompute = opts.recompute === undefined ? "none" : opts.recompute;
    var terms = activationTerms(spec, opts.batch_size, opts.seq_len, precision, recompute, device);
    var p = widths(precision, device).param;
    var counts = parameterCount(spec);
    var parameters = counts[0] * p;
    var gradients = counts[0] * p;
    var optimizerBytes = optimizer === "adamw" ? 2n * parameters + FLOAT32_BYTES * counts[1] : 0n;
    var activations = 0n, logits = 0n;
    terms.forEach(function (term) {
      var bytes = term.each * term.count;
      activations += bytes;
      if (term.group === "logits") { logits += bytes; }
    });
    var est = {
      parameters: parameters,
      gradients: gradients,
      optimizer: optimizerBytes,
      activations: activations,
      logits: logits,
      total: parameters + gradients + optimizerBytes + activations,
      terms: terms.map(function (term) { return [term.name, term.each * term.count]; })
    };
    var step = stepPeak(spec, BigInt(opts.batch_size), BigInt(opts.seq_len), precision,
                        optimizer, recompute, device, est);
    est.peak = step.peak;
    est.peak_phase = step.phase;
    return est;
  }

  /* The decoder layer's linear layers, as _linear_shapes in Python:
     name -> [output features, weight elements, output is the block's]. */
  function linearShapes(spec) {
    var h = BigInt(spec.hidden), i = BigInt(spec.intermediate);
    if (spec.model === "gpt2") {
      return { "c_attn": [3n * h, 3n * h * h, false], "c_proj": [h, h * h, true],
               "c_fc": [i, h * i, false], "mlp c_proj": [h, i * h, true] };
    }
    var q = BigInt(spec.n_heads * spec.head_dim), kv = BigInt(spec.n_kv_heads * spec.head_dim);
    return { "q_proj": [q, h * q, false], "k_proj": [kv, h * kv, false],
             "v_proj": [kv, h * kv, false], "o_proj": [h, q * h, true],
             "gate_proj": [i, h * i, false], "up_proj": [i, h * i, false],
             "down_proj": [h, i * h, true] };
  }

  /* The linear layers that read a term's tensor, from its name (_consumers). */
  function consumers(name, mlp) {
    var tails = [" input)", " inputs)"];
    for (var k = 0; k < tails.length; k++) {
      var tail = tails[k];
      if (name.length >= tail.length && name.slice(name.length - tail.length) === tail) {
        var inner = name.slice(name.lastIndexOf("(") + 1, name.length - tail.length);
        return inner.split(", ").join("/").split("/").map(function (n) {
          return n === "c_proj" && mlp ? "mlp c_proj" : n;
        });
      }
    }
    return [];
  }

  /* How many equal tensors a term counts, from its formula (_tensors). */
  function tensorsOf(formula) {
    var parts = formula.split("·");
    if (parts.length > 2 && /^[0-9]+$/.test(parts[0]) &&
        (parts[1] === "e" || /^[0-9]+$/.test(parts[1]))) {
      return BigInt(parts[0]);
    }
    return 1n;
  }

  function ceil32(n) { return (n + 31n) / 32n * 32n; }

  /* oneDNN's packed copy of nn.Linear's weight in its input's gradient (_gemm_scratch). */
  function gemmScratch(rows, cols, w) {
    if (w.compute !== 2n || w.cuda) { return 0n; }
    return 2n * ceil32(rows) * ceil32(cols);
  }

  /* Elements of each parameter tensor, in model.parameters() order (_parameter_sizes). */
  function parameterSizes(spec) {
    var h = BigInt(spec.hidden), i = BigInt(spec.intermediate), v = BigInt(spec.vocab);
    var layer, first, last;
    if (spec.model === "gpt2") {
      layer = [h, h, 3n * h * h, 3n * h, h * h, h, h, h, h * i, i, i * h, h];
      first = [v * h, BigInt(spec.max_positions) * h];
      last = [h, h];
    } else {
      var q = BigInt(spec.n_heads * spec.head_dim), kv = BigInt(spec.n_kv_heads * spec.head_dim);
      var ab = spec.attention_bias, mb = spec.mlp_bias;
      layer = [];
      [[h * q, q, ab], [h * kv, kv, ab], [h * kv, kv, ab], [q * h, h, ab],
       [h * i, i, mb], [h * i, i, mb], [i * h, h, mb]].forEach(function (x) {
        layer.push(x[0]);
        if (x[2]) { layer.push(x[1]); }
      });
      layer.push(h, h);
      first = [v * h];
      last = [h];
    }
    var sizes = first.slice();
    for (var l = 0; l < spec.n_layers; l++) { sizes = sizes.concat(layer); }
    sizes = sizes.concat(last);
    if (!spec.tie_embeddings) { sizes.push(v * h); }
    return sizes;
  }

  function maxOf(a, b) { return a > b ? a : b; }

  /* One decoder layer's backward, walked node by node (_layer_backward_peak):
     [highest bytes above the layer's base, the core's forward bytes (math path) or 0]. */
  function layerBackwardPeak(spec, terms, coreHeld, b, s, w, recompute) {
    var t = b * s, e = w.compute, p = w.param;
    var shapes = linearShapes(spec);
    var fused = spec.attn_implementation === "sdpa" && !(spec.attention_dropout > 0 && !w.cuda);
    var nodes = [], mlp = false;
    terms.forEach(function (term) {
      mlp = mlp || term.name.indexOf("ln_2") === 0 || term.name.indexOf("post-attention norm") === 0;
      var cons = consumers(term.name, mlp).filter(function (c) {
        return Object.prototype.hasOwnProperty.call(shapes, c);
      });
      nodes.push({ name: term.name, saved: term.each, core: term.group === "attention",
                   cons: cons, n: tensorsOf(term.formula) });
    });
    var selective = recompute === "selective";
    var coreFirst = nodes.length, coreLast = -1;
    nodes.forEach(function (node, j) {
      if (node.core) { coreFirst = Math.min(coreFirst, j); coreLast = j; }
    });
    var math = spec.attn_implementation === "sdpa" && spec.attention_dropout > 0 && !w.cuda;
    var qd = BigInt(spec.n_heads * spec.head_dim), kd = BigInt(spec.n_kv_heads * spec.head_dim);
    var r = w.residual, f = FLOAT32_BYTES;
    var internal = (e === f ? 1n : 7n) * t * qd * f;
    var caller, casts;
    if (spec.model === "gpt2") {
      caller = (e === f && (b === 1n || spec.n_heads === 1)) ? 0n : 3n * t * qd * e;
      casts = 0n;
    } else {
      caller = t * (qd + kd) * r + t * kd * e;
      casts = w.autocast ? t * (qd + kd) * e : 0n;
    }
    var aliased = fused && (spec.model === "gpt2" || w.residual === e);
    var before = [0n];
    nodes.forEach(function (node) {
      var kept = node.core && selective ? 0n : node.saved;
      var copies = 0n;
      if (w.autocast) { node.cons.forEach(function (c) { copies += shapes[c][1] * e; }); }
      before.push(before[before.length - 1] + kept + copies);
    });
    var sumSaved = function (from, to, skipLse) {
      var total = 0n;
      for (var k = from; k <= to; k++) {
        if (!(skipLse && nodes[k].name.indexOf("log-sum-exp") === 0)) { total += nodes[k].saved; }
      }
      return total;
    };
    var peak = 0n, grads = 0n;
    var j = nodes.length - 1;
    while (j >= 0) {
      var node = nodes[j];
      var alive = before[j + 1] + grads;
      if (selective && j >= coreFirst) {
        var recomputed = node.core ? sumSaved(coreFirst, j, false) : 0n;
        alive += recomputed + (node.core && aliased ? 0n : coreHeld);
      }
      if (node.core && fused) {
        peak = maxOf(peak, alive + t * qd * e + sumSaved(coreFirst, j, true));
        j = coreFirst - 1;
        continue;
      }
      if (node.core && math && recompute !== "none" && j === coreLast) {
        if (recompute === "full") {
          peak = maxOf(peak, before[j + 1] + caller + casts + internal);
        } else {
          peak = maxOf(peak, alive + casts + internal);
        }
      }
      if (node.cons.length === 0) {
        var product = node.name === "up_proj output" || node.name.indexOf(" intermediates ") >= 0;
        var operand = node.name.slice(-"matmul operand)".length) === "matmul operand)";
        var mathProbs = node.name.indexOf("softmax, dropout mask and output") === 0;
        var transient = operand ? node.saved / node.n + 2n * t * qd * e
          : (mathProbs ? node.saved / node.n + 2n * t * qd * f
             : (product ? 3n : 2n) * (node.saved / node.n));
        peak = maxOf(peak, alive + transient);
        j -= 1;
        continue;
      }
      var one = node.saved / node.n, summed = 0n;
      for (var k = node.cons.length - 1; k >= 0; k--) {
        var shape = shapes[node.cons[k]];
        var out = shape[0], weight = shape[1];
        var gOut = shape[2] ? 0n : t * out * e;
        var scratch = spec.model === "llama" ? gemmScratch(out, weight / out, w) : 0n;
        if (w.autocast) {
          peak = maxOf(peak, alive + gOut + one + summed + weight * e + scratch);
          alive -= weight * e + (node.n > 1n ? one : 0n);
          peak = maxOf(peak, alive + summed + weight * e + weight * p);
        } else {
          peak = maxOf(peak, alive + gOut + one + summed + weight * p + scratch);
        }
        alive += weight * p;
        grads += weight * p;
        summed = t * BigInt(spec.hidden) * w.residual;
      }
      j -= 1;
    }
    var forward = math ? before[coreLast + 1] + caller + casts + internal : 0n;
    return [peak, forward];
  }

  /* The step's peak and where it occurs, as _step_timeline in Python (a steady-state
     Trainer step: forward, the loss's backward, each layer's backward, the update). */
  function stepPeak(spec, b, s, precision, optimizer, recompute, device, est) {
    var w = widths(precision, device);
    var p = w.param, e = w.compute, f = FLOAT32_BYTES, r = w.residual;
    var t = b * s, h = BigInt(spec.hidden), v = BigInt(spec.vocab), L = BigInt(spec.n_layers);
    var statik = est.parameters + est.optimizer;
    var returned = t * v * (w.autocast ? f : e);
    var termsOf = function (mode) {
      return activationTerms(spec, Number(b), Number(s), precision, mode, device);
    };
    var byGroup = {};
    termsOf(recompute).forEach(function (term) {
      byGroup[term.group] = (byGroup[term.group] || 0n) + term.each * term.count;
    });
    var group = function (g) { return byGroup[g] || 0n; };
    var perLayer = (group("layer") + group("attention") + group("weights")) / L;
    var coreHeld = recompute === "selective" ? group("attention") / L : 0n;
    var walkTerms = termsOf("none").filter(function (term) {
      return term.group === "layer" || term.group === "attention";
    });
    var walked = layerBackwardPeak(spec, walkTerms, coreHeld, b, s, w, recompute);
    var walk = walked[0], coreForward = walked[1];
    var nParams = parameterCount(spec)[0];
    var headParams = spec.tie_embeddings ? 0n : v * h;
    var positions = BigInt(spec.max_positions || 0);
    var layerParams = (nParams - v * h - headParams - positions * h) / L;
    var cache = (w.autocast && recompute === "full") ? matmulWeightsPerLayer(spec) * e * L : 0n;
    var fwdEnd = statik + est.activations - returned;
    var upcast = t * v * (w.autocast ? e : (e !== f ? f : 0n));
    var fwdPeak = statik + est.activations + cache + upcast;
    if (recompute === "none" && coreForward) {
      fwdPeak = maxOf(fwdPeak, statik + group("embedding") + group("shared")
                      + (L - 1n) * perLayer + coreForward);
    }
    var peaks = [["forward", fwdPeak]];
    var bwdPeak = fwdEnd + 2n * t * v * f;
    var logitsLeft = est.logits - returned - t * v * f;
    var cur = fwdEnd - logitsLeft - t * v * f + v * h * p + t * h * r;
    bwdPeak = maxOf(bwdPeak, cur + t * v * e + gemmScratch(v, h, w));
    cur -= group("final");
    var alias = (recompute === "full" && (spec.model === "gpt2" || r === f)) ? t * h * r : 0n;
    for (var layer = L; layer > 0n; layer -= 1n) {
      var base = cur - (recompute === "full" ? alias : perLayer);
      bwdPeak = maxOf(bwdPeak, base + walk);
      cur = cur - perLayer + layerParams * p;
    }
    var tied = spec.tie_embeddings ? (w.autocast ? 1n : 2n) : 1n;
    bwdPeak = maxOf(bwdPeak, cur + v * h * p * tied + positions * h * p);
    var end = statik + est.gradients + t * INDEX_BYTES;
    peaks.push(["backward", bwdPeak]);
    var sizes = parameterSizes(spec), update = 0n, prev = 0n;
    sizes.forEach(function (size) { update = maxOf(update, prev + 2n * size); prev = size; });
    peaks.push(["optimizer", end + (optimizer === "adamw" ? update * p : 0n)]);
    var best = peaks[0];
    peaks.forEach(function (pair) { if (pair[1] > best[1]) { best = pair; } });
    return { peak: best[1], phase: best[0] };
  }

  /* What a device needs for the step, as required_bytes in Python: the peak, plus on
     CUDA a stated headroom (assumed, not measured on a GPU): a 5 % allocator margin
     rounded up to the byte and a 1 GiB CUDA context. */
  var CUDA_CONTEXT_BYTES = 1n << 30n;
  function requiredBytes(peak, device) {
    if (device !== "cuda") { return peak; }
    return peak + (peak * 5n + 99n) / 100n + CUDA_CONTEXT_BYTES;
  }

  /* The same as estimate, with every BigInt written as a decimal string (for tests). */
  function estimateStrings(spec, opts) {
    var est = estimate(spec, opts);
    var out = {};
    Object.keys(est).forEach(function (key) {
      if (key === "terms") {
        out.terms = est.terms.map(function (pair) { return [pair[0], pair[1].toString()]; });
      } else {
        out[key] = est[key].toString();
      }
    });
    return out;
  }

  // ---------------------------------------------------------------------------------
  // Presets: the configurations of bookkit.calculator.PRESETS (a test checks they match).
  // ---------------------------------------------------------------------------------
  function gpt2(nLayers, hidden, nHeads) {
    return { model: "gpt2", n_layers: nLayers, hidden: hidden, n_heads: nHeads, n_kv_heads: nHeads,
             head_dim: hidden / nHeads, intermediate: 4 * hidden, vocab: 50257, max_positions: 1024,
             tie_embeddings: true, attn_implementation: "sdpa", attention_dropout: 0.1,
             hidden_dropout: 0.1, embedding_dropout: 0.1, activation: "gelu_new",
             attention_bias: true, mlp_bias: true };
  }
  function llama(nKvHeads, intermediate, vocab, hidden, nLayers, nHeads, tie) {
    hidden = hidden || 4096; nLayers = nLayers || 32; nHeads = nHeads || 32;
    return { model: "llama", n_layers: nLayers, hidden: hidden, n_heads: nHeads, n_kv_heads: nKvHeads,
             head_dim: hidden / nHeads, intermediate: intermediate, vocab: vocab, max_positions: 0,
             tie_embeddings: !!tie, attn_implementation: "sdpa", attention_dropout: 0.0,
             hidden_dropout: 0.0, embedding_dropout: 0.0, activation: "silu",
             attention_bias: false, mlp_bias: false };
  }
  var PRESETS = {
    "GPT-2 (124M)": gpt2(12, 768, 12),
    "GPT-2 medium (355M)": gpt2(24, 1024, 16),
    "GPT-2 large (774M)": gpt2(36, 1280, 20),
    "GPT-2 XL (1.5B)": gpt2(48, 1600, 25),
    "Llama 2 7B": llama(32, 11008, 32000),
    "Llama 3 8B": llama(8, 14336, 128256),
    "Llama 3.2 1B": llama(8, 8192, 128256, 2048, 16, 32, true),
    "Llama 3.2 3B": llama(8, 8192, 128256, 3072, 28, 24, true)
  };

  // ---------------------------------------------------------------------------------
  // The form
  // ---------------------------------------------------------------------------------
  var CATEGORIES = [
    ["parameters", "parameters"],
    ["gradients", "gradients"],
    ["optimizer", "optimizer state"],
    ["layers", "activations (without logits)"],
    ["logits", "logits and loss"]
  ];

  function formatBytes(n) {
    // Binary units, as bookkit.fmt_bytes; n is a BigInt.
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    var value = Number(n), unit = 0;
    while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
    return unit === 0 ? value.toFixed(0) + " B" : value.toFixed(2) + " " + units[unit];
  }

  function withCommas(n) {
    return n.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function svgEl(tag, attrs, text) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function readSpec(form) {
    function num(name) { return Number(form.elements[name].value); }
    var model = form.elements.model.value;
    var hidden = num("hidden"), nHeads = num("n_heads");
    var gpt2 = model === "gpt2";
    return {
      model: model,
      n_layers: num("n_layers"),
      hidden: hidden,
      n_heads: nHeads,
      n_kv_heads: gpt2 ? nHeads : num("n_kv_heads"),
      head_dim: gpt2 ? (nHeads > 0 && hidden % nHeads === 0 ? hidden / nHeads : 0) : num("head_dim"),
      intermediate: num("intermediate"),
      vocab: num("vocab"),
      max_positions: gpt2 ? num("max_positions") : 0,
      tie_embeddings: form.elements.tie_embeddings.checked,
      attn_implementation: form.elements.attn_implementation.value,
      attention_dropout: num("attention_dropout"),
      hidden_dropout: gpt2 ? num("hidden_dropout") : 0,
      embedding_dropout: gpt2 ? num("embedding_dropout") : 0,
      activation: form.elements.activation.value,
      attention_bias: gpt2 ? true : form.elements.attention_bias.checked,
      mlp_bias: gpt2 ? true : form.elements.mlp_bias.checked
    };
  }

  function readOptions(form) {
    return {
      batch_size: Number(form.elements.batch_size.value),
      seq_len: Number(form.elements.seq_len.value),
      precision: form.elements.precision.value,
      device: form.elements.device.value,
      optimizer: form.elements.optimizer.value,
      recompute: form.elements.recompute.value
    };
  }

  function writeSpec(form, spec) {
    form.elements.model.value = spec.model;
    ["n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim", "intermediate", "vocab",
     "attention_dropout", "hidden_dropout", "embedding_dropout"].forEach(function (name) {
      form.elements[name].value = String(spec[name]);
    });
    form.elements.max_positions.value = String(spec.max_positions || 1024);
    form.elements.tie_embeddings.checked = spec.tie_embeddings;
    form.elements.attn_implementation.value = spec.attn_implementation;
    form.elements.activation.value = spec.activation;
    form.elements.attention_bias.checked = spec.attention_bias;
    form.elements.mlp_bias.checked = spec.mlp_bias;
  }

  function showModelFields(form) {
    var model = form.elements.model.value;
    Array.prototype.forEach.call(form.querySelectorAll("[data-only]"), function (node) {
      node.hidden = node.getAttribute("data-only") !== model;
    });
  }

  function segments(est) {
    return {
      parameters: est.parameters, gradients: est.gradients, optimizer: est.optimizer,
      layers: est.activations - est.logits, logits: est.logits
    };
  }

  function drawChart(svg, spec, opts) {
    // One stacked bar per recomputation mode: what checkpointing buys for this model.
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    var rows = RECOMPUTE.map(function (mode) {
      var o = {}; Object.keys(opts).forEach(function (k) { o[k] = opts[k]; });
      o.recompute = mode;
      return [mode, estimate(spec, o)];
    });
    var max = 0;
    rows.forEach(function (row) { max = Math.max(max, Number(row[1].total)); });
    // The longest bar ends `labelRoom` short of the right edge: every total is written
    // after its bar, never over it.
    var left = 90, width = 560, labelRoom = 80, barH = 26, gap = 14, top = 10;
    var height = top + rows.length * (barH + gap) + 60;
    svg.setAttribute("viewBox", "0 0 " + (left + width + 20) + " " + height);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "training memory by recomputation mode");
    rows.forEach(function (row, r) {
      var y = top + r * (barH + gap), x = left;
      var label = row[0] + (row[0] === opts.recompute ? " ◀" : "");
      svg.appendChild(svgEl("text", { x: left - 8, y: y + barH / 2 + 4, "text-anchor": "end",
                                      "class": "memcalc-axis" }, label));
      var seg = segments(row[1]);
      CATEGORIES.forEach(function (cat, c) {
        var w = max > 0 ? Number(seg[cat[0]]) / max * (width - labelRoom) : 0;
        var rect = svgEl("rect", { x: x, y: y, width: Math.max(w, 0), height: barH,
                                   "class": "memcalc-seg memcalc-c" + c,
                                   "data-category": cat[0], "data-mode": row[0] });
        rect.appendChild(svgEl("title", {}, cat[1] + ": " + formatBytes(seg[cat[0]])));
        svg.appendChild(rect);
        x += w;
      });
      svg.appendChild(svgEl("text", { x: x + 6, y: y + barH / 2 + 4, "class": "memcalc-axis",
                                      "text-anchor": "start" },
                            formatBytes(row[1].total)));
    });
    var ly = top + rows.length * (barH + gap) + 10, lx = left;
    CATEGORIES.forEach(function (cat, c) {
      svg.appendChild(svgEl("rect", { x: lx, y: ly, width: 12, height: 12, "class": "memcalc-c" + c }));
      svg.appendChild(svgEl("text", { x: lx + 16, y: ly + 11, "class": "memcalc-legend" }, cat[1]));
      lx += 16 + 7 * cat[1].length + 14;
      if (lx > left + width - 60 && c < CATEGORIES.length - 1) { lx = left; ly += 20; }
    });
  }

  // Accelerator sizes for the "fits on" line, in the decimal GB cards are sold in.
  var BUDGETS_GB = [24, 40, 80];
  var GB = 1000000000n;

  function fitsLine(peak, device) {
    var need = requiredBytes(peak, device);
    return BUDGETS_GB.map(function (gb) {
      return gb + " GB " + (need <= BigInt(gb) * GB ? "✓" : "✗");
    }).join(" · ");
  }

  function render(root) {
    var form = root.querySelector("form");
    var out = root.querySelector(".memcalc-output");
    var summary = root.querySelector(".memcalc-summary");
    var svg = root.querySelector("svg.memcalc-chart");
    var error = root.querySelector(".memcalc-error");
    var details = root.querySelector(".memcalc-details");
    showModelFields(form);
    var spec = readSpec(form), opts = readOptions(form), est;
    try {
      est = estimate(spec, opts);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
      out.hidden = true;
      if (summary) { summary.hidden = true; }
      if (details) { details.hidden = true; }
      svg.style.display = "none";
      return;
    }
    error.hidden = true;
    out.hidden = false;
    if (summary) { summary.hidden = false; }
    if (details) { details.hidden = false; }
    svg.style.display = "";
    var counts = parameterCount(spec);
    if (summary) {
      while (summary.firstChild) { summary.removeChild(summary.firstChild); }
      var total = el("p", { "class": "memcalc-headline" });
      total.appendChild(document.createTextNode("Total: "));
      total.appendChild(el("strong", { "data-key": "headline-total", "data-bytes": est.total.toString() },
                           formatBytes(est.total)));
      total.appendChild(document.createTextNode(
        " (" + withCommas(counts[0]) + " parameters; activations " +
        formatBytes(est.activations) + ")"));
      summary.appendChild(total);
      var peak = el("p", { "class": "memcalc-peak" });
      peak.appendChild(document.createTextNode("Step peak: "));
      peak.appendChild(el("strong", { "data-key": "headline-peak", "data-bytes": est.peak.toString() },
                          formatBytes(est.peak)));
      peak.appendChild(document.createTextNode(" (in the " + est.peak_phase + ")"));
      summary.appendChild(peak);
      summary.appendChild(el("p", { "class": "memcalc-fits", "data-key": "fits" },
                             "Fits on: " + fitsLine(est.peak, opts.device)));
    }
    var terms = activationTerms(spec, opts.batch_size, opts.seq_len, opts.precision,
                                opts.recompute, opts.device);
    var table = el("table", { "class": "memcalc-table" });
    var head = el("tr");
    ["", "bytes", "", "count × each"].forEach(function (text) { head.appendChild(el("th", {}, text)); });
    table.appendChild(head);
    function row(name, value, cls, key, term) {
      var tr = el("tr", { "class": cls || "" });
      if (key) { tr.setAttribute("data-key", key); }
      tr.appendChild(el("td", {}, name));
      tr.appendChild(el("td", { "class": "memcalc-num" }, withCommas(value)));
      tr.appendChild(el("td", { "class": "memcalc-num" }, formatBytes(value)));
      tr.appendChild(el("td", { "class": "memcalc-num" },
                        term ? term.count + " × " + formatBytes(term.each) : ""));
      if (term) { tr.title = term.formula + " bytes per copy"; }
      table.appendChild(tr);
    }
    row("parameters (" + withCommas(counts[0]) + ")", est.parameters, "memcalc-cat", "parameters");
    row("gradients", est.gradients, "memcalc-cat", "gradients");
    row("optimizer state", est.optimizer, "memcalc-cat", "optimizer");
    row("activations", est.activations, "memcalc-cat", "activations");
    terms.forEach(function (term) {
      row("\u2003" + term.name, term.each * term.count, "memcalc-term", "term", term);
    });
    row("of which logits and loss", est.logits, "memcalc-cat", "logits");
    row("total", est.total, "memcalc-total", "total");
    while (out.firstChild) { out.removeChild(out.firstChild); }
    out.appendChild(table);
    drawChart(svg, spec, opts);
  }

  // The fields that describe the model: editing one makes the preset "custom".
  var MODEL_FIELDS = ["model", "n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim",
                      "intermediate", "vocab", "max_positions", "activation", "tie_embeddings",
                      "attention_bias", "mlp_bias", "attn_implementation", "attention_dropout",
                      "hidden_dropout", "embedding_dropout"];

  function init(root) {
    var form = root.querySelector("form");
    var presets = form.elements.preset;
    Object.keys(PRESETS).forEach(function (name) {
      presets.appendChild(el("option", { value: name }, name));
    });
    presets.addEventListener("change", function () {
      if (presets.value && PRESETS[presets.value]) {
        writeSpec(form, PRESETS[presets.value]);
        render(root);
      }
    });
    function edited(event) {
      if (event.target === presets) { return; }
      if (MODEL_FIELDS.indexOf(event.target.name) >= 0) { presets.value = ""; }
      render(root);
    }
    form.addEventListener("input", edited);
    form.addEventListener("change", edited);
    form.addEventListener("submit", function (event) { event.preventDefault(); render(root); });
    var initial = root.getAttribute("data-preset");
    if (initial && PRESETS[initial]) {
      presets.value = initial;
      writeSpec(form, PRESETS[initial]);
    }
    render(root);
    root.setAttribute("data-ready", "true");
  }

  function initAll() {
    Array.prototype.forEach.call(document.querySelectorAll(".memcalc"), init);
  }

  global.MemoryCalculator = {
    estimate: estimate,
    estimateStrings: estimateStrings,
    activationTerms: activationTerms,
    parameterCount: parameterCount,
    PRESETS: PRESETS,
    render: render
  };

  if (typeof document !== "undefined") {
    if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", initAll);
    } else {
      initAll();
    }
  }
})(typeof window !== "undefined" ? window : this);
