"""Which library a catalog belongs to: one catalog per library, so another library's is refused.

A library folder holds its id in `library.id` (32 hex digits, written once when the library is
made); its catalog records the same id in the `library` table (migration 0009). Both move with
the folder, so a library moved (or copied) with its catalog opens as before, its catalog on
PostgreSQL too; `--db` naming another library's catalog is refused, since its rows would point at
artifacts that live in the other folder.

What `bind` does, for the id in the folder (or none) and the one in the catalog (or none):

- the same: nothing, except that the catalog's note of where the library lives is brought up to date;
- the catalog has none (a new one, or one from before 0009): the library adopts it, writing its
  id (making one first for a new folder);
- the folder has none but the catalog has one: the folder's id was lost if the catalog is the
  one inside the folder, or it names this folder as its library: the id is written back;
  otherwise it is another library's catalog, refused;
- two different ids: another library's catalog, refused.

Opened read-only, nothing is written: a mismatch is still refused, an unclaimed catalog is left so.
"""

from __future__ import annotations

import os
import re
import stat
import uuid
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from flywheel.catalog import Catalog
from flywheel.catalog.api import insert_ignore
from flywheel.catalog.models import LibraryRow, utcnow
from flywheel.errors import CatalogOwnerError, LibraryError
from flywheel.terminal import printable

#: The file in a library folder that names it.
ID_FILE = "library.id"
_ID = re.compile(r"[0-9a-f]{32}")


def folder_id(root: Path) -> str | None:
    """The id in `root`'s `library.id`, or None when the folder has none.

    Raises:
        LibraryError: the file is there but holds no id (damaged or replaced).
    """
    path = root / ID_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # a FIFO put there must not block the open
    except FileNotFoundError:
        return None
    except OSError as err:
        raise LibraryError(f"cannot read {printable(str(path), 160)}: {err.strerror or err}") from None
    try:
        # a regular file only, and its first bytes only: /dev/zero linked there must not hang
        raw = os.read(fd, 256) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError as err:
        raise LibraryError(f"cannot read {printable(str(path), 160)}: {err.strerror or err}") from None
    finally:
        os.close(fd)
    text = raw.decode("ascii", "replace").strip()
    if not _ID.fullmatch(text):
        raise LibraryError(f"{printable(str(path), 160)} does not hold a library id",
                           hint="restore it from a backup of the library, or delete it if the folder's "
                                "catalog is the one inside it (the id is then taken from the catalog)")
    return text


def write_folder_id(root: Path, library_id: str) -> str:
    """Write `library_id` to `root/library.id` unless one is already there; returns the id the folder holds."""
    path = root / ID_FILE
    root.mkdir(parents=True, exist_ok=True)
    staged = root / f".{ID_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    staged.write_text(library_id + "\n")
    try:
        fd = os.open(staged, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(staged, path)   # atomic, and never replaces: two processes making one library agree
        except FileExistsError:
            pass
    finally:
        staged.unlink(missing_ok=True)
    found = folder_id(root)
    assert found is not None
    return found


def catalog_owner(catalog: Catalog) -> LibraryRow | None:
    """The catalog's owner row, or None for a catalog no library has claimed yet."""
    with catalog.session() as s:
        row = s.scalars(select(LibraryRow).where(LibraryRow.id == 1)).first()
        if row is not None:
            s.expunge(row)
        return row


def _claim(catalog: Catalog, library_id: str, root: str) -> LibraryRow:
    with catalog.session() as s, s.begin():
        insert_ignore(s, LibraryRow, {"id": 1, "library_id": library_id, "root": root, "claimed_at": utcnow()})
    row = catalog_owner(catalog)
    assert row is not None
    return row


def _refuse(shown_db: str, root: Path, owner: LibraryRow) -> CatalogOwnerError:
    return CatalogOwnerError(
        f"the catalog {shown_db} belongs to another library (id {owner.library_id[:12]}, last opened at "
        f"{printable(owner.root, 160)}), not to the library at {printable(str(root), 160)}",
        hint="point --db (FLYWHEEL_DB) at this library's own catalog, or --library at the library that owns "
             "that catalog; a library keeps one catalog")


def bind(root: Path, catalog: Catalog, url: str, *, read_only: bool = False) -> None:
    """Check that `catalog` (opened from `url`) is the library at `root`'s, claiming it if unclaimed.

    Raises:
        CatalogOwnerError: the catalog belongs to another library.
        LibraryError: the folder's `library.id` is unreadable or damaged.
    """
    from flywheel.config import redact_url

    here = str(root.resolve())
    mine = folder_id(root)
    owner = catalog_owner(catalog)
    shown = printable(redact_url(make_url(url).render_as_string(hide_password=True)), 160)
    if owner is None:
        if read_only:
            return
        owner = _claim(catalog, mine or write_folder_id(root, uuid.uuid4().hex), here)
        mine = mine or folder_id(root)
    if mine is None:
        if not (_inside(url, root) or owner.root == here):
            raise _refuse(shown, root, owner)
        if read_only:
            return
        mine = write_folder_id(root, owner.library_id)
    if mine != owner.library_id:
        raise _refuse(shown, root, owner)
    if owner.root != here and not read_only:   # the library moved: keep the note of where it lives
        with catalog.session() as s, s.begin():
            s.execute(update(LibraryRow).where(LibraryRow.id == 1).values(root=here))


def _inside(url: str, root: Path) -> bool:
    """Whether `url` is the SQLite catalog inside the library folder (`root/catalog.db`)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return False
    if database.startswith("file:"):
        database = database[len("file:"):].split("?", 1)[0]
    try:
        return Path(database).resolve() == (root / "catalog.db").resolve()
    except (OSError, RuntimeError):
        return False
