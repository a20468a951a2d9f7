"""A pass with the calculator: the result is fed, tool tokens recorded apart, the schedule names it, a resume
under the other setting is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows import RunConfig, flywheel_run, runtime
from flywheel import config
from flywheel.calculator import CALCULATOR
from flywheel.engine import Engine
from flywheel.errors import InputError
from flywheel.report import build_report


class SlipEngine(Engine):
    """A "model" that sets the sum up right and then slips on it (greedy script, indexed by tokens produced)."""

    script = "3 + 4 = 8\nFinal answer: 8\n"

    def pick_tokens(self, logits, temperatures, generators, produced):  # type: ignore[no-untyped-def,override]
        ids = self.encode(self.script, bos=False)
        return [ids[len(p)] if len(p) < len(ids) else next(iter(self.eos_ids)) for p in produced]


@pytest.fixture(scope="module")
def slip(tiny_gemma: Engine) -> str:
    runtime.register_engine("slip-tiny", SlipEngine(tiny_gemma.model, tiny_gemma.tokenizer, tiny_gemma.fingerprint,
                                                    tiny_gemma.settings))
    return "slip-tiny"


def _cfg(model: str, lib: Path, problems: Path, **kw: object) -> RunConfig:
    return RunConfig(problems=str(problems), model=model, library=str(lib), budget=40, no_graft=True, **kw)  # type: ignore[arg-type]


def test_the_calculator_feeds_the_exact_sum_and_its_tokens_are_counted_apart(slip: str, lib_dir: Path,
                                                                            tmp_path: Path) -> None:
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"id": "sum", "problem": "What is 3 + 4?", "reference": "7"}) + "\n")
    off = flywheel_run(_cfg(slip, lib_dir, problems))
    on = flywheel_run(_cfg(slip, lib_dir, problems, calculator=True))
    assert off["results"][0]["answer"] == "8" and not off["results"][0]["verified"]
    assert off["totals"]["tool_tokens"] == 0 and off["timing"]["schedule"]["calculator"] is None
    (r,) = on["results"]
    assert r["answer"] == "8"   # a scripted "model" does not read the result back; a real one carries on from it
    assert on["timing"]["schedule"]["calculator"] == CALCULATOR
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    (row,) = lib.catalog.attempts_for_run(on["run_id"])
    assert row.tool_tokens == on["totals"]["tool_tokens"] == 2          # " 7": a space and a digit
    assert row.text is not None and row.text.startswith("3 + 4 = 7\n")
    assert row.decode_tokens == len(SlipEngine.script) - 2   # the model's own tokens only (byte tokens)
    report = build_report(lib.catalog, on["run_id"])                   # the report shows them apart too
    mine = report.attempts[report.attempts["run_id"] == on["run_id"]]     # (the report adds the ungrafted baseline)
    assert mine["tool_tokens"].tolist() == [2] and report.runs.iloc[0]["tool_tokens"] == 2
    assert "the calculator forced 2 tokens" in report.runs.iloc[0]["summary"]
    assert "calculator forced" not in build_report(lib.catalog, off["run_id"]).runs.iloc[0]["summary"]
    with pytest.raises(InputError, match="calculator"):
        flywheel_run(_cfg(slip, lib_dir, problems, run_id=on["run_id"]))
