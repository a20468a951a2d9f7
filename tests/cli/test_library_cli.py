"""`flywheel deposit` and `flywheel library ...` as a curator uses them."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import tarfile
import time
from pathlib import Path

from tests.cli.conftest import FLYWHEEL, Run


def _artifact_files(lib: Path) -> list[Path]:
    return sorted(p for p in (lib / "artifacts").rglob("*") if p.is_file() and not p.name.startswith("."))


def test_single_deposit_is_verified_stored_and_idempotent(flywheel: Run, tmp_path: Path) -> None:
    args = ("deposit", "--problem", "What is 2+3?", "--solution", "2+3=5", "--answer", "5", "--reference", "5", "--json")
    first = json.loads(flywheel(*args, check=True).stdout.strip().splitlines()[-1])
    again = json.loads(flywheel(*args, check=True).stdout.strip().splitlines()[-1])
    assert first["deposited"][0]["created"] is True and again["deposited"][0]["created"] is False
    assert first["deposited"][0]["artifact"] == again["deposited"][0]["artifact"]
    assert len(_artifact_files(tmp_path / "lib")) == 1
    listing = json.loads(flywheel("library", "ls", "--json", check=True).stdout)
    assert [r["artifact"] for r in listing] == [first["deposited"][0]["artifact"]]


def test_contradicted_answer_is_refused_with_the_reason(flywheel: Run, tmp_path: Path) -> None:
    proc = flywheel("deposit", "--problem", "What is 2+3?", "--solution", "2+3=6", "--answer", "6", "--reference", "5")
    assert proc.returncode == 1
    assert "not_equivalent" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "lib" / "artifacts").exists() or not _artifact_files(tmp_path / "lib")


def test_unverified_deposit_needs_the_flag_and_is_not_listed_by_default(flywheel: Run) -> None:
    base = ("deposit", "--problem", "Name the colour of the sky.", "--solution", "It is blue.", "--answer", "blue")
    refused = flywheel(*base)
    assert refused.returncode == 1
    flywheel(*base, "--unverified", check=True)
    assert json.loads(flywheel("library", "ls", "--json", check=True).stdout) == []
    assert len(json.loads(flywheel("library", "ls", "--all", "--json", check=True).stdout)) == 1


def test_batch_deposits_good_rows_and_reports_bad_ones_by_line(flywheel: Run, tmp_path: Path) -> None:
    f = tmp_path / "curated.jsonl"
    f.write_text("\n".join([
        json.dumps({"id": "a", "problem": "What is 1+1?", "solution": "1+1=2", "answer": "2", "reference": "2"}),
        "{not json",
        json.dumps({"id": "b", "problem": "What is 2+2?"}),
        json.dumps({"id": "c", "problem": "What is 2*3?", "solution": "2*3=6", "answer": "7", "reference": "6"}),
        json.dumps({"id": "d", "problem": "What is 3*3?", "solution": "3*3=9", "answer": "9", "reference": "9"}),
    ]) + "\n")
    proc = flywheel("deposit", "--file", str(f))
    assert proc.returncode == 1
    assert "refused line 2" in proc.stderr and "refused line 3" in proc.stderr and "refused line 4" in proc.stderr
    assert "2 deposited, 3 refused" in proc.stdout
    ids = sorted(r["problem_id"] for r in json.loads(flywheel("library", "ls", "--json", check=True).stdout))
    assert ids == ["a", "d"]


def test_csv_batch(flywheel: Run, tmp_path: Path) -> None:
    f = tmp_path / "curated.csv"
    f.write_text("id,problem,solution,answer,reference\nq1,What is 10-4?,10-4=6,6,6\n")
    flywheel("deposit", "--file", str(f), check=True)
    assert [r["problem_id"] for r in json.loads(flywheel("library", "ls", "--json", check=True).stdout)] == ["q1"]


def test_verify_names_corrupt_and_missing_artifacts(flywheel: Run, tmp_path: Path) -> None:
    for n in (1, 2):
        flywheel("deposit", "--problem", f"What is {n}+{n}?", "--solution", f"{n}+{n}={2 * n}", "--answer",
                 str(2 * n), "--reference", str(2 * n), "--id", f"p{n}", check=True)
    assert flywheel("library", "verify").returncode == 0
    files = _artifact_files(tmp_path / "lib")
    data = bytearray(files[0].read_bytes())
    data[-10] ^= 0xFF
    files[0].write_bytes(bytes(data))
    files[1].unlink()
    proc = flywheel("library", "verify", "--json")
    assert proc.returncode == 1
    reasons = sorted(b["reason"] for b in json.loads(proc.stdout.strip().splitlines()[-1])["bad"])
    assert any("file missing" in r for r in reasons) and any("hashes to" in r for r in reasons)


def test_graft_of_a_corrupt_file_is_refused_with_exit_3(flywheel: Run, tmp_path: Path) -> None:
    flywheel("deposit", "--problem", "What is 4+4?", "--solution", "4+4=8", "--answer", "8", "--reference", "8", check=True)
    path = _artifact_files(tmp_path / "lib")[0]
    ok = flywheel("graft", str(path), "--prompt", " What is 4+4?\nFinal answer:", "--max-new", "3", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout.strip().splitlines()[-1])["decode_tokens"] >= 1
    truncated = tmp_path / "cut.kv"
    truncated.write_bytes(path.read_bytes()[:-1000])
    proc = flywheel("graft", str(truncated), "--prompt", " x")
    assert proc.returncode == 3 and "truncated" in proc.stderr and "Traceback" not in proc.stderr


def test_export_import_round_trip_is_byte_identical(flywheel: Run, tmp_path: Path) -> None:
    flywheel("deposit", "--problem", "What is 5+5?", "--solution", "5+5=10", "--answer", "10", "--reference", "10", check=True)
    bundle = tmp_path / "b.tar"
    flywheel("library", "export", str(bundle), check=True)
    other = tmp_path / "other"
    flywheel("library", "import", str(bundle), library=other, check=True)
    a, b = _artifact_files(tmp_path / "lib"), _artifact_files(other)
    assert [p.name for p in a] == [p.name for p in b] and a[0].read_bytes() == b[0].read_bytes()
    assert flywheel("library", "verify", library=other).returncode == 0


def test_exported_solutions_rebuild_the_same_artifacts_in_another_library(flywheel: Run, tmp_path: Path) -> None:
    rows = [{"id": "sum-5", "problem": "What is 5+5?", "solution": "5+5=10", "answer": "10", "reference": "10"},
            {"id": "gr\u00f6\u00dfe", "problem": "Wie viel ist 3\u00b73?\nRechne.", "solution": "3\u00b73 = 9\nalso 9",
             "answer": "9", "reference": "9"}]
    curated = tmp_path / "curated.jsonl"
    curated.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    flywheel("deposit", "--file", str(curated), check=True)
    flywheel("deposit", "--problem", "Name the colour of the sky.", "--solution", "It is blue.", "--answer", "blue",
             "--unverified", check=True)
    table = tmp_path / "solutions.jsonl"
    out = flywheel("library", "export", "--solutions", str(table), check=True)
    assert "exported 2 verified solutions" in out.stdout
    written = [json.loads(line) for line in table.read_text(encoding="utf-8").splitlines()]
    assert [(w["id"], w["problem"], w["solution"], w["answer"], w["reference"]) for w in written] == \
        [(r["id"], r["problem"], r["solution"], r["answer"], r["reference"]) for r in rows]   # unverified left out
    other = tmp_path / "other"
    flywheel("deposit", "--file", str(table), library=other, check=True)
    a, b = _artifact_files(tmp_path / "lib"), _artifact_files(other)
    verified = {r["artifact"] for r in json.loads(flywheel("library", "ls", "--json", check=True).stdout)}
    assert {p.name.split(".")[0] for p in b} == verified and len(verified) == 2
    assert all(p.read_bytes() == next(q for q in a if q.name == p.name).read_bytes() for p in b)


def test_solutions_export_refuses_a_name_deposit_cannot_read_and_an_existing_file(flywheel: Run, tmp_path: Path) -> None:
    flywheel("deposit", "--problem", "What is 4+4?", "--solution", "4+4=8", "--answer", "8", "--reference", "8", check=True)
    proc = flywheel("library", "export", "--solutions", str(tmp_path / "solutions.csv"))
    assert proc.returncode == 2 and ".jsonl" in proc.stderr and not (tmp_path / "solutions.csv").exists()
    table = tmp_path / "s.jsonl"
    table.write_text("keep me\n")
    proc = flywheel("library", "export", "--solutions", str(table))
    assert proc.returncode == 2 and "--force" in proc.stderr and table.read_text() == "keep me\n"
    flywheel("library", "export", "--solutions", "--force", str(table), check=True)
    assert json.loads(table.read_text())["answer"] == "8"


def test_import_refuses_path_traversal_and_unknown_files(flywheel: Run, tmp_path: Path) -> None:
    flywheel("deposit", "--problem", "What is 6+6?", "--solution", "6+6=12", "--answer", "12", "--reference", "12", check=True)
    bundle = tmp_path / "b.tar"
    flywheel("library", "export", str(bundle), check=True)
    evil = tmp_path / "evil.tar"
    with tarfile.open(bundle) as src, tarfile.open(evil, "w") as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m))
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 3
        dst.addfile(info, io.BytesIO(b"bad"))
    other = tmp_path / "other"
    proc = flywheel("library", "import", str(evil), library=other)
    assert proc.returncode == 2 and "unsafe path" in proc.stderr
    assert not (tmp_path.parent / "escaped.txt").exists() and not _artifact_files(other) if (other / "artifacts").exists() else True


def test_import_refuses_a_tampered_artifact(flywheel: Run, tmp_path: Path) -> None:
    flywheel("deposit", "--problem", "What is 7+7?", "--solution", "7+7=14", "--answer", "14", "--reference", "14", check=True)
    bundle, bad = tmp_path / "b.tar", tmp_path / "bad.tar"
    flywheel("library", "export", str(bundle), check=True)
    with tarfile.open(bundle) as src, tarfile.open(bad, "w") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read()  # type: ignore[union-attr]
            if m.name.endswith(".kv"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            dst.addfile(m, io.BytesIO(data))
    proc = flywheel("library", "import", str(bad), library=tmp_path / "other")
    assert proc.returncode == 2 and "integrity" in proc.stderr and "nothing was imported" in proc.stderr
    assert not _artifact_files(tmp_path / "other")


def test_killed_batch_leaves_no_row_without_its_file_and_resumes_cleanly(flywheel: Run, tmp_path: Path,
                                                                       tiny_dirs: dict[str, Path]) -> None:
    import os

    rows = [{"id": f"k{i}", "problem": f"What is {i}+{i}?", "solution": f"{i}+{i}={2 * i}", "answer": str(2 * i),
             "reference": str(2 * i)} for i in range(1, 41)]
    f = tmp_path / "batch.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lib = tmp_path / "lib"
    env = {**os.environ, "FLYWHEEL_LIBRARY": str(lib), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    proc = subprocess.Popen([FLYWHEEL, "deposit", "--file", str(f)], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(_artifact_files(lib)) < 5 if (lib / "artifacts").exists() else time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    db = sqlite3.connect(lib / "catalog.db")
    catalogued = {r[0] for r in db.execute("SELECT sha256 FROM artifacts")}
    db.close()
    on_disk = {p.name.split(".")[0] for p in _artifact_files(lib)}
    assert catalogued, "the batch was killed before any deposit finished; the test proves nothing"
    assert len(catalogued) < len(rows), "the batch finished before it was killed; the test proves nothing"
    assert catalogued <= on_disk  # no row without its file
    flywheel("deposit", "--file", str(f), check=True)
    db = sqlite3.connect(lib / "catalog.db")
    (n_rows,) = db.execute("SELECT count(*) FROM artifacts").fetchone()
    (n_solutions,) = db.execute("SELECT count(*) FROM solutions").fetchone()
    db.close()
    assert n_rows == n_solutions == len(rows)
    assert flywheel("library", "verify").returncode == 0


def test_verify_only_notes_a_killed_imports_staging_folder(flywheel: Run, tmp_path: Path) -> None:
    done = subprocess.Popen(["true"])
    done.wait()                                                   # its pid now names no process
    flywheel("deposit", "--problem", "What is 8+8?", "--solution", "8+8=16", "--answer", "16", "--reference", "16",
             check=True)
    stale = tmp_path / "lib" / f".import-{done.pid}-k1ll3d"
    stale.mkdir()
    (stale / "half.kv").write_bytes(b"half an artifact")
    proc = flywheel("library", "verify")
    assert proc.returncode == 0 and "1 artifacts checked, 0 bad" in proc.stdout
    assert f"note: {stale.name} is the staging folder of an interrupted import" in proc.stderr
