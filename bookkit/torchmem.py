"""Measuring what a PyTorch training step keeps in memory, with or without a GPU.

Part II of the book measures torch the way Part I measured minigrad. Five meters,
from the narrowest to the broadest:

``SavedTensorMeter`` / ``saved_bytes``
    Counts the bytes autograd *saves for backward* (``ctx.save_for_backward`` and the
    built-in ops' saved inputs/outputs), through
    ``torch.autograd.graph.saved_tensors_hooks``. Each distinct storage is counted once,
    whole (a saved view costs its entire storage, because that is what stays allocated),
    and storages that belong to parameters are excluded (they live anyway). This is the
    "activation memory" of the papers. It does not see temporaries, gradients, optimizer
    state, nor what a checkpointed region rebuilds during backward (those tensors are
    saved through ``torch.utils.checkpoint``'s own inner hooks, which take precedence
    over ours).

``tracker_peaks``
    torch's own ``torch.distributed._tools.mem_tracker.MemTracker``, a dispatch mode that
    sees every tensor an op creates and files its storage under a category: Parameter,
    Buffer, Gradient, Activation (created in forward, or in a checkpoint's recomputation),
    Temp (created in backward outside recomputation, e.g. activation gradients), Optstate,
    Other (tensors passed in from outside). It reports the breakdown at the moment the
    total peaked. Works on CPU.

``AllocatorTrace`` / ``allocator_peak_bytes``
    The allocator's own count of the bytes it hands out and takes back, on a CPU from
    the profiler's allocation events, on a GPU from the CUDA caching allocator: every
    byte, scratch memory allocated and freed inside one operator included (which
    MemTracker cannot see), split into phases with ``mark``.

``ForwardMemoryMeter``
    Which storages are alive when a forward pass returns (every ATen output, what
    autograd saves, and the CPU allocations nobody recorded): the meter of the memory
    calculator's measurements (``bookkit.calculator.measure_training_memory``).

``cuda_peak_bytes``
    The CUDA caching allocator's ``max_memory_allocated`` over a call, minus what was
    allocated before it. Everything, rounded up to the allocator's 512-byte blocks.
    ``None`` on a machine without a GPU.

``record`` appends figures to the file named by ``BOOK_MEASUREMENTS`` so that
``scripts/gpu_check.sh`` can compare CPU and GPU figures; ``step_time`` times a step.
"""
from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import statistics
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = [
    "SavedTensorMeter",
    "saved_bytes",
    "tracker_peaks",
    "held_and_peak",
    "TRACKER_CATEGORIES",
    "cuda_peak_bytes",
    "allocator_peak_bytes",
    "AllocatorTrace",
    "record",
    "step_time",
    "storage_key",
    "ForwardMemoryMeter",
]

# MemTracker's category names (the values of its private ``_MemRefType`` enum, copied
# here so that notebooks can print them in a fixed order) plus its total.
TRACKER_CATEGORIES = ("Parameter", "Buffer", "Gradient", "Activation", "Temp",
                      "Optstate", "Other", "Total")


def storage_key(t: torch.Tensor) -> tuple[str, int]:
    """Identity of the memory behind ``t``: (device, address of its storage).

    Two views of one tensor share a key. Two live storages never do (an address is
    reused only after its storage is freed, and the meter keeps saved storages alive
    for as long as it counts them).

    Shown in chapter 9b.
    """
    st = t.untyped_storage()
    return (str(t.device), st.data_ptr())


def _param_tensors(params) -> list[torch.Tensor]:
    if params is None:
        return []
    if isinstance(params, torch.nn.Module):
        return list(params.parameters()) + list(params.buffers())
    if isinstance(params, torch.Tensor):
        return [params]
    out = []
    for p in params:
        if isinstance(p, torch.nn.Module):
            out.extend(_param_tensors(p))
        elif isinstance(p, torch.Tensor):
            out.append(p)
        else:
            raise TypeError(f"params must hold tensors or modules, got {type(p).__name__}")
    return out


class _Packed:
    """What autograd stores in place of a saved tensor while the meter is on.

    It holds a detached alias of the tensor (so nothing about memory changes); a finalizer on this
    object tells the meter when autograd lets go of the saved tensor (after the
    backward that used it, or when the graph is dropped).
    """

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor


class SavedTensorMeter(torch.autograd.graph.saved_tensors_hooks):
    """Context manager that counts the bytes autograd saves for backward. Shown in
    chapter 9b (its two hooks, `_pack` and `_unpack`).

    Inside ``with SavedTensorMeter(params=model.parameters()) as m:`` every tensor an op
    saves for backward passes through the meter. A storage is counted once, by its full
    size in bytes (``untyped_storage().nbytes()``), however many ops save it or views
    of it; storages of ``params`` (tensors or modules: their parameters and buffers) are
    not counted. A storage stops being *live* when autograd has released every saved
    reference to it: after the backward that consumed it, or when the graph is dropped.

    Attributes (all in bytes unless said otherwise):
        live_bytes: bytes of distinct saved storages autograd still holds now.
        peak_bytes: the largest ``live_bytes`` seen so far (between forward and backward
            this is the activation memory of a step; checkpointed regions contribute
            only what ``torch.utils.checkpoint`` saves outside them, i.e. their inputs).
        total_bytes: bytes of every distinct storage saved while the meter was on,
            released or not.
        n_saved: number of distinct storages saved that hold memory (parameters
            excluded; an empty tensor holds none: torch 2.5's checkpoint saves one
            per region as a placeholder, later releases save none).
        n_packed: number of times autograd saved a tensor (views and repeats included).

    The meter only observes saves made while it is the innermost active hook: inside a
    non-reentrant ``torch.utils.checkpoint`` region checkpoint's own hooks replace it.
    Leaving the ``with`` block stops new saves from being counted; releases of tensors
    saved inside it are still tracked afterwards (e.g. ``loss.backward()`` outside).
    """

    def __init__(self, params=()):
        self._param_keys = {storage_key(p) for p in _param_tensors(params)}
        self._lock = threading.Lock()
        # storage key -> [bytes, number of live saved references, shape, dtype]
        self._live: dict[tuple[str, int], list] = {}
        self._seen: dict[tuple[str, int], tuple[int, tuple[int, ...], str]] = {}
        self.live_bytes = 0
        self.peak_bytes = 0
        self.total_bytes = 0
        self.n_packed = 0
        super().__init__(self._pack, self._unpack)

    # -- the two hooks (chapter 9b shows them) -----------------------------------
    def _pack(self, t: torch.Tensor):
        """Autograd is saving ``t`` for backward: count its storage, keep ``t``."""
        key = storage_key(t)
        if key in self._param_keys:
            return t                            # a parameter lives anyway: not counted
        self._count(key, t)
        # A detached alias (same storage and version counter): holding `t` itself would
        # make a reference cycle through its grad_fn when an op saves its own output.
        packed = _Packed(t.detach())
        weakref.finalize(packed, self._release, key)   # runs when autograd drops it
        return packed

    @staticmethod
    def _unpack(packed):
        """Backward needs the saved tensor back: return it unchanged."""
        return packed.tensor if isinstance(packed, _Packed) else packed

    # -- bookkeeping -------------------------------------------------------------
    def _count(self, key, t: torch.Tensor) -> None:
        nbytes = t.untyped_storage().nbytes()
        with self._lock:
            self.n_packed += 1
            entry = self._live.get(key)
            if entry is not None:               # this storage is held already
                entry[1] += 1
                return
            self._live[key] = [nbytes, 1]
            self.live_bytes += nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            if key not in self._seen:
                self._seen[key] = (nbytes, tuple(t.shape), str(t.dtype).replace("torch.", ""))
                self.total_bytes += nbytes

    def _release(self, key) -> None:
        with self._lock:
            entry = self._live[key]
            entry[1] -= 1
            if entry[1] == 0:
                del self._live[key]
                self.live_bytes -= entry[0]

    def __enter__(self) -> "SavedTensorMeter":
        super().__enter__()  # installs the hooks (and returns None, hence this override)
        return self

    # -- reports ----------------------------------------------------------------
    @property
    def n_saved(self) -> int:
        """Number of distinct storages holding memory saved while the meter was on."""
        return sum(1 for nbytes, _, _ in self._seen.values() if nbytes)

    @property
    def n_live(self) -> int:
        """Number of distinct saved storages holding memory that autograd still holds."""
        return sum(1 for nbytes, _ in self._live.values() if nbytes)

    def by_shape(self) -> dict[tuple[tuple[int, ...], str], tuple[int, int]]:
        """Every distinct saved storage grouped by (shape, dtype) of the first tensor
        saved from it: ``{(shape, dtype): (count, bytes)}``, largest bytes first.

        The shape is that of the saved tensor (for a view, the view's shape) while the
        bytes are the whole storage's.
        """
        groups: dict[tuple[tuple[int, ...], str], list[int]] = {}
        for nbytes, shape, dtype in self._seen.values():
            g = groups.setdefault((shape, dtype), [0, 0])
            g[0] += 1
            g[1] += nbytes
        return {k: (c, b) for k, (c, b) in sorted(groups.items(), key=lambda kv: -kv[1][1])}

    def __repr__(self) -> str:
        return (f"SavedTensorMeter(live_bytes={self.live_bytes}, peak_bytes={self.peak_bytes}, "
                f"n_saved={self.n_saved})")


def saved_bytes(fn: Callable, *args, params=None) -> int:
    """Bytes autograd keeps for backward after ``out = fn(*args)``, while ``out`` is alive.

    ``params``: tensors or modules whose storages are not counted; by default, when
    ``fn`` is an ``nn.Module``, its parameters and buffers. Returns an int (bytes).

    Shown in chapter 9b.
    """
    if params is None:
        params = fn if isinstance(fn, torch.nn.Module) else ()
    with SavedTensorMeter(params=params) as meter:
        out = fn(*args)
        kept = meter.live_bytes
    del out
    return kept


def tracker_peaks(module: torch.nn.Module | None, step_fn: Callable[[], Any],
                  optimizer: torch.optim.Optimizer | None = None,
                  inputs: Iterable[torch.Tensor] = ()) -> dict[str, int]:
    """Run ``step_fn()`` under torch's ``MemTracker`` and return its peak breakdown.

    Returns ``{category: bytes}`` for the categories in ``TRACKER_CATEGORIES``: the
    snapshot taken at the moment the *total* peaked (so the categories add up to
    "Total"; each one is not its own maximum). ``module``, ``optimizer`` and ``inputs``
    (tensors created before the step) are registered with ``track_external`` so that
    their memory counts from the start; tensors created outside and not passed are
    invisible to the tracker. On a GPU, sizes are rounded up to 512-byte blocks as the
    caching allocator does; on a CPU they are exact.

    Categories: Parameter and Buffer (the module's), Gradient (``.grad`` of parameters),
    Activation (tensors created in forward or while a checkpoint recomputes), Temp
    (created in backward: activation gradients and scratch), Optstate (optimizer
    state, created lazily on the first ``step``), Other (``inputs``).

    Shown in chapter 9b.
    """
    from torch.distributed._tools.mem_tracker import MemTracker

    if not callable(step_fn):
        raise TypeError(f"step_fn must be callable, got {type(step_fn).__name__}")
    mt = MemTracker()
    external = [x for x in (module, optimizer) if x is not None] + list(inputs)
    if external:
        mt.track_external(*external)
    with mt:
        step_fn()
    snap = mt.get_tracker_snapshot("peak")
    if not snap:
        return dict.fromkeys(TRACKER_CATEGORIES, 0)
    # One device in the book's uses; with several, report the one that peaked highest.
    dev_snap = max(snap.values(), key=lambda d: d["Total"])
    out = dict.fromkeys(TRACKER_CATEGORIES, 0)
    for k, v in dev_snap.items():
        name = getattr(k, "value", k)  # enum member -> its string
        out[str(name)] = int(v)
    return out


def held_and_peak(model: torch.nn.Module, x: torch.Tensor) -> tuple[int, int]:
    """What a model holds for backward after its forward, and the step's peak, by
    torch's ``MemTracker`` (which also sees what a selective checkpoint's cache keeps,
    where saved-tensor hooks do not).

    One step, ``model(x).sum().backward()``, under ``MemTracker`` with the model and
    ``x`` registered. *Held*: the Activation bytes alive right after the forward (every
    tensor the forward created and still holds), less the output and the loss, plus
    ``x``'s storage, which the first layer keeps (the tracker files it under Other, as
    it was created outside). *Peak*: the step's total at its peak less parameters,
    buffers and Other (the input). The model's gradients are dropped afterwards.
    Shown in chapter 12.

    Returns:
        ``(held bytes, peak bytes)``, exact on a CPU.

    Example:
        >>> import torch
        >>> from bookkit.torchmem import held_and_peak
        >>> lin = torch.nn.Linear(8, 8)
        >>> x = torch.randn(4, 8, requires_grad=True)
        >>> held_and_peak(lin, x)[0] == x.untyped_storage().nbytes()  # Linear keeps x
        True
    """
    from torch.distributed._tools.mem_tracker import MemTracker

    def categories(snapshot):  # {device: {category: bytes}} -> {name: bytes}
        (per_device,) = snapshot.values()
        return {str(getattr(k, "value", k)): v for k, v in per_device.items()}

    tracker = MemTracker()
    tracker.track_external(model, x)
    with tracker:
        y = model(x)
        loss = y.sum()
        now = categories(tracker.get_tracker_snapshot("current"))
        loss.backward()
    peak = categories(tracker.get_tracker_snapshot("peak"))
    model.zero_grad(set_to_none=True)
    held = (now["Activation"] - y.untyped_storage().nbytes()
            - loss.untyped_storage().nbytes() + x.untyped_storage().nbytes())
    return held, peak["Total"] - peak["Parameter"] - peak["Buffer"] - peak["Other"]


@contextlib.contextmanager
def _quiet_native_stderr():
    """Send the process's file descriptor 2 to /dev/null for the duration.

    The profiler's C++ backend (Kineto) prints a line with the date and process id on
    every start and stop; in Jupyter that line would become part of a cell's output.
    Python-level warnings are unaffected (they go through ``sys.stderr``).
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def older_objects_frozen():
    """Hide every object that exists now, garbage included, from Python's cycle
    collector (``gc.freeze``) until the block ends.

    A meter calls ``gc.collect()`` so that garbage is not counted as alive; a full
    collection walks every object of the process (about 0.3 s with torch and
    transformers imported), a collection inside this block only what the block made.
    Older garbage is not freed inside the block either (so the allocator's trace never
    sees the release of a block it did not see allocated); it is collected as usual
    after the block. The meters count only storages made inside the block, so nothing
    they read changes. An existing freeze (``gc.get_freeze_count() > 0``) is left as
    it is.
    """
    frozen_here = gc.get_freeze_count() == 0
    if frozen_here:
        gc.freeze()
    try:
        yield
    finally:
        if frozen_here:
            gc.unfreeze()


class AllocatorTrace:
    """Context manager: what the device's allocator holds over a block of code.

    Shown in chapter 9b. ``with AllocatorTrace("cpu") as trace:`` counts, from the
    allocator's own records, the bytes allocated and not yet freed since the block
    began; ``trace.mark(name)`` notes that count at a point of the block. Afterwards
    (all in bytes, relative to the start, so memory held before the block is not
    counted):

    ``peak_bytes``
        the most held at once, temporaries inside operators included;
    ``held[name]``
        what was held at each ``mark(name)``;
    ``peaks[name]``
        the most held between the previous mark (or the start) and this one, and
        under ``"end"`` between the last mark and the end: which phase peaked;
    ``end_bytes``
        what is still held when the block ends;
    ``series`` (CPU only)
        the bytes held after each allocation and release, in order, starting with 0
        before the first, and ``mark_at[name]``: how many of them came before
        ``mark(name)`` (``series[mark_at[name]] == held[name]``), to draw the block
        event by event like PyTorch's memory snapshot.

    On a CPU the counts come from the profiler
    (``torch.profiler.profile(profile_memory=True)``), which records every allocation
    and release of the CPU allocator in order. They are exact, and the same on any
    machine because the block runs on ``threads`` CPU threads (default 1): some CPU
    kernels (the fused attention, parallel reductions) allocate scratch memory per
    thread, which would make the count depend on the number of cores. ``threads=None``
    keeps the current setting. On a GPU they come from the CUDA caching allocator
    (``torch.cuda.memory_allocated`` / ``max_memory_allocated``, after synchronising),
    in its 512-byte blocks. Tensors that wrap memory torch did not allocate
    (``torch.from_numpy``) are invisible on a CPU: copy them inside the block; and
    on a CPU, freeing inside the block what was allocated before it (even inside an
    earlier trace) does not lower the count: only blocks allocated inside the block
    are matched with their releases, by address. Python's garbage collector runs
    before the block and is paused during it, so that the counts are repeatable.
    """

    def __init__(self, device="cpu", threads: int | None = 1):
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"AllocatorTrace: device must be cpu or cuda, got {self.device}")
        if threads is not None and (isinstance(threads, bool) or int(threads) != threads or threads < 1):
            raise ValueError(f"AllocatorTrace: threads must be a positive integer or None, got {threads!r}")
        self.threads = threads
        self._threads_before = None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("AllocatorTrace: CUDA is not available on this machine")
        self.held: dict[str, int] = {}
        self.peaks: dict[str, int] = {}
        self.peak_bytes = self.end_bytes = 0
        self._prof = None
        self._base = 0
        self._marks: list[str] = []
        self.series: list[int] = []
        self.mark_at: dict[str, int] = {}

    def __enter__(self) -> "AllocatorTrace":
        # Python's cycle collector would free unrelated garbage at random moments
        # inside the block: it is paused while counting. (No collection first: the
        # trace counts what the block allocates, and a full collection costs 0.3 s
        # in a process holding torch and transformers.)
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            from torch.profiler import ProfilerActivity, profile

            if self.threads is not None:
                self._threads_before = torch.get_num_threads()
                torch.set_num_threads(self.threads)
            self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with _quiet_native_stderr():
                self._prof.start()
        return self

    def mark(self, name: str) -> None:
        """Note the bytes held now, and the peak since the previous mark, under ``name``."""
        if name in self._marks or name == "end":
            raise ValueError(f"AllocatorTrace.mark: {name!r} is used already")
        self._marks.append(name)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.held[name] = int(torch.cuda.memory_allocated(self.device) - self._base)
            self.peaks[name] = int(torch.cuda.max_memory_allocated(self.device) - self._base)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            with torch.profiler.record_function(_MARK + name):
                pass

    def __exit__(self, *exc) -> None:
        try:
            self._stop()
        finally:
            # Only once the profiler has stopped: a collection while it runs frees
            # blocks allocated before it started, and the allocator then warns on fd 2.
            if self._gc_was_enabled:
                gc.enable()

    def _stop(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peaks["end"] = int(torch.cuda.max_memory_allocated(self.device) - self._base)
            self.peak_bytes = max(self.peaks.values())
            self.end_bytes = int(torch.cuda.memory_allocated(self.device) - self._base)
            return
        with _quiet_native_stderr():
            self._prof.stop()
        if self._threads_before is not None:
            torch.set_num_threads(self._threads_before)
        held = phase_peak = 0
        self.series = [0]
        for kind, what, nbytes in _cpu_memory_events(self._prof):   # in the order they happened
            if kind == "mark":
                self.held[what] = held
                self.peaks[what] = phase_peak
                self.mark_at[what] = len(self.series) - 1
                phase_peak = held
            else:
                held += nbytes                            # negative for a release
                phase_peak = max(phase_peak, held)
                self.series.append(held)
        self.peaks["end"] = phase_peak
        self.peak_bytes, self.end_bytes = max(self.peaks.values()), held
        self._prof = None


_MARK = "bookkit.AllocatorTrace.mark:"


def _cpu_memory_events(prof) -> list[tuple[str, Any, int]]:
    """The CPU allocator's records in a stopped profiler, in order: ``("mark", name, 0)``
    for each ``AllocatorTrace.mark`` and ``("memory", address, bytes)`` for each
    allocation (bytes > 0) and each release (bytes < 0) of a block allocated while
    this profiler ran. The allocator also reports, with their size, releases of
    blocks allocated under an earlier profiler: matching by address drops them.
    Shown in chapter 9b."""
    out, alive = [], {}
    for kind, what, nbytes in _cpu_allocator_records(prof, _MARK):
        if kind == "mark":
            out.append((kind, what, 0))
        elif nbytes > 0:
            alive[what] = nbytes
            out.append((kind, what, nbytes))
        elif alive.pop(what, None) is not None:
            out.append((kind, what, nbytes))
    return out


def _cpu_allocator_records(prof, mark_prefix: str) -> list[tuple[str, Any, int]]:
    """Every CPU allocation record (``("memory", address, bytes)``, negative bytes for a
    release) and every ``record_function`` named ``mark_prefix + name`` (``("mark",
    name, 0)``) in a stopped ``torch.profiler.profile(profile_memory=True)``, in the
    order they happened (an allocation record first when both share a timestamp).
    Shown in chapter 9b."""
    from torch._C._profiler import _EventType

    events = []                                   # (time, order, kind, what, bytes)
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            fields = node.extra_fields
            events.append((node.start_time_ns, 0, "memory", fields.ptr, fields.alloc_size))
        elif node.name.startswith(mark_prefix):
            events.append((node.start_time_ns, 1, "mark", node.name[len(mark_prefix):], 0))
    return [ev[2:] for ev in sorted(events, key=lambda ev: ev[:2])]


def allocator_peak_bytes(fn: Callable[[], Any], device="cpu") -> int:
    """Peak bytes the allocator held during ``fn()`` beyond what it held before.

    Shown in chapter 13. `AllocatorTrace` around one call: unlike `tracker_peaks`,
    which sees the tensors operators return, this also sees the temporaries an
    operator allocates and frees inside itself (``torch.logsumexp`` holds one as
    large as its input). Exact bytes on a CPU; 512-byte blocks on a GPU.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with AllocatorTrace(device) as trace:
        fn()
    return trace.peak_bytes


def cuda_peak_bytes(fn: Callable[[], Any], device=None) -> int | None:
    """Peak bytes the CUDA allocator held during ``fn()`` beyond what it held before.

    ``torch.cuda.reset_peak_memory_stats``, run ``fn``, ``max_memory_allocated`` minus
    the ``memory_allocated`` before the call. Includes everything the call allocates
    (activations, temporaries, gradients, optimizer state, workspaces) in the
    allocator's 512-byte blocks. Returns ``None`` when CUDA is not available.

    Shown in chapter 9b.
    """
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - base)


# --- the forward meter of the memory calculator (chapter 23) ---------------------------
class ForwardMemoryMeter:
    """Context manager: which storages are alive when a forward pass returns.

    While it is on, it records (1) every storage an ATen operation creates (a
    ``TorchDispatchMode``, which also sees what ``torch.utils.checkpoint`` keeps and
    what fused kernels create), (2) every storage autograd saves for backward
    (``saved_tensors_hooks``) and (3), with ``allocations=True`` (the default), every
    allocation of the CPU allocator (``torch.profiler`` with ``profile_memory``), for
    the memory no ATen operation creates: ``torch.utils.checkpoint``'s stash of the
    RNG state (``torch.get_rng_state()``) and the Python numbers autograd saves as 0-d
    tensors. A storage counts once, whole, however many views of it exist; storages of
    ``exclude`` (the model: its parameters and buffers) never count.

    ``alive_bytes()`` is the bytes of the recorded storages that are alive now, after a
    garbage collection: a storage the forward created counts while anything holds it
    (the autograd graph, a checkpoint, the caller); one made before the forward (the
    token ids, given as ``inputs``) counts only while autograd holds it as saved.
    Allocations only the allocator saw (3) are counted as they were when the block
    ended: alive then, and not allocated by a recorded storage. ``phase("head")`` tags
    what is recorded from then on, and ``alive_bytes("head")`` counts only those.
    ``alive()`` lists (bytes, shape, dtype, op) of what is alive.

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU())
        >>> x = torch.randn(8, 64)
        >>> with ForwardMemoryMeter(exclude=[model], inputs=[x]) as meter:
        ...     out = model(x)
        >>> meter.alive_bytes()  # addmm's and gelu's outputs, x saved by Linear
        6144

    Shown in chapter 22.
    """

    def __init__(self, exclude=(), inputs=(), allocations: bool = True):
        from torch.utils._python_dispatch import TorchDispatchMode

        meter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                meter._record_outputs(func, out)
                return out

        self._mode = _Mode()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._skip = {self._key(t) for t in self._tensors(exclude)}
        self._inputs = {self._key(t) for t in self._tensors(inputs)}
        self._phase = "body"
        # storage key -> [weak reference to the storage, bytes, shape, dtype, op, phase,
        #                 created by the forward?, saved references autograd holds]
        self._seen: dict[int, list] = {}
        self._allocations = allocations
        self._profiler = None
        # (bytes, phase) of allocations alive at the end that no recorded storage owns
        self._unrecorded: list[tuple[int, str]] = []

    @staticmethod
    def _tensors(objs):
        out = []
        for obj in objs:
            if isinstance(obj, torch.nn.Module):
                out.extend(obj.parameters())
                out.extend(obj.buffers())
            elif isinstance(obj, torch.Tensor):
                out.append(obj)
            else:
                out.extend(ForwardMemoryMeter._tensors(obj))
        return out

    @staticmethod
    def _key(t) -> int:
        return t.untyped_storage().data_ptr()

    def _note(self, t, op: str, created: bool) -> list | None:
        st = t.untyped_storage()
        key = st.data_ptr()
        if key == 0 or key in self._skip:
            return None
        entry = self._seen.get(key)
        if entry is None or entry[0]() is None:   # new, or an old storage's address reused
            entry = [weakref.ref(st), st.nbytes(), tuple(t.shape),
                     str(t.dtype).replace("torch.", ""), op, self._phase, created, 0]
            self._seen[key] = entry
        entry[6] = entry[6] or created
        return entry

    def _record_outputs(self, func, out) -> None:
        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and self._key(t) not in self._inputs:
                self._note(t, str(func), created=True)

    def _pack(self, t):
        entry = self._note(t, "saved", created=False)
        if entry is None:
            return t          # a parameter: autograd keeps it as usual
        packed = _Packed(t.detach())
        entry[7] += 1
        weakref.finalize(packed, self._release, entry)
        return packed

    @staticmethod
    def _release(entry) -> None:
        entry[7] -= 1

    @staticmethod
    def _unpack(packed):
        return packed.tensor if isinstance(packed, _Packed) else packed

    def phase(self, name: str) -> None:
        """Tag storages recorded from now on with ``name`` (e.g. ``"head"``)."""
        self._phase = name
        if self._profiler is not None:      # a mark in the allocator's timeline
            with torch.profiler.record_function(_PHASE_MARK + name):
                pass

    def __enter__(self) -> "ForwardMemoryMeter":
        if self._allocations:
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with _quiet_native_stderr():     # Kineto prints a line at start and stop
                self._profiler.start()
        self._hooks.__enter__()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._hooks.__exit__(*exc)
        if self._profiler is not None:
            gc.collect()                     # garbage is not alive
            with _quiet_native_stderr():
                self._profiler.stop()
            self._unrecorded = self._allocations_nobody_recorded()
            self._profiler = None

    def _allocations_nobody_recorded(self) -> list[tuple[int, str]]:
        """(bytes, phase) of the CPU allocations made in the block and alive at its end
        that are not the storage of a recorded tensor (matched by address)."""
        recorded = {key for key, entry in self._seen.items() if entry[0]() is not None}
        return [value for ptr, value in _cpu_allocations_alive(self._profiler).items()
                if ptr not in recorded]

    def alive(self, phase: str | None = None) -> list[tuple[int, tuple, str, str]]:
        """(bytes, shape, dtype, op) of each recorded storage alive now, largest first
        (an allocation only the allocator saw has shape ``()``, dtype ``"?"``)."""
        gc.collect()
        rows = [(nbytes, shape, dtype, op)
                for ref, nbytes, shape, dtype, op, ph, created, n_saved in self._seen.values()
                if ref() is not None and (created or n_saved > 0)
                and (phase is None or ph == phase)]
        rows += [(nbytes, (), "?", "allocated outside ATen operations")
                 for nbytes, ph in self._unrecorded if phase is None or ph == phase]
        return sorted(rows, key=lambda r: (-r[0], r[1], r[2], r[3]))

    def alive_bytes(self, phase: str | None = None) -> int:
        """Bytes of recorded storages alive now (only those tagged ``phase`` if given)."""
        return sum(r[0] for r in self.alive(phase))

    def by_op(self, phase: str | None = None) -> list[tuple[str, tuple, int, int]]:
        """The storages alive now (`alive`) grouped by the operation that made them and
        their shape: ``(op, shape, storages, bytes)``, the most bytes first. ``op``
        drops ``aten.`` and the overloads ``.default`` and ``.Tensor``.

        Example:
            >>> import torch
            >>> from bookkit.torchmem import ForwardMemoryMeter
            >>> lin, x = torch.nn.Linear(4, 8), torch.ones(2, 4)
            >>> with ForwardMemoryMeter(exclude=[lin], inputs=[x]) as meter:
            ...     y = lin(x).relu() + lin(x).relu()
            >>> meter.by_op()
            [('relu', (2, 8), 2, 128), ('add', (2, 8), 1, 64), ('saved', (2, 4), 1, 32)]
        """
        groups: dict[tuple[str, tuple], list[int]] = {}
        for nbytes, shape, _, op in self.alive(phase):
            for part in ("aten.", ".default", ".Tensor"):
                op = op.replace(part, "")
            groups.setdefault((op, shape), []).append(nbytes)
        rows = [(op, shape, len(b), sum(b)) for (op, shape), b in groups.items()]
        return sorted(rows, key=lambda r: (-r[3], r[0], r[1]))


_PHASE_MARK = "bookkit.ForwardMemoryMeter.phase:"


def _cpu_allocations_alive(profiler) -> dict[int, tuple[int, str]]:
    """Address -> (bytes, phase) of every CPU allocation made while ``profiler`` (a
    stopped ``torch.profiler.profile(profile_memory=True)``) ran and not released
    before it stopped. Releases of blocks allocated earlier are ignored; the phase is
    the name of the last ``ForwardMemoryMeter.phase`` mark before the allocation."""
    alive, phase = {}, "body"
    for kind, what, nbytes in _cpu_allocator_records(profiler, _PHASE_MARK):
        if kind == "mark":
            phase = what
        elif nbytes > 0:
            alive[what] = (nbytes, phase)
        else:
            alive.pop(what, None)
    return alive


def _jsonable(key: str, name: str, value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"record({key!r}): figure {name!r} is not finite: {value}")
        return value
    if hasattr(value, "item") and getattr(value, "ndim", getattr(value, "dim", lambda: 0)) in (0, ()):
        return _jsonable(key, name, value.item())
    if isinstance(value, (list, tuple)):
        return [_jsonable(key, name, v) for v in value]
    raise TypeError(f"record({key!r}): figure {name!r} has type {type(value).__name__}; "
                    "expected a number, string, None or a list of those")


def record(key: str, **figures) -> dict | None:
    """Append ``{"key": key, "device": ..., "figures": {...}}`` as one JSON line to the
    file named by the environment variable ``BOOK_MEASUREMENTS``; do nothing (return
    ``None``) when it is unset or empty. Returns the record written.

    ``key`` names the measurement, starting with the chapter id (``"ch11_layer_bytes"``);
    figures are numbers (bytes as ints), strings or None, e.g. ``cpu_saved=…, cuda_peak=…``.

    Shown in chapter 9b.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"record: key must be a non-empty string, got {key!r}")
    clean = {name: _jsonable(key, name, v) for name, v in figures.items()}
    path = os.environ.get("BOOK_MEASUREMENTS", "")
    if not path:
        return None
    entry = {"key": key, "device": "cuda" if torch.cuda.is_available() else "cpu",
             "figures": clean}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
    return entry


def step_time(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs.

    On a GPU the device is synchronised around each run so that queued kernels count.

    Shown in chapter 13.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"step_time: need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
