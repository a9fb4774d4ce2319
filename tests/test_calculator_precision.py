"""The calculator's recipes (``precision``) and kernels (``device``).

* ``bf16-autocast`` on the CPU: every term is measured, so the estimate must equal the
  measurement to the byte (``measure_training_memory``), on a grid and on random
  configurations, as for ``fp32`` and ``bf16`` (test_calculator.py).
* ``device="cuda"``: the terms that differ from the CPU are read from torch's CUDA code
  (``calculator.CUDA_SOURCES``), not run; these tests pin what each one is, relative
  to the CPU terms the allocator confirms: a test fails if a CUDA term is dropped,
  doubled or given the wrong width. ``scripts/gpu_check.sh`` measures them on a GPU.
"""
from __future__ import annotations


import pytest

from marks import fast_every

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bookkit import calculator  # noqa: E402
from transformers import GPT2Config  # noqa: E402

from hf_configs import KEYS, assert_exact, gpt2, llama, quiet_rename_warning  # noqa: E402,F401
from bookkit.calculator import (  # noqa: E402
    activation_terms,
    build_model,
    estimate_training_memory,
    parameter_count,
)

transformers.logging.set_verbosity_error()


def terms(config, **kw):
    return {t.name: t.bytes for t in activation_terms(config, **kw)}


# -- bf16-autocast on the CPU: measured ------------------------------------------------------
GRID = [(make, attn, dropout, recompute)
        for make in (gpt2, llama) for attn in ("eager", "sdpa") for dropout in (0.0, 0.1)
        for recompute in ("none", "full", "selective")]


@pytest.mark.parametrize("make,attn,dropout,recompute", fast_every(GRID, 7),
                         ids=[f"{m.__name__}-{a}-p{p}-{r}" for m, a, p, r in GRID])
def test_autocast_estimate_equals_measurement_on_grid(make, attn, dropout, recompute):
    index = GRID.index((make, attn, dropout, recompute))
    assert_exact(make(attn, dropout), batch_size=1 + index % 3, seq_len=24 + 8 * (index % 4),
                 precision="bf16-autocast", recompute=recompute)


@pytest.mark.parametrize("config,batch", [
    (llama("eager", 0.1, num_key_value_heads=1), 1),      # expanded K: autocast's cast copies it
    (llama("sdpa", num_attention_heads=2, num_key_value_heads=1, head_dim=272), 1),
    (llama("sdpa", num_attention_heads=2, num_key_value_heads=1, head_dim=272), 2),
    (gpt2("eager", 0.1, n_head=1), 1),
    (llama("eager", 0.1, attention_bias=True, mlp_bias=True, tie_word_embeddings=True), 3),
])
def test_autocast_edge_cases(config, batch):
    assert_exact(config, batch_size=batch, seq_len=16, precision="bf16-autocast")


@st.composite
def configs(draw):
    attn = draw(st.sampled_from(["eager", "sdpa"]))
    heads = draw(st.integers(1, 4))
    common = dict(vocab_size=draw(st.integers(256, 2000)), tie_word_embeddings=draw(st.booleans()))
    p = draw(st.sampled_from([0.0, 0.1]))
    if draw(st.booleans()):
        hidden = heads * draw(st.integers(-(-64 // heads), 128 // heads))
        return gpt2(attn, p, n_layer=draw(st.integers(1, 3)), n_embd=hidden, n_head=heads,
                    n_inner=draw(st.one_of(st.none(), st.integers(64, 384))),
                    activation_function=draw(st.sampled_from(sorted(calculator.ACTIVATIONS))),
                    **common)
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    hidden = 2 * heads * draw(st.integers(-(-32 // heads), 64 // heads))
    return llama(attn, p, num_hidden_layers=draw(st.integers(1, 3)), hidden_size=hidden,
                 num_attention_heads=heads, num_key_value_heads=kv,
                 head_dim=draw(st.sampled_from([hidden // heads, 2 * draw(st.integers(2, 24))])),
                 intermediate_size=draw(st.integers(64, 300)),
                 attention_bias=draw(st.booleans()), mlp_bias=draw(st.booleans()),
                 hidden_act=draw(st.sampled_from(sorted(calculator.ACTIVATIONS))), **common)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(config=configs(), batch=st.integers(1, 4), seq=st.integers(8, 96),
       optimizer=st.sampled_from(["adamw", "sgd"]),
       recompute=st.sampled_from(["none", "full", "selective"]))
def test_autocast_estimate_equals_measurement_on_random_configs(config, batch, seq, optimizer,
                                                                recompute):
    assert_exact(config, batch_size=batch, seq_len=seq, precision="bf16-autocast",
                 optimizer=optimizer, recompute=recompute)


def test_autocast_model_is_wrapped_like_accelerate():
    model = build_model(gpt2(), "bf16-autocast")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    ids = torch.randint(0, 300, (1, 8))
    out = model(input_ids=ids, labels=ids, use_cache=False)
    assert out.logits.dtype == torch.float32           # convert_outputs_to_fp32
    assert not torch.is_autocast_enabled("cpu")         # the region ended with forward


def test_autocast_model_states_are_sixteen_bytes_per_parameter():
    config = llama()
    n, tensors = parameter_count(calculator.model_spec(config))
    est = estimate_training_memory(config, batch_size=1, seq_len=8, precision="bf16-autocast")
    assert est["parameters"] + est["gradients"] + est["optimizer"] == 16 * n + 4 * tensors
    # the bfloat16 working copies of the weights are activations, 2 bytes per weight
    copies = sum(v for k, v in est["terms"].items() if "weight" in k and "bfloat16" in k)
    spec = calculator.model_spec(config)
    weights = spec.n_layers * calculator._matmul_weights_per_layer(spec) + spec.vocab * spec.hidden
    assert copies == 2 * weights


def test_dtype_names_are_precisions():
    a = estimate_training_memory(gpt2(), batch_size=1, seq_len=8, precision="bfloat16")
    b = estimate_training_memory(gpt2(), batch_size=1, seq_len=8, precision="bf16")
    assert a == b


# -- device="cuda": what torch's CUDA code keeps, pinned against the CPU terms -----------------
B, S = 2, 40
T = B * S


@pytest.mark.parametrize("precision", ["fp32", "bf16", "bf16-autocast"])
def test_cuda_has_no_host_side_terms(precision):
    for config in (gpt2("eager", 0.1), llama("eager", 0.1)):
        for recompute in ("none", "full", "selective"):
            cuda = terms(config, batch_size=B, seq_len=S, precision=precision,
                         recompute=recompute, device="cuda")
            assert not any("RNG state" in k or "Python scalars" in k for k in cuda), cuda


@pytest.mark.parametrize("precision,e", [("fp32", 4), ("bf16", 2), ("bf16-autocast", 2)])
def test_cuda_dropout_masks_are_one_byte(precision, e):
    config = gpt2("eager", 0.1)
    cpu = terms(config, batch_size=B, seq_len=S, precision=precision)
    cuda = terms(config, batch_size=B, seq_len=S, precision=precision, device="cuda")
    for name in ("attention residual dropout mask", "MLP dropout mask", "attention dropout mask"):
        assert cuda[name] * e == cpu[name], name
    r = 4 if precision != "bf16" else 2            # embeddings are float32 under autocast
    assert cuda["embedding dropout mask"] * r == cpu["embedding dropout mask"]


@pytest.mark.parametrize("precision", ["fp32", "bf16", "bf16-autocast"])
def test_cuda_layer_norm_statistics_are_float32(precision):
    cuda = terms(gpt2(), batch_size=B, seq_len=S, precision=precision, device="cuda")
    assert cuda["ln_1 mean and 1/std"] == 2 * 2 * T * 4        # 2 layers, mean and rstd
    assert cuda["ln_f mean and 1/std"] == 2 * T * 4


@pytest.mark.parametrize("make", [gpt2, llama])
def test_cuda_sdpa_stays_fused_with_dropout(make):
    for precision in ("fp32", "bf16", "bf16-autocast"):
        cpu = terms(make("sdpa", 0.1), batch_size=B, seq_len=S, precision=precision)
        cuda = terms(make("sdpa", 0.1), batch_size=B, seq_len=S, precision=precision,
                     device="cuda")
        assert any("math path" in k for k in cpu)
        assert not any("math path" in k for k in cuda)
        no_dropout = terms(make("sdpa"), batch_size=B, seq_len=S, precision=precision,
                           device="cuda")
        attention = {k: v for k, v in cuda.items() if "fused kernel" in k}
        assert attention == {k: v for k, v in no_dropout.items() if "fused kernel" in k}


def test_cuda_log_sum_exp_padding():
    # float32 runs the memory-efficient kernel: log-sum-exp padded to 32 queries;
    # bfloat16 runs flash attention: one per query.
    a, L = 4, 2
    for s, padded in ((40, 64), (64, 64), (65, 96)):
        fp32 = terms(gpt2(), batch_size=1, seq_len=s, precision="fp32", device="cuda")
        bf16 = terms(gpt2(), batch_size=1, seq_len=s, precision="bf16-autocast", device="cuda")
        assert fp32["log-sum-exp (fused kernel)"] == L * a * padded * 4
        assert bf16["log-sum-exp (fused kernel)"] == L * a * s * 4


def test_cuda_autocast_gelu_new_runs_pow_in_float32():
    config = gpt2()
    i = 4 * 64
    cpu = terms(config, batch_size=B, seq_len=S, precision="bf16-autocast")
    cuda = terms(config, batch_size=B, seq_len=S, precision="bf16-autocast", device="cuda")
    mlp_cpu = sum(v for k, v in cpu.items() if "gelu_new" in k or "c_fc output" in k)
    mlp_cuda = sum(v for k, v in cuda.items() if "gelu_new" in k or "c_fc output" in k)
    assert mlp_cpu == 2 * T * i * (2 + 2 + 2 + 2 + 2)          # x, tanh, 0.5x, 1+tanh, out
    assert mlp_cuda == 2 * T * i * (4 + 4 + 4 + 2 + 2)         # float32 x, tanh, 1+tanh
    # Other activations and the pure recipes are the same on both devices.
    for act in ("gelu", "relu", "silu"):
        c = gpt2(activation_function=act)
        assert (terms(c, batch_size=B, seq_len=S, precision="bf16-autocast")
                == terms(c, batch_size=B, seq_len=S, precision="bf16-autocast", device="cuda"))


def test_cuda_changes_nothing_else():
    # Without dropout, LayerNorm or gelu_new, and without host-side terms, a Llama with
    # sdpa and no recomputation is the same on both devices.
    for precision in ("fp32", "bf16", "bf16-autocast"):
        config = llama("sdpa", hidden_act="silu")
        cpu = terms(config, batch_size=B, seq_len=S, precision=precision)
        cuda = terms(config, batch_size=B, seq_len=S, precision=precision, device="cuda")
        if precision == "fp32":            # memory-efficient kernel: padded log-sum-exp
            cpu.pop("log-sum-exp (fused kernel)"), cuda.pop("log-sum-exp (fused kernel)")
        assert cpu == cuda


def test_cuda_sources_name_files():
    for what, (why, where) in calculator.CUDA_SOURCES.items():
        assert why and (".yaml" in where or ".h" in where or ".py" in where or ".cu" in where)


def test_bad_precision_and_device_are_named():
    with pytest.raises(ValueError, match="precision"):
        estimate_training_memory(gpt2(), batch_size=1, seq_len=8, precision="fp16")
    with pytest.raises(ValueError, match="device"):
        estimate_training_memory(gpt2(), batch_size=1, seq_len=8, device="tpu")


def test_cli_precision_and_device(capsys):
    code = calculator.main(["--model", "gpt2", "--n-layer", "2", "--n-embd", "64", "--n-head", "4",
                            "--vocab-size", "300", "--seq-len", "32",
                            "--precision", "bf16-autocast", "--device", "cuda"])
    out = capsys.readouterr().out
    assert code == 0
    assert "bf16-autocast on cuda" in out
    assert "logits in float32 (returned, accelerate's copy)" in out
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=300)   # the CLI's defaults
    est = estimate_training_memory(config, batch_size=1, seq_len=32, precision="bf16-autocast",
                                   device="cuda")
    assert f"{est['total']:,d}" in out
