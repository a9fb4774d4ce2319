"""How much memory a training step needs, before you run it (chapter 22).

``estimate_training_memory(config, batch_size=..., seq_len=...)`` takes a Hugging Face
``GPT2Config`` or ``LlamaConfig`` and returns the bytes of parameters, gradients,
optimizer state and activations of one training step of ``AutoModelForCausalLM``
built from it, with the loss computed by the model (``labels=input_ids``). The
activation terms are not the paper's ``34·s·b·h`` but what transformers' and torch's
code really keeps (read from their source and checked tensor by tensor):

* GPT-2's ``gelu_new`` is five elementwise operations and saves four tensors of the
  MLP's width; LayerNorm saves its input and two statistics per token.
* Llama's RMSNorm upcasts to float32 and saves that copy, its normalised output and
  a float32 ``rsqrt`` per token; RoPE saves only ``cos`` and ``sin`` (one copy shared
  by all layers), the rotated queries and keys are saved by attention.
* ``eager`` attention keeps the s×s probabilities (and, with dropout, the mask and
  the dropped-out probabilities); ``sdpa`` on a CPU runs a fused kernel that keeps
  only a float32 log-sum-exp per query, *except with attention dropout*, where it
  falls back to a float32 "math" path that keeps three s×s matrices.
* The loss upcasts the logits to float32 and keeps their log-softmax; the caller
  holds the logits themselves.
* ``torch.utils.checkpoint`` keeps, per checkpointed call, the CPU generator's state
  (5056 bytes) and the call's arguments: positional ones as saved tensors, keyword
  ones in the function it will re-run (Llama's mask, ``cos``/``sin`` and position
  ids under full recomputation). Python numbers multiplying tensors are saved as 8-byte
  0-d tensors (eager attention's scaling, ``gelu_new``'s constants).

"Activations" are the bytes alive when the forward pass returns, the caller holding
its output: everything kept for the backward pass (whatever holds it: autograd's saved
tensors or a checkpoint's closure) plus the returned logits and loss, parameters
excluded.

``precision`` picks the recipe: ``"fp32"``, ``"bf16"`` (the model in bfloat16) or
``"bf16-autocast"``, the Trainer's ``bf16=True``: a float32 model (16 bytes per
parameter with AdamW) run under ``torch.autocast`` by accelerate, which also returns
float32 logits; the matrix products then keep bfloat16 copies of their inputs and of
the weights, while embeddings, residual stream and norms stay float32. ``device``
picks whose kernels: ``"cpu"``, on which the book measures (the byte counts are exact
there for every precision: ``measure_training_memory`` checks them, and the CPU
allocator agrees but for the caller's token ids), or ``"cuda"``, whose differences
(1-byte dropout masks, float32 LayerNorm statistics, SDPA fused even with dropout,
autocast's float32 ``pow``, RNG states and Python scalars in host memory) are read
from torch's source, listed with file and line in ``CUDA_SOURCES``, and measured by
``scripts/gpu_check.sh`` on a GPU.

``recompute`` is ``"none"``, ``"full"`` (every decoder layer under
``torch.utils.checkpoint``, as ``gradient_checkpointing_enable`` does) or
``"selective"``: Korthikanti et al.'s selective activation recomputation, where only
the *attention core* (scores, mask, softmax, attention dropout and the product with
V; for ``sdpa`` the fused kernel) is checkpointed, from the queries, keys and values
it is given, and everything else in the layer is kept. ``enable_selective_recomputation``
turns it on for a model.

Also here: ``measure_training_memory`` (the same breakdown, measured by running a
step), ``bookkit.torchmem.ForwardMemoryMeter`` (the meter it uses), ``alive_bytes_three_ways`` (three
independent meters and their blind spots), ``activation_terms`` (the formula, term by
term) and a command line::

    python -m bookkit.calculator --model gpt2 --n-layer 24 --n-embd 1024 --n-head 16 \\
        --batch-size 8 --seq-len 1024 --recompute full --precision bf16-autocast --device cuda

The same formula, in JavaScript, drives the interactive calculator of the HTML book
(``_static/memory_calculator.js``, whose constants and presets
``scripts/calculator_js_data.py`` writes from this module's tables); a test checks
that both give the same bytes.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import gc
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ModelSpec", "Term", "model_spec", "activation_terms", "estimate_training_memory",
    "estimate_from_spec", "parameter_count", "measure_training_memory",
    "measure_cuda_activations", "measure_step_peak",
    "alive_bytes_three_ways",
    "enable_selective_recomputation", "build_model", "DTYPE_BYTES", "PRECISIONS", "DEVICES",
    "OPTIMIZERS", "required_bytes", "fits", "CUDA_CONTEXT_BYTES", "ALLOCATOR_MARGIN",
    "RECOMPUTE", "ACTIVATIONS", "PRESETS", "CUDA_SOURCES", "format_table", "main",
]

DTYPE_BYTES = {"float32": 4, "bfloat16": 2}
# The training recipes: the model in float32, the model in bfloat16, or a float32 model
# under torch.autocast to bfloat16 (the Trainer's bf16=True, through accelerate).
PRECISIONS = ("fp32", "bf16", "bf16-autocast")
PRECISION_ALIASES = {"float32": "fp32", "bfloat16": "bf16"}
DEVICES = ("cpu", "cuda")
# CUDA's memory-efficient attention (the SDPA kernel for float32) pads its log-sum-exp
# to a multiple of 32 queries (kAlignLSE = 32 in mem_eff_attention/kernel_forward.h;
# _efficient_attention_forward in aten/src/ATen/native/transformers/cuda/attention.cu
# allocates {B, num_heads, ceil_div(max_seqlen_q, kAlignLSE) * kAlignLSE} floats).
CUDA_EFFICIENT_LSE_ALIGN = 32
OPTIMIZERS = ("adamw", "sgd")
RECOMPUTE = ("none", "selective", "full")
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
MODELS = ("gpt2", "llama")
INDEX_BYTES = 8          # token ids, labels and position ids are int64
FLOAT32_BYTES = 4
# The widest head the CPU's fused attention takes grouped-query heads for (above it,
# transformers repeats the key/value heads first; see its ``use_gqa_in_sdpa``).
SDPA_GQA_MAX_HEAD_DIM = 256

# torch.utils.checkpoint (preserve_rng_state=True, its default and what transformers
# uses) stashes the CPU generator's state at every checkpointed call, to replay dropout
# in backward: torch.get_rng_state(), a uint8 tensor of this many bytes (the Mersenne
# Twister's state), held by the checkpoint's recompute closure until backward.
CPU_RNG_STATE_BYTES = 5056
# A Python float multiplying a tensor becomes a 0-d float64 tensor (a "wrapped number")
# that `mul` saves for backward. Autograd saves wrapped numbers without calling
# saved-tensor hooks, so they stay alive even inside checkpointed regions.
SCALAR_BYTES = 8

# What device="cuda" changes, and where torch says so (read, not run: the book's torch is
# CPU-only; scripts/gpu_check.sh measures these on a GPU). Paths are relative to
# site-packages for the files a torch wheel installs (torch 2.13), else to pytorch's
# repository.
CUDA_SOURCES = {
    "dropout masks of 1 byte": (
        "F.dropout on a CUDA tensor takes the fused native_dropout (Dropout.cpp: "
        "is_fused_kernel_acceptable needs input.is_cuda()), whose CUDA kernel returns a "
        "bool mask; autograd saves only that mask (result1). On a CPU dropout is "
        "input * empty_like(input).bernoulli_(): a mask in the input's dtype.",
        "torchgen/packaged/ATen/native/native_functions.yaml:267 (native_dropout: CUDA "
        "native_dropout_cuda); torchgen/packaged/autograd/derivatives.yaml:619; "
        "aten/src/ATen/native/cuda/Dropout.cu (mask dtype kBool); "
        "aten/src/ATen/native/Dropout.cpp (is_fused_kernel_acceptable)"),
    "float32 LayerNorm statistics": (
        "native_layer_norm saves mean and rstd (result1, result2) for backward; "
        "layer_norm_cuda allocates them in the accumulate type, float32 for bfloat16 "
        "input (the CPU kernel in the input's dtype).",
        "torchgen/packaged/ATen/native/native_functions.yaml:3231 (CUDA: layer_norm_cuda); "
        "torchgen/packaged/autograd/derivatives.yaml:1274; "
        "aten/src/ATen/native/cuda/layer_norm_kernel.cu (acc_type mean/rstd)"),
    "fused SDPA, also with dropout": (
        "flash attention (bfloat16, head_dim <= 256) saves q, k, v, output, a float32 "
        "logsumexp (b, a, s) and an rng_state; memory-efficient attention (float32) the "
        "same with the logsumexp padded to 32 queries and a philox seed/offset. Both "
        "take dropout_p, so no s x s mask (the CPU falls back to the math path).",
        "torchgen/packaged/autograd/derivatives.yaml:2919 and 2923; "
        "torchgen/packaged/ATen/native/native_functions.yaml:14804, 14847; "
        "aten/src/ATen/native/transformers/cuda/attention.cu (_efficient_attention_forward: "
        "ceil_div(max_seqlen_q, kAlignLSE) * kAlignLSE, kAlignLSE = 32)"),
    "autocast's float32 pow (gelu_new)": (
        "CUDA autocast casts pow.Tensor_Scalar's input to float32; pow saves self, so "
        "gelu_new keeps a float32 copy of x and float32 tanh / 1 + tanh by promotion.",
        "torch/include/ATen/autocast_mode.h:855-914 (AT_FORALL_FP32, pow at 870); "
        "torchgen/packaged/autograd/derivatives.yaml:1400; "
        "transformers/activations.py:66 (NewGELUActivation)"),
    "autocast's bfloat16 matmuls": (
        "linear/addmm/matmul/bmm/scaled_dot_product_attention run in bfloat16: inputs "
        "cast (saved copies), weights cast once and cached (leaf tensors) until the "
        "autocast region exits; softmax/log_softmax run in float32 (the models' "
        "inputs to them are float32 already). The CPU's lists differ: there pow, rsqrt, "
        "layer_norm, softmax and log_softmax return bfloat16 (measured, chapter 22); "
        "only the losses run in float32.",
        "torch/include/ATen/autocast_mode.h:820-853 (AT_FORALL_LOWER_PRECISION_FP), "
        "916-927 (AT_FORALL_FP32_SET_OPT_DTYPE)"),
    "host-side RNG states and scalars": (
        "torch.utils.checkpoint stashes torch.get_rng_state() and "
        "torch.cuda.get_rng_state() (CPU tensors); Python numbers multiplying tensors "
        "are CPU wrapped numbers: none is GPU memory.",
        "torch/utils/checkpoint.py:174-190 (get_device_states)"),
    "AdamW step on the GPU": (
        "The Trainer's default optimizer is adamw_torch_fused (torch >= 2.8), whose "
        "float32 step lives on the parameter's device; plain AdamW keeps it on the host.",
        "transformers/training_args.py:806-811; torch/optim/adam.py:166-176"),
}

# What an activation function keeps for backward, for an input of n elements:
# (keeps its input, number of further n-element tensors it keeps, number of Python
# scalars its multiplications save). Its output is kept anyway, by the next operation
# (a linear layer, or Llama's gate product). Read from transformers' activations.py
# and torch's derivatives.yaml, and measured.
ACTIVATIONS = {
    # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): pow keeps x, tanh its output, and
    # the last product keeps both factors, 0.5·x and 1 + tanh(...); the products by
    # 0.5, 0.044715 and √(2/π) keep those numbers.
    "gelu_new": (True, 3, 3),
    "gelu": (True, 0, 0),               # F.gelu keeps its input
    "gelu_pytorch_tanh": (True, 0, 0),  # F.gelu(approximate="tanh") keeps its input
    "silu": (True, 0, 0),               # F.silu keeps its input
    "relu": (False, 0, 0),              # relu keeps its output (the one kept anyway)
}


# ---------------------------------------------------------------------------------
# The model, as the formula sees it
# ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The numbers of a config that the memory formula needs (all plain values).

    ``model`` is ``"gpt2"`` or ``"llama"``. Dropout probabilities matter only through
    whether they are zero. ``max_positions`` is GPT-2's learned position table
    (Llama has none: RoPE). Build one from a config with ``model_spec``.
    """

    model: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_positions: int = 0
    tie_embeddings: bool = False
    attn_implementation: str = "sdpa"
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0       # GPT-2's resid_pdrop (after attention and MLP)
    embedding_dropout: float = 0.0    # GPT-2's embd_pdrop
    activation: str = "gelu_new"
    attention_bias: bool = True       # Llama's attention_bias (GPT-2 always has biases)
    mlp_bias: bool = True             # Llama's mlp_bias

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        for name in ("n_layers", "hidden", "n_heads", "n_kv_heads", "head_dim",
                     "intermediate", "vocab"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.model == "gpt2":
            if self.hidden % self.n_heads:
                raise ValueError(f"GPT-2 needs the hidden size divisible by the heads: "
                                 f"{self.hidden} is not divisible by {self.n_heads}")
            if self.n_kv_heads != self.n_heads or self.head_dim * self.n_heads != self.hidden:
                raise ValueError("GPT-2 has n_kv_heads == n_heads and head_dim == hidden // n_heads")
            if (isinstance(self.max_positions, bool) or not isinstance(self.max_positions, int)
                    or self.max_positions < 1):
                raise ValueError(f"GPT-2 needs max_positions >= 1, got {self.max_positions!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of "
                             f"n_kv_heads ({self.n_kv_heads})")
        if self.attn_implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"attn_implementation must be one of {ATTENTION_IMPLEMENTATIONS}, "
                             f"got {self.attn_implementation!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} is not modelled; supported: "
                             f"{sorted(ACTIVATIONS)}")
        for name in ("attention_dropout", "hidden_dropout", "embedding_dropout"):
            p = getattr(self, name)
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {p!r}")
        if self.model == "llama" and (self.hidden_dropout or self.embedding_dropout):
            raise ValueError("Llama has only attention dropout")

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict (what the JavaScript calculator takes)."""
        return dataclasses.asdict(self)


def _config_attn_implementation(config) -> str:
    impl = getattr(config, "_attn_implementation", None) or "sdpa"
    if impl not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"config's attention implementation {impl!r} is not modelled; "
                         f"use one of {ATTENTION_IMPLEMENTATIONS}")
    return impl


def model_spec(config) -> ModelSpec:
    """Read a ``GPT2Config`` or ``LlamaConfig`` (or a ``ModelSpec``) into a ``ModelSpec``.

    The attention implementation is the config's (``config._attn_implementation``,
    set by ``attn_implementation=`` when the config or model is made); unset means
    ``"sdpa"``, which is what ``from_config`` then picks. Options the formula does not
    model raise ``ValueError`` naming them.
    """
    if isinstance(config, ModelSpec):
        return config
    model_type = getattr(config, "model_type", None)
    impl = _config_attn_implementation(config)
    if model_type == "gpt2":
        for flag in ("add_cross_attention", "reorder_and_upcast_attn"):
            if getattr(config, flag, False):
                raise ValueError(f"GPT2Config.{flag}=True is not modelled by the calculator")
        hidden = config.n_embd
        if hidden % config.n_head:
            raise ValueError(f"GPT-2 needs n_embd divisible by n_head: {hidden} is not "
                             f"divisible by {config.n_head}")
        return ModelSpec(
            model="gpt2", n_layers=config.n_layer, hidden=hidden, n_heads=config.n_head,
            n_kv_heads=config.n_head, head_dim=hidden // config.n_head,
            intermediate=config.n_inner if config.n_inner is not None else 4 * hidden,
            vocab=config.vocab_size, max_positions=config.n_positions,
            tie_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
            attn_implementation=impl, attention_dropout=float(config.attn_pdrop),
            hidden_dropout=float(config.resid_pdrop), embedding_dropout=float(config.embd_pdrop),
            activation=config.activation_function)
    if model_type == "llama":
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        n_kv = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        return ModelSpec(
            model="llama", n_layers=config.num_hidden_layers, hidden=config.hidden_size,
            n_heads=config.num_attention_heads, n_kv_heads=n_kv, head_dim=head_dim,
            intermediate=config.intermediate_size, vocab=config.vocab_size,
            tie_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            attn_implementation=impl, attention_dropout=float(config.attention_dropout),
            activation=config.hidden_act, attention_bias=bool(config.attention_bias),
            mlp_bias=bool(config.mlp_bias))
    raise TypeError(f"estimate_training_memory models GPT2Config and LlamaConfig; got "
                    f"{type(config).__name__} (model_type={model_type!r})")


def _gpt2_preset(n_layer: int, n_embd: int, n_head: int):
    def make():
        from transformers import GPT2Config
        return GPT2Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head)
    return make


def _llama_preset(n_kv_heads: int, intermediate: int, vocab: int, hidden: int = 4096,
                  n_layers: int = 32, n_heads: int = 32, tie: bool = False):
    def make():
        from transformers import LlamaConfig
        return LlamaConfig(hidden_size=hidden, num_hidden_layers=n_layers,
                           num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
                           intermediate_size=intermediate, vocab_size=vocab,
                           tie_word_embeddings=tie)
    return make


# Published configurations, as config factories (the HTML calculator offers the same).
# GPT-2's as released (dropout 0.1, tied embeddings); Llama 2 7B (multi-head) and
# Llama 3 8B (8 key/value heads, a 128k vocabulary), and Llama 3.2 1B and 3B (the same
# vocabulary, tied embeddings), without dropout.
PRESETS = {
    "GPT-2 (124M)": _gpt2_preset(12, 768, 12),
    "GPT-2 medium (355M)": _gpt2_preset(24, 1024, 16),
    "GPT-2 large (774M)": _gpt2_preset(36, 1280, 20),
    "GPT-2 XL (1.5B)": _gpt2_preset(48, 1600, 25),
    "Llama 2 7B": _llama_preset(32, 11008, 32000),
    "Llama 3 8B": _llama_preset(8, 14336, 128256),
    "Llama 3.2 1B": _llama_preset(8, 8192, 128256, hidden=2048, n_layers=16, tie=True),
    "Llama 3.2 3B": _llama_preset(8, 8192, 128256, hidden=3072, n_layers=28, n_heads=24,
                                  tie=True),
}


# ---------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------
def parameter_count(spec: ModelSpec) -> tuple[int, int]:
    """(number of parameters, number of parameter tensors), shared weights once."""
    h, i, v, L = spec.hidden, spec.intermediate, spec.vocab, spec.n_layers
    if spec.model == "gpt2":
        # wte, wpe; per layer ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj (weight and
        # bias each); ln_f; lm_head (no bias) unless tied to wte.
        per_layer = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * i + i) + (i * h + h)
        n = v * h + spec.max_positions * h + L * per_layer + 2 * h
        tensors = 2 + 12 * L + 2
    else:
        q, kv = spec.n_heads * spec.head_dim, spec.n_kv_heads * spec.head_dim
        attn = h * q + 2 * h * kv + q * h
        attn_bias = (q + 2 * kv + h) if spec.attention_bias else 0
        mlp = 3 * h * i
        mlp_bias = (2 * i + h) if spec.mlp_bias else 0
        per_layer = attn + attn_bias + mlp + mlp_bias + 2 * h
        n = v * h + L * per_layer + h
        tensors_per_layer = 4 + (4 if spec.attention_bias else 0) + 3 + (3 if spec.mlp_bias else 0) + 2
        tensors = 1 + L * tensors_per_layer + 1
    if not spec.tie_embeddings:
        n += v * h
        tensors += 1
    return n, tensors


# ---------------------------------------------------------------------------------
# Activations, term by term
# ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Term:
    """One kind of tensor kept for backward: ``count`` copies of ``each`` bytes.

    ``group`` is ``"embedding"``, ``"layer"`` (the count is the number of layers),
    ``"attention"`` (the attention core of each layer), ``"final"`` (the last norm),
    ``"shared"`` (one tensor all layers use) or ``"logits"`` (output layer and loss).
    ``formula`` writes ``each`` in the chapter's symbols (b, s, h, a, k, d, I, V, e).
    """

    name: str
    group: str
    each: int
    count: int
    formula: str

    @property
    def bytes(self) -> int:
        return self.each * self.count


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _check_precision(precision) -> str:
    """The canonical name of a precision (``"float32"``/``"bfloat16"`` are accepted as
    the old spellings of ``"fp32"``/``"bf16"``)."""
    precision = PRECISION_ALIASES.get(precision, precision)
    return _check_choice("precision", precision, PRECISIONS)


@dataclasses.dataclass(frozen=True)
class _Widths:
    """Bytes per element of the tensors whose dtype depends on the recipe.

    ``compute``: what matrix products produce (e in the formulas); ``residual``: the
    embeddings and the residual stream, hence the norms' inputs, RoPE's ``cos``/``sin``
    and the causal mask (float32 under autocast: the embedding runs outside autocast's
    lists and ``float32 + bfloat16`` promotes); ``param``: the parameters (float32
    master weights under autocast). ``autocast``: matrix products cast their inputs
    to bfloat16 (copies) and their weights (cached copies, saved by the product).
    ``cuda``: CUDA kernels (1-byte dropout masks, float32 LayerNorm statistics, fused
    SDPA with dropout, host-side scalars and RNG states)."""

    compute: int
    residual: int
    param: int
    autocast: bool
    cuda: bool

    def mask(self, nbytes: int) -> int:
        # Dropout's mask: on CUDA the fused native_dropout returns a bool mask
        # (1 byte); on a CPU dropout is input * bernoulli(empty_like(input)), the mask
        # in the dropped tensor's dtype.
        return 1 if self.cuda else nbytes


def _widths(precision: str, device: str) -> _Widths:
    precision = _check_precision(precision)
    cuda = _check_choice("device", device, DEVICES) == "cuda"
    if precision == "bf16-autocast":
        return _Widths(compute=2, residual=4, param=4, autocast=True, cuda=cuda)
    e = 4 if precision == "fp32" else 2
    return _Widths(compute=e, residual=e, param=e, autocast=False, cuda=cuda)


def _sym(nbytes: int, e: int) -> str:
    """The symbol of an element width in a formula: e when it is the compute dtype's."""
    return "e" if nbytes == e else str(nbytes)


def activation_terms(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                     recompute: str = "none", device: str = "cpu") -> list[Term]:
    """The tensors one forward pass keeps alive until backward, as ``Term``s.

    Args:
        config: a ``GPT2Config``, ``LlamaConfig`` or ``ModelSpec``.
        batch_size, seq_len: b and s.
        precision: ``"fp32"``, ``"bf16"`` (the model in that dtype) or
            ``"bf16-autocast"`` (a float32 model under ``torch.autocast`` to bfloat16
            with float32 outputs: the Trainer's ``bf16=True`` through accelerate).
        recompute: ``"none"``, ``"full"`` or ``"selective"``.
        device: ``"cpu"`` or ``"cuda"`` (the kernels; bytes on that device).

    Returns:
        The list of terms; their ``bytes`` add up to ``activations`` of
        ``estimate_training_memory``. Terms that are zero for this configuration
        (e.g. dropout masks without dropout) are left out.
    """
    spec = model_spec(config)
    b = _check_positive("batch_size", batch_size)
    s = _check_positive("seq_len", seq_len)
    w = _widths(precision, device)
    _check_choice("recompute", recompute, RECOMPUTE)
    if spec.model == "gpt2" and s > spec.max_positions:
        raise ValueError(f"seq_len {s} exceeds GPT-2's n_positions {spec.max_positions}")
    gpt2 = spec.model == "gpt2"
    h, d, v, L = spec.hidden, spec.head_dim, spec.vocab, spec.n_layers
    e, r = w.compute, w.residual
    f = FLOAT32_BYTES
    t = b * s                      # tokens in the batch
    eager = spec.attn_implementation == "eager"
    terms: list[Term] = []

    def add(name, group, each, count, formula):
        if each and count:
            terms.append(Term(name, group, each, count, formula))

    # -- embedding ------------------------------------------------------------------
    add("token ids (embedding)", "embedding", t * INDEX_BYTES, 1, "8·b·s")
    if gpt2:
        add("position ids (embedding)", "embedding", s * INDEX_BYTES, 1, "8·s")
        if spec.embedding_dropout > 0:
            add("embedding dropout mask", "embedding", t * h * w.mask(r), 1,
                f"{_sym(w.mask(r), e)}·b·s·h")
    # -- tensors every layer shares ----------------------------------------------------
    # A checkpointed region keeps its tensor arguments alive until backward. Positional
    # ones it saves as autograd saved tensors ("checkpoint input"); keyword ones stay
    # in the function it will re-run ("checkpoint closure"): transformers' decoder
    # layers bind them with functools.partial (GPT-2 passes its mask positionally,
    # Llama passes mask, cos/sin and position ids as keywords), and so does
    # enable_selective_recomputation for the attention's keyword arguments.
    closure_held = not gpt2 and recompute == "full"
    if eager and recompute != "none":
        # The additive causal mask (b, 1, s, s), one for all layers, in the embeddings'
        # dtype.
        add(f"causal mask (checkpoint {'closure' if closure_held else 'input'})", "shared",
            b * s * s * r, 1, f"{_sym(r, e)}·b·s²")
    if not gpt2:
        # cos and sin are computed in float32 and cast to the hidden states' dtype.
        add("RoPE cos and sin" + (" (checkpoint closure)" if closure_held else ""), "shared",
            2 * s * d * r, 1, f"2·{_sym(r, e)}·s·d")
        if recompute != "none":
            add("position ids (checkpoint closure)", "shared", s * INDEX_BYTES, 1, "8·s")

    # -- one decoder layer --------------------------------------------------------------
    if recompute == "full":
        add("layer input (checkpoint)", "layer", t * h * r, L, f"{_sym(r, e)}·b·s·h")
        if not w.cuda:
            # On CUDA the stashed RNG states (torch.get_rng_state() and
            # torch.cuda.get_rng_state(), both CPU tensors) are host memory.
            add("CPU RNG state (checkpoint closure)", "layer", CPU_RNG_STATE_BYTES, L, "5056")
    else:
        _layer_terms(add, spec, b, s, w, recompute)
    # Python numbers that multiply tensors: eager attention's scaling, gelu_new's three.
    # On CUDA they are CPU tensors (wrapped numbers): no device memory.
    n_scalars = (1 if eager else 0) + ACTIVATIONS[spec.activation][2]
    if not w.cuda:
        add("Python scalars saved by mul (0-d float64)", "layer", SCALAR_BYTES * n_scalars, L,
            f"8·{n_scalars}")
    # -- autocast's bfloat16 copies of the weights ------------------------------------
    # autocast casts a float32 weight (a leaf that requires grad) to bfloat16 once per
    # forward and caches the copy until the autocast region exits; the matrix product
    # saves it for backward (the gradient of its input), so it outlives the cache.
    # Biases and norm weights are not saved in bfloat16. Under full recomputation the
    # layers' products save nothing: only the output layer's copy stays.
    if w.autocast:
        if recompute != "full":
            add("bfloat16 weight copies (autocast, saved by matmuls)", "weights",
                _matmul_weights_per_layer(spec) * e, L, "e·(matmul weights of a layer)")
        add("bfloat16 copy of the output layer's weight (autocast)", "logits", v * h * e, 1,
            "e·V·h")

    # -- final norm, output layer and loss ------------------------------------------
    _norm_terms(add, gpt2, "ln_f" if gpt2 else "norm", ("lm_head",), t, h, w, "final", 1)
    if w.autocast:
        # accelerate's convert_outputs_to_fp32 returns logits.float(); the bfloat16
        # logits are then freed (nothing saves them).
        add("logits in float32 (returned, accelerate's copy)", "logits", t * v * f, 1, "4·b·s·V")
    else:
        add("logits (returned)", "logits", t * v * e, 1, "e·b·s·V")
    add("log-softmax in float32 (loss)", "logits", t * v * f, 1, "4·b·s·V")
    # The loss pads the labels by one and takes labels[..., 1:].contiguous(): a copy,
    # except for b = 1, where the slice is already contiguous and keeps the padded row.
    if b == 1:
        add("shifted labels (loss)", "logits", (s + 1) * INDEX_BYTES, 1, "8·(s+1)")
    else:
        add("shifted labels (loss)", "logits", t * INDEX_BYTES, 1, "8·b·s")
    add("loss and its total weight", "logits", 2 * f, 1, "2·4")
    return terms


def _matmul_weights_per_layer(spec: ModelSpec) -> int:
    """Elements of the weights one decoder layer multiplies by (no biases, no norms)."""
    h, i = spec.hidden, spec.intermediate
    if spec.model == "gpt2":
        return 3 * h * h + h * h + 2 * h * i
    q, kv = spec.n_heads * spec.head_dim, spec.n_kv_heads * spec.head_dim
    return 2 * h * q + 2 * h * kv + 3 * h * i


def _layer_terms(add, spec: ModelSpec, b: int, s: int, w: _Widths, recompute: str) -> None:
    """Terms of one decoder layer without checkpointing, or with its attention core
    checkpointed ("selective")."""
    gpt2 = spec.model == "gpt2"
    h, a, k, d, i, L = (spec.hidden, spec.n_heads, spec.n_kv_heads, spec.head_dim,
                        spec.intermediate, spec.n_layers)
    e, r, f = w.compute, w.residual, FLOAT32_BYTES
    t = b * s
    qd = a * d

    def norm(name, consumers):
        _norm_terms(add, gpt2, name, consumers, t, h, w, "layer", L)

    # Attention block: norm, projections, core, output projection, dropout.
    norm("ln_1" if gpt2 else "input norm", ("c_attn",) if gpt2 else ("q_proj", "k_proj", "v_proj"))
    if recompute == "selective":
        # The core is a checkpointed region: it keeps its inputs, Q, K and V as the
        # projections produced them (GPT-2: three views of c_attn's one output; Llama:
        # Q and K after RoPE, in the dtype of cos/sin, V as v_proj made it).
        if gpt2:
            add("c_attn output: Q, K, V (core input)", "attention", 3 * t * h * e, L, "3·e·b·s·h")
        else:
            add("Q after RoPE (core input)", "attention", t * qd * r, L, f"{_sym(r, e)}·b·s·a·d")
            add("K after RoPE (core input)", "attention", t * k * d * r, L, f"{_sym(r, e)}·b·s·k·d")
            add("V (core input)", "attention", t * k * d * e, L, "e·b·s·k·d")
        if not w.cuda:
            add("CPU RNG state (checkpoint closure)", "attention", CPU_RNG_STATE_BYTES, L, "5056")
    else:
        _core_terms(add, spec, b, s, w)
    add("attention output (" + ("c_proj" if gpt2 else "o_proj") + " input)", "layer",
        t * qd * e, L, "e·b·s·a·d" if not gpt2 else "e·b·s·h")
    if gpt2 and spec.hidden_dropout > 0:
        add("attention residual dropout mask", "layer", t * h * w.mask(e), L,
            f"{_sym(w.mask(e), e)}·b·s·h")

    # MLP block.
    norm("ln_2" if gpt2 else "post-attention norm", ("c_fc",) if gpt2 else ("gate_proj", "up_proj"))
    keeps_input, extra, _ = ACTIVATIONS[spec.activation]
    act = spec.activation
    fc = "c_fc" if gpt2 else "gate_proj"
    if act == "gelu_new" and w.autocast and w.cuda:
        # CUDA autocast runs pow in float32 (autocast_mode.h, AT_FORALL_FP32: pow): it
        # casts x to float32 and pow saves that copy; float32 then spreads by type
        # promotion: tanh's output and 1 + tanh are float32, 0.5·x stays bfloat16, and
        # the product is float32, which c_proj casts back (its saved input). The
        # bfloat16 x itself is saved by nobody.
        add(f"{fc} output in float32 (pow's autocast copy)", "layer", t * i * f, L, "4·b·s·I")
        add(f"{act} tanh and 1 + tanh in float32", "layer", 2 * t * i * f, L, "2·4·b·s·I")
        add(f"{act} 0.5·x", "layer", t * i * e, L, "e·b·s·I")
        add(f"{act} output cast to bfloat16 (c_proj input)", "layer", t * i * e, L, "e·b·s·I")
    else:
        if keeps_input:
            add(f"{fc} output ({act} input)", "layer", t * i * e, L, "e·b·s·I")
        if extra:
            add(f"{act} intermediates (tanh, 0.5·x, 1 + tanh)", "layer", extra * t * i * e, L,
                f"{extra}·e·b·s·I")
        add(f"{act} output" + (" (c_proj input)" if gpt2 else ""), "layer", t * i * e, L, "e·b·s·I")
    if gpt2:
        if spec.hidden_dropout > 0:
            add("MLP dropout mask", "layer", t * h * w.mask(e), L, f"{_sym(w.mask(e), e)}·b·s·h")
    else:
        add("up_proj output", "layer", t * i * e, L, "e·b·s·I")
        add("product (down_proj input)", "layer", t * i * e, L, "e·b·s·I")


def _norm_terms(add, gpt2: bool, name: str, consumers: tuple[str, ...], t: int, h: int,
                w: _Widths, group: str, count: int) -> None:
    """What a norm over t tokens of width h keeps. GPT-2's LayerNorm: its input and a
    mean and 1/std per token (in the input's dtype on a CPU, in float32 on CUDA).
    Llama's RMSNorm: its input upcast to float32, a float32 rsqrt per token and the
    normalised result before the weight (cast back to the input's dtype). The output
    is kept by the linear layer(s) that read it; under autocast each of them casts it
    to bfloat16 and keeps its own copy (a non-leaf tensor: autocast caches no cast)."""
    e, r = w.compute, w.residual
    if gpt2:
        # CUDA's layer norm keeps its statistics in the accumulate type (float32 for
        # bfloat16 input); the CPU kernel in the input's dtype.
        stats = FLOAT32_BYTES if w.cuda else r
        add(f"{name} input", group, t * h * r, count, f"{_sym(r, e)}·b·s·h")
        add(f"{name} mean and 1/std", group, 2 * t * stats, count, f"2·{_sym(stats, e)}·b·s")
    else:
        add(f"{name} input in float32", group, t * h * FLOAT32_BYTES, count, "4·b·s·h")
        add(f"{name} rsqrt", group, t * FLOAT32_BYTES, count, "4·b·s")
        add(f"{name} normalised", group, t * h * r, count, f"{_sym(r, e)}·b·s·h")
    if w.autocast:
        n = len(consumers)
        # The output layer's cast happens inside lm_head: it belongs with the logits.
        group = "logits" if group == "final" else group
        add(f"{name} output cast to bfloat16 ({', '.join(consumers)} input"
            f"{'s' if n > 1 else ''})", group, n * t * h * e, count,
            f"{n}·e·b·s·h" if n > 1 else "e·b·s·h")
    else:
        add(f"{name} output ({'/'.join(consumers)} input)", group, t * h * r, count, "e·b·s·h")


def _core_terms(add, spec: ModelSpec, b: int, s: int, w: _Widths) -> None:
    """What the attention core keeps when it is not checkpointed."""
    gpt2 = spec.model == "gpt2"
    a, k, d, L = spec.n_heads, spec.n_kv_heads, spec.head_dim, spec.n_layers
    e, r, f = w.compute, w.residual, FLOAT32_BYTES
    t = b * s
    qd = a * d
    scores = a * b * s * s          # elements of one s×s matrix per head
    eager = spec.attn_implementation == "eager"
    attn_drop = spec.attention_dropout > 0
    # A (b, heads, s, d) view of the projections' output becomes a batched matrix
    # without a copy only when b or the head count is 1.
    view_ok = b == 1 or a == 1
    if eager:
        # Q, K (transposed) and V as the two batched products keep them: copies with
        # all a heads (repeat_kv expands grouped K and V first), except that with one
        # key/value head and b = 1 the expanded K and V stay views of the originals
        # (under autocast only V: K after RoPE is float32 and its bfloat16 cast is a
        # full copy).
        kv_view = b == 1 and k == 1
        if not kv_view:
            add("Q, K, V (matmul operands)", "attention", 3 * t * qd * e, L, "3·e·b·s·a·d")
        elif w.autocast and not gpt2:
            add("Q, K (matmul operands)", "attention", 2 * t * qd * e, L, "2·e·b·s·a·d")
            add("V (matmul operand, not repeated)", "attention", t * d * e, L, "e·b·s·d")
        else:
            add("Q (matmul operand)", "attention", t * qd * e, L, "e·b·s·a·d")
            add("K, V (matmul operands, not repeated)", "attention", 2 * t * k * d * e, L,
                "2·e·b·s·k·d")
        # softmax -> cast -> dropout -> product with V. The softmax keeps its output:
        # float32 for Llama (softmax(dtype=float32)), for GPT-2 in the scores' dtype,
        # which the (float32 under autocast) additive mask promotes. Then the
        # probabilities are cast to the query's dtype (Llama) or V's (GPT-2);
        # dropout keeps its mask; the product keeps its operand, which autocast casts
        # to bfloat16.
        soft = f if not gpt2 else r
        probs = e if gpt2 else r
        add("softmax output" + (" in float32" if soft == f and e != f else ""), "attention",
            scores * soft, L, f"{_sym(soft, e)}·a·b·s²")
        if attn_drop:
            add("attention dropout mask", "attention", scores * w.mask(probs), L,
                f"{_sym(w.mask(probs), e)}·a·b·s²")
            if probs == e:
                add("attention dropout output (matmul operand)", "attention", scores * e, L,
                    "e·a·b·s²")
        elif probs != soft and probs == e:
            add("probabilities cast to dtype (matmul operand)", "attention", scores * e, L,
                "e·a·b·s²")
        if probs != e:
            add("probabilities cast to bfloat16 (autocast, matmul operand)", "attention",
                scores * e, L, "e·a·b·s²")
        return
    if attn_drop and not w.cuda:
        # SDPA's math fallback (CPU, dropout): float32 copies of Q·√scale, K·√scale and
        # V with all heads, the softmax, the dropout mask and the dropped-out
        # probabilities, all float32.
        if gpt2 and e == f and view_ok:
            # V needs no copy: the product keeps c_attn's whole output as V's storage.
            add("Q, K scaled copies (math path)", "attention", 2 * t * qd * f, L, "2·4·b·s·h")
            add("c_attn output as V (math path)", "attention", 3 * t * qd * e, L, "3·e·b·s·h")
        else:
            add("Q, K, V in float32 (math path)", "attention", 3 * t * qd * f, L, "3·4·b·s·a·d")
        add("softmax, dropout mask and output in float32 (math path)", "attention",
            3 * scores * f, L, "3·4·a·b·s²")
        return
    # The fused kernel keeps Q, K, V as given, its output (which is the output
    # projection's input: counted there) and a float32 log-sum-exp per query and head.
    # On CUDA: flash attention for bfloat16 (log-sum-exp (b, a, s)), memory-efficient
    # attention for float32 (log-sum-exp padded to a multiple of 32 queries); both
    # keep dropout fused (a seed and an offset, a few bytes, instead of a mask).
    if gpt2:
        add("c_attn output: Q, K, V (fused kernel)", "attention", 3 * t * qd * e, L, "3·e·b·s·h")
    else:
        add("Q after RoPE (fused kernel)", "attention", t * qd * e, L, "e·b·s·a·d")
        if d <= SDPA_GQA_MAX_HEAD_DIM:          # the kernel takes grouped K and V
            add("K after RoPE, V (fused kernel)", "attention", 2 * t * k * d * e, L,
                "2·e·b·s·k·d")
        elif k == 1:
            # repeat_kv of one key/value head is a view (stride 0 over the heads);
            # autocast's bfloat16 cast of the float32 K materialises all a heads.
            k_heads = a if w.autocast else 1
            add("K after RoPE (fused kernel)", "attention", t * k_heads * d * e, L,
                "e·b·s·a·d" if k_heads == a else "e·b·s·d")
            add("V (fused kernel, not repeated)", "attention", t * d * e, L, "e·b·s·d")
        else:
            add("K after RoPE, V (fused kernel, repeated)", "attention", 2 * t * qd * e, L,
                "2·e·b·s·a·d")
    if w.cuda and e == f:
        padded = -(-s // CUDA_EFFICIENT_LSE_ALIGN) * CUDA_EFFICIENT_LSE_ALIGN
        add("log-sum-exp (fused kernel)", "attention", a * b * padded * f, L,
            "4·a·b·⌈s/32⌉·32")
    else:
        add("log-sum-exp (fused kernel)", "attention", a * b * s * f, L, "4·a·b·s")


# ---------------------------------------------------------------------------------
# The estimate
# ---------------------------------------------------------------------------------
def estimate_from_spec(spec: ModelSpec, *, batch_size: int, seq_len: int,
                       precision: str = "fp32", optimizer: str = "adamw",
                       recompute: str = "none", device: str = "cpu") -> dict[str, Any]:
    """``estimate_training_memory`` for a ``ModelSpec`` (what the JavaScript mirrors)."""
    _check_choice("optimizer", optimizer, OPTIMIZERS)
    terms = activation_terms(spec, batch_size=batch_size, seq_len=seq_len, precision=precision,
                             recompute=recompute, device=device)
    p = _widths(precision, device).param
    n_params, n_tensors = parameter_count(spec)
    parameters = n_params * p
    gradients = n_params * p
    # torch.optim.AdamW: exp_avg and exp_avg_sq like each parameter (zeros_like: float32
    # for autocast's float32 master weights), and a float32 scalar `step` per parameter
    # tensor (on the GPU with the Trainer's default fused AdamW, torch/optim/adam.py
    # 166-176). SGD without momentum keeps nothing.
    optimizer_bytes = 2 * parameters + FLOAT32_BYTES * n_tensors if optimizer == "adamw" else 0
    activations = sum(term.bytes for term in terms)
    logits = sum(term.bytes for term in terms if term.group == "logits")
    breakdown = _breakdown(parameters, gradients, optimizer_bytes, activations, logits)
    breakdown["terms"] = {term.name: term.bytes for term in terms}
    timeline, phase, peak = _step_timeline(spec, batch_size, seq_len, precision, optimizer,
                                           recompute, device, breakdown)
    breakdown.update(peak=peak, peak_phase=phase, timeline=timeline)
    return breakdown


def _linear_shapes(spec: ModelSpec) -> dict[str, tuple[int, int, bool]]:
    """The decoder layer's linear layers: name -> (output features, weight elements,
    whether its output is the block's, added to the residual stream). GPT-2 names two
    layers ``c_proj``: ``"c_proj"`` is the attention's, ``"mlp c_proj"`` the MLP's."""
    h, i = spec.hidden, spec.intermediate
    if spec.model == "gpt2":
        return {"c_attn": (3 * h, 3 * h * h, False), "c_proj": (h, h * h, True),
                "c_fc": (i, h * i, False), "mlp c_proj": (h, i * h, True)}
    q, kv = spec.n_heads * spec.head_dim, spec.n_kv_heads * spec.head_dim
    return {"q_proj": (q, h * q, False), "k_proj": (kv, h * kv, False),
            "v_proj": (kv, h * kv, False), "o_proj": (h, q * h, True),
            "gate_proj": (i, h * i, False), "up_proj": (i, h * i, False),
            "down_proj": (h, i * h, True)}


def _consumers(name: str, mlp: bool) -> list[str]:
    """The linear layers that read a term's tensor, from its name ("... (q_proj/k_proj/
    v_proj input)", "... (gate_proj, up_proj inputs)"); GPT-2's ``c_proj`` in the MLP
    block (``mlp``) is ``"mlp c_proj"``."""
    for tail in (" input)", " inputs)"):
        if name.endswith(tail):
            inner = name[name.rfind("(") + 1:-len(tail)]
            names = inner.replace(", ", "/").split("/")
            return ["mlp c_proj" if n == "c_proj" and mlp else n for n in names]
    return []


def _tensors(formula: str) -> int:
    """How many tensors of equal size a term counts: the leading factor of its formula
    when a width follows it ("3·e·b·s·h", "2·4·b·s"), else one ("4·b·s·h")."""
    parts = formula.split("·")
    if len(parts) > 2 and parts[0].isdigit() and (parts[1] == "e" or parts[1].isdigit()):
        return int(parts[0])
    return 1


# oneDNN's scratchpad for a bfloat16 matrix product on a CPU (torch's mm/addmm in
# bfloat16 run oneDNN's brgemm matmul when m·n·k > 16³; measured with one thread on an
# AMX CPU, oneDNN 3.12): the buffers it books (each with 128 bytes of alignment, the
# brgemm batch and the AMX tile workspace) come to these bytes besides the packed
# operands.
ONEDNN_BF16_SCRATCH_BYTES = 5120
ONEDNN_BF16_TRANSPOSED_A_SCRATCH_BYTES = 5248
ONEDNN_BF16_MIN_WORK = 16 ** 3
# The most the scratchpads the estimate leaves out can add on a CPU in bfloat16: the
# products by a transposed weight (5 to 30 KB measured) and the bfloat16 products
# inside the fused attention backward (13 to 18 KB). Their sizes depend on the CPU's
# oneDNN kernels (a 411 KB GPT-2 step measured 14.6 KB above the estimate on an
# AVX512-BF16 CPU without AMX, 1.4 KB with oneDNN held to AVX512_CORE), so a
# comparison with a CPU measurement allows them besides its relative tolerance; they
# matter only for steps under about 1 MB.
ONEDNN_LEFT_OUT_BYTES = 48_000


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _gemm_scratch(rows: int, cols: int, tokens: int, w: _Widths) -> int:
    """The scratchpad of nn.Linear's input gradient ``grad @ weight`` for a weight of
    ``rows`` x ``cols`` and ``tokens`` rows of gradient: in bfloat16 on a CPU, oneDNN
    packs the weight, as stored, into a buffer of both sides rounded up to 32
    (measured: 2·⌈K/32⌉·32·⌈N/32⌉·32 bytes, plus ``ONEDNN_BF16_SCRATCH_BYTES``; none
    when rows·cols·tokens <= 16³, which torch leaves to its own kernel). GPT-2's
    Conv1D multiplies by its weight's transpose, whose packing oneDNN chooses by shape
    (5 to 30 KB measured): left out. Within a few KiB: a vocabulary not a multiple of
    32 or a weight narrower than 32 columns moves it by 1 to 3 KiB either way."""
    if w.compute != 2 or w.cuda or rows * cols * tokens <= ONEDNN_BF16_MIN_WORK:
        return 0
    return 2 * _round_up(rows, 32) * _round_up(cols, 32) + ONEDNN_BF16_SCRATCH_BYTES


def _flash_backward_buffers(s: int, w: _Widths) -> int:
    """What the CPU's fused attention backward allocates besides the gradients, on one
    thread (torch's cpu_flash_attention_backward): per thread a float32 buffer of two
    q-block x kv-block matrices (the probabilities and their gradient), in bfloat16 a
    second one of the same elements in bfloat16, and a float32 row sum per query of
    the block. Blocks: 32 queries (64 from 192 tokens, 256 from 768) by up to 512
    keys, neither above ``s``. Measured to the byte (s = 128, bfloat16: 32768 + 16384
    + 128). The bfloat16 products inside it add oneDNN's scratchpad (13 to 18 KB
    measured), left out. On CUDA: 0 (the GPU kernels keep their blocks on chip)."""
    if w.cuda:
        return 0
    q_block = min(256 if s >= 768 else 64 if s >= 192 else 32, s)
    kv_block = min(512, s)
    block = q_block * kv_block
    reduced = 2 * block * w.compute if w.compute != FLOAT32_BYTES else 0
    return 2 * block * FLOAT32_BYTES + reduced + q_block * FLOAT32_BYTES


def _math_path_peak(spec: ModelSpec, b: int, s: int, e: int) -> int:
    """The bytes the CPU's math path of scaled_dot_product_attention (with dropout and
    is_causal) allocates at its highest point above its inputs, Q, K and V of e bytes
    per element in the models' layout ((b, s, a, d) memory viewed as (b, a, s, d)).
    See ``_layer_backward_peak``. In halves of Q = 4·b·s·a·d: float32 inputs 6, +4
    when the views need a copy to be batched (b > 1 and a > 1) or K and V are grouped,
    +2 more when both; bfloat16 inputs 13, +4 for the copy, -2 when also grouped, and
    grouped K and V add their two float32 casts (2·4·b·s·k·d)."""
    a, k, d = spec.n_heads, spec.n_kv_heads, spec.head_dim
    q_bytes = 4 * b * s * a * d
    probs = a * b * s * s
    copy = b > 1 and a > 1
    gqa = k < a and d <= SDPA_GQA_MAX_HEAD_DIM
    if e == FLOAT32_BYTES:
        halves = 6 + 4 * (copy or gqa) + 2 * (copy and gqa)
        extra = 0
    else:
        halves = 13 + 4 * copy - 2 * (copy and gqa)
        extra = probs * e + (2 * 4 * b * s * k * d if gqa else 0)
    return 3 * probs * FLOAT32_BYTES + s * s * FLOAT32_BYTES + halves * q_bytes // 2 + extra


def _held_attention_weights(spec: ModelSpec, b: int, s: int, w: _Widths) -> int:
    """Bytes of attention probabilities no one saves but the decoder layer holds until it
    returns: Llama's eager attention returns its weights, which the layer binds to a
    name (``hidden_states, _ = self.self_attn(...)``). They are what the product with V
    reads, saved by it, except under autocast with attention dropout: the dropped-out
    probabilities are float32 (softmax in float32, ``.to(query.dtype)`` a no-op for the
    float32 query after RoPE) and the product saves its bfloat16 cast. Measured: a
    4-layer Llama, b = 1, s = 256, 2 heads: 524,288 bytes freed as layer 4 returns."""
    if (spec.model == "llama" and spec.attn_implementation == "eager" and w.autocast
            and spec.attention_dropout > 0):
        return spec.n_heads * b * s * s * FLOAT32_BYTES
    return 0


def _weight_grad_scratch(rows: int, cols: int, tokens: int, w: _Widths) -> int:
    """The scratchpad of a weight's gradient ``x.T @ grad`` (``rows`` x ``cols``, summed
    over ``tokens``) in bfloat16 on a CPU: oneDNN copies the transposed operand, up to
    256 of its rows (64-row blocks, up to four; fewer than 64 rows as they are) by the
    tokens (rounded up to 32, a power of two from 512 on padded by 32), and packs the
    other in 64-column blocks, 2·64·⌈tokens/32⌉·32 bytes, plus
    ``ONEDNN_BF16_TRANSPOSED_A_SCRATCH_BYTES``; tokens not a multiple of 32 add a
    float32 accumulation block. Measured on (rows, tokens, cols) grids
    (tests/test_calculator_peak.py): exact for 64 columns or more and up to 1024
    tokens (the buffers stay under oneDNN's L2 blocking), 1 to 3 KiB high for
    narrower gradients; 160 rows take 256, not the 192 counted here."""
    if w.compute != 2 or w.cuda or rows * cols * tokens <= ONEDNN_BF16_MIN_WORK:
        return 0
    copied = rows if rows <= 64 else min(_round_up(rows, 64), 256)
    lda = _round_up(tokens, 32)
    if lda >= 512 and lda & (lda - 1) == 0:
        lda += 32
    scratch = (2 * copied * lda + 2 * 64 * _round_up(tokens, 32)
               + ONEDNN_BF16_TRANSPOSED_A_SCRATCH_BYTES)
    if tokens > 32 and tokens % 32:
        # A tail of tokens: the sum runs in blocks of 32 into a float32 buffer of one
        # 64 x 64 block (128 bytes of alignment), with 640 more bytes of batch per
        # further block.
        scratch += (4 * min(rows, 64) * min(cols, 64) + 128
                    + 640 * (_round_up(tokens, 32) // 32 - 1))
    return scratch


def _parameter_sizes(spec: ModelSpec) -> list[int]:
    """Elements of each parameter tensor, in ``model.parameters()`` order."""
    h, i, v = spec.hidden, spec.intermediate, spec.vocab
    if spec.model == "gpt2":
        layer = [h, h, 3 * h * h, 3 * h, h * h, h, h, h, h * i, i, i * h, h]
        head = [v * h, spec.max_positions * h], [h, h]
    else:
        q, kv = spec.n_heads * spec.head_dim, spec.n_kv_heads * spec.head_dim
        ab, mb = spec.attention_bias, spec.mlp_bias
        layer = ([h * q] + [q] * ab + [h * kv] + [kv] * ab + [h * kv] + [kv] * ab
                 + [q * h] + [h] * ab + [h * i] + [i] * mb + [h * i] + [i] * mb
                 + [i * h] + [h] * mb + [h, h])
        head = [v * h], [h]
    return head[0] + layer * spec.n_layers + head[1] + ([] if spec.tie_embeddings else [v * h])


def _layer_backward_peak(spec: ModelSpec, terms: list[Term], core_held: int, b: int, s: int,
                         w: _Widths, recompute: str) -> tuple[int, int]:
    """The highest bytes one decoder layer's backward adds to what is alive outside the
    layer's saved tensors (parameters, optimizer state, other layers' saved tensors,
    the gradients so far, the residual stream's gradient), walked node by node from
    the last tensor the forward made to the first; and (or 0) the bytes above the same
    base at the end of the layer's attention core in the forward, where the CPU's math
    path holds temporaries.

    Args:
        terms: the layer's terms without recomputation, in the order the forward
            makes them (each counted once).
        core_held: what a selective checkpoint holds of the attention core's inputs.

    At a node, alive are: the saved tensors made before it and its own; the weight
    gradients of the linear layers already passed; the gradient it receives and the
    one it returns, each as large as one of its saved tensors. A linear layer
    receives its output's gradient (the residual stream's, already alive, for the
    block's last one) and returns its input's and its weight's; under autocast the
    weight's gradient is made in bfloat16 and cast to float32, and the bfloat16
    weight copy, saved with the input, is freed by the backward. Linear layers that
    read one tensor pass it one after the other, summing their input gradients. The
    fused attention kernel is one node: all it saved, the output's gradient and the
    gradients of Q, K and V at once. Under selective recomputation the core's
    tensors exist only during its backward, beside the checkpoint's inputs (counted
    once where the fused kernel saves them as given).
    """
    t, e, p = b * s, w.compute, w.param
    shapes = _linear_shapes(spec)
    fused = spec.attn_implementation == "sdpa" and not (spec.attention_dropout > 0 and not w.cuda)
    nodes = []                       # (name, saved bytes, in the core, consumers, tensors)
    mlp = False
    for term in terms:
        mlp = mlp or term.name.startswith(("ln_2", "post-attention norm"))
        cons = [c for c in _consumers(term.name, mlp) if c in shapes]   # linear layers
        nodes.append((term.name, term.each, term.group == "attention", cons,
                      _tensors(term.formula)))
    selective = recompute == "selective"
    core_first = next((j for j, node in enumerate(nodes) if node[2]), len(nodes))
    core_last = max((j for j, node in enumerate(nodes) if node[2]), default=-1)
    # The CPU's math path (sdpa with dropout): the bytes it allocates, at its highest
    # point, above the Q, K and V it is given (the caller holds those: GPT-2's c_attn
    # output, Llama's Q and K after RoPE and V, under autocast also their bfloat16
    # casts). That point is its float32 output's allocation: alive are the s x s
    # softmax, dropout mask and dropped-out probabilities (3·4·a·b·s², float32), the
    # float32 causal mask it builds from is_causal (4·s², one for all heads and
    # sequences), for bfloat16 inputs the probabilities cast back (2·a·b·s²), and
    # Q-sized copies (Q = 4·b·s·a·d): the scaled Q and K, the output, V when it is
    # copied, for bfloat16 inputs their float32 casts and the bfloat16 output. How
    # many depends on whether the (b, a, s, d) views are batched matrices without a
    # copy (b = 1 or a = 1) and on grouped K/V heads (enable_gqa repeats them, in
    # float32); measured on scaled_dot_product_attention alone with the models'
    # layouts, to the byte (tests/test_calculator_peak.py). Recomputed under a
    # checkpoint it stops before the output.
    math = (spec.attn_implementation == "sdpa" and spec.attention_dropout > 0
            and not w.cuda)
    qd, kd, r = spec.n_heads * spec.head_dim, spec.n_kv_heads * spec.head_dim, w.residual
    math_peak = _math_path_peak(spec, b, s, e) if math else 0
    if spec.model == "gpt2":
        caller, casts = 3 * t * qd * e, 0
    else:
        caller = t * (qd + kd) * r + t * kd * e
        casts = t * (qd + kd) * e if w.autocast else 0
    aliased = fused and (spec.model == "gpt2" or w.residual == e)
    before = [0]                     # saved bytes made before each node, and its own
    for name, saved, core, cons, _ in nodes:
        kept = 0 if core and selective else saved
        copies = sum(shapes[c][1] for c in cons) * e if w.autocast else 0
        before.append(before[-1] + kept + copies)
    peak = grads = 0
    j = len(nodes) - 1
    while j >= 0:
        name, saved, core, cons, n = nodes[j]
        alive = before[j + 1] + grads
        if selective and j >= core_first:
            recomputed = sum(node[1] for node in nodes[core_first:j + 1]) if core else 0
            alive += recomputed + (0 if core and aliased else core_held)
        if core and fused:
            qkv = sum(node[1] for node in nodes[core_first:j + 1]
                      if not node[0].startswith("log-sum-exp"))
            # Alive: its output too (saved by the kernel, the output projection's
            # input, whose backward has passed), the output's gradient, and the
            # gradients of Q, K and V with the kernel's own buffers.
            out_bytes = t * spec.n_heads * spec.head_dim * e
            peak = max(peak, alive + 2 * out_bytes + qkv + _flash_backward_buffers(s, w))
            j = core_first - 1
            continue
        if core and math and recompute != "none" and j == core_last:
            # The core's recomputed forward, before its backward (under full
            # recomputation the whole layer is recomputed before any of its gradients
            # exist; under selective the checkpoint holds the caller's tensors).
            if recompute == "full":
                peak = max(peak, before[core_first] + caller + casts + math_peak)
            else:
                # The checkpoint stops recomputing once the core's last saved tensor
                # exists: its output (float32, and bfloat16 for bfloat16 inputs) is
                # not made again, while the output's gradient, float32, is alive.
                recomputed = sum(node[1] for node in nodes[core_first:j + 1])
                unmade = 0 if e == FLOAT32_BYTES else t * qd * FLOAT32_BYTES // 2
                peak = max(peak, alive - recomputed + casts + math_peak - unmade)
        if not cons:
            # A product of two saved tensors (the gate times up_proj's output, gelu_new's
            # 0.5·x times 1 + tanh) returns two gradients for the one it receives. The
            # probabilities' product with V receives the attention output's gradient and
            # returns those of the probabilities and of V (float32 on the math path).
            product = name == "up_proj output" or " intermediates " in name
            if name.endswith("matmul operand)"):
                transient = saved // n + 2 * t * qd * e
            elif name.startswith("softmax, dropout mask and output"):
                transient = saved // n + 2 * t * qd * FLOAT32_BYTES
            else:
                transient = (3 if product else 2) * (saved // n)
            peak = max(peak, alive + transient)
            j -= 1
            continue
        one, summed = saved // n, 0
        for c in reversed(cons):
            out, weight, block_out = shapes[c]
            g_out = 0 if block_out else t * out * e
            # GPT-2's Conv1D stores its weight (in, out): the weight's gradient
            # x.T @ grad has the input's features as rows.
            rows, cols = (out, weight // out) if spec.model == "llama" else (weight // out, out)
            scratch = max(_gemm_scratch(out, weight // out, t, w) if spec.model == "llama" else 0,
                          _weight_grad_scratch(rows, cols, t, w))
            if w.autocast:
                peak = max(peak, alive + g_out + one + summed + weight * e + scratch)
                # the copy and (its consumer's own) input are freed; the bfloat16
                # gradient of the weight is cast to float32
                alive -= weight * e + (one if n > 1 else 0)
                peak = max(peak, alive + summed + weight * e + weight * p)
            else:
                peak = max(peak, alive + g_out + one + summed + weight * p + scratch)
            alive += weight * p
            grads += weight * p
            summed = t * spec.hidden * w.residual
        j -= 1
    forward = before[core_first] + caller + casts + math_peak if math else 0
    return peak, forward


def _step_timeline(spec: ModelSpec, b: int, s: int, precision: str, optimizer: str,
                   recompute: str, device: str, breakdown: dict) -> tuple[dict, str, int]:
    """Bytes alive over one steady-state step (see ``estimate_training_memory``):
    ``(timeline, peak_phase, peak)``. The step is the Trainer's: ``zero_grad(set_to_none)``,
    ``model(..., labels=ids)``, the output dropped but for the loss, ``backward()``,
    ``step()``; AdamW's state exists already."""
    w = _widths(precision, device)
    p, e, f, r = w.param, w.compute, FLOAT32_BYTES, w.residual
    t, h, v, L = b * s, spec.hidden, spec.vocab, spec.n_layers
    static = breakdown["parameters"] + breakdown["optimizer"]
    returned = t * v * (f if w.autocast else e)          # the logits the caller drops

    def terms_of(mode):
        return activation_terms(spec, batch_size=b, seq_len=s, precision=precision,
                                recompute=mode, device=device)

    terms = terms_of(recompute)
    by_group = {}
    for term in terms:
        by_group[term.group] = by_group.get(term.group, 0) + term.bytes
    # What each layer holds until its backward (for "full": the checkpoint's input and
    # RNG state; under autocast without it, the bfloat16 weight copies too).
    per_layer = sum(by_group.get(g, 0) for g in ("layer", "attention", "weights")) // L
    core_held = by_group.get("attention", 0) // L if recompute == "selective" else 0
    walk_terms = [term for term in terms_of("none") if term.group in ("layer", "attention")]
    walk, core_forward = _layer_backward_peak(spec, walk_terms, core_held, b, s, w, recompute)
    n_params, _ = parameter_count(spec)
    head_params = 0 if spec.tie_embeddings else v * h
    layer_params = (n_params - v * h - head_params - spec.max_positions * h) // L
    acts = breakdown["activations"]
    timeline = {"start": static + t * INDEX_BYTES}
    peaks = {}
    # Forward: under autocast the cache also holds the checkpointed layers' bfloat16
    # weights until the model's forward returns.
    cache = (_matmul_weights_per_layer(spec) * e * L
             if w.autocast and recompute == "full" else 0)
    fwd_end = static + acts - returned
    timeline["forward"] = fwd_end
    # The loss, still inside the model's forward: the log-softmax is made from a float32
    # upcast of bfloat16 logits, alive with them (under autocast the float32 logits the
    # caller gets are made after the model returns; the upcast takes their place).
    upcast = t * v * (e if w.autocast else (f if e != f else 0))
    peaks["forward"] = static + acts + cache + upcast
    if recompute == "none" and core_forward:
        # The last layer's attention core, its temporaries alive (the math path's).
        outside = by_group.get("embedding", 0) + by_group.get("shared", 0)
        peaks["forward"] = max(peaks["forward"],
                               static + outside + (L - 1) * per_layer + core_forward)
    held = _held_attention_weights(spec, b, s, w)
    if held and recompute != "full":
        # The last layer's MLP ends with the float32 probabilities still held by the
        # layer: at the residual add, down_proj's bfloat16 output, its float32 cast and
        # the sum. The model's forward also holds the causal mask and the position ids
        # (without recomputation no checkpoint keeps them: not activations).
        outside = by_group.get("embedding", 0) + by_group.get("shared", 0)
        if recompute == "none":
            outside += b * s * s * r + s * INDEX_BYTES
        peaks["forward"] = max(peaks["forward"], static + outside + L * per_layer + held
                               + t * h * (e + 2 * r))
    # The loss's backward: the gradient of the log-softmax and its input's gradient,
    # both float32 logit-sized, next to the saved log-softmax.
    loss_peak = fwd_end + 2 * t * v * f
    timeline["loss backward"] = fwd_end - t * v * f + t * v * e   # dlogits in dtype
    # The output layer's backward: the logits' gradient in the compute dtype, the
    # weight's gradient (for tied embeddings it waits for the embedding's), the final
    # norm's output gradient (the residual stream's, alive through every layer).
    logits_left = breakdown["logits"] - returned - t * v * f
    cur = fwd_end - logits_left - t * v * f + v * h * p + t * h * r
    bwd_peak = max(loss_peak, cur + t * v * e + max(_gemm_scratch(v, h, t, w),
                                                     _weight_grad_scratch(v, h, t, w)))
    cur -= by_group.get("final", 0)
    # Full recomputation: the recomputed first norm reads the checkpoint's input itself
    # (Llama's float32 upcast copies a bfloat16 residual), counted in the layer's share.
    alias = t * h * r if recompute == "full" and (spec.model == "gpt2" or r == f) else 0
    for layer in range(L, 0, -1):
        base = cur - (alias if recompute == "full" else per_layer)
        bwd_peak = max(bwd_peak, base + walk)
        cur = cur - per_layer + layer_params * p
        timeline[f"layer {layer} backward"] = cur
    # The embedding's backward: a dense gradient of the table (zeros, then indexed adds).
    # A tied table's gradient is summed with the output layer's, waiting in autograd's
    # input buffer: into a new tensor, except under autocast, where the waiting one is
    # the float32 cast of the bfloat16 copy's gradient and takes the sum in place
    # (measured).
    tied = (1 if w.autocast else 2) if spec.tie_embeddings else 1
    embedding = v * h * p * tied + spec.max_positions * h * p
    bwd_peak = max(bwd_peak, cur + embedding)
    end = static + breakdown["gradients"] + t * INDEX_BYTES
    timeline["backward"] = end
    peaks["backward"] = bwd_peak
    # The update. torch's single-tensor AdamW (a CPU's) goes parameter by parameter:
    # denom = sqrt(v) / c makes two temporaries as large as the parameter, while the
    # previous parameter's denom is still held by the loop's variable. SGD without
    # momentum updates in place.
    sizes = _parameter_sizes(spec)
    update = max(prev + 2 * size for prev, size in zip([0] + sizes, sizes))
    peaks["optimizer"] = end + (update * p if optimizer == "adamw" else 0)
    timeline["optimizer"] = end
    phase = max(peaks, key=peaks.get)
    return timeline, phase, peaks[phase]


def _breakdown(parameters: int, gradients: int, optimizer: int, activations: int,
               logits: int) -> dict[str, Any]:
    """The result mapping of the estimate and of the measurement."""
    return {"parameters": parameters, "gradients": gradients, "optimizer": optimizer,
            "activations": activations, "logits": logits,
            "total": parameters + gradients + optimizer + activations}


def estimate_training_memory(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                             optimizer: str = "adamw", recompute: str = "none",
                             device: str = "cpu") -> dict[str, Any]:
    """Bytes one training step of a Hugging Face causal LM needs, by category.

    For ``AutoModelForCausalLM.from_config(config)`` trained with
    ``model(input_ids=ids, labels=ids, use_cache=False)`` on a batch of ``batch_size``
    sequences of ``seq_len`` tokens (no padding mask).

    Args:
        config: ``GPT2Config`` or ``LlamaConfig`` (its attention implementation,
            dropout rates, head counts, intermediate size and weight tying are used),
            or a ``ModelSpec``.
        batch_size, seq_len: the batch, b sequences of s tokens.
        precision: the recipe.
            ``"fp32"``: everything float32.
            ``"bf16"``: the model in bfloat16 (parameters, gradients, AdamW moments
            and activations; the loss's log-softmax is float32 either way).
            ``"bf16-autocast"``: the Trainer's ``bf16=True``: a float32 model whose
            forward accelerate runs under ``torch.autocast(dtype=torch.bfloat16)``
            and whose outputs it converts to float32 (``convert_outputs_to_fp32``).
            Float32 master weights, gradients and AdamW moments (16 bytes per
            parameter); the matrix products' bfloat16 copies of the weights and of
            their inputs, float32 embeddings, residual stream and norms, a float32
            copy of the logits.
            ``"float32"`` and ``"bfloat16"`` are accepted for ``"fp32"``/``"bf16"``.
        optimizer: ``"adamw"`` (``torch.optim.AdamW``: two moments per parameter
            made by ``zeros_like``, so in the parameters' dtype, plus a float32 step
            count per parameter tensor) or ``"sgd"`` (without momentum: no state).
        recompute: ``"none"``, ``"full"`` (every decoder layer checkpointed) or
            ``"selective"`` (only each layer's attention core checkpointed).
        device: ``"cpu"`` (PyTorch's CPU kernels, on which every term is measured)
            or ``"cuda"`` (the CUDA kernels' terms, from torch's source: 1-byte
            dropout masks, float32 LayerNorm statistics, SDPA fused even with
            dropout, float32 ``pow`` under autocast, RNG states and Python scalars
            in host memory; see ``CUDA_SOURCES``). The bytes are those of the
            tensors; the CUDA caching allocator rounds each block up to 512 bytes.

    Returns:
        A dict of byte counts: ``parameters``, ``gradients``, ``optimizer``,
        ``activations`` (alive when the forward pass returns, the caller holding its
        output: everything kept for backward, by autograd or by a checkpoint's
        closure, plus the logits and the loss; under autocast also the bfloat16
        weight copies the products saved),
        ``logits`` (the part of ``activations`` that the output layer and the loss
        hold), ``total`` (the sum of the first four), and ``terms`` (activation bytes
        by term, in the order of ``activation_terms``). And the step's highest point:
        ``peak`` (bytes alive at once over a steady-state step as the Trainer runs
        it: AdamW's state allocated, ``zero_grad(set_to_none=True)``, the model
        called with ``labels``, its output dropped but for the loss, ``backward()``,
        ``step()``; with the loss's two float32 logit-sized gradients, autocast's
        weight cache, gradients as they appear and the update's temporaries),
        ``peak_phase`` (``"forward"``, ``"backward"`` or ``"optimizer"``) and
        ``timeline`` (bytes at the end of each phase and of each layer's backward).
        ``measure_step_peak`` measures the same on a CPU; ``benchmarks/peak_sweep.py``
        compares the two on random configurations. Counted on a CPU, as measured
        with one thread: oneDNN's scratchpad of the bfloat16 weight gradients (its
        copy of x.T and its packed gradient, ``_weight_grad_scratch``) and of
        nn.Linear's input gradient (``_gemm_scratch``), the fused attention
        backward's block buffers and the output it saved (``_flash_backward_buffers``),
        the math path's causal mask and casts, and the float32 probabilities Llama's
        eager layer holds under autocast with dropout (``_held_attention_weights``).
        Left out, as allocator-internal and specific to oneDNN's version, to the
        CPU's ISA and L2 size and to the thread count: the scratchpad of the
        products by a transposed weight (nn.Linear's forward, GPT-2's Conv1D input
        gradient: 5 to 30 KB measured) and of the bfloat16 products inside the
        fused attention backward (13 to 18 KB), and oneDNN's L2 blocking of the
        weight-gradient copy beyond about 1024 tokens (the count is then an upper
        bound). They matter only for steps under about 1 MB.

    Example:
        >>> from transformers import GPT2Config
        >>> est = estimate_training_memory(GPT2Config(), batch_size=8, seq_len=1024)
        >>> est["parameters"] == 124_439_808 * 4
        True
        >>> est = estimate_training_memory(GPT2Config(), batch_size=8, seq_len=1024,
        ...                                precision="bf16-autocast", device="cuda")
        >>> est["parameters"] + est["gradients"] + est["optimizer"] > 16 * 124_439_808
        True
    """
    return estimate_from_spec(model_spec(config), batch_size=batch_size, seq_len=seq_len,
                              precision=precision,
                              optimizer=optimizer, recompute=recompute, device=device)


# What a GPU needs besides the step's tensors (assumptions, not measurements): the CUDA
# context of the process (kernels and libraries loaded; PyTorch's notes on CUDA
# memory management say it takes "a few hundred MB" to over 1 GB depending on the
# GPU and libraries: docs.pytorch.org/docs/stable/notes/cuda.html) and the caching
# allocator's rounding and fragmentation (blocks rounded to 512 bytes and 2 MiB
# segments; 5 % is our stated margin, not a measured bound).
CUDA_CONTEXT_BYTES = 2 ** 30
_MARGIN_PERCENT = 5
ALLOCATOR_MARGIN = _MARGIN_PERCENT / 100
GB = 10 ** 9      # GPU memory is sold in decimal GB
FITS_GB = (24, 40, 80)    # the accelerator sizes the CLI and the HTML form check


def required_bytes(estimate: Mapping[str, Any], device: str = "cuda") -> int:
    """Bytes a device needs for the step: ``peak`` plus the stated headroom.

    On ``"cuda"``: ``peak`` × (1 + ``ALLOCATOR_MARGIN``), rounded up to the byte, plus
    ``CUDA_CONTEXT_BYTES``; on ``"cpu"`` (what the book measures): ``peak`` itself. The
    arithmetic is exact on integers, as in the page's JavaScript form.

    Example:
        >>> from bookkit.calculator import required_bytes
        >>> required_bytes({"peak": 10 ** 9}, "cpu")
        1000000000
        >>> required_bytes({"peak": 10 ** 9}) == int(1.05e9) + 2 ** 30
        True
    """
    peak = estimate["peak"]
    if _check_choice("device", device, DEVICES) == "cpu":
        return peak
    return peak + -(-peak * _MARGIN_PERCENT // 100) + CUDA_CONTEXT_BYTES


def fits(estimate: Mapping[str, Any], memory_gb: float, device: str = "cuda") -> bool:
    """Whether ``required_bytes(estimate, device)`` fits in ``memory_gb`` decimal GB.

    Example:
        >>> from bookkit.calculator import fits
        >>> fits({"peak": 22 * 10 ** 9}, 24)
        False
    """
    if isinstance(memory_gb, bool) or not memory_gb > 0:
        raise ValueError(f"memory_gb must be a positive number, got {memory_gb!r}")
    return required_bytes(estimate, device) <= memory_gb * GB


# ---------------------------------------------------------------------------------
# Measuring the same quantities
# ---------------------------------------------------------------------------------
def _torch():
    import torch
    return torch


def _checkpointed_core(implementation: str):
    """An attention function that runs transformers' ``implementation`` under
    ``torch.utils.checkpoint`` (non-reentrant), keeping only its inputs."""
    torch = _torch()
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    def core(module, query, key, value, attention_mask, **kwargs):
        if implementation == "eager":
            # The model's own eager function lives in its modeling module.
            inner = sys.modules[type(module).__module__].eager_attention_forward
        else:
            inner = ALL_ATTENTION_FUNCTIONS[implementation]
        fn = functools.partial(inner, module, **kwargs)
        return torch.utils.checkpoint.checkpoint(fn, query, key, value, attention_mask,
                                                 use_reentrant=False)

    return core


def enable_selective_recomputation(model) -> str:
    """Checkpoint only the attention core of every layer of a transformers model.

    Registers, once, an attention implementation ``"core_recompute_<impl>"`` that runs
    the model's current one (``"eager"`` or ``"sdpa"``) under non-reentrant
    ``torch.utils.checkpoint`` from the queries, keys, values and mask it receives,
    with the same attention mask function, and switches the model to it with
    ``set_attn_implementation``. This is Korthikanti et al.'s selective activation
    recomputation: the core's s×s tensors are rebuilt in backward, everything else
    in the layer is kept. Returns the new implementation's name.
    """
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    impl = model.config._attn_implementation
    if impl.startswith("core_recompute_"):
        return impl
    if impl not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"selective recomputation supports {ATTENTION_IMPLEMENTATIONS} "
                         f"attention, the model uses {impl!r}")
    name = f"core_recompute_{impl}"
    AttentionInterface.register(name, _checkpointed_core(impl))
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[impl])
    model.set_attn_implementation(name)
    return name


def _enable_full_recomputation(model) -> None:
    # transformers 5.23 renamed gradient_checkpointing_enable (now a deprecated alias).
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()


TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "bf16-autocast": "float32"}


def build_model(config, precision: str = "fp32", seed: int = 0, device: str = "cpu"):
    """``AutoModelForCausalLM.from_config(config)`` for ``precision``, seeded, in train
    mode, on ``device``.

    ``"fp32"``/``"bf16"``: the model in that dtype. ``"bf16-autocast"``: a float32
    model whose ``forward`` runs under ``torch.autocast(device, dtype=torch.bfloat16)``
    and returns float32 outputs, wrapped exactly as accelerate's
    ``Accelerator.prepare_model`` does for ``mixed_precision="bf16"`` (the Trainer's
    ``bf16=True``): ``convert_outputs_to_fp32(autocast(forward))``.
    """
    torch = _torch()
    from transformers import AutoModelForCausalLM

    precision = _check_precision(precision)
    _check_choice("device", device, DEVICES)
    impl = _config_attn_implementation(config)
    torch.manual_seed(seed)
    # A copy: switching the attention implementation later changes the model's config.
    model = AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=impl)
    model.to(device=device, dtype=getattr(torch, TORCH_DTYPES[precision]))
    model.train()
    if precision == "bf16-autocast":
        from types import MethodType

        from accelerate.utils import convert_outputs_to_fp32

        # accelerate/accelerator.py, prepare_model (native_amp): the same two wraps.
        autocast = torch.autocast(device_type=device, dtype=torch.bfloat16)
        model.forward = MethodType(autocast(model.forward.__func__), model)
        model.forward = MethodType(convert_outputs_to_fp32(model.forward.__func__), model)
    return model


def _model_and_batch(config, batch_size: int, seq_len: int, precision: str, recompute: str,
                     seed: int, device: str = "cpu"):
    """The model of ``build_model`` with ``recompute`` switched on, and a seeded batch of
    token ids for it."""
    torch = _torch()
    _check_choice("recompute", recompute, RECOMPUTE)
    b = _check_positive("batch_size", batch_size)
    s = _check_positive("seq_len", seq_len)
    model = build_model(config, precision, seed, device)
    if recompute == "full":
        _enable_full_recomputation(model)
    elif recompute == "selective":
        enable_selective_recomputation(model)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (b, s), generator=generator).to(device)
    return model, ids


def measure_cuda_activations(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                             recompute: str = "none", seed: int = 0) -> int:
    """The CUDA allocator's bytes alive when the forward pass returns (the caller
    holding the output), less what was allocated before it: ``activations`` of
    ``estimate_training_memory(..., device="cuda")`` without the token ids, with each
    block rounded up to 512 bytes by the caching allocator. Needs a GPU."""
    torch = _torch()
    if not torch.cuda.is_available():
        raise RuntimeError("measure_cuda_activations needs a CUDA device")
    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed,
                                  device="cuda")
    # A first forward pass makes what persists across steps (cuBLAS's workspace,
    # kernels' scratch): not activations.
    warmup = model(input_ids=ids, labels=ids, use_cache=False)
    del warmup
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    out = model(input_ids=ids, labels=ids, use_cache=False)
    gc.collect()
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    del out, model, ids
    gc.collect()
    torch.cuda.empty_cache()
    return held


def measure_training_memory(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                            optimizer: str = "adamw", recompute: str = "none",
                            seed: int = 0) -> dict[str, int]:
    """Run one training step and measure what ``estimate_training_memory`` estimates.

    Builds the model (``build_model``), runs ``model(input_ids=ids, labels=ids,
    use_cache=False)`` under a ``ForwardMemoryMeter`` and reads, with the output held,
    ``activations`` (every storage created by the forward or saved for backward that
    is still alive, and every allocation still alive that no tensor operation made,
    parameters and buffers excluded) and ``logits`` (those created from the output
    layer on). Then ``loss.backward()`` (``gradients``: the bytes of the parameters'
    ``.grad``) and one optimizer step (``optimizer``: the bytes of its state). Returns
    the same keys as the estimate, without ``terms``.
    """
    torch = _torch()
    from bookkit.step_memory import optimizer_state_bytes, tensor_bytes
    from bookkit.torchmem import ForwardMemoryMeter, older_objects_frozen

    _check_choice("optimizer", optimizer, OPTIMIZERS)
    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed)
    head = model.get_output_embeddings()
    handle = head.register_forward_pre_hook(lambda *_: meter.phase("head"))
    # Garbage of earlier models freed by a collection during the forward would make the
    # profiler warn about blocks it never saw allocated: what is older than this call
    # is left out of the meter's collections (which also keeps them fast).
    try:
        with older_objects_frozen():
            with ForwardMemoryMeter(exclude=[model], inputs=[ids]) as meter:
                out = model(input_ids=ids, labels=ids, use_cache=False)
            activations = meter.alive_bytes()
            logits = meter.alive_bytes("head")
    finally:
        handle.remove()
    out.loss.backward()
    del out
    params = list(model.parameters())
    gradients = tensor_bytes(p.grad for p in params)
    opt = (torch.optim.AdamW(params) if optimizer == "adamw" else torch.optim.SGD(params, lr=1e-3))
    opt.step()
    return _breakdown(tensor_bytes(params), gradients, optimizer_state_bytes(opt), activations, logits)


def steady_step_trace(model, ids, optimizer: str = "adamw", before_step=None,
                      after_forward=None):
    """The Trainer's steady-state step, traced: run one step (it allocates the optimizer's
    state), then trace a second with the CPU allocator: ``zero_grad(set_to_none=True)``,
    ``out = model(input_ids=ids, labels=ids, use_cache=False)``, ``loss = out.loss``,
    ``del out``, ``loss.backward()``, ``opt.step()``, marking ``"forward"`` and
    ``"backward"``. ``before_step(trace)`` runs before each step (``trace`` None for the
    first) and ``after_forward()`` when the forward has returned: how a caller adds marks.

    Returns:
        ``(start, trace)``: the bytes alive before the traced step (parameters, buffers,
        optimizer state, token ids, counted from the tensors) and its `AllocatorTrace`.
    """
    torch = _torch()
    from bookkit.step_memory import optimizer_state_bytes, tensor_bytes
    from bookkit.torchmem import AllocatorTrace, older_objects_frozen

    _check_choice("optimizer", optimizer, OPTIMIZERS)
    params = list(model.parameters())
    opt = (torch.optim.AdamW(params) if optimizer == "adamw"
           else torch.optim.SGD(params, lr=1e-3))

    def step(trace=None):
        if before_step is not None:
            before_step(trace)
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=ids, use_cache=False)
        loss = out.loss
        del out
        if after_forward is not None:
            after_forward()
        if trace:
            trace.mark("forward")
        loss.backward()
        del loss
        if trace:
            trace.mark("backward")
        opt.step()

    step()                                  # allocates the optimizer's state
    opt.zero_grad(set_to_none=True)
    gc.collect()
    start = (tensor_bytes(params) + tensor_bytes(model.buffers())
             + optimizer_state_bytes(opt) + tensor_bytes([ids]))
    with older_objects_frozen(), AllocatorTrace("cpu") as trace:
        step(trace)
    return start, trace


def measure_step_peak(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                      optimizer: str = "adamw", recompute: str = "none",
                      seed: int = 0) -> dict[str, Any]:
    """The CPU allocator's highest point over one steady-state training step.

    Independent of the formula: builds the model (``build_model``), runs one step to
    allocate the optimizer's state, then measures a second one as the Trainer runs
    it: ``zero_grad(set_to_none=True)``, ``out = model(input_ids=ids, labels=ids,
    use_cache=False)``, ``loss = out.loss``, ``del out``, ``loss.backward()``,
    ``opt.step()``. What exists before (parameters, buffers, optimizer state, token
    ids) is counted from the tensors; the rest by ``AllocatorTrace`` (one thread).

    Returns:
        ``{"peak": bytes, "peak_phase": "forward"|"backward"|"optimizer",
        "timeline": {"start", "forward", "backward", "optimizer": bytes at the end
        of each phase}}``.

    Example:
        >>> from transformers import LlamaConfig
        >>> cfg = LlamaConfig(hidden_size=32, intermediate_size=64,
        ...                   num_hidden_layers=1, num_attention_heads=2,
        ...                   num_key_value_heads=2, vocab_size=128)
        >>> m = measure_step_peak(cfg, batch_size=1, seq_len=8)
        >>> m["peak"] >= m["timeline"]["forward"]
        True
    """
    _check_choice("optimizer", optimizer, OPTIMIZERS)
    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed)
    start, trace = steady_step_trace(model, ids, optimizer)
    phases = {"forward": trace.peaks["forward"], "backward": trace.peaks["backward"],
              "optimizer": trace.peaks["end"]}
    phase = max(phases, key=phases.get)
    timeline = {"start": start, "forward": start + trace.held["forward"],
                "backward": start + trace.held["backward"],
                "optimizer": start + trace.end_bytes}
    return {"peak": start + phases[phase], "peak_phase": phase, "timeline": timeline}


def alive_bytes_three_ways(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                           recompute: str = "none", seed: int = 0) -> dict[str, int]:
    """The activations of one forward pass by three meters that know nothing of the formula.

    Each runs ``model(input_ids=ids, labels=ids, use_cache=False)`` on a fresh model
    (``build_model``, ``recompute`` switched on) and reads, with the output held:

    ``"allocator"``
        the bytes the CPU allocator handed out during the forward and has not got
        back (``torch.profiler``'s memory events): the literal "bytes alive", blind
        only to what existed before, such as the token ids autograd saves;
    ``"MemTracker"``
        ``torch.distributed._tools.mem_tracker.MemTracker``'s activations: what ATen
        operations created, blind to the RNG state ``torch.utils.checkpoint`` stashes
        and to Python numbers autograd saves (neither is made by an ATen operation);
    ``"saved hooks + output"``
        what autograd saved through ``saved_tensors_hooks`` (``SavedTensorMeter``) plus
        the returned logits and loss: blind to what a checkpoint keeps in its closure
        (its RNG state, and the keyword arguments it will re-run its function with)
        and to the Python numbers autograd saves without calling the hooks.

    Chapter 22 shows how each differs from ``estimate_training_memory``'s activations,
    term by term. Returns ``{meter: bytes}``.
    """
    from bookkit.torchmem import older_objects_frozen

    with older_objects_frozen():   # each gc.collect() below sees only this call's objects
        return _alive_bytes_three_ways(config, batch_size, seq_len, precision, recompute, seed)


def _alive_bytes_three_ways(config, batch_size, seq_len, precision, recompute, seed):
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.profiler import ProfilerActivity, profile

    from bookkit.torchmem import SavedTensorMeter, _cpu_allocations_alive, _quiet_native_stderr

    def step(model, ids):
        return model(input_ids=ids, labels=ids, use_cache=False)

    readings = {}
    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed)
    gc.collect()
    profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_native_stderr():
        profiler.start()
    out = step(model, ids)
    gc.collect()
    with _quiet_native_stderr():
        profiler.stop()
    readings["allocator"] = sum(nbytes for nbytes, _ in _cpu_allocations_alive(profiler).values())
    del out, model

    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed)
    tracker = MemTracker()
    tracker.track_external(model, ids)
    with tracker:
        out = step(model, ids)
        gc.collect()
        (snapshot,) = tracker.get_tracker_snapshot("current").values()
    by_kind = {str(getattr(kind, "value", kind)): nbytes for kind, nbytes in snapshot.items()}
    readings["MemTracker"] = by_kind["Activation"] + by_kind["Temp"]
    del out, model

    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed)
    with SavedTensorMeter(params=model) as saved:
        out = step(model, ids)
    gc.collect()
    returned = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in (out.logits, out.loss)}
    saved_ptrs = {ptr for _, ptr in saved._live}
    readings["saved hooks + output"] = saved.live_bytes + sum(
        nbytes for ptr, nbytes in returned.items() if ptr not in saved_ptrs)
    del out, model
    return readings


# ---------------------------------------------------------------------------------
# Presenting it
# ---------------------------------------------------------------------------------
def _human(n: int) -> str:
    from bookkit import fmt_bytes
    return fmt_bytes(n, 2)


def format_table(estimate: Mapping[str, Any], terms: list[Term] | None = None) -> str:
    """The breakdown as a text table: the categories, then (if ``terms`` is given, from
    ``activation_terms``) each activation term with its count × bytes per copy."""
    names = [t.name for t in terms or []]
    width = max([28] + [len(n) + 4 for n in names])
    lines = [f"{'':{width}s} {'bytes':>18s} {'':>11s}  {'count x each':>18s}"]
    for key in ("parameters", "gradients", "optimizer", "activations"):
        lines.append(f"{key:{width}s} {estimate[key]:18,d} {_human(estimate[key]):>11s}")
        if key == "activations":
            for t in terms or []:
                lines.append(f"  {t.name:{width - 2}s} {t.bytes:18,d} {_human(t.bytes):>11s}"
                             f"  {t.count:>5d} x {_human(t.each):>10s}")
    lines.append(f"{'of which logits and loss':{width}s} {estimate['logits']:18,d} "
                 f"{_human(estimate['logits']):>11s}")
    lines.append(f"{'total':{width}s} {estimate['total']:18,d} {_human(estimate['total']):>11s}")
    return "\n".join(lines)


_SIZE_FLAGS = {
    "gpt2": ("GPT-2 (GPT2Config names)", ("n-layer", "n-embd", "n-head", "n-inner", "n-positions")),
    "llama": ("Llama (LlamaConfig names)", ("num-hidden-layers", "hidden-size", "num-attention-heads",
                                            "num-key-value-heads", "head-dim", "intermediate-size")),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bookkit.calculator",
        description="Training memory of a GPT-2 or Llama model (transformers, PyTorch CPU kernels).")
    p.add_argument("--model", choices=MODELS, required=True)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="bf16-autocast: the Trainer's bf16=True (float32 model under autocast)")
    p.add_argument("--device", choices=DEVICES, default="cpu",
                   help="whose kernels: cpu (measured) or cuda (read from torch's source)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none")
    p.add_argument("--attn-implementation", choices=ATTENTION_IMPLEMENTATIONS, default="sdpa")
    p.add_argument("--vocab-size", type=int, help="default: the config's (50257 / 32000)")
    p.add_argument("--no-terms", action="store_true", help="print only the categories")
    # The size options carry the configs' own names (GPT2Config's, LlamaConfig's).
    for model, (title, flags) in _SIZE_FLAGS.items():
        group = p.add_argument_group(title)
        for flag in flags:
            group.add_argument(f"--{flag}", type=int)
    p.add_argument("--dropout", type=float, help="GPT-2: attn_pdrop, resid_pdrop and embd_pdrop; "
                   "Llama: attention_dropout")
    p.add_argument("--activation-function", help="GPT-2: activation_function; Llama: hidden_act")
    p.add_argument("--tie-word-embeddings", choices=("true", "false"),
                   help="default: the config's (GPT-2 true, Llama false)")
    return p


def _config_from_args(args):
    from transformers import GPT2Config, LlamaConfig

    def given(**kw):
        return {k: v for k, v in kw.items() if v is not None}

    for model, (title, flags) in _SIZE_FLAGS.items():
        wrong = [f"--{flag}" for flag in flags
                 if model != args.model and getattr(args, flag.replace("-", "_")) is not None]
        if wrong:
            family = title.split(" (")[0]
            kind = f"is a {family} option" if len(wrong) == 1 else f"are {family} options"
            raise ValueError(f"{', '.join(wrong)} {kind}, but --model is {args.model}; use "
                             f"{', '.join('--' + f for f in _SIZE_FLAGS[args.model][1])}")
    common = given(vocab_size=args.vocab_size)
    if args.tie_word_embeddings is not None:
        common["tie_word_embeddings"] = args.tie_word_embeddings == "true"
    if args.model == "gpt2":
        kw = given(n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head,
                   n_inner=args.n_inner, n_positions=args.n_positions,
                   activation_function=args.activation_function)
        if args.dropout is not None:
            kw.update(attn_pdrop=args.dropout, resid_pdrop=args.dropout, embd_pdrop=args.dropout)
        config = GPT2Config(**kw, **common)
    else:
        kw = given(num_hidden_layers=args.num_hidden_layers, hidden_size=args.hidden_size,
                   num_attention_heads=args.num_attention_heads,
                   num_key_value_heads=args.num_key_value_heads, head_dim=args.head_dim,
                   intermediate_size=args.intermediate_size, attention_dropout=args.dropout,
                   hidden_act=args.activation_function)
        config = LlamaConfig(**kw, **common)
    config._attn_implementation = args.attn_implementation
    return config


def main(argv=None) -> int:
    """Command line: print the breakdown of one configuration as a table."""
    args = _parser().parse_args(argv)
    try:
        config = _config_from_args(args)
        est = estimate_training_memory(config, batch_size=args.batch_size, seq_len=args.seq_len,
                                       precision=args.precision, optimizer=args.optimizer,
                                       device=args.device,
                                       recompute=args.recompute)
    except (ValueError, TypeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    spec = model_spec(config)
    n_params, _ = parameter_count(spec)
    print(f"{spec.model}: {spec.n_layers} layers, hidden {spec.hidden}, {spec.n_heads} heads"
          f" ({spec.n_kv_heads} key/value), head dim {spec.head_dim},")
    print(f"  intermediate {spec.intermediate}, vocabulary {spec.vocab}, {n_params:,} parameters")
    print(f"batch {args.batch_size} x {args.seq_len} tokens, {args.precision} on {args.device}, "
          f"{args.optimizer},")
    print(f"  recompute {args.recompute}, attention {spec.attn_implementation}"
          f" (dropout {spec.attention_dropout:g})")
    terms = None if args.no_terms else activation_terms(
        config, batch_size=args.batch_size, seq_len=args.seq_len, precision=args.precision,
        device=args.device,
        recompute=args.recompute)
    print(format_table(est, terms))
    need = required_bytes(est, args.device)
    print(f"step peak {_human(est['peak'])} ({est['peak_phase']})")
    print(f"needs {need / GB:.2f} GB"
          + (" (1 GiB CUDA context, 5 % allocator margin)" if args.device == "cuda" else ""))
    print("fits on: " + " · ".join(
        f"{g} GB {'yes' if need <= g * GB else 'no'}" for g in FITS_GB))
    return 0


if __name__ == "__main__":
    sys.exit(main())
