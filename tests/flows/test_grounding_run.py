"""A pass with number grounding: the schedule names its rules, the final answer is steered to the last result,
and a resume under the other setting is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows import RunConfig, flywheel_run, runtime
from flywheel.engine import Engine
from flywheel.errors import InputError
from flywheel.grounding import GROUNDING
from tests.test_grounding import _prefers

#: A "model" that computes 3 + 4 = 7 and then answers 2 when it may (else the best its row allows).
ENDS_ELSEWHERE = "3 + 4 = 7\nFinal answer: [27]\n"


@pytest.fixture(scope="module")
def ends_elsewhere(tiny_gemma: Engine) -> str:
    runtime.register_engine("ends-elsewhere-tiny", _prefers(tiny_gemma, ENDS_ELSEWHERE))
    return "ends-elsewhere-tiny"


def test_grounding_steers_the_final_answer_and_is_part_of_the_schedule(ends_elsewhere: str, lib_dir: Path,
                                                                      tmp_path: Path) -> None:
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"id": "sum", "problem": "What is 3 + 4?", "reference": "7"}) + "\n")

    def cfg(**kw: object) -> RunConfig:
        return RunConfig(problems=str(problems), model=ends_elsewhere, library=str(lib_dir), budget=40,  # type: ignore[arg-type]
                         no_graft=True, **kw)

    off, on = flywheel_run(cfg()), flywheel_run(cfg(grounding=True))
    assert off["results"][0]["answer"] == "2" and not off["results"][0]["verified"]
    assert off["timing"]["schedule"]["grounding"] is None
    assert on["results"][0]["answer"] == "7" and on["results"][0]["verified"]   # 2 is not the last result
    assert on["timing"]["schedule"]["grounding"] == GROUNDING
    with pytest.raises(InputError, match="grounding"):
        flywheel_run(cfg(run_id=on["run_id"]))
