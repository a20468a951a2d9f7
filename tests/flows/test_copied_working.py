"""A right answer reached through the grafted sibling's numbers, or through a false step, is verified but not
deposited as the model's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows import RunConfig, flywheel_run, runtime
from flywheel import config
from flywheel.engine import Engine
from flywheel.problemsets import Problem
from tests.flows.conftest import ScriptedEngine

SIBLING = Problem(id="gen-work-train-s1-0", text="Noah and Ben must pack 80 boxes. Noah has already packed 50 of "
                  "them. Noah packs 12 boxes per hour and Ben packs 3 per hour. Working together, how many more "
                  "hours do they need?", reference="2",
                  solution="80 - 50 = 30 boxes remain. Together they pack 12 + 3 = 15 per hour. They need 30 / 15 = 2.")
NEW = {"id": "gen-work-heldout-0", "reference": "2", "problem": "Ann and Cal must pack 90 crates. Ann has already "
       "packed 50 of them. Ann packs 8 crates per hour and Cal packs 12 per hour. Working together, how many more "
       "hours do they need?"}


class Copies(ScriptedEngine):
    script = "80 - 50 = 30 crates remain. Together they pack 12 + 3 = 15 per hour. They need 30 / 15 = 2.\nFinal answer: 2\n"


class Works(ScriptedEngine):
    script = "90 - 50 = 40 crates remain. Together they pack 8 + 12 = 20 per hour. They need 40 / 20 = 2.\nFinal answer: 2\n"


class Slips(ScriptedEngine):
    script = "90 - 50 = 40 crates remain. Together they pack 8 + 12 = 21 per hour. They need 40 / 20 = 2.\nFinal answer: 2\n"


@pytest.mark.parametrize(("engine", "deposited"), [(Copies, False), (Slips, False), (Works, True)])
def test_copied_working_is_not_deposited(engine: type[Engine], deposited: bool, tiny_gemma: Engine, lib_dir: Path,
                                         tmp_path: Path) -> None:
    name = f"{engine.__name__.lower()}-tiny"
    eng = engine(tiny_gemma.model, tiny_gemma.tokenizer, tiny_gemma.fingerprint, tiny_gemma.settings)
    runtime.register_engine(name, eng)
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    lib.deposit(eng, SIBLING, SIBLING.solution or "", "2", deposited_by="curator:test")
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(NEW) + "\n")
    out = flywheel_run(RunConfig(problems=str(problems), model=name, library=str(lib_dir), budget=160))   # byte tokens
    (r,) = out["results"]
    assert r["route"] == "near" and r["verified"]                      # the answer is right either way
    own = [a for a in lib.catalog.list_artifacts()
           if (s := lib.catalog.get_solution(a.solution_id)) is not None and s.deposited_by != "curator:test"]
    assert len(own) == (1 if deposited else 0)
