"""`flywheel run --problems PREFIX` with a bare source prefix lists what the source offers, before Prefect starts."""

from __future__ import annotations

from tests.cli.conftest import Run


def test_the_bare_gsm_symbolic_prefix_lists_its_splits_and_templates(flywheel: Run) -> None:
    proc = flywheel("run", "--problems", "gsm-symbolic:")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.startswith("Error:")
    # one line per listing row in the message; the CLI prints an error's message on one line (as for `gen:`)
    assert "train     75 templates: 0 1 3 4" in proc.stderr and "heldout   25 templates: 2 11 16" in proc.stderr
    assert "gsm-symbolic:?templates=train&n=2&seed=1" in proc.stderr


def test_an_unknown_source_prefix_is_named_with_the_sources_there_are(flywheel: Run) -> None:
    proc = flywheel("run", "--problems", "gsm8k:?n=2")
    assert proc.returncode == 2 and "no problem source is called 'gsm8k:'" in proc.stderr
    assert "gsm-symbolic:" in proc.stderr and "gen:" in proc.stderr
