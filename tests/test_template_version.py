"""A graft template change: old artifacts are refused with a hint, and `rebuild` re-prefills them.

An artifact's bytes are the graft text prefilled; an attempt continues that text with
`attempt_suffix`. One prefilled through another template would be continued as if it were this
one, so it is never grafted; `Library.rebuild` replaces it by its re-prefill.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flywheel.attempt import run_attempt
from flywheel.bundle import export_bundle, import_bundle
from flywheel.engine import Engine
from flywheel.errors import BundleRefusedError, TemplateMismatchError
from flywheel.kv import parse_artifact
from flywheel.library import Library
from flywheel.problemsets import Problem
from flywheel.prompts import RECAPS, TEMPLATE_VERSION, PlainFormat, attempt_suffix, graft_prefix

SIX = Problem(id="six", text="What is 2*3?", reference="6")


@pytest.fixture
def lib(tmp_path: Path) -> Iterator[Library]:
    with Library.open(tmp_path / "lib") as opened:
        yield opened


def old_deposit(lib: Library, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> str:
    """Deposit SIX as a build of an older template would have (its version recorded as `v0`)."""
    with monkeypatch.context() as m:
        m.setattr(PlainFormat, "tag", property(lambda self: "v0"))
        return lib.deposit(engine, SIX, "2*3=6", "6").artifact_sha256


def test_an_artifact_of_another_template_is_refused_with_the_rebuild_hint(
        lib: Library, tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    sha = old_deposit(lib, tiny_gemma, monkeypatch)
    with pytest.raises(TemplateMismatchError) as err:
        lib.load_graft(tiny_gemma, sha)
    assert "v0" in str(err.value) and TEMPLATE_VERSION in str(err.value)
    assert "flywheel library rebuild" in (err.value.hint or "")


def test_rebuild_re_prefills_an_old_template_artifact_and_drops_the_old_bytes(
        lib: Library, tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    old = old_deposit(lib, tiny_gemma, monkeypatch)
    assert lib.rebuild(tiny_gemma) == 1
    rows = lib.catalog.list_artifacts()
    assert len(rows) == 1 and rows[0].sha256 != old            # one artifact per solution and model, the new one
    assert not lib.store.contains(old)                         # the stale bytes are gone (no orphan left)
    g = lib.load_graft(tiny_gemma, rows[0].sha256)             # grafts under this build's template
    data = lib.store.get(rows[0].sha256)
    assert data is not None
    header = parse_artifact(data).header
    assert header.meta["template"] == TEMPLATE_VERSION
    assert header.token_ids == tiny_gemma.encode(graft_prefix(SIX.text, "2*3=6", "6"))
    assert g.token_count == len(header.token_ids)
    assert lib.route(tiny_gemma, SIX.text).artifact_sha == rows[0].sha256   # the index follows
    assert lib.rebuild(tiny_gemma) == 1 and lib.catalog.list_artifacts()[0].sha256 == rows[0].sha256  # current: kept


def test_a_recurrence_is_asked_where_the_graft_states_its_answer() -> None:
    """The exact-route prompt repeats the deposited problem and its answer cue, so the next tokens are the answer."""
    graft = graft_prefix("What is 2*3?", "2*3=6", "6")
    asked = attempt_suffix("What is 2*3?", "answer")
    cue = "Problem:" + asked                                    # the open slot, then the recurrence
    assert graft.startswith("Problem: What is 2*3?\nSolution: 2*3=6\nFinal answer: 6\n\n")  # the worked example
    assert graft.count(cue + " 6\n") == RECAPS >= 1           # the same question, answered at once, in the graft
    assert graft.endswith(cue + " 6\n\nProblem:")             # ... just before the open slot the recurrence fills
    assert attempt_suffix("What is 2*3?", "solve").endswith("\nSolution:")


def test_a_recurrence_runs_the_model_on_its_graft_and_a_wrong_copy_is_refused(
        lib: Library, tiny_gemma: Engine) -> None:
    """The answer comes from decoding on the restored graft (nothing short-circuits the model), and is verified."""
    from tests.test_attempt import scripted  # the tiny model, decoding a fixed continuation

    sha = lib.deposit(tiny_gemma, SIX, "2*3=6", "6").artifact_sha256
    for said, verified in ((" 6\n", True), (" 7\n", False)):
        r = run_attempt(scripted(tiny_gemma, said), lib, SIX, route="exact", artifact_sha=sha, budget=8)
        assert r.mode == "answer" and r.grafted_artifact_sha == sha and r.restored_tokens > 0
        assert r.decode_tokens == len(tiny_gemma.encode(said, bos=False))   # the model produced it
        answered = SIX.check_output(r.text, r.mode)
        assert answered.answer == said.strip() and answered.verdict.equivalent is verified


def test_a_bundle_of_another_template_is_refused_as_old_not_altered(
        lib: Library, tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    old_deposit(lib, tiny_gemma, monkeypatch)
    bundle = tmp_path / "old.tar"
    assert export_bundle(lib, bundle) == 1
    with Library.open(tmp_path / "other") as other:
        with pytest.raises(BundleRefusedError, match="graft template v0") as err:
            import_bundle(other, bundle, tiny_gemma)
        assert "flywheel library rebuild" in (err.value.hint or "")
        assert other.catalog.list_artifacts(include_unverified=True) == []
