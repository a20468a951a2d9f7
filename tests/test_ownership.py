"""One catalog per library (issue 23): another library's catalog is refused, a moved library keeps
working, and a catalog from before the record is adopted by the library that opens it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from flywheel import config
from flywheel.errors import CatalogOwnerError, LibraryError
from flywheel.library import Library
from flywheel.ownership import ID_FILE


def _owner(root: Path, db: Path | None = None) -> tuple[str, str]:
    with Library.open(root, f"sqlite:///{db}" if db else None) as lib, lib.catalog.db.connect() as conn:
        row = conn.execute(text("SELECT library_id, root FROM library")).one()
    return row[0], row[1]


def test_a_new_library_writes_one_id_to_its_folder_and_its_catalog(tmp_path: Path) -> None:
    library_id, root = _owner(tmp_path / "a")
    assert (tmp_path / "a" / ID_FILE).read_text().strip() == library_id and len(library_id) == 32
    assert root == str((tmp_path / "a").resolve())
    assert _owner(tmp_path / "a") == (library_id, root)          # opening again changes nothing
    assert _owner(tmp_path / "b")[0] != library_id                # another library, another id


def test_another_librarys_catalog_is_refused_and_nothing_is_made(tmp_path: Path) -> None:
    a_db = tmp_path / "a" / "catalog.db"
    _owner(tmp_path / "a")
    for b in (tmp_path / "b", tmp_path / "existing"):
        if b.name == "existing":
            _owner(b)                                             # a library of its own, with its own id
        before = sorted(p.name for p in b.iterdir()) if b.exists() else None
        for read_only in (False, True):
            if read_only and not b.exists():
                continue
            with pytest.raises(CatalogOwnerError) as err:
                Library.open(b, f"sqlite:///{a_db}", read_only=read_only)
            assert "belongs to another library" in err.value.message and str(tmp_path / "a") in err.value.message
            assert err.value.hint and "--db" in err.value.hint and err.value.exit_code == 2
        assert (sorted(p.name for p in b.iterdir()) if b.exists() else None) == before   # no id, no artifacts folder
    assert _owner(tmp_path / "a")[1] == str((tmp_path / "a").resolve())   # A's catalog is untouched


def test_a_library_moved_with_its_catalog_keeps_working_and_its_new_place_is_noted(tmp_path: Path) -> None:
    library_id, _ = _owner(tmp_path / "a")
    shutil.move(tmp_path / "a", tmp_path / "moved")
    assert _owner(tmp_path / "moved") == (library_id, str((tmp_path / "moved").resolve()))
    # an outside catalog (as on PostgreSQL) that moved separately still belongs to the moved folder
    outside = tmp_path / "catalogs" / "c.db"
    outside.parent.mkdir()
    library_id2, _ = _owner(tmp_path / "c", outside)
    shutil.move(tmp_path / "c", tmp_path / "c2")
    assert _owner(tmp_path / "c2", outside) == (library_id2, str((tmp_path / "c2").resolve()))


def test_a_lost_id_file_is_restored_from_the_catalog_inside_the_folder_only(tmp_path: Path) -> None:
    library_id, _ = _owner(tmp_path / "a")
    (tmp_path / "a" / ID_FILE).unlink()
    assert _owner(tmp_path / "a")[0] == library_id
    assert (tmp_path / "a" / ID_FILE).read_text().strip() == library_id
    (tmp_path / "a" / ID_FILE).write_text("not an id\n")
    with pytest.raises(LibraryError, match="does not hold a library id"):
        Library.open(tmp_path / "a")


def test_an_unclaimed_catalog_is_adopted_by_the_first_library_then_refused_to_others(tmp_path: Path) -> None:
    shared = tmp_path / "shared.db"
    with Library.open(tmp_path / "a", f"sqlite:///{shared}") as lib, lib.catalog.db.begin() as conn:
        conn.execute(text("DELETE FROM library"))                 # as a catalog from before 0009
    (tmp_path / "a" / ID_FILE).unlink()                           # and a folder from before it
    library_id, _ = _owner(tmp_path / "a", shared)
    assert (tmp_path / "a" / ID_FILE).read_text().strip() == library_id
    with pytest.raises(CatalogOwnerError):
        Library.open(tmp_path / "b", f"sqlite:///{shared}")


def test_read_only_opening_writes_no_claim(tmp_path: Path) -> None:
    root = tmp_path / "a"
    with Library.open(root) as lib, lib.catalog.db.begin() as conn:
        conn.execute(text("DELETE FROM library"))
    (root / ID_FILE).unlink()
    with Library.open(root, read_only=True) as lib:
        assert lib.catalog.get_problem("none") is None
    assert not (root / ID_FILE).exists()
    with Library.open(root) as lib, lib.catalog.db.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM library")).scalar() == 1
    assert config.database_url(root).endswith("catalog.db")


@pytest.mark.parametrize("kind", ["empty", "garbage", "folder", "device", "fifo"])
def test_a_damaged_id_file_is_one_error_never_a_hang(tmp_path: Path, kind: str) -> None:
    import os

    root = tmp_path / "a"
    _owner(root)
    path = root / ID_FILE
    path.unlink()
    if kind == "folder":
        path.mkdir()
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("" if kind == "empty" else "0123456789abcdef0123456789abcdef and more\n")
    for read_only in (True, False):
        with pytest.raises(LibraryError, match="library id|cannot read"):
            Library.open(root, read_only=read_only)
