"""Hostile and careless command lines: one `Error:` line plus a hint, early, never a traceback or a password."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flywheel.engine import Engine
from flywheel.library import Library
from flywheel.problemsets import Problem
from tests.cli.conftest import FLYWHEEL, Run
from tests.helpers import index_size

SECRET = "Hunter2-s3cret"


def clean_error(proc: subprocess.CompletedProcess[str], code: int | None = None) -> str:
    """Assert a one-paragraph `Error:` with no traceback; return stderr."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "\nError: " in "\n" + proc.stderr, proc.stderr  # after a progress label, if any
    paragraph = proc.stderr[proc.stderr.index("Error: "):]
    assert len(paragraph.strip().splitlines()) <= 2, proc.stderr  # the error and its hint
    assert proc.returncode == code if code is not None else proc.returncode != 0
    return paragraph


BAD_URLS = {
    "not a URL": "notaurl",
    "unsupported backend": f"mysql://root:{SECRET}@db.example/lib",
    "port not a number": f"postgresql+psycopg://u:{SECRET}@localhost:notaport/db",
    "port out of range": f"postgresql+psycopg://u:{SECRET}@localhost:99999/db",
    "password as a query key": f"postgresql+psycopg://u@localhost:notaport/db?password={SECRET}",
    "uninstalled driver": f"postgresql+asyncpg://u:{SECRET}@localhost/db",
    "a folder, not a file": "sqlite:////tmp",
}


@pytest.mark.parametrize("case", sorted(BAD_URLS))
@pytest.mark.parametrize("where", ["before", "after", "env"])
def test_bad_database_url_is_one_line_without_its_password(case: str, where: str, flywheel: Run,
                                                          tmp_path: Path) -> None:
    url = BAD_URLS[case]
    t0 = time.perf_counter()
    if where == "before":
        proc = flywheel("--db", url, "library", "ls")
    elif where == "after":
        proc = flywheel("library", "ls", "--db", url)
    else:
        proc = subprocess.run([FLYWHEEL, "library", "ls"], capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "FLYWHEEL_DB": url, "FLYWHEEL_LIBRARY": str(tmp_path / "lib")})
    err = clean_error(proc, 2)
    assert SECRET not in err + proc.stdout
    assert ("FLYWHEEL_DB" if where == "env" else "--db") in err
    assert time.perf_counter() - t0 < 10
    assert not (tmp_path / "lib").exists()  # nothing was created for a refused command


def test_unreachable_database_fails_fast_without_its_password(flywheel: Run, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()   # a library folder: inspecting a missing one is refused before connecting
    t0 = time.perf_counter()
    proc = flywheel("--db", f"postgresql+psycopg://flywheel:{SECRET}@127.0.0.1:1/catalog?password={SECRET}",
                    "library", "ls")
    err = clean_error(proc)
    assert SECRET not in err and "127.0.0.1" in err
    assert time.perf_counter() - t0 < 30


def test_global_options_are_accepted_after_the_subcommand(flywheel: Run, tmp_path: Path) -> None:
    proc = flywheel("verify-graft", "--model", str(tmp_path / "no-such-model"), "--samples", "1")
    assert "no-such-model" in clean_error(proc)
    other = tmp_path / "other-lib"
    assert str(other) in clean_error(flywheel("library", "ls", "--library", str(other), "--json"))
    assert not other.exists() and not (tmp_path / "lib").exists()   # inspecting never creates a library
    flywheel("deposit", "--library", str(other), "--problem", "What is 1+1?", "--solution", "1+1=2", "--answer", "2",
             "--reference", "2", check=True)
    assert len(json.loads(flywheel("library", "ls", "--library", str(other), "--json", check=True).stdout)) == 1
    assert (other / "catalog.db").is_file() and not (tmp_path / "lib").exists()


def test_export_refuses_a_missing_folder_and_an_existing_file_unless_forced(flywheel: Run, tmp_path: Path) -> None:
    assert "does not exist" in clean_error(flywheel("library", "export", str(tmp_path / "nope" / "b.tar")), 2)
    Library.open(tmp_path / "lib").close()   # an empty library (exporting never creates one)
    target = tmp_path / "b.tar"
    target.write_bytes(b"precious")
    assert "--force" in clean_error(flywheel("library", "export", str(target)), 2)
    assert target.read_bytes() == b"precious"
    flywheel("library", "export", str(target), "--force", check=True)
    assert target.read_bytes() != b"precious"


def test_import_of_a_non_bundle_is_one_line(flywheel: Run, tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"\x00\x01 not a tar at all" * 100)
    assert "nothing was imported" in clean_error(flywheel("library", "import", str(junk)), 2)


def test_library_path_that_is_a_file_is_refused_before_the_model_loads(flywheel: Run, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    proc = flywheel("--library", str(tmp_path / "afile" / "lib"), "--model", str(tmp_path / "no-model"),
                    "deposit", "--problem", "What is 1+1?", "--solution", "2", "--answer", "2")
    err = clean_error(proc, 2)
    assert "not writable" in err and "no-model" not in err


# --- read-only and unwritable libraries, as an unprivileged user --------------------------------


def _as_user(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `flywheel` as an unprivileged user (root ignores permissions) with `env`."""
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    e = {**{k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}, "HOME": str(home), **env}
    return subprocess.run([*prefix, FLYWHEEL, *args], env=e, cwd=home, capture_output=True, text=True, timeout=300)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged user can read (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="flywheel-ro-"))
    d.chmod(0o755)
    yield d
    for p in [d, *d.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def _read_only(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod((p.stat().st_mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
                & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
                | (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if p.is_dir() else 0))


def test_read_only_library_can_be_listed_verified_and_reported(shared_dir: Path, tiny_gemma: Engine) -> None:
    lib_root = shared_dir / "lib"
    with Library.open(lib_root) as lib:
        lib.deposit(tiny_gemma, Problem(id="ro-1", text="What is 3+4?", reference="7"), "3+4=7", "7")
    _read_only(lib_root)
    home = shared_dir
    listing = _as_user(["--library", str(lib_root), "library", "ls", "--json"], home)
    assert listing.returncode == 0, listing.stderr
    assert [r["problem_id"] for r in json.loads(listing.stdout)] == ["ro-1"]
    verify = _as_user(["library", "verify", "--library", str(lib_root)], home)
    assert verify.returncode == 0 and "0 bad" in verify.stdout, verify.stdout + verify.stderr
    report = _as_user(["--library", str(lib_root), "report", "--format", "json"], home)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    deposit = _as_user(["--library", str(lib_root), "deposit", "--problem", "What is 1+1?", "--solution", "2",
                        "--answer", "2"], home, FLYWHEEL_MODEL=str(shared_dir / "no-model"))
    err = clean_error(deposit, 2)
    assert "not writable" in err and "no-model" not in err  # refused before the model is loaded


# --- crash safety of the index -------------------------------------------------------------------


def test_verify_reports_an_index_entry_lost_to_a_crash_and_the_next_deposit_repairs_it(
        flywheel: Run, tmp_path: Path, tiny_gemma: Engine) -> None:
    with Library.open(tmp_path / "lib") as lib:
        lib.deposit(tiny_gemma, Problem(id="a", text="What is 2+2?", reference="4"), "2+2=4", "4")
        # What a kill -9 between the catalog commit and the index write leaves behind:
        lost = lib.deposit(tiny_gemma, Problem(id="b", text="What is 3+3?", reference="6"), "3+3=6", "6", index=False)
    proc = flywheel("library", "verify", "--json")
    assert proc.returncode == 1
    bad = json.loads(proc.stdout.strip().splitlines()[-1])["bad"]
    assert [(b["artifact"], b["problem"]) for b in bad] == [(lost.artifact_sha256, "b")]
    assert "index" in bad[0]["reason"]
    with Library.open(tmp_path / "lib") as lib:
        lib.deposit(tiny_gemma, Problem(id="c", text="What is 4+4?", reference="8"), "4+4=8", "8")
        assert lib.router.check(tiny_gemma.fingerprint.digest).ok
        assert index_size(lib.router, tiny_gemma.fingerprint.digest) == 3
    assert flywheel("library", "verify").returncode == 0


# --- deposits and the terminal -------------------------------------------------------------------


def test_control_characters_in_ids_and_text_are_escaped_on_print(flywheel: Run, tmp_path: Path,
                                                                 tiny_gemma: Engine) -> None:
    evil_id = "p\x1b]0;owned\x07\x1b[2J\rlegit"
    with Library.open(tmp_path / "lib") as lib:
        lib.deposit(tiny_gemma, Problem(id=evil_id, text="What is 5+\x1b[31m5?", reference="10"), "5+5=10", "10")
        lib.deposit(tiny_gemma, Problem(id="sky\x1b[1m", text="Name the colour of the sky."), "blue", "blue",
                    unverified=True)
    for args in (("library", "ls", "--all"), ("library", "verify")):
        proc = flywheel(*args)
        assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout and "\r" not in proc.stdout
    listing = flywheel("library", "ls", "--all", check=True).stdout
    assert "\\x1b]0;owned" in listing and "UNVERIFIED" in listing
    clash = flywheel("deposit", "--id", evil_id, "--problem", "What is 9+9?", "--solution", "18", "--answer", "18",
                     "--reference", "18")
    assert "\x1b" not in clash.stderr and "different text" in clean_error(clash)


def test_unverified_deposit_of_a_contradicted_answer_is_refused(flywheel: Run, tmp_path: Path) -> None:
    proc = flywheel("deposit", "--problem", "What is the capital of France?", "--solution", "Berlin.",
                    "--answer", "Berlin", "--reference", "Paris", "--unverified")
    assert "not_equivalent" in clean_error(proc, 1)
    assert json.loads(flywheel("library", "ls", "--all", "--json", check=True).stdout) == []
