"""Artifact stores: content addressing, integrity on read, atomic and idempotent writes."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from flywheel.engine import Engine
from flywheel.errors import ArtifactError, ArtifactIntegrityError, InputError
from flywheel.store import ArtifactStore, FsspecStore, LocalStore, open_store

BLOB = b"\x00safetensors-ish header\x01" * 100


@pytest.fixture(params=["local", "fsspec-memory", "fsspec-file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactStore]:
    if request.param == "local":
        s: ArtifactStore = LocalStore(tmp_path / "artifacts")
    elif request.param == "fsspec-memory":
        s = FsspecStore(f"memory://{tmp_path.name}/artifacts")
    else:
        s = FsspecStore(f"file://{tmp_path}/artifacts")
    with s:
        yield s
    if request.param == "fsspec-memory":
        fsspec.filesystem("memory").rm(f"/{tmp_path.name}", recursive=True)


def _corrupt(store: ArtifactStore, sha: str, data: bytes) -> None:
    if isinstance(store, LocalStore):
        store.path_for(sha).write_bytes(data)
    else:
        assert isinstance(store, FsspecStore)
        store.fs.pipe_file(store.path_for(sha), data)


def test_put_returns_sha256_and_get_round_trips(store: ArtifactStore) -> None:
    sha = store.put(BLOB)
    assert sha == hashlib.sha256(BLOB).hexdigest()
    assert store.contains(sha)
    assert store.get(sha) == BLOB
    assert list(store.iter_ids()) == [sha]


def test_miss_returns_none(store: ArtifactStore) -> None:
    absent = "ab" + "0" * 62
    assert store.get(absent) is None
    assert not store.contains(absent)
    assert store.remove(absent) is False


def test_put_is_idempotent(store: ArtifactStore) -> None:
    first = store.put(BLOB)
    second = store.put(BLOB)
    assert first == second
    assert list(store.iter_ids()) == [first]


@pytest.mark.parametrize("damage", ["flipped", "truncated", "empty"])
def test_corrupt_bytes_raise_instead_of_returning(store: ArtifactStore, damage: str) -> None:
    sha = store.put(BLOB)
    bad = {"flipped": BLOB[:-1] + b"\xff", "truncated": BLOB[: len(BLOB) // 2], "empty": b""}[damage]
    _corrupt(store, sha, bad)
    with pytest.raises(ArtifactIntegrityError, match=sha[:12]):
        store.get(sha)


def test_put_repairs_a_truncated_file(store: ArtifactStore) -> None:
    sha = store.put(BLOB)
    _corrupt(store, sha, BLOB[:10])
    assert store.put(BLOB) == sha
    assert store.get(sha) == BLOB


def test_remove(store: ArtifactStore) -> None:
    sha = store.put(BLOB)
    assert store.remove(sha) is True
    assert store.get(sha) is None
    assert list(store.iter_ids()) == []


@pytest.mark.parametrize("bad_id", ["../../etc/passwd", "AB" * 32, "abc", "g" * 64, ""])
def test_ids_that_are_not_sha256_are_refused(store: ArtifactStore, bad_id: str) -> None:
    with pytest.raises(InputError):
        store.get(bad_id)


def test_local_layout_is_sharded_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "artifacts")
    shas = {store.put(f"artifact {i}".encode()) for i in range(20)}
    assert set(store.iter_ids()) == shas
    for sha in shas:
        assert store.path_for(sha) == tmp_path / "artifacts" / sha[:2] / sha
    leftovers = [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file() and p.name not in shas]
    assert leftovers == []


def test_local_failed_write_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalStore(tmp_path / "artifacts")

    def boom(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        store.put(BLOB)
    monkeypatch.undo()
    assert list(store.iter_ids()) == []
    assert [p for p in (tmp_path / "artifacts").rglob("*") if p.is_file()] == []


def test_open_store_picks_backend_by_location(tmp_path: Path) -> None:
    local = open_store(tmp_path)
    assert isinstance(local, LocalStore) and local.root == tmp_path / "artifacts"
    remote = open_store("memory://open-store-test/artifacts")
    assert isinstance(remote, FsspecStore)
    sha = remote.put(BLOB)
    assert FsspecStore("memory://open-store-test/artifacts").get(sha) == BLOB


def _tagged_name(data: bytes) -> str:
    """A format-aware namer: bytes carry their own name after a b'|' (like a self-naming artifact)."""
    head, sep, body = data.partition(b"|")
    if not sep or hashlib.sha256(body).hexdigest() != head.decode():
        raise ValueError("name does not match body")
    return head.decode()


@pytest.mark.parametrize("kind", ["local", "fsspec"])
def test_a_format_aware_namer_names_and_verifies(tmp_path: Path, kind: str) -> None:
    store: ArtifactStore = (LocalStore(tmp_path / "a", name_of=_tagged_name) if kind == "local"
                            else FsspecStore(f"file://{tmp_path}/b", name_of=_tagged_name))
    body = b"kv state"
    blob = hashlib.sha256(body).hexdigest().encode() + b"|" + body
    sha = store.put(blob)
    assert sha == hashlib.sha256(body).hexdigest() != hashlib.sha256(blob).hexdigest()
    assert store.get(sha) == blob
    _corrupt(store, sha, blob[:-1] + b"X")
    with pytest.raises(ArtifactIntegrityError, match="corrupt"):
        store.get(sha)


def test_unchecked_get_returns_raw_bytes_and_misses_as_none(store: ArtifactStore) -> None:
    sha = store.put(BLOB)
    assert store.get_unchecked(sha) == BLOB
    assert store.get_unchecked("f" * 64) is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "swap"])
def test_library_graft_path_hashes_once_and_still_refuses_damaged_artifacts(
        tmp_path: Path, tiny_gemma: Engine, damage: str) -> None:
    """`load_graft` reads unchecked bytes; `parse_artifact` must then refuse every kind of damage."""
    from flywheel.library import Library
    from flywheel.problemsets import Problem

    with Library.open(tmp_path / "lib") as lib:
        a = lib.deposit(tiny_gemma, Problem(id="p1", text="What is 2+3?", reference="5"), "2+3=5", "5")
        b = lib.deposit(tiny_gemma, Problem(id="p2", text="What is 2+4?", reference="6"), "2+4=6", "6")
        assert lib.load_graft(tiny_gemma, a.artifact_sha256).token_count == a.token_count
        path = lib.store.path_for(a.artifact_sha256)
        data = path.read_bytes()
        if damage == "flip":
            data = data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]
        elif damage == "truncate":
            data = data[: len(data) // 2]
        else:  # another valid artifact under this one's name
            data = lib.store.path_for(b.artifact_sha256).read_bytes()
        path.write_bytes(data)
        with pytest.raises(ArtifactError):
            lib.load_graft(tiny_gemma, a.artifact_sha256)
