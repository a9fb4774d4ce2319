"""The playbook's decision flow: the stored SVG is what the script draws, it is valid
XML with a title and description, and every chapter it names exists."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from bookpaths import ROOT, chapter_id, load_module, source_for

SCRIPT = ROOT / "scripts" / "draw_decision_flow.py"


def _module():
    return load_module(SCRIPT)


def test_stored_svg_is_what_the_script_draws():
    flow = _module()
    assert flow.OUTPUT.read_text() == flow.draw(), \
        "book/decision_flow.svg is stale: run python scripts/draw_decision_flow.py"
    assert flow.main(["--check"]) == 0


def test_svg_is_valid_and_accessible():
    root = ET.fromstring(_module().draw())
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and root.get("role") == "img"
    assert root.find(f"{ns}title").text and root.find(f"{ns}desc").text
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert "What dominates the peak?" in texts and "Activations" in texts


def test_every_chapter_the_flow_names_exists_and_the_playbook_shows_it():
    flow = _module()
    named = flow.chapters_named()
    assert {chapter_id(slug) for slug in ("torch_checkpoint", "logits_wall", "hugging_face",
                                          "beyond_one_device")} <= named
    for chapter in named:
        notebooks = list((ROOT / "notebooks").glob(f"{chapter}_*.ipynb"))
        assert notebooks, f"the decision flow names {chapter}, which has no notebook"
    assert source_for("book/playbook") is not None
    assert "decision_flow.svg" in (ROOT / "book" / "playbook.md").read_text()
