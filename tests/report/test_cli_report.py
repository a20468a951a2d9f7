"""`flywheel report` run as a command against a real library directory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from click.testing import CliRunner
from report_fixtures import RealCatalog

from flywheel.cli import main


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--library", str(root), "report", *args])
    return result.exit_code, result.stdout, result.stderr


def test_report_formats_from_the_command_line(real_catalog: RealCatalog, tmp_path: Path) -> None:
    root = real_catalog.library.root
    code, out, _ = _run(root, "--format", "json", "--run", real_catalog.graft_run, "--context-window", "4096")
    assert code == 0
    data = json.loads(out)
    assert data["run_id"] == real_catalog.graft_run and {r["run_id"] for r in data["rows"]} == {real_catalog.graft_run}
    assert any("4,096-token window" in line for line in data["summary"])
    code, out, _ = _run(root, "--format", "csv")
    assert code == 0 and len(list(csv.DictReader(io.StringIO(out)))) == 3
    code, out, _ = _run(root, "--format", "md")
    assert code == 0 and out.startswith("# kv-flywheel report")
    png = tmp_path / "savings.png"
    code, out, err = _run(root, "--plot", str(png))
    assert code == 0 and "times less energy (source: estimate)" in out and "no baseline" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plot written" in err


def test_report_errors_are_clean_messages(real_catalog: RealCatalog, tmp_path: Path) -> None:
    code, _, err = _run(real_catalog.library.root, "--run", "no-such-run")
    assert code == 2 and "Error: no run 'no-such-run'" in err and "Traceback" not in err
    code, _, err = _run(tmp_path / "empty-library")
    assert code == 1 and "Error: no catalog at" in err
    assert not (tmp_path / "empty-library").exists()  # reporting never creates a catalog
