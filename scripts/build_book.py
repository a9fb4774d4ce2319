"""Build the HTML book, never from stale notebook runs, failing on every broken reference.

Usage: python scripts/build_book.py [--source DIR] [--watch DIR ...] [--stored-outputs]

`make book` calls it. Two things make a plain `jupyter-book build` unsafe to repeat:

- jupyter-cache keys a notebook's execution on the notebook's code alone, so after an
  edit to minigrad/ or bookkit/ it would serve outputs of the old code. Here the
  cache is keyed on the library too: a fingerprint of every file under the watched
  folders (default: minigrad, bookkit), requirements.txt, pyproject.toml and the Python
  version is kept next to the cache, and a different fingerprint empties the cache.
- Sphinx re-reads only changed pages, so a second build forgets the warnings (a
  broken `{ref}`) of the pages it skips and exits 0. `--all` re-reads every page on
  every build (executions still come from the cache).

`--stored-outputs` renders the notebooks' stored outputs without executing them.
`make test` uses it after strict nbval has shown, in the same run, that the stored
outputs are exactly what the code prints: the book then costs no third execution.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["-W", "-n", "--keep-going", "--all"]
FINGERPRINT = "library-fingerprint.txt"


def fingerprint(source: Path, watched: list[str]) -> str:
    """sha256 of every watched file's path and bytes, the dependency pins and Python."""
    digest = hashlib.sha256(sys.version.encode())
    files = [source / name for name in ("requirements.txt", "pyproject.toml")]
    for folder in watched:
        files += sorted(p for p in (source / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    for path in files:
        if path.is_file():
            digest.update(path.relative_to(source).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_dir(source: Path, config: dict) -> Path:
    """Where myst-nb keeps jupyter-cache (``execute.cache``, default _build/.jupyter_cache)."""
    configured = (config.get("execute") or {}).get("cache") or ""
    return (source / configured) if configured else source / "_build" / ".jupyter_cache"


def invalidate_stale_cache(source: Path, config: dict, watched: list[str]) -> bool:
    """Empty the execution cache when the library changed; True if it was emptied."""
    cache = cache_dir(source, config)
    stamp = cache.parent / FINGERPRINT
    now = fingerprint(source, watched)
    stale = cache.exists() and (not stamp.is_file() or stamp.read_text().strip() != now)
    if stale:
        print(f"build_book: {', '.join(watched)} or the pins changed since the cached "
              f"notebook runs: emptying {cache.relative_to(source)}", flush=True)
        shutil.rmtree(cache)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(now + "\n")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT)
    parser.add_argument("--watch", nargs="*", default=["minigrad", "bookkit"])
    parser.add_argument("--stored-outputs", action="store_true",
                        help="render stored outputs, execute nothing")
    args = parser.parse_args(argv)
    source = args.source.resolve()
    config_path = source / "_config.yml"
    config = yaml.safe_load(config_path.read_text())
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(source), *FLAGS]
    derived = None
    if args.stored_outputs:
        config.setdefault("execute", {})["execute_notebooks"] = "off"
        derived = source / ".stored-outputs-config.yml"  # beside _config.yml: same relative paths
        derived.write_text(yaml.safe_dump(config, sort_keys=False))
        command += ["--config", str(derived)]
    else:
        invalidate_stale_cache(source, config, args.watch)
    try:
        return subprocess.run(command, cwd=source).returncode
    finally:
        if derived is not None:
            derived.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
