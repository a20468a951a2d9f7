"""Row builders shared by the catalog tests."""

from __future__ import annotations

import hashlib

from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec

FP = "f" * 64
OTHER_FP = "e" * 64


def problem(i: int = 0, **kw: object) -> ProblemSpec:
    return ProblemSpec(text=f"What is {i} + {i}?", id=f"demo-{i}", reference=str(2 * i), source="demo", **kw)  # type: ignore[arg-type]


def solution(i: int = 0, *, unverified: bool = False, verdict: str = "equivalent") -> SolutionSpec:
    return SolutionSpec(text=f"{i} + {i} = {2 * i}.", answer=str(2 * i), verdict_status=verdict,
                        deposited_by="curator:test", unverified=unverified)


def artifact(tag: str, fp: str = FP) -> ArtifactSpec:
    return ArtifactSpec(sha256=hashlib.sha256(tag.encode()).hexdigest(), fingerprint_digest=fp,
                        fingerprint_json='{"model": "tiny"}', model_name="tiny", token_count=42,
                        size_bytes=42 * 36864, logits_sha256="0" * 64)
