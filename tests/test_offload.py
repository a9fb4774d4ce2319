"""bookkit.offload: saved tensors on disk, counting save_on_cpu's copies, the RSS step."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from bookkit.offload import (RSS_BATCH, RSS_BLOCKS, RSS_CHECKPOINT_LIMIT, RSS_DISK_LIMIT,
                             RSS_HIDDEN, RSS_MODES, RSS_WIDTH, count_packed_copies,
                             measure_rss_step, offload_to_disk, rss_claims, rss_model,
                             rss_written_bytes)


def _grads(model, x, ctx=None):
    model.zero_grad(set_to_none=True)
    if ctx is None:
        loss = model(x).square().mean()
    else:
        with ctx:
            loss = model(x).square().mean()
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


def test_disk_offload_gives_identical_gradients_and_cleans_up(tmp_path):
    model = rss_model()
    x = torch.randn(64, RSS_WIDTH, generator=torch.Generator().manual_seed(0))
    plain = _grads(model, x)
    off = offload_to_disk(tmp_path / "saved")
    disk = _grads(model, x, off)
    assert all(torch.equal(a, b) for a, b in zip(plain, disk))
    # Per block: Linear1's input, ReLU's output, Linear2's input (the same ReLU output,
    # written twice); the loss's input. Weights (saved as transposed views) stay in memory.
    expected = RSS_BLOCKS * 64 * 4 * (RSS_WIDTH + 2 * RSS_HIDDEN) + 64 * RSS_WIDTH * 4
    assert off.stats.bytes_written == expected
    assert off.stats.written == off.stats.read == 3 * RSS_BLOCKS + 1
    # The weights, except the first layer's: x does not require grad, so nothing needs W1.
    assert off.stats.kept_in_memory == 2 * RSS_BLOCKS - 1
    assert off.stats.files_alive == 0 and not any((tmp_path / "saved").iterdir())


def test_disk_offload_files_live_as_long_as_the_graph():
    off = offload_to_disk(min_bytes=0)
    x = torch.randn(32, requires_grad=True)
    with off:
        y = x.exp()  # exp saves its output
    assert off.stats.files_alive == 1 and len(list(off.folder.iterdir())) == 1
    del y  # the graph goes, and with it the file and the temporary folder
    assert off.stats.files_alive == 0 and not off.folder.exists()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_disk_offload_round_trips_every_dtype_bit_for_bit(dtype):
    x = torch.randn(8, 16, dtype=dtype, requires_grad=True)
    w = torch.randn(16, 16, dtype=dtype)  # not a parameter: offloaded too
    (x @ w).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    with offload_to_disk(min_bytes=0) as off:
        y = x @ w
    y.sum().backward()
    assert off.stats.written == 1  # w (x is a leaf that requires grad: kept in memory)
    assert torch.equal(x.grad, expected)


def test_disk_offload_rejects_negative_threshold():
    with pytest.raises(ValueError, match="min_bytes"):
        offload_to_disk(min_bytes=-1)


def test_save_on_cpu_copies_only_when_asked_to_pin():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 16))
    x = torch.randn(4, 16, requires_grad=True)  # so the first Linear saves its weight too
    counts = {}
    for pin in (False, True):
        with count_packed_copies(torch.autograd.graph.save_on_cpu(pin_memory=pin)) as c:
            block(x).sum().backward()
        counts[pin] = (c.packed, c.copied, c.bytes_copied)
    assert counts[False][0] == counts[True][0] == 5  # x, W1.t(), ReLU out, ReLU out, W2.t()
    assert counts[False][1:] == (0, 0)
    assert counts[True][1] == 5
    assert counts[True][2] == 4 * (4 * 16 + 16 * 64 + 2 * 4 * 64 + 64 * 16)


@pytest.mark.slow
def test_rss_step_in_a_fresh_process_writes_exactly_the_saved_bytes():
    r = measure_rss_step("disk")
    block = RSS_BATCH * 4 * (RSS_WIDTH + 2 * RSS_HIDDEN)
    assert r["bytes_written"] == RSS_BLOCKS * block + RSS_BATCH * RSS_WIDTH * 4
    assert r["bytes_written"] == rss_written_bytes()
    assert r["files_left"] == 0 and r["rss_growth_bytes"] > 0
    with pytest.raises(ValueError, match="mode must be one of"):
        measure_rss_step("swap")


def _rss_runs(plain=100, disk=20, checkpoint=40):
    run = {"loss": 1.0, "grad_norm": 2.0, "bytes_written": 0, "files_left": 0,
           "filesystem": None}
    return {"plain": {**run, "rss_growth_bytes": plain},
            "disk": {**run, "rss_growth_bytes": disk, "filesystem": "ext4",
                     "bytes_written": rss_written_bytes()},
            "checkpoint": {**run, "rss_growth_bytes": checkpoint}}


def test_rss_claims_hold_for_runs_that_bear_them_out():
    claims = rss_claims(_rss_runs(), saved_bytes=100)
    assert len(claims) == 7 and all(holds for _, holds in claims)
    assert set(_rss_runs()) == set(RSS_MODES)


@pytest.mark.parametrize("change, claim", [
    (lambda r: r["plain"].update(rss_growth_bytes=99), "at least what it saves"),
    (lambda r: r["disk"].update(rss_growth_bytes=100 * RSS_DISK_LIMIT), "offloading to disk"),
    (lambda r: r["checkpoint"].update(rss_growth_bytes=100 * RSS_CHECKPOINT_LIMIT),
     "checkpointing keeps"),
    (lambda r: r["disk"].update(grad_norm=2.5), "same loss"),
    (lambda r: r["disk"].update(files_left=1), "every file removed"),
    (lambda r: r["disk"].update(filesystem="tmpfs"), "not to memory"),
    (lambda r: r["disk"].update(bytes_written=rss_written_bytes() + 4), "bytes written"),
])
def test_rss_claims_catch_each_failure_alone(change, claim):
    runs = _rss_runs()
    change(runs)
    failed = [text for text, holds in rss_claims(runs, saved_bytes=100) if not holds]
    assert len(failed) == 1 and claim in failed[0]


def test_filesystem_type_takes_the_longest_mount_prefix(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\n"
                      "tmpfs /tmp tmpfs rw 0 0\n"
                      "tmpfs /tmp/with\\040space ramfs rw 0 0\n")
    from bookkit.offload import filesystem_type

    assert filesystem_type("/tmp/x/y", mounts) == "tmpfs"
    assert filesystem_type("/tmp", mounts) == "tmpfs"
    assert filesystem_type("/tmpfoo", mounts) == "ext4"   # a prefix of the name is not enough
    assert filesystem_type("/tmp/with space/z", mounts) == "ramfs"
    assert filesystem_type("/work", tmp_path / "missing") == "unknown"
    assert filesystem_type("/proc/self") == "proc"        # the real table


def test_disk_folder_skips_memory_filesystems(tmp_path, monkeypatch):
    import bookkit.offload as off

    kinds = {str(tmp_path / "ram"): "tmpfs", str(tmp_path / "disk"): "ext4"}
    for k in kinds:
        (tmp_path / Path(k).name).mkdir()
    monkeypatch.setattr(off, "filesystem_type", lambda p: kinds[str(p)])
    assert off.disk_folder([tmp_path / "ram", tmp_path / "disk"]) == tmp_path / "disk"
    with pytest.raises(RuntimeError, match=r"ram \(tmpfs\)"):
        off.disk_folder([tmp_path / "ram"])
    with pytest.raises(RuntimeError, match=r"nowhere \(missing\)"):
        off.disk_folder([tmp_path / "nowhere"])


def test_default_offload_folder_is_on_a_disk():
    from bookkit.offload import MEMORY_FILESYSTEMS

    off = offload_to_disk()
    assert off.filesystem not in MEMORY_FILESYSTEMS
