"""The flywheel end to end on the default model: a pass without knowledge, curated deposits, a pass from grafts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flows import runtime
from flows.run import RunConfig, flywheel_run, new_run_id
from flywheel import config
from flywheel.engine import EngineSettings
from flywheel.problemsets import Problem, generate, load_champ

#: The default demo set: a slice of CHAMP (recurring, with curated solutions) plus a generated family.
DEMO_CHAMP = 6
DEMO_LINEAR = 4
DEMO_BUDGET = 160


def demo_problems(champ: int = DEMO_CHAMP, linear: int = DEMO_LINEAR, seed: int = 1) -> list[Problem]:
    return load_champ()[:champ] + generate("linear", n=linear, seed=seed)


def write_set(problems: list[Problem], path: Path) -> Path:
    """Write problems as a JSONL problem-set file (id, problem, reference, solution)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for p in problems:
            f.write(json.dumps({"id": p.id, "problem": p.text, "reference": p.reference,
                                "solution": p.solution}) + "\n")
    return path


def run_demo(workdir: Path, *, model: str | None = None, budget: int = DEMO_BUDGET, champ: int = DEMO_CHAMP,
             linear: int = DEMO_LINEAR) -> dict[str, Any]:
    """Pass 1 (empty library) -> deposit curated CHAMP solutions -> pass 2; returns both summaries."""
    library = workdir / "library"
    problems = demo_problems(champ, linear)
    spec = str(write_set(problems, workdir / "demo-set.jsonl"))
    cfg = RunConfig(problems=spec, budget=budget, model=config.model_name(model), library=str(library))
    tag = new_run_id()
    pass1 = flywheel_run(cfg.model_copy(update={"run_id": f"{tag}-pass1"}))
    eng = runtime.engine(cfg.model, EngineSettings(dtype=cfg.dtype))
    lib = runtime.library(cfg.library, config.database_url(library))
    curated = [p for p in problems if p.source == "champ"]
    deposited = [lib.deposit(eng, p, p.solution or "", p.reference or "", deposited_by="curator:demo")
                 for p in curated]
    pass2 = flywheel_run(cfg.model_copy(update={"run_id": f"{tag}-pass2"}))
    return {"library": str(library), "problem_set": spec, "pass1": pass1, "pass2": pass2,
            "curated": [d.artifact_sha256 for d in deposited], "curated_ids": [p.id for p in curated]}


def describe(demo: dict[str, Any]) -> list[str]:
    """A few readable lines: what each pass cost and solved, and the recurring problems' ratio."""
    p1, p2 = demo["pass1"], demo["pass2"]
    ids = set(demo["curated_ids"])
    self_dep = sum(1 for r in p1["results"] if r["verified"])

    def line(name: str, s: dict[str, Any]) -> str:
        t = s["totals"]
        return (f"{name}: {t['verified']}/{t['problems']} verified, {t['decode_tokens']:,} decode + "
                f"{t['prefill_tokens']:,} prefill tokens ({t['restored_tokens']:,} restored from grafts), "
                f"{s['timing']['wall_seconds']:.0f} s")

    rec1 = [r for r in p1["results"] if r["problem_id"] in ids]
    rec2 = [r for r in p2["results"] if r["problem_id"] in ids]
    d1, d2 = sum(r["decode_tokens"] for r in rec1), sum(r["decode_tokens"] for r in rec2)
    ratio = f"{d1 / d2:,.1f}x fewer" if d2 else "n/a"
    return [
        line("pass 1 (no knowledge)", p1),
        f"deposited {len(demo['curated'])} curated CHAMP solutions (+{self_dep} verified by the model itself in pass 1)",
        line("pass 2 (from grafts) ", p2),
        f"recurring CHAMP problems: {sum(r['verified'] for r in rec1)}/{len(rec1)} -> "
        f"{sum(r['verified'] for r in rec2)}/{len(rec2)} verified; decode tokens {d1:,} -> {d2:,} ({ratio}); "
        f"{sum(r['route'] == 'exact' for r in rec2)} answered from exact grafts",
        f"library: {demo['library']}  runs: {p1['run_id']}, {p2['run_id']}",
    ]
