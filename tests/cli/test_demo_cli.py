"""`flywheel demo` (what `make run` runs) end to end on the tiny model: two passes, deposits, report."""

from __future__ import annotations

import json
from pathlib import Path

from flows import runtime
from flywheel import config
from tests.cli.conftest import Run


def test_demo_runs_two_passes_and_grafts_the_recurring_problems(flywheel: Run, tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    proc = flywheel("demo", "--workdir", str(workdir), "--champ", "2", "--families", "1", "--attempts", "2",
                    "--budget", "6", "--json", check=True, timeout=900)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["curated"]) == 2 and len(out["curated_ids"]) == 2 and len(out["siblings"]) == 10
    first = {r["problem_id"]: r for r in out["pass1"]["results"]}
    second = {r["problem_id"]: r for r in out["pass2"]["results"]}
    assert set(first) == set(second) and len(first) == 12
    assert {first[pid]["route"] for pid in out["curated_ids"]} == {"none"}   # no CHAMP knowledge in pass 1
    assert all(r["attempts"] == 2 for r in first.values() if not r["verified"])
    assert out["self_deposited_ids"] == sorted(pid for pid, r in first.items() if r["verified"])
    for pid in out["curated_ids"]:                                     # the curated ones recur exactly
        assert second[pid]["route"] == "exact" and second[pid]["grafted_artifact"] in out["curated"]
        assert second[pid]["restored_tokens"] > 0
    assert "deposited by the model itself in pass 1" in proc.stderr and "recurring CHAMP problems" in proc.stderr
    champ_tokens = (sum(first[pid]["decode_tokens"] for pid in out["curated_ids"]),
                    sum(second[pid]["decode_tokens"] for pid in out["curated_ids"]))
    assert f"answered from exact grafts; decode tokens {champ_tokens[0]:,} -> {champ_tokens[1]:,}" in proc.stderr
    # the fresh generated problems again, without any graft: same problems, no route, nothing deposited
    bare = {r["problem_id"]: r for r in out["nograft"]["results"]}
    assert set(bare) == set(first) - set(out["curated_ids"]) and {r["route"] for r in bare.values()} == {"none"}
    assert out["nograft"]["totals"]["problems"] == 10
    lib = runtime.library(str(workdir / "library"), config.database_url(workdir / "library"))
    assert len(lib.catalog.list_artifacts()) == 10 + len(out["self_deposits"]) + 2   # siblings, own, curated only
    runtime.close_libraries()
    with_ = sum(first[pid]["verified"] for pid in bare)
    assert (f"{with_}/10 verified with the library's grafts (pass 1) vs "
            f"{sum(r['verified'] for r in bare.values())}/10 without any graft") in proc.stderr
    report = flywheel("--library", str(workdir / "library"), "report", "--format", "json", check=True)
    runs = json.loads(report.stdout)["runs"]
    assert {r["run_id"] for r in runs} == {out["pass1"]["run_id"], out["nograft"]["run_id"], out["pass2"]["run_id"]}


def test_demo_stream_names_a_folder_without_slices_in_one_line(flywheel: Run, tmp_path: Path) -> None:
    for folder, said in ((tmp_path / "nowhere", "is not a folder"), (tmp_path, "holds no .jsonl slice")):
        proc = flywheel("demo", "--stream", str(folder), "--workdir", str(tmp_path / "w"))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and said in proc.stderr, proc.stderr
        assert "starting Prefect" not in proc.stderr   # refused before anything started
