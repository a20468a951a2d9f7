"""Hostile bundles: imported knowledge is re-checked, imports are all or nothing, sizes bounded.

Each test builds a real bundle by depositing on the tiny Gemma-style model and exporting, then
alters it the way an attacker or a careless user would, and imports it into a real library.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sqlite3
import tarfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flywheel.bundle import export_bundle, import_bundle, max_artifact_bytes
from flywheel.engine import Engine
from flywheel.errors import ArtifactError, BundleRefusedError, DepositRefusedError
from flywheel.kv.checked import checked_artifact
from flywheel.library import Library
from flywheel.library.deposits import MAX_ID_CHARS, MAX_TEXT_CHARS
from flywheel.problemsets import Problem
from tests.helpers import index_size
from verifiers import VerifierConfig

LINEAR = Problem(id="lin-1", text="Solve for x: 2x+3=7", reference="2")
FRANCE = Problem(id="geo-1", text="What is the capital of France?", reference="Paris")
SKY = Problem(id="sky-1", text="Name the colour of the sky.")


@pytest.fixture
def source(tmp_path: Path, tiny_gemma: Engine) -> Iterator[Library]:
    """A library holding two verified deposits and one unverified one."""
    with Library.open(tmp_path / "source") as lib:
        lib.deposit(tiny_gemma, LINEAR, "2x = 4, so x = 2.", "2")
        lib.deposit(tiny_gemma, FRANCE, "France's capital is Paris.", "Paris")
        lib.deposit(tiny_gemma, SKY, "It is blue.", "blue", unverified=True)
        yield lib


@pytest.fixture
def bundle(source: Library, tmp_path: Path) -> Path:
    path = tmp_path / "bundle.tar"
    export_bundle(source, path)
    return path


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Library]:
    with Library.open(tmp_path / "target") as lib:
        yield lib


def members(path: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(path) as tar:
        return [(m, tar.extractfile(m).read()) for m in tar.getmembers()]  # type: ignore[union-attr]


def write_tar(path: Path, items: list[tuple[str, bytes]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def altered(bundle: Path, out: Path, edit: Callable[[dict[str, Any]], Any]) -> Path:
    """`bundle` with its manifest passed through `edit` (which changes it in place)."""
    items = [(m.name, data) for m, data in members(bundle)]
    manifest = json.loads(dict(items)["manifest.json"])
    edit(manifest)
    return write_tar(out, [(n, d) if n != "manifest.json" else (n, json.dumps(manifest).encode()) for n, d in items])


def without_last(bundle: Path, out: Path) -> Path:
    """`bundle` less its last entry (manifest line and artifact member both)."""
    items = [(m.name, data) for m, data in members(bundle)]
    manifest = json.loads(dict(items)["manifest.json"])
    gone = manifest["artifacts"].pop()["sha256"]
    return write_tar(out, [(n, d if n != "manifest.json" else json.dumps(manifest).encode())
                           for n, d in items if gone not in n])


def entry_for(manifest: dict[str, Any], problem_id: str) -> dict[str, Any]:
    return next(e for e in manifest["artifacts"] if e["problem"]["id"] == problem_id)


def snapshot(lib: Library) -> tuple[Any, ...]:
    """Everything an import could change: catalog rows, artifact files, index files, staging folders."""
    db = sqlite3.connect(lib.root / "catalog.db")
    rows = tuple(tuple(sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr))
                 for t in ("problems", "solutions", "artifacts"))
    db.close()
    files = tuple(sorted(str(p.relative_to(lib.root)) for p in lib.root.rglob("*")
                         if p.is_file() and "catalog.db" not in p.name and not p.name.endswith(".lock")))
    return rows, files


def refused_whole(target: Library, engine: Engine, path: Path, match: str, **kw: Any) -> str:
    before = snapshot(target)
    with pytest.raises(BundleRefusedError, match=match) as err:
        import_bundle(target, path, engine, **kw)
    assert snapshot(target) == before
    assert "nothing was imported" in err.value.message and "\n" not in err.value.message
    return err.value.message


# --- imported knowledge is re-checked ------------------------------------------------------------


def test_import_refuses_artifact_filed_under_other_problem(bundle: Path, target: Library, tiny_gemma: Engine,
                                                            tmp_path: Path) -> None:
    def poison(m: dict[str, Any]) -> None:  # the linear artifact, filed under France with "Berlin"
        e = entry_for(m, "lin-1")
        e["problem"].update(id="geo-9", text="What is the capital of France?", reference="Berlin")
        e["solution"].update(text="It is Berlin.", answer="Berlin", verdict_status="equivalent", unverified=False)

    msg = refused_whole(target, tiny_gemma, altered(bundle, tmp_path / "evil.tar", poison), "graft text")
    assert "geo-9" in msg
    assert target.router.route("What is the capital of France?", tiny_gemma.fingerprint.digest).kind == "none"


def test_import_refuses_answer_contradicted_by_its_reference_even_when_unverified_allowed(
        bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    # The tokens hold problem, solution and answer but not the reference: change only that.
    def lie(m: dict[str, Any]) -> None:
        entry_for(m, "geo-1")["problem"]["reference"] = "Berlin"

    path = altered(bundle, tmp_path / "lie.tar", lie)
    refused_whole(target, tiny_gemma, path, "contradicted", allow_unverified=True)


@pytest.mark.parametrize(("field", "value"), [
    ("answer", "2\x00"),                                  # NUL: PostgreSQL cannot store it
    ("answer", "2\nFinal answer: 3"),                     # a second answer line inside the graft template
    ("answer", "9" * (MAX_TEXT_CHARS + 1)),
    ("id", "p" * (MAX_ID_CHARS + 1)),
    ("text", "   "),
])
def test_an_entry_is_refused_by_the_deposit_rules_in_their_words(
        field: str, value: str, bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    def edit(m: dict[str, Any]) -> None:
        e = entry_for(m, "lin-1")
        (e["solution"] if field == "answer" else e["problem"])[field] = value

    path = altered(bundle, tmp_path / "bad.tar", edit)
    with pytest.raises(DepositRefusedError) as rule:   # what `Library.deposit` says of the same fields
        target.deposit(tiny_gemma, Problem(id=value if field == "id" else "lin-1",
                                           text=value if field == "text" else LINEAR.text, reference="2"),
                       "2x = 4, so x = 2.", value if field == "answer" else "2")
    msg = refused_whole(target, tiny_gemma, path, re.escape(rule.value.message))
    assert "lin-1" in msg or field == "id"


def test_import_refuses_unverifiable_answer_unless_asked_then_marks_it_unrouted(
        bundle: Path, target: Library, tiny_gemma: Engine) -> None:
    refused_whole(target, tiny_gemma, bundle, "could not be verified")
    report = import_bundle(target, bundle, tiny_gemma, allow_unverified=True)
    assert (report.imported, report.unverified) == (3, 1)
    sky = [a for a in target.catalog.list_artifacts(include_unverified=True) if a.problem_id == "sky-1"]
    assert len(sky) == 1 and sky[0].sha256 not in {a.sha256 for a in target.catalog.list_artifacts()}
    assert target.router.route(SKY.text, tiny_gemma.fingerprint.digest).kind == "none"


def test_import_ignores_a_manifest_claim_of_verified(bundle: Path, target: Library, tiny_gemma: Engine,
                                                     tmp_path: Path) -> None:
    def claim(m: dict[str, Any]) -> None:
        entry_for(m, "sky-1")["solution"].update(unverified=False, verdict_status="equivalent")

    refused_whole(target, tiny_gemma, altered(bundle, tmp_path / "claim.tar", claim), "could not be verified")


def test_import_applies_deposit_text_limits(bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    def huge(m: dict[str, Any]) -> None:
        entry_for(m, "geo-1")["problem"]["reference"] = "P" * 300_000

    refused_whole(target, tiny_gemma, altered(bundle, tmp_path / "huge.tar", huge), "limit")


# --- one judgement, one checked read --------------------------------------------------------------


THIRD = Problem(id="third", text="What is 1/3 to three places?", reference="1/3")
CLOSE = VerifierConfig(tolerance=1e-2)   # 0.333 is 1/3 within 1%; exact (the default) it is not


@pytest.mark.parametrize("verifier", [None, CLOSE], ids=["default", "tolerance"])
def test_deposit_and_import_judge_an_entry_alike_under_the_verifier_settings_given(
        verifier: VerifierConfig | None, tmp_path: Path, tiny_gemma: Engine) -> None:
    bundle = tmp_path / "third.tar"
    with Library.open(tmp_path / "source") as source:
        source.deposit(tiny_gemma, THIRD, "1/3 = 0.333", "0.333", verifier=CLOSE)
        export_bundle(source, bundle)
    with Library.open(tmp_path / "deposited") as deposited, Library.open(tmp_path / "imported") as imported:
        try:
            deposited.deposit(tiny_gemma, THIRD, "1/3 = 0.333", "0.333", verifier=verifier)
        except DepositRefusedError as err:
            msg = refused_whole(imported, tiny_gemma, bundle, re.escape(err.message), verifier=verifier)
            assert verifier is None and "contradicted" in msg       # the same words, under the same settings
        else:
            assert verifier is CLOSE
            assert import_bundle(imported, bundle, tiny_gemma, verifier=verifier).imported == 1
            assert [a.sha256 for a in imported.catalog.list_artifacts()] == \
                   [a.sha256 for a in deposited.catalog.list_artifacts()]      # both verified and routable


def flip_artifact_byte(bundle: Path, out: Path) -> tuple[Path, str, bytes]:
    """`bundle` with one byte of its first artifact's tensor data flipped (name and size kept)."""
    items = [(m.name, data) for m, data in members(bundle)]
    name, data = next((n, d) for n, d in items if n.startswith("artifacts/"))
    bad = data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]
    sha = name.removeprefix("artifacts/").removesuffix(".kv")
    return write_tar(out, [(n, bad if n == name else d) for n, d in items]), sha, bad


def test_an_artifact_altered_in_a_bundle_is_refused_by_the_one_checked_read(
        bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    path, sha, bad = flip_artifact_byte(bundle, tmp_path / "flipped.tar")
    with pytest.raises(ArtifactError) as direct:               # what the checked read says of these bytes
        checked_artifact(bad, sha)
    msg = refused_whole(target, tiny_gemma, path, "integrity", allow_unverified=True)
    assert direct.value.message in msg and sha[:12] in msg
    import_bundle(target, bundle, tiny_gemma, allow_unverified=True)   # the same bytes in a store: the same check
    target.store.path_for(sha).write_bytes(bad)
    with pytest.raises(ArtifactError) as graft_read:
        target.load_graft(tiny_gemma, sha)
    assert graft_read.value.message == direct.value.message


def test_import_hashes_each_staged_artifact_once(bundle: Path, target: Library, tiny_gemma: Engine,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from flywheel.kv import artifact

    calls = []
    real = artifact._content_digest
    monkeypatch.setattr(artifact, "_content_digest", lambda *a: calls.append(1) or real(*a))
    assert import_bundle(target, bundle, tiny_gemma, allow_unverified=True).imported == 3
    assert len(calls) == 2 * 3    # per artifact: its checked read, and the store naming the bytes it writes


# --- all or nothing -------------------------------------------------------------------------------


BAD_ENTRIES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "missing key": lambda m: m["artifacts"][-1]["solution"].pop("answer"),
    "wrong type": lambda m: m["artifacts"][-1]["problem"].update(text=12),
    "unverified not a bool": lambda m: m["artifacts"][-1]["solution"].update(unverified="yes"),
    "entry not an object": lambda m: m["artifacts"].append("hello"),
    "bad sha": lambda m: m["artifacts"][-1].update(sha256="../../etc/passwd"),
    "listed twice": lambda m: m["artifacts"].append(m["artifacts"][0]),
    "id clash within the bundle": lambda m: m["artifacts"][-1]["problem"].update(id=m["artifacts"][0]["problem"]["id"]),
    "artifacts not a list": lambda m: m.update(artifacts={"a": 1}),
    "another format": lambda m: m.update(format="zip"),
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_import_with_one_bad_entry_leaves_the_library_exactly_as_it_was(
        case: str, bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    import_bundle(target, without_last(bundle, tmp_path / "first.tar"), tiny_gemma, allow_unverified=True)  # the library is not empty: a partial import would show
    path = altered(bundle, tmp_path / f"{case}.tar", BAD_ENTRIES[case])
    refused_whole(target, tiny_gemma, path, "bundle|manifest", allow_unverified=True)


def test_import_refuses_an_id_the_library_holds_with_another_text(bundle: Path, target: Library,
                                                                 tiny_gemma: Engine) -> None:
    target.deposit(tiny_gemma, Problem(id="geo-1", text="What is 2+2?", reference="4"), "2+2=4", "4")
    refused_whole(target, tiny_gemma, bundle, "different text", allow_unverified=True)


@pytest.mark.parametrize("manifest", [b"\xff\xfe not utf-8", b"{not json", b"[]", b"{" * 100_000 + b"}" * 100_000])
def test_import_refuses_a_malformed_manifest_in_one_line(manifest: bytes, bundle: Path, target: Library,
                                                         tiny_gemma: Engine, tmp_path: Path) -> None:
    items = [(m.name, d if m.name != "manifest.json" else manifest) for m, d in members(bundle)]
    refused_whole(target, tiny_gemma, write_tar(tmp_path / "m.tar", items), "manifest")


def test_import_refuses_duplicate_member_names(bundle: Path, target: Library, tiny_gemma: Engine,
                                               tmp_path: Path) -> None:
    items = [(m.name, d) for m, d in members(bundle)]
    kv = next(i for i in items if i[0].endswith(".kv"))
    refused_whole(target, tiny_gemma, write_tar(tmp_path / "two-kv.tar", [kv, *items]), "twice")
    manifest = next(i for i in items if i[0] == "manifest.json")
    refused_whole(target, tiny_gemma, write_tar(tmp_path / "two-manifests.tar", [*items, manifest]), "twice")


def test_import_refuses_unlisted_artifact_member(source: Library, bundle: Path, target: Library,
                                                 tiny_gemma: Engine, tmp_path: Path) -> None:
    path = altered(bundle, tmp_path / "unlisted.tar", lambda m: m["artifacts"].pop(0))
    refused_whole(target, tiny_gemma, path, "does not list", allow_unverified=True)


# --- bounded resources ---------------------------------------------------------------------------


def test_gzip_bomb_member_is_refused_from_its_header_at_small_memory(bundle: Path, target: Library,
                                                                      tiny_gemma: Engine, tmp_path: Path) -> None:
    limit = max_artifact_bytes(tiny_gemma)
    bomb = tmp_path / "bomb.tar.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        info = tarfile.TarInfo("artifacts/" + "a" * 64 + ".kv")
        info.size = limit + 1
        tar.addfile(info, io.BytesIO(bytes(limit + 1)))
    assert bomb.stat().st_size < limit // 100
    tracemalloc.start()
    t0 = time.perf_counter()
    refused_whole(target, tiny_gemma, bomb, "more than an artifact of this model")
    elapsed, (_, peak) = time.perf_counter() - t0, tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 1024 * 1024 and elapsed < 30


def test_zero_filled_member_within_the_bound_is_refused_from_its_artifact_header(
        bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    size = max_artifact_bytes(tiny_gemma) - 1
    items = [(m.name, d) for m, d in members(bundle)]
    kv_name = next(n for n, _ in items if n.endswith(".kv"))
    bomb = tmp_path / "zeros.tar.gz"
    write_tar(bomb, [(n, d if n != kv_name else bytes(size)) for n, d in items], mode="w:gz")
    tracemalloc.start()
    refused_whole(target, tiny_gemma, bomb, "header length", allow_unverified=True)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 8 * 1024 * 1024


def test_sparse_member_is_refused(bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    items = [(m.name, d) for m, d in members(bundle)]
    path = tmp_path / "sparse.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if name.endswith(".kv"):
                info.type = tarfile.GNUTYPE_SPARSE
            tar.addfile(info, io.BytesIO(data))
    refused_whole(target, tiny_gemma, path, "regular file")


def test_manifest_larger_than_its_artifacts_can_need_is_refused(bundle: Path, target: Library,
                                                                tiny_gemma: Engine, tmp_path: Path) -> None:
    manifest = json.dumps({"format": "kv-flywheel-bundle", "version": 1, "artifacts": [],
                           "pad": " " * (1024 * 1024)}).encode()
    refused_whole(target, tiny_gemma, write_tar(tmp_path / "fat.tar", [("manifest.json", manifest)]),
                  "more than 0 artifacts can need")


# --- what still works ----------------------------------------------------------------------------


def test_clean_bundle_imports_whole_and_routes_its_verified_entries(bundle: Path, target: Library,
                                                                     tiny_gemma: Engine) -> None:
    report = import_bundle(target, bundle, tiny_gemma, allow_unverified=True)
    assert (report.imported, report.present, report.skipped) == (3, 0, [])
    fp = tiny_gemma.fingerprint.digest
    assert target.router.check(fp).ok and index_size(target.router, fp) == 2
    assert target.router.route(LINEAR.text, fp).kind == "exact"
    again = import_bundle(target, bundle, tiny_gemma, allow_unverified=True)
    assert (again.imported, again.present) == (0, 3)


def test_same_problem_text_under_a_new_id_is_filed_under_the_existing_problem(
        bundle: Path, target: Library, tiny_gemma: Engine) -> None:
    target.deposit(tiny_gemma, Problem(id="mine-7", text="  Solve for x:\n 2x+3=7 ", reference="2"),
                   "Subtract 3, divide by 2: x = 2.", "2")
    import_bundle(target, bundle, tiny_gemma, allow_unverified=True)
    ids = {a.problem_id for a in target.catalog.list_artifacts(include_unverified=True)}
    assert "lin-1" not in ids and "mine-7" in ids
    assert target.catalog.get_problem("lin-1") is None


# --- deposits mean what they say -----------------------------------------------------------------


def test_unverified_deposit_never_stores_an_answer_its_reference_contradicts(target: Library,
                                                                            tiny_gemma: Engine) -> None:
    with pytest.raises(DepositRefusedError, match="not_equivalent"):
        target.deposit(tiny_gemma, FRANCE, "It is Berlin.", "Berlin", unverified=True)
    assert target.catalog.list_artifacts(include_unverified=True) == []
    assert not list(target.store.iter_ids())


def test_deposit_of_the_same_text_under_a_new_id_is_recognised(target: Library, tiny_gemma: Engine) -> None:
    first = target.deposit(tiny_gemma, LINEAR, "2x = 4, so x = 2.", "2")
    again = target.deposit(tiny_gemma, Problem(id="lin-copy", text=LINEAR.text.replace(" ", "\t "), reference="2"),
                           "2x = 4, so x = 2.", "2")
    assert again.problem_id == first.problem_id and again.artifact_sha256 == first.artifact_sha256
    assert again.created is False and target.catalog.get_problem("lin-copy") is None


def test_deposit_refuses_text_beyond_the_limits(target: Library, tiny_gemma: Engine) -> None:
    with pytest.raises(DepositRefusedError, match="limit"):
        target.deposit(tiny_gemma, Problem(id="big", text="x" * 250_000, reference="1"), "1", "1")
    with pytest.raises(DepositRefusedError, match="limit"):
        target.deposit(tiny_gemma, Problem(id="i" * 300, text="What is 1+0?", reference="1"), "1", "1")


# --- what is no bundle at all is refused at once (issue 23, item 9) ------------------------------


def _fifo(tmp_path: Path) -> Path:
    import os

    path = tmp_path / "fifo.tar"
    os.mkfifo(path)   # no writer: opening it for reading would block forever
    return path


def _sparse_zeros(tmp_path: Path) -> Path:
    path = tmp_path / "zeros.tar.xz"
    with open(path, "wb") as fh:
        fh.truncate(50 * 2**30)   # 50 GiB of zeros, no disk used
    return path


@pytest.mark.parametrize(("make", "why"), [
    (lambda tmp: Path("/dev/zero"), "not a regular file"),
    (_fifo, "not a regular file"),
    (_sparse_zeros, "starts like no tar"),
    (lambda tmp: tmp, "not a regular file"),
])
def test_a_device_fifo_or_file_of_zeros_is_refused_at_once(make: Callable[[Path], Path], why: str,
                                                           target: Library, tiny_gemma: Engine,
                                                           tmp_path: Path) -> None:
    path = make(tmp_path)
    t0 = time.perf_counter()
    with pytest.raises(BundleRefusedError, match=why):
        import_bundle(target, path, tiny_gemma)
    assert time.perf_counter() - t0 < 5
    assert target.catalog.list_artifacts(include_unverified=True) == []


@pytest.mark.parametrize("compression", ["", "gz", "bz2", "xz"])
def test_every_kind_of_bundle_still_opens(compression: str, source: Library, target: Library,
                                          tiny_gemma: Engine, tmp_path: Path) -> None:
    plain = tmp_path / "plain.tar"
    export_bundle(source, plain)
    path = tmp_path / f"b.tar.{compression}" if compression else plain
    if compression:
        with tarfile.open(plain) as src, tarfile.open(path, f"w:{compression}") as dst:
            for m in src.getmembers():
                dst.addfile(m, src.extractfile(m))
    assert import_bundle(target, path, tiny_gemma, allow_unverified=True).imported == 3


@pytest.mark.parametrize("compression", ["xz", "gz"])
def test_a_compressed_bundle_with_a_huge_zero_padded_tail_never_hangs(
        compression: str, bundle: Path, target: Library, tiny_gemma: Engine, tmp_path: Path) -> None:
    import lzma

    path = tmp_path / f"padded.tar.{compression}"
    for data, ok in ((bundle.read_bytes(), True), (b"", False)):   # a whole bundle, then an empty stream
        path.write_bytes(lzma.compress(data) if compression == "xz" else gzip.compress(data))
        with open(path, "r+b") as fh:
            fh.truncate(path.stat().st_size + 20 * 2**30)   # 20 GiB of zeros ("stream padding"), no disk used
        t0 = time.perf_counter()
        if ok:   # the reader stops at the tar's end: the padding is never read
            assert import_bundle(target, path, tiny_gemma, allow_unverified=True).imported == 3
        else:    # the reader looks for the tar's first block in the padding
            with pytest.raises(BundleRefusedError, match="zero bytes in a row|no manifest|not a readable bundle"):
                import_bundle(target, path, tiny_gemma, allow_unverified=True)
        assert time.perf_counter() - t0 < 30
