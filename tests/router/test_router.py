"""The router with the real packaged MiniLM embedder on a temporary library."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np
import pytest
from sqlalchemy.exc import OperationalError

from flywheel import config
from flywheel.catalog import ArtifactSpec, Catalog, ProblemSpec, SolutionSpec, normalize_text, open_catalog
from flywheel.embed import EMBED_DIM, embed
from flywheel.router import RouteDecision, Router, RouterConfig
from tests.helpers import index_size

FP = hashlib.sha256(b"engine fingerprint: tiny model, fp32, cpu").hexdigest()
OTHER_FP = hashlib.sha256(b"another model").hexdigest()

LINEAR = "Solve for x: 3x + 5 = 20."
LINEAR_FRESH = "Solve for x: 7x - 2 = 12."
UNRELATED = "What is the capital of France?"


class CountingEmbedder:
    """The real embedder, counting how many texts it was asked to embed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += len(texts)
        return embed(texts)


def deposit(cat: Catalog, pid: str, text: str, fp: str = FP, unverified: bool = False) -> str:
    sha = hashlib.sha256(f"{pid}|{fp}".encode()).hexdigest()
    cat.deposit(
        ProblemSpec(text=text, id=pid, reference="5"),
        SolutionSpec(text="3x = 15, so x = 5.", answer="5", deposited_by="curator:test",
                     verdict_status="unchecked" if unverified else "equivalent", unverified=unverified),
        ArtifactSpec(sha256=sha, fingerprint_digest=fp, fingerprint_json="{}", model_name="tiny",
                     token_count=30, size_bytes=30 * 36864))
    return sha


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return tmp_path / "library"


@pytest.fixture
def catalog(library: Path) -> Catalog:
    return open_catalog(config.database_url(library))


def test_embeddings_are_unit_float32_and_deterministic() -> None:
    v = embed([LINEAR, LINEAR, UNRELATED])
    assert v.shape == (3, EMBED_DIM) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], v[1])
    assert float(v[0] @ v[2]) < 0.3


def test_empty_library_routes_to_none(library: Path, catalog: Catalog) -> None:
    assert Router(library, catalog).route(LINEAR, FP) == RouteDecision("none", None, 0.0, None)


def test_recurring_problem_routes_exact_despite_spacing_but_never_across_meaning(library: Path,
                                                                                  catalog: Catalog) -> None:
    sha = deposit(catalog, "lin-1", LINEAR)
    d = Router(library, catalog).route("  " + LINEAR.replace(" ", "  \n") + " ", FP)
    assert d == RouteDecision("exact", sha, 1.0, "lin-1")
    # Case, full-width and superscript characters are part of the problem: never an exact recurrence.
    for other in (LINEAR.upper(), LINEAR.replace("3x", "\uff13x"), LINEAR.replace("3x", "\u00b3x")):
        assert Router(library, catalog).route(other, FP).kind != "exact"
    assert normalize_text("Ｓｏｌｖｅ  X\n") == "Ｓｏｌｖｅ X"
    assert normalize_text("What is 2\u00b3 + 1?") != normalize_text("What is 23 + 1?")


def test_related_problem_routes_near_and_unrelated_to_none(library: Path, catalog: Catalog) -> None:
    sha = deposit(catalog, "lin-1", LINEAR)
    deposit(catalog, "geo-1", "What is the area of a circle of radius 2?")
    router = Router(library, catalog)
    near = router.route(LINEAR_FRESH, FP)
    assert near.kind == "near" and near.artifact_sha == sha and near.problem_id == "lin-1"
    assert RouterConfig().near_threshold <= near.score < 1.0
    none = router.route(UNRELATED, FP)
    assert none.kind == "none" and none.artifact_sha is None and none.score < RouterConfig().near_threshold


def test_threshold_is_configuration(library: Path, catalog: Catalog) -> None:
    deposit(catalog, "lin-1", LINEAR)
    assert Router(library, catalog, RouterConfig(near_threshold=0.99)).route(LINEAR_FRESH, FP).kind == "none"
    assert Router(library, catalog, RouterConfig(near_threshold=0.3)).route(LINEAR_FRESH, FP).kind == "near"


def test_only_the_running_engines_fingerprint_is_a_candidate(library: Path, catalog: Catalog) -> None:
    deposit(catalog, "lin-1", LINEAR, fp=OTHER_FP)
    router = Router(library, catalog)
    assert router.route(LINEAR, FP).kind == "none"
    assert router.route(LINEAR_FRESH, FP).kind == "none"
    assert router.route(LINEAR, OTHER_FP).kind == "exact"


def test_unverified_deposits_are_never_routed_unless_asked(library: Path, catalog: Catalog) -> None:
    sha = deposit(catalog, "lin-1", LINEAR, unverified=True)
    assert Router(library, catalog).route(LINEAR, FP).kind == "none"
    assert Router(library, catalog).route(LINEAR_FRESH, FP).kind == "none"
    asked = Router(library / "asked", catalog, RouterConfig(include_unverified=True))
    assert asked.route(LINEAR, FP) == RouteDecision("exact", sha, 1.0, "lin-1")
    assert asked.route(LINEAR_FRESH, FP).kind == "near"


def test_index_persists_and_a_new_router_does_not_re_embed_the_library(library: Path, catalog: Catalog) -> None:
    for i in range(5):
        deposit(catalog, f"p{i}", f"Compute {i} factorial plus {i}.")
    first = CountingEmbedder()
    assert Router(library, catalog, embedder=first).rebuild(catalog, FP) == 5
    assert first.calls == 5
    files = sorted(p.name for p in (library / "index" / FP).iterdir() if not p.name.startswith("."))
    assert files[0] == "meta.json" and files[1].startswith("vectors-") and len(files) == 2

    second = CountingEmbedder()
    router = Router(library, catalog, embedder=second)
    assert index_size(router, FP) == 5 and second.calls == 0
    assert router.route("Compute 3 factorial plus 3!", FP).kind in ("near", "exact")
    assert second.calls == 1  # the query only


def test_corrupt_index_is_rebuilt_from_the_catalog(library: Path, catalog: Catalog) -> None:
    sha = deposit(catalog, "lin-1", LINEAR)
    Router(library, catalog).rebuild(catalog, FP)
    vec_file = next((library / "index" / FP).glob("vectors-*.faiss"))
    vec_file.write_bytes(b"garbage")
    d = Router(library, catalog).route(LINEAR_FRESH, FP)
    assert d.kind == "near" and d.artifact_sha == sha


def test_sync_after_deposit_is_seen_by_another_router(library: Path, catalog: Catalog) -> None:
    reader = Router(library, catalog)
    assert reader.route(LINEAR_FRESH, FP).kind == "none"
    writer = Router(library, catalog)
    sha = deposit(catalog, "lin-1", LINEAR)
    assert writer.sync(FP) == 1
    assert writer.sync(FP) == 0  # idempotent
    assert reader.route(LINEAR_FRESH, FP).artifact_sha == sha  # reloaded from disk
    assert index_size(reader, FP) == 1


def test_sync_indexes_only_what_is_missing(library: Path, catalog: Catalog) -> None:
    deposit(catalog, "lin-1", LINEAR)
    emb = CountingEmbedder()
    router = Router(library, catalog, embedder=emb)
    assert index_size(router, FP) == 1
    deposit(catalog, "geo-1", "What is the area of a circle of radius 2?")
    calls = emb.calls
    assert router.sync(FP) == 1 and emb.calls == calls + 1
    assert router.sync(FP) == 0


def test_artifact_removed_from_catalog_is_no_longer_routed(library: Path, catalog: Catalog) -> None:
    sha = deposit(catalog, "lin-1", LINEAR)
    router = Router(library, catalog)
    assert router.route(LINEAR_FRESH, FP).kind == "near"
    catalog.remove_artifact(sha)
    assert router.route(LINEAR_FRESH, FP).kind == "none"
    assert router.route(LINEAR, FP).kind == "none"


def test_a_catalog_that_fails_mid_route_is_an_error_not_no_route(library: Path, catalog: Catalog,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    deposit(catalog, "lin-1", LINEAR)
    router = Router(library, catalog)
    assert router.route(LINEAR_FRESH, FP).kind == "near"    # the index is built and held in memory

    def dropped(sha_or_prefix: str) -> NoReturn:
        raise OperationalError("SELECT artifacts", {}, sqlite3.OperationalError("no such table: artifacts"))

    monkeypatch.setattr(catalog, "get_artifact", dropped)    # the database goes away between two reads
    with pytest.raises(OperationalError, match="no such table"):
        router.route(LINEAR_FRESH, FP)


def test_hnsw_index_kind_routes_the_same(library: Path, catalog: Catalog) -> None:
    sha = deposit(catalog, "lin-1", LINEAR)
    deposit(catalog, "geo-1", "What is the area of a circle of radius 2?")
    d = Router(library, catalog, RouterConfig(index_kind="hnsw")).route(LINEAR_FRESH, FP)
    assert d.kind == "near" and d.artifact_sha == sha


def test_fingerprint_must_be_a_digest(library: Path, catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        Router(library, catalog).route(LINEAR, "../../etc")
