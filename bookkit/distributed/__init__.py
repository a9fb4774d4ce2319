"""Data-parallel training on several processes, launched and measured from a notebook.

"Beyond one device" runs real multi-process jobs with ``torchrun`` (gloo on
CPUs, so it works on any laptop) and measures what each rank holds. This package has
two halves:

In the notebook's process
    `launch` starts ``torchrun --standalone --nproc_per_node=N -m bookkit.distributed
    EXPERIMENT ...`` in a private temporary folder (``TMPDIR``), so that torchelastic's
    ``torchelastic_*`` folders are removed with it, on a free port chosen by the
    rendezvous (``--standalone`` binds port 0, never the default 29500), and returns
    every rank's results.

In each worker (``python -m bookkit.distributed``)
    `bookkit.distributed.__main__` initialises the process group and runs the named
    experiments, each a function ``experiment(rank, world_size) -> dict`` registered in
    `EXPERIMENTS`; rank ``r`` writes its results to ``rank{r}.json``. The measuring
    tools they share are in `bookkit.distributed.meters`.

Experiments (module: what it measures):

``ddp_reentrant`` (`bookkit.distributed.ddp_checkpoint`)
    DDP with reentrant checkpointing: "Expected to mark a variable ready only once",
    its two triggers and both fixes.
``sharding`` (`bookkit.distributed.sharding`)
    The same model under DDP, FSDP1 and FSDP2, each without checkpointing, with the
    wrapper's own activation-checkpointing integration and with a hand-written
    checkpoint around the wrapped module: parameter and saved-activation bytes per
    rank, collectives per step, losses.
``hf_sharding`` (`bookkit.distributed.sharding`)
    A tiny ``transformers`` GPT-2 under FSDP1 and FSDP2 with the model's own switch
    (``activation_checkpointing_enable``), reentrant and not: the same figures.
``timelines`` (`bookkit.distributed.sharding`)
    The order of all-gathers, recomputation and backward operations in one backward
    pass, for a few of those runs.
``deepspeed`` (`bookkit.distributed.deepspeed_checkpoint`)
    DeepSpeed's activation checkpointing and ``deepspeed.initialize`` (ZeRO 0 and 1).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["EXPERIMENTS", "LaunchResult", "launch", "torchrun_command"]

# Experiment name -> "module:function" (imported in the workers only, so that the
# notebook's process does not import FSDP or DeepSpeed).
EXPERIMENTS = {
    "ddp_reentrant": "bookkit.distributed.ddp_checkpoint:ddp_reentrant_cases",
    "sharding": "bookkit.distributed.sharding:compare_wrappers",
    "hf_sharding": "bookkit.distributed.sharding:compare_hf_switch",
    "timelines": "bookkit.distributed.sharding:backward_timelines",
    "deepspeed": "bookkit.distributed.deepspeed_checkpoint:deepspeed_cases",
}


@dataclass
class LaunchResult:
    """What `launch` brings back from a torchrun job.

    ranks: one dict per rank (index = rank), ``{experiment: results}``.
    command: the command line that ran (a list of strings).
    returncode: torchrun's exit status (0 when every worker succeeded).
    log: the workers' and torchrun's combined stdout and stderr.
    tmpdir: the job's ``TMPDIR`` (already deleted when `launch` returns).
    """

    ranks: list[dict]
    command: list[str]
    returncode: int
    log: str = field(repr=False)
    tmpdir: str = ""

    def __getitem__(self, experiment: str) -> list:
        """``result["sharding"]`` -> that experiment's results, one entry per rank."""
        return [r[experiment] for r in self.ranks]


def torchrun_command(experiments, nproc: int, out_dir: str | os.PathLike,
                     python: str | None = None) -> list[str]:
    """The torchrun command line `launch` runs (see there for the arguments)."""
    unknown = [e for e in experiments if e not in EXPERIMENTS]
    if unknown or not experiments:
        raise ValueError(f"experiments must be a non-empty list of {sorted(EXPERIMENTS)}, "
                         f"got {list(experiments)}")
    if int(nproc) != nproc or nproc < 1:
        raise ValueError(f"nproc must be a positive integer, got {nproc!r}")
    return [python or sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", "-m", "bookkit.distributed",
            "--out", str(out_dir), *experiments]


def launch(experiments, nproc: int = 2, timeout: float = 300, env: dict | None = None,
           check: bool = True) -> LaunchResult:
    """Run ``experiments`` in ``nproc`` processes under torchrun; return every rank's results.

    Args:
        experiments: names from `EXPERIMENTS`, run in this order in one job (one
            process group, one import of torch per worker).
        nproc: number of worker processes (ranks). On a CPU each is one process with
            one thread (``OMP_NUM_THREADS=1``), so 2 suits a 2-core machine.
        timeout: seconds before the job is killed (``subprocess.TimeoutExpired``).
        env: extra environment variables for torchrun and the workers.
        check: raise ``RuntimeError`` with the end of the log when the job fails.

    Returns:
        A `LaunchResult`; ``result.ranks[r][name]`` is what experiment ``name``
        returned on rank ``r``.

    The job runs with ``TMPDIR`` pointing at a fresh temporary folder that is deleted
    afterwards (torchelastic writes its ``torchelastic_*`` folders there), and with
    ``--standalone``: the rendezvous binds a free port, so parallel jobs on one machine
    never collide on the default port 29500.

    Example:
        >>> result = launch(["ddp_reentrant"])              # doctest: +SKIP
        >>> result["ddp_reentrant"][0]["reentrant, block used twice"]["error"]  # doctest: +SKIP
    """
    with tempfile.TemporaryDirectory(prefix="book-torchrun-", ignore_cleanup_errors=True) as tmp:
        out_dir = Path(tmp) / "results"
        out_dir.mkdir()
        cmd = torchrun_command(list(experiments), nproc, out_dir)
        job_env = {**os.environ, "TMPDIR": tmp, "OMP_NUM_THREADS": "1",
                   "PYTHONUNBUFFERED": "1", **(env or {})}
        # Workers import bookkit from wherever the notebook's process finds it.
        root = str(Path(__file__).resolve().parents[2])
        job_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, job_env.get("PYTHONPATH", "")) if p)
        proc = subprocess.run(cmd, env=job_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if proc.returncode != 0 and check:
            tail = "\n".join(proc.stdout.splitlines()[-40:])
            raise RuntimeError(f"torchrun exited with status {proc.returncode}; end of its log:\n{tail}")
        ranks = []
        for r in range(nproc):
            path = out_dir / f"rank{r}.json"
            ranks.append(json.loads(path.read_text()) if path.exists() else {})
    return LaunchResult(ranks, cmd, proc.returncode, proc.stdout, tmp)
