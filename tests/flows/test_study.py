"""`flywheel study` end to end on the scripted tiny engine: self-deposits, recurrences, paired held-out."""

from __future__ import annotations

import json
from pathlib import Path

from flows import RunConfig, runtime
from flows.study import CURATOR, plot, run_study
from flywheel import config


def _write(path: Path, rows: list[dict[str, str]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_study_turns_on_the_models_own_solutions_and_pairs_the_heldout_arms(scripted: str, lib_dir: Path,
                                                                            tmp_path: Path) -> None:
    # The scripted model always answers 9: right for the "nine" problems, wrong for the others.
    train = _write(tmp_path / "train.jsonl", [
        {"id": "gen-nine-train-0", "problem": "Ann has 4 pens and buys 5. How many pens?", "reference": "9",
         "solution": "4 + 5 = 9."},
        {"id": "gen-nine-train-1", "problem": "Bo has 3 cups and buys 6. How many cups?", "reference": "9"},
        {"id": "gen-nine-train-2", "problem": "Cy has 2 hats and buys 7. How many hats?", "reference": "9"},
        {"id": "gen-ten-train-0", "problem": "Di has 8 pens and buys 2. How many pens?", "reference": "10"},
    ])
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-nine-heldout-0", "problem": "Ed has 1 cap and buys 8. How many caps?", "reference": "9"},
        {"id": "gen-ten-heldout-0", "problem": "Flo has 6 mugs and buys 4. How many mugs?", "reference": "10"},
    ])
    cfg = RunConfig(problems=train, model=scripted, library=str(lib_dir), budget=20, attempts=2)
    out = run_study(cfg, train=train, heldout=heldout, passes=1_000_000, curated=1)   # stops when nothing changes

    assert out["inputs"]["curated"] == ["gen-nine-train-0"]       # one curated solution per family that has one
    p1, p2 = out["passes"]                                         # pass 2 changed nothing: no pass 3
    assert p1["verified"] == 3 and p1["self_deposits"] == 2       # the curated one recurs; two are the model's own
    assert p2["verified"] == 3 and p2["self_deposits"] == 0       # recurrences now: nothing new to deposit
    assert p2["decode_tokens"] < p1["decode_tokens"]
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    by = sorted(s.deposited_by == CURATOR for a in lib.catalog.list_artifacts()
                if (s := lib.catalog.get_solution(a.solution_id)) is not None)
    assert by == [False, False, True]                              # the catalog says which is which
    assert [g["artifacts"] for g in out["library_growth"]] == [1, 3, 3]

    h = out["heldout"]
    assert h["n"] == 2 and h["without_graft"]["correct"] == h["with_graft"]["correct"] == 1
    assert h["only_with"] == h["only_without"] == 0 and h["mcnemar_p"] == 1.0 and h["power_3to1"] == 0.0
    assert set(out["families"]) == {"nine", "ten"} and out["families"]["nine"]["n"] == 1
    assert out["inputs"]["train_heldout_overlap"] == 0 and len(out["inputs"]["artifacts"]) == 3
    assert plot(out, tmp_path / "study.png").stat().st_size > 0
