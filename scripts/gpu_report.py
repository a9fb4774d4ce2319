"""Run Part II notebooks on a GPU and compare the CUDA allocator's figures with the CPU's.

Used by ``scripts/gpu_check.sh``; two subcommands:

``execute OUT_DIR NOTEBOOK...``
    Executes each notebook into ``OUT_DIR`` (the stored notebooks are left alone: their
    outputs are the CPU run the book shows), in its own folder as working directory,
    and writes ``OUT_DIR/runs.json`` with each notebook's wall time and error, if any.
    The notebooks' ``bookkit.torchmem.record`` calls append their figures to the file
    named by ``BOOK_MEASUREMENTS``.

``compare MEASUREMENTS RUNS_JSON REPORT_MD --gpu NAME``
    Pairs every CUDA figure with the CPU figure that predicts it, checks each pair
    against the tolerance below, and writes a Markdown report. Exit status 1 when a
    pair disagrees or a notebook failed.

Which figures are compared. A record is ``{"key", "device", "figures"}``. In a record
made on a GPU, a figure ``cuda_<name>`` is compared with ``cpu_<name>`` of the same
record (the convention for new notebooks). Records written before that convention are
covered by ``RULES``: (key prefix, CPU or predicted figure, CUDA figure). Figures with
no partner are listed as "recorded, not compared".

Tolerance: ``|cuda - cpu| <= max(REL_TOL * cpu, ABS_TOL)``. The CUDA caching allocator
rounds every block up to 512 bytes, cuBLAS and the fused attention kernels allocate
small workspaces of their own, and a GPU's kernels keep a few small tensors (random
seeds, softmax statistics) in other shapes than the CPU's; 10 % or 64 KiB, whichever is
larger, covers those and still catches a missing or extra activation-sized tensor.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REL_TOL = 0.10
ABS_TOL = 64 * 1024

# (key prefix, reference figure, CUDA figure) for records that do not follow the
# cpu_<name> / cuda_<name> convention.
RULES = [
    ("ch00_kept_", "cpu_saved", "cuda_held"),     # held after forward vs saved-tensor meter
    ("ch09_layer_", "gpu_terms", "cuda_held"),    # GPU element sizes (1-byte dropout masks)
    ("ch07_step_", "cpu_saved", "cuda_after_forward"),  # held after forward vs saved-tensor meter
    ("ch07_step_", "cpu_tracker_peak", "cuda_step_peak"),  # MemTracker's step peak vs allocator's
    ("ch08_checkpoint_sequential_", "cpu_saved", "cuda_held"),
]


@dataclass(frozen=True)
class Pair:
    key: str
    reference_name: str
    reference: float
    cuda_name: str
    cuda: float

    @property
    def diff(self) -> float:
        return self.cuda - self.reference

    @property
    def allowed(self) -> float:
        return max(REL_TOL * abs(self.reference), ABS_TOL)

    @property
    def ok(self) -> bool:
        return abs(self.diff) <= self.allowed


def load_records(path: Path) -> list[dict]:
    """The JSON lines of a ``BOOK_MEASUREMENTS`` file, checked for the expected fields."""
    records = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        if not isinstance(rec, dict) or not {"key", "device", "figures"} <= rec.keys():
            raise ValueError(f"{path}:{n}: expected an object with key, device, figures; got {line[:80]}")
        records.append(rec)
    return records


def pair_figures(records: list[dict]) -> tuple[list[Pair], list[tuple[str, str, object]]]:
    """(pairs to check, unpaired figures) from records made on a GPU.

    Records made on a CPU (device "cpu") hold no CUDA figure and are skipped. A CUDA
    figure that is None (the notebook did not measure it) is listed as unpaired.
    """
    pairs, unpaired = [], []
    for rec in records:
        if rec["device"] != "cuda":
            continue
        key, figs = rec["key"], rec["figures"]
        used = set()
        for name, value in figs.items():
            if not name.startswith("cuda_"):
                continue
            ref_name = "cpu_" + name[len("cuda_"):]
            if ref_name not in figs:
                ref_name = next((r for prefix, r, c in RULES if key.startswith(prefix) and c == name), None)
            if ref_name is not None and figs.get(ref_name) is not None and value is not None:
                pairs.append(Pair(key, ref_name, figs[ref_name], name, value))
                used |= {name, ref_name}
        unpaired += [(key, name, value) for name, value in figs.items() if name not in used]
    return pairs, unpaired


def render(pairs, unpaired, runs: dict, gpu: str, torch_info: str, date: str) -> str:
    """The Markdown report."""
    bad = [p for p in pairs if not p.ok]
    failed = {nb: r for nb, r in runs.items() if r.get("error")}
    lines = [
        "# GPU check of Part II",
        "",
        f"- Date: {date}",
        f"- GPU: {gpu}",
        f"- {torch_info}",
        f"- Tolerance: |CUDA − CPU| ≤ max({REL_TOL:.0%} of the CPU figure, {ABS_TOL // 1024} KiB)"
        " (see `scripts/gpu_report.py` for why)",
        f"- Result: {len(pairs) - len(bad)} of {len(pairs)} figure pairs agree;"
        f" {len(runs) - len(failed)} of {len(runs)} notebooks ran without error.",
        "",
        "## Notebooks",
        "",
        "| notebook | wall time | result |",
        "|---|---:|---|",
    ]
    for nb, r in runs.items():
        result = "ok" if not r.get("error") else f"error: {r['error']}"
        lines.append(f"| {nb} | {r['seconds']:.1f} s | {result} |")
    lines += ["", "## Figures compared", "",
              "| measurement | CPU figure | bytes | CUDA figure | bytes | difference | agrees |",
              "|---|---|---:|---|---:|---:|---|"]
    for p in pairs:
        rel = f"{p.diff / p.reference:+.1%}" if p.reference else "n/a"
        lines.append(f"| {p.key} | {p.reference_name} | {p.reference:,.0f} | {p.cuda_name} |"
                     f" {p.cuda:,.0f} | {p.diff:+,.0f} ({rel}) | {'yes' if p.ok else '**no**'} |")
    if unpaired:
        lines += ["", "## Recorded, not compared", "",
                  "| measurement | figure | value |", "|---|---|---:|"]
        for key, name, value in unpaired:
            shown = f"{value:,}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
            lines.append(f"| {key} | {name} | {shown} |")
    return "\n".join(lines) + "\n"


def execute(out_dir: Path, notebooks: list[str]) -> dict:
    """Execute copies of ``notebooks`` into ``out_dir``; return {name: {seconds, error}}."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    runs = {}
    for name in notebooks:
        path = Path(name)
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": str(path.parent)}})
        start = time.perf_counter()
        error = None
        try:
            client.execute()
        except CellExecutionError as exc:
            error = str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else type(exc).__name__
        except Exception as exc:  # a kernel that died, a timeout: report it, run the rest
            error = f"{type(exc).__name__}: {exc}"[:200]
        runs[path.name] = {"seconds": time.perf_counter() - start, "error": error}
        nbformat.write(nb, out_dir / path.name)
        print(f"{runs[path.name]['seconds']:7.1f} s  {path.name}  {error or 'ok'}", flush=True)
    (out_dir / "runs.json").write_text(json.dumps(runs, indent=1))
    return runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute")
    ex.add_argument("out_dir", type=Path)
    ex.add_argument("notebooks", nargs="+")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("measurements", type=Path)
    cmp_.add_argument("runs", type=Path)
    cmp_.add_argument("report", type=Path)
    cmp_.add_argument("--gpu", required=True, help="GPU model, from nvidia-smi --query-gpu=name")
    args = parser.parse_args(argv)

    if args.command == "execute":
        runs = execute(args.out_dir, args.notebooks)
        return 1 if any(r["error"] for r in runs.values()) else 0

    records = load_records(args.measurements) if args.measurements.exists() else []
    runs = json.loads(args.runs.read_text())
    pairs, unpaired = pair_figures(records)
    try:
        import torch
        torch_info = f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    except ImportError:
        torch_info = "torch not importable"
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(render(pairs, unpaired, runs, args.gpu, torch_info, date), encoding="utf-8")
    bad = [p for p in pairs if not p.ok]
    print(f"{len(pairs) - len(bad)} of {len(pairs)} figure pairs agree; report: {args.report}")
    if not pairs:
        print("no CUDA figure was recorded: did the notebooks run on the GPU?", file=sys.stderr)
    return 1 if bad or not pairs or any(r.get("error") for r in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
