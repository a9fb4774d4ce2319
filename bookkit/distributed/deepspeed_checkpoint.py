"""DeepSpeed's activation checkpointing and ZeRO on CPUs ("Beyond one device").

DeepSpeed ships its own copy of checkpointing (``deepspeed.checkpointing``), configured
once per process with ``deepspeed.checkpointing.configure`` (or the
``"activation_checkpointing"`` block of a DeepSpeed config) and called like torch's:
``deepspeed.checkpointing.checkpoint(fn, *args)`` (reentrant) or
``deepspeed.checkpointing.non_reentrant_checkpoint(fn, *args)``. Its extra options,
``partition_activations`` (split each checkpoint across model-parallel ranks) and
``checkpoint_in_cpu`` (move checkpoints to host memory), are built for GPUs.

Two things make DeepSpeed slow to start on a CPU, and this module avoids both:

* ``deepspeed.init_distributed`` on the CPU accelerator compiles a shared-memory
  communication op (``deepspeed_shm_comm``) with a C++ compiler on first use (one to
  three minutes; cached in ``~/.cache/torch_extensions`` afterwards). It is an
  optimisation of gloo's collectives; `_init_without_shm_op` marks the op as unavailable
  first, so DeepSpeed uses gloo through ``torch.distributed`` as it does on machines
  without a compiler.
* an ``"optimizer"`` entry in the config builds DeepSpeed's fused CPU Adam (another
  C++ build, about five minutes). Passing a torch optimizer to ``deepspeed.initialize``
  builds nothing.

The ``"activation_checkpointing"`` block of a config is read by
``deepspeed.checkpointing.configure(mpu, deepspeed_config=config)`` only:
``deepspeed.initialize`` never applies it. `apply_config_block` does, and
`deepspeed_cases` checks both facts by reading the module's settings back.

`deepspeed_cases` returns, per rank: the activation bytes with and without
DeepSpeed's checkpointing, the reentrant "no gradients" case next to torch's, a few
training steps of each through ``deepspeed.initialize`` (ZeRO stage 1, torch AdamW),
the optimizer-state and float32 master-partition bytes of ZeRO stages 0 and 1, the
settings before and after the config block is applied (both spellings), and what the
GPU-only options do to the caller's tensors on a CPU.
"""
from __future__ import annotations

import importlib.util
import warnings

import torch
from torch import nn


__all__ = ["MLPStack", "ACTIVATION_CHECKPOINTING", "CONFIGURE_KWARGS", "apply_config_block",
           "checkpointing_settings", "deepspeed_cases", "WIDTH", "BATCH", "STEPS"]

WIDTH, BATCH, N_BLOCKS, STEPS, LR = 64, 8, 3, 50, 3e-3

# The "activation_checkpointing" block of a DeepSpeed config, and the same settings
# spelled as keyword arguments of ``deepspeed.checkpointing.configure``: four of the
# six names differ. Two values differ from the defaults (the number of checkpoints,
# and a synchronisation at each checkpoint's boundary, a no-op on a CPU), so that
# reading the settings back shows whether the block was applied.
ACTIVATION_CHECKPOINTING = {
    "partition_activations": False,
    "cpu_checkpointing": False,
    "contiguous_memory_optimization": False,
    "number_checkpoints": N_BLOCKS,
    "synchronize_checkpoint_boundary": True,
    "profile": False,
}
CONFIGURE_KWARGS = {
    "partition_activations": False,
    "checkpoint_in_cpu": False,
    "contiguous_checkpointing": False,
    "num_checkpoints": N_BLOCKS,
    "synchronize": True,
    "profile": False,
}


def checkpointing_settings() -> dict:
    """The settings ``deepspeed.checkpointing`` runs with now (its module globals)."""
    from deepspeed.runtime.activation_checkpointing import checkpointing as ck

    return {"partition_activations": ck.PARTITION_ACTIVATIONS,
            "cpu_checkpointing": ck.CPU_CHECKPOINT,
            "contiguous_memory_optimization": ck.CONTIGUOUS_CHECKPOINTING,
            "number_checkpoints": ck.num_layers,
            "synchronize_checkpoint_boundary": ck.SYNCHRONIZE,
            "profile": ck.PROFILE_TIME}


def apply_config_block(config: dict, mpu=None) -> None:
    """Apply a DeepSpeed config's ``"activation_checkpointing"`` block for real:
    ``deepspeed.checkpointing.configure(mpu, deepspeed_config=config)``, the only
    call that reads it (``deepspeed.initialize`` does not)."""
    import deepspeed

    deepspeed.checkpointing.configure(mpu, deepspeed_config=config)


class MLPStack(nn.Module):
    """``head(block_n(... block_1(x)))`` with each block Linear-GELU-Linear (width
    ``WIDTH``, 4x inside) called through ``checkpoint_fn`` (None: no checkpointing).

    The head is a Linear outside the checkpointed blocks, so the loss requires a
    gradient even when the blocks get none: the silent case.
    """

    def __init__(self, checkpoint_fn=None):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))
            for _ in range(N_BLOCKS))
        self.head = nn.Linear(WIDTH, 1)
        self.checkpoint_fn = checkpoint_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x) if self.checkpoint_fn is None else self.checkpoint_fn(block, x)
        return self.head(x)


def _data(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's batch at ``step``: inputs that do NOT require grad (as data never
    does) and a target the blocks must learn (the head alone cannot fit it)."""
    g = torch.Generator().manual_seed(100 * step + rank)
    x = torch.randn(BATCH, WIDTH, generator=g)
    return x, torch.sin(2 * x[:, :1]) * torch.cos(x[:, 1:2])


def _init_without_shm_op() -> None:
    """``deepspeed.init_distributed`` with gloo, without compiling the shared-memory op."""
    import deepspeed
    import deepspeed.ops

    # `__compatible_ops__` is DeepSpeed's per-process table of ops it may build; an op
    # marked False is skipped and its pure-torch fallback used.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo")


def _checkpoint_fns() -> dict:
    import deepspeed
    from torch.utils.checkpoint import checkpoint

    return {
        "none": None,
        "torch reentrant": lambda f, x: checkpoint(f, x, use_reentrant=True),
        "torch non-reentrant": lambda f, x: checkpoint(f, x, use_reentrant=False),
        "deepspeed reentrant": deepspeed.checkpointing.checkpoint,
        "deepspeed non-reentrant": deepspeed.checkpointing.non_reentrant_checkpoint,
    }


def _one_step(checkpoint_fn, rank: int) -> dict:
    """Forward and backward of a fresh `MLPStack` (seed 0) on this rank's first batch.

    ``activation_bytes`` is what torch's ``MemTracker`` files as "Activation" and is
    still alive after the forward and the loss: tensors created in forward, saved or
    held by the graph. (A saved-tensor meter would miss what DeepSpeed's checkpoint
    keeps: it stores its inputs on its own context object, not through autograd's
    saved tensors.)
    """
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    model = MLPStack(checkpoint_fn)
    x, y = _data(rank, 0)
    tracker = MemTracker()
    tracker.track_external(model, x, y)
    with warnings.catch_warnings(record=True) as caught, tracker:
        warnings.simplefilter("always")
        loss = nn.functional.mse_loss(model(x), y)
        after_forward = tracker.get_tracker_snapshot()  # "current"
        loss.backward()
    activation = sum(int(v) for snap in after_forward.values() for k, v in snap.items()
                     if str(getattr(k, "value", k)) == "Activation")
    block_params = [p for b in model.blocks for p in b.parameters()]
    return {"activation_bytes": activation, "loss": loss.item(),
            "blocks_without_grad": sum(p.grad is None for p in block_params),
            "block_params": len(block_params),
            "warnings": sorted({str(w.message).splitlines()[0] for w in caught
                                if issubclass(w.category, UserWarning)})}


def _config(zero_stage: int = 1) -> dict:
    return {"train_micro_batch_size_per_gpu": BATCH,
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": zero_stage},
            "activation_checkpointing": ACTIVATION_CHECKPOINTING}


def _train(checkpoint_fn, rank: int, zero_stage: int = 1, steps: int = STEPS) -> dict:
    """``steps`` steps through ``deepspeed.initialize`` with a torch AdamW (nothing to
    compile). Returns the losses of the first and last step (averaged over ranks), the
    optimizer-state bytes this rank holds after training and the bytes of ZeRO's
    float32 master partition of the weights (stages 1 and 2 keep one, a copy, even
    for a float32 model; 0 without ZeRO)."""
    import deepspeed
    import torch.distributed as dist

    torch.manual_seed(0)
    model = MLPStack(checkpoint_fn)
    config = _config(zero_stage)
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=LR), config=config)
    losses = []
    for step in range(steps):
        x, y = _data(rank, step % 4)  # four batches, seen again and again
        loss = nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / dist.get_world_size())
    inner = getattr(optimizer, "optimizer", optimizer)  # ZeRO wraps the torch optimizer
    state_bytes = sum(t.numel() * t.element_size() for s in inner.state.values()
                      for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
    master = sum(t.numel() * t.element_size()
                 for t in getattr(optimizer, "single_partition_of_fp32_groups", []))
    return {"first_loss": losses[0], "last_loss": losses[-1],
            "optimizer": type(optimizer).__name__, "optimizer_state_bytes": state_bytes,
            "master_partition_bytes": master}


def _first_line(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}"[:160]


def _gpu_only_option(option: str, rank: int) -> dict:
    """Configure one GPU-only option, run one checkpointed step, report what happened.

    Returns ``error`` (None when the step ran) and the shape of the caller's input
    tensor before the forward, after it and after the backward: both options empty
    the tensor the caller passed in (``arg.data = torch.empty([])``) and keep a copy,
    ``checkpoint_in_cpu`` through ``.to("cpu")``, which on a CPU *is* the same
    tensor, so the copy is emptied too; ``partition_activations`` a flattened clone,
    which backward puts back into the caller's tensor still flat.
    ``contiguous_memory_optimization`` stops at ``configure`` (an ``AssertionError``):
    it requires ``partition_activations`` and ``number_checkpoints``.
    """
    import deepspeed

    x, y = _data(rank, 0)
    x.requires_grad_(True)
    shapes = {"before": list(x.shape)}
    kwargs = {"partition_activations": option == "partition_activations",
              "checkpoint_in_cpu": option == "checkpoint_in_cpu",
              "contiguous_checkpointing": option == "contiguous_memory_optimization"}
    error = None
    try:
        deepspeed.checkpointing.configure(None, **kwargs)
        torch.manual_seed(0)
        model = MLPStack(deepspeed.checkpointing.checkpoint)
        out = model(x)
        shapes["after forward"] = list(x.shape)
        nn.functional.mse_loss(out, y).backward()
    except Exception as exc:  # the point is to report what the library raises
        error = _first_line(exc)
    finally:
        ran = "after forward" in shapes
        shapes["after forward"] = shapes.get("after forward")
        shapes["after backward"] = list(x.shape) if ran else None
        deepspeed.checkpointing.configure(None, partition_activations=False,
                                          checkpoint_in_cpu=False,
                                          contiguous_checkpointing=False)
    return {"error": error, "input_shape": shapes}


def deepspeed_cases(rank: int, world_size: int) -> dict:
    """Every DeepSpeed measurement of "Beyond one device" on this rank (see the module
    docstring).

    Returns ``{"skipped": reason}`` when DeepSpeed is not installed.
    """
    if importlib.util.find_spec("deepspeed") is None:
        return {"skipped": "deepspeed is not installed"}
    import logging

    import deepspeed

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    _init_without_shm_op()
    deepspeed.checkpointing.configure(None)  # the defaults
    fns = _checkpoint_fns()
    steps = {name: _one_step(fn, rank) for name, fn in fns.items()}
    settings = {"defaults": checkpointing_settings()}
    training = {name: _train(fns[name], rank)
                for name in ("none", "deepspeed reentrant", "deepspeed non-reentrant")}
    settings["after deepspeed.initialize"] = checkpointing_settings()
    apply_config_block(_config())
    settings["after configure(deepspeed_config=...)"] = checkpointing_settings()
    deepspeed.checkpointing.configure(None, **CONFIGURE_KWARGS)
    settings["after configure(**keywords)"] = checkpointing_settings()
    deepspeed.checkpointing.configure(None)
    zero = {stage: _train(None, rank, zero_stage=stage, steps=1) for stage in (0, 1)}
    gpu_only = {opt: _gpu_only_option(opt, rank) for opt in
                ("partition_activations", "checkpoint_in_cpu", "contiguous_memory_optimization")}
    return {"version": deepspeed.__version__, "one_step": steps, "training": training,
            "zero_optimizer_state_bytes": {str(k): v["optimizer_state_bytes"]
                                           for k, v in zero.items()},
            "zero_master_partition_bytes": {str(k): v["master_partition_bytes"]
                                            for k, v in zero.items()},
            "settings": settings,
            "gpu_only": gpu_only,
            "parameter_bytes": sum(p.numel() * p.element_size() for p in MLPStack().parameters())}
