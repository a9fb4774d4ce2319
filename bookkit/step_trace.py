"""One training step's memory, allocation by allocation (chapter 23).

``measure_step_trace`` runs the same steady-state step as
``bookkit.calculator.measure_step_peak`` and keeps the CPU allocator's count after
every allocation and release, with marks where the forward pass makes the logits,
where it returns, where the loss's backward and each layer's backward end, and where
``backward()`` returns: PyTorch's memory snapshot, on a CPU, with the phases named.
``bookkit.figures.step_memory_trace`` draws it against the calculator's timeline.
"""
from __future__ import annotations

from typing import Any

__all__ = ["PHASES", "measure_step_trace"]

PHASES = ("forward", "loss", "backward", "optimizer")
"""The step's four phases, in order. ``forward``: from ``zero_grad`` until the output
layer has made the logits; ``loss``: the loss's forward and, after the output is
dropped, its backward, until the logits' gradient exists; ``backward``: the rest of
``backward()``, layer by layer; ``optimizer``: ``opt.step()``."""


def _decoder_layers(model):
    # GPT2Model keeps its blocks in .h, LlamaModel (and most decoders) in .layers.
    base = model.base_model
    layers = getattr(base, "layers", None)
    if layers is None:
        layers = getattr(base, "h", None)
    if layers is None:
        raise ValueError(f"measure_step_trace: no decoder layers (.layers or .h) "
                         f"in {type(base).__name__}")
    return list(layers)


def measure_step_trace(config, *, batch_size: int, seq_len: int, precision: str = "fp32",
                       optimizer: str = "adamw", recompute: str = "none",
                       seed: int = 0) -> dict[str, Any]:
    """The CPU allocator's bytes after every allocation and release of one training step.

    The step and the bytes counted before it are those of
    ``bookkit.calculator.measure_step_peak`` (same model, batch and warm-up step, so
    the same peak): ``zero_grad(set_to_none=True)``, ``out = model(input_ids=ids,
    labels=ids, use_cache=False)``, ``loss = out.loss``, ``del out``,
    ``loss.backward()``, ``opt.step()``, on one thread. Hooks mark the points
    between: a forward hook on the output layer (the logits exist), a gradient hook
    on the logits (the loss's backward is done) and one on each decoder layer's input
    (that layer's backward is done). They allocate nothing. Shown in chapter 23.

    Args:
        config: a ``GPT2Config`` or ``LlamaConfig`` (as ``measure_step_peak``).
        batch_size, seq_len: the batch, ``batch_size`` sequences of ``seq_len`` tokens.
        precision, optimizer, recompute, seed: as ``measure_step_peak``.

    Returns:
        A dict: ``bytes`` (bytes alive before the step's first allocation, then after
        each event: parameters, buffers, optimizer state and token ids included),
        ``marks`` (``{name: index into bytes}`` for ``"logits"``, ``"forward"``
        (the model returned and its output is dropped), ``"loss backward"``,
        ``"layer k backward"`` for k = L .. 1, ``"backward"``, ``"optimizer"`` (the
        end), in the order they happened), ``phases`` (``{phase: (first, last)}``
        index ranges of `PHASES`), ``phase_peaks`` (``{phase: (index, bytes)}``, the
        first highest point of each), ``peak``, ``peak_phase`` and ``start``.

    Example:
        >>> from transformers import LlamaConfig
        >>> from bookkit.step_trace import measure_step_trace
        >>> cfg = LlamaConfig(hidden_size=32, intermediate_size=64,
        ...                   num_hidden_layers=1, num_attention_heads=2,
        ...                   num_key_value_heads=2, vocab_size=128)
        >>> tr = measure_step_trace(cfg, batch_size=1, seq_len=8)
        >>> tr["peak"] == max(tr["bytes"])
        True
    """
    from bookkit.calculator import (OPTIMIZERS, _check_choice, _model_and_batch,
                                    steady_step_trace)

    _check_choice("optimizer", optimizer, OPTIMIZERS)
    model, ids = _model_and_batch(config, batch_size, seq_len, precision, recompute, seed)
    layers = _decoder_layers(model)
    state = {"trace": None, "forward": False}   # marks only in the measured step's forward

    def mark(name):
        def hook(grad):
            state["trace"].mark(name)
        return hook

    def on_logits(module, args, output):
        if state["trace"] is not None and state["forward"]:
            state["trace"].mark("logits")
            output.register_hook(mark("loss backward"))

    def on_layer_input(number):
        def pre_hook(module, args, kwargs):
            # A checkpointed layer runs again in the backward: only the first counts.
            if state["trace"] is not None and state["forward"]:
                hidden = args[0] if args else kwargs["hidden_states"]
                hidden.register_hook(mark(f"layer {number} backward"))
        return pre_hook

    handles = [model.get_output_embeddings().register_forward_hook(on_logits)]
    handles += [layer.register_forward_pre_hook(on_layer_input(k + 1), with_kwargs=True)
                for k, layer in enumerate(layers)]
    try:
        start, trace = steady_step_trace(
            model, ids, optimizer,
            before_step=lambda trace: state.update(trace=trace, forward=True),
            after_forward=lambda: state.update(forward=False))
    finally:
        for handle in handles:
            handle.remove()
    series = [start + held for held in trace.series]
    marks = dict(sorted(trace.mark_at.items(), key=lambda item: item[1]))
    marks["optimizer"] = len(series) - 1
    expected = {"logits", "forward", "loss backward", "backward",
                *(f"layer {k} backward" for k in range(1, len(layers) + 1))}
    if set(marks) != expected | {"optimizer"}:
        raise RuntimeError(f"measure_step_trace: marks {sorted(marks)} are not "
                           f"the step's {sorted(expected)}")
    bounds = (0, marks["logits"], marks["loss backward"], marks["backward"], len(series) - 1)
    phases = {name: (bounds[i], bounds[i + 1]) for i, name in enumerate(PHASES)}
    phase_peaks = {}
    for name, (first, last) in phases.items():
        top = max(series[first:last + 1])
        phase_peaks[name] = (first + series[first:last + 1].index(top), top)
    peak_phase = max(PHASES, key=lambda name: phase_peaks[name][1])
    return {"bytes": series, "marks": marks, "phases": phases, "phase_peaks": phase_peaks,
            "peak": phase_peaks[peak_phase][1], "peak_phase": peak_phase, "start": start}
