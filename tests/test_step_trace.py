"""``measure_step_trace``: the allocator's count over one training step, event by event.

It must be the step ``measure_step_peak`` measures (same peak, same bytes at the
phase ends), its marks in the order the step makes them, and its phases must cover
the step without gaps."""
import pytest

pytest.importorskip("transformers")
from transformers import GPT2Config, LlamaConfig  # noqa: E402

from bookkit.calculator import measure_step_peak  # noqa: E402
from bookkit.step_trace import PHASES, measure_step_trace  # noqa: E402

LLAMA = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                    num_attention_heads=2, num_key_value_heads=1, vocab_size=1000)
GPT2 = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=500, n_positions=64,
                  attn_implementation="eager")

CASES = [  # (config, layers, precision, recompute, optimizer)
    (LLAMA, 3, "fp32", "none", "adamw"),
    (LLAMA, 3, "bf16-autocast", "full", "adamw"),
    (GPT2, 2, "bf16", "selective", "sgd"),
]


@pytest.mark.parametrize("config, layers, precision, recompute, optimizer", CASES)
def test_trace_is_the_step_measure_step_peak_measures(config, layers, precision,
                                                      recompute, optimizer):
    kw = dict(batch_size=2, seq_len=32, precision=precision, recompute=recompute,
              optimizer=optimizer)
    tr = measure_step_trace(config, **kw)
    ref = measure_step_peak(config, **kw)
    series, marks = tr["bytes"], tr["marks"]
    assert tr["start"] == series[0] == ref["timeline"]["start"]
    assert max(series) == tr["peak"] == ref["peak"]
    for name in ("forward", "backward", "optimizer"):
        assert series[marks[name]] == ref["timeline"][name]
    # The marks in the order the step makes them, layers' backward from the last.
    order = ["logits", "forward", "loss backward",
             *(f"layer {k} backward" for k in range(layers, 0, -1)),
             "backward", "optimizer"]
    assert list(marks) == order
    assert [marks[n] for n in order] == sorted(marks[n] for n in order)
    assert marks["logits"] < marks["loss backward"] < marks["backward"]
    assert marks["optimizer"] == len(series) - 1
    # Phases follow each other over the whole step; each peak lies in its phase.
    assert list(tr["phases"]) == list(PHASES)
    bounds = [tr["phases"][p] for p in PHASES]
    assert bounds[0][0] == 0 and bounds[-1][1] == len(series) - 1
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    for phase, (first, last) in tr["phases"].items():
        j, top = tr["phase_peaks"][phase]
        assert first <= j <= last and series[j] == top == max(series[first:last + 1])
    assert tr["phase_peaks"][tr["peak_phase"]][1] == tr["peak"]


def test_a_logits_heavy_step_peaks_in_the_loss():
    # V = 1000 against h = 32: the loss's float32 logit-sized gradients dominate.
    tr = measure_step_trace(LLAMA, batch_size=2, seq_len=32)
    assert tr["peak_phase"] == "loss"
    assert tr["phase_peaks"]["loss"][1] > tr["phase_peaks"]["backward"][1]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="optimizer"):
        measure_step_trace(LLAMA, batch_size=1, seq_len=8, optimizer="adam")
    with pytest.raises(ValueError, match="recompute"):
        measure_step_trace(LLAMA, batch_size=1, seq_len=8, recompute="some")
