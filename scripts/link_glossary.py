"""Link each glossary term from the chapters: the first time a notebook's prose uses a
term, it becomes a ``{term}`` role pointing at book/glossary.md.

Usage: python scripts/link_glossary.py notebooks/*.ipynb        (edits in place)
       python scripts/link_glossary.py --check notebooks/*.ipynb (exit 1 if a link is missing)

Per notebook and per term, only the FIRST occurrence in Markdown cells is linked, and
only in prose: never inside code (inline or fenced), headings, labels, links, math,
roles (``{glue:text}``, ``{ref}``, an existing ``{term}``), directive options, HTML, or
directives that hold code or math. A term the notebook already links is left alone, so
running the script twice changes nothing. Only Markdown changes: the cells' code and
outputs are untouched, so a notebook needs no re-execution (nbval compares code cells).

What counts as an occurrence of a term is listed in ``PHRASES`` (the glossary's own
names are ambiguous: "checkpoint" is also torch's function, "residual" also a residual
connection); a term missing from it is matched by its name without the parenthesis.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "book" / "glossary.md"

PHRASES: dict[str, list[str]] = {
    "Activation": ["activations", "activation"],
    "Saved tensor": ["saved tensors", "saved tensor"],
    "Gradient checkpointing": ["gradient checkpointing", "activation checkpointing",
                               "rematerialisation", "rematerialization"],
    "Checkpoint (activation)": ["checkpointed activations", "checkpoints"],
    "Training checkpoint": ["training checkpoints", "training checkpoint"],
    "Segment": ["segments", "segment"],
    "Store-all": ["store-all", "store all"],
    "Recomputation (replay)": ["recomputation", "recomputes", "recomputed"],
    "Peak memory": ["peak memory", "peak"],
    "Slot (snapshot)": ["slots", "snapshots"],
    "Revolve": ["Revolve"],
    "Selective recomputation": ["selective recomputation"],
    "Logits": ["logits"],
    "Memory ledger": ["memory ledger", "byte ledger", "ledger"],
    "Rank": ["ranks", "rank"],
    "All-gather, reduce-scatter, all-reduce": ["all-gathers", "all-gather", "reduce-scatters",
                                               "reduce-scatter", "all-reduces", "all-reduce"],
    "Sharding (FSDP, ZeRO)": ["sharding", "sharded"],
    "Offloading": ["offloading", "offloaded", "offload"],
    # The JAX chapter's prose says "residual" only in code spans so far (print_saved_residuals).
    "Residual (JAX)": ["residuals"],  # plural: "a residual add" is not JAX's residual
    "NF4": ["NF4"],
    "FLOP": ["FLOPs", "FLOP"],
    "Caching allocator": ["caching allocator", "CUDA allocator"],
    "Saved-tensor hooks": ["saved_tensors_hooks", "saved-tensor hooks"],
    "Reentrant checkpoint": ["use_reentrant", "reentrant"],
    "LoRA, QLoRA": ["QLoRA", "LoRA"],
    "Mixed precision": ["mixed precision", "bfloat16", "bf16"],
}
REJECT_AFTER_WORD: dict[str, set[str]] = {
    # "checkpoint_sequential never checkpoints its last segment": a verb, not the noun.
    "Checkpoint (activation)": {"never", "it", "that", "which", "also", "only", "always",
                                "model", "layer", "block", "who", "one", "and", "then"},
}
"""Words after which a phrase is not the term (checked case-insensitively)."""

CASE_SENSITIVE = {"Revolve", "NF4", "FLOP", "LoRA, QLoRA"}
"""Terms whose phrases match only as written (``revolve`` the verb is not the schedule)."""

# Directives whose body is prose (links allowed inside); any other fenced block is skipped.
PROSE_DIRECTIVES = {"exercise", "solution", "note", "tip", "important", "warning",
                    "admonition", "hint", "seealso", "attention", "caution", "dropdown",
                    "margin", "sidebar", "epigraph", "topic", "prf:theorem", "prf:proof",
                    "prf:lemma", "prf:definition", "prf:corollary", "prf:remark",
                    "solution-start", "grid-item-card"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(\{([^}]+)\})?")
PROTECTED = re.compile(
    r"\{[^}\s]+\}`[^`]*`"            # a role: {glue:text}`x`, {ref}`x`, {term}`x`
    r"|`[^`]*`"                      # inline code
    r"|\$\$.*?\$\$|\$[^$\n]+\$"      # math
    r"|!?\[[^\]]*\]\([^)]*\)"        # links and images
    r"|\[[^\]]*\]\[[^\]]*\]"         # reference links
    r"|<[^>\n]+>"                    # autolinks and HTML tags
    r"|https?://\S+"                 # bare URLs
    r"|\{\{.*?\}\}",                 # substitutions
    re.S)
TERM_ROLE = re.compile(r"\{term\}`(?:[^`<]*<([^`>]+)>|([^`]+))`")


def glossary_terms(text: str | None = None) -> list[str]:
    """The terms of book/glossary.md's ``{glossary}`` block, in order."""
    text = GLOSSARY.read_text() if text is None else text
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    if block is None:
        raise ValueError("book/glossary.md has no ```{glossary} block")
    return [line.strip() for line in block.group(1).splitlines()
            if line.strip() and not line[0].isspace()]


def linked_terms(markdown: str) -> set[str]:
    """Lower-cased targets of every ``{term}`` role in a Markdown text."""
    return {(explicit or plain).strip().lower()
            for explicit, plain in TERM_ROLE.findall(markdown)}


def prose_mask(text: str) -> str:
    """`text` with every character that is not linkable prose replaced by NUL (same
    length): skipped blocks, headings, labels, directive options and protected spans."""
    out = []
    fences: list[tuple[str, bool]] = []          # (closing marker, body is prose)
    in_math = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        skip = False
        match = FENCE.match(line)
        if in_math:
            skip = True
            if stripped.endswith("$$"):
                in_math = False
        elif fences and match and match.group(2)[0] == fences[-1][0][0] \
                and len(match.group(2)) >= len(fences[-1][0]) and not match.group(3):
            fences.pop()
            skip = True
        elif match and (match.group(3) or match.group(2)[0] != ":"):
            name = (match.group(4) or "").strip()
            fences.append((match.group(2), name in PROSE_DIRECTIVES))
            skip = True
        elif fences and not fences[-1][1]:
            skip = True
        elif stripped.startswith("$$"):
            skip = True
            in_math = not (len(stripped) > 2 and stripped.endswith("$$"))
        elif (stripped.startswith(("#", "(", ":", "<", "|---", "```", "~~~"))
              and (not stripped.startswith("(") or stripped.endswith(")="))):
            skip = True                            # headings, labels, options, HTML
        elif stripped.startswith("\\begin") or stripped.startswith("\\end"):
            skip = True
        out.append("\0" * len(line.rstrip("\n")) + ("\n" if line.endswith("\n") else "")
                   if skip else line)
    masked = "".join(out)
    return PROTECTED.sub(lambda m: "\0" * len(m.group(0)), masked)


def phrase_pattern(phrase: str, case_sensitive: bool) -> re.Pattern:
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<![\w\-`{<\[/.])" + r"\s+".join(words) + r"(?![\w\-`>\]])",
                      0 if case_sensitive else re.I)


def link_first(text: str, term: str, phrases: list[str], case_sensitive: bool,
               reject_after: set[str] = frozenset()) -> str | None:
    """`text` with the first prose occurrence of any phrase linked to `term`, or None."""
    masked = prose_mask(text)
    best = None
    for phrase in phrases:
        for match in phrase_pattern(phrase, case_sensitive).finditer(masked):
            if "\0" in match.group(0):
                continue
            before = re.findall(r"[\w']+", masked[max(0, match.start() - 40):match.start()])
            if before and before[-1].lower() in reject_after:
                continue
            if best is None or match.start() < best.start():
                best = match
            break
    if best is None:
        return None
    shown = " ".join(text[best.start():best.end()].split())
    role = f"{{term}}`{shown} <{term}>`"
    return text[:best.start()] + role + text[best.end():]


def phrases_for(term: str) -> list[str]:
    return PHRASES.get(term) or [re.sub(r"\s*\(.*\)$", "", term)]


def link_notebook(nb: dict, terms: list[str]) -> list[str]:
    """Link every term's first occurrence in the notebook's Markdown; the terms linked."""
    cells = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    already = linked_terms("\n".join(_source(c) for c in cells))
    done = []
    # Longer phrases first, so "selective recomputation" is linked before "recomputation"
    # can take its second word.
    order = sorted(terms, key=lambda t: -max(len(p) for p in phrases_for(t)))
    for term in order:
        if term.lower() in already:
            continue
        for cell in cells:
            new = link_first(_source(cell), term, phrases_for(term), term in CASE_SENSITIVE,
                             REJECT_AFTER_WORD.get(term, set()))
            if new is not None:
                cell["source"] = new
                done.append(term)
                break
    return done


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a notebook would get a link")
    args = parser.parse_args(argv)
    terms = glossary_terms()
    missing = set(terms) - set(PHRASES)
    if missing:
        print(f"link_glossary: no PHRASES for {sorted(missing)}; matching their names")
    status = 0
    import nbformat

    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        done = link_notebook(nb, terms)
        if not done:
            continue
        if args.check:
            print(f"{path}: would link {', '.join(done)}")
            status = 1
            continue
        nbformat.write(nb, path)
        print(f"{path}: linked {', '.join(done)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
