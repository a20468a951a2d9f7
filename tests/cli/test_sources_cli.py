"""`flywheel run --problems PREFIX` with a bare source prefix lists what the source offers, before Prefect starts."""

from __future__ import annotations

from flywheel.cli import error_text
from flywheel.errors import InputError
from tests.cli.conftest import Run


def test_the_bare_gsm_symbolic_prefix_lists_its_splits_and_templates(flywheel: Run) -> None:
    proc = flywheel("run", "--problems", "gsm-symbolic:")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.startswith("Error:")
    lines = proc.stderr.splitlines()    # the listing a line per row, between the message and the hint
    assert lines[0].endswith("offers:") and "\\n" not in proc.stderr
    assert lines[1].startswith("  train     75 templates: 0 1 3 4") and lines[2].startswith("  heldout   25 templates: 2 11 16")
    assert lines[-1].startswith("  hint: e.g. gsm-symbolic:?templates=train&n=2&seed=1")


def test_an_unknown_source_prefix_is_named_with_the_sources_there_are(flywheel: Run) -> None:
    proc = flywheel("run", "--problems", "gsm8k:?n=2")
    assert proc.returncode == 2 and "no problem source is called 'gsm8k:'" in proc.stderr
    rows = proc.stderr.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["champ", "gen:", "gsm-symbolic:", "inbox:", "PATH"]


def test_an_error_prints_its_listing_a_row_a_line_and_still_escapes_newlines_in_its_message() -> None:
    err = InputError("bad id 'a\nError: forged'; the rows are:", listing=["  one", "  two \x1b[2J with secret"],
                     hint="pick one")
    assert error_text(err, ["secret"]).splitlines() == [
        "Error: bad id 'a\\nError: forged'; the rows are:", "  one", "  two \\x1b[2J with ***", "  hint: pick one"]
    assert str(err).splitlines()[-3:] == ["  one", "  two \x1b[2J with secret", "  hint: pick one"]
