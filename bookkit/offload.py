"""Moving saved activations to host memory or to disk ("Offloading activations").

Checkpointing drops activations and recomputes them; *offloading* keeps them, somewhere
cheaper than the accelerator's memory, and copies them back for backward. Both plug into
autograd at the same place: ``torch.autograd.graph.saved_tensors_hooks(pack, unpack)``
is called with every tensor an operation saves for backward (``pack``) and with what
``pack`` returned when backward needs it (``unpack``).

``offload_to_disk``
    A hooks pair that writes each saved tensor to a file through a NumPy memmap and
    reads it back in backward (the file is deleted once autograd lets go of it).
    Parameters and tensors smaller than ``min_bytes`` stay in memory.
``count_packed_copies``
    Wraps any hooks context (``save_on_cpu`` for instance) to count the tensors its
    ``pack`` copied rather than passed through.
``filesystem_type`` / ``disk_folder``
    What kind of file system a path is on (from ``/proc/mounts``), and a folder for
    the files that is on a real disk: on a ``tmpfs`` (often ``/tmp``, ``/dev/shm``)
    the "files" are pages of RAM that no process's resident size counts, so offloading
    there saves nothing and only moves the bytes out of sight.
``rss_step``
    One training step of an activation-heavy MLP in a fresh Python process, with the
    growth of its resident memory (peak RSS during the step minus RSS before it). Run
    as ``python -m bookkit.offload MODE`` by `measure_rss_step`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = ["offload_to_disk", "DiskOffloadStats", "filesystem_type", "disk_folder",
           "MEMORY_FILESYSTEMS", "count_packed_copies", "RSS_MODES",
           "rss_step", "measure_rss_step", "rss_model", "RSS_BATCH"]


@dataclass
class DiskOffloadStats:
    """What `offload_to_disk` did: tensors and bytes written, read back, files alive."""

    written: int = 0
    bytes_written: int = 0
    read: int = 0
    files_alive: int = 0
    kept_in_memory: int = 0


class _OnDisk:
    """Handle of one offloaded tensor: where it is and how to rebuild it."""

    __slots__ = ("path", "shape", "dtype", "device", "__weakref__")

    def __init__(self, path, shape, dtype, device):
        self.path, self.shape, self.dtype, self.device = path, shape, dtype, device


# File systems whose files are held in memory (page cache or swap), not on a disk.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})


def _unescape_mount(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes (\040 ...).
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def filesystem_type(path: str | os.PathLike, mounts: str = "/proc/mounts") -> str:
    """The type of the file system that holds ``path`` (``"ext4"``, ``"tmpfs"``, ...).

    Reads ``mounts`` (Linux's ``/proc/mounts``) and takes the mount point that is the
    longest prefix of the resolved path, as the kernel does. Returns ``"unknown"``
    where there is no such file (not Linux).

    Example:
        >>> filesystem_type("/proc")
        'proc'
    """
    target = Path(path).resolve()
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return "unknown"
    best, best_type = None, "unknown"
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(_unescape_mount(fields[1]))
        if (target == point or point in target.parents) and (
                best is None or len(point.parts) >= len(best.parts)):
            best, best_type = point, fields[2]
    return best_type


def disk_folder(candidates=None) -> Path:
    """A folder for offloaded tensors on a file system that is not memory.

    Tries ``candidates`` in order (default: the temporary folder Python would use,
    ``/var/tmp``, the current folder, the home folder) and returns the first that
    exists, is writable and is not on one of `MEMORY_FILESYSTEMS`. Raises
    ``RuntimeError`` naming each candidate and its file system when none qualifies:
    writing "to disk" on a tmpfs would keep every byte in RAM.
    """
    if candidates is None:
        candidates = [tempfile.gettempdir(), "/var/tmp", os.getcwd(), str(Path.home())]
    tried = []
    for c in candidates:
        folder = Path(c)
        fs = filesystem_type(folder) if folder.is_dir() else "missing"
        tried.append(f"{folder} ({fs})")
        if fs not in MEMORY_FILESYSTEMS and fs != "missing" and os.access(folder, os.W_OK):
            return folder
    raise RuntimeError("no folder on a disk to offload to; tried " + ", ".join(tried))


class offload_to_disk(torch.autograd.graph.saved_tensors_hooks):
    """Context manager: tensors saved for backward inside it live in files, not in memory.

    ``pack`` copies each saved tensor (as raw bytes, so every dtype works, bfloat16
    included) into a file of ``folder`` through ``np.memmap`` and returns a small
    handle; ``unpack`` maps the file, copies it into a fresh tensor of the original
    shape, dtype and device, and returns that. A file is deleted when autograd drops
    the handle (after the backward that used it, or with the graph). A tensor saved by
    two operations (a ReLU's output is also the next Linear's saved input) is written
    twice, as ``save_on_cpu`` copies it twice. Parameters (and views of them, such as
    the transposed weight a linear layer saves), other leaves that require grad (they
    live anyway) and tensors smaller than ``min_bytes`` are returned as they are.

    Args:
        folder: where the files go (created if missing); by default a fresh folder
            inside `disk_folder()` (a real disk, never a tmpfs), removed when the
            context exits and no file is left in it.
        min_bytes: tensors smaller than this stay in memory.

    Attributes:
        stats: a `DiskOffloadStats`.
        filesystem: the type of the file system the files go to (`filesystem_type`).

    Example:
        >>> import torch
        >>> model, x = torch.nn.Linear(512, 512), torch.randn(8, 512)
        >>> with offload_to_disk() as off:  # three 16 KiB tensors saved
        ...     loss = model(x).relu().square().mean()
        >>> loss.backward()
        >>> off.stats.bytes_written
        49152
    """

    def __init__(self, folder: str | os.PathLike | None = None, min_bytes: int = 1024):
        if min_bytes < 0:
            raise ValueError(f"min_bytes must be >= 0, got {min_bytes}")
        self._own_dir = folder is None
        self.folder = (Path(tempfile.mkdtemp(prefix="saved-tensors-", dir=disk_folder()))
                       if folder is None else Path(folder))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.filesystem = filesystem_type(self.folder)
        self.min_bytes = int(min_bytes)
        self.stats = DiskOffloadStats()
        self._counter = 0
        self._exited = False
        super().__init__(self._pack, self._unpack)

    def __enter__(self) -> "offload_to_disk":
        self.folder.mkdir(parents=True, exist_ok=True)  # again, if a first use removed it
        self._exited = False
        super().__enter__()
        return self

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._exited = True
        if self._own_dir and self.stats.files_alive == 0:
            _remove_dir(self.folder)

    def _pack(self, t: torch.Tensor):
        nbytes = t.numel() * t.element_size()
        base = t if t._base is None else t._base  # a weight is often saved as a view (W.t())
        if _is_parameter(base) or nbytes < self.min_bytes or t.is_sparse:
            self.stats.kept_in_memory += 1
            return t
        self._counter += 1
        path = self.folder / f"saved-{self._counter:06d}.bin"
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        mm = np.memmap(path, dtype=np.uint8, mode="w+", shape=raw.shape)
        mm[:] = raw
        mm.flush()
        del mm  # unmap: the bytes are now in the file, not in this process
        handle = _OnDisk(path, tuple(t.shape), t.dtype, t.device)
        self.stats.written += 1
        self.stats.bytes_written += nbytes
        self.stats.files_alive += 1
        weakref.finalize(handle, self._remove, path)
        return handle

    def _unpack(self, packed):
        if not isinstance(packed, _OnDisk):
            return packed
        mm = np.memmap(packed.path, dtype=np.uint8, mode="r")
        raw = torch.from_numpy(np.array(mm))  # a copy: the mapping closes right away
        del mm
        self.stats.read += 1
        return raw.view(packed.dtype).reshape(packed.shape).to(packed.device)

    def _remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self.stats.files_alive -= 1
        if self._own_dir and self._exited and self.stats.files_alive == 0:
            _remove_dir(self.folder)  # the last file of a finished context


def _is_parameter(t: torch.Tensor) -> bool:
    """A parameter, or any leaf that requires grad: it lives anyway, keep it in memory."""
    return isinstance(t, nn.Parameter) or (t.is_leaf and t.requires_grad)


def _remove_dir(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (a file still held by autograd) or already gone
        pass


class count_packed_copies:
    """Count what a saved-tensor hooks context does with each tensor it packs.

    ``with count_packed_copies(torch.autograd.graph.save_on_cpu()) as c:`` installs the
    wrapped context with its ``pack`` hook instrumented; afterwards ``c.packed`` is the
    number of tensors it packed and ``c.copied`` / ``c.bytes_copied`` how many of them
    (and how many bytes) it stored as a *new* tensor instead of the original.

    Args:
        hooks: a ``saved_tensors_hooks`` instance (not yet entered).
    """

    def __init__(self, hooks: torch.autograd.graph.saved_tensors_hooks):
        self.hooks = hooks
        self.packed = self.copied = self.bytes_copied = 0
        inner = hooks.pack_hook

        def pack(t):
            out = inner(t)
            stored = next((x for x in (out if isinstance(out, tuple) else (out,))
                           if isinstance(x, torch.Tensor)), None)
            self.packed += 1
            if stored is not None and stored.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
                self.copied += 1
                self.bytes_copied += stored.numel() * stored.element_size()
            return out

        hooks.pack_hook = pack

    def __enter__(self) -> "count_packed_copies":
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.hooks.__exit__(*exc)


# --- peak resident memory of one step, measured in a fresh process ----------------------

RSS_MODES = ("plain", "disk", "checkpoint")
RSS_WIDTH, RSS_HIDDEN, RSS_BLOCKS, RSS_BATCH = 64, 256, 12, 8192


RSS_DISK_LIMIT, RSS_CHECKPOINT_LIMIT = 0.3, 0.5  # of the plain step's growth


def rss_written_bytes() -> int:
    """The bytes the ``"disk"`` step of `rss_step` writes: each block's input, its ReLU
    output twice (saved by the ReLU and by the next Linear), and the loss's input."""
    return (RSS_BLOCKS * RSS_BATCH * 4 * (RSS_WIDTH + 2 * RSS_HIDDEN)
            + RSS_BATCH * RSS_WIDTH * 4)


def rss_claims(rss: dict, saved_bytes: int) -> list[tuple[str, bool]]:
    """What the three `measure_rss_step` runs show on any Linux machine, claim by claim.

    Args:
        rss: ``{mode: measure_rss_step(mode)}`` for every mode of ``RSS_MODES``.
        saved_bytes: what the plain step saves for backward (distinct storages).

    Returns:
        ``[(claim, holds)]``: a sentence and whether these runs bear it out. The growth
        limits are ``RSS_DISK_LIMIT`` and ``RSS_CHECKPOINT_LIMIT``, fractions of the
        plain step's growth.

    Example:
        >>> run = {"loss": 1.0, "grad_norm": 2.0, "bytes_written": 0,
        ...        "files_left": 0, "filesystem": None}
        >>> rss = {"plain": {**run, "rss_growth_bytes": 100},
        ...        "disk": {**run, "rss_growth_bytes": 20, "filesystem": "ext4",
        ...                 "bytes_written": rss_written_bytes()},
        ...        "checkpoint": {**run, "rss_growth_bytes": 40}}
        >>> [holds for _, holds in rss_claims(rss, saved_bytes=90)]
        [True, True, True, True, True, True, True]
        >>> rss["checkpoint"]["loss"] = 1.5  # not the same step
        >>> [claim for claim, holds in rss_claims(rss, 90) if not holds]
        ['the same loss and gradient norm in the three runs']
    """
    growth = {mode: r["rss_growth_bytes"] for mode, r in rss.items()}
    disk = rss["disk"]
    same_run = len({(r["loss"], r["grad_norm"]) for r in rss.values()}) == 1
    return [
        ("the plain step grows by at least what it saves for backward",
         growth["plain"] >= saved_bytes),
        (f"offloading to disk keeps the growth under {RSS_DISK_LIMIT:.0%}"
         " of the plain step's", growth["disk"] < RSS_DISK_LIMIT * growth["plain"]),
        (f"checkpointing keeps it under {RSS_CHECKPOINT_LIMIT:.0%}",
         growth["checkpoint"] < RSS_CHECKPOINT_LIMIT * growth["plain"]),
        ("the same loss and gradient norm in the three runs", same_run),
        ("every file removed after backward", disk["files_left"] == 0),
        ("the files went to a disk, not to memory (tmpfs, ramfs)",
         disk["filesystem"] not in MEMORY_FILESYSTEMS),
        ("bytes written = block inputs + ReLU outputs twice + loss input",
         disk["bytes_written"] == rss_written_bytes()),
    ]


def rss_model(seed: int = 0) -> nn.Sequential:
    """The activation-heavy MLP of `rss_step`: ``RSS_BLOCKS`` blocks
    Linear(64, 256)-ReLU-Linear(256, 64) (narrow, so a large batch costs few FLOPs
    and many activation bytes)."""
    torch.manual_seed(seed)
    return nn.Sequential(*(nn.Sequential(nn.Linear(RSS_WIDTH, RSS_HIDDEN), nn.ReLU(),
                                         nn.Linear(RSS_HIDDEN, RSS_WIDTH))
                           for _ in range(RSS_BLOCKS)))


def _status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (``VmRSS``: resident now,
    ``VmHWM``: peak resident), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets the peak resident set size (VmHWM) to the current one.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def rss_step(mode: str, folder: str | None = None) -> dict:
    """One forward and backward of `rss_model` on a batch of ``RSS_BATCH`` rows, measured.

    ``mode``: ``"plain"``, ``"disk"`` (saved tensors in files: `offload_to_disk`) or
    ``"checkpoint"`` (every block under ``torch.utils.checkpoint``, non-reentrant).
    Returns ``rss_growth_bytes`` (peak RSS during the step
    minus RSS before it; Linux only), ``seconds`` (wall clock), ``bytes_written`` (to
    disk), ``filesystem`` (the type of the file system the files went to, None
    without files), ``loss`` and ``grad_norm``. Meant for a fresh process (`measure_rss_step`):
    memory the allocator keeps from earlier work would hide the step's own growth.
    """
    from torch.utils.checkpoint import checkpoint

    if mode not in RSS_MODES:
        raise ValueError(f"mode must be one of {RSS_MODES}, got {mode!r}")
    model = rss_model()
    x = torch.randn(RSS_BATCH, RSS_WIDTH, generator=torch.Generator().manual_seed(1))
    ckpt = mode == "checkpoint"
    offload = offload_to_disk(folder) if mode == "disk" else None

    def forward(h):
        for block in model:
            h = checkpoint(block, h, use_reentrant=False) if ckpt else block(h)
        return h.square().mean()

    def step(x):
        if offload is None:
            loss = forward(x)
        else:
            with offload:
                loss = forward(x)
        loss.backward()
        return loss

    # A warm-up step on 8 rows: the first call of checkpoint imports modules (tens of
    # MiB of code and data), which is not the step's memory.
    step(x[:8])
    model.zero_grad(set_to_none=True)
    if offload is not None:
        offload.stats = DiskOffloadStats()
    before = _status_bytes("VmRSS")
    _reset_peak_rss()
    start = time.perf_counter()
    loss = step(x)
    seconds = time.perf_counter() - start
    growth = _status_bytes("VmHWM") - before
    grad_norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())).item()
    return {"mode": mode, "rss_growth_bytes": growth, "seconds": seconds,
            "bytes_written": offload.stats.bytes_written if offload else 0,
            "files_left": offload.stats.files_alive if offload else 0,
            "filesystem": offload.filesystem if offload else None,
            "loss": loss.item(), "grad_norm": grad_norm}


def measure_rss_step(mode: str, timeout: float = 120) -> dict:
    """`rss_step` in a fresh Python process (``python -m bookkit.offload MODE``).

    The child runs with one thread and ``MALLOC_MMAP_THRESHOLD_=65536``: glibc then
    serves every large allocation with its own mapping and returns it to the system
    when freed, so the resident size follows the live tensors instead of the heap's
    high-water mark.
    """
    if mode not in RSS_MODES:
        raise ValueError(f"mode must be one of {RSS_MODES}, got {mode!r}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-m", "bookkit.offload", mode], env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"python -m bookkit.offload {mode} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(rss_step(sys.argv[1])))
