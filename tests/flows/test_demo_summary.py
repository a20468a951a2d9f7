"""The demo's summary states pass 2's savings with the report's named figures: the same factor in both."""

from __future__ import annotations

from pathlib import Path

from flows import runtime
from flows.demo import describe, run_demo
from flywheel import config
from flywheel.engine import Engine
from flywheel.report import build_report


def test_the_demo_summary_and_the_report_give_one_factor(tiny_dirs: dict[str, Path], tiny_gemma: Engine,
                                                         tmp_path: Path) -> None:
    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    out = run_demo(tmp_path / "demo", model=model, budget=4, champ=2, per_family=1, attempts=2, slots=4)
    lines = describe(out)
    lib = runtime.library(out["library"], config.database_url(Path(out["library"])))
    report = build_report(lib.catalog, out["pass2"]["run_id"])
    headline = report.runs.iloc[0]["summary"].splitlines()
    start = lines.index("savings in pass 2, as `flywheel report --run` defines them:")
    assert lines[start + 1:start + 1 + len(headline)] == headline      # word for word, factors included
    h = report.headline(out["pass2"]["run_id"])
    # measured without a graft: the 2 CHAMP problems (pass 1) and the 10 fresh ones (the no-graft run)
    assert h["compared_problems"] == 2 + 10
    factor_line = next(line for line in lines if "decode factor" in line)
    assert f"{h['decode_tokens_with']:,} with" in factor_line
    assert not any("fewer" in line or "a factor of" in line for line in lines)   # no second definition
