"""The intro's hero figure (book/hero_memory.svg, scripts/draw_hero.py): the replayed
step is right, and the stored SVG is what the script draws."""
from __future__ import annotations

import math

import pytest

from bookpaths import ROOT, load_module

hero = load_module(ROOT / "scripts" / "draw_hero.py")


@pytest.mark.parametrize("n", [4, 9, 16, 64])
def test_store_all_peaks_at_n_and_ends_empty(n):
    timeline = hero.store_all(n)
    assert len(timeline) == 2 * n and max(timeline) == n and timeline[-1] == 0


@pytest.mark.parametrize("n, k", [(16, 4), (16, 2), (64, 8), (12, 3), (8, 8)])
def test_checkpointed_peak_is_segments_plus_segment_length_minus_one(n, k):
    timeline, recomputed = hero.checkpointed(n, k)
    size = n // k
    assert max(timeline) == k + size - 1           # k inputs kept + a re-run segment
    assert recomputed == k * (size - 1)            # every layer but the segment's first
    assert len(timeline) == 2 * n + recomputed and timeline[-1] == 0
    assert min(timeline) >= 0


def test_sqrt_segments_come_close_to_two_sqrt_n():
    """The caption's numbers and the intro's formula, 2 sqrt(n) a, agree."""
    timeline, _ = hero.checkpointed(hero.N_LAYERS, hero.SEGMENTS)
    assert hero.SEGMENTS == math.isqrt(hero.N_LAYERS)
    assert max(timeline) == 2 * hero.SEGMENTS - 1 == 7
    text = (ROOT / "book" / "intro.md").read_text()
    assert "peaking at 7 *a* for 12" in text and "peaks at 16 *a*" in text


def test_unequal_segments_are_refused():
    with pytest.raises(ValueError, match="do not split"):
        hero.checkpointed(10, 4)


def test_stored_svg_is_what_the_script_draws():
    assert hero.OUTPUT.read_text() == hero.draw(), (
        "book/hero_memory.svg is stale: run python scripts/draw_hero.py")
