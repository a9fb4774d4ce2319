"""Worker entry point: ``torchrun ... -m bookkit.distributed --out DIR EXPERIMENT ...``.

Started by `bookkit.distributed.launch` ("Beyond one device"), once per rank. Initialises
the default process group (gloo: every collective runs on CPUs), runs each named experiment
of `bookkit.distributed.EXPERIMENTS` in order on every rank, and writes this rank's results
to ``DIR/rank{RANK}.json`` as ``{experiment: results}``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import warnings
from pathlib import Path

from bookkit.distributed import EXPERIMENTS


def _run(name: str, rank: int, world_size: int) -> dict:
    module_name, func_name = EXPERIMENTS[name].split(":")
    experiment = getattr(importlib.import_module(module_name), func_name)
    return experiment(rank, world_size)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bookkit.distributed")
    parser.add_argument("--out", required=True, help="folder for rank{r}.json")
    parser.add_argument("experiments", nargs="+", choices=sorted(EXPERIMENTS))
    args = parser.parse_args(argv)

    import torch.distributed as dist

    # The library's own deprecation notices (FSDP1, the c10d function names) would
    # drown the log that `launch` shows when something goes wrong.
    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    results = {}
    try:
        for name in args.experiments:
            results[name] = _run(name, rank, world_size)
            dist.barrier()
    finally:
        out = Path(args.out) / f"rank{rank}.json"
        out.write_text(json.dumps(results, indent=1))  # keeps the experiments' order
        dist.destroy_process_group()
    if int(os.environ.get("LOCAL_RANK", 0)) == 0:
        print(f"bookkit.distributed: ran {', '.join(args.experiments)} on {world_size} ranks")


if __name__ == "__main__":
    main()
