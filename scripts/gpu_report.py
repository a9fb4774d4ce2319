"""Run the notebooks on a GPU and compare the CUDA allocator's figures with the CPU's.

Used by ``scripts/gpu_check.sh``; five subcommands:

``notebooks``
    Prints, one a line, every chapter notebook with a GPU branch (a code cell that tests
    ``DEVICE == "cuda"``): the notebooks the GPU check runs. See `gpu_notebooks`.

``setup [--dry-run] [--requirements FILE]``
    Installs, into the Python that runs this script, only what the notebooks need and
    that Python lacks, at the versions pinned in ``requirements.txt``; never torch
    (a GPU box brings its own CUDA build; the pinned one is CPU-only). See
    `missing_packages`.

``execute OUT_DIR NOTEBOOK...``
    Executes each notebook into ``OUT_DIR`` (the stored notebooks are left alone: their
    outputs are the CPU run the book shows), in its own folder as working directory,
    with a kernel that runs *this* interpreter and imports this checkout's ``minigrad``
    and ``bookkit`` (``PYTHONPATH``), so the setup cell never installs a remote copy.
    Writes ``OUT_DIR/runs.json`` with each notebook's wall time and error, if any.
    The notebooks' ``bookkit.torchmem.record`` calls append their figures to the file
    named by ``BOOK_MEASUREMENTS``.

``calculator``
    The calculator row: for every recipe (``precision`` × attention × dropout ×
    recomputation, GPT-2 and Llama; `calculator_cases`), runs one forward pass on the
    GPU and records ``predicted_held`` (``estimate_training_memory(...,
    device="cuda")``'s activations less the token ids, which exist before the
    forward) and ``cuda_held`` (``measure_cuda_activations``: the CUDA allocator's
    bytes alive after the forward, the output held) under ``calc_<case>``.

``compare MEASUREMENTS RUNS_JSON REPORT_MD --gpu NAME``
    Pairs every CUDA figure with the CPU figure that predicts it, checks each pair
    against the tolerances below, and writes a Markdown report that also records the
    GPU's compute capability and the attention kernel ``scaled_dot_product_attention``
    picks on it. Exit status 1 when a pair disagrees or a notebook failed.

Which figures are compared. A record is ``{"key", "device", "figures"}``. In a record
made on a GPU, a figure ``cuda_<name>`` is compared with ``cpu_<name>`` of the same
record (the convention for new notebooks). Records written before that convention are
covered by ``RULES``: (key prefix, CPU or predicted figure, CUDA figure). Figures with
no partner are listed as "recorded, not compared".

Tolerances: ``|cuda - cpu| <= max(rel * cpu, floor)``, with two pairs of values.

- **Held after the forward pass** (CUDA figures named ``cuda_held`` or
  ``cuda_after_forward``): 1 % or 4 KiB. The CUDA allocator rounds each tensor up to
  512 bytes and the loss is one such block; nothing else should differ, and the
  smallest activation these figures contain is 8 KiB, so a missing or extra tensor
  fails.
- **The calculator row** (keys ``calc_``): 4 KiB, no relative part. Its cases have
  b·s = 512 tokens and widths that make every activation tensor a multiple of 512
  bytes, so the allocator's rounding adds only the loss's two scalars and a dropout
  seed (under 2 KiB); a CUDA term of the wrong width (a LayerNorm statistic, a
  dropout mask) shifts the figure by more.
- **Peaks over a step** (every other pair): 10 % or 64 KiB. Besides the rounding,
  cuBLAS, cuDNN and the fused attention kernels allocate workspaces of their own, a
  GPU's kernels keep small tensors (random seeds, softmax statistics) in other shapes
  than the CPU's, and AdamW updates all parameters at once on a GPU; a missing or
  extra activation-sized tensor still shows.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # bookkit of this checkout, also when run from elsewhere
    sys.path.insert(0, str(ROOT))

REL_TOL = 0.10
ABS_TOL = 64 * 1024
HELD_REL_TOL = 0.01
HELD_ABS_TOL = 4 * 1024
HELD_FIGURES = ("cuda_held", "cuda_after_forward")
CALC_PREFIX = "calc_"          # the calculator row: estimate vs CUDA allocator, 4 KiB

# (key prefix, reference figure, CUDA figure) for records that do not follow the
# cpu_<name> / cuda_<name> convention.
RULES = [
    ("ch00_kept_", "cpu_saved", "cuda_held"),     # held after forward vs saved-tensor meter
    ("ch11_layer_", "gpu_terms", "cuda_held"),    # GPU element sizes (1-byte dropout masks)
    ("ch09_step_", "cpu_saved", "cuda_after_forward"),  # held after forward vs saved-tensor meter
    ("ch10_checkpoint_sequential_", "cpu_saved", "cuda_held"),
    (CALC_PREFIX, "predicted_held", "cuda_held"),  # estimate_training_memory(device="cuda")
]

# What the notebooks import, by import name -> distribution name in requirements.txt.
# ``exact``: the chapters were run with the pinned version ("Hugging Face models and adapters"' transformers API);
# the others are installed only when missing. torch is never installed here.
NOTEBOOK_PACKAGES = {
    "numpy": ("numpy", False), "matplotlib": ("matplotlib", False),
    "nbclient": ("nbclient", False), "nbformat": ("nbformat", False),
    "ipykernel": ("ipykernel", False),
    "transformers": ("transformers", True), "peft": ("peft", True),
    "accelerate": ("accelerate", True),
}


@dataclass(frozen=True)
class Pair:
    key: str
    reference_name: str
    reference: float
    cuda_name: str
    cuda: float

    @property
    def held(self) -> bool:
        """A "held after the forward pass" pair (tighter tolerance)."""
        return self.cuda_name in HELD_FIGURES

    @property
    def diff(self) -> float:
        return self.cuda - self.reference

    @property
    def allowed(self) -> float:
        if self.key.startswith(CALC_PREFIX):
            return HELD_ABS_TOL
        if self.held:
            return max(HELD_REL_TOL * abs(self.reference), HELD_ABS_TOL)
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


def render(pairs, unpaired, runs: dict, gpu: str, device_lines: list[str], date: str) -> str:
    """The Markdown report. ``device_lines``: from `device_info`."""
    bad = [p for p in pairs if not p.ok]
    failed = {nb: r for nb, r in runs.items() if r.get("error")}
    lines = [
        "# GPU check of the notebooks",
        "",
        f"- Date: {date}",
        f"- GPU: {gpu}",
        *[f"- {line}" for line in device_lines],
        f"- Tolerance, held after the forward pass: |CUDA − CPU| ≤ max({HELD_REL_TOL:.0%} of the"
        f" CPU figure, {HELD_ABS_TOL // 1024} KiB); peaks: max({REL_TOL:.0%}, {ABS_TOL // 1024} KiB)"
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
              "| measurement | CPU figure | bytes | CUDA figure | bytes | difference | allowed | agrees |",
              "|---|---|---:|---|---:|---:|---:|---|"]
    for p in pairs:
        rel = f"{p.diff / p.reference:+.1%}" if p.reference else "n/a"
        lines.append(f"| {p.key} | {p.reference_name} | {p.reference:,.0f} | {p.cuda_name} |"
                     f" {p.cuda:,.0f} | {p.diff:+,.0f} ({rel}) | {p.allowed:,.0f} |"
                     f" {'yes' if p.ok else '**no**'} |")
    if unpaired:
        lines += ["", "## Recorded, not compared", "",
                  "| measurement | figure | value |", "|---|---|---:|"]
        for key, name, value in unpaired:
            shown = f"{value:,}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
            lines.append(f"| {key} | {name} | {shown} |")
    return "\n".join(lines) + "\n"


def device_info() -> list[str]:
    """Lines for the report's header: torch and CUDA versions, the GPU's compute
    capability, and which kernel ``scaled_dot_product_attention`` runs on it for the
    book's causal layers in bf16 and float32 (pre-Ampere GPUs fall back to the "math"
    kernel in bf16, which keeps s×s matrices; "Transformer activations, measured" compares each layer with the
    term count of the kernel that ran)."""
    try:
        import torch
    except ImportError:
        return ["torch not importable"]
    lines = [f"torch {torch.__version__}, CUDA {torch.version.cuda}"]
    if not torch.cuda.is_available():
        return lines + ["no CUDA device visible to torch"]
    from bookkit.torchmodels import sdpa_backend

    major, minor = torch.cuda.get_device_capability()
    lines.append(f"Compute capability: {major}.{minor}")
    for dtype in (torch.bfloat16, torch.float32):
        backend = sdpa_backend(2, 128, 256, 4, dtype=dtype, device="cuda")
        lines.append(f"SDPA kernel (causal, {str(dtype).replace('torch.', '')}, training): {backend}")
    return lines


def calculator_cases() -> list[tuple[str, object, dict]]:
    """(key, config, keyword arguments) of the calculator row: GPT-2 and Llama (grouped
    keys) with eager and sdpa attention, dropout 0 and 0.1, every precision and every
    recomputation mode, b = 2 sequences of s = 256 tokens. Widths are multiples of 128
    so that each activation tensor is a multiple of the allocator's 512-byte block."""
    from transformers import GPT2Config, LlamaConfig

    cases = []
    for model in ("gpt2", "llama"):
        for attn in ("eager", "sdpa"):
            for p in (0.0, 0.1):
                if model == "gpt2":
                    config = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=2048,
                                        n_positions=256, attn_pdrop=p, resid_pdrop=p, embd_pdrop=p)
                else:
                    config = LlamaConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
                                         num_key_value_heads=2, intermediate_size=512,
                                         vocab_size=2048, attention_dropout=p)
                config._attn_implementation = attn
                for precision in ("fp32", "bf16", "bf16-autocast"):
                    for recompute in ("none", "selective", "full"):
                        key = f"{CALC_PREFIX}{model}_{attn}_p{p}_{precision}_{recompute}"
                        cases.append((key, config, dict(batch_size=2, seq_len=256,
                                                        precision=precision, recompute=recompute)))
    return cases


def calculator_record(key: str, config, kwargs: dict, cuda_held) -> dict:
    """The figures of one calculator case: the estimate's prediction (activations on
    CUDA less the token ids) and what the GPU held (None where it was not measured)."""
    from bookkit.calculator import estimate_training_memory

    est = estimate_training_memory(config, device="cuda", **kwargs)
    predicted = est["activations"] - est["terms"]["token ids (embedding)"]
    return dict(predicted_held=predicted, cuda_held=cuda_held, precision=kwargs["precision"],
                recompute=kwargs["recompute"])


def run_calculator() -> int:
    """Measure every `calculator_cases` case on the GPU and record it; 2 without a GPU."""
    import torch

    from bookkit.calculator import measure_cuda_activations
    from bookkit.torchmem import record

    if not torch.cuda.is_available():
        print("gpu_report calculator: no CUDA device; nothing measured", file=sys.stderr)
        return 2
    failures = 0
    for key, config, kwargs in calculator_cases():
        try:
            held = measure_cuda_activations(config, **kwargs)
        except Exception as exc:  # report the case, measure the rest
            print(f"{key}: {type(exc).__name__}: {exc}"[:300], file=sys.stderr)
            held, failures = None, failures + 1
        figures = calculator_record(key, config, kwargs, held)
        record(key, **figures)
        print(f"{key}: predicted {figures['predicted_held']:,} cuda {held}", flush=True)
    return 1 if failures else 0


def missing_packages(requirements: Path) -> list[str]:
    """Pinned requirements (``name==version``) for what this interpreter lacks.

    Of `NOTEBOOK_PACKAGES`: those not importable here, plus, for the ones marked exact,
    those installed at another version than the pin. Never torch: a GPU box has its own
    CUDA build, and ``requirements.txt`` pins a CPU-only one.
    """
    import importlib.metadata
    import importlib.util

    pins = {}
    for line in Path(requirements).read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not line.startswith("#"):
            pins[name.lower().replace("_", "-")] = version
    wanted = []
    for module, (dist, exact) in NOTEBOOK_PACKAGES.items():
        pin = pins.get(dist.lower())
        if pin is None:
            raise ValueError(f"{requirements}: no pinned version of {dist}")
        if importlib.util.find_spec(module) is None:
            wanted.append(f"{dist}=={pin}")
        elif exact and importlib.metadata.version(dist) != pin:
            wanted.append(f"{dist}=={pin}")
    return wanted


def setup(requirements: Path, dry_run: bool = False) -> list[str]:
    """Install `missing_packages` with this interpreter's pip; return what it installs."""
    import subprocess

    wanted = missing_packages(requirements)
    print("gpu_check setup: " + (f"installing {' '.join(wanted)}" if wanted else "nothing to install"),
          flush=True)
    if wanted and not dry_run:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *wanted], check=True)
    return wanted


def _kernel_spec(folder: Path) -> str:
    """Write a Jupyter kernel spec that starts this very interpreter; return its name.

    ``kernel_name="python3"`` would start whichever Python registered that name (often
    not the one with the CUDA torch this script checked)."""
    name = "gpu-check-python"
    spec = folder / "kernels" / name
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"gpu_check ({sys.executable})", "language": "python"}))
    return name


def execute(out_dir: Path, notebooks: list[str]) -> dict:
    """Execute copies of ``notebooks`` into ``out_dir``; return {name: {seconds, error}}."""
    import os

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    # The kernel inherits this environment: this checkout first on its import path, and
    # the kernel spec written below.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        [str(out_dir / "jupyter")] + [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p])
    kernel = _kernel_spec(out_dir / "jupyter")
    runs = {}
    for name in notebooks:
        path = Path(name)
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=900, kernel_name=kernel,
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


GPU_BRANCH = 'DEVICE == "cuda"'


def gpu_notebooks(root: Path = ROOT) -> list[Path]:
    """Every chapter notebook with a GPU branch (a code cell testing ``DEVICE == "cuda"``),
    in name order: the notebooks the GPU check runs, found rather than listed.

    Args:
        root: the repository (its ``notebooks/ch*.ipynb`` are read, continuation
            pages ``chNNb_*`` included).

    Returns:
        Their paths.
    """
    found = []
    for path in sorted((root / "notebooks").glob("ch[0-9][0-9]*_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        sources = ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                   for c in cells if c["cell_type"] == "code")
        if any(GPU_BRANCH in source for source in sources):
            found.append(path)
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("notebooks")
    st = sub.add_parser("setup")
    st.add_argument("--requirements", type=Path, default=ROOT / "requirements.txt")
    st.add_argument("--dry-run", action="store_true")
    ex = sub.add_parser("execute")
    ex.add_argument("out_dir", type=Path)
    ex.add_argument("notebooks", nargs="+")
    sub.add_parser("calculator")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("measurements", type=Path)
    cmp_.add_argument("runs", type=Path)
    cmp_.add_argument("report", type=Path)
    cmp_.add_argument("--gpu", required=True, help="GPU model, from nvidia-smi --query-gpu=name")
    args = parser.parse_args(argv)

    if args.command == "notebooks":
        print("\n".join(p.relative_to(ROOT).as_posix() for p in gpu_notebooks()))
        return 0
    if args.command == "setup":
        setup(args.requirements, args.dry_run)
        return 0
    if args.command == "calculator":
        return run_calculator()
    if args.command == "execute":
        runs = execute(args.out_dir, args.notebooks)
        return 1 if any(r["error"] for r in runs.values()) else 0

    records = load_records(args.measurements) if args.measurements.exists() else []
    runs = json.loads(args.runs.read_text())
    pairs, unpaired = pair_figures(records)
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(render(pairs, unpaired, runs, args.gpu, device_info(), date), encoding="utf-8")
    bad = [p for p in pairs if not p.ok]
    print(f"{len(pairs) - len(bad)} of {len(pairs)} figure pairs agree; report: {args.report}")
    if not pairs:
        print("no CUDA figure was recorded: did the notebooks run on the GPU?", file=sys.stderr)
    return 1 if bad or not pairs or any(r.get("error") for r in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
