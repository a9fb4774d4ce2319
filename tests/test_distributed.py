"""bookkit.distributed: the torchrun launcher, the per-rank meters and the experiments
of "Beyond one device" (one real two-process job, the rest in a one-process gloo group)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

import bookkit.distributed as bd
from bookkit.distributed import ddp_checkpoint, deepspeed_checkpoint, sharding
from bookkit.distributed.meters import (CollectiveCounter, ShardedSavedTensorMeter,
                                        local_parameter_bytes)
from bookkit.torchmem import SavedTensorMeter
from marks import fast_every


@pytest.fixture
def one_rank_group():
    """A gloo process group of one process, without any port (a HashStore)."""
    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_command_names_the_experiments_and_refuses_unknown_ones(tmp_path):
    cmd = bd.torchrun_command(["sharding"], 2, tmp_path)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert cmd[-3:] == ["--out", str(tmp_path), "sharding"]
    with pytest.raises(ValueError, match="experiments must be"):
        bd.torchrun_command(["no_such_experiment"], 2, tmp_path)
    with pytest.raises(ValueError, match="experiments must be"):
        bd.torchrun_command([], 2, tmp_path)
    with pytest.raises(ValueError, match="nproc"):
        bd.torchrun_command(["sharding"], 0, tmp_path)


@pytest.mark.slow
def test_two_process_ddp_job_reproduces_the_error_the_silent_case_and_both_fixes():
    result = bd.launch(["ddp_reentrant"], env={"TORCH_DISTRIBUTED_DEBUG": "INFO"})
    assert result.returncode == 0
    assert not Path(result.tmpdir).exists(), "the job's TMPDIR (torchelastic's files) must be removed"
    per_rank = result["ddp_reentrant"]
    assert len(per_rank) == 2
    for ranks in per_rank:
        assert list(ranks) == list(ddp_checkpoint.CASES)  # in the cases' order
        for name, r in ranks.items():
            if name in ("block used twice, reentrant",
                        "unused branch, reentrant, find_unused_parameters=True",
                        "no unused branch, reentrant, find_unused_parameters=True"):
                assert not r["ok"] and r["step"] == 0
                assert r["error"].startswith("Expected to mark a variable ready only once")
                assert "has been marked as ready twice" in r["parameter"]
            elif name == "block used twice, no layer before it, reentrant":
                assert r["ok"] and r["grad_gap"] > 1e-3 and r["rank_gap"] > 1e-3
                # Wrong in a precise way: the first call's share stays local.
                assert r["local_share_gap"] < 1e-6
            else:
                assert r["ok"] and r["grad_gap"] < 1e-6 and r["rank_gap"] == 0, name
                if name.startswith("block used twice"):  # the correct gradients are not that
                    assert r["local_share_gap"] > 1e-3, name
                else:
                    assert r["local_share_gap"] is None, name


def test_collective_counter_counts_by_kind(one_rank_group):
    t = torch.ones(4)
    with CollectiveCounter() as c:
        dist.all_reduce(t)
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        t.mul_(2)  # not a collective
    assert c.counts["allreduce_"] == 2 and c.counts["broadcast_"] == 1
    assert c.by_kind() == {"all-reduce": 2, "broadcast": 1}


def test_meters_agree_with_the_plain_ones_on_an_unwrapped_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 8))
    x = torch.randn(4, 8)
    with SavedTensorMeter(params=model) as plain:
        y1 = model(x)
    with ShardedSavedTensorMeter(model) as sharded:
        y2 = model(x)
    assert sharded.live_bytes == plain.live_bytes > 0
    assert local_parameter_bytes(model) == sum(p.numel() * 4 for p in model.parameters())
    del y1, y2


@pytest.mark.parametrize("wrapper", fast_every(sharding.WRAPPERS, 3))
def test_each_wrapper_trains_the_same_losses_and_checkpointing_shrinks_saved_bytes(one_rank_group, wrapper):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FSDP1's deprecation notice, NO_SHARD for one rank
        plain = sharding.train_steps(sharding.wrap(wrapper, "none"), 0, 1, steps=2)
        ckpt = sharding.train_steps(sharding.wrap(wrapper, "integration"), 0, 1, steps=2)
    n_params = sum(p.numel() for p in sharding.TinyGPT().parameters())
    assert plain["param_bytes"] == ckpt["param_bytes"] == 4 * n_params  # one rank: no shards
    block_input = sharding.BATCH_PER_RANK * sharding.SEQ * sharding.HIDDEN * 4
    # Checkpointed: each block keeps its input, the loss keeps the last output.
    assert ckpt["saved_bytes"] == (sharding.N_LAYERS + 1) * block_input
    assert plain["saved_bytes"] > 5 * ckpt["saved_bytes"]
    assert plain["losses"] == pytest.approx(ckpt["losses"], rel=1e-6)


def test_wrap_rejects_unknown_names():
    with pytest.raises(ValueError, match="wrapper must be one of"):
        sharding.wrap("ZeRO", "none")
    with pytest.raises(ValueError, match="outer must be"):
        sharding.TinyGPT("sometimes")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_deepspeed_cases_on_one_rank(one_rank_group, monkeypatch):
    import warnings

    for name, value in (("LOCAL_RANK", "0"), ("RANK", "0"), ("WORLD_SIZE", "1")):
        monkeypatch.setenv(name, value)  # what torchrun sets, and DeepSpeed reads

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = deepspeed_checkpoint.deepspeed_cases(0, 1)
    steps, train = r["one_step"], r["training"]
    assert steps["deepspeed reentrant"]["blocks_without_grad"] == steps["deepspeed reentrant"]["block_params"]
    assert steps["deepspeed reentrant"]["warnings"] == []
    assert steps["torch reentrant"]["warnings"], "torch warns where DeepSpeed does not"
    assert steps["deepspeed non-reentrant"]["blocks_without_grad"] == 0
    assert steps["deepspeed non-reentrant"]["activation_bytes"] < steps["none"]["activation_bytes"] / 5
    assert train["deepspeed reentrant"]["last_loss"] > 10 * train["deepspeed non-reentrant"]["last_loss"]
    # One rank: ZeRO stage 1 has nobody to share the optimizer state with.
    assert r["zero_optimizer_state_bytes"]["0"] == 2 * r["parameter_bytes"]
    assert r["zero_optimizer_state_bytes"]["1"] >= 2 * r["parameter_bytes"]
    # The config block: deepspeed.initialize leaves it unapplied, configure applies it,
    # and the keyword spelling gives the same settings.
    s = r["settings"]
    assert s["after deepspeed.initialize"] == s["defaults"]
    assert s["after configure(deepspeed_config=...)"] == deepspeed_checkpoint.ACTIVATION_CHECKPOINTING
    assert s["after configure(**keywords)"] == deepspeed_checkpoint.ACTIVATION_CHECKPOINTING
    # ZeRO 1 keeps a float32 master copy of its weight partition (here: all of it).
    assert r["zero_master_partition_bytes"]["0"] == 0
    assert r["zero_master_partition_bytes"]["1"] >= r["parameter_bytes"]
    # The GPU-only options empty the caller's tensor; the contiguous one stops at configure.
    gpu = r["gpu_only"]
    for option in ("partition_activations", "checkpoint_in_cpu"):
        assert gpu[option]["error"] and gpu[option]["input_shape"]["after forward"] == []
    assert gpu["checkpoint_in_cpu"]["input_shape"]["after backward"] == []
    assert gpu["partition_activations"]["input_shape"]["after backward"] == [
        deepspeed_checkpoint.BATCH * deepspeed_checkpoint.WIDTH]
    assert gpu["contiguous_memory_optimization"]["error"].startswith("AssertionError")


def test_wrap_hf_rejects_unknown_names():
    with pytest.raises(ValueError, match="wrapper must be one of"):
        sharding.wrap_hf("DDP", "none")
    with pytest.raises(ValueError, match="checkpointing one of"):
        sharding.wrap_hf("FSDP2", "integration")


@pytest.mark.parametrize("wrapper", sharding.HF_WRAPPERS)
def test_transformers_switch_under_fsdp_keeps_block_inputs_only(one_rank_group, wrapper):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = {c: sharding._hf_train_steps(sharding.wrap_hf(wrapper, c), 0, 1, steps=1)
                for c in sharding.HF_CHECKPOINTING}
    plain = runs["none"]
    for c in ("transformers reentrant", "transformers non-reentrant"):
        assert runs[c]["losses"] == pytest.approx(plain["losses"], rel=1e-6)
        assert runs[c]["saved_bytes"] * 5 < plain["saved_bytes"]


def test_backward_timeline_sees_recomputation_before_backward_ops():
    from torch.utils.checkpoint import checkpoint

    from bookkit.distributed.meters import BackwardTimeline

    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8))
    x = torch.randn(4, 8, requires_grad=True)
    events = {}
    for ckpt in (False, True):
        y = checkpoint(block, x, use_reentrant=False) if ckpt else block(x)
        with BackwardTimeline() as tl:
            y.sum().backward()
        events[ckpt] = tl.events
    assert "recompute" not in events[False] and "backward" in events[False]
    first_backward = events[True].index("backward")
    # The first addmm and the GELU run again, before the first backward operation (the
    # non-reentrant recomputation stops once backward has all it needs: not the last
    # Linear's output).
    assert events[True][:first_backward] == ["recompute", "recompute"]
    assert events[True].count("backward") == events[False].count("backward")
