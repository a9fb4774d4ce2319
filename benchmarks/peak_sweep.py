"""The step peak of ``estimate_training_memory`` against the CPU allocator, on random configs.

Draws small GPT-2 and Llama configurations (transformers' own config classes) from a
seeded generator: eager or sdpa attention, with and without dropout, tied or untied
embeddings, grouped key/value heads, biases, the activations the calculator models;
fp32, bf16 and bf16 autocast; no, selective and full recomputation; AdamW and SGD;
batch 1-4 and 8-256 tokens. For each, ``measure_step_peak`` runs the step (about a
second) and the script prints estimate / measured - 1, then the worst error and how
many are within 3 %.

Usage::

    .venv/bin/python benchmarks/peak_sweep.py [--n 40] [--seed 0] [--first 0] [--large]

``tests/test_calculator_peak.py`` draws its random cases with ``draw_case`` too.
"""
from __future__ import annotations

import argparse
import random
import sys
import time

PRECISIONS = ("fp32", "bf16", "bf16-autocast")
RECOMPUTE = ("none", "selective", "full")
OPTIMIZERS = ("adamw", "sgd")


def _gpt2(rng: random.Random, s: int):
    from transformers import GPT2Config

    heads = rng.choice((1, 2, 3, 4, 8))
    head_dim = rng.choice((8, 16, 32))
    dropout = rng.choice((0.0, 0.0, 0.1))
    return GPT2Config(
        n_layer=rng.randint(1, 4), n_embd=heads * head_dim, n_head=heads,
        n_inner=rng.choice((None, None, heads * head_dim * 2)),
        vocab_size=rng.choice((97, 256, 1000, 4000, 8000)),
        n_positions=s + rng.choice((0, 64)),
        activation_function=rng.choice(("gelu_new", "gelu_new", "gelu", "relu")),
        attn_pdrop=dropout, resid_pdrop=dropout, embd_pdrop=dropout,
        tie_word_embeddings=rng.random() < 0.8,
        attn_implementation=rng.choice(("eager", "sdpa")))


def _llama(rng: random.Random):
    from transformers import LlamaConfig

    kv = rng.choice((1, 2, 4))
    heads = kv * rng.choice((1, 2, 4))
    head_dim = rng.choice((8, 16, 32))
    hidden = rng.choice((32, 48, 64, 128))
    return LlamaConfig(
        hidden_size=hidden, intermediate_size=rng.choice((2, 3, 4)) * hidden,
        num_hidden_layers=rng.randint(1, 4), num_attention_heads=heads,
        num_key_value_heads=kv, head_dim=head_dim,
        vocab_size=rng.choice((97, 256, 1000, 4000, 8000)),
        tie_word_embeddings=rng.random() < 0.3,
        attention_bias=rng.random() < 0.2, mlp_bias=rng.random() < 0.2,
        attention_dropout=rng.choice((0.0, 0.0, 0.0, 0.1)),
        attn_implementation=rng.choice(("eager", "sdpa")))


def draw_case(rng: random.Random) -> dict:
    """One random configuration and step: ``{"config", "batch_size", "seq_len",
    "precision", "recompute", "optimizer"}`` (keyword arguments of the estimate and of
    ``measure_step_peak``, the config under ``"config"``)."""
    b = rng.choice((1, 2, 3, 4))
    s = rng.choice((8, 16, 32, 64, 96, 128, 256))
    config = _gpt2(rng, s) if rng.random() < 0.5 else _llama(rng)
    return dict(config=config, batch_size=b, seq_len=s, precision=rng.choice(PRECISIONS),
                recompute=rng.choice(RECOMPUTE), optimizer=rng.choice(OPTIMIZERS))


def draw_large_case(rng: random.Random) -> dict:
    """A larger configuration (``--large``): widths 128-768, vocabularies 8000-32000,
    up to 2048 tokens, where oneDNN's scratch and the attention kernels' buffers are a
    small part of the step. Same keys as ``draw_case``."""
    from transformers import GPT2Config, LlamaConfig

    b = rng.choice((1, 2, 4))
    s = rng.choice((128, 256, 512))
    heads = rng.choice((2, 4, 8))
    head_dim = rng.choice((32, 64, 96))
    hidden = heads * head_dim
    vocab = rng.choice((8000, 16000, 32000))
    layers = rng.randint(1, 3)
    dropout = rng.choice((0.0, 0.0, 0.1))
    impl = rng.choice(("eager", "sdpa"))
    if rng.random() < 0.5:
        config = GPT2Config(
            n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab, n_positions=s,
            attn_pdrop=dropout, resid_pdrop=dropout, embd_pdrop=dropout,
            tie_word_embeddings=rng.random() < 0.8, attn_implementation=impl)
    else:
        kv = heads // rng.choice((1, 2))
        config = LlamaConfig(
            hidden_size=hidden, intermediate_size=rng.choice((2, 3, 4)) * hidden,
            num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
            head_dim=head_dim, vocab_size=vocab, tie_word_embeddings=rng.random() < 0.3,
            attention_dropout=dropout, attn_implementation=impl)
    return dict(config=config, batch_size=b, seq_len=s, precision=rng.choice(PRECISIONS),
                recompute=rng.choice(RECOMPUTE), optimizer=rng.choice(OPTIMIZERS))


def describe(case: dict) -> str:
    """A one-line name of a case."""
    c = case["config"]
    if c.model_type == "gpt2":
        shape = (f"gpt2 L{c.n_layer} h{c.n_embd} a{c.n_head} I{c.n_inner or 4 * c.n_embd} "
                 f"V{c.vocab_size} {c.activation_function} p{c.attn_pdrop:g}"
                 f"{' tied' if c.tie_word_embeddings else ''}")
    else:
        shape = (f"llama L{c.num_hidden_layers} h{c.hidden_size} a{c.num_attention_heads}"
                 f"/{c.num_key_value_heads} d{c.head_dim} I{c.intermediate_size} "
                 f"V{c.vocab_size} p{c.attention_dropout:g}"
                 f"{' tied' if c.tie_word_embeddings else ''}"
                 f"{' abias' if c.attention_bias else ''}{' mbias' if c.mlp_bias else ''}")
    return (f"{shape} {c._attn_implementation} b{case['batch_size']} s{case['seq_len']} "
            f"{case['precision']} {case['recompute']} {case['optimizer']}")


def error(case: dict) -> tuple[float, dict, dict]:
    """(estimate / measured - 1, the estimate, the measurement) of one case."""
    from bookkit.calculator import estimate_training_memory, measure_step_peak

    kw = {k: v for k, v in case.items() if k != "config"}
    measured = measure_step_peak(case["config"], **kw)
    estimate = estimate_training_memory(case["config"], **kw)
    return estimate["peak"] / measured["peak"] - 1, estimate, measured


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40, help="configurations (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--first", type=int, default=0, help="skip the first cases drawn")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--only", help="comma-separated case numbers to run")
    ap.add_argument("--large", action="store_true",
                    help="draw larger models (draw_large_case)")
    args = ap.parse_args(argv)
    import transformers
    transformers.logging.set_verbosity_error()     # configs with small vocabularies
    rng = random.Random(args.seed)
    draw = draw_large_case if args.large else draw_case
    cases = list(enumerate([draw(rng) for _ in range(args.first + args.n)]))[args.first:]
    if args.only:
        cases = [cases[int(i) - args.first] for i in args.only.split(",")]
    errors = []
    for i, case in cases:
        start = time.perf_counter()
        err, est, meas = error(case)
        errors.append(err)
        flag = "" if abs(err) <= args.tolerance else "  <--"
        print(f"{i:3d} {err:+7.2%} est {est['peak_phase']:9s} meas {meas['peak_phase']:9s} "
              f"{time.perf_counter() - start:4.1f}s  {describe(case)}{flag}", flush=True)
    within = sum(abs(e) <= args.tolerance for e in errors)
    worst = max(errors, key=abs)
    print(f"within {args.tolerance:.0%}: {within}/{len(errors)}; worst {worst:+.2%}")
    return 0 if within == len(errors) else 1


if __name__ == "__main__":
    sys.exit(main())
