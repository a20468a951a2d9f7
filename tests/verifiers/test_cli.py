"""`flywheel check`: the real console command and click's runner, with exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flywheel.cli.check import check


@pytest.mark.parametrize(("args", "code"), [
    ([r"\dfrac{9}{7}", "9/7"], 0),
    (["1-1/e", "1+1/e"], 1),
    (["9^9^9^9", "1"], 2),
    (["(0, 1]", "(0, 1)", "--mode", "interval"], 1),
    (["0.333", "1/3"], 1),
    (["0.333", "1/3", "--tolerance", "0.01"], 0),
    (["yes or no", "yes"], 1),
    (["yes and no", "yes"], 1),
    (["no idea", "no"], 1),
    (["12", "twelve"], 2),
    (["1/3", "0.333..."], 2),
])
def test_exit_codes(args: list[str], code: int) -> None:
    result = CliRunner().invoke(check, args)
    assert result.exit_code == code, result.output


def test_json_keys() -> None:
    result = CliRunner().invoke(check, ["x = 3", "3", "--json"])
    d = json.loads(result.output)
    assert {"status", "equivalent", "reason", "mode"} <= set(d)
    assert d["status"] == "equivalent" and d["equivalent"] is True and d["mode"] == "auto"


def test_help_shows_example() -> None:
    result = CliRunner().invoke(check, ["--help"])
    assert result.exit_code == 0 and "flywheel check" in result.output and "Exit status" in result.output


def test_bad_mode_is_a_usage_error() -> None:
    assert CliRunner().invoke(check, ["1", "1", "--mode", "banana"]).exit_code == 2


def test_real_console_command() -> None:
    exe = shutil.which("flywheel") or str(Path(sys.executable).parent / "flywheel")
    out = subprocess.run([exe, "check", "n=2,3,4", "n=1,2,3", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stderr
    assert json.loads(out.stdout)["status"] == "not_equivalent"


@pytest.mark.parametrize(("option", "value"), [
    ("--tolerance", "inf"), ("--tolerance", "1e300"), ("--tolerance", "2"), ("--tolerance", "nan"),
    ("--tolerance", "-0.5"), ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"), ("--timeout", "inf"),
])
def test_out_of_bounds_options_are_a_clear_usage_error(option: str, value: str) -> None:
    result = CliRunner().invoke(check, ["1", "1000000", option, value])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output and "Traceback" not in result.output
    assert "equivalent" not in result.output  # refused before any check ran
