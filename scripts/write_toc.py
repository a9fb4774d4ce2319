"""Write _toc.yml from the chapters that exist, in the book's order.

The book's structure lives here (parts, chapter order); a chapter appears once its
notebook exists, so the table of contents never lists a missing file.
Usage: python scripts/write_toc.py
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PARTS = [
    ("Getting started", ["notebooks/ch00_five_minutes"]),
    ("Part I: from first principles, in minigrad", [
        "notebooks/ch01_where_memory_goes",
        "notebooks/ch02_tiny_autograd",
        "notebooks/ch03_dropping_and_rebuilding",
        "notebooks/ch04_sqrt_trick",
        "notebooks/ch05_choosing_checkpoints",
        "notebooks/ch06_beyond_one_level",
        "notebooks/ch07_beyond_chains",
        "notebooks/ch08_when_recomputation_lies",
    ]),
    ("Part II: the same results in PyTorch", [
        "notebooks/ch09_torch_checkpoint",
        "notebooks/ch10_api_in_depth",
        "notebooks/ch11_transformer_activations",
        "notebooks/ch12_selective_recomputation",
        "notebooks/ch13_logits_wall",
        "notebooks/ch14_cost_in_time",
        "notebooks/ch15_memory_did_not_go_down",
    ]),
    ("Part III: in the real stack", [
        "notebooks/ch16_hugging_face",
        "notebooks/ch17_beyond_one_device",
        "notebooks/ch18_offloading",
        "notebooks/ch19_related_techniques",
        "notebooks/ch20_applications",
        "notebooks/ch21_jax",
        "notebooks/ch22_memory_formula",
        "notebooks/ch23_formula_vs_measurement",
        "notebooks/ch24_memory_calculator",
        "book/playbook",
    ]),
    ("Assignments", [
        "book/assignments/instructors",
        "book/assignments/a1_backward/a1_backward",
        "book/assignments/a2_ledger/a2_ledger",
        "book/assignments/a3_checkpoint/a3_checkpoint",
        "book/assignments/a4_planning/a4_planning",
        "book/assignments/a5_selective/a5_selective",
        "book/assignments/a6_nested/a6_nested",
        "book/assignments/a7_hooks/a7_hooks",
    ]),
    ("Back matter", ["book/glossary", "book/coverage", "book/references"]),
]


def exists(doc: str) -> bool:
    return any((ROOT / f"{doc}{s}").is_file() for s in (".md", ".ipynb"))


def links_resolve(doc: str) -> bool:
    """A prose page is listed only when every chapter it links to exists."""
    path = ROOT / f"{doc}.md"
    if not path.is_file():
        return True
    targets = re.findall(r"\{doc\}`\.\./([^`]+)`", path.read_text())
    return all(exists(t) for t in targets)


def main() -> None:
    lines = ["# Table of contents (Jupyter Book 1), written by scripts/write_toc.py.",
             "format: jb-book", "root: book/intro", "parts:"]
    for caption, docs in PARTS:
        present = [d for d in docs if exists(d) and links_resolve(d)]
        if not present:
            continue
        lines += [f'  - caption: "{caption}"', "    chapters:"]
        lines += [f"      - file: {d}" for d in present]
    (ROOT / "_toc.yml").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
