"""The same MLP, the same weights, the same step in minigrad and in torch, measured alike.

Chapter 9 puts minigrad's byte ledger next to torch's meters (`bookkit.torchmem`) for
one model. This module builds the pair and runs the step in both frameworks:

``build_mlps(sizes, seed)``
    ``Linear(sizes[0], sizes[1]) - ReLU - Linear(sizes[1], sizes[2]) - ...`` (no ReLU
    after the last Linear) as a ``minigrad.nn.Sequential`` and a ``torch.nn.Sequential``
    whose parameters are equal bit for bit (minigrad draws them, torch receives a copy).
``minigrad_step`` / ``torch_step``
    One training step ``loss = mse_loss(model(x), 0)``, ``loss.backward()``, optionally
    ``optimizer.step()``, with the whole model in one checkpoint or not, returning a
    `StepRecord`: the loss, the gradients and the bytes per memory category at fixed
    points of the step (after the model's forward, after the loss, after backward,
    after the optimizer step), each from the framework's own meters.
``train``
    A few steps on a fixed sequence of batches (the S9 check): losses, final parameters
    and optimizer state.
``category_table`` / ``saved_table``
    Plain-text tables of those records, one column per run.

Bytes are exact integers. Shapes follow torch: inputs ``(batch, sizes[0])``, outputs
``(batch, sizes[-1])``; everything is float32 unless ``dtype`` says otherwise.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from bookkit.tables import Table
from minigrad.memory import BYTE_UNITS

__all__ = ["build_mlps", "copy_weights", "StepRecord", "minigrad_step", "torch_step",
           "minigrad_saved_arrays", "TrainRun", "train", "batches", "category_table",
           "saved_table", "CATEGORY_ROWS", "max_abs_diff"]

# The rows of `category_table`: (key in StepRecord.categories, label). Each is measured
# at a fixed point of the step, in bytes.
CATEGORY_ROWS = (
    ("parameters", "parameters"),
    ("saved_by_model", "saved for backward by the MLP (after its forward)"),
    ("saved_by_loss", "saved for backward by the loss"),
    ("saved", "saved for backward in all (between forward and backward)"),
    ("gradients", "gradients (after backward)"),
    ("optimizer", "optimizer state (after the first step)"),
)


def _check_sizes(sizes) -> list[int]:
    try:
        sizes = [int(s) for s in sizes]
    except TypeError:
        raise TypeError(f"sizes must be a sequence of layer widths, got {type(sizes).__name__}") from None
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"sizes must hold at least 2 widths, each >= 1 (input, ..., output); got {sizes}")
    return sizes


def build_mlps(sizes=(1024, 4096, 1024), seed: int = 0, dtype=np.float32):
    """The same MLP in both frameworks: ``(minigrad_model, torch_model)``.

    ``sizes``: widths ``[d_0, d_1, ..., d_n]``; layer ``i`` is ``Linear(d_i, d_{i+1})``,
    followed by a ReLU except after the last one. The default is the classic block
    Linear(1024, 4096) - ReLU - Linear(4096, 1024). minigrad initialises the weights
    (``minigrad.random.manual_seed(seed)``, torch's uniform ``±1/sqrt(fan_in)`` rule) and
    `copy_weights` gives torch the same values. Both models live on the CPU.

    Shown in chapter 9.
    """
    import torch
    from minigrad import nn, random

    sizes = _check_sizes(sizes)
    random.manual_seed(seed)
    mg_layers, t_layers = [], []
    for i, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        mg_layers.append(nn.Linear(d_in, d_out, dtype=dtype))
        t_layers.append(torch.nn.Linear(d_in, d_out, dtype=_torch_dtype(dtype)))
        if i < len(sizes) - 2:
            mg_layers.append(nn.ReLU())
            t_layers.append(torch.nn.ReLU())
    mg_model, t_model = nn.Sequential(*mg_layers), torch.nn.Sequential(*t_layers)
    copy_weights(mg_model, t_model)
    return mg_model, t_model


def _torch_dtype(dtype):
    import torch

    name = np.dtype(dtype).name
    if not hasattr(torch, name):
        raise ValueError(f"no torch dtype for NumPy dtype {name}")
    return getattr(torch, name)


def copy_weights(mg_model, torch_model) -> None:
    """Copy every minigrad parameter into the torch parameter of the same name, exactly.

    Both ``Sequential``s name their parameters ``"0.weight"``, ``"0.bias"``, ...; the
    names, shapes and dtypes must match one to one, else ValueError names the difference.

    Shown in chapter 9.
    """
    import torch

    src = dict(mg_model.named_parameters())
    dst = dict(torch_model.named_parameters())
    if set(src) != set(dst):
        raise ValueError(f"copy_weights: parameter names differ: minigrad {sorted(src)}, "
                         f"torch {sorted(dst)}")
    with torch.no_grad():
        for name, p in src.items():
            q = dst[name]
            if tuple(p.shape) != tuple(q.shape) or _torch_dtype(p.dtype) != q.dtype:
                raise ValueError(f"copy_weights: {name} is {tuple(p.shape)} {p.dtype} in minigrad "
                                 f"but {tuple(q.shape)} {q.dtype} in torch")
            q.copy_(torch.from_numpy(p.data))


@dataclass
class StepRecord:
    """What one training step did and kept, in one framework.

    framework: ``"minigrad"`` or ``"torch"``; checkpointed: whether the model ran
    inside one checkpoint; loss: the loss (float); grads: ``{name: array}`` copies of
    the parameters' gradients (NumPy, same shapes as the parameters);
    model_forwards: how many times the model's forward ran (2 with checkpointing:
    the forward and the recomputation in backward); categories: bytes per row of
    `CATEGORY_ROWS`; saved_tensors: ``{(shape, dtype): (count, bytes)}`` of the distinct
    buffers saved for backward, largest first; meters: extra figures of the
    framework's meters (see `minigrad_step` and `torch_step`), bytes.

    Shown in chapter 9.
    """

    framework: str
    checkpointed: bool
    loss: float
    grads: dict
    model_forwards: int
    categories: dict
    saved_tensors: dict
    meters: dict = field(default_factory=dict)


def _check_input(x, sizes_in: int):
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != sizes_in:
        raise ValueError(f"x must have shape (batch, {sizes_in}), got {x.shape}")
    return x


def _first_in(model) -> int:
    return next(iter(model)).weight.shape[1]


def _prepare(who: str, model):
    """The model's named parameters (which must hold no gradient yet), and ``run``: the
    model's forward, counting its calls in ``runs[0]``."""
    params = dict(model.named_parameters())
    if any(p.grad is not None for p in params.values()):
        raise ValueError(f"{who}: the model already holds gradients; call model.zero_grad() first")
    runs = [0]

    def run(h):
        runs[0] += 1
        return model(h)

    return params, run, runs


def minigrad_saved_arrays(root) -> dict:
    """Distinct arrays saved for backward by the graph that produced ``root`` (a
    minigrad Tensor): ``{(shape, dtype_name): (count, bytes)}``, largest bytes first.

    Arrays are grouped the way the ledger counts them: one entry per underlying buffer
    (a view and its base are one), with the buffer's full size; parameters (whose
    ``.data`` the ledger counts as ``"parameters"``) are left out, like torch's meter
    leaves them out. A checkpoint node's saved inputs are included; what the
    checkpoint will recompute is not (it is not saved yet).

    Shown in chapter 9.
    """
    from minigrad import autograd, nn, tensor

    param_bases, bases = set(), {}
    for node in tensor.graph_nodes(root):       # Contexts, and leaves that require grad
        if isinstance(node, nn.Parameter):
            param_bases.add(id(_base(node.data)))
    for a in autograd.saved_arrays(root):  # a checkpoint's kept inputs included
        b = _base(a)
        bases.setdefault(id(b), (b, a))
    groups: dict = {}
    for key, (b, a) in bases.items():
        if key in param_bases:
            continue
        g = groups.setdefault((tuple(a.shape), a.dtype.name), [0, 0])
        g[0] += 1
        g[1] += b.nbytes
    return {k: (c, n) for k, (c, n) in sorted(groups.items(), key=lambda kv: -kv[1][1])}


def _base(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def minigrad_step(model, x, checkpointed: bool, optimizer=None) -> StepRecord:
    """One step of ``mse_loss(model(x), zeros)`` in minigrad, measured by the ledger.

    ``x``: NumPy array (batch, in_features). With ``checkpointed`` the whole model runs
    in one ``minigrad.checkpoint.checkpoint``. ``optimizer`` (optional) takes one step
    after backward. The model's gradients must be None on entry (call ``zero_grad``).

    The ledger is process-wide, so bytes are *differences* of its live bytes per
    category from the start of the step (other objects alive in the notebook do not
    count), except ``parameters``: the model's own parameter buffers. ``meters`` holds
    ``ledger_temporaries_after_forward`` (registered arrays alive after the loss but not
    saved: op outputs the graph still references, the target, the loss) and
    ``ledger_peak`` (each category's maximum over the step and the maximum of the
    total, as differences from the start, so parameters count 0 there). The loss and
    the model's output are dropped after backward, before the optimizer step.

    Shown in chapter 9.
    """
    import minigrad
    from minigrad import memory
    from minigrad import ops as F
    from minigrad.checkpoint import checkpoint

    x = _check_input(x, _first_in(model))
    params, run, runs = _prepare("minigrad_step", model)

    with memory.track(record_timeline=False) as m:
        start = m.start
        # A fresh copy, wrapped inside the tracked region, so that the input's bytes are
        # part of the differences below (as an activation: the first Linear saves it).
        # Wrapping the caller's array itself would not do: if an earlier step registered
        # that array, the ledger still counts it (it is alive) from before the start.
        xt = minigrad.Tensor(x.copy())
        if checkpointed:
            with warnings.catch_warnings():
                # minigrad warns that x does not require grad because torch's *reentrant*
                # checkpoint would then drop the weights' gradients; the book uses the
                # non-reentrant mode, for which this is fine (and minigrad handles it).
                warnings.filterwarnings("ignore", message="checkpoint: none of the inputs")
                y = checkpoint(run, xt)
        else:
            y = run(xt)
        after_model = memory.live_bytes()
        loss = F.mse_loss(y, np.zeros(y.shape, y.dtype))
        after_forward = memory.live_bytes()
        saved_tensors = minigrad_saved_arrays(loss)
        loss.backward()
        after_backward = memory.live_bytes()
        # Drop the outputs before the update, as a training loop does when it moves on.
        # minigrad's nodes do not hold their parents' tensors (their edges point at nodes
        # and leaves), and backward has released what they saved; what is still alive
        # is the data of the tensors we hold, y's and the loss's (y's data would count
        # as a temporary in after_step).
        loss_value = float(loss.item())
        del loss, y
        if optimizer is not None:
            optimizer.step()
        after_step = memory.live_bytes()

    def d(snap, cat):
        return snap[cat] - start[cat]

    cats = {
        "parameters": sum(_base(p.data).nbytes for p in params.values()),
        "saved_by_model": d(after_model, "activations"),
        "saved_by_loss": d(after_forward, "activations") - d(after_model, "activations"),
        "saved": d(after_forward, "activations"),
        "gradients": d(after_backward, "gradients"),
        "optimizer": d(after_step, "optimizer") if optimizer is not None else None,
    }
    meters = {
        "ledger_temporaries_after_forward": d(after_forward, "temporaries"),
        "ledger_peak": {c: m.peak[c] - start[c] for c in m.peak},
    }
    return StepRecord("minigrad", bool(checkpointed), loss_value,
                      {n: p.grad.copy() for n, p in params.items()}, runs[0], cats,
                      saved_tensors, meters)


def torch_step(model, x, checkpointed: bool, optimizer=None, device: str = "cpu") -> StepRecord:
    """The same step in torch, measured by `bookkit.torchmem`'s meters.

    ``x``: NumPy array or CPU tensor (batch, in_features), copied to ``device`` inside
    the measured window. With ``checkpointed`` the model runs in one
    ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``. The model (on
    ``device``) must hold no gradients.

    Saved bytes come from `SavedTensorMeter` (distinct storages autograd saves,
    parameters excluded); parameters, gradients and optimizer state from torch's
    ``MemTracker`` ("current" snapshots at the same points as `minigrad_step`).
    ``meters``: ``tracker_after_forward`` (MemTracker's categories after the loss:
    "Activation" is every tensor created in forward that is still alive, saved or
    not; "Other" the input), ``tracker_peak`` (its breakdown when the total peaked),
    and the allocator's own figures from `AllocatorTrace`, counted from before the
    input exists (so the input counts, as it does in the saved bytes):
    ``allocator_after_forward`` (held after the loss) and ``allocator_step_peak`` (the
    step's peak, weights excluded: the like of MemTracker's total minus parameters).
    On a CPU they come from the profiler's allocation events, on a GPU from the
    caching allocator (512-byte blocks). The loss and the output are dropped after
    backward, before the optimizer step. Shown in chapter 9.
    """
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.utils.checkpoint import checkpoint

    from bookkit.torchmem import AllocatorTrace, SavedTensorMeter

    x = _check_input(x.cpu().numpy() if isinstance(x, torch.Tensor) else x, model[0].in_features)
    params, run, runs = _prepare("torch_step", model)

    with AllocatorTrace(device) as alloc:
        # The input is made inside the window, a copy (from_numpy would share NumPy's
        # memory, which no torch allocator sees).
        xt = torch.from_numpy(np.ascontiguousarray(x)).to(device, copy=True)
        mt = MemTracker()
        mt.track_external(*[o for o in (model, optimizer) if o is not None], xt)
        with mt:
            with SavedTensorMeter(params=model) as meter:
                y = checkpoint(run, xt, use_reentrant=False) if checkpointed else run(xt)
                saved_by_model = meter.live_bytes
                loss = torch.nn.functional.mse_loss(y, torch.zeros_like(y))
                saved = meter.live_bytes
            after_forward = _tracker_dict(mt.get_tracker_snapshot("current"))
            alloc.mark("after_forward")
            loss.backward()
            after_backward = _tracker_dict(mt.get_tracker_snapshot("current"))
            loss_value = float(loss.item())
            del loss, y  # as in minigrad_step: nothing of the forward outlives backward but x
            if optimizer is not None:
                optimizer.step()
            after_step = _tracker_dict(mt.get_tracker_snapshot("current"))
    cats = {
        "parameters": after_forward["Parameter"],
        "saved_by_model": saved_by_model,
        "saved_by_loss": saved - saved_by_model,
        "saved": saved,
        "gradients": after_backward["Gradient"],
        "optimizer": after_step["Optstate"] if optimizer is not None else None,
    }
    meters = {"tracker_after_forward": after_forward,
              "tracker_peak": _tracker_dict(mt.get_tracker_snapshot("peak")),
              "allocator_after_forward": alloc.held["after_forward"],
              "allocator_step_peak": alloc.peak_bytes}
    return StepRecord("torch", bool(checkpointed), loss_value,
                      {n: p.grad.detach().cpu().numpy().copy() for n, p in params.items()},
                      runs[0], cats, meter.by_shape(), meters)


def _tracker_dict(snapshot) -> dict:
    from bookkit.torchmem import TRACKER_CATEGORIES

    out = dict.fromkeys(TRACKER_CATEGORIES, 0)
    if snapshot:
        dev = max(snapshot.values(), key=lambda s: s["Total"])
        for k, v in dev.items():
            out[str(getattr(k, "value", k))] = int(v)
    return out


def max_abs_diff(a: dict, b: dict) -> float:
    """Largest ``|a[k] - b[k]|`` over the arrays of two ``{name: array}`` dicts with the
    same keys and shapes (ValueError otherwise). Shown in chapter 9."""
    if set(a) != set(b):
        raise ValueError(f"max_abs_diff: keys differ: {sorted(a)} vs {sorted(b)}")
    out = 0.0
    for k in a:
        u, v = np.asarray(a[k]), np.asarray(b[k])
        if u.shape != v.shape:
            raise ValueError(f"max_abs_diff: {k} has shape {u.shape} vs {v.shape}")
        out = max(out, float(np.max(np.abs(u.astype(np.float64) - v.astype(np.float64)), initial=0.0)))
    return out


# --- S9: several AdamW steps ------------------------------------------------------------

def batches(n_steps: int, batch: int, features: int, seed: int = 0) -> list[np.ndarray]:
    """``n_steps`` float32 arrays of shape (batch, features), standard normal, seeded:
    the same data for every run of `train`. Shown in chapter 9."""
    if n_steps < 1 or batch < 1 or features < 1:
        raise ValueError(f"batches: n_steps, batch and features must be >= 1, got {n_steps}, {batch}, {features}")
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, features), dtype=np.float32) for _ in range(n_steps)]


@dataclass
class TrainRun:
    """Result of `train`: ``losses`` (one float per step), ``params`` and ``exp_avg`` /
    ``exp_avg_sq`` (``{name: array}`` after the last step, NumPy copies). Shown in chapter 9."""

    framework: str
    checkpointed: bool
    losses: list
    params: dict
    exp_avg: dict
    exp_avg_sq: dict


def train(framework: str, sizes, data, checkpointed: bool, lr: float = 1e-3,
          weight_decay: float = 1e-2, seed: int = 0) -> TrainRun:
    """AdamW on ``mse_loss(model(x), 0)`` for each batch in ``data``, from the weights of
    ``build_mlps(sizes, seed)``, in ``framework`` ("minigrad" or "torch"). Shown in chapter 9."""
    import torch

    if framework not in ("minigrad", "torch"):
        raise ValueError(f"train: framework must be 'minigrad' or 'torch', got {framework!r}")
    mg_model, t_model = build_mlps(sizes, seed)
    losses = []
    if framework == "minigrad":
        from minigrad import optim

        del t_model
        opt = optim.AdamW(mg_model.parameters(), lr=lr, weight_decay=weight_decay)
        for x in data:
            mg_model.zero_grad()
            losses.append(minigrad_step(mg_model, x, checkpointed, opt).loss)
        named = dict(mg_model.named_parameters())
        state = {n: opt.state[id(p)] for n, p in named.items()}
        return TrainRun(framework, checkpointed, losses, {n: p.data.copy() for n, p in named.items()},
                        {n: s["exp_avg"].copy() for n, s in state.items()},
                        {n: s["exp_avg_sq"].copy() for n, s in state.items()})
    del mg_model
    opt = torch.optim.AdamW(t_model.parameters(), lr=lr, weight_decay=weight_decay)
    for x in data:
        t_model.zero_grad(set_to_none=True)
        losses.append(_torch_train_step(t_model, x, checkpointed, opt))
    named = dict(t_model.named_parameters())
    return TrainRun(framework, checkpointed, losses,
                    {n: p.detach().numpy().copy() for n, p in named.items()},
                    {n: opt.state[p]["exp_avg"].numpy().copy() for n, p in named.items()},
                    {n: opt.state[p]["exp_avg_sq"].numpy().copy() for n, p in named.items()})


def _torch_train_step(model, x, checkpointed, opt) -> float:
    # Unmetered (the meters only observe; chapter 0 and tests show they change nothing).
    import torch
    from torch.utils.checkpoint import checkpoint

    xt = torch.from_numpy(x)
    y = checkpoint(model, xt, use_reentrant=False) if checkpointed else model(xt)
    loss = torch.nn.functional.mse_loss(y, torch.zeros_like(y))
    loss.backward()
    opt.step()
    return float(loss.item())


# --- tables ----------------------------------------------------------------------------

def _label(r: StepRecord) -> str:
    return f"{r.framework} {'ckpt' if r.checkpointed else 'plain'}"


def category_table(records, unit: int = 1024) -> Table:
    """Bytes per category (rows of `CATEGORY_ROWS`) for each `StepRecord` (columns), in
    units of ``unit`` bytes (KiB by default), as a `bookkit.tables.Table` (HTML in the
    book, text in a console). Shown in chapter 9."""
    records = list(records)
    if not records:
        raise ValueError("category_table: no records given")
    if unit <= 0:
        raise ValueError(f"category_table: unit must be > 0 bytes, got {unit}")
    header = ["bytes / " + _unit_name(unit)] + [_label(r) for r in records]
    rows = []
    for key, lbl in CATEGORY_ROWS:
        values = [r.categories.get(key) for r in records]
        rows.append([lbl] + ["-" if v is None else _fmt(v / unit) for v in values])
    return Table(header, rows)


def _unit_name(unit: int) -> str:
    return {div: name for name, div in BYTE_UNITS.items()}.get(unit, f"{unit} B")


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def saved_table(records) -> Table:
    """The buffers each `StepRecord` saved for backward, by (shape, dtype): one row per
    shape, one column per record, ``count x KiB`` (``.`` where a run saved none), as a
    `bookkit.tables.Table`. Shown in chapter 9."""
    records = list(records)
    if not records:
        raise ValueError("saved_table: no records given")
    keys = []
    for r in records:
        for k in r.saved_tensors:
            if k not in keys:
                keys.append(k)
    rows = []
    for shape, dtype in keys:
        cells = []
        for r in records:
            c = r.saved_tensors.get((shape, dtype))
            cells.append("." if c is None else f"{c[0]} x {c[1] / c[0] / 1024:,.0f} KiB")
        rows.append([f"{shape} {dtype}"] + cells)
    totals = [sum(b for _, b in r.saved_tensors.values()) for r in records]
    rows.append(["total"] + [f"{t / 1024:,.0f} KiB" for t in totals])
    return Table(["saved buffer"] + [_label(r) for r in records], rows)
