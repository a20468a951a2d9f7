"""`flywheel report` run as a command against a real library directory."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from report_fixtures import RealCatalog

from flywheel.cli import main
from flywheel.report.output import PIPED_WIDTH


def _run(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--library", str(root), "report", *args])
    return result.exit_code, result.stdout, result.stderr


def test_report_formats_from_the_command_line(real_catalog: RealCatalog, tmp_path: Path) -> None:
    root = real_catalog.library.root
    code, out, _ = _run(root, "--format", "json", "--run", real_catalog.graft_run, "--context-window", "4096")
    assert code == 0
    data = json.loads(out)
    assert data["run_id"] == real_catalog.graft_run
    assert {r["run_id"] for r in data["problems"]} == {real_catalog.graft_run}
    assert any("4,096-token window" in line for line in data["summary"])
    code, out, _ = _run(root, "--format", "csv")
    assert code == 0 and len(list(csv.DictReader(io.StringIO(out)))) == 5   # one row per attempt
    code, out, _ = _run(root, "--format", "md")
    assert code == 0 and out.startswith("# kv-flywheel report")
    png = tmp_path / "savings.png"
    code, out, err = _run(root, "--plot", str(png))
    assert code == 0 and "times less (estimate from CPU seconds x watts" in out and "no baseline" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "plot written" in err
    code, out, _ = _run(root, "--attempts")
    assert code == 0 and "attempts" in out.split("energy per token")[1]   # the per-attempt table, last
    code, out, _ = _run(root, "--format", "md", "--attempts")
    assert code == 0 and "## Attempts" in out


def test_report_errors_are_clean_messages(real_catalog: RealCatalog, tmp_path: Path) -> None:
    code, _, err = _run(real_catalog.library.root, "--run", "no-such-run")
    assert code == 2 and "Error: no run 'no-such-run'" in err and "Traceback" not in err
    code, _, err = _run(tmp_path / "empty-library")
    assert code == 1 and "Error: no catalog at" in err
    assert not (tmp_path / "empty-library").exists()  # reporting never creates a catalog


def _table(root: Path, columns: str | None) -> list[str]:
    result = CliRunner().invoke(main, ["--library", str(root), "report"], env={"COLUMNS": columns})
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@pytest.mark.parametrize("columns", [40, 60, 80, 120])
def test_the_table_fits_the_width_it_is_given(real_catalog: RealCatalog, columns: int) -> None:
    lines = _table(real_catalog.library.root, str(columns))
    assert max(len(line) for line in lines) <= columns
    assert all(line == line.rstrip() for line in lines)  # no padding to the width: no ragged tails when piped
    text = "\n".join(lines)
    for pid in ("p-add", "p-mul"):  # cells are never folded across lines
        assert any(f"│ {pid} " in line for line in lines), pid
    assert not any("│ p-new " in line for line in lines)   # no baseline: named in the headline, not a row
    assert "no baseline: 1 grafted problem never measured without a graft (p-new)" in " ".join(text.split())
    if columns <= 60:
        caption = " ".join(text.split("runs (flywheel passes)")[0].split("p-mul")[-1].split())
        assert "not shown at" in caption and "energy_source" in caption and "--format csv or json" in caption


def test_piped_without_columns_the_table_is_a_fixed_width(real_catalog: RealCatalog) -> None:
    lines = _table(real_catalog.library.root, None)  # CliRunner's stdout is not a terminal
    assert PIPED_WIDTH - 20 < max(len(line) for line in lines) <= PIPED_WIDTH


def test_csv_and_json_ignore_the_width(real_catalog: RealCatalog) -> None:
    root = real_catalog.library.root
    for fmt in ("csv", "json"):
        narrow = CliRunner().invoke(main, ["--library", str(root), "report", "--format", fmt], env={"COLUMNS": "40"})
        wide = CliRunner().invoke(main, ["--library", str(root), "report", "--format", fmt], env={"COLUMNS": "300"})
        if fmt == "json":
            assert {k: v for k, v in json.loads(narrow.stdout).items() if k != "generated_at"} == \
                {k: v for k, v in json.loads(wide.stdout).items() if k != "generated_at"}
        else:
            assert narrow.stdout == wide.stdout and max(len(line) for line in narrow.stdout.splitlines()) > 40
