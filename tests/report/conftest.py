"""Report fixtures: a catalog built by real attempts on the tiny Gemma model, and a hand-made one.

The real catalog mirrors a flywheel's life: a `--no-graft` pass over two problems (budget-bound),
verified deposits of three problems, then a grafted pass over all three. Problem `p-new` was never
attempted without a graft, so it must show "no baseline".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from report_fixtures import (
    FP,
    OTHER_FP,
    RealCatalog,
    build_real_catalog,
    sha,
)

from flywheel import config
from flywheel.catalog import (
    ArtifactSpec,
    AttemptRecord,
    Catalog,
    ProblemSpec,
    SolutionSpec,
    open_catalog,
)
from flywheel.engine import Engine


@pytest.fixture(scope="session")
def real_catalog(tiny_gemma: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCatalog]:
    built = build_real_catalog(tiny_gemma, tmp_path_factory.mktemp("report-library"))
    yield built
    built.library.close()


# --- a hand-made catalog with round numbers, for exact arithmetic ---------------------------------

@pytest.fixture
def exact_catalog(tmp_path: Path) -> Iterator[Catalog]:
    """Problem a: two baseline attempts (1,000 and 3,000 tokens; 10 J and 30 J, one budget-exhausted)
    and a graft of 20 tokens (0.5 J). Problem b: only a baseline under another model, then a graft
    (so: no baseline for this model). Energy is `estimate` throughout."""
    cat = open_catalog(config.database_url(tmp_path / "lib"))
    for pid in ("a", "b"):
        cat.deposit(ProblemSpec(text=f"problem {pid}", id=pid, reference="1"),
                    SolutionSpec(text="s", answer="1", verdict_status="equivalent", deposited_by="test"),
                    ArtifactSpec(sha256=sha(pid), fingerprint_digest=FP, fingerprint_json="{}",
                                 model_name="tiny", token_count=500, size_bytes=500 * 1024,
                                 logits_sha256=sha("logits" + pid)))
    run = dict(problem_set="demo", problem_set_hash="d" * 64, attempts=2, model_name="tiny")
    cat.create_run(run_id="base", budget=2900, no_graft=True, model_fingerprint=FP, **run)  # type: ignore[arg-type]
    cat.create_run(run_id="other-model", budget=2900, no_graft=True, model_fingerprint=OTHER_FP, **run)  # type: ignore[arg-type]
    cat.create_run(run_id="graft", budget=50, model_fingerprint=FP, **run)  # type: ignore[arg-type]
    e = dict(energy_source="estimate")
    cat.record_attempt(AttemptRecord(run_id="base", problem_id="a", attempt_index=0, route="none", budget=2900,
                                     prefill_tokens=100, decode_tokens=900, energy_joules=10.0, **e))  # type: ignore[arg-type]
    cat.record_attempt(AttemptRecord(run_id="base", problem_id="a", attempt_index=1, route="none", budget=2900,
                                     prefill_tokens=100, decode_tokens=2900, budget_exhausted=True,
                                     energy_joules=30.0, **e))  # type: ignore[arg-type]
    cat.record_attempt(AttemptRecord(run_id="other-model", problem_id="b", attempt_index=0, route="none",
                                     budget=2900, prefill_tokens=100, decode_tokens=2900, energy_joules=30.0, **e))  # type: ignore[arg-type]
    for pid, verified in (("a", True), ("b", False)):
        cat.record_attempt(AttemptRecord(run_id="graft", problem_id=pid, attempt_index=0, route="exact", budget=50,
                                         grafted_artifact_sha=sha(pid), prefill_tokens=12, restored_tokens=500,
                                         decode_tokens=8, verified=verified, answer="1", energy_joules=0.5,
                                         logits_sha256=sha("first" + pid), **e))  # type: ignore[arg-type]
    yield cat
    cat.close()


#: (tokens, joules) of each problem's baseline attempts and of its one grafted attempt, chosen so the
#: joules per token vary as the `estimate` source's do: baseline 0.01-0.03 J/token, graft 0.025-0.05.
#: Computed tokens per pass without: a 1,000 + 1,000, c 2,000; with: 20 + 20: a computed factor of 100.
#: Energy: (40 + 40) J over (0.5 + 1.0) J = 53 pooled; range 100 x 0.01/0.05 = 20 to 100 x 0.03/0.025 = 120.
NOISY = {"a": ([(1000, 10.0), (1000, 30.0)], (20, 0.5)), "c": ([(2000, 40.0)], (20, 1.0))}


@pytest.fixture
def noisy_catalog(tmp_path: Path) -> Iterator[Callable[..., Catalog]]:
    """Builds a catalog from NOISY (or the problems named) with every reading from `source`."""
    opened: list[Catalog] = []

    def build(source: str, problems: tuple[str, ...] = tuple(NOISY), problem_set: str = "demo") -> Catalog:
        cat = open_catalog(config.database_url(tmp_path / f"lib-{source}-{len(opened)}"))
        opened.append(cat)
        for pid in problems:
            cat.deposit(ProblemSpec(text=f"problem {pid}", id=pid, reference="1"),
                        SolutionSpec(text="s", answer="1", verdict_status="equivalent", deposited_by="test"),
                        ArtifactSpec(sha256=sha(pid), fingerprint_digest=FP, fingerprint_json="{}", model_name="tiny",
                                     token_count=500, size_bytes=500 * 1024, logits_sha256=sha("logits" + pid)))
        run = dict(problem_set=problem_set, problem_set_hash="d" * 64, attempts=2, model_name="tiny",
                   model_fingerprint=FP)
        cat.create_run(run_id="base", budget=3000, no_graft=True, **run)  # type: ignore[arg-type]
        cat.create_run(run_id="graft", budget=50, **run)  # type: ignore[arg-type]
        for pid in problems:
            baselines, (graft_tokens, graft_joules) = NOISY[pid]
            for i, (tokens, joules) in enumerate(baselines):
                cat.record_attempt(AttemptRecord(run_id="base", problem_id=pid, attempt_index=i, route="none",
                                                 budget=3000, prefill_tokens=100, decode_tokens=tokens - 100,
                                                 energy_joules=joules, energy_source=source))
            cat.record_attempt(AttemptRecord(run_id="graft", problem_id=pid, attempt_index=0, route="exact", budget=50,
                                             grafted_artifact_sha=sha(pid), prefill_tokens=12, restored_tokens=500,
                                             decode_tokens=graft_tokens - 12, verified=True, answer="1",
                                             energy_joules=graft_joules, energy_source=source,
                                             logits_sha256=sha("first" + pid)))
        return cat

    yield build
    for cat in opened:
        cat.close()
