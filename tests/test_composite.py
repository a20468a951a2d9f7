"""Near routes that graft several related verified solutions together (Library.composite)."""

from __future__ import annotations

from pathlib import Path

from flywheel.engine import Engine
from flywheel.kv import parse_artifact
from flywheel.library import Library
from flywheel.problemsets import load_problem_set
from flywheel.prompts import RECAPS, composite_prefix, graft_prefix


def test_composite_of_one_example_is_the_single_graft_text() -> None:
    assert composite_prefix([("P", "S", "A")]) == graft_prefix("P", "S", "A")
    two = composite_prefix([("P1", "S1", "1"), ("P2", "S2", "2")])
    assert two.count("Problem:") == 2 * (1 + RECAPS) + 1 and two.index("P1") < two.index("P2") and two.endswith("Problem:")


def test_near_route_with_members_grafts_one_composite_built_once(tiny_gemma: Engine, tmp_path: Path) -> None:
    train = load_problem_set("gen:ages?n=4&seed=1&split=train").problems
    probe = load_problem_set("gen:ages?n=1&seed=2&split=heldout").problems[0]
    with Library.open(tmp_path / "lib") as lib:
        shas = [lib.deposit(tiny_gemma, p, p.solution or "", p.reference or "").artifact_sha256 for p in train]
        one = lib.route(tiny_gemma, probe.text)
        assert one.kind == "near" and one.members == () and one.artifact_sha in shas
        three = lib.route(tiny_gemma, probe.text, members=3)
        assert three.kind == "near" and len(three.members) == 3 and set(three.members) <= set(shas)
        assert three.artifact_sha not in shas and three.problem_id == one.problem_id
        again = lib.route(tiny_gemma, probe.text, members=3)
        assert again.artifact_sha == three.artifact_sha                      # computed once, then reused
        assert lib.composites.contains(three.artifact_sha) and not lib.store.contains(three.artifact_sha)

        artifact = parse_artifact(lib.composites.get(three.artifact_sha) or b"", expected_sha256=three.artifact_sha)
        members = sorted(three.members)                                      # a fixed order: by artifact id
        texts = []
        for sha in members:
            art = lib.catalog.get_artifact(sha)
            sol = lib.catalog.get_solution(art.solution_id)
            prob = lib.catalog.get_problem(art.problem_id)
            assert sol is not None and prob is not None
            texts.append((prob.text, sol.text, sol.answer))
        assert tiny_gemma.decode_text(artifact.header.token_ids) == composite_prefix(texts)
        assert artifact.header.meta["members"] == ",".join(members)
        g = lib.load_graft(tiny_gemma, three.artifact_sha)                  # hash- and fingerprint-checked
        assert g.token_count == len(artifact.header.token_ids)
